/**
 * The attention computation `scaledDotProductAttention` and
 * `MultiheadAttention` share, giving the weights too.
 * @module
 */

import { formatShape } from "../shape.ts";
import type { Tensor } from "../tensor.ts";
import { dropout } from "./functional/dropout.ts";

/** How {@link attend} masks and scales. */
export interface AttendOptions {
  /** Multiplies the query before the product. */
  scale: number;
  /** Nonzero where a score is excluded (becomes -inf), broadcast to the scores. */
  excluded?: Tensor | null;
  /** Added to the scores, broadcast to them. */
  additive?: Tensor | null;
  /** Dropout probability on the weights (0 for none). */
  dropoutP: number;
}

/**
 * `softmax(scale · q kᵀ + additive, excluded → -inf) v` over the last two
 * dims; gives the output and the weights (after dropout, as PyTorch returns
 * them).
 */
export function attend(
  q: Tensor,
  k: Tensor,
  v: Tensor,
  options: AttendOptions,
): { output: Tensor; weights: Tensor } {
  let scores = q.mul(options.scale).matmul(k.transpose(-2, -1));
  const { additive, excluded } = options;
  for (const [name, mask] of [["additive", additive], ["excluded", excluded]] as const) {
    if (mask && !broadcastsTo(mask.shape, scores.shape)) {
      throw new RangeError(
        `attention: the ${name === "additive" ? "float" : "boolean"} mask of shape ${
          formatShape(mask.shape)
        } does not broadcast to the attention scores of shape ${formatShape(scores.shape)}`,
      );
    }
  }
  if (additive) scores = scores.add(additive.to(scores.dtype));
  if (excluded) scores = scores.maskedFill(excluded, -Infinity);
  const weights = scores.softmax(-1);
  const dropped = options.dropoutP > 0 ? dropout(weights, options.dropoutP, true) : weights;
  return { output: dropped.matmul(v), weights: dropped };
}

function broadcastsTo(from: readonly number[], to: readonly number[]): boolean {
  if (from.length > to.length) return false;
  const lead = to.length - from.length;
  return from.every((d, i) => d === 1 || d === to[lead + i]);
}
