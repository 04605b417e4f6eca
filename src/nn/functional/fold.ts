/**
 * `unfold` (im2col) and `fold` (col2im), as `torch.nn.functional`'s: the
 * core's `unfold2d` / `fold2d` kernels (each the other's gradient) with
 * PyTorch's [N, C·kH·kW, L] layout and argument checks.
 * @module
 */

import { fold2d, unfold2d, type Window2d } from "../../ops/window.ts";
import { formatShape } from "../../shape.ts";
import { forwardScope } from "../../storage.ts";
import type { Tensor } from "../../tensor.ts";
import { checkFloatInput } from "../util.ts";
import type { Size2 } from "./conv.ts";
import { outLength, pair } from "./window_args.ts";
import { owned } from "../../ops_composite/owned.ts";

/** Options of {@link unfold} and {@link fold}. */
export interface FoldOptions {
  /** Step between kernel taps (default 1). */
  dilation?: Size2;
  /** Implicit zero padding on both sides of each spatial dim (default 0). */
  padding?: Size2;
  /** Step between windows (default 1). */
  stride?: Size2;
}

function pyPair(p: readonly number[]): string {
  return `(${p.join(", ")})`;
}

/** The window of `kernelSize` and `options` over a `size` image; `out` may be < 1 (the callers' errors differ). */
function foldWindow(
  op: string,
  size: readonly [number, number],
  kernelSize: Size2,
  options: FoldOptions,
): Window2d {
  const kernel = pair(op, "kernelSize", kernelSize, 1);
  const dilation = pair(op, "dilation", options.dilation ?? 1, 1);
  const padding = pair(op, "padding", options.padding ?? 0, 0);
  const stride = pair(op, "stride", options.stride ?? 1, 1);
  const out = [0, 1].map((d) =>
    outLength(size[d], kernel[d], stride[d], padding[d], dilation[d], false)
  ) as [number, number];
  return { kernel, stride, padding, dilation, out };
}

/**
 * The sliding `kernelSize` blocks of `input` [N, C, H, W] (or [C, H, W]) as
 * columns [N, C·kH·kW, L] (or [C·kH·kW, L]), L = the number of blocks, as
 * `torch.nn.functional.unfold`: row c·kH·kW + i·kW + j holds tap (i, j) of
 * channel c. The gradient sums each entry back into the element it read.
 */
export function unfold(input: Tensor, kernelSize: Size2, options: FoldOptions = {}): Tensor {
  return owned(() => {
    const op = "unfold";
    checkFloatInput(op, input);
    if (input.ndim !== 3 && input.ndim !== 4) {
      throw new RangeError(
        `${op}: expected a 3-D (unbatched) or 4-D (batched) input [N, C, H, W], got shape ${
          formatShape(input.shape)
        }`,
      );
    }
    const x = input.ndim === 3 ? input.unsqueeze(0) : input;
    const [n, c, h, w] = x.shape;
    if (c === 0 || h === 0 || w === 0) {
      throw new RangeError(
        `${op}: expected non-empty channel and spatial dims, got shape ${formatShape(input.shape)}`,
      );
    }
    const window = foldWindow(op, [h, w], kernelSize, options);
    const [oh, ow] = window.out;
    if (oh < 1 || ow < 1) {
      throw new RangeError(
        `${op}: input of spatial size ${pyPair([h, w])} with kernelSize ${
          pyPair(window.kernel)
        }, dilation ${pyPair(window.dilation)}, padding ${
          pyPair(window.padding)
        } gives ${oh} x ${ow} sliding blocks; both must be at least 1`,
      );
    }
    const [kh, kw] = window.kernel;
    // Intermediates go with the graph at backward, not with the GC.
    return forwardScope(() => {
      const y = unfold2d(x, window).reshape([n, c * kh * kw, oh * ow]);
      return input.ndim === 3 ? y.squeeze(0) : y;
    });
  }, input);
}

/**
 * The inverse layout of {@link unfold}: columns [N, C·kH·kW, L] (or
 * [C·kH·kW, L]) summed into an image [N, C, ...outputSize], each entry into
 * the element its tap reads (overlaps add up, taps in the padding drop), as
 * `torch.nn.functional.fold`. L must equal the number of blocks of
 * `outputSize`.
 */
export function fold(
  input: Tensor,
  outputSize: Size2,
  kernelSize: Size2,
  options: FoldOptions = {},
): Tensor {
  const op = "fold";
  checkFloatInput(op, input);
  if (input.ndim !== 2 && input.ndim !== 3) {
    throw new RangeError(
      `${op}: expected a 2-D (unbatched) or 3-D (batched) input [N, C·kH·kW, L], got shape ${
        formatShape(input.shape)
      }`,
    );
  }
  const [n, rows, l] = input.ndim === 2 ? [1, ...input.shape] : input.shape;
  const size = pair(op, "outputSize", outputSize, 1);
  const window = foldWindow(op, size, kernelSize, options);
  const [kh, kw] = window.kernel;
  if (rows === 0 || rows % (kh * kw) !== 0) {
    throw new RangeError(
      `${op}: dim ${input.ndim - 2} of input of shape ${
        formatShape(input.shape)
      } (${rows}) must be a non-zero multiple of the kernel's ${kh} x ${kw} = ${kh * kw} taps`,
    );
  }
  const [oh, ow] = window.out;
  const blocks = Math.max(oh, 0) * Math.max(ow, 0);
  if (oh < 1 || ow < 1 || l !== blocks) {
    throw new RangeError(
      `${op}: outputSize ${pyPair(size)} with kernelSize ${pyPair(window.kernel)}, dilation ${
        pyPair(window.dilation)
      }, padding ${pyPair(window.padding)}, stride ${
        pyPair(window.stride)
      } has ${oh} x ${ow} = ${blocks} sliding blocks, but dim ${input.ndim - 1} of input of shape ${
        formatShape(input.shape)
      } is ${l}`,
    );
  }
  const c = rows / (kh * kw);
  // A new tensor, as PyTorch's, and no view of the input comes out: both stay changeable in place.
  return owned(() =>
    forwardScope(() => {
      const y = fold2d(input.reshape([n, c, kh, kw, oh, ow]), size, window);
      return input.ndim === 2 ? y.squeeze(0) : y;
    }), input);
}
