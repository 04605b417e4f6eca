/**
 * `softmax` (optional fused kernel): stable softmax and log-softmax.
 * @module
 */

import type { SoftmaxArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";

/** Stable softmax / logSoftmax over the middle axis. */
export function softmax({ x, out, outer, size, inner, log }: SoftmaxArgs<TypedArray>): void {
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < inner; i++) {
      const base = o * size * inner + i;
      let max = -Infinity;
      for (let r = 0; r < size; r++) max = Math.max(max, x[base + r * inner]);
      let sum = 0;
      for (let r = 0; r < size; r++) sum += Math.exp(x[base + r * inner] - max);
      if (log) {
        const lse = max + Math.log(sum);
        for (let r = 0; r < size; r++) {
          out[base + r * inner] = x[base + r * inner] - lse;
        }
      } else {
        for (let r = 0; r < size; r++) {
          out[base + r * inner] = Math.exp(x[base + r * inner] - max) / sum;
        }
      }
    }
  }
}
