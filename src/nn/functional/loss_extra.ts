/**
 * More losses of `torch.nn.functional`: `marginRankingLoss`,
 * `cosineEmbeddingLoss`, `tripletMarginLoss`, `softMarginLoss`,
 * `multilabelSoftMarginLoss`, `gaussianNllLoss` and `poissonNllLoss`.
 * Composed from tensor ops (every backend, nothing read back) with PyTorch
 * 1.13's formulas, so values and gradients at the margins, ties and clamps
 * are PyTorch's.
 * @module
 */

import { noGrad, record } from "../../autograd.ts";
import { checkLater } from "../../ops/check.ts";
import { where } from "../../ops/indexing.ts";
import { broadcastShapes, formatShape, sameShape } from "../../shape.ts";
import type { Tensor } from "../../tensor.ts";
import { checkFinite, checkFloatInput, lossReduction, reduceLoss, sameDevice } from "../util.ts";
import { logsigmoid } from "./activation_extra.ts";
import type { ReductionOptions } from "./loss.ts";

/** Float tensors of one dtype and device (shapes are each loss's own rule). */
function checkFloats(op: string, tensors: Record<string, Tensor>): void {
  let first: [string, Tensor] | null = null;
  for (const [name, t] of Object.entries(tensors)) {
    checkFloatInput(op, t, name);
    if (first && t.dtype !== first[1].dtype) {
      throw new TypeError(
        `${op}: ${first[0]} is ${first[1].dtype} but ${name} is ${t.dtype}; convert one with .to()`,
      );
    }
    first ??= [name, t];
  }
  sameDevice(op, tensors);
}

function describe(tensors: Record<string, Tensor>): string {
  return Object.entries(tensors).map(([k, t]) => `${k} ${formatShape(t.shape)}`).join(", ");
}

/** PyTorch broadcasts input and target of these losses: an error naming both when they cannot. */
function checkBroadcast(op: string, input: Tensor, target: Tensor): void {
  broadcastShapes(input.shape, target.shape, `${op} (input and target)`);
}

// ---------------------------------------------------------------- margin losses

/** Options of {@link marginRankingLoss}. */
export interface MarginRankingLossOptions extends ReductionOptions {
  /** Required gap between the ranked inputs (default 0). */
  margin?: number;
}

/**
 * `max(0, -y (x1 - x2) + margin)`, as `torch.nn.functional.margin_ranking_loss`
 * (y = 1: x1 should rank higher). The three tensors need the same number of
 * dims and broadcast together. The gradient passes where the hinge is exactly
 * 0, as PyTorch's `clamp_min`.
 */
export function marginRankingLoss(
  input1: Tensor,
  input2: Tensor,
  target: Tensor,
  options: MarginRankingLossOptions = {},
): Tensor {
  const op = "marginRankingLoss";
  const tensors = { input1, input2, target };
  checkFloats(op, tensors);
  const reduction = lossReduction(op, options);
  const margin = checkFinite(op, "margin", options.margin ?? 0);
  if (input1.ndim !== input2.ndim || input1.ndim !== target.ndim) {
    throw new RangeError(
      `${op}: all inputs must have the same number of dims, got ${describe(tensors)}`,
    );
  }
  broadcastShapes(broadcastShapes(input1.shape, input2.shape, op), target.shape, op);
  return reduceLoss(target.neg().mul(input1.sub(input2)).add(margin).clamp(0), reduction);
}

/** Options of {@link cosineEmbeddingLoss}. */
export interface CosineEmbeddingLossOptions extends ReductionOptions {
  /** Cosine below which dissimilar pairs cost nothing (default 0; PyTorch suggests [-1, 1]). */
  margin?: number;
}

/**
 * `1 - cos(x1, x2)` where y = 1, `max(0, cos(x1, x2) - margin)` where y = -1
 * (0 for any other y), as `torch.nn.functional.cosine_embedding_loss`: x1 and
 * x2 are [N, D] with y [N], or [D] with y [] (x1 and x2 broadcast together). The cosine is PyTorch's
 * `Σ x1 x2 / sqrt((Σ x1² + 1e-12)(Σ x2² + 1e-12))`, so zero vectors give 0.
 */
export function cosineEmbeddingLoss(
  input1: Tensor,
  input2: Tensor,
  target: Tensor,
  options: CosineEmbeddingLossOptions = {},
): Tensor {
  const op = "cosineEmbeddingLoss";
  const tensors = { input1, input2, target };
  checkFloats(op, tensors);
  const reduction = lossReduction(op, options);
  const margin = checkFinite(op, "margin", options.margin ?? 0);
  const dim = target.ndim;
  // The inputs broadcast together, as in PyTorch ([N, D] against [1, D]).
  const both = input1.ndim === dim + 1 && input2.ndim === dim + 1
    ? broadcastShapes(input1.shape, input2.shape, `${op} (input1 and input2)`)
    : null;
  if (dim > 1 || !both || (dim === 1 && both[0] !== target.shape[0])) {
    throw new RangeError(
      `${op}: expected input1 and input2 of shape [N, D] with target [N], or [D] with target [], got ${
        describe(tensors)
      }`,
    );
  }
  const eps = 1e-12;
  const dot = input1.mul(input2).sum(dim);
  const mag1 = input1.mul(input1).sum(dim).add(eps);
  const mag2 = input2.mul(input2).sum(dim).add(eps);
  const cos = dot.div(mag1.mul(mag2).sqrt());
  const [pos, neg] = noGrad(() => [target.eq(1), target.eq(-1)]);
  const losses = where(pos, cos.neg().add(1), 0).add(where(neg, cos.sub(margin).clamp(0), 0));
  return reduceLoss(losses, reduction);
}

