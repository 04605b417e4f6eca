/**
 * More loss modules, as `torch.nn`'s: `CTCLoss`, `MultiMarginLoss`,
 * `MultiLabelMarginLoss`, `HingeEmbeddingLoss`,
 * `TripletMarginWithDistanceLoss`.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import * as F from "./functional.ts";
import { PairwiseDistance } from "./bilinear.ts";
import { ReducedLoss } from "./loss_base.ts";
import { Module } from "./module.ts";
import { checkFinite } from "./util.ts";

/** The connectionist temporal classification loss, as `torch.nn.CTCLoss`; see {@link F.ctcLoss}. */
export class CTCLoss extends ReducedLoss {
  /** The blank label. */
  readonly blank: number;
  /** Whether infinite losses (impossible alignments) and their gradients become 0. */
  readonly zeroInfinity: boolean;

  /** A CTC loss (`blank` 0, `zeroInfinity` false by default). */
  constructor(options: F.CTCLossOptions = {}) {
    super(options, "CTCLoss");
    this.blank = options.blank ?? 0;
    if (!Number.isInteger(this.blank) || this.blank < 0) {
      throw new RangeError(`CTCLoss: blank must be a non-negative integer, got ${this.blank}`);
    }
    this.zeroInfinity = options.zeroInfinity ?? false;
  }

  /**
   * The loss of `logProbs` [T, N, C] (or [T, C]) against `targets` (padded
   * [N, S] or concatenated), with one input and one target length per sample.
   */
  override forward(
    logProbs: Tensor,
    targets: Tensor,
    inputLengths: F.CTCLengths,
    targetLengths: F.CTCLengths,
  ): Tensor {
    return F.ctcLoss(logProbs, targets, inputLengths, targetLengths, {
      blank: this.blank,
      zeroInfinity: this.zeroInfinity,
      reduction: this.reduction,
    });
  }
}

/** The multi-class hinge loss, as `torch.nn.MultiMarginLoss`; see {@link F.multiMarginLoss}. */
export class MultiMarginLoss extends ReducedLoss {
  /** The power of each hinge (1 or 2). */
  readonly p: number;
  /** Required gap between the target's score and the others'. */
  readonly margin: number;
  /** Per-class weights [C], or null (a buffer). */
  weight: Tensor | null;

  /** A multi-margin loss (`p` 1, `margin` 1, no weight by default). */
  constructor(options: F.MultiMarginLossOptions = {}) {
    super(options, "MultiMarginLoss");
    this.p = options.p ?? 1;
    if (this.p !== 1 && this.p !== 2) {
      throw new RangeError(`MultiMarginLoss: p must be 1 or 2, got ${this.p}`);
    }
    this.margin = checkFinite("MultiMarginLoss", "margin", options.margin ?? 1);
    this.weight = this.registerBuffer("weight", options.weight ?? null);
  }

  /** The loss of class scores `input` [N, C] against int32 class indices `target` [N]. */
  override forward(input: Tensor, target: Tensor): Tensor {
    return F.multiMarginLoss(input, target, {
      p: this.p,
      margin: this.margin,
      weight: this.weight,
      reduction: this.reduction,
    });
  }
}

/** The multi-label hinge loss, as `torch.nn.MultiLabelMarginLoss`; see {@link F.multilabelMarginLoss}. */
export class MultiLabelMarginLoss extends ReducedLoss {
  /** A multi-label margin loss (`reduction` default `"mean"`). */
  constructor(options: F.ReductionOptions = {}) {
    super(options, "MultiLabelMarginLoss");
  }

  /** The loss of class scores `input` [N, C] against int32 label lists `target` [N, C] (ended by -1). */
  override forward(input: Tensor, target: Tensor): Tensor {
    return F.multilabelMarginLoss(input, target, { reduction: this.reduction });
  }
}

/** `x` for similar pairs, `max(0, margin - x)` for dissimilar ones, as `torch.nn.HingeEmbeddingLoss`; see {@link F.hingeEmbeddingLoss}. */
export class HingeEmbeddingLoss extends ReducedLoss {
  /** Distance below which dissimilar pairs cost. */
  readonly margin: number;

  /** A hinge embedding loss (`margin` default 1). */
  constructor(options: F.HingeEmbeddingLossOptions = {}) {
    super(options, "HingeEmbeddingLoss");
    this.margin = checkFinite("HingeEmbeddingLoss", "margin", options.margin ?? 1);
  }

  /** The loss of distances `input` labelled by `target` (1 or -1; broadcast). */
  override forward(input: Tensor, target: Tensor): Tensor {
    return F.hingeEmbeddingLoss(input, target, { margin: this.margin, reduction: this.reduction });
  }
}

/** Options of {@link TripletMarginWithDistanceLoss}. */
export interface TripletMarginWithDistanceLossModuleOptions
  extends Omit<F.TripletMarginWithDistanceLossOptions, "distanceFunction"> {
  /**
   * The distance: a function, or a module whose `forward(a, b)` gives it
   * (then a submodule `distance_function`, as in PyTorch). Default: the
   * pairwise Euclidean distance.
   */
  distanceFunction?: F.DistanceFunction | Module | null;
}

/** Triplet margin loss with any distance, as `torch.nn.TripletMarginWithDistanceLoss`; see {@link F.tripletMarginWithDistanceLoss}. */
export class TripletMarginWithDistanceLoss extends ReducedLoss {
  /** The distance function (the `distance_function` module's forward when there is one). */
  readonly distanceFunction: F.DistanceFunction;
  /** Required gap between the distances. */
  readonly margin: number;
  /** Whether the positive-negative distance may stand in for the anchor-negative one. */
  readonly swap: boolean;
  /** The distance as a module (PyTorch's submodule of that name): the one given, else a
   * `PairwiseDistance`; null when a plain function was given. */
  readonly distance_function: Module | null;

  /** A triplet loss (`margin` 1, `swap` false, the pairwise distance by default). */
  constructor(options: TripletMarginWithDistanceLossModuleOptions = {}) {
    super(options, "TripletMarginWithDistanceLoss");
    const given = options.distanceFunction ?? null;
    if (given !== null && typeof given !== "function" && !(given instanceof Module)) {
      throw new TypeError(
        `TripletMarginWithDistanceLoss: distanceFunction must be a function (a, b) => Tensor or a Module, got ${typeof given}`,
      );
    }
    // PyTorch's default distance is a PairwiseDistance submodule, so it prints as one.
    const module = given instanceof Module ? given : given === null ? new PairwiseDistance() : null;
    this.distance_function = module;
    this.distanceFunction = module
      ? (a, b) => (module.forward as (a: Tensor, b: Tensor) => Tensor)(a, b)
      : given as F.DistanceFunction;
    this.margin = checkFinite("TripletMarginWithDistanceLoss", "margin", options.margin ?? 1);
    this.swap = options.swap ?? false;
  }

  /** The loss of `anchor` against `positive` and `negative`. */
  override forward(anchor: Tensor, positive: Tensor, negative: Tensor): Tensor {
    return F.tripletMarginWithDistanceLoss(anchor, positive, negative, {
      distanceFunction: this.distanceFunction,
      margin: this.margin,
      swap: this.swap,
      reduction: this.reduction,
    });
  }
}
