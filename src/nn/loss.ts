/**
 * Loss modules: `MSELoss` and `CrossEntropyLoss`.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import * as F from "./functional.ts";
import { Module } from "./module.ts";
import { pyFloat } from "./util.ts";

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