/** Options of {@link tripletMarginLoss}. */
export interface TripletMarginLossOptions extends ReductionOptions {
  /** Required gap between the positive and negative distances (default 1). */
  margin?: number;
  /** Norm of the distances (default 2). */
  p?: number;
  /** Added to every difference before its norm (default 1e-6), as `pairwise_distance`. */
  eps?: number;
  /** Use the positive-negative distance when it is smaller (default false). */
  swap?: boolean;
}

/** `‖a - b + eps‖_p` over the last dim, as `torch.pairwise_distance`. */
function pairwise(a: Tensor, b: Tensor, p: number, eps: number): Tensor {
  return a.sub(b).add(eps).norm(p, -1);
}

/**
 * `max(0, margin + d(a, p) - d(a, n))` with `d(x, y) = ‖x - y + eps‖_p` over
 * the last dim, as `torch.nn.functional.triplet_margin_loss`; with `swap`,
 * `d(a, n)` is `min(d(a, n), d(p, n))` (ties split the gradient, as
 * `torch.min`). The three inputs need the same number of dims (at least 1)
 * and broadcast together; the loss has one value per row of the last dim.
 */
export function tripletMarginLoss(
  anchor: Tensor,
  positive: Tensor,
  negative: Tensor,
  options: TripletMarginLossOptions = {},
): Tensor {
  const op = "tripletMarginLoss";
  const tensors = { anchor, positive, negative };
  checkFloats(op, tensors);
  const reduction = lossReduction(op, options);
  const margin = checkFinite(op, "margin", options.margin ?? 1);
  const p = options.p ?? 2;
  // Infinity is a norm too (the largest difference), as PyTorch takes it.
  if (typeof p !== "number" || !(p > 0)) {
    throw new RangeError(`${op}: p must be positive (Infinity allowed), got ${p}`);
  }
  const eps = checkFinite(op, "eps", options.eps ?? 1e-6);
  if (anchor.ndim !== positive.ndim || anchor.ndim !== negative.ndim) {
    throw new RangeError(
      `${op}: all inputs must have the same number of dims, got ${describe(tensors)}`,
    );
  }
  if (anchor.ndim < 1) {
    throw new RangeError(`${op}: expected inputs of at least 1 dim, got ${describe(tensors)}`);
  }
  broadcastShapes(broadcastShapes(anchor.shape, positive.shape, op), negative.shape, op);
  const dPos = pairwise(anchor, positive, p, eps);
  let dNeg = pairwise(anchor, negative, p, eps);
  if (options.swap) dNeg = dNeg.minimum(pairwise(positive, negative, p, eps));
  return reduceLoss(dPos.sub(dNeg).add(margin).clamp(0), reduction);
}

// ---------------------------------------------------------------- logistic losses

/**
 * `log(1 + e^(-y x))`, as `torch.nn.functional.soft_margin_loss` (y = ±1),
 * computed as PyTorch computes it: `-y x` above ~88 overflows float32 to an
 * infinite loss and a NaN gradient there, as in PyTorch.
 */
export function softMarginLoss(
  input: Tensor,
  target: Tensor,
  options: ReductionOptions = {},
): Tensor {
  const op = "softMarginLoss";
  checkFloats(op, { input, target });
  checkBroadcast(op, input, target);
  const reduction = lossReduction(op, options);
  return reduceLoss(input.mul(target).neg().exp().log1p(), reduction);
}

/** Options of {@link multilabelSoftMarginLoss}. */
export interface MultilabelSoftMarginLossOptions extends ReductionOptions {
  /** Per-class weights, broadcast to the input (usually [C]). */
  weight?: Tensor | null;
}

/**
 * `-mean_c (y log σ(x) + (1 - y) log σ(-x)) · weight` per sample, as
 * `torch.nn.functional.multilabel_soft_margin_loss`: input and target are
 * [N, C] (or [C]); `"none"` gives one loss per sample.
 */
export function multilabelSoftMarginLoss(
  input: Tensor,
  target: Tensor,
  options: MultilabelSoftMarginLossOptions = {},
): Tensor {
  const op = "multilabelSoftMarginLoss";
  checkFloats(op, { input, target });
  checkBroadcast(op, input, target);
  const reduction = lossReduction(op, options);
  if (input.ndim < 1) {
    throw new RangeError(`${op}: expected an input of shape [N, C] or [C], got shape []`);
  }
  const weight = options.weight ?? null;
  if (weight) {
    checkFloats(op, { input, weight });
    const shape = input.shape;
    const fits = weight.ndim <= shape.length &&
      weight.shape.every((d, k) => d === 1 || d === shape[shape.length - weight.ndim + k]);
    if (!fits) {
      throw new RangeError(
        `${op}: weight of shape ${formatShape(weight.shape)} does not broadcast to input of shape ${
          formatShape(shape)
        }`,
      );
    }
  }
  let losses = target.mul(logsigmoid(input))
    .add(target.neg().add(1).mul(logsigmoid(input.neg()))).neg();
  if (weight) losses = losses.mul(weight);
  const c = input.shape[input.ndim - 1];
  return reduceLoss(losses.sum(-1).div(c), reduction);
}

