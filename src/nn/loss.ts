/**
 * Loss modules, as `torch.nn`'s: `MSELoss`, `CrossEntropyLoss`, `NLLLoss`,
 * `BCELoss`, `BCEWithLogitsLoss`, `L1Loss`, `SmoothL1Loss`, `HuberLoss`,
 * `KLDivLoss`.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import * as F from "./functional.ts";
import { ReducedLoss as QuietReducedLoss } from "./loss_base.ts";
import { Module } from "./module.ts";
import { checkFinite, checkReduction, pyFloat } from "./util.ts";

/** Mean squared error, as `torch.nn.MSELoss`. */
export class MSELoss extends Module {
  /** `"mean"`, `"sum"` or `"none"`. */
  readonly reduction: F.Reduction;

  /** An MSE loss (`reduction` default `"mean"`). */
  constructor(options: F.MSELossOptions = {}) {
    super();
    this.reduction = options.reduction ?? "mean";
  }

  /** The loss of `input` against `target` (same shapes). */
  override forward(input: Tensor, target: Tensor): Tensor {
    return F.mseLoss(input, target, { reduction: this.reduction });
  }
}

/**
 * Cross entropy of logits [N, C] against int32 class indices [N] (or class
 * probabilities [N, C]), as `torch.nn.CrossEntropyLoss`; see
 * {@link F.crossEntropy}.
 */
export class CrossEntropyLoss extends Module {
  /** Per-class weights [C], or null. */
  weight: Tensor | null;
  /** Targets equal to this are ignored. */
  readonly ignoreIndex: number;
  /** `"mean"`, `"sum"` or `"none"`. */
  readonly reduction: F.Reduction;
  /** Label smoothing amount in [0, 1]. */
  readonly labelSmoothing: number;

  /** A cross-entropy loss (`reduction` default `"mean"`). */
  constructor(options: F.CrossEntropyOptions = {}) {
    super();
    this.weight = options.weight ?? null;
    this.ignoreIndex = options.ignoreIndex ?? -100;
    this.reduction = options.reduction ?? "mean";
    this.labelSmoothing = options.labelSmoothing ?? 0;
    if (this.weight) this.registerBuffer("weight", this.weight);
  }

  /** The loss of `input` logits against `target`. */
  override forward(input: Tensor, target: Tensor): Tensor {
    return F.crossEntropy(input, target, {
      weight: this.weight,
      ignoreIndex: this.ignoreIndex,
      reduction: this.reduction,
      labelSmoothing: this.labelSmoothing,
    });
  }

  /** Empty unless label smoothing is set. */
  override extraRepr(): string {
    return this.labelSmoothing ? `label_smoothing=${pyFloat(this.labelSmoothing)}` : "";
  }
}

/** A loss holding only its reduction (PyTorch's `_Loss`), printing a reduction other than the default. */
abstract class ReducedLoss extends QuietReducedLoss {
  /** `reduction='sum'` unless the default. */
  override extraRepr(): string {
    return this.reduction === "mean" ? "" : `reduction='${this.reduction}'`;
  }
}

/**
 * Negative log-likelihood of log-probabilities [N, C] against int32 class
 * indices [N], as `torch.nn.NLLLoss`; see {@link F.nllLoss}.
 */
export class NLLLoss extends ReducedLoss {
  /** Per-class weights [C], or null (a buffer). */
  weight: Tensor | null;
  /** Targets equal to this are ignored. */
  readonly ignoreIndex: number;

  /** An NLL loss (`reduction` default `"mean"`, `ignoreIndex` default -100). */
  constructor(options: F.NLLLossOptions = {}) {
    super(options, "NLLLoss");
    this.weight = this.registerBuffer("weight", options.weight ?? null);
    this.ignoreIndex = options.ignoreIndex ?? -100;
  }

  /** The loss of `input` log-probabilities against `target`. */
  override forward(input: Tensor, target: Tensor): Tensor {
    return F.nllLoss(input, target, {
      weight: this.weight,
      ignoreIndex: this.ignoreIndex,
      reduction: this.reduction,
    });
  }
}

/**
 * `torch.nn.NLLLoss2d`, which PyTorch 1.13 keeps as a deprecated name of
 * {@link NLLLoss} (that takes [N, C, d1, ...] inputs itself): the same loss
 * and options, for code that still names it. Unlike PyTorch's, it prints no
 * deprecation warning.
 */
export class NLLLoss2d extends NLLLoss {}

/** Binary cross entropy of probabilities, as `torch.nn.BCELoss`; see {@link F.binaryCrossEntropy}. */
export class BCELoss extends ReducedLoss {
  /** Per-element rescaling (broadcast), or null (a buffer). */
  weight: Tensor | null;

