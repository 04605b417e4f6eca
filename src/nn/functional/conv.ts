/**
 * Convolution, pooling and padding, as `torch.nn.functional`: `conv1d`,
 * `conv2d`, `maxPool2d`, `avgPool2d`, `adaptiveAvgPool2d` and `pad`.
 *
 * Every windowed op unfolds its windows with one `im2col` kernel
 * (`unfold2d`, whose gradient is the `col2im` kernel) and then reduces them
 * with existing kernels: a convolution is one (batched) matrix product with
 * the weight, a max pool an argmax plus a gather, an average pool a sum.
 * @module
 */

import { record } from "../../autograd.ts";
import { gatherInRange, scatterToIndex, where } from "../../ops/indexing.ts";
import { cachedConstant, empty, hasKernel, launch } from "../../ops/util.ts";
import { full, tensor } from "../../ops/factory.ts";
import { cat } from "../../ops/view.ts";
import { unfold2d, type Window2d, windowView } from "../../ops/window.ts";
import { formatShape } from "../../shape.ts";
import { forwardScope } from "../../storage.ts";
import type { Tensor } from "../../tensor.ts";
import { checkTensor } from "../util.ts";
import { poolArgmax } from "./pool_argmax.ts";
import {
  batched,
  checkConvBias,
  checkConvDtypes,
  checkConvGroups,
  checkConvWeight,
  checkPoolPadding,
  convPadding,
  outLength,
  pair,
} from "./window_args.ts";
import { owned } from "../../ops_composite/owned.ts";

/** A size PyTorch takes as an int or a tuple: one number for every dim, or one per dim. */
export type Size2 = number | readonly [number, number];

/** Options of {@link conv2d}. */
export interface Conv2dOptions {
  /** Step between windows (default 1). */
  stride?: Size2;
  /** Zero padding on both sides of each spatial dim, or `"valid"` (none) or `"same"` (output size = input size; stride 1). Default 0. */
  padding?: Size2 | "valid" | "same";
  /** Step between kernel taps (default 1). */
  dilation?: Size2;
  /** Channel groups: input and output channels split into this many independent convolutions (default 1). */
  groups?: number;
}

/** Options of {@link conv1d}. */
export interface Conv1dOptions {
  /** Step between windows (default 1). */
  stride?: number | readonly [number];
  /** Zero padding on both sides, or `"valid"` / `"same"` (default 0). */
  padding?: number | readonly [number] | "valid" | "same";
  /** Step between kernel taps (default 1). */
  dilation?: number | readonly [number];
  /** Channel groups (default 1). */
  groups?: number;
}

/**
 * 2-d convolution (cross-correlation, as PyTorch) of `input` [N, C, H, W]
 * (or [C, H, W]) with `weight` [Cout, C / groups, kH, kW], plus `bias`
 * [Cout]: as `torch.nn.functional.conv2d`.
 */
export function conv2d(
  input: Tensor,
  weight: Tensor,
  bias?: Tensor | null,
  options: Conv2dOptions = {},
): Tensor {
  // Intermediates go with the graph at backward, not with the GC; the result's memory is its
  // own (a new tensor, as PyTorch's: nn.ReLU(inplace) may follow).
  return owned(
    () => forwardScope(() => conv2dUnscoped(input, weight, bias, options)),
    input,
    weight,
    bias,
  );
}

