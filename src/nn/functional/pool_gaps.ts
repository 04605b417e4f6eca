/**
 * Max pools that also give their indices, as `torch.nn.functional`'s
 * `max_pool{1,2,3}d_with_indices` and `adaptive_max_pool{1,2,3}d_with_indices`,
 * fractional max pooling (`fractional_max_pool2d`/`3d`, with or without indices) and `max_unpool3d`.
 * Everything composes `gather`, `narrow` and the max-pool argmax (first
 * maximum on ties, the last NaN of a window), so every backend runs it and
 * the gradient goes to each window's winner.
 * @module
 */

import { arangeOn, rand, zeros } from "../../ops/factory.ts";
import { gatherInRange } from "../../ops/indexing.ts";
import { cat } from "../../ops/view.ts";
import { formatShape } from "../../shape.ts";
import { forwardScope } from "../../storage.ts";
import type { Tensor } from "../../tensor.ts";
import { checkTensor } from "../util.ts";
import { maxPool2d, type MaxPool2dOptions, type PoolWithIndices, type Size2 } from "./conv.ts";
import { maxPool1d, type MaxPool1dOptions, type Size1 } from "./pool1d.ts";
import { maxUnpool, type MaxUnpoolOptions } from "./pool_extra.ts";
import { type AdaptiveSize3, maxPool3d, type MaxPool3dOptions, type Size3 } from "./volumetric.ts";
import { batched, pair, triple } from "./window_args.ts";
import { poolArgmax } from "./pool_argmax.ts";

/**
 * `torch.nn.functional.max_pool1d_with_indices`: {@link maxPool1d} with
 * `returnIndices`, `[output, indices]` (each maximum's position along L, int32).
 */
export function maxPool1dWithIndices(
  input: Tensor,
  kernelSize: Size1,
  options: MaxPool1dOptions = {},
): PoolWithIndices {
  return maxPool1d(input, kernelSize, { ...options, returnIndices: true });
}

/**
 * `torch.nn.functional.max_pool2d_with_indices`: {@link maxPool2d} with
 * `returnIndices`, `[output, indices]` (flat positions h·W + w in each input
 * plane, int32).
 */
export function maxPool2dWithIndices(
  input: Tensor,
  kernelSize: Size2,
  options: MaxPool2dOptions = {},
): PoolWithIndices {
  return maxPool2d(input, kernelSize, { ...options, returnIndices: true });
}

/**
 * `torch.nn.functional.max_pool3d_with_indices`: the output of
 * {@link maxPool3d} and each maximum's flat position d·H·W + h·W + w in its
 * input volume (int32), the first maximum in (d, h, w) order on ties, the
 * last NaN of a window holding NaN, as PyTorch.
 */
export function maxPool3dWithIndices(
  input: Tensor,
  kernelSize: Size3,
  options: MaxPool3dOptions = {},
): PoolWithIndices {
  const op = "maxPool3dWithIndices";
  const x = batched(op, input, 5);
  const kernel = triple(op, "kernelSize", kernelSize, 1);
  const stride = options.stride == null ? kernel : triple(op, "stride", options.stride, 1);
  const padding = triple(op, "padding", options.padding ?? 0, 0);
  const dilation = triple(op, "dilation", options.dilation ?? 1, 1);
  // The values (and every check) are maxPool3d's own; the indices come from
  // the same two stages with returnIndices, so they name the same winners.
  const values = maxPool3d(input, kernelSize, options);
  const [n, c, d, h, w] = x.shape;
  const indices = forwardScope(() => {
    const ceilMode = options.ceilMode;
    const [planes, inPlane] = maxPool2d(x.reshape([n, c * d, h, w]).detach(), [
      kernel[1],
      kernel[2],
    ], {
      stride: [stride[1], stride[2]],
      padding: [padding[1], padding[2]],
      dilation: [dilation[1], dilation[2]],
      ceilMode,
      returnIndices: true,
    });
    const [oh, ow] = planes.shape.slice(2);
    const m = oh * ow;
    const [, depthFlat] = maxPool2d(planes.reshape([n, c, d, m]), [kernel[0], 1], {
      stride: [stride[0], 1],
      padding: [padding[0], 0],
      dilation: [dilation[0], 1],
      ceilMode,
      returnIndices: true,
    });
    // depthFlat = depth · m + position; the position is the output column.
    const position = arangeOn(m, x.device);
    const depth = depthFlat.sub(position).to("float32").div(m).round().to("int32");
    const within = gatherInRange(inPlane.reshape([n, c, d, m]), 2, depth);
    const od = depth.shape[2];
    return depth.mul(h * w).add(within).reshape([n, c, od, oh, ow]);
  });
  return [values, input.ndim === 4 ? indices.squeeze(0) : indices];
}

