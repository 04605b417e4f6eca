/**
 * `TransformerDecoderLayer`, `TransformerDecoder` and the whole `Transformer`,
 * as PyTorch's: the same submodules under the same names
 * (`multihead_attn.in_proj_weight`, `norm3.bias`, `encoder.layers.0....`,
 * `decoder.norm.weight`), so a PyTorch state dict loads unchanged.
 * @module
 */

import { getDefaultDtype, isFloat } from "../dtype.ts";
import { full, resolveFactory } from "../ops/factory.ts";
import { formatShape } from "../shape.ts";
import type { Tensor } from "../tensor.ts";
import { MultiheadAttention } from "./attention.ts";
import { xavierUniform_ } from "./init.ts";
import { Dropout, type FactoryOptions, Linear, type ModuleList } from "./layers.ts";
import { Module } from "./module.ts";
import { LayerNorm } from "./normalization.ts";
import {
  TransformerEncoder,
  TransformerEncoderLayer,
  type TransformerEncoderLayerOptions,
} from "./transformer.ts";
import { causalMask, cloneLayers, resolveActivation } from "./transformer_util.ts";
import { checkCount, checkFloatInput } from "./util.ts";

/** Options of {@link TransformerDecoderLayer}: those of the encoder layer. */
export type TransformerDecoderLayerOptions = TransformerEncoderLayerOptions;

/**
 * Masks of a Transformer decoder's forward, for its layers or the stack
 * (PyTorch's names; see `MultiheadAttention.forward`). T is the target
 * length, S the memory's.
 */
export interface TransformerDecoderForwardOptions {
  /** [T, T] or [N * nhead, T, T]: int32 nonzero = may not attend; float = added to the scores. */
  tgtMask?: Tensor | null;
  /** [T, S] or [N * nhead, T, S]: the same, for the attention to the memory. */
  memoryMask?: Tensor | null;
  /** [N, T]: target keys to ignore (int32 nonzero = ignore; float = added). */
  tgtKeyPaddingMask?: Tensor | null;
  /** [N, S]: memory keys to ignore (int32 nonzero = ignore; float = added). */
  memoryKeyPaddingMask?: Tensor | null;
  /**
   * `tgtMask` is causal (default false). Without a `tgtMask` the causal mask
   * (query i attends to keys 0..i) is applied; with one, that mask is used as
   * given, so a wrong hint changes nothing.
   */
  tgtIsCausal?: boolean;
  /** `memoryMask` is causal (top-left aligned [T, S]); as `tgtIsCausal`. */
  memoryIsCausal?: boolean;
}

/**
 * Self-attention, attention to the encoder's output (`memory`), then a
 * feed-forward block, each with a residual connection and a LayerNorm, as
 * `torch.nn.TransformerDecoderLayer(d_model, nhead)`: post-norm by default,
 * pre-norm with `normFirst`.
 */
export class TransformerDecoderLayer extends Module {
  /** The self-attention over the target. */
  self_attn: MultiheadAttention;
  /** The attention from the target to the memory. */
  multihead_attn: MultiheadAttention;
  /** Feed-forward, in. */
  linear1: Linear;
  /** Dropout inside the feed-forward. */
  dropout: Dropout;
  /** Feed-forward, out. */
  linear2: Linear;
  /** Norm of the self-attention block. */
  norm1: LayerNorm;
  /** Norm of the memory-attention block. */
  norm2: LayerNorm;
  /** Norm of the feed-forward block. */
  norm3: LayerNorm;
  /** Dropout after the self-attention. */
  dropout1: Dropout;
  /** Dropout after the memory attention. */
  dropout2: Dropout;
  /** Dropout after the feed-forward. */
  dropout3: Dropout;
  /** Pre-norm (true) or post-norm. */
  readonly normFirst: boolean;
  /** The feed-forward's activation. */
  readonly activation: (x: Tensor) => Tensor;