function conv2dUnscoped(
  input: Tensor,
  weight: Tensor,
  bias?: Tensor | null,
  options: Conv2dOptions = {},
): Tensor {
  const op = "conv2d";
  const x = batched(op, input, 4);
  checkConvWeight(op, x, weight, bias, "out_channels, in_channels / groups, kH, kW");
  const groups = options.groups ?? 1;
  const [n, , h, w] = x.shape;
  const [cout, cPerGroup, kh, kw] = weight.shape;
  checkConvGroups(op, x, weight, groups);
  checkConvDtypes(op, x, weight, bias);
  checkConvBias(op, bias, cout);
  const stride = pair(op, "stride", options.stride ?? 1, 1);
  const dilation = pair(op, "dilation", options.dilation ?? 1, 1);
  const resolved = convPadding(op, options.padding ?? 0, [kh, kw], stride, dilation);
  const padding = resolved.padding as [number, number];
  const src = resolved.after ? pad(x, resolved.after) : x;
  const [sh, sw] = [src.shape[2], src.shape[3]];
  const out: [number, number] = [
    outLength(sh, kh, stride[0], padding[0], dilation[0], false),
    outLength(sw, kw, stride[1], padding[1], dilation[1], false),
  ];
  if (out[0] < 1 || out[1] < 1) {
    throw new RangeError(
      `${op}: the kernel ${kh}x${kw} (dilation ${dilation}) is larger than the padded input ${
        h + 2 * padding[0]
      }x${w + 2 * padding[1]}`,
    );
  }
  const taps = out[0] * out[1];
  const k = cPerGroup * kh * kw;
  // Per shape: a 1x1 kernel with stride 1 and no padding reads the input
  // as it is, so it skips the unfold.
  const pointwise = kh === 1 && kw === 1 && stride[0] === 1 && stride[1] === 1 &&
    padding[0] === 0 && padding[1] === 0;
  const cols = pointwise
    ? src
    : unfold2d(src, { kernel: [kh, kw], stride, padding, dilation, out });
  let y: Tensor;
  if (groups === 1) {
    y = weight.reshape([cout, k]).matmul(cols.reshape([n, k, taps]));
  } else {
    y = weight.reshape([groups, cout / groups, k]).matmul(cols.reshape([n, groups, k, taps]));
  }
  if (bias) y = y.reshape([n, cout, taps]).add(bias.reshape([cout, 1]));
  y = y.reshape([n, cout, out[0], out[1]]);
  return input.ndim === 3 ? y.squeeze(0) : y;
}

/**
 * 1-d convolution of `input` [N, C, L] (or [C, L]) with `weight`
 * [Cout, C / groups, k], plus `bias` [Cout]: as
 * `torch.nn.functional.conv1d` (a 2-d convolution over a height of 1).
 */
export function conv1d(
  input: Tensor,
  weight: Tensor,
  bias?: Tensor | null,
  options: Conv1dOptions = {},
): Tensor {
  // Intermediates go with the graph at backward, not with the GC.
  return owned(
    () => forwardScope(() => conv1dUnscoped(input, weight, bias, options)),
    input,
    weight,
    bias,
  );
}

function conv1dUnscoped(
  input: Tensor,
  weight: Tensor,
  bias?: Tensor | null,
  options: Conv1dOptions = {},
): Tensor {
  const x = batched("conv1d", input, 3);
  checkTensor("conv1d", "weight", weight);
  if (weight.ndim !== 3) {
    throw new RangeError(
      `conv1d: weight must be [out_channels, in_channels / groups, k], got shape ${
        formatShape(weight.shape)
      }`,
    );
  }
  const one = (name: string, v: number | readonly [number] | undefined, dflt: number) => {
    const value = v ?? dflt;
    const list = typeof value === "number" ? [value] : [...value];
    if (list.length !== 1) {
      throw new RangeError(
        `conv1d: ${name} must be a number or [number], got ${JSON.stringify(v)}`,
      );
    }
    return [1, list[0]] as [number, number];
  };
  const pad = options.padding;
  const y = conv2d(x.unsqueeze(2), weight.unsqueeze(2), bias, {
    stride: one("stride", options.stride, 1),
    dilation: one("dilation", options.dilation, 1),
    padding: pad === "valid" || pad === "same" ? pad : [0, one("padding", pad, 0)[1]],
    groups: options.groups,
  }).squeeze(2);
  return input.ndim === 2 ? y.squeeze(0) : y;
}

