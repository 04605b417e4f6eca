/**
 * Multi-head attention as a function of its parameters, as
 * `torch.nn.functional.multi_head_attention_forward`; `nn.MultiheadAttention`
 * runs the same code (`attentionHeads` in `src/nn/attention_heads.ts`).
 * @module
 */

import { formatShape, sameShape } from "../../shape.ts";
import type { Tensor } from "../../tensor.ts";
import { checkCount, checkFloatInput, sameDevice } from "../util.ts";

import { attentionHeads } from "../attention_heads.ts";

/** Options of {@link multiHeadAttentionForward}: PyTorch's keyword arguments. */
export interface MultiHeadAttentionForwardOptions {
  /** Apply `dropoutP` (default true, as PyTorch's `training=True`). */
  training?: boolean;
  /**
   * [N, S] (or [S] unbatched): keys to ignore. An int32 mask is boolean
   * (nonzero = ignore, as PyTorch's `True`); a floating-point one is added to
   * the scores.
   */
  keyPaddingMask?: Tensor | null;
  /** Return the attention weights too (default true); otherwise the second element is null. */
  needWeights?: boolean;
  /**
   * [L, S] or [N * numHeads, L, S]: an int32 mask is boolean (nonzero = may
   * not attend); a floating-point one is added to the scores.
   */
  attnMask?: Tensor | null;
  /** Project with `qProjWeight`, `kProjWeight`, `vProjWeight` instead of `inProjWeight`. */
  useSeparateProjWeight?: boolean;
  /** [E, E] query projection (with `useSeparateProjWeight`). */
  qProjWeight?: Tensor | null;
  /** [E, kdim] key projection (with `useSeparateProjWeight`). */
  kProjWeight?: Tensor | null;
  /** [E, vdim] value projection (with `useSeparateProjWeight`). */
  vProjWeight?: Tensor | null;
  /** [N * numHeads, S, E / numHeads]: keys used as they are, instead of projecting `key`. */
  staticK?: Tensor | null;
  /** [N * numHeads, S, E / numHeads]: values used as they are, instead of projecting `value`. */
  staticV?: Tensor | null;
  /** Average the weights over heads, [N, L, S] (default true); else [N, numHeads, L, S]. */
  averageAttnWeights?: boolean;
}

/**
 * Multi-head attention from its parameters, as PyTorch 1.13's
 * `torch.nn.functional.multi_head_attention_forward` (same argument order;
 * its keyword arguments in `options`). `query` [L, N, E], `key` [S, N, kdim]
 * and `value` [S, N, vdim] are sequence first (or unbatched [L, E], [S, kdim],
 * [S, vdim]); returns `[output [L, N, E], weights]`, the weights [N, L, S]
 * averaged over heads (or [N, numHeads, L, S]), or null without
 * `needWeights`. `biasK`/`biasV` ([1, 1, E]) and `addZeroAttn` each add a
 * source position (the weights get a column each; masks given for S keys are
 * extended). This is the code `nn.MultiheadAttention` runs. Masks are int32
 * where PyTorch's are bool (nonzero = excluded). Unlike PyTorch, an
 * `attnMask` is checked against the keys attended (`staticK`'s length when
 * given, not `key`'s) and a float `keyPaddingMask` is always added to the
 * scores, as PyTorch 2 does (PyTorch 1.13, given an `attnMask` too, treats
 * its nonzero entries as `True` beside a bool mask and ignores it beside a
 * float one).
 */
