/**
 * `im2col`: unfolds the sliding windows of a convolution or pooling into
 * columns, so that a convolution becomes one matrix product.
 * @module
 */

import type { Im2colArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";

/** `cols[n, c, ki, kj, oh, ow]` = the input element the tap reads, or `padValue`. */
export function im2col(layout: Im2colArgs<TypedArray>): void {
  const { x, out: cols } = layout;
  const { height: H, width: W, kernelH, kernelW, outH, outW, strideW, padValue } = layout;
  const planes = layout.batch * layout.channels;
  let o = 0;
  for (let p = 0; p < planes; p++) {
    const plane = p * H * W;
    for (let ki = 0; ki < kernelH; ki++) {
      for (let kj = 0; kj < kernelW; kj++) {
        const w0 = kj * layout.dilationW - layout.padW;
        // Output columns whose tap lands inside the row: lo <= ow < hi.
        const lo = Math.min(outW, Math.max(0, Math.ceil(-w0 / strideW)));
        const hi = Math.max(lo, Math.min(outW, Math.ceil((W - w0) / strideW)));
        for (let oh = 0; oh < outH; oh++) {
          const h = oh * layout.strideH - layout.padH + ki * layout.dilationH;
          if (h < 0 || h >= H) {
            cols.fill(padValue, o, o + outW);
            o += outW;
            continue;
          }
          const row = plane + h * W + w0;
          if (lo > 0) cols.fill(padValue, o, o + lo);
          if (strideW === 1) cols.set(x.subarray(row + lo, row + hi), o + lo);
          else for (let ow = lo; ow < hi; ow++) cols[o + ow] = x[row + ow * strideW];
          if (hi < outW) cols.fill(padValue, o + hi, o + outW);
          o += outW;
        }
      }
    }
  }
}
