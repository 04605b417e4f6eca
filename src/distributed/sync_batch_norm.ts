/**
 * `nn.SyncBatchNorm`: batch normalisation whose training statistics cover
 * the batches of every rank of a process group, as `torch.nn.SyncBatchNorm`.
 * It lives with the collectives it calls (the `nn` layer sits below
 * `distributed`) and is exported through the `nn` namespace.
 * @module
 */

import { noGrad, record } from "../autograd.ts";
import { firstOrderOnly } from "../autograd/recompute.ts";
import { full, zeros } from "../ops/factory.ts";
import { cat, stack } from "../ops/view.ts";
import { Module } from "../nn/module.ts";
import { BatchNormBase, type BatchNormModuleOptions } from "../nn/normalization.ts";
import { forwardScope, tidy } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import type { DistributedGroup } from "./backend.ts";
import { allGather, allReduce } from "./collectives.ts";
import { getWorldSize, isInitialized } from "./group.ts";
import { activeGroup } from "./state.ts";

/** Options of {@link SyncBatchNorm}. */
export interface SyncBatchNormOptions extends BatchNormModuleOptions {
  /**
   * Synchronise over this group's ranks only (from `distributed.newGroup`;
   * default: every rank), as PyTorch's `process_group`.
   */
  processGroup?: DistributedGroup;
}

/**
 * Batch normalisation over the channels (dim 1) of [N, C, ...] inputs whose
 * training statistics are those of the batches of every rank together, as
 * `torch.nn.SyncBatchNorm`: N ranks with batches of b rows normalize as one
 * BatchNorm on the N·b rows, and update the running statistics with that
 * mean and unbiased variance (the same values on every rank). Ranks may
 * hold different batch sizes, also none.
 *
 * The per-rank means and sums of squared deviations are gathered (one
 * `allGather` per forward) and combined with Chan's formula, which keeps
 * the variance's precision where sums of squares would lose it. Backward
 * sums two per-channel vectors over the ranks (one `allReduce`) for the
 * input's gradient; `weight` and `bias` get this rank's gradient, which
 * DistributedDataParallel then averages, as in PyTorch. Every rank of the
 * group must run the layer's forward and backward in the same order, like
 * any collective.
 *
 * Without a process group, with one rank, or in evaluation mode it is a
 * plain BatchNorm (PyTorch 2's rule, so one process can run the same model).
 * Use {@link SyncBatchNorm.convertSyncBatchnorm} to swap a model's
 * BatchNorm layers before wrapping it in DistributedDataParallel.
 *
 * @example
 * ```ts
 * // in each rank's main (see distributed.spawn)
 * const model = nn.SyncBatchNorm.convertSyncBatchnorm(
 *   new nn.Sequential(new nn.Conv2d(3, 8, 3), new nn.BatchNorm2d(8), new nn.ReLU()),
 * );
 * const ddp = new distributed.DistributedDataParallel(model);
 * ```
 */
export class SyncBatchNorm extends BatchNormBase {
  /** The group whose ranks' batches are normalized together (undefined: every rank). */
  readonly processGroup: DistributedGroup | undefined;

  /** Synchronised batch norm over `numFeatures` channels. */
  constructor(numFeatures: number, options: SyncBatchNormOptions = {}) {
    super("SyncBatchNorm", null, numFeatures, options);
    this.processGroup = options.processGroup;
  }

  /** Normalizes `x` [N, C, ...] (with every rank's batch statistics when training). */
  override forward(x: Tensor): Tensor {
    const group = this.processGroup;
    const ranks = group ? group.size : isInitialized() ? getWorldSize() : 1;
    if (!this.training || ranks === 1) return super.forward(x);
    // A rank outside `group`, or a group without a process group, is an error here.
    activeGroup("SyncBatchNorm", group);
    return this.normalizeWith(
      x,
      (input, runningMean, runningVar, options) =>
        syncBatchNorm(input, runningMean, runningVar, { ...options, group }),
      true,
    );
  }

  /**
   * `module` with every BatchNorm layer in it (itself included) replaced by
   * a SyncBatchNorm holding the same parameters and buffers (the same
   * tensors: an optimizer made before keeps working) and the same training
   * mode, as `torch.nn.SyncBatchNorm.convert_sync_batchnorm` (a
   * SyncBatchNorm already there is remade over `processGroup`). Layers are
   * replaced in their parents' fields; a BatchNorm reachable only some other
   * way (an array, a closure) is not found. Returns the converted module.
   */
  static convertSyncBatchnorm(
    module: BatchNormBase,
    processGroup?: DistributedGroup,
  ): SyncBatchNorm;
  /** `module` with every BatchNorm layer in it replaced by a SyncBatchNorm (see above). */
  static convertSyncBatchnorm<M extends Module>(module: M, processGroup?: DistributedGroup): M;
  static convertSyncBatchnorm(module: Module, processGroup?: DistributedGroup): Module {
    if (!(module instanceof Module)) {
      throw new TypeError(
        `SyncBatchNorm.convertSyncBatchnorm: expected an nn.Module, got ${
          module === null ? "null" : typeof module
        }`,
      );
    }
    const converted = new Map<Module, Module>();
    const convert = (m: Module): Module => {
      const done = converted.get(m);
      if (done) return done;
      // A SyncBatchNorm too, as in PyTorch (it takes the new group). A norm has no children, so
      // only a module kept as it is gets its fields rewritten below.
      const out = m instanceof BatchNormBase ? fromBatchNorm(m, processGroup) : m;
      converted.set(m, out);
      const fields = out as unknown as Record<string, unknown>;
      for (const [, child] of m.namedChildren()) {
        const replacement = convert(child);
        if (replacement === child) continue;
        for (const key of Object.keys(fields)) {
          if (fields[key] === child) fields[key] = replacement;
        }
      }
      return out;
    };
    return convert(module);
  }
}

