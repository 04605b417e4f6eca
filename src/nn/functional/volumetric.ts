/**
 * Volumetric (3-d) convolution and pooling, as `torch.nn.functional`:
 * `conv3d`, `convTranspose3d`, `maxPool3d`, `avgPool3d`,
 * `adaptiveAvgPool3d` and `adaptiveMaxPool3d`, for [N, C, D, H, W] (or
 * unbatched [C, D, H, W]) inputs.
 *
 * Composed from the 2-d ops, so every backend runs them and autograd is
 * automatic, in a few large ops rather than one per depth slice:
 * - `conv3d` unfolds the depth windows (the 2-d `im2col` over depth × 1),
 *   stacks each output depth's kD input slices into the channels and runs
 *   one `conv2d` over the batch of output depths with the weight's depth
 *   taps folded into its input channels;
 * - `convTranspose3d` runs one `convTranspose2d` over the batch of input
 *   depth slices with the depth taps folded into its output channels, then
 *   sums each tap into its output depth with the 2-d `col2im` over depth × 1;
 * - the pools separate: a 2-d pool over (H, W) of every depth slice, then a
 *   2-d pool over (D, 1) of the result (max of maxima; averages multiply
 *   their per-dim divisors, which is PyTorch's divisor rule too).
 * @module
 */

import { fold2d, unfold2d } from "../../ops/window.ts";
import { formatShape } from "../../shape.ts";
import { forwardScope } from "../../storage.ts";
import type { Tensor } from "../../tensor.ts";
import { adaptiveMaxPool2d } from "./adaptive_max_pool.ts";
import { adaptiveAvgPool2d, avgPool2d, conv2d, maxPool2d, pad } from "./conv.ts";
import { convTranspose2d } from "./conv_transpose.ts";
import {
  batched,
  checkConvBias,
  checkConvDtypes,
  checkConvGroups,
  checkConvWeight,
  checkPoolPadding,
  checkTransposedGroups,
  convPadding,
  outLength,
  transposedOutputSize,
  triple,
} from "./window_args.ts";

/** A 3-d size as PyTorch takes it: one number for every dim, or [depth, height, width]. */
export type Size3 = number | readonly [number, number, number];

/** Options of {@link conv3d}. */
export interface Conv3dOptions {
  /** Step between windows (default 1). */
  stride?: Size3;
  /**
   * Zero padding on both sides of each spatial dim, or `"valid"` (none) or
   * `"same"` (output size = input size; stride 1). Default 0.
   */
  padding?: Size3 | "valid" | "same";
  /** Step between kernel taps (default 1). */
  dilation?: Size3;
  /** Channel groups: input and output channels split into this many independent convolutions (default 1). */
  groups?: number;
}

/**
 * 3-d convolution (cross-correlation, as PyTorch) of `input` [N, C, D, H, W]
 * (or [C, D, H, W]) with `weight` [Cout, C / groups, kD, kH, kW], plus
 * `bias` [Cout]: as `torch.nn.functional.conv3d`.
 */
export function conv3d(
  input: Tensor,
  weight: Tensor,
  bias?: Tensor | null,
  options: Conv3dOptions = {},
): Tensor {
  // Intermediates go with the graph at backward, not with the GC.
  return forwardScope(() => conv3dUnscoped(input, weight, bias ?? null, options));
}

