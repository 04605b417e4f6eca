/**
 * `col2im`: the adjoint of `im2col` (a convolution's input gradient, a
 * pooling's backward), summing every tap's column entry into the element it
 * reads.
 * @module
 */

import type { Col2imArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";
import { residentLoops, windowParams } from "../wasm/elementwise.ts";

/** `out[n, c, h, w]` = Σ of the `cols` entries whose tap reads (h, w). */
export function col2im(layout: Col2imArgs<TypedArray>): void {
  const { x: cols, out } = layout;
  const { height: H, width: W, kernelH, kernelW, outH, outW, strideW } = layout;
  const planes = layout.batch * layout.channels;
  // In the kernel's memory, float32 runs in WebAssembly.
  const loops = layout.dtype === "float32" ? residentLoops(cols, out) : null;
  if (loops !== null) {
    loops.col2im(cols.byteOffset, out.byteOffset, planes, ...windowParams(layout));
    return;
  }
  out.fill(0, 0, planes * H * W);
  let o = 0;
  for (let p = 0; p < planes; p++) {
    const plane = p * H * W;
    for (let ki = 0; ki < kernelH; ki++) {
      for (let kj = 0; kj < kernelW; kj++) {
        const w0 = kj * layout.dilationW - layout.padW;
        const lo = Math.min(outW, Math.max(0, Math.ceil(-w0 / strideW)));
        const hi = Math.max(lo, Math.min(outW, Math.ceil((W - w0) / strideW)));
        for (let oh = 0; oh < outH; oh++) {
          const h = oh * layout.strideH - layout.padH + ki * layout.dilationH;
          if (h >= 0 && h < H) {
            const row = plane + h * W + w0;
            if (strideW === 1) { for (let ow = lo; ow < hi; ow++) out[row + ow] += cols[o + ow]; }
            else for (let ow = lo; ow < hi; ow++) out[row + ow * strideW] += cols[o + ow];
          }
          o += outW;
        }
      }
    }
  }
}