  /** A layer over `dModel` features with `nhead` heads. */
  constructor(dModel: number, nhead: number, options: TransformerDecoderLayerOptions = {}) {
    super();
    const { device, dtype, dropout = 0.1, layerNormEps: eps = 1e-5, bias = true } = options;
    const factory = { device, dtype };
    const hidden = checkCount(
      "TransformerDecoderLayer: dimFeedforward",
      options.dimFeedforward ?? 2048,
      false,
    );
    const attention = () =>
      new MultiheadAttention(dModel, nhead, {
        ...factory,
        dropout,
        bias,
        batchFirst: options.batchFirst,
      });
    this.self_attn = attention();
    this.multihead_attn = attention();
    this.linear1 = new Linear(dModel, hidden, { ...factory, bias });
    this.dropout = new Dropout(dropout);
    this.linear2 = new Linear(hidden, dModel, { ...factory, bias });
    this.normFirst = options.normFirst ?? false;
    this.norm1 = new LayerNorm(dModel, { ...factory, eps, bias });
    this.norm2 = new LayerNorm(dModel, { ...factory, eps, bias });
    this.norm3 = new LayerNorm(dModel, { ...factory, eps, bias });
    this.dropout1 = new Dropout(dropout);
    this.dropout2 = new Dropout(dropout);
    this.dropout3 = new Dropout(dropout);
    this.activation = resolveActivation("TransformerDecoderLayer", options.activation);
  }

  /**
   * The decoded `tgt` (same shape: [T, N, E], [N, T, E] with `batchFirst`, or
   * unbatched [T, E]) attending to `memory` ([S, N, E], [N, S, E] or [S, E]).
   */
  override forward(
    tgt: Tensor,
    memory: Tensor,
    options: TransformerDecoderForwardOptions = {},
  ): Tensor {
    const [t, s] = checkDecoderInputs(
      "TransformerDecoderLayer",
      tgt,
      memory,
      this.self_attn.embedDim,
      this.self_attn.batchFirst,
    );
    const tgtMask = options.tgtMask ?? (options.tgtIsCausal ? causalMask(t, t, tgt) : null);
    const memoryMask = options.memoryMask ??
      (options.memoryIsCausal ? causalMask(t, s, tgt) : null);
    const selfAttention = (x: Tensor) => {
      const [out] = this.self_attn.forward(x, x, x, {
        attnMask: tgtMask,
        keyPaddingMask: options.tgtKeyPaddingMask,
        needWeights: false,
      });
      return this.dropout1.forward(out);
    };
    const memoryAttention = (x: Tensor) => {
      const [out] = this.multihead_attn.forward(x, memory, memory, {
        attnMask: memoryMask,
        keyPaddingMask: options.memoryKeyPaddingMask,
        needWeights: false,
      });
      return this.dropout2.forward(out);
    };
    const feedForward = (x: Tensor) =>
      this.dropout3.forward(
        this.linear2.forward(this.dropout.forward(this.activation(this.linear1.forward(x)))),
      );
    let x = tgt;
    if (this.normFirst) {
      x = x.add(selfAttention(this.norm1.forward(x)));
      x = x.add(memoryAttention(this.norm2.forward(x)));
      return x.add(feedForward(this.norm3.forward(x)));
    }
    x = this.norm1.forward(x.add(selfAttention(x)));
    x = this.norm2.forward(x.add(memoryAttention(x)));
    return this.norm3.forward(x.add(feedForward(x)));
  }
}

/**
 * The target and memory lengths [T, S] of a decoder's inputs, checked here so
 * that a mismatch names tgt and memory rather than an attention's key.
 */
function checkDecoderInputs(
  op: string,
  tgt: Tensor,
  memory: Tensor,
  dModel: number,
  batchFirst: boolean,
): [number, number] {
  checkFloatInput(op, tgt, "tgt");
  checkFloatInput(op, memory, "memory");
  const layout = batchFirst ? "[batch, seq, feature]" : "[seq, batch, feature]";
  const shapes = `tgt ${formatShape(tgt.shape)} and memory ${formatShape(memory.shape)}`;
  if ((tgt.ndim !== 2 && tgt.ndim !== 3) || memory.ndim !== tgt.ndim) {
    throw new RangeError(
      `${op}: tgt and memory must both be ${layout} or both unbatched [seq, feature], got ${shapes}`,
    );
  }
  if (tgt.shape[tgt.ndim - 1] !== dModel || memory.shape[memory.ndim - 1] !== dModel) {
    throw new RangeError(
      `${op}: tgt and memory must have dModel = ${dModel} features, got ${shapes}`,
    );
  }
  if (tgt.ndim === 2) return [tgt.shape[0], memory.shape[0]];
  const [b, seq] = batchFirst ? [0, 1] : [1, 0];
  if (tgt.shape[b] !== memory.shape[b]) {
    throw new RangeError(
      `${op}: tgt and memory must have the same batch size (dim ${b} of ${layout}), got ${shapes}`,
    );
  }
  return [tgt.shape[seq], memory.shape[seq]];
}

