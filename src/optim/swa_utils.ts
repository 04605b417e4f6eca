/**
 * Stochastic Weight Averaging, as PyTorch 1.13's `torch.optim.swa_utils`:
 * {@link AveragedModel} keeps a running average of a model's parameters,
 * {@link SWALR} anneals the learning rate to a constant, and {@link updateBn}
 * recomputes the BatchNorm statistics of the averaged model in one pass
 * over the data.
 *
 * @example
 * ```ts
 * import { nn, optim } from "@multigrad/core";
 * const model = new nn.Linear(4, 2);
 * const opt = new optim.SGD(model.parameters(), { lr: 0.1 });
 * const swaModel = new optim.swaUtils.AveragedModel(model);
 * const swaScheduler = new optim.swaUtils.SWALR(opt, { swaLr: 0.05 });
 * for (let epoch = 0; epoch < 10; epoch++) {
 *   // train: opt.zeroGrad(); loss.backward(); opt.step();
 *   swaModel.updateParameters(model);
 *   swaScheduler.step();
 * }
 * // with BatchNorm layers: optim.swaUtils.updateBn(loader, swaModel);
 * ```
 * @module
 */

import { noGrad } from "../autograd.ts";
import type { Device } from "../device.ts";
import { full } from "../ops/factory.ts";
import { where } from "../ops/indexing.ts";
import { tidy } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import { deepCopy } from "../nn/deep_copy.ts";
import { Module } from "../nn/module.ts";
import { BatchNormBase } from "../nn/normalization.ts";
import { LRScheduler, type SchedulerOptions } from "./lr_scheduler.ts";
import type { AnyOptimizer } from "./optimizer.ts";

/**
 * How {@link AveragedModel} folds a model's tensor into the average:
 * `(averaged, current, numAveraged)` → the new average. `numAveraged` is the
 * 0-dim int32 `nAveraged` buffer (models averaged so far).
 */
export type AvgFn = (averaged: Tensor, current: Tensor, numAveraged: Tensor) => Tensor;

/** Options of {@link AveragedModel}. */
export interface AveragedModelOptions {
  /** Where the copy and `nAveraged` live (default: where the model's tensors are). */
  device?: Device | string;
  /**
   * The averaging function (default: the equally weighted running mean
   * `averaged + (current - averaged) / (numAveraged + 1)`). For an
   * exponential moving average, as PyTorch's docs show:
   * `(a, m) => a.mul(0.1).add(m.mul(0.9))`.
   */
  avgFn?: AvgFn;
  /** Average the buffers too (running statistics included), not only the parameters (default false). */
  useBuffers?: boolean;
}

/** The equally weighted running mean, PyTorch's default `avg_fn`. */
function runningMean(averaged: Tensor, current: Tensor, numAveraged: Tensor): Tensor {
  return averaged.add(current.sub(averaged).div(numAveraged.add(1)));
}

/**
 * Stochastic Weight Averaging's averaged model, as PyTorch 1.13's
 * `torch.optim.swa_utils.AveragedModel`: holds a deep copy of `model` as
 * its submodule `module` and the int32 buffer `nAveraged` (state-dict key
 * `n_averaged`), so its state dict reads `n_averaged`, `module.weight`, ...
 * {@link updateParameters} folds a model's current parameters into the
 * copy's; `forward` runs the copy. `avgFn` is not saved in the state dict.
 */
export class AveragedModel<M extends Module = Module> extends Module {
  /** The averaged copy of the model. */
  module: M;
  /** How many models have been averaged in (state-dict key `n_averaged`). */
  declare nAveraged: Tensor;
  /** The averaging function. */
  avgFn: AvgFn;
  /** Whether buffers are averaged too. */
  useBuffers: boolean;

  /** Copies `model` (onto `options.device` when given) with `nAveraged` 0. */
  constructor(model: M, options: AveragedModelOptions = {}) {
    super();
    if (!(model instanceof Module)) {
      throw new TypeError(
        `AveragedModel: expected an nn.Module, got ${model === null ? "null" : typeof model}`,
      );
    }
    if (options.avgFn !== undefined && typeof options.avgFn !== "function") {
      throw new TypeError(`AveragedModel: avgFn must be a function, got ${typeof options.avgFn}`);
    }
    let copy = deepCopy(model);
    if (options.device !== undefined) copy = copy.to(options.device);
    this.module = copy;
    const device = options.device ?? copy.parameters()[0]?.device ?? copy.buffers()[0]?.device;
    this.registerBuffer("n_averaged", full([], 0, { dtype: "int32", device }));
    this.avgFn = options.avgFn ?? runningMean;
    this.useBuffers = options.useBuffers ?? false;
  }

  /** Runs the averaged copy, as PyTorch's `forward` delegating to `self.module`. */
  override forward(...args: unknown[]): unknown {
    return this.module.forward(...args);
  }

