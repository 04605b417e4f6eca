/**
 * `crossEntropyReducedBackward` (optional fused kernel): the logits'
 * gradient of the summed or averaged cross-entropy, `g · (probs - onehot)`
 * with the scalar gradient `g` (over the summed weights, rounded, for the
 * mean) on every row.
 * @module
 */

import type { CrossEntropyReducedBackwardArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";

/** See {@link CrossEntropyReducedBackwardArgs}. */
export function crossEntropyReducedBackward(
  args: CrossEntropyReducedBackwardArgs<TypedArray>,
): void {
  const { probs, target, gradLoss, weightSum, out, rows, classes, ignoreIndex, mean } = args;
  if (rows * classes === 0) return;
  // Rounded to the dtype through `out`, as the composition stores g / weightSum.
  out[0] = mean ? gradLoss[0] / weightSum[0] : gradLoss[0];
  const g = out[0];
  for (let r = 0, at = 0; r < rows; r++, at += classes) {
    const t = target[r];
    if (t === ignoreIndex) {
      out.fill(0, at, at + classes);
    } else if (!(t >= 0 && t < classes)) {
      out.fill(NaN, at, at + classes);
    } else {
      for (let c = 0; c < classes; c++) out[at + c] = g * probs[at + c] - (c === t ? g : 0);
    }
  }
}
