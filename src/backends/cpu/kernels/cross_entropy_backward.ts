/**
 * `crossEntropyBackward` (optional fused kernel): the logits' gradient of
 * the per-row cross-entropy, `gradLoss[r] · (probs - onehot)`.
 * @module
 */

import type { CrossEntropyBackwardArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";

/** See {@link CrossEntropyBackwardArgs}. */
export function crossEntropyBackward(args: CrossEntropyBackwardArgs<TypedArray>): void {
  const { probs, target, gradLoss, out, rows, classes, ignoreIndex } = args;
  for (let r = 0, at = 0; r < rows; r++, at += classes) {
    const t = target[r];
    if (t === ignoreIndex) {
      out.fill(0, at, at + classes);
    } else if (!(t >= 0 && t < classes)) {
      out.fill(NaN, at, at + classes);
    } else {
      const g = gradLoss[r];
      for (let c = 0; c < classes; c++) out[at + c] = g * probs[at + c] - (c === t ? g : 0);
    }
  }
}
