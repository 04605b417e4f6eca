/**
 * `MultiheadAttention`, as `torch.nn.MultiheadAttention`: PyTorch's
 * parameter names (`in_proj_weight`, `in_proj_bias`, `out_proj.weight`, or
 * `q_proj_weight`/`k_proj_weight`/`v_proj_weight` when key and value sizes
 * differ, `bias_k`/`bias_v` with `addBiasKv`), its masks and its
 * initialisation.
 * @module
 */

import { getDefaultDtype } from "../dtype.ts";
import { resolveFactory } from "../ops/factory.ts";
import { empty } from "../ops/util.ts";
import { formatShape } from "../shape.ts";
import type { Tensor } from "../tensor.ts";
import { attentionHeads } from "./attention_heads.ts";
import { constant_, xavierNormal_, xavierUniform_ } from "./init.ts";
import { type FactoryOptions, Linear } from "./layers.ts";
import { Module, Parameter } from "./module.ts";
import { checkCount, checkFloatInput, sameDevice } from "./util.ts";

/** Options of {@link MultiheadAttention}. */
export interface MultiheadAttentionOptions extends FactoryOptions {
  /** Dropout probability on the attention weights when training (default 0). */
  dropout?: number;
  /** Learn `in_proj_bias` and `out_proj.bias` (default true). */
  bias?: boolean;
  /** Features of the keys (default `embedDim`). */
  kdim?: number;
  /** Features of the values (default `embedDim`). */
  vdim?: number;
  /** Inputs and output are [batch, seq, feature] (default false: [seq, batch, feature]). */
  batchFirst?: boolean;
  /**
   * Learn `bias_k` and `bias_v` [1, 1, embedDim] (xavier-normal), appended to
   * the projected keys and values as one more source position (default
   * false), as PyTorch's `add_bias_kv`.
   */
  addBiasKv?: boolean;
  /**
   * Append a key and a value of zeros (after the projections and `bias_k`)
   * as one more source position, as PyTorch's `add_zero_attn` (default false).
   */
  addZeroAttn?: boolean;
}

/** Options of {@link MultiheadAttention.forward}. */
export interface MultiheadAttentionForwardOptions {
  /**
   * [N, S] (or [S] unbatched): keys to ignore. An int32 mask is boolean
   * (nonzero = ignore this key, as PyTorch's `True`); a floating-point mask is
   * added to the scores.
   */
  keyPaddingMask?: Tensor | null;
  /** Return the attention weights too (default true); otherwise the second element is null. */
  needWeights?: boolean;
  /**
   * [L, S] or [N * numHeads, L, S]: an int32 mask is boolean (nonzero = this
   * query may not attend to this key, as PyTorch's `True`); a floating-point
   * mask is added to the scores (`-Infinity` excludes).
   */
  attnMask?: Tensor | null;
  /** Average the weights over heads, [N, L, S] (default true); else [N, numHeads, L, S]. */
  averageAttnWeights?: boolean;
}

/**
 * Attention of `numHeads` heads over `embedDim` features, as
 * `torch.nn.MultiheadAttention`. Parameters: `in_proj_weight` [3E, E] (from
 * xavier-uniform) and `in_proj_bias` [3E] (zeros) when keys and values have
 * `embedDim` features, else `q_proj_weight` [E, E], `k_proj_weight` [E, kdim],
 * `v_proj_weight` [E, vdim]; `bias_k` and `bias_v` [1, 1, E] with
 * `addBiasKv`; then `out_proj` (a Linear, bias zeroed). The field names are
 * PyTorch's state-dict keys, so its state dicts load unchanged. `addBiasKv`
 * and `addZeroAttn` each add a source position: the weights then have
 * S + 1 (or S + 2) columns, and the masks, given for S keys, are extended
 * with "attends" (as PyTorch pads them with zeros).
 */
