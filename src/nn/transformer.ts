/**
 * `TransformerEncoderLayer` and `TransformerEncoder`, as PyTorch's: the same
 * submodules under the same names (`self_attn.in_proj_weight`,
 * `linear1.weight`, `norm2.bias`, `layers.0....`), so a PyTorch state dict
 * loads unchanged; post-norm by default, pre-norm with `normFirst`. The
 * decoder side and the whole `Transformer` are in `transformer_decoder.ts`.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { Dropout, type FactoryOptions, Linear, type ModuleList } from "./layers.ts";
import { MultiheadAttention } from "./attention.ts";
import { LayerNorm } from "./normalization.ts";
import { Module } from "./module.ts";
import { checkCount } from "./util.ts";
import { cloneLayers, resolveActivation } from "./transformer_util.ts";

/** Options of {@link TransformerEncoderLayer}. */
export interface TransformerEncoderLayerOptions extends FactoryOptions {
  /** Width of the feed-forward block (default 2048). */
  dimFeedforward?: number;
  /** Dropout on attention weights, after attention, inside and after the feed-forward (default 0.1). */
  dropout?: number;
  /** The feed-forward's activation: `"relu"` (default), `"gelu"` or a function. */
  activation?: "relu" | "gelu" | ((x: Tensor) => Tensor);
  /** LayerNorm's epsilon (default 1e-5). */
  layerNormEps?: number;
  /** Inputs are [batch, seq, feature] (default false: [seq, batch, feature]). */
  batchFirst?: boolean;
  /** Normalise before attention and feed-forward (pre-norm) instead of after (default false). */
  normFirst?: boolean;
  /**
   * Learn additive biases in the attention, the feed-forward and the
   * LayerNorms (default true), as PyTorch 2.1's `bias`: without them those
   * parameters are absent from the state dict.
   */
  bias?: boolean;
}

/** Masks of a Transformer encoder's forward (see `MultiheadAttention.forward`). */
export interface TransformerEncoderForwardOptions {
  /** [S, S] or [N * nhead, S, S]: int32 nonzero = may not attend; float = added to the scores. */
  srcMask?: Tensor | null;
  /** [N, S]: keys to ignore (int32 nonzero = ignore; float = added). */
  srcKeyPaddingMask?: Tensor | null;
}

/**
 * Self-attention then a feed-forward block, each with a residual connection
 * and a LayerNorm, as `torch.nn.TransformerEncoderLayer(d_model, nhead)`.
 */
export class TransformerEncoderLayer extends Module {
  /** The self-attention. */
  self_attn: MultiheadAttention;
  /** Feed-forward, in. */
  linear1: Linear;
  /** Dropout inside the feed-forward. */
  dropout: Dropout;
  /** Feed-forward, out. */
  linear2: Linear;
  /** Norm of the attention block. */
  norm1: LayerNorm;
  /** Norm of the feed-forward block. */
  norm2: LayerNorm;
  /** Dropout after attention. */
  dropout1: Dropout;
  /** Dropout after the feed-forward. */
  dropout2: Dropout;
  /** Pre-norm (true) or post-norm. */
  readonly normFirst: boolean;
  /** The feed-forward's activation. */
  readonly activation: (x: Tensor) => Tensor;

  /** A layer over `dModel` features with `nhead` heads. */
  constructor(dModel: number, nhead: number, options: TransformerEncoderLayerOptions = {}) {
    super();
    const { device, dtype, dropout = 0.1, layerNormEps: eps = 1e-5, bias = true } = options;
    const factory = { device, dtype };
    const hidden = checkCount(
      "TransformerEncoderLayer: dimFeedforward",
      options.dimFeedforward ?? 2048,
      false,
    );
    this.self_attn = new MultiheadAttention(dModel, nhead, {
      ...factory,
      dropout,
      bias,
      batchFirst: options.batchFirst,
    });
    this.linear1 = new Linear(dModel, hidden, { ...factory, bias });
    this.dropout = new Dropout(dropout);
    this.linear2 = new Linear(hidden, dModel, { ...factory, bias });
    this.normFirst = options.normFirst ?? false;
    this.norm1 = new LayerNorm(dModel, { ...factory, eps, bias });
    this.norm2 = new LayerNorm(dModel, { ...factory, eps, bias });
    this.dropout1 = new Dropout(dropout);
    this.dropout2 = new Dropout(dropout);
    this.activation = resolveActivation("TransformerEncoderLayer", options.activation);
  }

  /** The encoded `src` (same shape). */
  override forward(src: Tensor, options: TransformerEncoderForwardOptions = {}): Tensor {
    const attention = (x: Tensor) => {
      const [out] = this.self_attn.forward(x, x, x, {
        attnMask: options.srcMask,
        keyPaddingMask: options.srcKeyPaddingMask,
        needWeights: false,
      });
      return this.dropout1.forward(out);
    };
    const feedForward = (x: Tensor) =>
      this.dropout2.forward(
        this.linear2.forward(this.dropout.forward(this.activation(this.linear1.forward(x)))),
      );
    let x = src;
    if (this.normFirst) {
      x = x.add(attention(this.norm1.forward(x)));
      return x.add(feedForward(this.norm2.forward(x)));
    }
    x = this.norm1.forward(x.add(attention(x)));
    return this.norm2.forward(x.add(feedForward(x)));
  }
}

/** Masks of {@link TransformerEncoder.forward} (PyTorch's names). */
export interface TransformerEncoderStackForwardOptions {
  /** The attention mask of every layer (a layer's `srcMask`). */
  mask?: Tensor | null;
  /** [N, S]: keys to ignore (int32 nonzero = ignore; float = added). */
  srcKeyPaddingMask?: Tensor | null;
}

/** Options of {@link TransformerEncoder}. */
export interface TransformerEncoderOptions {
  /** A final norm applied to the last layer's output (PyTorch's `norm`), or null. */
  norm?: Module | null;
}

/**
 * `numLayers` copies of `encoderLayer` in a row (`layers.0`, `layers.1`,
 * ...), as `torch.nn.TransformerEncoder`: each copy has its own parameters,
 * copied from `encoderLayer`'s values (which is not itself one of them).
 */
export class TransformerEncoder extends Module {
  /** The layers. */
  layers: ModuleList;
  /** The final norm, or null. */
  norm: Module | null;

  /** `numLayers` independent copies of `encoderLayer`. */
  constructor(
    encoderLayer: TransformerEncoderLayer,
    numLayers: number,
    options: TransformerEncoderOptions = {},
  ) {
    super();
    this.layers = cloneLayers("TransformerEncoder", "encoderLayer", encoderLayer, numLayers);
    this.norm = options.norm ?? null;
  }

  /** `src` through every layer (same masks for each), then the norm. */
  override forward(src: Tensor, options: TransformerEncoderStackForwardOptions = {}): Tensor {
    let x = src;
    for (const layer of this.layers) {
      x = (layer as TransformerEncoderLayer).forward(x, {
        srcMask: options.mask,
        srcKeyPaddingMask: options.srcKeyPaddingMask,
      });
    }
    return this.norm ? (this.norm.forward(x) as Tensor) : x;
  }
}
