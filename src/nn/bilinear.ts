/**
 * `Bilinear`, `CosineSimilarity` and `PairwiseDistance`, as `torch.nn`'s:
 * layers over two inputs.
 * @module
 */

import { getDefaultDtype } from "../dtype.ts";
import { resolveFactory } from "../ops/factory.ts";
import { empty } from "../ops/util.ts";
import type { Tensor } from "../tensor.ts";
import { bilinear, pairwiseDistance } from "./functional/bilinear.ts";
import { cosineSimilarity } from "./functional/normalize.ts";
import { uniform_ } from "./init.ts";
import type { FactoryOptions } from "./layers.ts";
import { Module, Parameter } from "./module.ts";
import { checkCount, checkFinite, pyBool } from "./util.ts";

/** Options of {@link Bilinear}. */
export interface BilinearOptions extends FactoryOptions {
  /** Learn an additive bias (default true). */
  bias?: boolean;
}

/**
 * `y = x1ᵀ A x2 + b`, as `torch.nn.Bilinear`: `weight` [out, in1, in2] and
 * `bias` [out] (null without bias), both drawn from U(-1/√in1, 1/√in1) as
 * PyTorch's `reset_parameters` (from the seeded stream, `manualSeed`).
 */
export class Bilinear extends Module {
  /** Size of each first input's last dim. */
  readonly in1Features: number;
  /** Size of each second input's last dim. */
  readonly in2Features: number;
  /** Size of each output's last dim. */
  readonly outFeatures: number;
  /** [outFeatures, in1Features, in2Features]. */
  weight: Parameter;
  /** [outFeatures], or null. */
  bias: Parameter | null;

  /** A layer from inputs of `in1Features` and `in2Features` to `outFeatures`. */
  constructor(
    in1Features: number,
    in2Features: number,
    outFeatures: number,
    options: BilinearOptions = {},
  ) {
    super();
    // PyTorch's init divides by √in1Features: it fails for 0 (ZeroDivisionError).
    this.in1Features = checkCount("Bilinear: in1Features", in1Features, false);
    this.in2Features = checkCount("Bilinear: in2Features", in2Features);
    this.outFeatures = checkCount("Bilinear: outFeatures", outFeatures);
    const { dtype, device } = resolveFactory(options, getDefaultDtype());
    this.weight = this.registerParameter(
      "weight",
      new Parameter(empty([outFeatures, in1Features, in2Features], dtype, device)),
    );
    this.bias = this.registerParameter(
      "bias",
      (options.bias ?? true) ? new Parameter(empty([outFeatures], dtype, device)) : null,
    );
    this.resetParameters();
  }

  /** Draws new weights and bias from U(-1/√in1, 1/√in1) (PyTorch's `reset_parameters`). */
  resetParameters(): void {
    const bound = 1 / Math.sqrt(this.in1Features);
    uniform_(this.weight, { a: -bound, b: bound });
    if (this.bias) uniform_(this.bias, { a: -bound, b: bound });
  }

  /** `x1` [*, in1] and `x2` [*, in2] give [*, out]. */
  override forward(x1: Tensor, x2: Tensor): Tensor {
    return bilinear(x1, x2, this.weight, this.bias);
  }

  /** `in1_features=3, in2_features=4, out_features=5, bias=True`. */
  override extraRepr(): string {
    return `in1_features=${this.in1Features}, in2_features=${this.in2Features}, out_features=${this.outFeatures}, bias=${
      pyBool(this.bias !== null)
    }`;
  }
}

/** Options of {@link CosineSimilarity}. */
export interface CosineSimilarityModuleOptions {
  /** The dim of the vectors (default 1). */
  dim?: number;
  /** Smallest norm (default 1e-8). */
  eps?: number;
}

/**
 * Cosine similarity of two inputs along `dim`, as `torch.nn.CosineSimilarity`
 * (see `functional.cosineSimilarity`). Prints as `CosineSimilarity()`, as
 * PyTorch.
 */
export class CosineSimilarity extends Module {
  /** The dim of the vectors. */
  readonly dim: number;
  /** Smallest norm. */
  readonly eps: number;

  /** Cosine similarity along `dim` (default 1). */
  constructor(options: CosineSimilarityModuleOptions = {}) {
    super();
    const dim = options.dim ?? 1;
    if (!Number.isInteger(dim)) {
      throw new TypeError(`CosineSimilarity: dim must be an integer, got ${dim}`);
    }
    this.dim = dim;
    this.eps = checkFinite("CosineSimilarity", "eps", options.eps ?? 1e-8);
  }

  /** The similarity of `x1` and `x2` (broadcast), with `dim` removed. */
  override forward(x1: Tensor, x2: Tensor): Tensor {
    return cosineSimilarity(x1, x2, { dim: this.dim, eps: this.eps });
  }
}

/** Options of {@link PairwiseDistance}. */
export interface PairwiseDistanceModuleOptions {
  /** The norm's exponent (default 2). */
  p?: number;
  /** Added to the difference (default 1e-6). */
  eps?: number;
  /** Keep the last dim with size 1 (default false). */
  keepdim?: boolean;
}

/**
 * `‖x1 - x2 + eps‖ₚ` over the last dim, as `torch.nn.PairwiseDistance` (see
 * `functional.pairwiseDistance`). Prints as `PairwiseDistance()`, as
 * PyTorch.
 */
export class PairwiseDistance extends Module {
  /** The norm's exponent. */
  readonly p: number;
  /** Added to the difference. */
  readonly eps: number;
  /** Whether the last dim is kept. */
  readonly keepdim: boolean;

  /** The p-norm distance (default p 2, eps 1e-6). */
  constructor(options: PairwiseDistanceModuleOptions = {}) {
    super();
    const p = options.p ?? 2;
    if (typeof p !== "number" || Number.isNaN(p)) {
      throw new RangeError(`PairwiseDistance: p must be a number (Infinity allowed), got ${p}`);
    }
    this.p = p;
    this.eps = checkFinite("PairwiseDistance", "eps", options.eps ?? 1e-6);
    this.keepdim = options.keepdim ?? false;
  }

  /** The distances of `x1` and `x2` (broadcast). */
  override forward(x1: Tensor, x2: Tensor): Tensor {
    return pairwiseDistance(x1, x2, { p: this.p, eps: this.eps, keepdim: this.keepdim });
  }
}
