/**
 * Normalisation layers beyond those of `normalization.ts`: `InstanceNorm1d`,
 * `InstanceNorm2d`, `InstanceNorm3d` and `LocalResponseNorm`, as `torch.nn`'s.
 * @module
 */

import { getDefaultDtype } from "../dtype.ts";
import { formatShape } from "../shape.ts";
import { forwardScope } from "../storage.ts";
import type { Tensor } from "../tensor.ts";
import * as F from "./functional.ts";
import type { FactoryOptions } from "./layers.ts";
import { Module, type Parameter } from "./module.ts";
import { checkFinite, checkTensor, pyBool, pyFloat } from "./util.ts";
import { checkEps, registerAffine, registerRunningStats, resetRunningStats } from "./norm_state.ts";

/** Options of {@link InstanceNorm1d} and {@link InstanceNorm2d}. */
export interface InstanceNormModuleOptions extends FactoryOptions {
  /** Added to the variance (default 1e-5). */
  eps?: number;
  /** Weight of each forward's statistics in the running ones (default 0.1). */
  momentum?: number;
  /** Learn `weight` (ones) and `bias` (zeros) of [C] (default false, as PyTorch). */
  affine?: boolean;
  /** Keep running statistics and normalize with them in evaluation (default false, as PyTorch). */
  trackRunningStats?: boolean;
}

/**
 * What InstanceNorm1d and InstanceNorm2d share, as PyTorch's `_InstanceNorm`:
 * each (sample, channel) slice normalized over its positions. With
 * `trackRunningStats` the buffers `running_mean`, `running_var` and
 * `num_batches_tracked` exist (as PyTorch, `num_batches_tracked` stays 0:
 * instance norm never counts), training forwards update the running ones
 * and evaluation normalizes with them; without it there are no buffers and
 * every forward uses the instance statistics. An input without its batch dim
 * is normalized as a batch of one.
 */
export abstract class InstanceNormBase extends Module {
  /** C. */
  readonly numFeatures: number;
  /** Added to the variance. */
  readonly eps: number;
  /** Running-average factor. */
  momentum: number;
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
  /** Buffer `num_batches_tracked` (0-dimensional int32, always 0), or null. */
  numBatchesTracked: Tensor | null;

  /** The class name used in errors. */
  readonly layerName: string;
  /** The rank of an input without its batch dim (2 for 1d, 3 for 2d). */
  readonly unbatchedRank: number;

