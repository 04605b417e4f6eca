/**
 * `torch.nn.functional`'s `rrelu`, `feature_alpha_dropout`, `pdist` and the
 * deprecated `upsample`, `upsample_nearest` and `upsample_bilinear`. The
 * random draws come from the seeded `rand` stream on the input's device.
 * @module
 */

import { noGrad, record } from "../../autograd.ts";
import { rand, tensor } from "../../ops/factory.ts";
import { where } from "../../ops/indexing.ts";
import { formatShape } from "../../shape.ts";
import { forwardScope, tidy } from "../../storage.ts";
import type { Tensor } from "../../tensor.ts";
import { checkDropout, checkFinite, checkFloatInput, dropoutWithOptions } from "../util.ts";
import { interpolate, type InterpolateOptions } from "./interpolate.ts";
import { inPlace } from "../../ops/inplace.ts";
import type { DropoutOptions, InplaceOptions } from "./inplace.ts";

/** Options of {@link rrelu}. */
export interface RReLUOptions extends InplaceOptions {
  /** Lower bound of the random negative slope (default 1/8). */
  lower?: number;
  /** Upper bound of the random negative slope (default 1/3). */
  upper?: number;
  /**
   * Draw a slope per element from U(lower, upper) (default false, as
   * PyTorch's functional form); otherwise the slope is (lower + upper) / 2.
   */
  training?: boolean;
}

/**
 * Randomized leaky ReLU, as `torch.nn.functional.rrelu`: `x` where x > 0,
 * else `x · a` with `a` drawn per element from U(lower, upper) in training
 * and `a = (lower + upper) / 2` otherwise. The gradient is 1 or `a`
 * (in training an element at exactly 0 takes its drawn slope, as ATen).
 */
export function rrelu(x: Tensor, options: RReLUOptions = {}): Tensor {
  if (options.inplace) {
    return inPlace("rrelu_", x, [], (t) => rrelu(t, { ...options, inplace: false }));
  }
  const op = "rrelu";
  checkFloatInput(op, x);
  const lower = checkFinite(op, "lower", options.lower ?? 1 / 8);
  const upper = checkFinite(op, "upper", options.upper ?? 1 / 3);
  if (lower > upper) {
    throw new RangeError(
      `${op}: lower bound ${lower} must be less than or equal to the upper bound ${upper}`,
    );
  }
  if (!options.training) {
    const slope = (lower + upper) / 2;
    return forwardScope(() => where(x.gt(0), x, x.mul(slope)));
  }
  // The slopes carry no gradient themselves: drawn outside the graph.
  const noise = noGrad(() =>
    tidy(() => {
      const a = rand([...x.shape], { dtype: x.dtype, device: x.device }).mul(upper - lower).add(
        lower,
      );
      return where(x.le(0), a, 1);
    })
  );
  return forwardScope(() => x.mul(noise));
}

/** SELU's negative saturation `-scale · alpha`, as ATen's alpha dropout. */
const ALPHA = 1.7580993408473766;

/**
 * Alpha dropout of whole channels, as
 * `torch.nn.functional.feature_alpha_dropout`: when `training` (default
 * false, as PyTorch's functional form) each (sample, channel) of
 * [N, C, ...] is with probability `p` set to SELU's negative saturation
 * throughout, and the result is scaled and shifted as `alphaDropout`'s
 * (`a = 1 / √((α² p + 1)(1 - p))`). `p = 1` gives `x · 0`, as PyTorch.
 */
export function featureAlphaDropout(
  x: Tensor,
  p: number | DropoutOptions = 0.5,
  training = false,
): Tensor {
  if (typeof p === "object" && p !== null) {
    return dropoutWithOptions("featureAlphaDropout", x, p, false, featureAlphaDropout);
  }
  const op = "featureAlphaDropout";
  checkDropout(op, x, p);
  if (!training || p === 0 || x.numel() === 0) return x;
  // As ATen, p = 1 zeroes any input before the rank check.
  if (p === 1) return x.mul(0);
  if (x.ndim < 2) {
    throw new RangeError(
      `${op}: feature dropout requires at least 2 dimensions in the input, got shape ${
        formatShape(x.shape)
      }`,
    );
  }
  const a = 1 / Math.sqrt((ALPHA * ALPHA * p + 1) * (1 - p));
  const shape = x.shape.map((n, i) => (i < 2 ? n : 1));
  const [scale, shift] = noGrad(() =>
    tidy(() => {
      const keep = rand(shape, { dtype: x.dtype, device: x.device }).ge(p);
      return [keep.mul(a), keep.sub(1).mul(ALPHA * a).add(ALPHA * a * p)];
    })
  );
  return forwardScope(() => x.mul(scale).add(shift));
}

/** Options of {@link pdist}. */
export interface PdistOptions {
  /** The norm's order p >= 0 (default 2; `Infinity` for the largest difference). */
  p?: number;
}

