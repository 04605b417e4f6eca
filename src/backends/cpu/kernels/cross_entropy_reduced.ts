/**
 * `crossEntropyReduced` (optional fused kernel): the rows' cross-entropy
 * summed (or averaged over the rows not ignored) in one pass, rounding as
 * the composition does (each loss stored in the dtype, summed in float64,
 * the sum stored, then divided), so both give the same bits.
 * @module
 */

import type { CrossEntropyReducedArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";
import { softmaxRowLoss } from "./cross_entropy.ts";

/** See {@link CrossEntropyReducedArgs}. */
export function crossEntropyReduced(args: CrossEntropyReducedArgs<TypedArray>): void {
  const { logits, target, probs, loss, weightSum, rows, classes, ignoreIndex, mean } = args;
  let total = 0;
  let count = 0;
  for (let r = 0, at = 0; r < rows; r++, at += classes) {
    const t = target[r];
    const rowLoss = softmaxRowLoss(logits, probs, at, classes, t);
    if (t === ignoreIndex) continue;
    count++;
    // Stored first: the composition sums the losses as stored in the dtype.
    loss[0] = rowLoss;
    total += loss[0];
  }
  loss[0] = total;
  weightSum[0] = count;
  // 0 / 0 is NaN when every row is ignored, as PyTorch's mean.
  if (mean) loss[0] = loss[0] / weightSum[0];
}