/** Options of {@link maxPool2d}. */
export interface MaxPool2dOptions {
  /** Step between windows (default: the kernel size). */
  stride?: Size2 | null;
  /** Implicit -inf padding on both sides (at most half the kernel; default 0). */
  padding?: Size2;
  /** Step between kernel taps (default 1). */
  dilation?: Size2;
  /** Round the output size up instead of down (default false). */
  ceilMode?: boolean;
}

/** The `returnIndices` switch of {@link maxPool2d} and `maxPool1d`, apart so that plain options type as plain. */
export interface ReturnIndicesOption {
  /** Also return each maximum's position (see {@link PoolWithIndices}; default false). */
  returnIndices?: boolean;
}

/**
 * A max pool's output and, as PyTorch's `return_indices`, each maximum's
 * flat position in its input plane (row · W + column; int32, PyTorch: int64).
 */
export type PoolWithIndices = [output: Tensor, indices: Tensor];

interface PoolWindow {
  window: Window2d;
  x: Tensor;
}

function poolWindow(
  op: string,
  input: Tensor,
  kernelSize: Size2,
  options: MaxPool2dOptions,
  dilationAllowed: boolean,
): PoolWindow {
  const x = batched(op, input, 4);
  const kernel = pair(op, "kernelSize", kernelSize, 1);
  const stride = options.stride == null ? kernel : pair(op, "stride", options.stride, 1);
  const padding = pair(op, "padding", options.padding ?? 0, 0);
  const dilation = dilationAllowed ? pair(op, "dilation", options.dilation ?? 1, 1) : [1, 1] as [
    number,
    number,
  ];
  checkPoolPadding(op, padding, kernel);
  const ceilMode = options.ceilMode ?? false;
  const out: [number, number] = [0, 1].map((d) =>
    outLength(x.shape[2 + d], kernel[d], stride[d], padding[d], dilation[d], ceilMode)
  ) as [number, number];
  if (out[0] < 1 || out[1] < 1) {
    throw new RangeError(
      `${op}: output size ${out[0]}x${out[1]} is too small for input of shape ${
        formatShape(input.shape)
      } (kernel ${JSON.stringify(kernel)}, padding ${JSON.stringify(padding)})`,
    );
  }
  return { x, window: { kernel, stride, padding, dilation, out } };
}

/**
 * Max pooling over [N, C, H, W] (or [C, H, W]) windows, as
 * `torch.nn.functional.max_pool2d`; the gradient goes to each window's
 * maximum (the first one on ties, NaN counting as the maximum; of several
 * NaN the last, as PyTorch). With `returnIndices: true`,
 * returns `[output, indices]` ({@link PoolWithIndices}).
 */
export function maxPool2d(
  input: Tensor,
  kernelSize: Size2,
  options: MaxPool2dOptions & { returnIndices: true },
): PoolWithIndices;
/** {@link maxPool2d} without `returnIndices`: the output alone. */
export function maxPool2d(
  input: Tensor,
  kernelSize: Size2,
  options?: MaxPool2dOptions & { returnIndices?: false },
): Tensor;
/** {@link maxPool2d} with `returnIndices` known only at run time. */
export function maxPool2d(
  input: Tensor,
  kernelSize: Size2,
  options?: MaxPool2dOptions & ReturnIndicesOption,
): Tensor | PoolWithIndices;
export function maxPool2d(
  input: Tensor,
  kernelSize: Size2,
  options: MaxPool2dOptions & ReturnIndicesOption = {},
): Tensor | PoolWithIndices {
  // Intermediates go with the graph at backward, not with the GC.
  return forwardScope(() => maxPool2dUnscoped(input, kernelSize, options));
}