function fromBatchNorm(bn: BatchNormBase, processGroup?: DistributedGroup): SyncBatchNorm {
  const sync = new SyncBatchNorm(bn.numFeatures, {
    eps: bn.eps,
    momentum: bn.momentum,
    affine: bn.affine,
    trackRunningStats: bn.trackRunningStats,
    processGroup,
    device: (bn.weight ?? bn.runningMean)?.device,
    dtype: (bn.weight ?? bn.runningMean)?.dtype,
  });
  // The new layer's own tensors are replaced by the old layer's, so nothing of them survives.
  const own = [sync.weight, sync.bias, sync.runningMean, sync.runningVar, sync.numBatchesTracked];
  sync.weight = bn.weight;
  sync.bias = bn.bias;
  sync.runningMean = bn.runningMean;
  sync.runningVar = bn.runningVar;
  sync.numBatchesTracked = bn.numBatchesTracked;
  for (const t of own) t?.dispose();
  sync.training = bn.training;
  return sync;
}

/** What {@link syncBatchNorm} needs beyond the input and the running statistics. */
interface SyncBatchNormFunctionOptions {
  weight?: Tensor | null;
  bias?: Tensor | null;
  /** The running statistics' factor: a number, or SyncBatchNorm's 1 / num_batches_tracked. */
  momentum?: number | Tensor;
  eps?: number;
  group?: DistributedGroup;
}

/**
 * Training batch norm of `x` [N, C, ...] with the statistics of every
 * rank's `x` (see {@link SyncBatchNorm}), checked by the layer; updates the
 * running statistics when given. Differentiable in `x`, `weight` and `bias`.
 */
function syncBatchNorm(
  x: Tensor,
  runningMean: Tensor | null,
  runningVar: Tensor | null,
  options: SyncBatchNormFunctionOptions,
): Tensor {
  const { weight = null, bias = null, momentum = 0.1, eps = 1e-5, group } = options;
  return forwardScope(() => {
    const { dtype, device } = x;
    const [rows, c] = x.shape;
    const inner = x.shape.slice(2).reduce((a, b) => a * b, 1);
    const count = rows * inner;
    const x3 = x.reshape([rows, c, inner]);
    const dims = [0, 2];
    const perChannel = [1, c, 1];
    const { y, centered, invstd, total } = noGrad(() => {
      // A rank without rows sends zeros with a count of 0, which weigh nothing.
      const localMean = count > 0 ? x3.mean(dims) : zeros([c], { dtype, device });
      const localM2 = count > 0
        ? x3.sub(localMean.reshape(perChannel)).square().sum(dims)
        : zeros([c], { dtype, device });
      const local = cat([localMean, localM2, full([1], count, { dtype, device })]);
      const ranks = stack(allGather(local, { group }));
      const means = ranks.narrow(1, 0, c);
      const m2s = ranks.narrow(1, c, c);
      const counts = ranks.narrow(1, 2 * c, 1);
      const total = counts.sum(0);
      const mean = means.mul(counts).sum(0).div(total);
      // Chan et al.: M2 = Σ (M2_r + n_r · (mean_r - mean)²).
      const m2 = m2s.add(means.sub(mean).square().mul(counts)).sum(0);
      const invstd = m2.div(total).add(eps).rsqrt();
      const centered = x3.sub(mean.reshape(perChannel));
      const w = weight ? weight.reshape(perChannel) : null;
      let y = centered.mul(w ? invstd.reshape(perChannel).mul(w) : invstd.reshape(perChannel));
      if (bias) y = y.add(bias.reshape(perChannel));
      if (runningMean && runningVar) {
        tidy(() => {
          const m = momentum instanceof Tensor ? momentum.reshape([]) : momentum;
          const keep = m instanceof Tensor ? m.mul(-1).add(1) : 1 - m;
          const unbiased = m2.div(total.sub(1));
          runningMean._assign(runningMean.mul(keep).add(mean.mul(m)).to(runningMean.dtype));
          runningVar._assign(runningVar.mul(keep).add(unbiased.mul(m)).to(runningVar.dtype));
        });
      }
      return { y: y.reshape(x.shape), centered, invstd: invstd.reshape(perChannel), total };
    });
    return record(
      "syncBatchNorm",
      [x, weight, bias],
      y,
      firstOrderOnly("syncBatchNorm", [x, weight], ([g]) => {
        const g3 = g!.reshape(x3.shape);
        const sumDy = g3.sum(dims);
        const sumDyXmu = g3.mul(centered).sum(dims);
        // This rank's share, as PyTorch: DistributedDataParallel averages it with the others'.
        const gw = weight?.requiresGrad ? sumDyXmu.mul(invstd.reshape([c])) : null;
        const gb = bias?.requiresGrad ? sumDy : null;
        let gx: Tensor | null = null;
        if (x.requiresGrad) {
          const sums = cat([sumDy, sumDyXmu]);
          allReduce(sums, { op: "sum", group });
          const meanDy = sums.narrow(0, 0, c).div(total).reshape(perChannel);
          const meanDyXmu = sums.narrow(0, c, c).div(total).reshape(perChannel);
          const scale = weight ? invstd.mul(weight.reshape(perChannel)) : invstd;
          // dx = w·invstd · (g - Σg/n - centered · invstd² · Σ(g·centered)/n), sums over every rank.
          gx = g3.sub(meanDy).sub(centered.mul(invstd.square()).mul(meanDyXmu)).mul(scale)
            .reshape(x.shape);
        }
        return [gx, gw, gb];
      }),
    );
  });
}
