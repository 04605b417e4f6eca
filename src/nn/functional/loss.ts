/**
 * Losses beyond `mseLoss`/`crossEntropy`, as `torch.nn.functional`:
 * `nllLoss`, `binaryCrossEntropy`, `binaryCrossEntropyWithLogits`, `l1Loss`,
 * `smoothL1Loss`, `huberLoss`, `klDiv`. Composed from tensor ops (forward and
 * backward on every backend, nothing read back), with PyTorch's formulas:
 * BCE clamps its logs at -100, BCE-with-logits never exponentiates a positive
 * number, and the gradients at the kinks are PyTorch's.
 * @module
 */

import { noGrad, record } from "../../autograd.ts";
import { recording } from "../../autograd/recompute.ts";
import { sumTo } from "../../ops/elementwise.ts";
import { gatherInRange, where } from "../../ops/indexing.ts";
import { checkClassRange, reduceLoss } from "../util.ts";
import { formatShape, numelOf, sameShape } from "../../shape.ts";
import { tidy } from "../../storage.ts";
import type { Tensor } from "../../tensor.ts";
import { checkFinite, checkFloatInput, checkReduction, checkTensor, sameDevice } from "../util.ts";

/** How a loss combines its per-element values, as PyTorch's `reduction`. */
export type Reduction = "mean" | "sum" | "none";

/** Options of the losses that only take a reduction. */
export interface ReductionOptions {
  /** `"mean"` (default), `"sum"` or `"none"`. */
  reduction?: Reduction;
}

/** Checks an elementwise loss's pair: float tensors of one shape, dtype and device. */
function checkPair(op: string, input: Tensor, target: Tensor): void {
  checkFloatInput(op, input, "input");
  checkFloatInput(op, target, "target");
  if (!sameShape(input.shape, target.shape)) {
    throw new RangeError(
      `${op}: input of shape ${formatShape(input.shape)} and target of shape ${
        formatShape(target.shape)
      } differ; they must have the same shape`,
    );
  }
  if (input.dtype !== target.dtype) {
    throw new TypeError(
      `${op}: input is ${input.dtype} but target is ${target.dtype}; convert one with .to()`,
    );
  }
  sameDevice(op, { input, target });
}

/** Checks an optional weight that must broadcast to `shape` and match `like`'s dtype and device. */
function checkWeight(op: string, name: string, weight: Tensor | null, like: Tensor): void {
  if (weight == null) return;
  checkFloatInput(op, weight, name);
  const shape = like.shape;
  const fits = weight.ndim <= shape.length &&
    weight.shape.every((d, i) => d === 1 || d === shape[shape.length - weight.ndim + i]);
  if (!fits) {
    throw new RangeError(
      `${op}: ${name} of shape ${formatShape(weight.shape)} does not broadcast to input of shape ${
        formatShape(shape)
      }`,
    );
  }
  if (weight.dtype !== like.dtype) {
    throw new TypeError(`${op}: ${name} is ${weight.dtype} but input is ${like.dtype}`);
  }
  sameDevice(op, { input: like, [name]: weight });
}

// ---------------------------------------------------------------- class-index losses

/** Options of {@link nllLoss}. */
export interface NLLLossOptions extends ReductionOptions {
  /** Per-class weights [C]. */
  weight?: Tensor | null;
  /** Targets equal to this contribute nothing (default -100, as PyTorch). */
  ignoreIndex?: number;
}

/**
 * Negative log-likelihood of log-probabilities, as
 * `torch.nn.functional.nll_loss`: `input` is [N, C] (or [C], or
 * [N, C, d1, ...] with the class in dim 1), `target` holds int32 class indices
 * of shape [N] (resp. [], [N, d1, ...]). The loss of one element is
 * `-weight[t] * input[t]`; `"mean"` divides by the summed weights of the
 * non-ignored targets (NaN when every target is ignored, as PyTorch).
 */