function maxPool2dUnscoped(
  input: Tensor,
  kernelSize: Size2,
  options: MaxPool2dOptions & ReturnIndicesOption,
): Tensor | PoolWithIndices {
  const { x, window } = poolWindow("maxPool2d", input, kernelSize, options, true);
  const [n, c] = x.shape;
  const [oh, ow] = window.out;
  const unbatch = (t: Tensor) => (input.ndim === 3 ? t.squeeze(0) : t);
  if (hasKernel(x.device, "maxPool2d") && !hasEmptyWindow(x, window)) {
    const [y, indices] = fusedMaxPool2d(x, window);
    return options.returnIndices
      ? [unbatch(y), unbatch(indices.reshape([n, c, oh, ow]))]
      : unbatch(y);
  }
  const taps = window.kernel[0] * window.kernel[1];
  const cols = unfold2d(x, window, -Infinity).reshape([n, c, taps, oh * ow]);
  const top = poolArgmax(cols, 2);
  // A window of -inf: argmax may name a padding tap, PyTorch (and the fused
  // kernels) its first tap inside the input, where the gradient goes too.
  const index = where(gatherInRange(cols, 2, top).eq(-Infinity), firstInsideTaps(x, window), top);
  const y = gatherInRange(cols, 2, index).reshape([n, c, oh, ow]);
  if (!options.returnIndices) return unbatch(y);
  const flat = gatherInRange(tapPositions(x, window).expand([n, c, taps, oh * ow]), 2, index);
  return [unbatch(y), unbatch(flat.reshape([n, c, oh, ow]))];
}

/**
 * Whether a dilated window steps over the whole input in some dim (no tap
 * inside): PyTorch gives -inf there, which the fused kernels, written for
 * windows with a tap inside, do not.
 */
function hasEmptyWindow(x: Tensor, window: Window2d): boolean {
  const { kernel, stride, padding, dilation, out } = window;
  return [0, 1].some((d) => {
    const size = x.shape[2 + d];
    for (let o = 0; o < out[d]; o++) {
      const start = o * stride[d] - padding[d];
      let k = 0;
      while (k < kernel[d] && (start + k * dilation[d] < 0 || start + k * dilation[d] >= size)) k++;
      if (k === kernel[d]) return true;
    }
    return false;
  });
}

const positionCache = new Map<string, Tensor>();

/** [1, 1, 1, windows] int32: each window's first tap inside the input (0 for a window with none). */
function firstInsideTaps(x: Tensor, window: Window2d): Tensor {
  const [h, w] = [x.shape[2], x.shape[3]];
  const key = `first|${x.device}|${h},${w}|${JSON.stringify(window)}`;
  return cachedConstant(positionCache, 64, key, x.device, () => {
    const { kernel, stride, padding, dilation, out } = window;
    const first = (o: number, d: 0 | 1, size: number) => {
      const start = o * stride[d] - padding[d];
      for (let k = 0; k < kernel[d]; k++) {
        const at = start + k * dilation[d];
        if (at >= 0 && at < size) return k;
      }
      return -1;
    };
    const values: number[] = [];
    for (let oi = 0; oi < out[0]; oi++) {
      for (let oj = 0; oj < out[1]; oj++) {
        const [ki, kj] = [first(oi, 0, h), first(oj, 1, w)];
        values.push(ki < 0 || kj < 0 ? 0 : ki * kernel[1] + kj);
      }
    }
    return tensor(values, { shape: [1, 1, 1, out[0] * out[1]], dtype: "int32", device: x.device });
  });
}

