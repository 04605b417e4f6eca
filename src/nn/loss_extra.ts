/**
 * More loss modules, as `torch.nn`'s: `MarginRankingLoss`,
 * `CosineEmbeddingLoss`, `TripletMarginLoss`, `SoftMarginLoss`,
 * `MultiLabelSoftMarginLoss`, `GaussianNLLLoss`, `PoissonNLLLoss`.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import * as F from "./functional.ts";
import { ReducedLoss } from "./loss_base.ts";
import { checkFinite } from "./util.ts";

/** `max(0, -y (x1 - x2) + margin)`, as `torch.nn.MarginRankingLoss`; see {@link F.marginRankingLoss}. */
export class MarginRankingLoss extends ReducedLoss {
  /** Required gap between the ranked inputs. */
  readonly margin: number;

  /** A margin ranking loss (`margin` default 0). */
  constructor(options: F.MarginRankingLossOptions = {}) {
    super(options, "MarginRankingLoss");
    this.margin = checkFinite("MarginRankingLoss", "margin", options.margin ?? 0);
  }

  /** The loss of ranking `input1` above `input2` where `target` is 1 (below where -1). */
  override forward(input1: Tensor, input2: Tensor, target: Tensor): Tensor {
    return F.marginRankingLoss(input1, input2, target, {
      margin: this.margin,
      reduction: this.reduction,
    });
  }
}

/** Cosine similarity or dissimilarity of pairs, as `torch.nn.CosineEmbeddingLoss`; see {@link F.cosineEmbeddingLoss}. */
export class CosineEmbeddingLoss extends ReducedLoss {
  /** Cosine below which dissimilar pairs cost nothing. */
  readonly margin: number;

  /** A cosine embedding loss (`margin` default 0). */
  constructor(options: F.CosineEmbeddingLossOptions = {}) {
    super(options, "CosineEmbeddingLoss");
    this.margin = checkFinite("CosineEmbeddingLoss", "margin", options.margin ?? 0);
  }

  /** The loss of pairs `input1`, `input2` [N, D] labelled by `target` [N] (1 or -1). */
  override forward(input1: Tensor, input2: Tensor, target: Tensor): Tensor {
    return F.cosineEmbeddingLoss(input1, input2, target, {
      margin: this.margin,
      reduction: this.reduction,
    });
  }
}

/** Anchor-positive-negative margin loss, as `torch.nn.TripletMarginLoss`; see {@link F.tripletMarginLoss}. */
export class TripletMarginLoss extends ReducedLoss {
  /** Required gap between the distances. */
  readonly margin: number;
  /** Norm of the distances. */
  readonly p: number;
  /** Added to the differences before their norm. */
  readonly eps: number;
  /** Whether the positive-negative distance may stand in for the anchor-negative one. */
  readonly swap: boolean;

  /** A triplet margin loss (`margin` 1, `p` 2, `eps` 1e-6, `swap` false by default). */
  constructor(options: F.TripletMarginLossOptions = {}) {
    super(options, "TripletMarginLoss");
    this.margin = checkFinite("TripletMarginLoss", "margin", options.margin ?? 1);
    this.p = checkFinite("TripletMarginLoss", "p", options.p ?? 2);
    if (!(this.p > 0)) throw new RangeError(`TripletMarginLoss: p must be positive, got ${this.p}`);
    this.eps = checkFinite("TripletMarginLoss", "eps", options.eps ?? 1e-6);
    this.swap = options.swap ?? false;
  }

  /** The loss of `anchor` [N, D] against `positive` and `negative` [N, D]. */
  override forward(anchor: Tensor, positive: Tensor, negative: Tensor): Tensor {
    return F.tripletMarginLoss(anchor, positive, negative, {
      margin: this.margin,
      p: this.p,
      eps: this.eps,
      swap: this.swap,
      reduction: this.reduction,
    });
  }
}

/** `log(1 + e^(-y x))`, as `torch.nn.SoftMarginLoss`; see {@link F.softMarginLoss}. */
export class SoftMarginLoss extends ReducedLoss {
  /** A soft margin loss (`reduction` default `"mean"`). */
  constructor(options: F.ReductionOptions = {}) {
    super(options, "SoftMarginLoss");
  }

  /** The loss of `input` against ±1 `target` (same shape). */
  override forward(input: Tensor, target: Tensor): Tensor {
    return F.softMarginLoss(input, target, { reduction: this.reduction });
  }
}

/** Per-class logistic loss averaged over classes, as `torch.nn.MultiLabelSoftMarginLoss`; see {@link F.multilabelSoftMarginLoss}. */
export class MultiLabelSoftMarginLoss extends ReducedLoss {
  /** Per-class weights (broadcast), or null (a buffer). */
  weight: Tensor | null;

  /** A multi-label soft margin loss (`reduction` default `"mean"`). */
  constructor(options: F.MultilabelSoftMarginLossOptions = {}) {
    super(options, "MultiLabelSoftMarginLoss");
    this.weight = this.registerBuffer("weight", options.weight ?? null);
  }

  /** The loss of `input` logits [N, C] against 0/1 `target` [N, C]. */
  override forward(input: Tensor, target: Tensor): Tensor {
    return F.multilabelSoftMarginLoss(input, target, {
      weight: this.weight,
      reduction: this.reduction,
    });
  }
}

/** Gaussian negative log-likelihood, as `torch.nn.GaussianNLLLoss`; see {@link F.gaussianNllLoss}. */
export class GaussianNLLLoss extends ReducedLoss {
  /** Whether the constant `0.5 log(2π)` is added. */
  readonly full: boolean;
  /** Smallest variance. */
  readonly eps: number;

  /** A Gaussian NLL loss (`full` false, `eps` 1e-6 by default). */
  constructor(options: F.GaussianNLLLossOptions = {}) {
    super(options, "GaussianNLLLoss");
    this.full = options.full ?? false;
    this.eps = checkFinite("GaussianNLLLoss", "eps", options.eps ?? 1e-6);
    if (!(this.eps > 0)) {
      throw new RangeError(`GaussianNLLLoss: eps must be positive, got ${this.eps}`);
    }
  }

  /** The loss of mean `input` and variance `variance` against `target`. */
  override forward(input: Tensor, target: Tensor, variance: Tensor): Tensor {
    return F.gaussianNllLoss(input, target, variance, {
      full: this.full,
      eps: this.eps,
      reduction: this.reduction,
    });
  }
}

/** Poisson negative log-likelihood, as `torch.nn.PoissonNLLLoss`; see {@link F.poissonNllLoss}. */
export class PoissonNLLLoss extends ReducedLoss {
  /** Whether the input is the log of the rate. */
  readonly logInput: boolean;
  /** Whether Stirling's term is added. */
  readonly full: boolean;
  /** Added to the rate inside the log when `logInput` is false. */
  readonly eps: number;

  /** A Poisson NLL loss (`logInput` true, `full` false, `eps` 1e-8 by default). */
  constructor(options: F.PoissonNLLLossOptions = {}) {
    super(options, "PoissonNLLLoss");
    this.logInput = options.logInput ?? true;
    this.full = options.full ?? false;
    this.eps = checkFinite("PoissonNLLLoss", "eps", options.eps ?? 1e-8);
  }

  /** The loss of `input` (log-)rates against counts `target` (same shape). */
  override forward(input: Tensor, target: Tensor): Tensor {
    return F.poissonNllLoss(input, target, {
      logInput: this.logInput,
      full: this.full,
      eps: this.eps,
      reduction: this.reduction,
    });
  }
}