  /**
   * Folds `model`'s parameters (and buffers with `useBuffers`) into the
   * averaged copy's, in the order `parameters()` lists both: the first call
   * copies them, later ones apply `avgFn`; then `nAveraged` grows by one.
   * The two models must have the same structure.
   */
  updateParameters(model: Module): void {
    if (!(model instanceof Module)) {
      throw new TypeError(
        `AveragedModel.updateParameters: expected an nn.Module, got ${
          model === null ? "null" : typeof model
        }`,
      );
    }
    const mine: Tensor[] = this.useBuffers
      ? [...this.module.parameters(), ...this.module.buffers()]
      : this.parameters();
    const theirs: Tensor[] = this.useBuffers
      ? [...model.parameters(), ...model.buffers()]
      : model.parameters();
    // PyTorch zips and so stops at the shorter list silently; a mismatch is always a mistake.
    if (mine.length !== theirs.length) {
      throw new RangeError(
        `AveragedModel.updateParameters: the averaged model has ${mine.length} ${
          this.useBuffers ? "parameters and buffers" : "parameters"
        }, ${model.constructor.name} has ${theirs.length}`,
      );
    }
    mine.forEach((p, i) => {
      if (p.shape.join() !== theirs[i].shape.join()) {
        throw new RangeError(
          `AveragedModel.updateParameters: tensor ${i} has shape [${p.shape}] in the averaged model, [${
            theirs[i].shape
          }] in ${model.constructor.name}`,
        );
      }
    });
    noGrad(() =>
      tidy(() => {
        const n = this.nAveraged;
        for (let i = 0; i < mine.length; i++) {
          const p = mine[i];
          const current = theirs[i].detach().to(p.device);
          const nHere = n.to(p.device);
          // PyTorch branches on `n_averaged == 0` on the host; selecting on the device keeps this
          // synchronous, and the first update still copies the model's values exactly.
          const averaged = this.avgFn(p.detach(), current, nHere);
          if (!(averaged instanceof Tensor)) {
            throw new TypeError(
              `AveragedModel.updateParameters: avgFn must return a Tensor, got ${typeof averaged}`,
            );
          }
          p.copy_(where(nHere.eq(0), current, averaged));
        }
        n.add_(1);
      })
    );
  }
}

/** Options of {@link updateBn}. */
export interface UpdateBnOptions {
  /** Where each batch is moved before the forward (default: left where it is). */
  device?: Device | string;
}

/**
 * A batch of {@link updateBn}'s loader: a tensor, an array whose first entry
 * is the input, or another object the model takes (a collated dict).
 */
export type UpdateBnBatch = Tensor | readonly unknown[] | Readonly<Record<string, unknown>>;

/**
 * Recomputes the running statistics of every BatchNorm layer of `model` in
 * one pass over `loader`, as PyTorch 1.13's `torch.optim.swa_utils.update_bn`:
 * the statistics are reset (mean 0, variance 1, `num_batches_tracked` 0),
 * every batch goes through `model` in training mode without gradients with
 * `momentum` null (the cumulative average over the batches), then each
 * layer's momentum and the model's training mode (`model.train(wasTraining)`,
 * as PyTorch, for the whole tree) are restored. A batch that is an array
 * passes its first entry; any other object (a collated dict) is passed as
 * is, as PyTorch (`device` then moves only Tensor inputs). A model without
 * BatchNorm layers is left alone.
 * BatchNorm layers that do not track running statistics are skipped (PyTorch
 * raises on them).
 */
export function updateBn(
  loader: Iterable<UpdateBnBatch>,
  model: Module,
  options: UpdateBnOptions = {},
): void {
  if (!(model instanceof Module)) {
    throw new TypeError(
      `updateBn: expected an nn.Module, got ${model === null ? "null" : typeof model}`,
    );
  }
  if (loader === null || typeof (loader as Iterable<unknown>)[Symbol.iterator] !== "function") {
    throw new TypeError(`updateBn: loader must be iterable, got ${kindOf(loader)}`);
  }
  const momenta = new Map<BatchNormBase, number | null>();
  for (const m of model.modules()) {
    if (m instanceof BatchNormBase && m.runningMean !== null && m.runningVar !== null) {
      noGrad(() =>
        tidy(() => {
          m.runningMean = m.runningMean!.zerosLike();
          m.runningVar = m.runningVar!.zerosLike().add(1);
        })
      );
      momenta.set(m, m.momentum);
    }
  }
  if (momenta.size === 0) return;
  const wasTraining = model.training;
  model.train();
  for (const m of momenta.keys()) {
    m.momentum = null;
    if (m.numBatchesTracked) noGrad(() => m.numBatchesTracked!.zero_());
  }
  try {
    let index = 0;
    for (const batch of loader) {
      let input: unknown = batch;
      if (Array.isArray(batch)) input = batch[0];
      // PyTorch passes any other input (a collated dict, a list of tensors) to the model as is.
      if (input === null || typeof input !== "object") {
        throw new TypeError(
          `updateBn: batch ${index} must be a Tensor, an object the model takes, or an array whose first entry is one, got ${
            kindOf(input)
          }`,
        );
      }
      if (options.device !== undefined && !(input instanceof Tensor)) {
        throw new TypeError(
          `updateBn: batch ${index} is ${
            kindOf(input)
          }, not a Tensor: options.device moves only Tensor batches (PyTorch's input.to(device))`,
        );
      }
      const x = input;
      noGrad(() =>
        tidy(() => {
          model.forward(
            x instanceof Tensor && options.device !== undefined ? x.to(options.device) : x,
          );
        })
      );
      index++;
    }
  } finally {
    for (const [m, momentum] of momenta) m.momentum = momentum;
    model.train(wasTraining);
  }
}