/**
 * Max over PyTorch's adaptive windows `[floor(i·in/out), ceil((i+1)·in/out))`
 * of `dim`, carrying `index` (flat input positions, `x`'s shape) along.
 */
function adaptiveMaxIndexed(
  x: Tensor,
  index: Tensor,
  dim: number,
  out: number,
): [Tensor, Tensor] {
  const size = x.shape[dim];
  const values: Tensor[] = [];
  const indices: Tensor[] = [];
  for (let i = 0; i < out; i++) {
    const start = Math.floor((i * size) / out);
    const end = Math.ceil(((i + 1) * size) / out);
    const part = x.narrow(dim, start, end - start);
    const winner = poolArgmax(part, dim);
    values.push(gatherInRange(part, dim, winner));
    indices.push(gatherInRange(index.narrow(dim, start, end - start), dim, winner));
  }
  return values.length === 1 ? [values[0], indices[0]] : [cat(values, dim), cat(indices, dim)];
}

function adaptiveWithIndices(
  op: string,
  input: Tensor,
  dims: number,
  outputSize: number | readonly (number | null)[],
): PoolWithIndices {
  const x = batched(op, input, dims + 2);
  const spatial = x.shape.slice(2);
  const sizes = typeof outputSize === "number" ? spatial.map(() => outputSize) : [...outputSize];
  const out = sizes.map((s, i) => s ?? spatial[i]);
  if (sizes.length !== dims || !out.every((s) => Number.isInteger(s) && s >= 1)) {
    throw new RangeError(
      `${op}: outputSize must be a positive integer${
        dims > 1 ? ` or ${dims} of them (null keeps a dim)` : ""
      }, got ${JSON.stringify(outputSize)}`,
    );
  }
  if (spatial.some((s) => s === 0)) {
    throw new RangeError(`${op}: input of shape ${formatShape(input.shape)} has an empty window`);
  }
  return forwardScope(() => {
    const plane = spatial.reduce((a, b) => a * b, 1);
    let index = arangeOn(plane, x.device).reshape([1, 1, ...spatial]).expand(x.shape);
    let y = x;
    // Last dim first: each stage keeps its first maximum (last NaN), which
    // composes to the first in row-major order, as PyTorch's kernels scan.
    for (let d = dims - 1; d >= 0; d--) {
      [y, index] = adaptiveMaxIndexed(y, index, 2 + d, out[d]);
    }
    if (y === x) [y, index] = [x.clone(), index.clone()];
    const unbatch = (t: Tensor) => (input.ndim === dims + 1 ? t.squeeze(0) : t);
    return [unbatch(y), unbatch(index)];
  });
}

/**
 * `torch.nn.functional.adaptive_max_pool1d_with_indices`: adaptive max
 * pooling of [N, C, L] (or [C, L]) and each maximum's position along L (int32).
 */
export function adaptiveMaxPool1dWithIndices(
  input: Tensor,
  outputSize: number | readonly [number],
): PoolWithIndices {
  return adaptiveWithIndices("adaptiveMaxPool1dWithIndices", input, 1, outputSize);
}

/**
 * `torch.nn.functional.adaptive_max_pool2d_with_indices`: adaptive max
 * pooling of [N, C, H, W] (or [C, H, W]) and each maximum's flat position
 * h·W + w in its plane (int32; first maximum in row-major order, the last NaN).
 */
export function adaptiveMaxPool2dWithIndices(
  input: Tensor,
  outputSize: number | readonly [number | null, number | null],
): PoolWithIndices {
  return adaptiveWithIndices("adaptiveMaxPool2dWithIndices", input, 2, outputSize);
}

