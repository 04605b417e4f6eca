/**
 * Scaled dot-product attention, as `torch.nn.functional.scaled_dot_product_attention`.
 * @module
 */

import { arangeOn } from "../../ops/factory.ts";
import { formatShape } from "../../shape.ts";
import type { Tensor } from "../../tensor.ts";
import { attend } from "../attention_math.ts";
import { checkFinite, checkFloatInput, sameDevice } from "../util.ts";

/** Options of {@link scaledDotProductAttention}. */
export interface ScaledDotProductAttentionOptions {
  /**
   * Broadcast to [..., L, S]. A floating-point mask is added to the scores
   * (`-Infinity` excludes a position); an int32 mask is boolean, as
   * PyTorch's bool mask here: nonzero means the position TAKES PART
   * (the opposite of `MultiheadAttention`'s masks, as in PyTorch).
   */
  attnMask?: Tensor | null;
  /** Dropout probability on the attention weights (default 0; applied whenever > 0). */
  dropoutP?: number;
  /** Each query attends only to keys at or before its position (no `attnMask` then). */
  isCausal?: boolean;
  /** Multiplies the scores (default `1 / sqrt(E)`). */
  scale?: number | null;
}

/**
 * `softmax(q kᵀ · scale + mask) v` over the last two dims, as PyTorch's
 * `scaled_dot_product_attention`: `query` [..., L, E], `key` [..., S, E],
 * `value` [..., S, Ev] give [..., L, Ev] (leading dims broadcast). A row whose
 * every position is excluded gives NaN, as PyTorch.
 */
export function scaledDotProductAttention(
  query: Tensor,
  key: Tensor,
  value: Tensor,
  options: ScaledDotProductAttentionOptions = {},
): Tensor {
  const op = "scaledDotProductAttention";
  checkFloatInput(op, query, "query");
  checkFloatInput(op, key, "key");
  checkFloatInput(op, value, "value");
  sameDevice(op, { query, key, value, attnMask: options.attnMask });
  const e = query.shape[query.ndim - 1];
  if (
    query.ndim < 2 || key.ndim < 2 || value.ndim < 2 || key.shape[key.ndim - 1] !== e ||
    key.shape[key.ndim - 2] !== value.shape[value.ndim - 2]
  ) {
    throw new RangeError(
      `${op}: expected query [..., L, E], key [..., S, E] and value [..., S, Ev], got ${
        formatShape(query.shape)
      }, ${formatShape(key.shape)} and ${formatShape(value.shape)}`,
    );
  }
  const dropoutP = options.dropoutP ?? 0;
  if (typeof dropoutP !== "number" || !(dropoutP >= 0 && dropoutP <= 1)) {
    throw new RangeError(`${op}: dropoutP must be between 0 and 1, got ${dropoutP}`);
  }
  const scale = options.scale == null ? 1 / Math.sqrt(e) : checkFinite(op, "scale", options.scale);
  const mask = options.attnMask ?? null;
  const l = query.shape[query.ndim - 2];
  const s = key.shape[key.ndim - 2];
  let excluded: Tensor | null = null;
  let additive: Tensor | null = null;
  if (options.isCausal) {
    if (mask) throw new RangeError(`${op}: give either attnMask or isCausal, not both`);
    // Key j is excluded from query i when j > i.
    excluded = arangeOn(s, query.device).reshape([1, s]).gt(
      arangeOn(l, query.device).reshape([l, 1]),
    );
  } else if (mask) {
    if (mask.dtype === "int32") excluded = mask.eq(0);
    else additive = mask;
  }
  return attend(query, key, value, { scale, excluded, additive, dropoutP }).output;
}