  /**
   * Instance norm over `numFeatures` channels of inputs of rank `unbatchedRank` or one more,
   * named `name` in errors.
   */
  constructor(
    name: string,
    unbatchedRank: number,
    numFeatures: number,
    options: InstanceNormModuleOptions = {},
  ) {
    super();
    this.layerName = name;
    this.unbatchedRank = unbatchedRank;
    if (!Number.isInteger(numFeatures) || numFeatures <= 0) {
      throw new RangeError(`${name}: numFeatures must be a positive integer, got ${numFeatures}`);
    }
    this.numFeatures = numFeatures;
    const eps = checkEps(name, options.eps ?? 1e-5);
    this.eps = eps;
    // PyTorch's instance_norm takes a float momentum (None fails at the first forward), so null
    // is refused rather than read as the default.
    const momentum = options.momentum === undefined ? 0.1 : options.momentum;
    if (typeof momentum !== "number" || !Number.isFinite(momentum)) {
      throw new RangeError(`${name}: momentum must be a finite number, got ${momentum}`);
    }
    this.momentum = momentum;
    this.affine = options.affine ?? false;
    this.trackRunningStats = options.trackRunningStats ?? false;
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

  /** Normalizes `x` [N, C, ...] (or [C, ...] without the batch dim). */
  override forward(x: Tensor): Tensor {
    checkTensor(this.layerName, "input", x);
    const rank = this.unbatchedRank;
    if (x.ndim !== rank && x.ndim !== rank + 1) {
      throw new RangeError(
        `${this.layerName}: expected ${rank}D or ${
          rank + 1
        }D input, got ${x.ndim}D input of shape ${formatShape(x.shape)}`,
      );
    }
    const batched = x.ndim === rank + 1;
    const channels = x.shape[batched ? 1 : 0];
    // Without weight or statistics PyTorch never reads numFeatures: any channel count works
    // (nor with 0, a lazy norm loaded from a state dict: its tensors' shapes are checked instead).
    if (
      (this.affine || this.trackRunningStats) && this.numFeatures !== 0 &&
      channels !== this.numFeatures
    ) {
      throw new RangeError(
        `${this.layerName}: expected input's size at dim=${
          batched ? 1 : 0
        } to match num_features (${this.numFeatures}), but got ${channels} (input of shape ${
          formatShape(x.shape)
        })`,
      );
    }
    return forwardScope(() => {
      const out = F.instanceNorm(batched ? x : x.unsqueeze(0), {
        runningMean: this.runningMean,
        runningVar: this.runningVar,
        weight: this.weight,
        bias: this.bias,
        useInputStats: this.training || !this.trackRunningStats,
        momentum: this.momentum,
        eps: this.eps,
      });
      return batched ? out : out.squeeze(0);
    });
  }

  /** `4, eps=1e-05, momentum=0.1, affine=False, track_running_stats=False`. */
  override extraRepr(): string {
    return `${this.numFeatures}, eps=${pyFloat(this.eps)}, momentum=${
      pyFloat(this.momentum)
    }, affine=${pyBool(this.affine)}, track_running_stats=${pyBool(this.trackRunningStats)}`;
  }
}

/**
 * Instance normalisation of [N, C, L] (or [C, L]) inputs, as
 * `torch.nn.InstanceNorm1d` (see {@link InstanceNormBase}); `affine` and
 * `trackRunningStats` default to false.
 */
export class InstanceNorm1d extends InstanceNormBase {
  /** Instance norm over `numFeatures` channels. */
  constructor(numFeatures: number, options: InstanceNormModuleOptions = {}) {
    super("InstanceNorm1d", 2, numFeatures, options);
  }
}

/**
 * Instance normalisation of [N, C, H, W] (or [C, H, W]) inputs, as
 * `torch.nn.InstanceNorm2d` (see {@link InstanceNormBase}); `affine` and
 * `trackRunningStats` default to false.
 */
export class InstanceNorm2d extends InstanceNormBase {
  /** Instance norm over `numFeatures` channels. */
  constructor(numFeatures: number, options: InstanceNormModuleOptions = {}) {
    super("InstanceNorm2d", 3, numFeatures, options);
  }
}

/**
 * Instance normalisation of [N, C, D, H, W] (or [C, D, H, W]) inputs, as
 * `torch.nn.InstanceNorm3d` (see {@link InstanceNormBase}); `affine` and
 * `trackRunningStats` default to false.
 */
export class InstanceNorm3d extends InstanceNormBase {
  /** Instance norm over `numFeatures` channels. */
  constructor(numFeatures: number, options: InstanceNormModuleOptions = {}) {
    super("InstanceNorm3d", 4, numFeatures, options);
  }
}

/**
 * Normalizes each channel by its `size` neighbours' mean square, as
 * `torch.nn.LocalResponseNorm` (see `functional.localResponseNorm`).
 */
export class LocalResponseNorm extends Module {
  /** Channels in the window. */
  readonly size: number;
  /** Multiplies the window's mean square. */
  readonly alpha: number;
  /** The exponent. */
  readonly beta: number;
  /** Added before the exponent. */
  readonly k: number;

  /** A window of `size` channels (`alpha` 1e-4, `beta` 0.75, `k` 1 by default). */
  constructor(size: number, options: F.LocalResponseNormOptions = {}) {
    super();
    if (!Number.isInteger(size) || size < 1) {
      throw new RangeError(`LocalResponseNorm: size must be a positive integer, got ${size}`);
    }
    this.size = size;
    this.alpha = checkFinite("LocalResponseNorm", "alpha", options.alpha ?? 1e-4);
    this.beta = checkFinite("LocalResponseNorm", "beta", options.beta ?? 0.75);
    this.k = checkFinite("LocalResponseNorm", "k", options.k ?? 1);
  }

  /** Normalizes `x` [N, C, ...]. */
  override forward(x: Tensor): Tensor {
    return F.localResponseNorm(x, this.size, { alpha: this.alpha, beta: this.beta, k: this.k });
  }

  /** `2, alpha=0.0001, beta=0.75, k=1.0`. */
  override extraRepr(): string {
    return `${this.size}, alpha=${pyFloat(this.alpha)}, beta=${pyFloat(this.beta)}, k=${
      pyFloat(this.k)
    }`;
  }
}
