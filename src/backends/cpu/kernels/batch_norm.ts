/**
 * `batchNorm` (optional fused kernel): a training batch norm in two passes
 * over `x` per channel, one for the statistics and one to normalize, where
 * the composition makes about eight.
 * @module
 */

import type { BatchNormArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";

/** See {@link BatchNormArgs}. */
export function batchNorm(args: BatchNormArgs<TypedArray>): void {
  const { x, weight, bias, mean, invstd, variance, out, outer, channels, inner, eps } = args;
  const n = outer * inner;
  const plane = channels * inner;
  for (let c = 0; c < channels; c++) {
    const first = c * inner;
    // Sums of (x - shift) and its square in float64, shifted by one of the
    // channel's own values so that the one-pass variance does not cancel.
    const shift = x[first];
    // Two sets of sums, even and odd elements: half the dependency chain
    // per add (2-2.5x faster measured).
    let [sum0, sum1, squares0, squares1] = [0, 0, 0, 0];
    for (let o = 0, at = first; o < outer; o++, at += plane) {
      const end = at + inner;
      let i = at;
      for (; i + 1 < end; i += 2) {
        const d0 = x[i] - shift;
        const d1 = x[i + 1] - shift;
        sum0 += d0;
        squares0 += d0 * d0;
        sum1 += d1;
        squares1 += d1 * d1;
      }
      if (i < end) {
        const d = x[i] - shift;
        sum0 += d;
        squares0 += d * d;
      }
    }
    const sum = sum0 + sum1;
    const squares = squares0 + squares1;
    const centeredMean = sum / n;
    const m = shift + centeredMean;
    const v = Math.max(0, squares / n - centeredMean * centeredMean);
    const s = 1 / Math.sqrt(v + eps);
    mean[c] = m;
    variance[c] = v;
    invstd[c] = s;
    const scale = s * weight[c];
    const offset = bias[c] - m * scale;
    for (let o = 0, at = first; o < outer; o++, at += plane) {
      for (let i = at, end = at + inner; i < end; i++) out[i] = x[i] * scale + offset;
    }
  }
}