export function nllLoss(input: Tensor, target: Tensor, options: NLLLossOptions = {}): Tensor {
  const op = "nllLoss";
  checkFloatInput(op, input, "input");
  checkTensor(op, "target", target);
  const reduction = options.reduction ?? "mean";
  checkReduction(op, reduction);
  const ignoreIndex = options.ignoreIndex ?? -100;
  if (!Number.isInteger(ignoreIndex)) {
    throw new RangeError(`${op}: ignoreIndex must be an integer, got ${ignoreIndex}`);
  }
  const weight = options.weight ?? null;
  if (input.ndim < 1) {
    throw new RangeError(`${op}: input must have at least 1 dim (classes), got shape []`);
  }
  const classDim = input.ndim === 1 ? 0 : 1;
  const c = input.shape[classDim];
  const outShape = input.shape.filter((_, i) => i !== classDim);
  if (target.dtype !== "int32" || !sameShape(target.shape, outShape)) {
    throw new RangeError(
      `${op}: target must hold int32 class indices of shape ${
        formatShape(outShape)
      } for input of shape ${formatShape(input.shape)}, got ${target.dtype} of shape ${
        formatShape(target.shape)
      }`,
    );
  }
  if (weight != null) {
    checkFloatInput(op, weight, "weight");
    if (!sameShape(weight.shape, [c])) {
      throw new RangeError(
        `${op}: weight of shape ${
          formatShape(weight.shape)
        } does not match the ${c} classes of input of shape ${formatShape(input.shape)}`,
      );
    }
  }
  sameDevice(op, { input, target, weight });
  // Classes last, the rest flattened: [M, C].
  const perm = input.shape.map((_, i) => i).filter((i) => i !== classDim).concat([classDim]);
  const m = numelOf(outShape);
  const logp = (input.ndim > 2 ? input.permute(perm) : input).reshape([m, c]);
  const { losses, sampleWeight } = pickedNll(op, logp, target.reshape([m]), weight, ignoreIndex);
  if (reduction === "none") return losses.reshape(outShape);
  const total = losses.sum();
  return reduction === "sum" ? total : total.div(sampleWeight.sum());
}

/**
 * The negative log-likelihood of each sample of `logp` [M, C] at its int32
 * class index in `target` [M], weighted by `weight[target]`, as `losses` [M],
 * with each sample's weight (0 where `target` is `ignoreIndex`) as
 * `sampleWeight` [M] and the not-ignored mask as `valid` [M]. Ignored targets
 * gather class 0 and are then dropped with `where`, never multiplied: a -inf
 * log-probability elsewhere cannot turn into NaN. A class index outside [0,
 * C) is reported by the next read on the device, naming it (shared by
 * nllLoss and crossEntropy).
 */
export function pickedNll(
  op: string,
  logp: Tensor,
  target: Tensor,
  weight: Tensor | null,
  ignoreIndex: number,
): { losses: Tensor; sampleWeight: Tensor; valid: Tensor } {
  const [m, c] = logp.shape;
  const idx = target.reshape([m, 1]);
  const valid = noGrad(() => idx.ne(ignoreIndex));
  const safeIdx = noGrad(() => where(valid, idx, 0));
  checkClassRange(op, safeIdx, c, `, or ignoreIndex ${ignoreIndex}`);
  const picked = gatherInRange(logp, 1, safeIdx);
  const classWeight = weight
    ? gatherInRange(weight.to(logp.dtype).reshape([c, 1]), 0, safeIdx)
    : null;
  const sampleWeight = where(valid, classWeight ?? 1, 0).to(logp.dtype).reshape([m]);
  const losses = where(valid, classWeight ? picked.mul(classWeight).neg() : picked.neg(), 0)
    .reshape([m]);
  return { losses, sampleWeight, valid: valid.reshape([m]) };
}

// ---------------------------------------------------------------- binary cross entropy

/** Options of {@link binaryCrossEntropy}. */
export interface BCELossOptions extends ReductionOptions {
  /** Rescales each element's loss; broadcast to the input's shape. */
  weight?: Tensor | null;
}

