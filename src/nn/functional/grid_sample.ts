/**
 * `affineGrid` and `gridSample`, as `torch.nn.functional.affine_grid` and
 * `grid_sample` of PyTorch 1.13 (2-D and 3-D; bicubic 2-D only).
 *
 * Composed from existing ops, so they run and differentiate on every
 * backend: `affineGrid` is one `matmul` of a host-built base grid with the
 * transposed matrices; `gridSample` reads each corner (tap) of a sample
 * with `gather` on the flattened input, so the input gradient is `gather`'s
 * scatter-add, and the grid gradient comes from the weights, which are
 * written as PyTorch's kernels write them (a border or the reflection
 * points count as outside for the gradient, as PyTorch's
 * `clip_coordinates_set_grad`).
 * @module
 */

import { tensor, zeros } from "../../ops/factory.ts";
import { cat } from "../../ops/view.ts";
import { where } from "../../ops/indexing.ts";
import { formatShape } from "../../shape.ts";
import { forwardScope } from "../../storage.ts";
import type { Tensor } from "../../tensor.ts";
import { checkFloatInput, sameDevice } from "../util.ts";

/** Options of {@link affineGrid}. */
export interface AffineGridOptions {
  /**
   * True: -1 and 1 are the centres of the corner pixels; false (default,
   * as PyTorch since 1.3): the outer edges of the corner pixels.
   */
  alignCorners?: boolean | null;
}

/**
 * The sampling grid of a batch of affine transforms, as
 * `torch.nn.functional.affine_grid`: `theta` [N, 2, 3] with `size`
 * [N, C, H, W] gives [N, H, W, 2]; `theta` [N, 3, 4] with `size`
 * [N, C, D, H, W] gives [N, D, H, W, 3]. Each point holds theta · (x, y,
 * [z,] 1) of its normalized coordinates in [-1, 1].
 */
export function affineGrid(
  theta: Tensor,
  size: readonly number[],
  options: AffineGridOptions = {},
): Tensor {
  // Intermediates go with the graph at backward, not with the GC.
  return forwardScope(() => affineGridUnscoped(theta, size, options));
}

function affineGridUnscoped(
  theta: Tensor,
  size: readonly number[],
  options: AffineGridOptions,
): Tensor {
  const op = "affineGrid";
  checkFloatInput(op, theta, "theta");
  if (!Array.isArray(size) || !size.every((s) => Number.isInteger(s))) {
    throw new TypeError(`${op}: size must be an array of integers, got ${JSON.stringify(size)}`);
  }
  if (size.length !== 4 && size.length !== 5) {
    throw new RangeError(
      `${op}: only 4-D [N, C, H, W] and 5-D [N, C, D, H, W] sizes are supported, got ${
        JSON.stringify(size)
      }`,
    );
  }
  const k = size.length - 2;
  const want = [size[0], k, k + 1];
  if (theta.ndim !== 3 || theta.shape[1] !== k || theta.shape[2] !== k + 1) {
    throw new RangeError(
      `${op}: expected a batch of ${k}-D affine matrices of shape [N, ${k}, ${k + 1}] for size ${
        JSON.stringify(size)
      }, got theta of shape ${formatShape(theta.shape)}`,
    );
  }
  if (size.some((s) => s <= 0)) {
    throw new RangeError(`${op}: expected a positive output size, got ${JSON.stringify(size)}`);
  }
  if (theta.shape[0] !== size[0]) {
    throw new RangeError(
      `${op}: theta of shape ${formatShape(theta.shape)} has ${theta.shape[0]} matrices but size ${
        JSON.stringify(size)
      } asks for a batch of ${size[0]} (expected ${formatShape(want)})`,
    );
  }
  const alignCorners = options.alignCorners ?? false;
  const spatial = size.slice(2);
  const points = spatial.reduce((a, b) => a * b, 1);
  // Row p: (x, y, [z,] 1) of point p, x along the last spatial dim.
  const axes = spatial.map((n) => steps(n, alignCorners, theta.dtype));
  const base = new Array<number>(points * (k + 1));
  for (let p = 0; p < points; p++) {
    let rest = p;
    for (let s = k - 1; s >= 0; s--) {
      const n = spatial[s];
      base[p * (k + 1) + (k - 1 - s)] = axes[s][rest % n];
      rest = Math.floor(rest / n);
    }
    base[p * (k + 1) + k] = 1;
  }
  const baseGrid = tensor(base, {
    shape: [points, k + 1],
    dtype: theta.dtype,
    device: theta.device,
  });
  return baseGrid.matmul(theta.transpose(1, 2)).reshape([size[0], ...spatial, k]);
}

