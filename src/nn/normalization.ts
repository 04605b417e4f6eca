/**
 * Normalisation layers: `LayerNorm`, `BatchNorm1d`, `BatchNorm2d`,
 * `BatchNorm3d` and `GroupNorm`.
 * @module
 */

import { getDefaultDtype } from "../dtype.ts";
import { noGrad } from "../autograd.ts";
import { div } from "../ops/elementwise.ts";
import { tidy } from "../storage.ts";
import type { Tensor } from "../tensor.ts";
import * as F from "./functional.ts";
import type { FactoryOptions } from "./layers.ts";
import { Module, type Parameter } from "./module.ts";
import { pyBool, pyFloat } from "./util.ts";
import { checkEps, registerAffine, registerRunningStats, resetRunningStats } from "./norm_state.ts";
import { checkBatchNorm } from "./util.ts";

/** Options of {@link LayerNorm}. */
export interface LayerNormModuleOptions extends FactoryOptions {
  /** Added to the variance (default 1e-5). */
  eps?: number;
  /** Learn `weight` (ones) and `bias` (zeros) of the normalized shape (default true). */
  elementwiseAffine?: boolean;
  /** Learn `bias` too when affine (default true). */
  bias?: boolean;
}

/**
 * Normalizes over the trailing `normalizedShape` dims, as
 * `torch.nn.LayerNorm`; `weight` starts at ones and `bias` at zeros.
 */
export class LayerNorm extends Module {
  /** The trailing dims normalized over. */
  readonly normalizedShape: readonly number[];
  /** Added to the variance. */
  readonly eps: number;
  /** Whether `weight`/`bias` exist. */
  readonly elementwiseAffine: boolean;
  /** Scale of the normalized shape, or null. */
  weight: Parameter | null;
  /** Shift of the normalized shape, or null. */
  bias: Parameter | null;

  /** A layer norm over `normalizedShape` (a number for one dim). */
  constructor(normalizedShape: number | readonly number[], options: LayerNormModuleOptions = {}) {
    super();
    const shape = typeof normalizedShape === "number" ? [normalizedShape] : [...normalizedShape];
    if (shape.length === 0 || !shape.every((d) => Number.isInteger(d) && d > 0)) {
      throw new RangeError(
        `LayerNorm: normalizedShape must be positive integers, got ${
          JSON.stringify(normalizedShape)
        }`,
      );
    }
    this.normalizedShape = Object.freeze(shape);
    this.eps = checkEps("LayerNorm", options.eps ?? 1e-5);
    this.elementwiseAffine = options.elementwiseAffine ?? true;
    const factory = { device: options.device, dtype: options.dtype ?? getDefaultDtype() };
    [this.weight, this.bias] = registerAffine(
      this,
      shape,
      factory,
      this.elementwiseAffine,
      this.elementwiseAffine && (options.bias ?? true),
    );
  }

  /** Normalizes `x`. */
  override forward(x: Tensor): Tensor {
    return F.layerNorm(x, this.normalizedShape, {
      weight: this.weight,
      bias: this.bias,
      eps: this.eps,
    });
  }

  /** `(5,), eps=1e-05, elementwise_affine=True`. */
  override extraRepr(): string {
    const shape = this.normalizedShape.length === 1
      ? `(${this.normalizedShape[0]},)`
      : `(${this.normalizedShape.join(", ")})`;
    return `${shape}, eps=${pyFloat(this.eps)}, elementwise_affine=${
      pyBool(this.elementwiseAffine)
    }`;
  }
}

/** Options of {@link BatchNorm1d}. */
export interface BatchNormModuleOptions extends FactoryOptions {
  /** Added to the variance (default 1e-5). */
  eps?: number;
  /**
   * Weight of each batch in the running statistics (default 0.1); null for
   * a cumulative average (`1 / num_batches_tracked`).
   */
  momentum?: number | null;
  /** Learn `weight` (ones) and `bias` (zeros) of [C] (default true). */
  affine?: boolean;
  /** Keep running statistics for evaluation (default true). */
  trackRunningStats?: boolean;
}

/**
 * What BatchNorm1d and BatchNorm2d share, as PyTorch's `_BatchNorm`:
 * normalisation over the channels (dim 1). Training normalizes with the
 * batch mean and biased variance and updates the buffers `running_mean`,
 * `running_var` (with the unbiased variance) and `num_batches_tracked` on the
 * device; evaluation normalizes with the running statistics.
 * `num_batches_tracked` is int32 (PyTorch: int64).
 */
