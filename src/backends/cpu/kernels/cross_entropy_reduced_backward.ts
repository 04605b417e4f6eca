/**
 * `crossEntropyReducedBackward` (optional fused kernel): the logits'
 * gradient of the summed or averaged cross-entropy, `g · (probs - onehot)`
 * with the scalar gradient `g` (over the summed weights, rounded, for the
 * mean) on every row.
 * @module
 */

import type { CrossEntropyReducedBackwardArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";
import { rowGradients } from "./cross_entropy_backward.ts";

/** See {@link CrossEntropyReducedBackwardArgs}. */
export function crossEntropyReducedBackward(
  args: CrossEntropyReducedBackwardArgs<TypedArray>,
): void {
  const { gradLoss, weightSum, out, rows, classes, mean } = args;
  if (rows * classes === 0) return;
  // Rounded to the dtype through `out`, as the composition stores g / weightSum.
  out[0] = mean ? gradLoss[0] / weightSum[0] : gradLoss[0];
  const g = out[0];
  rowGradients(args, () => g);
}