/**
 * `torch.nn.functional.adaptive_max_pool3d_with_indices`: adaptive max
 * pooling of [N, C, D, H, W] (or [C, D, H, W]) and each maximum's flat
 * position d·H·W + h·W + w in its volume (int32).
 */
export function adaptiveMaxPool3dWithIndices(
  input: Tensor,
  outputSize: AdaptiveSize3,
): PoolWithIndices {
  return adaptiveWithIndices("adaptiveMaxPool3dWithIndices", input, 3, outputSize);
}

/** Options of {@link fractionalMaxPool2d} and {@link fractionalMaxPool3d}. */
export interface FractionalMaxPoolOptions<S, R> {
  /** The output's spatial size (this or `outputRatio`; this one wins when both are given). */
  outputSize?: S | null;
  /** The output's size as a fraction of the input's, rounded down (the module takes (0, 1)). */
  outputRatio?: R | null;
  /** Also return each maximum's flat position in its input plane (default false). */
  returnIndices?: boolean;
  /**
   * PyTorch's `_random_samples`: [N, C, dims] values in [0, 1) placing the
   * windows of each plane (default: drawn with `rand`, the seeded stream).
   * For 2-d, sample 0 places the columns and sample 1 the rows; for 3-d
   * 0, 1, 2 place depth, rows and columns, as ATen.
   */
  randomSamples?: Tensor | null;
}

/**
 * ATen's interval starts for one dim: `start[i] = trunc((i + u)·α) -
 * trunc(u·α)` with `α = (in - k) / (out - 1)` in the input's precision, the
 * last window ending at the input's end. `u` is [N, C, 1]; the result
 * [N, C, out], int32.
 */
function intervalStarts(u: Tensor, input: number, out: number, kernel: number): Tensor {
  if (out === 1) return u.mul(0).add(input - kernel).to("int32");
  const alpha = (input - kernel) / (out - 1);
  const i = arangeOn(out - 1, u.device).to(u.dtype);
  const starts = i.add(u).mul(alpha).floor().sub(u.mul(alpha).floor());
  const last = u.mul(0).add(input - kernel);
  return cat([starts, last], -1).to("int32");
}