function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") {
    const name = (value as object).constructor?.name ?? "Object";
    return `${/^[AEIOU]/.test(name) ? "an" : "a"} ${name}`;
  }
  return typeof value;
}

/** Options of {@link SWALR}. */
export interface SWALROptions extends SchedulerOptions {
  /** The learning rate reached: one for every group, or one per group. */
  swaLr: number | readonly number[];
  /** Epochs of the annealing phase, an integer >= 0 (default 10). */
  annealEpochs?: number;
  /** `"cos"` (default) or `"linear"` annealing. */
  annealStrategy?: "cos" | "linear";
}

/**
 * Anneals every group's learning rate to a constant `swaLr` over
 * `annealEpochs` epochs, then holds it, as PyTorch 1.13's
 * `torch.optim.swa_utils.SWALR` (the same recursive formula from the
 * groups' current `lr`, so it takes over from another scheduler at any
 * point). Each group's target is kept in the group as `swaLr` (PyTorch's
 * `swa_lr`).
 */
export class SWALR extends LRScheduler {
  /** Epochs of the annealing phase. */
  annealEpochs: number;
  /** The annealing shape. */
  annealStrategy: "cos" | "linear";

  /** Anneals `optimizer`'s groups towards `options.swaLr`. */
  constructor(optimizer: AnyOptimizer, options: SWALROptions) {
    if (options === null || typeof options !== "object") {
      throw new TypeError(`SWALR: expected an options object with swaLr, got ${kindOf(options)}`);
    }
    const groups = (optimizer as { paramGroups?: unknown[] } | null)?.paramGroups;
    const { swaLr } = options;
    let swaLrs: number[] | null = null;
    if (Array.isArray(groups)) {
      if (Array.isArray(swaLr)) {
        if (swaLr.length !== groups.length) {
          throw new RangeError(
            `SWALR: swaLr must have the same length as optimizer.paramGroups: swaLr has ${swaLr.length}, optimizer.paramGroups has ${groups.length}`,
          );
        }
        swaLrs = [...swaLr];
      } else {
        swaLrs = new Array(groups.length).fill(swaLr);
      }
      swaLrs.forEach((v, i) => {
        if (typeof v !== "number" || !Number.isFinite(v)) {
          throw new RangeError(
            `SWALR: swaLr${Array.isArray(swaLr) ? `[${i}]` : ""} must be a finite number, got ${
              String(v)
            }`,
          );
        }
      });
    }
    const strategy = options.annealStrategy ?? "cos";
    if (strategy !== "cos" && strategy !== "linear") {
      throw new RangeError(
        `SWALR: annealStrategy must be one of "cos" or "linear", got ${JSON.stringify(strategy)}`,
      );
    }
    const epochs = options.annealEpochs ?? 10;
    if (typeof epochs !== "number" || !Number.isInteger(epochs) || epochs < 0) {
      throw new RangeError(`SWALR: annealEpochs must be an integer >= 0, got ${String(epochs)}`);
    }
    // Before the base constructor, as PyTorch: `swa_lr` precedes `initial_lr` in the groups.
    if (swaLrs) (groups as Record<string, unknown>[]).forEach((g, i) => g.swaLr = swaLrs![i]);
    super(optimizer, options.lastEpoch);
    this.annealEpochs = epochs;
    this.annealStrategy = strategy;
    this.initialStep();
  }

  #anneal(t: number): number {
    return this.annealStrategy === "cos" ? (1 - Math.cos(Math.PI * t)) / 2 : t;
  }

  /** PyTorch's recursive form: undoes the last step's mix to recover the start, then mixes anew. */
  protected override getLr(): number[] {
    const groups = this.optimizer.paramGroups as unknown as { lr: number; swaLr: number }[];
    let step = this.stepCount - 1;
    if (this.annealEpochs === 0) step = Math.max(1, step);
    const span = Math.max(1, this.annealEpochs);
    const prevAlpha = this.#anneal(Math.max(0, Math.min(1, (step - 1) / span)));
    const prevLrs = groups.map((g) =>
      prevAlpha === 1 ? g.swaLr : (g.lr - prevAlpha * g.swaLr) / (1 - prevAlpha)
    );
    const alpha = this.#anneal(Math.max(0, Math.min(1, step / span)));
    return groups.map((g, i) => g.swaLr * alpha + prevLrs[i] * (1 - alpha));
  }

  /** `annealEpochs`, `annealStrategy`. */
  protected override stateKeys(): readonly string[] {
    return ["annealEpochs", "annealStrategy"];
  }
}
