/**
 * The multi-head attention both `nn.MultiheadAttention` and
 * `nn.functional.multiHeadAttentionForward` run ({@link attentionHeads}): one
 * code path, so the module and the function cannot drift apart.
 * @module
 */

import { zeros } from "../ops/factory.ts";
import { linear } from "../ops/linalg.ts";
import { cat } from "../ops/view.ts";
import { formatShape, sameShape } from "../shape.ts";
import { forwardScope } from "../storage.ts";
import type { Tensor } from "../tensor.ts";
import { attend } from "./attention_math.ts";

/** The parameters and switches of one multi-head attention call ({@link attentionHeads}). */
export interface AttentionHeadsParams {
  /** Number of heads (E / numHeads features each). */
  numHeads: number;
  /** [3E, E] packed q, k, v projection, or null with the separate ones. */
  inProjWeight: Tensor | null;
  /** [E, E], [E, kdim], [E, vdim] (used when `inProjWeight` is null). */
  qProjWeight: Tensor | null;
  /** See `qProjWeight`. */
  kProjWeight: Tensor | null;
  /** See `qProjWeight`. */
  vProjWeight: Tensor | null;
  /** [3E] biases of the q, k, v projections, or null. */
  inProjBias: Tensor | null;
  /** [1, 1, E] key and value appended as one more source position, or null. */
  biasK: Tensor | null;
  /** See `biasK`. */
  biasV: Tensor | null;
  /** Append a key and a value of zeros as one more source position. */
  addZeroAttn: boolean;
  /** Dropout on the weights (0 when not training). */
  dropoutP: number;
  /** [E, E] output projection. */
  outProjWeight: Tensor;
  /** [E] output projection bias, or null. */
  outProjBias: Tensor | null;
  /** [N * numHeads, S, E / numHeads] keys used instead of the projected ones, or null. */
  staticK: Tensor | null;
  /** [N * numHeads, S, E / numHeads] values used instead of the projected ones, or null. */
  staticV: Tensor | null;
  /** [N, S] (or [S] unbatched) keys to ignore (int32: nonzero ignores; float: added), or null. */
  keyPaddingMask: Tensor | null;
  /** [L, S] or [N * numHeads, L, S] (int32: nonzero excludes; float: added), or null. */
  attnMask: Tensor | null;
  /** Return the weights too. */
  needWeights: boolean;
  /** Average the weights over heads. */
  averageAttnWeights: boolean;
}

/**
 * The attention every multi-head caller runs: `q0` [L, N, E], `k0` [S, N,
 * kdim] and `v0` [S, N, vdim] sequence first (unbatched inputs with a batch
 * dim of 1 added, `batched` false), projected, split into heads, extended
 * by `biasK`/`biasV` and a zero position, masked, attended and projected
 * back. Gives `[output [L, N, E], weights or null]`; without `batched` the
 * weights lose their batch dim (the output keeps it: the caller drops it).
 * `selfAttention` (query, key and value one tensor) projects all three
 * with one product. `op` names the caller in errors.
 */