function fractional(
  op: string,
  input: Tensor,
  dims: number,
  kernelSize: number | readonly number[],
  options: FractionalMaxPoolOptions<number | readonly number[], number | readonly number[]>,
): Tensor | PoolWithIndices {
  const x = batched(op, input, dims + 2);
  // As ATen: only the first dim of the input as given may be empty.
  const empty = input.shape.findIndex((s, i) => i > 0 && s === 0);
  if (empty > 0) {
    throw new RangeError(
      `${op}: expected input to have non-zero size for non-batch dimensions, got shape ${
        formatShape(input.shape)
      } with dim ${empty} empty`,
    );
  }
  const list = (name: string, v: number | readonly number[], min: number) =>
    dims === 2 ? pair(op, name, v, min) : triple(op, name, v, min);
  const kernel = list("kernelSize", kernelSize, 1);
  const spatial = x.shape.slice(2);
  const [n, c] = x.shape;
  let out: number[];
  // As PyTorch's functional form: outputSize wins when both are given, and
  // any ratio or size passes whose windows fit (0 gives an empty output).
  if (options.outputSize == null && options.outputRatio == null) {
    throw new RangeError(`${op}: give outputSize or outputRatio, got neither`);
  }
  if (options.outputSize != null) {
    out = list("outputSize", options.outputSize, 0);
  } else {
    const r = options.outputRatio!;
    const ratio = typeof r === "number" ? spatial.map(() => r) : [...r];
    if (ratio.length !== dims || !ratio.every((v) => v >= 0 && Number.isFinite(v))) {
      throw new RangeError(
        `${op}: outputRatio must be ${
          dims === 2 ? "a number or pair" : "a number or triple"
        } >= 0, got ${JSON.stringify(r)}`,
      );
    }
    out = spatial.map((s, d) => Math.trunc(s * ratio[d]));
  }
  spatial.forEach((s, d) => {
    // PyTorch 1.13's 3-d check is strict (a last window may not end at the
    // input's end), its 2-d one is not.
    const reach = out[d] + kernel[d] - 1;
    if (dims === 3 ? reach >= s : reach > s) {
      throw new RangeError(
        `${op}: kernel ${JSON.stringify(kernel)} and output size ${
          JSON.stringify(out)
        } are too large for input of shape ${formatShape(input.shape)} (dim ${
          d + 2
        }: output + kernel - 1 = ${reach} ${dims === 3 ? ">=" : ">"} ${s})`,
      );
    }
  });
  let samples = options.randomSamples ?? null;
  if (samples != null) {
    checkTensor(op, "randomSamples", samples);
    const want = [n, c, dims];
    if (samples.ndim !== 3 || samples.shape.some((s, i) => s !== want[i])) {
      throw new RangeError(
        `${op}: randomSamples of shape ${formatShape(samples.shape)} must be ${
          formatShape(want)
        } for input of shape ${formatShape(input.shape)}`,
      );
    }
    if (samples.dtype !== x.dtype || samples.device !== x.device) {
      throw new TypeError(
        `${op}: randomSamples (${samples.dtype} on ${samples.device}) must match the input (${x.dtype} on ${x.device})`,
      );
    }
  }
  const unbatch = (t: Tensor) => (input.ndim === dims + 1 ? t.squeeze(0) : t);
  if (out.includes(0)) {
    return forwardScope(() => {
      let y = x;
      out.forEach((o, d) => (y = y.narrow(2 + d, 0, o)));
      const empty = unbatch(y.clone());
      const indices = unbatch(zeros([...y.shape], { dtype: "int32", device: x.device }));
      return options.returnIndices ? [empty, indices] : empty;
    });
  }
  return forwardScope(() => {
    samples ??= rand([n, c, dims], { dtype: x.dtype, device: x.device });
    const u = samples.detach();
    // ATen's sample order: 2-d (columns, rows), 3-d (depth, rows, columns).
    const sampleOf = (d: number) => (dims === 2 ? 1 - d : d);
    const plane = spatial.reduce((a, b) => a * b, 1);
    let index = arangeOn(plane, x.device).reshape([1, 1, ...spatial]).expand(x.shape);
    let y = x;
    for (let d = dims - 1; d >= 0; d--) {
      const axis = 2 + d;
      const starts = intervalStarts(
        u.narrow(2, sampleOf(d), 1),
        spatial[d],
        out[d],
        kernel[d],
      );
      // taps [N, C, out·k]: window i reads starts[i] + 0..k-1.
      const taps = starts.unsqueeze(-1).add(arangeOn(kernel[d], x.device)).reshape([
        n,
        c,
        out[d] * kernel[d],
      ]);
      const shape = [...y.shape];
      shape[axis] = out[d] * kernel[d];
      const view = taps.reshape([
        n,
        c,
        ...Array(d).fill(1),
        out[d] * kernel[d],
        ...Array(dims - 1 - d).fill(1),
      ]);
      const tapIndex = view.expand(shape);
      const windows = [...y.shape];
      windows.splice(axis, 1, out[d], kernel[d]);
      const gathered = gatherInRange(y, axis, tapIndex).reshape(windows);
      const winner = poolArgmax(gathered, axis + 1);
      y = gatherInRange(gathered, axis + 1, winner).squeeze(axis + 1);
      index = gatherInRange(gatherInRange(index, axis, tapIndex).reshape(windows), axis + 1, winner)
        .squeeze(axis + 1);
    }
    return options.returnIndices ? [unbatch(y), unbatch(index)] : unbatch(y);
  });
}

/**
 * Fractional max pooling of [N, C, H, W] (or [C, H, W]), as
 * `torch.nn.functional.fractional_max_pool2d`: `kernelSize` windows at
 * pseudo-random starts (from `randomSamples`, one pair per plane) that
 * reach `outputSize` (or `outputRatio` of the input size) positions. With
 * `returnIndices`, `[output, indices]` (flat h·W + w, int32).
 */