function conv3dUnscoped(
  input: Tensor,
  weight: Tensor,
  bias: Tensor | null,
  options: Conv3dOptions,
): Tensor {
  const op = "conv3d";
  let x = batched(op, input, 5);
  checkConvWeight(op, x, weight, bias, "out_channels, in_channels / groups, kD, kH, kW");
  checkConvDtypes(op, x, weight, bias);
  const groups = options.groups ?? 1;
  const c = x.shape[1];
  const [cout, cPerGroup, kd, kh, kw] = weight.shape;
  checkConvGroups(op, x, weight, groups);
  checkConvBias(op, bias, cout);
  const kernel = [kd, kh, kw];
  const stride = triple(op, "stride", options.stride ?? 1, 1);
  const dilation = triple(op, "dilation", options.dilation ?? 1, 1);
  const resolved = convPadding(op, options.padding ?? 0, kernel, stride, dilation);
  const padding = resolved.padding as [number, number, number];
  if (resolved.after) x = pad(x, resolved.after);
  const [n, , d, h, w] = x.shape;
  const out = kernel.map((k, i) =>
    outLength(x.shape[2 + i], k, stride[i], padding[i], dilation[i], false)
  );
  if (out.some((o) => o < 1)) {
    throw new RangeError(
      `${op}: the kernel ${
        kernel.join("x")
      } (dilation ${dilation}) is larger than the padded input ${
        [d, h, w].map((s, i) => s + 2 * padding[i]).join("x")
      } (input of shape ${formatShape(input.shape)})`,
    );
  }
  const od = out[0];
  let slices: Tensor;
  if (kd === 1 && stride[0] === 1 && padding[0] === 0) {
    slices = x.permute([0, 2, 1, 3, 4]).reshape([n * d, c, h, w]);
  } else {
    // [N, C, kD, 1, oD, H·W]: tap k of output depth o reads input depth o·s + k·dil - p.
    const cols = unfold2d(x.reshape([n, c, d, h * w]), {
      kernel: [kd, 1],
      stride: [stride[0], 1],
      padding: [padding[0], 0],
      dilation: [dilation[0], 1],
      out: [od, h * w],
    });
    // Channels ordered (c, k): the weight's [C / groups, kD] flatten to the same order.
    slices = cols.reshape([n, c, kd, od, h, w]).permute([0, 3, 1, 2, 4, 5])
      .reshape([n * od, c * kd, h, w]);
  }
  const y = conv2d(slices, weight.reshape([cout, cPerGroup * kd, kh, kw]), bias, {
    stride: [stride[1], stride[2]],
    padding: [padding[1], padding[2]],
    dilation: [dilation[1], dilation[2]],
    groups,
  });
  const result = y.reshape([n, od, cout, out[1], out[2]]).permute([0, 2, 1, 3, 4]);
  return input.ndim === 4 ? result.squeeze(0) : result;
}

/** Options of {@link convTranspose3d}. */
export interface ConvTranspose3dOptions {
  /** Added to every output channel: [Cout] (default none). */
  bias?: Tensor | null;
  /** Step between the input elements' places in the output (default 1). */
  stride?: Size3;
  /** Cut from both sides of each dim of the full output (default 0). */
  padding?: Size3;
  /** Added after each dim's far edge; smaller than stride or dilation (default 0). */
  outputPadding?: Size3;
  /** Channel groups (default 1). */
  groups?: number;
  /** Step between kernel taps (default 1). */
  dilation?: Size3;
}

/**
 * 3-d transposed convolution of `input` [N, Cin, D, H, W] (or
 * [Cin, D, H, W]) with `weight` [Cin, Cout / groups, kD, kH, kW], as
 * `torch.nn.functional.conv_transpose3d`. Each output size is
 * (in - 1)·stride - 2·padding + dilation·(k - 1) + outputPadding + 1.
 */
export function convTranspose3d(
  input: Tensor,
  weight: Tensor,
  options: ConvTranspose3dOptions = {},
): Tensor {
  // Intermediates go with the graph at backward, not with the GC.
  return forwardScope(() => convTranspose3dUnscoped(input, weight, options));
}

