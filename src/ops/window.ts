/**
 * `unfold2d`: the sliding windows of a 2-d convolution or pooling as
 * columns (one `im2col` kernel), with the `col2im` kernel as its gradient.
 * Convolution and pooling in `nn.functional` are built on it.
 * @module
 */

import type { WindowView } from "../backends/backend.ts";
import { record } from "../autograd.ts";
import { formatShape } from "../shape.ts";
import type { Tensor } from "../tensor.ts";
import { empty, launch, requireFloat } from "./util.ts";

/** Where the windows of {@link unfold2d} sit: per dim [rows, columns]. */
export interface Window2d {
  /** Kernel size. */
  readonly kernel: readonly [number, number];
  /** Step between windows. */
  readonly stride: readonly [number, number];
  /** Implicit padding before the first row / column. */
  readonly padding: readonly [number, number];
  /** Step between kernel taps. */
  readonly dilation: readonly [number, number];
  /** Windows down and across (the output's spatial size). */
  readonly out: readonly [number, number];
}

/** The kernels' {@link WindowView} of `window` over `x` [N, C, H, W]. */
export function windowView(x: Tensor, window: Window2d): WindowView {
  const [batch, channels, height, width] = x.shape;
  const { kernel, stride, padding, dilation, out } = window;
  return {
    ...{ batch, channels, height, width, kernelH: kernel[0], kernelW: kernel[1] },
    ...{ strideH: stride[0], strideW: stride[1], padH: padding[0], padW: padding[1] },
    ...{ dilationH: dilation[0], dilationW: dilation[1], outH: out[0], outW: out[1] },
  };
}

/**
 * The windows of a [N, C, H, W] float tensor unfolded to
 * [N, C, kernelH, kernelW, outH, outW]: entry (n, c, ki, kj, oh, ow) is the
 * element tap (ki, kj) of window (oh, ow) reads, `padValue` where it falls
 * in the padding. The gradient sums each entry back into its element.
 */
export function unfold2d(x: Tensor, window: Window2d, padValue = 0): Tensor {
  requireFloat("unfold2d", x);
  if (x.ndim !== 4) {
    throw new RangeError(
      `unfold2d: expected a [N, C, H, W] input, got shape ${formatShape(x.shape)}`,
    );
  }
  const layout = { ...windowView(x, window), dtype: x.dtype };
  const { batch, channels, kernelH, kernelW, outH, outW } = layout;
  const out = empty([batch, channels, kernelH, kernelW, outH, outW], x.dtype, x.device);
  if (out.numel() > 0) {
    const xb = x.storage.buffer("unfold2d");
    const ob = out.storage.buffer();
    launch(x.device, "im2col", { ...layout, x: xb, out: ob, padValue });
  }
  return record("unfold2d", [x], out, ([g]) => {
    const grad = empty(x.shape, x.dtype, x.device);
    const n = grad.numel();
    if (n === 0) return [grad];
    const gb = g!.storage.buffer("unfold2d backward");
    const ob = grad.storage.buffer();
    if (out.numel() === 0) {
      launch(x.device, "fill", { out: ob, numel: n, value: 0, dtype: x.dtype });
    } else launch(x.device, "col2im", { ...layout, x: gb, out: ob });
    return [grad];
  });
}