/**
 * PyTorch's `linspace_from_neg_one`: n points from -1 to 1 (0 alone for
 * n = 1), scaled by (n - 1) / n without corner alignment, in the dtype's
 * precision.
 */
function steps(n: number, alignCorners: boolean, dtype: string): number[] {
  if (n <= 1) return [0];
  const round = dtype === "float32" ? Math.fround : (v: number) => v;
  const step = round(2 / (n - 1));
  const half = Math.floor(n / 2);
  return Array.from({ length: n }, (_, i) => {
    const v = round(i < half ? -1 + step * i : 1 - step * (n - 1 - i));
    return alignCorners ? v : round(round(v * (n - 1)) / n);
  });
}

/** How {@link gridSample} computes an output element. */
export type GridSampleMode = "bilinear" | "nearest" | "bicubic";

/** What {@link gridSample} reads outside the input. */
export type GridSamplePadding = "zeros" | "border" | "reflection";

/** Options of {@link gridSample}. */
export interface GridSampleOptions {
  /**
   * `"bilinear"` (default), `"nearest"` (halves round to even in 2-D, away
   * from zero in 3-D, as PyTorch 1.13's CPU kernels) or `"bicubic"` (4-D only).
   */
  mode?: GridSampleMode;
  /**
   * `"zeros"` (default): outside reads 0; `"border"`: the nearest border
   * element; `"reflection"`: the input mirrored at its borders.
   */
  paddingMode?: GridSamplePadding;
  /**
   * True: -1 and 1 are the centres of the corner pixels; false (default):
   * their outer edges.
   */
  alignCorners?: boolean | null;
}

const MODES: readonly GridSampleMode[] = ["bilinear", "nearest", "bicubic"];
const PADDINGS: readonly GridSamplePadding[] = ["zeros", "border", "reflection"];

/**
 * Samples `input` [N, C, H, W] (or [N, C, D, H, W]) at the normalized
 * positions of `grid` [N, Ho, Wo, 2] (or [N, Do, Ho, Wo, 3]; (x, y[, z]),
 * x along the last dim, -1 and 1 the input's ends), as
 * `torch.nn.functional.grid_sample` of PyTorch 1.13: output [N, C, Ho, Wo]
 * (or [N, C, Do, Ho, Wo]), differentiable in both `input` and `grid`.
 */
export function gridSample(
  input: Tensor,
  grid: Tensor,
  options: GridSampleOptions = {},
): Tensor {
  // Intermediates go with the graph at backward, not with the GC.
  return forwardScope(() => gridSampleUnscoped(input, grid, options));
}