export class MultiheadAttention extends Module {
  /** Features of queries and output. */
  readonly embedDim: number;
  /** Features of keys. */
  readonly kdim: number;
  /** Features of values. */
  readonly vdim: number;
  /** Number of heads; `embedDim / numHeads` features each. */
  readonly numHeads: number;
  /** Dropout on the weights when training. */
  readonly dropout: number;
  /** Whether inputs are [batch, seq, feature]. */
  readonly batchFirst: boolean;
  /** Features of one head. */
  readonly headDim: number;
  /** Whether a key and value of zeros are appended. */
  readonly addZeroAttn: boolean;
  /** [3E, E] packed q, k, v projection (null when kdim or vdim differ). */
  in_proj_weight: Parameter | null = null;
  /** [E, E] (only when kdim or vdim differ from embedDim). */
  q_proj_weight: Parameter | null = null;
  /** [E, kdim] (only when kdim or vdim differ from embedDim). */
  k_proj_weight: Parameter | null = null;
  /** [E, vdim] (only when kdim or vdim differ from embedDim). */
  v_proj_weight: Parameter | null = null;
  /** [3E] biases of the q, k, v projections, or null. */
  in_proj_bias: Parameter | null = null;
  /** [1, 1, E] learned key appended to the projected keys (with `addBiasKv`), or null. */
  bias_k: Parameter | null = null;
  /** [1, 1, E] learned value appended to the projected values (with `addBiasKv`), or null. */
  bias_v: Parameter | null = null;
  /** The output projection. */
  out_proj: Linear;

  /** Attention over `embedDim` features split into `numHeads` heads. */
  constructor(embedDim: number, numHeads: number, options: MultiheadAttentionOptions = {}) {
    super();
    this.embedDim = checkCount("MultiheadAttention: embedDim", embedDim, false);
    this.numHeads = checkCount("MultiheadAttention: numHeads", numHeads, false);
    if (embedDim % numHeads !== 0) {
      throw new RangeError(
        `MultiheadAttention: embedDim ${embedDim} must be divisible by numHeads ${numHeads}`,
      );
    }
    this.headDim = embedDim / numHeads;
    this.kdim = checkCount("MultiheadAttention: kdim", options.kdim ?? embedDim, false);
    this.vdim = checkCount("MultiheadAttention: vdim", options.vdim ?? embedDim, false);
    const dropout = options.dropout ?? 0;
    if (typeof dropout !== "number" || !(dropout >= 0 && dropout <= 1)) {
      throw new RangeError(`MultiheadAttention: dropout must be between 0 and 1, got ${dropout}`);
    }
    this.dropout = dropout;
    this.batchFirst = options.batchFirst ?? false;
    const { dtype, device } = resolveFactory(options, getDefaultDtype());
    const param = (name: string, shape: number[]) =>
      this.registerParameter(name, new Parameter(empty(shape, dtype, device)));
    const e = embedDim;
    if (this.kdim === e && this.vdim === e) {
      this.in_proj_weight = param("in_proj_weight", [3 * e, e]);
    } else {
      this.q_proj_weight = param("q_proj_weight", [e, e]);
      this.k_proj_weight = param("k_proj_weight", [e, this.kdim]);
      this.v_proj_weight = param("v_proj_weight", [e, this.vdim]);
    }
    const bias = options.bias ?? true;
    if (bias) this.in_proj_bias = param("in_proj_bias", [3 * e]);
    if (options.addBiasKv ?? false) {
      this.bias_k = param("bias_k", [1, 1, e]);
      this.bias_v = param("bias_v", [1, 1, e]);
    }
    this.addZeroAttn = options.addZeroAttn ?? false;
    this.out_proj = new Linear(e, e, { bias, dtype, device });
    this.resetParameters();
  }

