/**
 * `im2col`: unfolds the sliding windows of a convolution or pooling into
 * columns, so that a convolution becomes one matrix product.
 * @module
 */

import type { Im2colArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";
import { residentLoops, windowParams } from "../wasm/elementwise.ts";

/** `cols[n, c, ki, kj, oh, ow]` = the input element the tap reads, or `padValue`. */
export function im2col(layout: Im2colArgs<TypedArray>): void {
  const { x, out: cols } = layout;
  const { height: H, width: W, kernelH, kernelW, outH, outW, strideW, padValue } = layout;
  const planes = layout.batch * layout.channels;
  // In the kernel's memory, float32 runs in WebAssembly.
  const loops = layout.dtype === "float32" ? residentLoops(x, cols) : null;
  if (loops !== null) {
    loops.im2col(x.byteOffset, cols.byteOffset, planes, ...windowParams(layout), padValue);
    return;
  }
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
          // Plain loops: rows are short (tens of elements), where
          // subarray/set/fill calls cost more than the copy.
          if (h < 0 || h >= H) {
            for (let ow = 0; ow < outW; ow++) cols[o + ow] = padValue;
            o += outW;
            continue;
          }
          const row = plane + h * W + w0;
          for (let ow = 0; ow < lo; ow++) cols[o + ow] = padValue;
          if (strideW === 1) { for (let ow = lo; ow < hi; ow++) cols[o + ow] = x[row + ow]; }
          else for (let ow = lo; ow < hi; ow++) cols[o + ow] = x[row + ow * strideW];
          for (let ow = hi; ow < outW; ow++) cols[o + ow] = padValue;
          o += outW;
        }
      }
    }
  }
}