/** Options of {@link TransformerDecoder}. */
export interface TransformerDecoderOptions {
  /** A final norm applied to the last layer's output (PyTorch's `norm`), or null. */
  norm?: Module | null;
}

/**
 * `numLayers` copies of `decoderLayer` in a row (`layers.0`, `layers.1`,
 * ...), as `torch.nn.TransformerDecoder`: each copy has its own parameters,
 * copied from `decoderLayer`'s values (which is not itself one of them), and
 * every layer attends to the same `memory`.
 */
export class TransformerDecoder extends Module {
  /** The layers. */
  layers: ModuleList;
  /** The final norm, or null. */
  norm: Module | null;

  /** `numLayers` independent copies of `decoderLayer`. */
  constructor(
    decoderLayer: TransformerDecoderLayer,
    numLayers: number,
    options: TransformerDecoderOptions = {},
  ) {
    super();
    this.layers = cloneLayers("TransformerDecoder", "decoderLayer", decoderLayer, numLayers);
    this.norm = options.norm ?? null;
  }

  /** `tgt` through every layer (same memory and masks for each), then the norm. */
  override forward(
    tgt: Tensor,
    memory: Tensor,
    options: TransformerDecoderForwardOptions = {},
  ): Tensor {
    let x = tgt;
    for (const layer of this.layers) {
      x = (layer as TransformerDecoderLayer).forward(x, memory, options);
    }
    return this.norm ? (this.norm.forward(x) as Tensor) : x;
  }
}

/** Options of {@link Transformer}: its sizes, and the options of every layer. */
export interface TransformerOptions extends TransformerEncoderLayerOptions {
  /** Features of inputs and output (default 512). */
  dModel?: number;
  /** Attention heads (default 8). */
  nhead?: number;
  /** Encoder layers (default 6). */
  numEncoderLayers?: number;
  /** Decoder layers (default 6). */
  numDecoderLayers?: number;
  /**
   * Used as the encoder instead of a `TransformerEncoder` (called as
   * `forward(src, { mask, srcKeyPaddingMask })`); PyTorch's `custom_encoder`.
   */
  customEncoder?: Module | null;
  /**
   * Used as the decoder instead of a `TransformerDecoder` (called as
   * `forward(tgt, memory, masks)`); PyTorch's `custom_decoder`.
   */
  customDecoder?: Module | null;
}

/** Masks of {@link Transformer.forward} (see `MultiheadAttention.forward`). */
export interface TransformerForwardOptions {
  /** [S, S] or [N * nhead, S, S]: the encoder's self-attention mask. */
  srcMask?: Tensor | null;
  /** [T, T] or [N * nhead, T, T]: the decoder's self-attention mask (see `generateSquareSubsequentMask`). */
  tgtMask?: Tensor | null;
  /** [T, S] or [N * nhead, T, S]: the decoder's mask on the memory. */
  memoryMask?: Tensor | null;
  /** [N, S]: source keys to ignore in the encoder (int32 nonzero = ignore; float = added). */
  srcKeyPaddingMask?: Tensor | null;
  /** [N, T]: target keys to ignore in the decoder's self-attention. */
  tgtKeyPaddingMask?: Tensor | null;
  /** [N, S]: memory keys to ignore in the decoder's memory attention. */
  memoryKeyPaddingMask?: Tensor | null;
}

/**
 * An encoder-decoder Transformer, as `torch.nn.Transformer`: a
 * `TransformerEncoder` and a `TransformerDecoder` (`encoder`, `decoder`), each
 * with a final LayerNorm, every parameter of more than one dim drawn from
 * xavier-uniform. Its state-dict keys are PyTorch's
 * (`encoder.layers.0.self_attn.in_proj_weight`, `decoder.norm.weight`).
 */
export class Transformer extends Module {
  /** The encoder (a `TransformerEncoder` unless `customEncoder` was given). */
  encoder: Module;
  /** The decoder (a `TransformerDecoder` unless `customDecoder` was given). */
  decoder: Module;
  /** Features of inputs and output. */
  readonly dModel: number;
  /** Attention heads. */
  readonly nhead: number;
  /** Whether inputs are [batch, seq, feature]. */
  readonly batchFirst: boolean;