export function attentionHeads(
  op: string,
  q0: Tensor,
  k0: Tensor,
  v0: Tensor,
  batched: boolean,
  selfAttention: boolean,
  p: AttentionHeadsParams,
): [Tensor, Tensor | null] {
  const [l, n, e] = q0.shape;
  const s = k0.shape[0];
  const h = p.numHeads;
  const hd = e / h;
  const { staticK, staticV, attnMask, keyPaddingMask } = p;
  if ((p.biasK === null) !== (p.biasV === null)) {
    throw new RangeError(`${op}: biasK and biasV must be given together (or neither)`);
  }
  const heads = n * h;
  for (const [name, t] of [["staticK", staticK], ["staticV", staticV]] as const) {
    if (t === null) continue;
    if (p.biasK !== null) {
      throw new RangeError(
        `${op}: bias cannot be added to static ${name === "staticK" ? "key" : "value"}.`,
      );
    }
    if (t.ndim !== 3 || t.shape[0] !== heads || t.shape[2] !== hd) {
      throw new RangeError(
        `${op}: ${name} of shape ${
          formatShape(t.shape)
        } must be [${heads}, S, ${hd}] (batch * numHeads, source length, head dim)`,
      );
    }
  }
  // The source length the masks are given for: the keys attended, before the added positions.
  const source = staticK ? staticK.shape[1] : s;
  // Keys and values must pair up, whichever of them is static (a static one replaces key's length).
  const values = staticV ? staticV.shape[1] : s;
  if (values !== source) {
    const what = (t: Tensor | null, name: string, plain: string) =>
      t ? `${name} of shape ${formatShape(t.shape)}` : `${plain}, ${s} positions`;
    throw new RangeError(
      `${op}: the values (${
        what(staticV, "staticV", "value")
      }) must have the keys' source length ${source} (${what(staticK, "staticK", "key")})`,
    );
  }
  const excluded: Tensor[] = [];
  let additive: Tensor | null = null;
  const extra = (p.biasK ? 1 : 0) + (p.addZeroAttn ? 1 : 0);
  if (attnMask) {
    const want2 = [l, source];
    const want3 = [heads, l, source];
    if (!sameShape(attnMask.shape, want2) && !sameShape(attnMask.shape, want3)) {
      throw new RangeError(
        `${op}: attnMask of shape ${formatShape(attnMask.shape)} must be ${formatShape(want2)} or ${
          formatShape(want3)
        } (batch * numHeads, target length, source length)`,
      );
    }
    const padded = padKeys(attnMask, extra);
    if (attnMask.dtype === "int32") excluded.push(padded);
    else additive = padded;
  }
  if (keyPaddingMask) {
    const want = batched ? [n, source] : [source];
    if (!sameShape(keyPaddingMask.shape, want)) {
      throw new RangeError(
        `${op}: keyPaddingMask of shape ${formatShape(keyPaddingMask.shape)} must be ${
          formatShape(want)
        } (batch, source length)`,
      );
    }
    // [N, S] -> [N, 1, 1, S'] -> every head: [N * H, 1, S'].
    const keys = source + extra;
    const perHead = padKeys(keyPaddingMask.reshape([n, 1, 1, source]), extra)
      .expand([n, h, 1, keys]).reshape([heads, 1, keys]);
    if (keyPaddingMask.dtype === "int32") excluded.push(perHead);
    else additive = additive ? additive.add(perHead) : perHead;
  }
  {
    let [q, k, v] = project(q0, k0, v0, selfAttention, p);
    if (p.biasK && p.biasV) {
      k = cat([k, p.biasK.expand([1, n, e])], 0);
      v = cat([v, p.biasV.expand([1, n, e])], 0);
    }
    // [len, N, E] -> [N * H, len, hd]
    const split = (t: Tensor) => t.reshape([t.shape[0], heads, hd]).transpose(0, 1);
    let kh = staticK ?? split(k);
    let vh = staticV ?? split(v);
    if (p.addZeroAttn) {
      const zero = zeros([heads, 1, hd], { dtype: kh.dtype, device: kh.device });
      kh = cat([kh, zero], 1);
      vh = cat([vh, zero], 1);
    }
    const mask = excluded.length === 2 ? excluded[0].ne(0).maximum(excluded[1].ne(0)) : excluded[0];
    const { output, weights } = attend(split(q), kh, vh, {
      scale: 1 / Math.sqrt(hd),
      excluded: mask ?? null,
      additive,
      dropoutP: p.dropoutP,
    });
    // [N * H, L, hd] -> [L, N, E] -> the output projection.
    const out = lin(output.transpose(0, 1).reshape([l, n, e]), p.outProjWeight, p.outProjBias);
    if (!p.needWeights) return [out, null];
    let w = weights.reshape([n, h, l, kh.shape[1]]);
    if (p.averageAttnWeights) w = w.sum(1).div(h);
    return [out, batched ? w : w.squeeze(0)];
  }
}

/** `x Wᵀ + b`, as `F.linear`: the un-biased product goes with the graph, not with the GC. */
function lin(x: Tensor, weight: Tensor, bias: Tensor | null): Tensor {
  return forwardScope(() => linear(x, weight, bias));
}

/** q, k, v projected, [L or S, N, E] each; one product for self-attention with packed weights. */
function project(
  q0: Tensor,
  k0: Tensor,
  v0: Tensor,
  selfAttention: boolean,
  p: AttentionHeadsParams,
): Tensor[] {
  const bias = p.inProjBias;
  const biases = bias ? bias.chunk(3, 0) : [null, null, null];
  if (p.inProjWeight) {
    if (selfAttention) return lin(q0, p.inProjWeight, bias).chunk(3, -1);
    const [wq, wk, wv] = p.inProjWeight.chunk(3, 0);
    return [lin(q0, wq, biases[0]), lin(k0, wk, biases[1]), lin(v0, wv, biases[2])];
  }
  return [
    lin(q0, p.qProjWeight!, biases[0]),
    lin(k0, p.kProjWeight!, biases[1]),
    lin(v0, p.vProjWeight!, biases[2]),
  ];
}

/** `mask` with `extra` key columns appended that take part (0: not excluded, nothing added). */
function padKeys(mask: Tensor, extra: number): Tensor {
  if (extra === 0) return mask;
  const shape = [...mask.shape.slice(0, -1), extra];
  return cat([mask, zeros(shape, { dtype: mask.dtype, device: mask.device })], -1);
}