export abstract class BatchNormBase extends Module {
  /** C. */
  readonly numFeatures: number;
  /** Added to the variance. */
  readonly eps: number;
  /** Running-average factor, or null for a cumulative average. */
  momentum: number | null;
  /** Whether `weight`/`bias` exist. */
  readonly affine: boolean;
  /** Whether running statistics are kept. */
  readonly trackRunningStats: boolean;
  /** Scale [C], or null. */
  weight: Parameter | null;
  /** Shift [C], or null. */
  bias: Parameter | null;
  /** Buffer `running_mean` [C] (zeros at first), or null. */
  runningMean: Tensor | null;
  /** Buffer `running_var` [C] (ones at first), or null. */
  runningVar: Tensor | null;
  /** Buffer `num_batches_tracked` (0-dimensional int32), or null. */
  numBatchesTracked: Tensor | null;

  /** The class name used in errors. */
  readonly layerName: string;
  /** The input ranks accepted, and how errors describe them; null: any input of at least 2 dims. */
  readonly inputRanks: { readonly allowed: readonly number[]; readonly describe: string } | null;

  /**
   * Batch norm over `numFeatures` channels of inputs of the given ranks (null: any of at least
   * 2 dims), named `name` in errors.
   */
  constructor(
    name: string,
    ranks: { readonly allowed: readonly number[]; readonly describe: string } | null,
    numFeatures: number,
    options: BatchNormModuleOptions = {},
  ) {
    super();
    this.layerName = name;
    this.inputRanks = ranks;
    if (!Number.isInteger(numFeatures) || numFeatures <= 0) {
      throw new RangeError(
        `${name}: numFeatures must be a positive integer, got ${numFeatures}`,
      );
    }
    this.numFeatures = numFeatures;
    this.eps = checkEps(name, options.eps ?? 1e-5);
    const momentum = options.momentum === undefined ? 0.1 : options.momentum;
    if (momentum !== null && !(typeof momentum === "number" && momentum >= 0 && momentum <= 1)) {
      throw new RangeError(`${name}: momentum must be in [0, 1] or null, got ${momentum}`);
    }
    this.momentum = momentum;
    this.affine = options.affine ?? true;
    this.trackRunningStats = options.trackRunningStats ?? true;
    const factory = { device: options.device, dtype: options.dtype ?? getDefaultDtype() };
    [this.weight, this.bias] = registerAffine(this, [numFeatures], factory, this.affine);
    [this.runningMean, this.runningVar, this.numBatchesTracked] = registerRunningStats(
      this,
      numFeatures,
      factory,
      this.trackRunningStats,
    );
  }

  /** Resets the running statistics to mean 0, variance 1, 0 batches. */
  resetRunningStats(): void {
    resetRunningStats([this.runningMean, this.runningVar, this.numBatchesTracked]);
  }

  /** Normalizes `x` over its channels (dim 1). */
  override forward(x: Tensor): Tensor {
    return this.normalizeWith(x, F.batchNorm);
  }

  /**
   * The forward with `batchNorm` computing the normalisation (`F.batchNorm`, or SyncBatchNorm's
   * statistics over ranks): checks, then `num_batches_tracked`, then `batchNorm` with the
   * momentum to use. With `valuesOnOtherRanks` a batch of one value per channel is allowed here,
   * since the statistics also count other ranks' values.
   */
  protected normalizeWith(
    x: Tensor,
    batchNorm: typeof F.batchNorm,
    valuesOnOtherRanks = false,
  ): Tensor {
    const useBatchStats = this.training || !this.trackRunningStats;
    const update = this.training && this.trackRunningStats;
    const stats = update || !useBatchStats
      ? { runningMean: this.runningMean, runningVar: this.runningVar }
      : { runningMean: null, runningVar: null };
    // Everything is checked before the buffers change, so a bad input leaves them as they were.
    checkBatchNorm(
      x,
      { ...stats, weight: this.weight, bias: this.bias },
      useBatchStats && !valuesOnOtherRanks,
      // 0: a lazy norm loaded from a state dict, whose tensors' shapes are checked instead.
      this.numFeatures === 0 ? undefined : this.numFeatures,
      this.inputRanks ?? undefined,
    );
    const tracked = update ? this.numBatchesTracked : null;
    if (tracked && tracked.device !== x.device) {
      throw new Error(
        `${this.layerName}: num_batches_tracked is on ${tracked.device}, the input on ${x.device}`,
      );
    }
    let factor: Tensor | null = null;
    if (tracked) {
      noGrad(() => tidy(() => tracked._assign(tracked.add(1))));
      // A cumulative average weighs batch k by 1/k, computed on the device.
      if (this.momentum === null) factor = noGrad(() => tidy(() => div(1, tracked.to(x.dtype))));
    }
    try {
      return batchNorm(x, stats.runningMean, stats.runningVar, {
        weight: this.weight,
        bias: this.bias,
        training: useBatchStats,
        momentum: factor ?? this.momentum ?? 0,
        eps: this.eps,
      });
    } finally {
      factor?.dispose();
    }
  }

