/**
 * `EmbeddingBag`: sums, means or maxima of bags of embedding rows, as
 * `torch.nn.EmbeddingBag`.
 * @module
 */

import { getDefaultDtype } from "../dtype.ts";
import { resolveFactory } from "../ops/factory.ts";
import { empty } from "../ops/util.ts";
import type { Tensor } from "../tensor.ts";
import { embeddingBag, type EmbeddingBagMode } from "./functional/embedding_bag.ts";
import type { FactoryOptions } from "./layers.ts";
import { Module, Parameter } from "./module.ts";
import {
  checkCount,
  checkMaxNorm,
  fromPretrainedTable,
  pyFloat,
  resetEmbeddingTable,
  resolvePaddingIdx,
} from "./util.ts";

/** How {@link EmbeddingBag} reduces its bags. */
export interface EmbeddingBagLookupOptions {
  /** `"sum"`, `"mean"` (default) or `"max"`. */
  mode?: EmbeddingBagMode;
  /** Rows looked up whose `normType`-norm exceeds this are rescaled in place at each forward. */
  maxNorm?: number | null;
  /** The p of the norm `maxNorm` bounds (default 2). */
  normType?: number;
  /** Offsets carry the end of the last bag as an extra entry (default false). */
  includeLastOffset?: boolean;
  /**
   * Indices equal to this are left out of their bag and the row gets no gradient (a new table
   * starts it at zeros); negative counts from the end.
   */
  paddingIdx?: number | null;
}

/** Options of {@link EmbeddingBag}. */
export interface EmbeddingBagModuleOptions extends FactoryOptions, EmbeddingBagLookupOptions {}

/** Options of {@link EmbeddingBag.fromPretrained}. */
export interface EmbeddingBagFromPretrainedOptions extends EmbeddingBagLookupOptions {
  /** Keep the table fixed: `weight.requiresGrad` false (default true, as PyTorch). */
  freeze?: boolean;
}

/**
 * A table of `numEmbeddings` vectors of size `embeddingDim` whose forward
 * reduces bags of looked-up rows, as `torch.nn.EmbeddingBag` (see
 * `functional.embeddingBag`): `weight` [num, dim] drawn from N(0, 1) (the
 * seeded `randn` stream), with the `paddingIdx` row zeroed. PyTorch's
 * `scale_grad_by_freq` and `sparse` are not offered.
 */
export class EmbeddingBag extends Module {
  /** Rows of the table. */
  readonly numEmbeddings: number;
  /** Size of each vector. */
  readonly embeddingDim: number;
  /** How bags are reduced. */
  readonly mode: EmbeddingBagMode;
  /** Norm bound of looked-up rows, or null. */
  readonly maxNorm: number | null;
  /** The p of the norm `maxNorm` bounds. */
  readonly normType: number;
  /** Whether offsets end with the end of the last bag. */
  readonly includeLastOffset: boolean;
  /** The padding row (non-negative), or null. */
  readonly paddingIdx: number | null;
  /** [numEmbeddings, embeddingDim]. */
  weight: Parameter;

  /** A table of `numEmbeddings` vectors of size `embeddingDim`. */
  constructor(
    numEmbeddings: number,
    embeddingDim: number,
    options: EmbeddingBagModuleOptions = {},
  ) {
    super();
    this.numEmbeddings = checkCount("EmbeddingBag: numEmbeddings", numEmbeddings);
    this.embeddingDim = checkCount("EmbeddingBag: embeddingDim", embeddingDim);
    const mode = options.mode ?? "mean";
    if (mode !== "sum" && mode !== "mean" && mode !== "max") {
      throw new RangeError(
        `EmbeddingBag: mode must be "sum", "mean" or "max", got ${JSON.stringify(mode)}`,
      );
    }
    this.mode = mode;
    const { maxNorm, normType } = checkMaxNorm(
      "EmbeddingBag",
      options.maxNorm,
      options.normType ?? 2,
    );
    this.maxNorm = maxNorm;
    this.normType = normType;
    this.includeLastOffset = options.includeLastOffset ?? false;
    this.paddingIdx = resolvePaddingIdx("EmbeddingBag", options.paddingIdx, numEmbeddings);
    const { dtype, device } = resolveFactory(options, getDefaultDtype());
    this.weight = this.registerParameter(
      "weight",
      new Parameter(empty([numEmbeddings, embeddingDim], dtype, device)),
    );
    this.resetParameters();
  }

  /** Draws a new table from N(0, 1) and zeroes the padding row (PyTorch's `reset_parameters`). */
  resetParameters(): void {
    resetEmbeddingTable(this.weight, this.numEmbeddings, this.paddingIdx);
  }

  /**
   * An EmbeddingBag holding `embeddings` [num, dim] (copied), as
   * `torch.nn.EmbeddingBag.from_pretrained`; frozen unless `freeze` is false.
   */
  static fromPretrained(
    embeddings: Tensor,
    options: EmbeddingBagFromPretrainedOptions = {},
  ): EmbeddingBag {
    return fromPretrainedTable(
      "EmbeddingBag.fromPretrained",
      embeddings,
      options.freeze,
      (num, dim) =>
        new EmbeddingBag(num, dim, {
          device: embeddings.device,
          dtype: embeddings.dtype,
          mode: options.mode,
          maxNorm: options.maxNorm,
          normType: options.normType,
          includeLastOffset: options.includeLastOffset,
          paddingIdx: options.paddingIdx,
        }),
    );
  }

  /**
   * The reduced bags [B, embeddingDim] of `input`: [B, L] int32 indices, or
   * [N] with int32 `offsets` (the start of each bag); `perSampleWeights`
   * (the input's shape) scale each row in mode `"sum"`.
   */
  override forward(
    input: Tensor,
    offsets: Tensor | null = null,
    perSampleWeights: Tensor | null = null,
  ): Tensor {
    return embeddingBag(input, this.weight, offsets, {
      mode: this.mode,
      maxNorm: this.maxNorm,
      normType: this.normType,
      includeLastOffset: this.includeLastOffset,
      paddingIdx: this.paddingIdx,
      perSampleWeights,
    });
  }

  /** `10, 3, max_norm=1.0, mode=max, padding_idx=0`, as PyTorch prints it. */
  override extraRepr(): string {
    const parts = [`${this.numEmbeddings}`, `${this.embeddingDim}`];
    if (this.maxNorm !== null) parts.push(`max_norm=${pyFloat(this.maxNorm)}`);
    if (this.normType !== 2) parts.push(`norm_type=${pyFloat(this.normType)}`);
    parts.push(`mode=${this.mode}`);
    if (this.paddingIdx !== null) parts.push(`padding_idx=${this.paddingIdx}`);
    return parts.join(", ");
  }
}
