/**
 * `maxPool2d` (optional fused kernel): each window's maximum and where it
 * is, read straight from the input (the composition unfolds the windows,
 * takes an argmax and gathers: three passes over four times the data).
 * @module
 */

import type { MaxPool2dArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";
import { residentLoops } from "../wasm/elementwise.ts";

/**
 * 1 where `v` beats the current winner `b` (larger, or NaN: the last NaN of
 * a window wins, as PyTorch's `val > maxval || isnan(val)`), as an integer:
 * V8 boxes a float chosen by a branch or by `Math.max` in these loops,
 * which made them 10-15x slower than choosing the position.
 */
const beats = (v: number, b: number) => +(v > b) | +(v !== v);

/** The common 2x2 window with stride 2 and no padding, its taps unrolled. */
function maxPool2x2(args: MaxPool2dArgs<TypedArray>): void {
  const { x, out, indices, height: H, width: W, outH, outW } = args;
  const planes = args.batch * args.channels;
  let o = 0;
  for (let p = 0; p < planes; p++) {
    const base = p * H * W;
    for (let oh = 0; oh < outH; oh++) {
      const row = base + 2 * oh * W;
      for (let ow = 0; ow < outW; ow++, o++) {
        const a = row + 2 * ow;
        // The first of each row's pair, then of the two rows' winners.
        const top = a + beats(x[a + 1], x[a]);
        const bottom = a + W + beats(x[a + W + 1], x[a + W]);
        const best = top + beats(x[bottom], x[top]) * (bottom - top);
        out[o] = x[best];
        indices[o] = best - base;
      }
    }
  }
}

/** See {@link MaxPool2dArgs}. */
export function maxPool2d(args: MaxPool2dArgs<TypedArray>): void {
  const { x, out, indices, height: H, width: W, kernelH, kernelW, outH, outW } = args;
  const { strideH, strideW, padH, padW, dilationH, dilationW } = args;
  const plain = strideH === 2 && strideW === 2 && padH === 0 && padW === 0 &&
    dilationH === 1 && dilationW === 1;
  if (plain && kernelH === 2 && kernelW === 2 && 2 * outH <= H && 2 * outW <= W) {
    // In the kernel's memory, float32 runs in WebAssembly (the same choices).
    const loops = x instanceof Float32Array ? residentLoops(x, out, indices) : null;
    if (loops === null) return maxPool2x2(args);
    const planes = args.batch * args.channels;
    loops.max_pool_2x2(x.byteOffset, out.byteOffset, indices.byteOffset, planes, H, W, outH, outW);
    return;
  }
  const planes = args.batch * args.channels;
  let o = 0;
  for (let p = 0; p < planes; p++) {
    const base = p * H * W;
    for (let oh = 0; oh < outH; oh++) {
      const h0 = oh * strideH - padH;
      // The taps inside the input: kiLo <= ki < kiHi (padding never wins).
      let kiLo = 0;
      while (h0 + kiLo * dilationH < 0) kiLo++;
      let kiHi = kernelH;
      while (h0 + (kiHi - 1) * dilationH >= H) kiHi--;
      for (let ow = 0; ow < outW; ow++, o++) {
        const w0 = ow * strideW - padW;
        let kjLo = 0;
        while (w0 + kjLo * dilationW < 0) kjLo++;
        let kjHi = kernelW;
        while (w0 + (kjHi - 1) * dilationW >= W) kjHi--;
        let best = base + (h0 + kiLo * dilationH) * W + w0 + kjLo * dilationW;
        for (let ki = kiLo; ki < kiHi; ki++) {
          const row = base + (h0 + ki * dilationH) * W + w0;
          for (let kj = kjLo; kj < kjHi; kj++) {
            const at = row + kj * dilationW;
            // The first one wins ties; the last NaN wins.
            best += beats(x[at], x[best]) * (at - best);
          }
        }
        out[o] = x[best];
        indices[o] = best - base;
      }
    }
  }
}