function convTranspose3dUnscoped(
  input: Tensor,
  weight: Tensor,
  options: ConvTranspose3dOptions,
): Tensor {
  const op = "convTranspose3d";
  const x = batched(op, input, 5);
  const bias = options.bias ?? null;
  const layout = "in_channels, out_channels / groups, kD, kH, kW";
  checkConvWeight(op, x, weight, bias, layout);
  checkConvDtypes(op, x, weight, bias);
  const groups = options.groups ?? 1;
  const [n, c, d, h, w] = x.shape;
  const [cin, coutPerGroup, kd, kh, kw] = weight.shape;
  checkTransposedGroups(op, x, weight, groups, layout);
  const cout = coutPerGroup * groups;
  checkConvBias(op, bias, cout);
  const kernel = [kd, kh, kw];
  const stride = triple(op, "stride", options.stride ?? 1, 1);
  const padding = triple(op, "padding", options.padding ?? 0, 0);
  const dilation = triple(op, "dilation", options.dilation ?? 1, 1);
  const outputPadding = triple(op, "outputPadding", options.outputPadding ?? 0, 0);
  const size = transposedOutputSize(op, x, kernel, { stride, padding, dilation, outputPadding });
  // Every input depth slice at once, each depth tap an output channel: within a group the
  // channels are ordered (cout, k), which is the weight's [Cout / groups, kD] flattened.
  const planes = convTranspose2d(
    x.permute([0, 2, 1, 3, 4]).reshape([n * d, c, h, w]),
    weight.reshape([cin, coutPerGroup * kd, kh, kw]),
    {
      stride: [stride[1], stride[2]],
      padding: [padding[1], padding[2]],
      outputPadding: [outputPadding[1], outputPadding[2]],
      dilation: [dilation[1], dilation[2]],
      groups,
    },
  );
  const [oh, ow] = [size[1], size[2]];
  let y: Tensor;
  if (kd === 1 && stride[0] === 1 && padding[0] === 0 && outputPadding[0] === 0) {
    y = planes.reshape([n, d, cout, oh, ow]).permute([0, 2, 1, 3, 4]);
  } else {
    // Columns [N, Cout, kD, 1, D, oH·oW]; col2im sums tap k of input depth i into depth
    // i·s + k·dil - p (outputPadding: depths no tap reaches stay 0).
    const cols = planes.reshape([n, d, cout, kd, oh * ow]).permute([0, 2, 3, 1, 4])
      .reshape([n, cout, kd, 1, d, oh * ow]);
    y = fold2d(cols, [size[0], oh * ow], {
      kernel: [kd, 1],
      stride: [stride[0], 1],
      padding: [padding[0], 0],
      dilation: [dilation[0], 1],
      out: [d, oh * ow],
    }).reshape([n, cout, size[0], oh, ow]);
  }
  if (bias) y = y.add(bias.reshape([cout, 1, 1, 1]));
  return input.ndim === 4 ? y.squeeze(0) : y;
}

/** Options of {@link maxPool3d}. */
export interface MaxPool3dOptions {
  /** Step between windows (default: the kernel size). */
  stride?: Size3 | null;
  /** Implicit -inf padding on both sides (at most half the kernel; default 0). */
  padding?: Size3;
  /** Step between kernel taps (default 1). */
  dilation?: Size3;
  /** Round the output size up instead of down (default false). */
  ceilMode?: boolean;
}

/** Options of {@link avgPool3d}. */
export interface AvgPool3dOptions {
  /** Step between windows (default: the kernel size). */
  stride?: Size3 | null;
  /** Implicit zero padding on both sides (at most half the kernel; default 0). */
  padding?: Size3;
  /** Round the output size up instead of down (default false). */
  ceilMode?: boolean;
  /** Count padding zeros in each window's divisor (default true). */
  countIncludePad?: boolean;
  /** Divide every window's sum by this instead. */
  divisorOverride?: number | null;
}

interface Pool3d {
  x: Tensor;
  kernel: [number, number, number];
  stride: [number, number, number];
  padding: [number, number, number];
  dilation: [number, number, number];
  ceilMode: boolean;
  out: number[];
}