export function multiHeadAttentionForward(
  query: Tensor,
  key: Tensor,
  value: Tensor,
  embedDimToCheck: number,
  numHeads: number,
  inProjWeight: Tensor | null,
  inProjBias: Tensor | null,
  biasK: Tensor | null,
  biasV: Tensor | null,
  addZeroAttn: boolean,
  dropoutP: number,
  outProjWeight: Tensor,
  outProjBias: Tensor | null,
  options: MultiHeadAttentionForwardOptions = {},
): [Tensor, Tensor | null] {
  const op = "multiHeadAttentionForward";
  checkFloatInput(op, query, "query");
  checkFloatInput(op, key, "key");
  checkFloatInput(op, value, "value");
  const {
    keyPaddingMask = null,
    attnMask = null,
    useSeparateProjWeight = false,
    qProjWeight = null,
    kProjWeight = null,
    vProjWeight = null,
    staticK = null,
    staticV = null,
  } = options;
  checkFloatInput(op, outProjWeight, "outProjWeight");
  sameDevice(op, {
    query,
    key,
    value,
    inProjWeight,
    inProjBias,
    biasK,
    biasV,
    outProjWeight,
    outProjBias,
    keyPaddingMask,
    attnMask,
    qProjWeight,
    kProjWeight,
    vProjWeight,
    staticK,
    staticV,
  });
  checkCount(`${op}: numHeads`, numHeads, false);
  if (typeof dropoutP !== "number" || !(dropoutP >= 0 && dropoutP <= 1)) {
    throw new RangeError(`${op}: dropoutP must be between 0 and 1, got ${dropoutP}`);
  }
  const batched = query.ndim === 3;
  const rank = batched ? 3 : 2;
  if ((query.ndim !== 2 && query.ndim !== 3) || key.ndim !== rank || value.ndim !== rank) {
    throw new RangeError(
      `${op}: expected query, key and value all [seq, batch, feature] (3-D) or all unbatched [seq, feature] (2-D), got ${
        formatShape(query.shape)
      }, ${formatShape(key.shape)} and ${formatShape(value.shape)}`,
    );
  }
  const e = query.shape[rank - 1];
  if (e !== embedDimToCheck) {
    throw new RangeError(
      `${op}: was expecting embedding dimension of ${embedDimToCheck}, but got ${e} (query ${
        formatShape(query.shape)
      })`,
    );
  }
  if (e % numHeads !== 0) {
    throw new RangeError(`${op}: embed_dim ${e} not divisible by num_heads ${numHeads}`);
  }
  const lead = rank - 1;
  const sameLead = sameShape(key.shape.slice(0, lead), value.shape.slice(0, lead));
  if (useSeparateProjWeight ? !sameLead : !sameShape(key.shape, value.shape)) {
    throw new RangeError(
      useSeparateProjWeight
        ? `${op}: key's sequence and batch dims ${
          formatShape(key.shape.slice(0, lead))
        } do not match value's ${formatShape(value.shape.slice(0, lead))}`
        : `${op}: key shape ${formatShape(key.shape)} does not match value shape ${
          formatShape(value.shape)
        }`,
    );
  }
  if (batched && key.shape[1] !== query.shape[1]) {
    throw new RangeError(
      `${op}: key ${formatShape(key.shape)} must have the query's batch size ${query.shape[1]}`,
    );
  }
  if (!useSeparateProjWeight && inProjWeight === null) {
    throw new TypeError(`${op}: useSeparateProjWeight is false but inProjWeight is null`);
  }
  if (useSeparateProjWeight) {
    for (const [name, w] of [["q", qProjWeight], ["k", kProjWeight], ["v", vProjWeight]]) {
      if (w === null) {
        throw new TypeError(`${op}: useSeparateProjWeight is true but ${name}ProjWeight is null`);
      }
    }
  }
  const toInner = (t: Tensor) => batched ? t : t.unsqueeze(1);
  const [out, weights] = attentionHeads(
    op,
    toInner(query),
    toInner(key),
    toInner(value),
    batched,
    query === key && key === value && !useSeparateProjWeight,
    {
      numHeads,
      inProjWeight: useSeparateProjWeight ? null : inProjWeight,
      qProjWeight,
      kProjWeight,
      vProjWeight,
      inProjBias,
      biasK,
      biasV,
      addZeroAttn,
      dropoutP: (options.training ?? true) ? dropoutP : 0,
      outProjWeight,
      outProjBias,
      staticK,
      staticV,
      keyPaddingMask,
      attnMask,
      needWeights: options.needWeights ?? true,
      averageAttnWeights: options.averageAttnWeights ?? true,
    },
  );
  return [batched ? out : out.squeeze(1), weights];
}
