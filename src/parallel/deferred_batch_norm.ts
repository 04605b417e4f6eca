/**
 * `DeferredBatchNorm`, the BatchNorm of {@link Pipe} with `deferredBatchNorm`:
 * running statistics over the whole mini-batch, as PyTorch's
 * `torch.distributed.pipeline.sync.batchnorm.DeferredBatchNorm`.
 * @module
 */

import { noGrad } from "../autograd.ts";
import { batchNorm } from "../nn/functional.ts";
import type { Module } from "../nn/module.ts";
import { BatchNormBase } from "../nn/normalization.ts";
import { tidy } from "../storage.ts";
import type { Tensor } from "../tensor.ts";
import { zeros } from "../ops/factory.ts";
import { isRecomputing } from "../autograd/checkpoint_core.ts";

/**
 * A BatchNorm layer that, in training, normalizes each micro-batch with that
 * micro-batch's statistics (as PyTorch) but updates `running_mean`,
 * `running_var` and `num_batches_tracked` once per mini-batch of `chunks`
 * micro-batches, with the statistics of the whole mini-batch; a
 * recomputation in a checkpointed backward does not count. Made by
 * {@link DeferredBatchNorm.convertDeferredBatchNorm} from a BatchNorm1d, 2d
 * or 3d whose parameters and running buffers it shares.
 *
 * Deliberate differences from PyTorch 1.13: `running_var` takes the
 * unbiased variance of the mini-batch, so the running statistics equal those
 * of one BatchNorm over the whole mini-batch (PyTorch's DeferredBatchNorm
 * uses the biased variance there); the accumulators `sum` and `sum_squares`
 * are non-persistent buffers, so the state dict has the keys of the plain
 * BatchNorm; inputs of 2 dims are accepted when the source layer accepts
 * them.
 */
export class DeferredBatchNorm extends BatchNormBase {
  /** How many micro-batches make a mini-batch (the Pipe sets it each forward). */
  chunks: number;
  /** Per-channel sum of the micro-batches tracked so far. */
  sum: Tensor;
  /** Per-channel sum of squares of the micro-batches tracked so far. */
  sumSquares: Tensor;
  /** Values per channel tracked so far. */
  counter = 0;
  /** Micro-batches tracked so far. */
  tracked = 0;

  /** A deferred copy of `source` (sharing its tensors) over `chunks` micro-batches. */
  constructor(source: BatchNormBase, chunks = 1) {
    const device = (source.weight ?? source.runningMean)?.device;
    super(source.layerName, source.inputRanks, source.numFeatures, {
      eps: source.eps,
      momentum: source.momentum,
      affine: source.affine,
      trackRunningStats: source.trackRunningStats,
      dtype: source.runningMean?.dtype,
      device,
    });
    this.weight = source.weight;
    this.bias = source.bias;
    this.runningMean = source.runningMean;
    this.runningVar = source.runningVar;
    this.numBatchesTracked = source.numBatchesTracked;
    this.training = source.training;
    this.chunks = chunks;
    const factory = { device, dtype: source.runningMean?.dtype };
    this.sum = this.registerBuffer("sum", zeros([source.numFeatures], factory), {
      persistent: false,
    });
    this.sumSquares = this.registerBuffer("sum_squares", zeros([source.numFeatures], factory), {
      persistent: false,
    });
  }

  /**
   * `module` with every BatchNorm that tracks running statistics replaced by
   * a DeferredBatchNorm sharing its tensors (PyTorch's
   * `convert_deferred_batch_norm`): a BatchNorm itself gives a new module;
   * inside any other module the children are replaced in place.
   */
  static convertDeferredBatchNorm(module: Module, chunks = 1): Module {
    if (module instanceof BatchNormBase && !(module instanceof DeferredBatchNorm)) {
      return module.trackRunningStats ? new DeferredBatchNorm(module, chunks) : module;
    }
    const fields = module as unknown as Record<string, Module>;
    for (const [name, child] of module.namedChildren()) {
      const converted = DeferredBatchNorm.convertDeferredBatchNorm(child, chunks);
      if (converted !== child) fields[name] = converted;
    }
    return module;
  }

  /** Normalizes `x`; in training, tracks it toward the mini-batch statistics. */
  override forward(x: Tensor): Tensor {
    if (!this.training || !this.trackRunningStats) return super.forward(x);
    if (!isRecomputing()) {
      this.#track(x);
      if (this.tracked >= this.chunks) this.commit();
    }
    return batchNorm(x, null, null, {
      weight: this.weight,
      bias: this.bias,
      training: true,
      momentum: 0,
      eps: this.eps,
    });
  }

  #track(x: Tensor): void {
    if (x.ndim < 2 || x.shape[1] !== this.numFeatures) {
      throw new RangeError(
        `${this.layerName}: expected an input of ${this.numFeatures} channels (dim 1), got shape [${
          x.shape.join(", ")
        }]`,
      );
    }
    const dims = [0, ...Array.from({ length: x.ndim - 2 }, (_, i) => i + 2)];
    noGrad(() =>
      tidy(() => {
        const v = x.detach();
        this.sum._assign(this.sum.add(v.sum(dims)));
        this.sumSquares._assign(this.sumSquares.add(v.mul(v).sum(dims)));
      })
    );
    this.counter += x.numel() / this.numFeatures;
    this.tracked++;
  }

  /**
   * Forgets the micro-batches tracked since the last commit, leaving the
   * running statistics as they are: a Pipe forward that throws midway calls
   * it, so a failed mini-batch's partial statistics do not mix into the next
   * one's (PyTorch keeps them, then commits a mixed batch).
   */
  discard(): void {
    if (this.tracked === 0) return;
    noGrad(() => {
      this.sum._assign(this.sum.zerosLike());
      this.sumSquares._assign(this.sumSquares.zerosLike());
    });
    this.counter = 0;
    this.tracked = 0;
  }

  /**
   * Updates the running statistics with the mini-batch tracked so far and
   * starts a new one (the Pipe calls it after each forward, so a last batch
   * of fewer micro-batches than `chunks` still counts).
   */
  commit(): void {
    const [mean, variance, count] = [this.runningMean, this.runningVar, this.numBatchesTracked];
    if (this.tracked === 0 || !mean || !variance || !count) return;
    const n = this.counter;
    noGrad(() =>
      tidy(() => {
        count._assign(count.add(1));
        const m: Tensor | number = this.momentum ?? count.to(mean.dtype).reciprocal();
        const batchMean = this.sum.div(n);
        const biased = this.sumSquares.div(n).sub(batchMean.mul(batchMean));
        const unbiased = n > 1 ? biased.mul(n / (n - 1)) : biased;
        mean._assign(mean.add(batchMean.sub(mean).mul(m)));
        variance._assign(variance.add(unbiased.sub(variance).mul(m)));
        this.sum._assign(this.sum.zerosLike());
        this.sumSquares._assign(this.sumSquares.zerosLike());
      })
    );
    this.counter = 0;
    this.tracked = 0;
  }
}