export function fractionalMaxPool2d(
  input: Tensor,
  kernelSize: Size2,
  options: FractionalMaxPoolOptions<Size2, number | readonly [number, number]> & {
    returnIndices: true;
  },
): PoolWithIndices;
/** {@link fractionalMaxPool2d} without `returnIndices`: the output alone. */
export function fractionalMaxPool2d(
  input: Tensor,
  kernelSize: Size2,
  options: FractionalMaxPoolOptions<Size2, number | readonly [number, number]> & {
    returnIndices?: false;
  },
): Tensor;
/** {@link fractionalMaxPool2d} with `returnIndices` known only at run time. */
export function fractionalMaxPool2d(
  input: Tensor,
  kernelSize: Size2,
  options: FractionalMaxPoolOptions<Size2, number | readonly [number, number]>,
): Tensor | PoolWithIndices;
export function fractionalMaxPool2d(
  input: Tensor,
  kernelSize: Size2,
  options: FractionalMaxPoolOptions<Size2, number | readonly [number, number]>,
): Tensor | PoolWithIndices {
  return fractional("fractionalMaxPool2d", input, 2, kernelSize, options);
}

/**
 * Fractional max pooling of [N, C, D, H, W] (or [C, D, H, W]), as
 * `torch.nn.functional.fractional_max_pool3d` (see
 * {@link fractionalMaxPool2d}; indices are flat d·H·W + h·W + w). As
 * PyTorch 1.13, each output size + kernel - 1 must be below the input size.
 */
export function fractionalMaxPool3d(
  input: Tensor,
  kernelSize: Size3,
  options: FractionalMaxPoolOptions<Size3, number | readonly [number, number, number]> & {
    returnIndices: true;
  },
): PoolWithIndices;
/** {@link fractionalMaxPool3d} without `returnIndices`: the output alone. */
export function fractionalMaxPool3d(
  input: Tensor,
  kernelSize: Size3,
  options: FractionalMaxPoolOptions<Size3, number | readonly [number, number, number]> & {
    returnIndices?: false;
  },
): Tensor;
/** {@link fractionalMaxPool3d} with `returnIndices` known only at run time. */
export function fractionalMaxPool3d(
  input: Tensor,
  kernelSize: Size3,
  options: FractionalMaxPoolOptions<Size3, number | readonly [number, number, number]>,
): Tensor | PoolWithIndices;
export function fractionalMaxPool3d(
  input: Tensor,
  kernelSize: Size3,
  options: FractionalMaxPoolOptions<Size3, number | readonly [number, number, number]>,
): Tensor | PoolWithIndices {
  return fractional("fractionalMaxPool3d", input, 3, kernelSize, options);
}

/**
 * Scatters the values of a 3-d max pool over [N, C, D, H, W] (or
 * [C, D, H, W]) back to where `indices` (flat positions in each input
 * volume, int32) say they came from, zeros elsewhere, as
 * `torch.nn.functional.max_unpool3d`.
 */
export function maxUnpool3d(
  input: Tensor,
  indices: Tensor,
  kernelSize: Size3,
  options: MaxUnpoolOptions<Size3> = {},
): Tensor {
  const op = "maxUnpool3d";
  batched(op, input, 5);
  const kernel = triple(op, "kernelSize", kernelSize, 1);
  const stride = options.stride == null ? kernel : triple(op, "stride", options.stride, 1);
  const padding = triple(op, "padding", options.padding ?? 0, 0);
  return maxUnpool(op, input, indices, kernel, stride, padding, options.outputSize);
}

/**
 * `torch.nn.functional.fractional_max_pool2d_with_indices`:
 * {@link fractionalMaxPool2d} with `returnIndices`, `[output, indices]`
 * (flat positions h·W + w in each input plane, int32).
 */
export function fractionalMaxPool2dWithIndices(
  input: Tensor,
  kernelSize: Size2,
  options: Omit<
    FractionalMaxPoolOptions<Size2, number | readonly [number, number]>,
    "returnIndices"
  >,
): PoolWithIndices {
  return fractionalMaxPool2d(input, kernelSize, { ...options, returnIndices: true });
}

/**
 * `torch.nn.functional.fractional_max_pool3d_with_indices`:
 * {@link fractionalMaxPool3d} with `returnIndices`, `[output, indices]`
 * (flat positions d·H·W + h·W + w in each input volume, int32).
 */
export function fractionalMaxPool3dWithIndices(
  input: Tensor,
  kernelSize: Size3,
  options: Omit<
    FractionalMaxPoolOptions<Size3, number | readonly [number, number, number]>,
    "returnIndices"
  >,
): PoolWithIndices {
  return fractionalMaxPool3d(input, kernelSize, { ...options, returnIndices: true });
}