/**
 * Binary cross entropy of probabilities, as
 * `torch.nn.functional.binary_cross_entropy`:
 * `-weight * (t log x + (1 - t) log(1 - x))` with both logs clamped to at
 * least -100, so x = 0 or 1 gives a finite loss. The gradient is PyTorch's,
 * `weight * (x - t) / max(x (1 - x), 1e-12)`. Inputs outside [0, 1] give NaN
 * (PyTorch raises; checking would need a read).
 */
export function binaryCrossEntropy(
  input: Tensor,
  target: Tensor,
  options: BCELossOptions = {},
): Tensor {
  const op = "binaryCrossEntropy";
  checkPair(op, input, target);
  const reduction = options.reduction ?? "mean";
  checkReduction(op, reduction);
  const weight = options.weight ?? null;
  checkWeight(op, "weight", weight, input);
  const terms = () => {
    const logX = input.log().clamp(-100);
    const log1mX = input.neg().log1p().clamp(-100);
    return [logX, log1mX, target.mul(logX).add(target.neg().add(1).mul(log1mX)).neg()];
  };
  const saved = noGrad(() => tidy(terms));
  const losses = weight ? noGrad(() => saved[2].mul(weight)) : saved[2];
  const recorded = record(op, [input, target, weight], losses, ([g]) => {
    // Under createGraph the terms are recomputed with a graph (their own derivatives count).
    const [logX, log1mX, unweighted] = recording() ? terms() : saved;
    const scale = weight ? g!.mul(weight) : g!;
    return [
      input.requiresGrad
        ? scale.mul(input.sub(target)).div(input.mul(input.neg().add(1)).clamp(1e-12))
        : null,
      target.requiresGrad ? scale.mul(log1mX.sub(logX)) : null,
      weight?.requiresGrad ? sumTo(g!.mul(unweighted), weight.shape) : null,
    ];
  });
  return reduceLoss(recorded, reduction);
}

/** Options of {@link binaryCrossEntropyWithLogits}. */
export interface BCEWithLogitsOptions extends BCELossOptions {
  /** Weight of the positive term, broadcast along the last dim (classes). */
  posWeight?: Tensor | null;
}

/**
 * Binary cross entropy of logits, as
 * `torch.nn.functional.binary_cross_entropy_with_logits`:
 * `weight * ((1 - t) x + (1 + (posWeight - 1) t) softplus(-x))`, with
 * `softplus(-x) = m + log(e^-m + e^(-x-m))`, `m = max(-x, 0)`: no positive
 * number is ever exponentiated, so logits of any size give finite values and
 * gradients.
 */
export function binaryCrossEntropyWithLogits(
  input: Tensor,
  target: Tensor,
  options: BCEWithLogitsOptions = {},
): Tensor {
  const op = "binaryCrossEntropyWithLogits";
  checkPair(op, input, target);
  const reduction = options.reduction ?? "mean";
  checkReduction(op, reduction);
  const weight = options.weight ?? null;
  const posWeight = options.posWeight ?? null;
  checkWeight(op, "weight", weight, input);
  checkWeight(op, "posWeight", posWeight, input);
  const negX = input.neg();
  const m = negX.clamp(0);
  const softplusNegX = m.add(m.neg().exp().add(negX.sub(m).exp()).log());
  const logWeight = posWeight ? posWeight.sub(1).mul(target).add(1) : null;
  let losses = target.neg().add(1).mul(input).add(
    logWeight ? logWeight.mul(softplusNegX) : softplusNegX,
  );
  if (weight) losses = losses.mul(weight);
  return reduceLoss(losses, reduction);
}

// ---------------------------------------------------------------- regression

/** Mean absolute error, as `torch.nn.functional.l1_loss`; the gradient at equality is 0. */
export function l1Loss(input: Tensor, target: Tensor, options: ReductionOptions = {}): Tensor {
  checkPair("l1Loss", input, target);
  const reduction = options.reduction ?? "mean";
  checkReduction("l1Loss", reduction);
  return reduceLoss(input.sub(target).abs(), reduction);
}

