/**
 * `Embedding`: a lookup table of learned vectors, as `torch.nn.Embedding`.
 * @module
 */

import { noGrad } from "../autograd.ts";
import { arangeOn, resolveFactory } from "../ops/factory.ts";
import { empty } from "../ops/util.ts";
import { formatShape } from "../shape.ts";
import { tidy } from "../storage.ts";
import type { Tensor } from "../tensor.ts";
import * as F from "./functional.ts";
import { normal_ } from "./init.ts";
import type { FactoryOptions } from "./layers.ts";
import { Module, Parameter } from "./module.ts";
import { checkCount, checkFloatInput, resolvePaddingIdx } from "./util.ts";

/** Options of {@link Embedding}. */
export interface EmbeddingModuleOptions extends FactoryOptions {
  /**
   * This row starts at zeros and gets no gradient (a padding token);
   * negative counts from the end.
   */
  paddingIdx?: number | null;
}

/** Options of {@link Embedding.fromPretrained}. */
export interface FromPretrainedOptions {
  /** Keep the table fixed: `weight.requiresGrad` false (default true, as PyTorch). */
  freeze?: boolean;
  /** Lookups of this row get no gradient. */
  paddingIdx?: number | null;
}

/**
 * A table of `numEmbeddings` vectors of size `embeddingDim`, looked up by
 * int32 indices, as `torch.nn.Embedding`: `weight` [num, dim] drawn from
 * N(0, 1) (the seeded `randn` stream), with the `paddingIdx` row zeroed and
 * never updated by gradients.
 */
export class Embedding extends Module {
  /** Rows of the table. */
  readonly numEmbeddings: number;
  /** Size of each vector. */
  readonly embeddingDim: number;
  /** The padding row (non-negative), or null. */
  readonly paddingIdx: number | null;
  /** [numEmbeddings, embeddingDim]. */
  weight: Parameter;

  /** A table of `numEmbeddings` vectors of size `embeddingDim`. */
  constructor(numEmbeddings: number, embeddingDim: number, options: EmbeddingModuleOptions = {}) {
    super();
    this.numEmbeddings = checkCount("Embedding: numEmbeddings", numEmbeddings);
    this.embeddingDim = checkCount("Embedding: embeddingDim", embeddingDim);
    this.paddingIdx = resolvePaddingIdx("Embedding", options.paddingIdx, numEmbeddings);
    const { dtype, device } = resolveFactory(options, "float32");
    this.weight = new Parameter(empty([numEmbeddings, embeddingDim], dtype, device));
    this.resetParameters();
  }

  /** Draws a new table from N(0, 1) and zeroes the padding row (PyTorch's `reset_parameters`). */
  resetParameters(): void {
    normal_(this.weight);
    if (this.paddingIdx === null) return;
    const rows = this.numEmbeddings;
    const padding = this.paddingIdx;
    noGrad(() =>
      tidy(() => {
        const isPadding = arangeOn(rows, this.weight.device).eq(padding).reshape([rows, 1]);
        this.weight._assign(this.weight.maskedFill(isPadding, 0));
      })
    );
  }

  /**
   * An Embedding holding `embeddings` [num, dim] (copied), as
   * `torch.nn.Embedding.from_pretrained`; frozen unless `freeze` is false.
   */
  static fromPretrained(embeddings: Tensor, options: FromPretrainedOptions = {}): Embedding {
    checkFloatInput("Embedding.fromPretrained", embeddings, "embeddings");
    if (embeddings.ndim !== 2) {
      throw new RangeError(
        `Embedding.fromPretrained: embeddings must be 2-dimensional [num, dim], got shape ${
          formatShape(embeddings.shape)
        }`,
      );
    }
    const [num, dim] = embeddings.shape;
    const table = new Embedding(num, dim, {
      device: embeddings.device,
      dtype: embeddings.dtype,
      paddingIdx: options.paddingIdx,
    });
    noGrad(() => table.weight._assign(embeddings.detach()));
    table.weight.requiresGrad = !(options.freeze ?? true);
    return table;
  }

  /** The vectors of `input`'s int32 indices: [*] gives [*, embeddingDim]. */
  override forward(input: Tensor): Tensor {
    return F.embedding(input, this.weight, { paddingIdx: this.paddingIdx });
  }

  /** `10, 3, padding_idx=0`. */
  override extraRepr(): string {
    const padding = this.paddingIdx === null ? "" : `, padding_idx=${this.paddingIdx}`;
    return `${this.numEmbeddings}, ${this.embeddingDim}${padding}`;
  }
}