// ---------------------------------------------------------------- likelihood losses

/** Options of {@link gaussianNllLoss}. */
export interface GaussianNLLLossOptions extends ReductionOptions {
  /** Add the constant `0.5 log(2π)` (default false). */
  full?: boolean;
  /** Variances below this are raised to it (default 1e-6). */
  eps?: number;
}

/**
 * `0.5 (log v + (x - t)² / v)` with `v = max(var, eps)`, as
 * `torch.nn.functional.gaussian_nll_loss`. `var` has the input's shape, or
 * that shape without its last dim, or with a last dim of 1 (one variance
 * shared by the last dim). As in PyTorch, the clamp is invisible to the
 * gradient: a clamped variance gets the gradient at `eps`. A negative
 * variance (PyTorch raises at once) is reported by the next read on the
 * device.
 */
export function gaussianNllLoss(
  input: Tensor,
  target: Tensor,
  variance: Tensor,
  options: GaussianNLLLossOptions = {},
): Tensor {
  const op = "gaussianNllLoss";
  checkFloats(op, { input, target, var: variance });
  checkBroadcast(op, input, target);
  const reduction = lossReduction(op, options);
  const eps = checkFinite(op, "eps", options.eps ?? 1e-6);
  if (!(eps > 0)) throw new RangeError(`${op}: eps must be positive, got ${eps}`);
  let v = variance;
  if (!sameShape(variance.shape, input.shape)) {
    const lead = input.shape.slice(0, -1);
    if (input.ndim >= 1 && sameShape(variance.shape, lead)) v = variance.unsqueeze(-1);
    else if (
      !(input.ndim >= 1 && variance.ndim === input.ndim &&
        sameShape(variance.shape.slice(0, -1), lead) && variance.shape[variance.ndim - 1] === 1)
    ) {
      throw new RangeError(
        `${op}: var of shape ${formatShape(variance.shape)} does not fit input of shape ${
          formatShape(input.shape)
        }; it must be the input's shape, or that without its last dim, or with a last dim of 1`,
      );
    }
  }
  if (variance.numel() > 0) {
    // A count, not the minimum: a NaN beside a negative entry would hide it from min().
    checkLater(
      noGrad(() => variance.lt(0).sum().reshape([1])),
      ([negative]) => negative > 0 ? `${op}: var has ${negative} negative entries` : null,
    );
  }
  // PyTorch clamps a clone under no_grad: the gradient flows as if unclamped.
  const vc = record(op, [v], noGrad(() => v.clamp(eps)), ([g]) => [g!]);
  const d = input.sub(target);
  let losses = vc.log().add(d.mul(d).div(vc)).mul(0.5);
  if (options.full) losses = losses.add(0.5 * Math.log(2 * Math.PI));
  return reduceLoss(losses, reduction);
}

/** Options of {@link poissonNllLoss}. */
export interface PoissonNLLLossOptions extends ReductionOptions {
  /** The input is the log of the rate (default true). */
  logInput?: boolean;
  /** Add Stirling's approximation of `log(t!)` where `t > 1` (default false). */
  full?: boolean;
  /** Added to the rate inside the log when `logInput` is false (default 1e-8). */
  eps?: number;
}

/**
 * Poisson negative log-likelihood, as `torch.nn.functional.poisson_nll_loss`:
 * `e^x - t x` with `logInput`, else `x - t log(x + eps)`; `full` adds
 * `t log t - t + 0.5 log(2π t)` where `t > 1`. Where `t <= 1` that term is
 * left out of the graph, so the target gets a 0 gradient from it there
 * (PyTorch's is NaN where t <= 0).
 */
export function poissonNllLoss(
  input: Tensor,
  target: Tensor,
  options: PoissonNLLLossOptions = {},
): Tensor {
  const op = "poissonNllLoss";
  checkFloats(op, { input, target });
  checkBroadcast(op, input, target);
  const reduction = lossReduction(op, options);
  const eps = checkFinite(op, "eps", options.eps ?? 1e-8);
  let losses = options.logInput ?? true
    ? input.exp().sub(target.mul(input))
    : input.sub(target.mul(input.add(eps).log()));
  if (options.full) {
    const big = noGrad(() => target.gt(1));
    // Any t > 1 in place of the others keeps log(t) finite in the dropped branch.
    const t = where(big, target, 2);
    const stirling = t.mul(t.log()).sub(t).add(t.mul(2 * Math.PI).log().mul(0.5));
    losses = losses.add(where(big, stirling, 0));
  }
  return reduceLoss(losses, reduction);
}
