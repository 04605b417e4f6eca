/**
 * `unfold2d`: the sliding windows of a 2-d convolution or pooling as
 * columns (one `im2col` kernel), with the `col2im` kernel as its gradient;
 * `fold2d` is its mirror (a transposed convolution's last step).
 * Convolution and pooling in `nn.functional` are built on them.
 * @module
 */

import type { WindowView } from "../backends/backend.ts";
import { record } from "../autograd.ts";
import { formatShape, sameShape, type Shape } from "../shape.ts";
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
export function windowView(x: { readonly shape: Shape }, window: Window2d): WindowView {
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
  if (x.ndim !== 4) {
    throw new RangeError(
      `unfold2d: expected a [N, C, H, W] input, got shape ${formatShape(x.shape)}`,
    );
  }
  return windows("unfold2d", x, x.shape, window, padValue, true);
}

/**
 * The adjoint of {@link unfold2d}: columns [N, C, kernelH, kernelW, outH,
 * outW] summed into a [N, C, ...size] image, each entry into the element
 * its tap reads; entries in the padding are dropped and elements no tap
 * reads are 0, so `size` may exceed what the windows cover (a transposed
 * convolution's outputPadding). The gradient unfolds.
 */
export function fold2d(cols: Tensor, size: readonly [number, number], window: Window2d): Tensor {
  const [n, c] = cols.shape;
  if (cols.ndim !== 6 || !sameShape(cols.shape, [n, c, ...window.kernel, ...window.out])) {
    throw new RangeError(
      `fold2d: expected columns [N, C, ${
        [...window.kernel, ...window.out].join(", ")
      }], got shape ${formatShape(cols.shape)}`,
    );
  }
  return windows("fold2d", cols, [n, c, ...size], window, 0, false);
}

/** im2col (`unfold`) or col2im of `x`, between `image` and its columns; the gradient: the other. */
function windows(
  op: string,
  x: Tensor,
  image: Shape,
  window: Window2d,
  padValue: number,
  unfold: boolean,
): Tensor {
  requireFloat(op, x);
  const layout = { ...windowView({ shape: image }, window), dtype: x.dtype };
  const columns = [image[0], image[1], ...window.kernel, ...window.out];
  const run = (src: Tensor, toColumns: boolean) => {
    const out = empty(toColumns ? columns : image, x.dtype, x.device);
    if (out.numel() === 0) return out;
    const ob = out.storage.buffer();
    if (src.numel() === 0) {
      // Nothing to read: every tap is padding, every element unreached.
      const value = toColumns ? padValue : 0;
      launch(x.device, "fill", { out: ob, numel: out.numel(), value, dtype: x.dtype });
    } else if (toColumns) {
      launch(x.device, "im2col", { ...layout, x: src.storage.buffer(op), out: ob, padValue });
    } else launch(x.device, "col2im", { ...layout, x: src.storage.buffer(op), out: ob });
    return out;
  };
  // Each direction's gradient is the other, recorded too (higher-order gradients).
  const apply = (src: Tensor, toColumns: boolean): Tensor =>
    record(op, [src], run(src, toColumns), ([g]) => [apply(g!, !toColumns)]);
  return apply(x, unfold);
}
