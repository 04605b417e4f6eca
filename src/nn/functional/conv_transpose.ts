/**
 * Transposed convolution, as `torch.nn.functional`: `convTranspose2d` and
 * `convTranspose1d` (the gradient of a convolution with respect to its
 * input, used as a learned upsampling).
 *
 * Composed without kernels of its own, so it runs on every backend: per
 * group one matrix product weightᵀ · input gives each input element's
 * contribution to every kernel tap, as columns [N, Cout, kH, kW, H, W];
 * `fold2d` (the `col2im` kernel) then sums the columns into the output
 * image, whose windows are the input's elements. Gradients come from
 * autograd through the product and the fold (whose gradient is `im2col`).
 * @module
 */

import { fold2d } from "../../ops/window.ts";
import { formatShape } from "../../shape.ts";
import { forwardScope } from "../../storage.ts";
import type { Tensor } from "../../tensor.ts";
import { checkTensor } from "../util.ts";
import type { Size2 } from "./conv.ts";
import type { Size1 } from "./pool1d.ts";
import {
  batched,
  checkConvBias,
  checkConvDtypes,
  checkConvWeight,
  checkTransposedGroups,
  pair,
  transposedOutputSize,
} from "./window_args.ts";
import { owned } from "../../ops_composite/owned.ts";

/** Options of {@link convTranspose2d}. */
export interface ConvTranspose2dOptions {
  /** Added to every output channel: [Cout] (default none). */
  bias?: Tensor | null;
  /** Step between the input elements' places in the output (default 1). */
  stride?: Size2;
  /** Rows / columns cut from both sides of the full output (default 0). */
  padding?: Size2;
  /**
   * Rows / columns added after the output's bottom and right edges; smaller
   * than stride or dilation (default 0).
   */
  outputPadding?: Size2;
  /** Channel groups: independent convolutions of as many slices of the channels (default 1). */
  groups?: number;
  /** Step between kernel taps (default 1). */
  dilation?: Size2;
}

/** Options of {@link convTranspose1d}. */
export interface ConvTranspose1dOptions {
  /** Added to every output channel: [Cout] (default none). */
  bias?: Tensor | null;
  /** Step between the input elements' places in the output (default 1). */
  stride?: Size1;
  /** Elements cut from both ends of the full output (default 0). */
  padding?: Size1;
  /** Elements added after the output's end; smaller than stride or dilation (default 0). */
  outputPadding?: Size1;
  /** Channel groups (default 1). */
  groups?: number;
  /** Step between kernel taps (default 1). */
  dilation?: Size1;
}

/**
 * 2-d transposed convolution of `input` [N, Cin, H, W] (or [Cin, H, W])
 * with `weight` [Cin, Cout / groups, kH, kW], as
 * `torch.nn.functional.conv_transpose2d`. The output is [N, Cout, outH,
 * outW] with outH = (H - 1)·stride - 2·padding + dilation·(kH - 1) +
 * outputPadding + 1 (likewise outW).
 */
export function convTranspose2d(
  input: Tensor,
  weight: Tensor,
  options: ConvTranspose2dOptions = {},
): Tensor {
  // Intermediates go with the graph at backward, not with the GC.
  return owned(
    () => forwardScope(() => convTranspose2dUnscoped("convTranspose2d", input, weight, options)),
    input,
    weight,
  );
}