/** The checked window of a 3-d pool, with PyTorch's rules and 3-d messages. */
function poolArgs(
  op: string,
  input: Tensor,
  kernelSize: Size3,
  options: MaxPool3dOptions,
): Pool3d {
  const x = batched(op, input, 5);
  const kernel = triple(op, "kernelSize", kernelSize, 1);
  const stride = options.stride == null ? kernel : triple(op, "stride", options.stride, 1);
  const padding = triple(op, "padding", options.padding ?? 0, 0);
  const dilation = triple(op, "dilation", options.dilation ?? 1, 1);
  checkPoolPadding(op, padding, kernel);
  const ceilMode = options.ceilMode ?? false;
  const out = kernel.map((k, i) =>
    outLength(x.shape[2 + i], k, stride[i], padding[i], dilation[i], ceilMode)
  );
  if (out.some((o) => o < 1)) {
    throw new RangeError(
      `${op}: output size ${out.join("x")} is too small for input of shape ${
        formatShape(input.shape)
      } (kernel ${JSON.stringify(kernel)}, padding ${JSON.stringify(padding)}, dilation ${
        JSON.stringify(dilation)
      })`,
    );
  }
  return { x, kernel, stride, padding, dilation, ceilMode, out };
}

/**
 * Max pooling over [N, C, D, H, W] (or [C, D, H, W]) windows, as
 * `torch.nn.functional.max_pool3d`; the gradient goes to each window's
 * maximum (the first one in (d, h, w) order on ties).
 */
export function maxPool3d(
  input: Tensor,
  kernelSize: Size3,
  options: MaxPool3dOptions = {},
): Tensor {
  const { x, kernel, stride, padding, dilation, ceilMode, out } = poolArgs(
    "maxPool3d",
    input,
    kernelSize,
    options,
  );
  const [n, c, d, h, w] = x.shape;
  // Intermediates go with the graph at backward, not with the GC.
  return forwardScope(() => {
    const planes = maxPool2d(x.reshape([n, c * d, h, w]), [kernel[1], kernel[2]], {
      stride: [stride[1], stride[2]],
      padding: [padding[1], padding[2]],
      dilation: [dilation[1], dilation[2]],
      ceilMode,
    });
    const y = maxPool2d(planes.reshape([n, c, d, out[1] * out[2]]), [kernel[0], 1], {
      stride: [stride[0], 1],
      padding: [padding[0], 0],
      dilation: [dilation[0], 1],
      ceilMode,
    }).reshape([n, c, ...out]);
    return input.ndim === 4 ? y.squeeze(0) : y;
  });
}

/**
 * Average pooling over [N, C, D, H, W] (or [C, D, H, W]) windows, as
 * `torch.nn.functional.avg_pool3d` (its divisor rules for padding,
 * `ceilMode` and `divisorOverride` included).
 */
export function avgPool3d(
  input: Tensor,
  kernelSize: Size3,
  options: AvgPool3dOptions = {},
): Tensor {
  const op = "avgPool3d";
  const { x, kernel, stride, padding, ceilMode, out } = poolArgs(op, input, kernelSize, {
    stride: options.stride,
    padding: options.padding,
    ceilMode: options.ceilMode,
  });
  // PyTorch's avg_pool3d (unlike max_pool3d and the 2-d pools) rejects an input dim shorter
  // than the kernel, padding not counted.
  const spatial = x.shape.slice(2);
  if (spatial.some((s, i) => s < kernel[i])) {
    throw new RangeError(
      `${op}: input of shape ${formatShape(input.shape)} has spatial size ${
        spatial.join("x")
      }, smaller than the kernel ${
        kernel.join("x")
      } (PyTorch's avg_pool3d needs each input dim, before padding, at least the kernel size)`,
    );
  }
  const override = options.divisorOverride ?? null;
  if (override !== null && !(Number.isInteger(override) && override > 0)) {
    throw new RangeError(`${op}: divisorOverride must be a positive integer, got ${override}`);
  }
  const countIncludePad = options.countIncludePad ?? true;
  // With an override both passes sum (divisor 1) and the override divides once.
  const divisorOverride = override === null ? null : 1;
  const [n, c, d, h, w] = x.shape;
  // Intermediates go with the graph at backward, not with the GC.
  return forwardScope(() => {
    const planes = avgPool2d(x.reshape([n, c * d, h, w]), [kernel[1], kernel[2]], {
      stride: [stride[1], stride[2]],
      padding: [padding[1], padding[2]],
      ceilMode,
      countIncludePad,
      divisorOverride,
    });
    let y = avgPool2d(planes.reshape([n, c, d, out[1] * out[2]]), [kernel[0], 1], {
      stride: [stride[0], 1],
      padding: [padding[0], 0],
      ceilMode,
      countIncludePad,
      divisorOverride,
    }).reshape([n, c, ...out]);
    if (override !== null) y = y.div(override);
    return input.ndim === 4 ? y.squeeze(0) : y;
  });
}

