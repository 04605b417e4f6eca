/**
 * `crossEntropy` (optional fused kernel): per-row loss `log Σ exp(x) - x[t]`
 * against class indices and the row's softmax, max-subtracted, accumulated
 * in float64.
 * @module
 */

import type { CrossEntropyArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";

/**
 * Writes the softmax of the row of `logits` starting at `at` into `probs`
 * and returns its loss against class `t` (NaN for `t` outside
 * `[0, classes)`); `crossEntropyReduced` shares it.
 */
export function softmaxRowLoss(
  logits: TypedArray,
  probs: TypedArray,
  at: number,
  classes: number,
  t: number,
): number {
  let max = -Infinity;
  for (let c = 0; c < classes; c++) {
    const v = logits[at + c];
    // NaN wins, so that a NaN logit makes the row NaN.
    if (v > max || v !== v) max = v;
    if (v !== v) break;
  }
  let sum = 0;
  for (let c = 0; c < classes; c++) sum += Math.exp(logits[at + c] - max);
  for (let c = 0; c < classes; c++) probs[at + c] = Math.exp(logits[at + c] - max) / sum;
  return t >= 0 && t < classes ? max + Math.log(sum) - logits[at + t] : NaN;
}

/** See {@link CrossEntropyArgs}. */
export function crossEntropy(args: CrossEntropyArgs<TypedArray>): void {
  const { logits, target, losses, weights, probs, rows, classes, ignoreIndex } = args;
  for (let r = 0, at = 0; r < rows; r++, at += classes) {
    const t = target[r];
    const loss = softmaxRowLoss(logits, probs, at, classes, t);
    if (t === ignoreIndex) {
      losses[r] = 0;
      weights[r] = 0;
    } else {
      weights[r] = 1;
      losses[r] = loss;
    }
  }
}