/** Options of {@link smoothL1Loss}. */
export interface SmoothL1LossOptions extends ReductionOptions {
  /** Where the loss turns from quadratic to linear (default 1; 0 gives the L1 loss). */
  beta?: number;
}

/**
 * `0.5 d² / beta` where `|d| < beta`, else `|d| - 0.5 beta`, as
 * `torch.nn.functional.smooth_l1_loss`.
 */
export function smoothL1Loss(
  input: Tensor,
  target: Tensor,
  options: SmoothL1LossOptions = {},
): Tensor {
  const op = "smoothL1Loss";
  checkPair(op, input, target);
  const reduction = options.reduction ?? "mean";
  checkReduction(op, reduction);
  const beta = checkFinite(op, "beta", options.beta ?? 1);
  if (beta < 0) throw new RangeError(`${op}: beta must be non-negative, got ${beta}`);
  const distance = input.sub(target).abs();
  if (beta === 0) return reduceLoss(distance, reduction);
  // q = min(|d|, beta): 0.5 q² / beta + (|d| - q) is both branches at once,
  // and its slope is continuous at |d| = beta whichever side the tie takes.
  const q = distance.clamp(undefined, beta);
  return reduceLoss(q.mul(q).mul(0.5 / beta).add(distance.sub(q)), reduction);
}

/** Options of {@link huberLoss}. */
export interface HuberLossOptions extends ReductionOptions {
  /** Where the loss turns from quadratic to linear (default 1; must be positive). */
  delta?: number;
}

/**
 * `0.5 d²` where `|d| < delta`, else `delta (|d| - 0.5 delta)`, as
 * `torch.nn.functional.huber_loss`.
 */
export function huberLoss(input: Tensor, target: Tensor, options: HuberLossOptions = {}): Tensor {
  const op = "huberLoss";
  checkPair(op, input, target);
  const reduction = options.reduction ?? "mean";
  checkReduction(op, reduction);
  const delta = checkFinite(op, "delta", options.delta ?? 1);
  if (!(delta > 0)) throw new RangeError(`${op}: delta must be positive, got ${delta}`);
  const distance = input.sub(target).abs();
  const q = distance.clamp(undefined, delta);
  return reduceLoss(q.mul(q).mul(0.5).add(distance.sub(q).mul(delta)), reduction);
}

// ---------------------------------------------------------------- KL divergence

/** Options of {@link klDiv}. */
export interface KLDivOptions {
  /**
   * `"mean"` (default, over every element, as PyTorch), `"batchmean"` (the sum
   * divided by the batch size, the mathematically right KL), `"sum"` or
   * `"none"`.
   */
  reduction?: Reduction | "batchmean";
  /** The target holds log-probabilities (default false: probabilities). */
  logTarget?: boolean;
}

/**
 * Kullback-Leibler divergence of `target` from `input` (log-probabilities),
 * as `torch.nn.functional.kl_div`: pointwise `t (log t - x)` (0 where
 * `t = 0`), or `e^t (t - x)` with `logTarget`.
 */
export function klDiv(input: Tensor, target: Tensor, options: KLDivOptions = {}): Tensor {
  const op = "klDiv";
  checkPair(op, input, target);
  const reduction = options.reduction ?? "mean";
  checkReduction(op, reduction, ["mean", "batchmean", "sum", "none"]);
  let losses: Tensor;
  if (options.logTarget) {
    losses = target.exp().mul(target.sub(input));
  } else {
    // t log t with 0 log 0 = 0 (PyTorch's xlogy): log(t + [t = 0]).
    const zero = noGrad(() => target.eq(0));
    losses = target.mul(target.add(zero).log()).sub(target.mul(input));
  }
  if (reduction !== "batchmean") return reduceLoss(losses, reduction);
  const batch = input.ndim === 0 ? 1 : input.shape[0];
  return losses.sum().div(batch);
}