/** An adaptive pool's output size: a number for every dim, or per dim (null keeps the input's). */
export type AdaptiveSize3 = number | readonly [number | null, number | null, number | null];

function adaptiveArgs(
  op: string,
  input: Tensor,
  outputSize: AdaptiveSize3,
): { x: Tensor; out: [number, number, number] } {
  const x = batched(op, input, 5);
  const sizes = typeof outputSize === "number" ? [outputSize, outputSize, outputSize] : [
    ...outputSize,
  ];
  const out = sizes.map((s, i) => s ?? x.shape[2 + i]);
  if (sizes.length !== 3 || !out.every((s) => Number.isInteger(s) && s >= 1)) {
    throw new RangeError(
      `${op}: outputSize must be a positive integer or a triple of them (or null), got ${
        JSON.stringify(outputSize)
      }`,
    );
  }
  if (x.shape.slice(2).some((s) => s === 0)) {
    throw new RangeError(`${op}: input of shape ${formatShape(input.shape)} has an empty window`);
  }
  return { x, out: out as [number, number, number] };
}

/**
 * An adaptive 3-d pool as two of `pool2d`: over (H, W) of every depth
 * slice, then over (D, 1) of the result (the adaptive windows separate).
 */
function adaptivePool3d(
  op: string,
  input: Tensor,
  outputSize: AdaptiveSize3,
  pool2d: (x: Tensor, outputSize: readonly [number | null, number | null]) => Tensor,
): Tensor {
  const { x, out } = adaptiveArgs(op, input, outputSize);
  const [n, c, d, h, w] = x.shape;
  // Intermediates go with the graph at backward, not with the GC.
  return forwardScope(() => {
    const planes = pool2d(x.reshape([n, c * d, h, w]), [out[1], out[2]]);
    const y = pool2d(planes.reshape([n, c, d, out[1] * out[2]]), [out[0], null])
      .reshape([n, c, ...out]);
    return input.ndim === 4 ? y.squeeze(0) : y;
  });
}

/**
 * Average pooling of [N, C, D, H, W] (or [C, D, H, W]) to `outputSize`, as
 * `torch.nn.functional.adaptive_avg_pool3d`: window i of a dim covers
 * [floor(i·size/out), ceil((i+1)·size/out)).
 */
export function adaptiveAvgPool3d(input: Tensor, outputSize: AdaptiveSize3): Tensor {
  return adaptivePool3d("adaptiveAvgPool3d", input, outputSize, adaptiveAvgPool2d);
}

/**
 * Max pooling of [N, C, D, H, W] (or [C, D, H, W]) to `outputSize`, as
 * `torch.nn.functional.adaptive_max_pool3d` (values only); PyTorch's
 * adaptive windows, the gradient to each window's maximum.
 */
export function adaptiveMaxPool3d(input: Tensor, outputSize: AdaptiveSize3): Tensor {
  return adaptivePool3d("adaptiveMaxPool3d", input, outputSize, adaptiveMaxPool2d);
}