/** [1, 1, taps, windows] int32: the flat input position each tap of each window reads. */
function tapPositions(x: Tensor, window: Window2d): Tensor {
  const [h, w] = [x.shape[2], x.shape[3]];
  const key = `${x.device}|${h},${w}|${JSON.stringify(window)}`;
  return cachedConstant(positionCache, 64, key, x.device, () => {
    const { kernel, stride, padding, dilation, out } = window;
    const at = (o: number, k: number, d: 0 | 1) => o * stride[d] - padding[d] + k * dilation[d];
    // The first tap at or after the input's start: inside, unless the
    // window has none inside (PyTorch then names that position, past the end).
    const first = (o: number, d: 0 | 1) => {
      let k = 0;
      while (k < kernel[d] - 1 && at(o, k, d) < 0) k++;
      return at(o, k, d);
    };
    const values: number[] = [];
    for (let ki = 0; ki < kernel[0]; ki++) {
      for (let kj = 0; kj < kernel[1]; kj++) {
        for (let oi = 0; oi < out[0]; oi++) {
          for (let oj = 0; oj < out[1]; oj++) {
            const [row, col] = [at(oi, ki, 0), at(oj, kj, 1)];
            // A padding tap wins only a window of -inf, where PyTorch names
            // the window's first element inside the input.
            const inside = row >= 0 && row < h && col >= 0 && col < w;
            values.push(inside ? row * w + col : first(oi, 0) * w + first(oj, 1));
          }
        }
      }
    }
    const shape = [1, 1, kernel[0] * kernel[1], out[0] * out[1]];
    return tensor(values, { shape, dtype: "int32", device: x.device });
  });
}

/**
 * Max pooling by the backend's fused kernel: one pass over the windows for
 * the maxima and their positions; the gradient scatter-adds to those.
 */
function fusedMaxPool2d(x: Tensor, window: Window2d): [Tensor, Tensor] {
  const [n, c, h, w] = x.shape;
  const [oh, ow] = window.out;
  const y = empty([n, c, oh, ow], x.dtype, x.device);
  const indices = empty([n, c, oh * ow], "int32", x.device);
  if (y.numel() > 0) {
    launch(x.device, "maxPool2d", {
      ...windowView(x, window),
      x: x.storage.buffer("maxPool2d"),
      out: y.storage.buffer(),
      indices: indices.storage.buffer(),
      dtype: x.dtype,
    });
  }
  const out = record("maxPool2d", [x], y, ([g]) => [
    scatterToIndex(g!.reshape([n, c, oh * ow]), 2, indices, h * w, "maxPool2d").reshape(x.shape),
  ]);
  return [out, indices];
}

/** Options of {@link avgPool2d}. */
export interface AvgPool2dOptions {
  /** Step between windows (default: the kernel size). */
  stride?: Size2 | null;
  /** Implicit zero padding on both sides (at most half the kernel; default 0). */
  padding?: Size2;
  /** Round the output size up instead of down (default false). */
  ceilMode?: boolean;
  /** Count padding zeros in each window's divisor (default true). */
  countIncludePad?: boolean;
  /** Divide every window by this instead. */
  divisorOverride?: number | null;
}

const divisorCache = new Map<string, Tensor>();

/**
 * Average pooling over [N, C, H, W] (or [C, H, W]) windows, as
 * `torch.nn.functional.avg_pool2d` (its divisor rules for padding and
 * `ceilMode` included).
 */
export function avgPool2d(
  input: Tensor,
  kernelSize: Size2,
  options: AvgPool2dOptions = {},
): Tensor {
  // Intermediates go with the graph at backward, not with the GC.
  return owned(() => forwardScope(() => avgPool2dUnscoped(input, kernelSize, options)), input);
}