function convTranspose2dUnscoped(
  op: string,
  input: Tensor,
  weight: Tensor,
  options: ConvTranspose2dOptions,
): Tensor {
  const x = batched(op, input, 4);
  const bias = options.bias ?? null;
  const layout = "in_channels, out_channels / groups, kH, kW";
  checkConvWeight(op, x, weight, bias, layout);
  const groups = options.groups ?? 1;
  const [n, , h, w] = x.shape;
  const [cin, coutPerGroup, kh, kw] = weight.shape;
  checkTransposedGroups(op, x, weight, groups, layout);
  checkConvDtypes(op, x, weight, bias);
  const cout = coutPerGroup * groups;
  checkConvBias(op, bias, cout);
  const stride = pair(op, "stride", options.stride ?? 1, 1);
  const padding = pair(op, "padding", options.padding ?? 0, 0);
  const dilation = pair(op, "dilation", options.dilation ?? 1, 1);
  const outputPadding = pair(op, "outputPadding", options.outputPadding ?? 0, 0);
  const kernel: [number, number] = [kh, kw];
  const size = transposedOutputSize(op, x, kernel, {
    stride,
    padding,
    dilation,
    outputPadding,
  }) as [number, number];
  // Per group: [Cout/g · kH · kW, Cin/g] times [Cin/g, H · W].
  const k = coutPerGroup * kh * kw;
  const cols = groups === 1
    ? weight.reshape([cin, k]).t().matmul(x.reshape([n, cin, h * w]))
    : weight.reshape([groups, cin / groups, k]).transpose(1, 2)
      .matmul(x.reshape([n, groups, cin / groups, h * w]));
  let y = fold2d(cols.reshape([n, cout, kh, kw, h, w]), size, {
    kernel,
    stride,
    padding,
    dilation,
    out: [h, w],
  });
  if (bias) y = y.add(bias.reshape([cout, 1, 1]));
  return input.ndim === 3 ? y.squeeze(0) : y;
}

/**
 * 1-d transposed convolution of `input` [N, Cin, L] (or [Cin, L]) with
 * `weight` [Cin, Cout / groups, k], as
 * `torch.nn.functional.conv_transpose1d` (the 2-d one over a height of 1).
 */
export function convTranspose1d(
  input: Tensor,
  weight: Tensor,
  options: ConvTranspose1dOptions = {},
): Tensor {
  // Intermediates go with the graph at backward, not with the GC.
  return forwardScope(() => convTranspose1dUnscoped(input, weight, options));
}

function convTranspose1dUnscoped(
  input: Tensor,
  weight: Tensor,
  options: ConvTranspose1dOptions,
): Tensor {
  const op = "convTranspose1d";
  const x = batched(op, input, 3);
  checkTensor(op, "weight", weight);
  if (weight.ndim !== 3) {
    throw new RangeError(
      `${op}: weight must be [in_channels, out_channels / groups, k], got shape ${
        formatShape(weight.shape)
      }`,
    );
  }
  // Checked here too so that the messages show the 1-d shapes and sizes.
  if (x.shape[1] !== weight.shape[0]) {
    throw new RangeError(
      `${op}: input of shape ${formatShape(x.shape)} has ${
        x.shape[1]
      } channels, but weight of shape ${formatShape(weight.shape)} expects ${
        weight.shape[0]
      } (the weight is [in_channels, out_channels / groups, k])`,
    );
  }
  const one = (name: string, v: Size1 | undefined, dflt: number, least: number): number => {
    const list = typeof v === "number" ? [v] : [...(v ?? [dflt])];
    if (list.length !== 1 || !Number.isInteger(list[0]) || list[0] < least) {
      throw new RangeError(
        `${op}: ${name} must be an integer >= ${least} or [one], got ${JSON.stringify(v)}`,
      );
    }
    return list[0];
  };
  const stride = one("stride", options.stride, 1, 1);
  const outputPadding = one("outputPadding", options.outputPadding, 0, 0);
  const dilation = one("dilation", options.dilation, 1, 1);
  if (outputPadding >= stride && outputPadding >= dilation) {
    throw new RangeError(
      `${op}: outputPadding ${outputPadding} must be smaller than either stride ${stride} or dilation ${dilation}`,
    );
  }
  const padding = one("padding", options.padding, 0, 0);
  const k = weight.shape[2];
  const length = (x.shape[2] - 1) * stride - 2 * padding + dilation * (k - 1) + outputPadding + 1;
  if (length < 1) {
    throw new RangeError(
      `${op}: the output length ${length} is too small for input of shape ${
        formatShape(x.shape)
      } (kernel ${k}, stride ${stride}, padding ${padding}, dilation ${dilation})`,
    );
  }
  const y = convTranspose2dUnscoped(op, x.unsqueeze(2), weight.unsqueeze(2), {
    bias: options.bias,
    stride: [1, stride],
    padding: [0, padding],
    outputPadding: [0, outputPadding],
    dilation: [1, dilation],
    groups: options.groups,
  }).squeeze(2);
  return input.ndim === 2 ? y.squeeze(0) : y;
}