  /**
   * PyTorch's `_reset_parameters`: xavier-uniform projections, zero biases
   * (`out_proj.weight` keeps Linear's initialisation).
   */
  resetParameters(): void {
    for (const w of [this.in_proj_weight, this.q_proj_weight, this.k_proj_weight]) {
      if (w) xavierUniform_(w);
    }
    if (this.v_proj_weight) xavierUniform_(this.v_proj_weight);
    if (this.in_proj_bias) constant_(this.in_proj_bias, 0);
    if (this.bias_k) xavierNormal_(this.bias_k);
    if (this.bias_v) xavierNormal_(this.bias_v);
    if (this.out_proj.bias) constant_(this.out_proj.bias, 0);
  }

  /**
   * Attends from `query` [L, N, E] to `key` [S, N, kdim] / `value`
   * [S, N, vdim] (batch first with `batchFirst`; or unbatched [L, E]);
   * returns `[output [L, N, E], weights]`, the weights [N, L, S] averaged
   * over heads (or [N, numHeads, L, S]), or null without `needWeights`.
   */
  override forward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    options: MultiheadAttentionForwardOptions = {},
  ): [Tensor, Tensor | null] {
    const op = "MultiheadAttention";
    checkFloatInput(op, query, "query");
    checkFloatInput(op, key, "key");
    checkFloatInput(op, value, "value");
    const { keyPaddingMask = null, attnMask = null } = options;
    sameDevice(op, { query, key, value, keyPaddingMask, attnMask, weights: this.out_proj.weight });
    const batched = query.ndim === 3;
    const e = this.embedDim;
    const layout = batched
      ? this.batchFirst ? "[batch, seq, feature]" : "[seq, batch, feature]"
      : "[seq, feature]";
    const rank = batched ? 3 : 2;
    if (
      (query.ndim !== 2 && query.ndim !== 3) || key.ndim !== rank || value.ndim !== rank ||
      query.shape[rank - 1] !== e || key.shape[rank - 1] !== this.kdim ||
      value.shape[rank - 1] !== this.vdim
    ) {
      throw new RangeError(
        `${op}: expected query, key and value as ${layout} with ${e}, ${this.kdim} and ${this.vdim} features, got ${
          formatShape(query.shape)
        }, ${formatShape(key.shape)} and ${formatShape(value.shape)}`,
      );
    }
    // Sequence-first with a batch dim inside: [L, N, E].
    const toInner = (t: Tensor) =>
      !batched ? t.unsqueeze(1) : this.batchFirst ? t.transpose(0, 1) : t;
    const [q0, k0, v0] = [query, key, value].map(toInner);
    const n = q0.shape[1];
    const s = k0.shape[0];
    if (k0.shape[1] !== n || v0.shape[0] !== s || v0.shape[1] !== n) {
      throw new RangeError(
        `${op}: key ${formatShape(key.shape)} and value ${
          formatShape(value.shape)
        } must have the query's batch size ${n} and one sequence length`,
      );
    }
    const [out, weights] = attentionHeads(op, q0, k0, v0, batched, query === key && key === value, {
      numHeads: this.numHeads,
      inProjWeight: this.in_proj_weight,
      qProjWeight: this.q_proj_weight,
      kProjWeight: this.k_proj_weight,
      vProjWeight: this.v_proj_weight,
      inProjBias: this.in_proj_bias,
      biasK: this.bias_k,
      biasV: this.bias_v,
      addZeroAttn: this.addZeroAttn,
      dropoutP: this.training ? this.dropout : 0,
      // out_proj's parameters, as PyTorch's (not its forward: hooks on out_proj never run there).
      outProjWeight: this.out_proj.weight,
      outProjBias: this.out_proj.bias,
      staticK: null,
      staticV: null,
      keyPaddingMask,
      attnMask,
      needWeights: options.needWeights ?? true,
      averageAttnWeights: options.averageAttnWeights ?? true,
    });
    return [!batched ? out.squeeze(1) : this.batchFirst ? out.transpose(0, 1) : out, weights];
  }
}