function avgPool2dUnscoped(
  input: Tensor,
  kernelSize: Size2,
  options: AvgPool2dOptions = {},
): Tensor {
  const { x, window } = poolWindow("avgPool2d", input, kernelSize, options, false);
  const [n, c, h, w] = x.shape;
  const [oh, ow] = window.out;
  const taps = window.kernel[0] * window.kernel[1];
  const includePad = options.countIncludePad ?? true;
  const override = options.divisorOverride ?? null;
  if (override !== null && !(Number.isInteger(override) && override > 0)) {
    throw new RangeError(`avgPool2d: divisorOverride must be a positive integer, got ${override}`);
  }
  const sums = unfold2d(x, window, 0).reshape([n, c, taps, oh * ow]).sum(2);
  let divisor: Tensor | number;
  if (override !== null) divisor = override;
  else {
    const key = `${x.device}|${x.dtype}|${h},${w}|${JSON.stringify(window)}|${includePad}`;
    divisor = cachedConstant(divisorCache, 64, key, x.device, () => {
      // PyTorch's rule: a window is clipped to the padded input; without
      // countIncludePad, further to the input itself.
      const counts = (size: number, d: number) =>
        Array.from({ length: window.out[d] }, (_, o) => {
          const start = o * window.stride[d] - window.padding[d];
          const end = Math.min(start + window.kernel[d], size + window.padding[d]);
          if (includePad) return end - start;
          return Math.min(end, size) - Math.max(start, 0);
        });
      const rows = counts(h, 0);
      const cols = counts(w, 1);
      const values = rows.flatMap((r) => cols.map((q) => r * q));
      return tensor(values, { dtype: x.dtype, device: x.device });
    });
  }
  const y = sums.div(divisor).reshape([n, c, oh, ow]);
  return input.ndim === 3 ? y.squeeze(0) : y;
}

const adaptiveCache = new Map<string, Tensor>();

/** The [out, size] matrix averaging PyTorch's adaptive windows along one dim. */
function adaptiveMatrix(size: number, out: number, x: Tensor): Tensor {
  const key = `${x.device}|${x.dtype}|${size}|${out}`;
  return cachedConstant(adaptiveCache, 64, key, x.device, () => {
    const values = new Array<number>(out * size).fill(0);
    for (let i = 0; i < out; i++) {
      const start = Math.floor((i * size) / out);
      const end = Math.ceil(((i + 1) * size) / out);
      for (let j = start; j < end; j++) values[i * size + j] = 1 / (end - start);
    }
    return tensor(values, { shape: [out, size], dtype: x.dtype, device: x.device });
  });
}

/**
 * Average pooling to a fixed output size [outH, outW] (a number for both;
 * null keeps that dim), as `torch.nn.functional.adaptive_avg_pool2d`.
 * Window i of a dim covers [floor(i·size/out), ceil((i+1)·size/out)).
 */
export function adaptiveAvgPool2d(
  input: Tensor,
  outputSize: number | readonly [number | null, number | null],
): Tensor {
  // Intermediates go with the graph at backward, not with the GC.
  return forwardScope(() => adaptiveAvgPool2dUnscoped(input, outputSize));
}

function adaptiveAvgPool2dUnscoped(
  input: Tensor,
  outputSize: number | readonly [number | null, number | null],
): Tensor {
  const x = batched("adaptiveAvgPool2d", input, 4);
  const [, , h, w] = x.shape;
  const sizes = typeof outputSize === "number" ? [outputSize, outputSize] : [...outputSize];
  const [oh, ow] = [sizes[0] ?? h, sizes[1] ?? w];
  if (sizes.length !== 2 || ![oh, ow].every((s) => Number.isInteger(s) && s >= 1)) {
    throw new RangeError(
      `adaptiveAvgPool2d: outputSize must be a positive integer or a pair of them (or null), got ${
        JSON.stringify(outputSize)
      }`,
    );
  }
  // Windows are rectangles, so the average separates: rows, then columns.
  let y = x;
  if (oh !== h) y = adaptiveMatrix(h, oh, x).matmul(y);
  if (ow !== w) y = y.matmul(adaptiveMatrix(w, ow, x).t());
  if (y === x) y = x.clone();
  return input.ndim === 3 ? y.squeeze(0) : y;
}

/** Options of {@link pad}. */
export interface PadOptions {
  /**
   * `"constant"` (default), `"reflect"` (mirror without the edge),
   * `"replicate"` (repeat the edge) or `"circular"` (wrap around).
   */
  mode?: "constant" | "reflect" | "replicate" | "circular";
  /** The fill of `"constant"` (default 0). */
  value?: number;
}

