/**
 * `Embedding`: a lookup table of learned vectors, as `torch.nn.Embedding`.
 * @module
 */

import { getDefaultDtype } from "../dtype.ts";
import { resolveFactory } from "../ops/factory.ts";
import { empty } from "../ops/util.ts";
import type { Tensor } from "../tensor.ts";
import * as F from "./functional.ts";
import type { FactoryOptions } from "./layers.ts";
import { Module, Parameter } from "./module.ts";
import {
  checkCount,
  checkMaxNorm,
  fromPretrainedTable,
  pyBool,
  pyFloat,
  resetEmbeddingTable,
  resolvePaddingIdx,
} from "./util.ts";

/** How {@link Embedding} looks rows up: padding, norm bound, gradient scaling. */
export interface EmbeddingLookupOptions {
  /**
   * This row gets no gradient (a padding token; a new table starts it at
   * zeros); negative counts from the end.
   */
  paddingIdx?: number | null;
  /**
   * Rows looked up whose `normType`-norm exceeds this are rescaled in place
   * to norm `maxNorm` at each forward (no gradient), as PyTorch's `max_norm`.
   */
  maxNorm?: number | null;
  /** The p of the norm `maxNorm` bounds (default 2; `Infinity` for the largest |w|). */
  normType?: number;
  /** Divide each row's gradient by its number of lookups in the mini-batch (default false). */
  scaleGradByFreq?: boolean;
}

/** Options of {@link Embedding}. */
export interface EmbeddingModuleOptions extends FactoryOptions, EmbeddingLookupOptions {}

/** Options of {@link Embedding.fromPretrained}. */
export interface FromPretrainedOptions extends EmbeddingLookupOptions {
  /** Keep the table fixed: `weight.requiresGrad` false (default true, as PyTorch). */
  freeze?: boolean;
}

/**
 * A table of `numEmbeddings` vectors of size `embeddingDim`, looked up by
 * int32 indices, as `torch.nn.Embedding`: `weight` [num, dim] drawn from
 * N(0, 1) (the seeded `randn` stream), with the `paddingIdx` row zeroed and
 * never updated by gradients. With `maxNorm`, each forward first rescales
 * (in place, without gradient) the looked-up rows whose norm exceeds it;
 * with `scaleGradByFreq`, a row's gradient is divided by its lookup count.
 */
export class Embedding extends Module {
  /** Rows of the table. */
  readonly numEmbeddings: number;
  /** Size of each vector. */
  readonly embeddingDim: number;
  /** The padding row (non-negative), or null. */
  readonly paddingIdx: number | null;
  /** Norm bound of looked-up rows, or null. */
  readonly maxNorm: number | null;
  /** The p of the norm `maxNorm` bounds. */
  readonly normType: number;
  /** Whether gradients are divided by lookup counts. */
  readonly scaleGradByFreq: boolean;
  /** [numEmbeddings, embeddingDim]. */
  weight: Parameter;

  /** A table of `numEmbeddings` vectors of size `embeddingDim`. */
  constructor(numEmbeddings: number, embeddingDim: number, options: EmbeddingModuleOptions = {}) {
    super();
    this.numEmbeddings = checkCount("Embedding: numEmbeddings", numEmbeddings);
    this.embeddingDim = checkCount("Embedding: embeddingDim", embeddingDim);
    this.paddingIdx = resolvePaddingIdx("Embedding", options.paddingIdx, numEmbeddings);
    const { maxNorm, normType } = checkMaxNorm("Embedding", options.maxNorm, options.normType ?? 2);
    this.maxNorm = maxNorm;
    this.normType = normType;
    this.scaleGradByFreq = options.scaleGradByFreq ?? false;
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
   * An Embedding holding `embeddings` [num, dim] (copied), as
   * `torch.nn.Embedding.from_pretrained`; frozen unless `freeze` is false.
   */
  static fromPretrained(embeddings: Tensor, options: FromPretrainedOptions = {}): Embedding {
    return fromPretrainedTable(
      "Embedding.fromPretrained",
      embeddings,
      options.freeze,
      (num, dim) =>
        new Embedding(num, dim, {
          device: embeddings.device,
          dtype: embeddings.dtype,
          paddingIdx: options.paddingIdx,
          maxNorm: options.maxNorm,
          normType: options.normType,
          scaleGradByFreq: options.scaleGradByFreq,
        }),
    );
  }

  /** The vectors of `input`'s int32 indices: [*] gives [*, embeddingDim]. */
  override forward(input: Tensor): Tensor {
    return F.embedding(input, this.weight, {
      paddingIdx: this.paddingIdx,
      maxNorm: this.maxNorm,
      normType: this.normType,
      scaleGradByFreq: this.scaleGradByFreq,
    });
  }

  /** `10, 3, padding_idx=0, max_norm=1.0`, as PyTorch prints it. */
  override extraRepr(): string {
    const parts = [`${this.numEmbeddings}`, `${this.embeddingDim}`];
    if (this.paddingIdx !== null) parts.push(`padding_idx=${this.paddingIdx}`);
    if (this.maxNorm !== null) parts.push(`max_norm=${pyFloat(this.maxNorm)}`);
    if (this.normType !== 2) parts.push(`norm_type=${pyFloat(this.normType)}`);
    if (this.scaleGradByFreq) parts.push(`scale_grad_by_freq=${pyBool(true)}`);
    return parts.join(", ");
  }
}
