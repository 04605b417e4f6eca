/**
 * `maxPool2d` (optional fused kernel): each window's maximum and where it
 * is, read straight from the input (the composition unfolds the windows,
 * takes an argmax and gathers: three passes over four times the data).
 * @module
 */

import type { MaxPool2dArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";

/** See {@link MaxPool2dArgs}. */
export function maxPool2d(args: MaxPool2dArgs<TypedArray>): void {
  const { x, out, indices, height: H, width: W, kernelH, kernelW, outH, outW } = args;
  const { strideH, strideW, padH, padW, dilationH, dilationW } = args;
  const planes = args.batch * args.channels;
  let o = 0;
  for (let p = 0; p < planes; p++) {
    const base = p * H * W;
    for (let oh = 0; oh < outH; oh++) {
      const h0 = oh * strideH - padH;
      for (let ow = 0; ow < outW; ow++, o++) {
        const w0 = ow * strideW - padW;
        let best = -Infinity;
        let bestAt = -1;
        window: for (let ki = 0; ki < kernelH; ki++) {
          const h = h0 + ki * dilationH;
          if (h < 0 || h >= H) continue;
          for (let kj = 0; kj < kernelW; kj++) {
            const w = w0 + kj * dilationW;
            if (w < 0 || w >= W) continue;
            const at = h * W + w;
            const v = x[base + at];
            // The first element, then any larger one; NaN wins and ends the window.
            if (bestAt < 0 || v > best || v !== v) {
              best = v;
              bestAt = at;
              if (v !== v) break window;
            }
          }
        }
        out[o] = best;
        indices[o] = bestAt;
      }
    }
  }
}