function gridSampleUnscoped(input: Tensor, grid: Tensor, options: GridSampleOptions): Tensor {
  const op = "gridSample";
  checkFloatInput(op, input);
  checkFloatInput(op, grid, "grid");
  const mode = options.mode ?? "bilinear";
  const padding = options.paddingMode ?? "zeros";
  const alignCorners = options.alignCorners ?? false;
  if (!MODES.includes(mode)) {
    throw new RangeError(
      `${op}: mode must be "bilinear", "nearest" or "bicubic", got ${JSON.stringify(mode)}`,
    );
  }
  if (!PADDINGS.includes(padding)) {
    throw new RangeError(
      `${op}: paddingMode must be "zeros", "border" or "reflection", got ${
        JSON.stringify(padding)
      }`,
    );
  }
  if (input.ndim !== 4 && input.ndim !== 5) {
    throw new RangeError(
      `${op}: expected a 4-D [N, C, H, W] or 5-D [N, C, D, H, W] input, got shape ${
        formatShape(input.shape)
      }`,
    );
  }
  const k = input.ndim - 2;
  if (grid.ndim !== input.ndim || grid.shape[grid.ndim - 1] !== k) {
    throw new RangeError(
      `${op}: an input of shape ${formatShape(input.shape)} needs a ${input.ndim}-D grid [N, ${
        k === 2 ? "Ho, Wo" : "Do, Ho, Wo"
      }, ${k}], got grid of shape ${formatShape(grid.shape)}`,
    );
  }
  if (grid.shape[0] !== input.shape[0]) {
    throw new RangeError(
      `${op}: input of shape ${formatShape(input.shape)} and grid of shape ${
        formatShape(grid.shape)
      } differ in batch size`,
    );
  }
  if (grid.dtype !== input.dtype) {
    throw new TypeError(
      `${op}: input (${input.dtype}) and grid (${grid.dtype}) must have the same dtype`,
    );
  }
  if (mode === "bicubic" && k !== 2) {
    throw new RangeError(
      `${op}: mode "bicubic" needs a 4-D input, got shape ${formatShape(input.shape)}`,
    );
  }
  sameDevice(op, { input, grid });
  const sizes = input.shape.slice(2);
  if (sizes.some((s) => s < 1) || input.shape[1] < 1) {
    throw new RangeError(
      `${op}: input of shape ${
        formatShape(input.shape)
      } is empty; it needs channels and non-empty spatial dims`,
    );
  }
  const [n, c] = input.shape;
  const outSpatial = grid.shape.slice(1, -1);
  const q = outSpatial.reduce((a, b) => a * b, 1);
  const points = sizes.reduce((a, b) => a * b, 1);
  const flat = input.reshape([n, c, points]);
  const g = grid.reshape([n, q, k]);
  // Source coordinate per spatial dim, [N, Q]: grid entry k - 1 - s is dim s.
  const coords = sizes.map((size, s) => unnormalize(g.select(2, k - 1 - s), size, alignCorners));
  const strides = sizes.map((_, s) => sizes.slice(s + 1).reduce((a, b) => a * b, 1));
  let withZero: Tensor | null = null;
  const withZeroRow = () =>
    withZero ??= cat([flat, zeros([n, c, 1], { dtype: input.dtype, device: input.device })], 2);

  // The input at integer positions (one [N, Q] tensor per dim), 0 outside.
  const read = (at: Tensor[]): Tensor => {
    let linear: Tensor | null = null;
    let inside: Tensor | null = null;
    for (const [s, i] of at.entries()) {
      const size = sizes[s];
      // A NaN position (from a NaN grid) reads element 0, masked or weighted by NaN.
      const clamped = where(i.isnan(), 0, i.clamp(0, size - 1)).mul(strides[s]);
      linear = linear ? linear.add(clamped) : clamped;
      if (padding === "zeros" || mode === "bilinear") {
        const ok = i.ge(0).to(input.dtype).mul(i.le(size - 1).to(input.dtype));
        inside = inside ? inside.mul(ok) : ok;
      }
    }
    // An outside read gathers the zero appended to each row: one [N, Q]
    // select instead of a masking pass (and its backward) over [N, C, Q].
    const target = inside ? where(inside.gt(0), linear!, points) : linear!;
    const index = target.to("int32").reshape([n, 1, q]).expand([n, c, q]);
    return (inside ? withZeroRow() : flat).gather(2, index);
  };

  let out: Tensor;
  if (mode === "bicubic") {
    const [y, x] = coords;
    const [y0, x0] = [y.detach().floor(), x.detach().floor()];
    const wy = cubicWeights(y.sub(y0));
    const wx = cubicWeights(x.sub(x0));
    // A tap's position pads without a gradient (PyTorch's get_value_bounded).
    const taps = (c0: Tensor, size: number) =>
      [0, 1, 2, 3].map((t) => pad(c0.add(t - 1), size, padding, alignCorners).detach());
    const [ty, tx] = [taps(y0, sizes[0]), taps(x0, sizes[1])];
    let sum: Tensor | null = null;
    for (let j = 0; j < 4; j++) {
      let row: Tensor | null = null;
      for (let i = 0; i < 4; i++) {
        const term = read([ty[j], tx[i]]).mul(wx[i].reshape([n, 1, q]));
        row = row ? row.add(term) : term;
      }
      const term = row!.mul(wy[j].reshape([n, 1, q]));
      sum = sum ? sum.add(term) : term;
    }
    out = sum!;
  } else {
    const padded = coords.map((x, s) => pad(x, sizes[s], padding, alignCorners));
    if (mode === "nearest") {
      // PyTorch's nearest grid gradient is zero, not absent.
      out = read(padded.map((x) => nearest(x.detach(), k))).add(
        zeroOf(padded[0]).reshape([n, 1, q]),
      );
    } else {
      const lower = padded.map((x) => x.detach().floor());
      let sum: Tensor | null = null;
      // Corner m takes the upper neighbour in dim s where bit k - 1 - s is set
      // (x fastest, as PyTorch's nw, ne, sw, se order).
      for (let m = 0; m < 2 ** k; m++) {
        const upper = sizes.map((_, s) => ((m >> (k - 1 - s)) & 1) === 1);
        const at = lower.map((l, s) => (upper[s] ? l.add(1) : l));
        // Weight: the product of 1 - distance per dim, x first as PyTorch.
        let weight: Tensor | null = null;
        for (let s = k - 1; s >= 0; s--) {
          const w = upper[s] ? padded[s].sub(lower[s]) : lower[s].add(1).sub(padded[s]);
          weight = weight ? weight.mul(w) : w;
        }
        const term = read(at).mul(weight!.reshape([n, 1, q]));
        sum = sum ? sum.add(term) : term;
      }
      out = sum!;
    }
  }
  return out.reshape([n, c, ...outSpatial]);
}