  /** `4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True`. */
  override extraRepr(): string {
    const momentum = this.momentum === null ? "None" : pyFloat(this.momentum);
    return `${this.numFeatures}, eps=${pyFloat(this.eps)}, momentum=${momentum}, affine=${
      pyBool(this.affine)
    }, track_running_stats=${pyBool(this.trackRunningStats)}`;
  }
}

/**
 * Batch normalisation over the channels of [N, C] or [N, C, L] inputs, as
 * `torch.nn.BatchNorm1d` (see {@link BatchNormBase}).
 */
export class BatchNorm1d extends BatchNormBase {
  /** Batch norm over `numFeatures` channels. */
  constructor(numFeatures: number, options: BatchNormModuleOptions = {}) {
    super(
      "BatchNorm1d",
      {
        allowed: [2, 3],
        describe: "a 2D [N, C] or 3D [N, C, L] input",
      },
      numFeatures,
      options,
    );
  }
}

/**
 * Batch normalisation over the channels of [N, C, H, W] inputs, as
 * `torch.nn.BatchNorm2d` (see {@link BatchNormBase}): statistics over N, H
 * and W per channel.
 */
export class BatchNorm2d extends BatchNormBase {
  /** Batch norm over `numFeatures` channels. */
  constructor(numFeatures: number, options: BatchNormModuleOptions = {}) {
    super(
      "BatchNorm2d",
      { allowed: [4], describe: "a 4D [N, C, H, W] input" },
      numFeatures,
      options,
    );
  }
}

/**
 * Batch normalisation over the channels of [N, C, D, H, W] inputs, as
 * `torch.nn.BatchNorm3d` (see {@link BatchNormBase}): statistics over N, D,
 * H and W per channel.
 */
export class BatchNorm3d extends BatchNormBase {
  /** Batch norm over `numFeatures` channels. */
  constructor(numFeatures: number, options: BatchNormModuleOptions = {}) {
    super(
      "BatchNorm3d",
      { allowed: [5], describe: "a 5D [N, C, D, H, W] input" },
      numFeatures,
      options,
    );
  }
}

/** Options of {@link GroupNorm}. */
export interface GroupNormModuleOptions extends FactoryOptions {
  /** Added to the variance (default 1e-5). */
  eps?: number;
  /** Learn per-channel `weight` (ones) and `bias` (zeros) (default true). */
  affine?: boolean;
}

/**
 * Group normalisation, as `torch.nn.GroupNorm`: the channels of [N, C, ...]
 * split into `numGroups` groups, each normalized per sample over its channels
 * and positions (biased variance), then a per-channel affine transform.
 */
export class GroupNorm extends Module {
  /** Groups the channels split into. */
  readonly numGroups: number;
  /** C. */
  readonly numChannels: number;
  /** Added to the variance. */
  readonly eps: number;
  /** Whether `weight`/`bias` exist. */
  readonly affine: boolean;
  /** Scale [C], or null. */
  weight: Parameter | null;
  /** Shift [C], or null. */
  bias: Parameter | null;

  /** `numChannels` split into `numGroups` (which must divide it). */
  constructor(numGroups: number, numChannels: number, options: GroupNormModuleOptions = {}) {
    super();
    if (
      !Number.isInteger(numGroups) || !Number.isInteger(numChannels) || numGroups < 1 ||
      numChannels < 1 || numChannels % numGroups !== 0
    ) {
      throw new RangeError(
        `GroupNorm: numChannels (${numChannels}) must be divisible by numGroups (${numGroups}), both positive integers`,
      );
    }
    this.numGroups = numGroups;
    this.numChannels = numChannels;
    this.eps = checkEps("GroupNorm", options.eps ?? 1e-5);
    this.affine = options.affine ?? true;
    const factory = { device: options.device, dtype: options.dtype ?? getDefaultDtype() };
    [this.weight, this.bias] = registerAffine(this, [numChannels], factory, this.affine);
  }

  /** Normalizes `x` [N, C, ...]. */
  override forward(x: Tensor): Tensor {
    return F.groupNorm(x, this.numGroups, { weight: this.weight, bias: this.bias, eps: this.eps });
  }

  /** `2, 4, eps=1e-05, affine=True`. */
  override extraRepr(): string {
    return `${this.numGroups}, ${this.numChannels}, eps=${pyFloat(this.eps)}, affine=${
      pyBool(this.affine)
    }`;
  }
}