  /** A Transformer with PyTorch's defaults (512 features, 8 heads, 6 + 6 layers) unless given. */
  constructor(options: TransformerOptions = {}) {
    super();
    const {
      dModel = 512,
      nhead = 8,
      numEncoderLayers = 6,
      numDecoderLayers = 6,
      customEncoder,
      customDecoder,
      ...layerOptions
    } = options;
    checkCount("Transformer: dModel", dModel, false);
    checkCount("Transformer: nhead", nhead, false);
    const norm = () =>
      new LayerNorm(dModel, {
        device: options.device,
        dtype: options.dtype,
        eps: options.layerNormEps ?? 1e-5,
        bias: options.bias ?? true,
      });
    this.encoder = customEncoder ?? new TransformerEncoder(
      new TransformerEncoderLayer(dModel, nhead, layerOptions),
      numEncoderLayers,
      { norm: norm() },
    );
    this.decoder = customDecoder ?? new TransformerDecoder(
      new TransformerDecoderLayer(dModel, nhead, layerOptions),
      numDecoderLayers,
      { norm: norm() },
    );
    this.resetParameters();
    this.dModel = dModel;
    this.nhead = nhead;
    this.batchFirst = options.batchFirst ?? false;
  }

  /**
   * PyTorch's `_reset_parameters`: xavier-uniform for every parameter of more
   * than one dim (custom encoder and decoder included); biases and norms keep
   * their values.
   */
  resetParameters(): void {
    for (const p of this.parameters()) if (p.ndim > 1) xavierUniform_(p);
  }

  /**
   * Encodes `src` ([S, N, E], [N, S, E] with `batchFirst`, or unbatched
   * [S, E]) and decodes `tgt` ([T, N, E], ...) attending to it; returns the
   * decoder's output, shaped as `tgt`.
   */
  override forward(src: Tensor, tgt: Tensor, options: TransformerForwardOptions = {}): Tensor {
    const op = "Transformer";
    checkFloatInput(op, src, "src");
    checkFloatInput(op, tgt, "tgt");
    const shapes = `src ${formatShape(src.shape)} and tgt ${formatShape(tgt.shape)}`;
    if ((src.ndim !== 2 && src.ndim !== 3) || tgt.ndim !== src.ndim) {
      throw new RangeError(
        `${op}: src and tgt must both be batched (3 dims) or both unbatched (2 dims), got ${shapes}`,
      );
    }
    if (src.ndim === 3) {
      const b = this.batchFirst ? 0 : 1;
      if (src.shape[b] !== tgt.shape[b]) {
        throw new RangeError(
          `${op}: the batch number of src and tgt must be equal (dim ${b}${
            this.batchFirst ? " with batchFirst" : ""
          }), got ${shapes}`,
        );
      }
    }
    const d = this.dModel;
    if (src.shape[src.ndim - 1] !== d || tgt.shape[tgt.ndim - 1] !== d) {
      throw new RangeError(
        `${op}: the feature number of src and tgt must be equal to dModel ${d}, got ${shapes}`,
      );
    }
    const memory = this.encoder.forward(src, {
      mask: options.srcMask,
      srcKeyPaddingMask: options.srcKeyPaddingMask,
    }) as Tensor;
    return this.decoder.forward(tgt, memory, {
      tgtMask: options.tgtMask,
      memoryMask: options.memoryMask,
      tgtKeyPaddingMask: options.tgtKeyPaddingMask,
      memoryKeyPaddingMask: options.memoryKeyPaddingMask,
    }) as Tensor;
  }

  /**
   * A [size, size] float mask for a decoder's self-attention: `-Infinity`
   * above the diagonal (position i may not attend to later ones), 0 elsewhere,
   * as PyTorch's `generate_square_subsequent_mask`.
   */
  static generateSquareSubsequentMask(size: number, options: FactoryOptions = {}): Tensor {
    const op = "Transformer.generateSquareSubsequentMask";
    checkCount(`${op}: size`, size);
    const { dtype, device } = resolveFactory(options, getDefaultDtype());
    if (!isFloat(dtype)) {
      throw new TypeError(
        `${op}: the mask holds -Infinity, so dtype must be floating-point, got ${dtype} (a boolean mask is ones([size, size], { dtype: "int32" }).triu(1))`,
      );
    }
    return full([size, size], -Infinity, { dtype, device }).triu(1);
  }
}