/**
 * The nearest whole position: halves to even in 2-D (PyTorch 1.13's
 * `nearbyint`), away from zero in 3-D (its 3-D CPU kernel's `std::round`).
 */
function nearest(x: Tensor, k: number): Tensor {
  if (k === 2) return x.round();
  const whole = x.trunc();
  return where(x.sub(whole).abs().eq(0.5), whole.add(x.sign()), x.round());
}

/** PyTorch's `grid_sampler_unnormalize`: [-1, 1] to pixel positions. */
function unnormalize(x: Tensor, size: number, alignCorners: boolean): Tensor {
  return alignCorners ? x.add(1).div(2).mul(size - 1) : x.add(1).mul(size).sub(1).div(2);
}

/** 0 with a zero gradient (0 · x would be NaN at an infinite x). */
function zeroOf(x: Tensor): Tensor {
  return where(x.lt(-Infinity), x, 0);
}

/**
 * PyTorch's `clip_coordinates_set_grad`: clamps to [0, size - 1], the
 * borders themselves counted outside for the gradient.
 */
function clip(x: Tensor, size: number): Tensor {
  // NaN goes to 0, as PyTorch's vectorized 2-D kernel's max(NaN, 0).
  return where(x.gt(0), where(x.lt(size - 1), x, zeroOf(x).add(size - 1)), zeroOf(x));
}

/**
 * PyTorch's `reflect_coordinates_set_grad`: mirrors x into [low, high]
 * (the corner centres with alignCorners, else the outer edges).
 */
function reflect(x: Tensor, size: number, alignCorners: boolean): Tensor {
  const [twiceLow, twiceHigh] = alignCorners ? [0, 2 * (size - 1)] : [-1, 2 * size - 1];
  if (twiceLow === twiceHigh) return zeroOf(x);
  const min = twiceLow / 2;
  const span = (twiceHigh - twiceLow) / 2;
  const shifted = x.sub(min);
  const magnitude = where(shifted.lt(0), shifted.neg(), shifted);
  const flips = magnitude.detach().div(span).floor();
  const extra = magnitude.sub(flips.mul(span));
  const even = flips.div(2).floor().mul(2).eq(flips);
  return where(even, extra.add(min), extra.neg().add(span + min));
}

/** PyTorch's `compute_coordinates`: the padding mode applied to a source position. */
function pad(x: Tensor, size: number, padding: GridSamplePadding, alignCorners: boolean): Tensor {
  if (padding === "border") return clip(x, size);
  if (padding === "reflection") return clip(reflect(x, size, alignCorners), size);
  return x;
}

/** PyTorch's cubic convolution constant. */
const A = -0.75;

/** The cubic weights of the taps at -1, 0, 1, 2 for fractional parts `t`, as PyTorch. */
function cubicWeights(t: Tensor): Tensor[] {
  const near = (x: Tensor) => x.mul(A + 2).sub(A + 3).mul(x).mul(x).add(1);
  const far = (x: Tensor) => x.mul(A).sub(5 * A).mul(x).add(8 * A).mul(x).sub(4 * A);
  const rest = t.neg().add(1);
  return [far(t.add(1)), near(t), near(rest), far(rest.add(1))];
}