/**
 * Pads the last dims of `input`, as `torch.nn.functional.pad`: `pad` lists
 * (before, after) amounts starting from the last dim, e.g. `[left, right,
 * top, bottom]`. `"constant"` pads any dims (negative amounts crop);
 * `"reflect"` and `"replicate"` pad up to the last 3 dims of a batched input.
 */
export function pad(input: Tensor, pad: readonly number[], options: PadOptions = {}): Tensor {
  // Intermediates go with the graph at backward, not with the GC.
  return forwardScope(() => padUnscoped(input, pad, options));
}

function padUnscoped(input: Tensor, pad: readonly number[], options: PadOptions = {}): Tensor {
  checkTensor("pad", "input", input);
  const mode = options.mode ?? "constant";
  if (
    !Array.isArray(pad) || pad.length % 2 !== 0 || pad.length / 2 > input.ndim ||
    pad.some((p) => !Number.isInteger(p))
  ) {
    throw new RangeError(
      `pad: expected an even number of integer amounts, at most 2 per dim of shape ${
        formatShape(input.shape)
      }, got ${JSON.stringify(pad)}`,
    );
  }
  if (mode !== "constant" && mode !== "reflect" && mode !== "replicate" && mode !== "circular") {
    throw new RangeError(
      `pad: mode must be "constant", "reflect", "replicate" or "circular", got ${
        JSON.stringify(mode)
      }`,
    );
  }
  if (mode !== "constant" && (pad.length / 2 > 3 || pad.length / 2 >= input.ndim)) {
    throw new RangeError(
      `pad: ${mode} padding of ${
        pad.length / 2
      } dims needs a batched input with more dims, got shape ${formatShape(input.shape)}`,
    );
  }
  let y = input;
  for (let i = 0; i < pad.length / 2; i++) {
    const dim = input.ndim - 1 - i;
    let [before, after] = [pad[2 * i], pad[2 * i + 1]];
    const size = y.shape[dim];
    if (mode === "constant") {
      // Negative amounts crop first.
      if (before < 0 || after < 0) {
        const start = Math.max(0, -before);
        const length = size - start - Math.max(0, -after);
        if (length < 0) {
          throw new RangeError(
            `pad: cropping ${-before} and ${-after} from dim ${dim} of size ${size}`,
          );
        }
        y = y.narrow(dim, start, length);
        before = Math.max(0, before);
        after = Math.max(0, after);
      }
      if (before === 0 && after === 0) continue;
      const value = options.value ?? 0;
      const filler = (n: number) =>
        full(y.shape.map((s, j) => (j === dim ? n : s)), value, {
          dtype: y.dtype,
          device: y.device,
        });
      const parts = [
        ...(before > 0 ? [filler(before)] : []),
        y,
        ...(after > 0 ? [filler(after)] : []),
      ];
      y = cat(parts, dim);
      continue;
    }
    if (before < 0 || after < 0) {
      throw new RangeError(
        `pad: ${mode} padding amounts must be non-negative, got ${JSON.stringify(pad)}`,
      );
    }
    if (mode === "reflect" && (before >= size || after >= size)) {
      throw new RangeError(
        `pad: reflect padding (${before}, ${after}) must be less than the size ${size} of dim ${dim}`,
      );
    }
    if (mode === "circular" && (before > size || after > size)) {
      throw new RangeError(
        `pad: circular padding (${before}, ${after}) must be at most the size ${size} of dim ${dim}`,
      );
    }
    if (before === 0 && after === 0) continue;
    const index = Array.from({ length: before + size + after }, (_, j) => {
      const p = j - before;
      if (mode === "replicate") return Math.min(Math.max(p, 0), size - 1);
      if (mode === "circular") return (p + size) % size;
      return p < 0 ? -p : p >= size ? 2 * (size - 1) - p : p;
    });
    y = y.indexSelect(dim, tensor(index, { dtype: "int32", device: y.device }));
  }
  return y === input ? input.clone() : y;
}
