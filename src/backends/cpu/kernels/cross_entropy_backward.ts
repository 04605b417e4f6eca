/**
 * `crossEntropyBackward` (optional fused kernel): the logits' gradient of
 * the per-row cross-entropy, `gradLoss[r] · (probs - onehot)`.
 * @module
 */

import type { CrossEntropyBackwardArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";

/**
 * Writes `out[r] = g(r) · (probs[r] - onehot(target[r]))` for every row: 0
 * on ignored rows, NaN on out-of-range targets (`crossEntropyReducedBackward`
 * shares it, with one `g` for all rows).
 */
export function rowGradients(
  args: Omit<CrossEntropyBackwardArgs<TypedArray>, "gradLoss" | "dtype">,
  g: (row: number) => number,
): void {
  const { probs, target, out, rows, classes, ignoreIndex } = args;
  for (let r = 0, at = 0; r < rows; r++, at += classes) {
    const t = target[r];
    if (t === ignoreIndex) {
      out.fill(0, at, at + classes);
    } else if (!(t >= 0 && t < classes)) {
      out.fill(NaN, at, at + classes);
    } else {
      const gr = g(r);
      for (let c = 0; c < classes; c++) out[at + c] = gr * probs[at + c] - (c === t ? gr : 0);
    }
  }
}

/** See {@link CrossEntropyBackwardArgs}. */
export function crossEntropyBackward(args: CrossEntropyBackwardArgs<TypedArray>): void {
  const { gradLoss } = args;
  rowGradients(args, (r) => gradLoss[r]);
}