  /** A BCE loss (`reduction` default `"mean"`). */
  constructor(options: F.BCELossOptions = {}) {
    super(options, "BCELoss");
    this.weight = this.registerBuffer("weight", options.weight ?? null);
  }

  /** The loss of `input` probabilities against `target` (same shape). */
  override forward(input: Tensor, target: Tensor): Tensor {
    return F.binaryCrossEntropy(input, target, { weight: this.weight, reduction: this.reduction });
  }
}

/**
 * Binary cross entropy of logits, stable for any logit, as
 * `torch.nn.BCEWithLogitsLoss`; see {@link F.binaryCrossEntropyWithLogits}.
 */
export class BCEWithLogitsLoss extends ReducedLoss {
  /** Per-element rescaling (broadcast), or null (a buffer). */
  weight: Tensor | null;
  /** Weight of positive examples per class (broadcast), or null (a buffer, `pos_weight`). */
  posWeight: Tensor | null;

  /** A BCE-with-logits loss (`reduction` default `"mean"`). */
  constructor(options: F.BCEWithLogitsOptions = {}) {
    super(options, "BCEWithLogitsLoss");
    this.weight = this.registerBuffer("weight", options.weight ?? null);
    this.posWeight = this.registerBuffer("pos_weight", options.posWeight ?? null);
  }

  /** The loss of `input` logits against `target` (same shape). */
  override forward(input: Tensor, target: Tensor): Tensor {
    return F.binaryCrossEntropyWithLogits(input, target, {
      weight: this.weight,
      posWeight: this.posWeight,
      reduction: this.reduction,
    });
  }
}

/** Mean absolute error, as `torch.nn.L1Loss`. */
export class L1Loss extends ReducedLoss {
  /** An L1 loss (`reduction` default `"mean"`). */
  constructor(options: F.ReductionOptions = {}) {
    super(options, "L1Loss");
  }

  /** The loss of `input` against `target` (same shape). */
  override forward(input: Tensor, target: Tensor): Tensor {
    return F.l1Loss(input, target, { reduction: this.reduction });
  }
}

/** Quadratic below `beta`, linear above, as `torch.nn.SmoothL1Loss`. */
export class SmoothL1Loss extends ReducedLoss {
  /** Where the loss turns linear. */
  readonly beta: number;

  /** A smooth L1 loss (`beta` default 1). */
  constructor(options: F.SmoothL1LossOptions = {}) {
    super(options, "SmoothL1Loss");
    this.beta = checkFinite("SmoothL1Loss", "beta", options.beta ?? 1);
    if (this.beta < 0) {
      throw new RangeError(`SmoothL1Loss: beta must be non-negative, got ${this.beta}`);
    }
  }

  /** The loss of `input` against `target` (same shape). */
  override forward(input: Tensor, target: Tensor): Tensor {
    return F.smoothL1Loss(input, target, { reduction: this.reduction, beta: this.beta });
  }
}

/** Quadratic below `delta`, `delta`-scaled linear above, as `torch.nn.HuberLoss`. */
export class HuberLoss extends ReducedLoss {
  /** Where the loss turns linear. */
  readonly delta: number;

  /** A Huber loss (`delta` default 1). */
  constructor(options: F.HuberLossOptions = {}) {
    super(options, "HuberLoss");
    this.delta = checkFinite("HuberLoss", "delta", options.delta ?? 1);
    if (!(this.delta > 0)) {
      throw new RangeError(`HuberLoss: delta must be positive, got ${this.delta}`);
    }
  }

  /** The loss of `input` against `target` (same shape). */
  override forward(input: Tensor, target: Tensor): Tensor {
    return F.huberLoss(input, target, { reduction: this.reduction, delta: this.delta });
  }
}

/**
 * Kullback-Leibler divergence of a target distribution from input
 * log-probabilities, as `torch.nn.KLDivLoss`; use `reduction: "batchmean"`
 * for the true KL per sample. See {@link F.klDiv}.
 */
export class KLDivLoss extends Module {
  /** `"mean"`, `"batchmean"`, `"sum"` or `"none"`. */
  readonly reduction: F.Reduction | "batchmean";
  /** Whether the target holds log-probabilities. */
  readonly logTarget: boolean;

  /** A KL-divergence loss (`reduction` default `"mean"`, as PyTorch). */
  constructor(options: F.KLDivOptions = {}) {
    super();
    this.reduction = options.reduction ?? "mean";
    checkReduction("KLDivLoss", this.reduction, ["mean", "batchmean", "sum", "none"]);
    this.logTarget = options.logTarget ?? false;
  }

  /** The divergence of `target` from `input` log-probabilities (same shape). */
  override forward(input: Tensor, target: Tensor): Tensor {
    return F.klDiv(input, target, { reduction: this.reduction, logTarget: this.logTarget });
  }
}