/**
 * The p-norm distances between the rows of `input` [N, M], as
 * `torch.nn.functional.pdist` (and `torch.pdist`): the upper triangle of
 * the N×N distance matrix, row by row, [N·(N-1)/2]. As PyTorch, the
 * gradient is 0 at a zero distance (and for p < 1 at a zero difference),
 * and for p = ∞ every tied largest difference gets the full gradient.
 */
export function pdist(input: Tensor, options: PdistOptions = {}): Tensor {
  const op = "pdist";
  checkFloatInput(op, input);
  const p = options.p ?? 2;
  if (typeof p !== "number" || !(p >= 0)) {
    throw new RangeError(`${op}: only supports non-negative p values, got ${p}`);
  }
  if (input.ndim !== 2) {
    throw new RangeError(
      `${op}: only supports 2D tensors [N, M], got shape ${formatShape(input.shape)}`,
    );
  }
  const n = input.shape[0];
  const first: number[] = [];
  const second: number[] = [];
  for (let i = 0; i < n; i++) {
    for (let j = i + 1; j < n; j++) {
      first.push(i);
      second.push(j);
    }
  }
  return forwardScope(() => {
    const index = (v: number[]) => tensor(v, { dtype: "int32", device: input.device });
    const d = input.indexSelect(0, index(first)).sub(input.indexSelect(0, index(second)));
    return rowNorm(d, p);
  });
}

/** ATen's pdist norms of each row of `d`, with its backward's zero cases. */
function rowNorm(d: Tensor, p: number): Tensor {
  const m = d.shape[1];
  const magnitude = d.abs();
  if (p === 0) {
    // ATen's min(ceil(|d|), 1): an infinite difference counts 1, NaN stays
    // NaN; the gradient is 0 everywhere (|d| < 0 never holds: no inf · 0).
    const m = magnitude.detach();
    return where(m.gt(0), 1, m).sum(1).add(where(m.lt(0), d, 0).sum(1));
  }
  if (m === 0) return magnitude.sum(1);
  // ATen's backward sign: sign(d), NaN for NaN.
  const sign = () => where(d.isnan(), d, d.sign()).detach();
  if (p === 1) {
    const dist = magnitude.detach().sum(1);
    return record("pdist", [d], dist, ([g]) => [g!.unsqueeze(1).mul(sign())]);
  }
  if (p === Infinity) {
    // Value the largest |d|; ATen's gradient sign(d) at every element tied
    // with it, NaN where |d| - dist is NaN (an infinite or NaN distance).
    const dist = magnitude.detach().amax(1, true);
    const gap = magnitude.detach().sub(dist);
    const tied = where(gap.isnan(), gap, where(gap.eq(0), 1, 0));
    return record("pdist", [d], dist.squeeze(1), ([g]) => [
      g!.unsqueeze(1).mul(sign()).mul(tied),
    ]);
  }
  let powered: Tensor;
  if (p === 2) powered = d.mul(d);
  else if (p < 1) {
    // |d|^p has an infinite slope at 0; ATen's backward gives such elements 0.
    const zero = d.eq(0);
    powered = where(zero, 0, where(zero, 1, magnitude).pow(p));
  } else powered = magnitude.pow(p);
  const total = powered.sum(1);
  const zero = total.eq(0);
  const safe = where(zero, 1, total);
  return where(zero, 0, p === 2 ? safe.sqrt() : safe.pow(1 / p));
}

/** Options of {@link upsampleNearest} and {@link upsampleBilinear}. */
export interface UpsampleOptions {
  /** Output spatial size (this or `scaleFactor`). */
  size?: number | readonly number[] | null;
  /** Multiplier of each spatial size. */
  scaleFactor?: number | readonly number[] | null;
}

const warned = new Set<string>();

function deprecated(name: string, instead: string): void {
  if (warned.has(name)) return;
  warned.add(name);
  console.warn(`nn.functional.${name} is deprecated, as in PyTorch. Use ${instead} instead.`);
}

/**
 * `torch.nn.functional.upsample`: deprecated, the same as
 * {@link interpolate} (warns once).
 */
export function upsample(input: Tensor, options: InterpolateOptions = {}): Tensor {
  deprecated("upsample", "nn.functional.interpolate");
  return interpolate(input, options);
}

/**
 * `torch.nn.functional.upsample_nearest`: deprecated, `interpolate` with
 * mode `"nearest"` (warns once).
 */
export function upsampleNearest(input: Tensor, options: UpsampleOptions = {}): Tensor {
  deprecated("upsampleNearest", "nn.functional.interpolate");
  return interpolate(input, { size: options.size, scaleFactor: options.scaleFactor });
}

/**
 * `torch.nn.functional.upsample_bilinear`: deprecated, `interpolate` with
 * mode `"bilinear"` and `alignCorners: true` on [N, C, H, W] (warns once).
 */
export function upsampleBilinear(input: Tensor, options: UpsampleOptions = {}): Tensor {
  deprecated("upsampleBilinear", "nn.functional.interpolate");
  return interpolate(input, {
    size: options.size,
    scaleFactor: options.scaleFactor,
    mode: "bilinear",
    alignCorners: true,
  });
}
