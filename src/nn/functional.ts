/**
 * Stateless neural-network functions, as `torch.nn.functional`: activations,
 * `linear`, `dropout`, normalisation and losses. The modules in `nn` call
 * these. Nothing here reads values back to the host, so nothing awaits.
 * @module
 */

import { noGrad, record } from "../autograd.ts";
import { isFloat } from "../dtype.ts";
import { where } from "../ops/indexing.ts";
import { crossEntropyReduced, crossEntropyRows } from "./functional/cross_entropy.ts";
import { composedBatchNorm, fusedBatchNorm } from "./functional/batch_norm.ts";
import { recomputedBackward, recording } from "../autograd/recompute.ts";
import { linear as linearOp } from "../ops/linalg.ts";
import { formatShape, numelOf, sameShape } from "../shape.ts";
import { forwardScope, tidy } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import { inPlace } from "../ops/inplace.ts";
import type { InplaceOptions } from "./functional/inplace.ts";
import { checkBatchNorm, checkReduction, checkTensor, sameDevice } from "./util.ts";

import { pickedNll, type Reduction } from "./functional/loss.ts";
import { owned } from "../ops_composite/owned.ts";

export * from "./functional/activation.ts";
export * from "./functional/loss.ts";
export * from "./functional/dropout.ts";
export * from "./functional/attention.ts";
export * from "./functional/sparse.ts";
export * from "./functional/conv.ts";
export * from "./functional/normalize.ts";
export * from "./functional/pool1d.ts";
export * from "./functional/conv_transpose.ts";
export * from "./functional/grid_sample.ts";
export * from "./functional/gumbel.ts";
export * from "./functional/interpolate.ts";
export * from "./functional/activation_extra.ts";
export * from "./functional/channel_dropout.ts";
export * from "./functional/normalization_extra.ts";
export * from "./functional/pixel_shuffle.ts";
export * from "./functional/loss_extra.ts";
export * from "./functional/ctc.ts";
export * from "./functional/loss_more.ts";
export * from "./functional/adaptive_max_pool.ts";
export * from "./functional/fold.ts";
export * from "./functional/pool_extra.ts";
export * from "./functional/bilinear.ts";
export * from "./functional/embedding_bag.ts";
export * from "./functional/volumetric.ts";
export * from "./functional/nn_gaps.ts";
export * from "./functional/inplace.ts";
export * from "./functional/pool_gaps.ts";
export * from "./functional/api_gaps.ts";
export * from "./functional/multi_head_attention.ts";

// ---------------------------------------------------------------- activations

/** max(x, 0); `inplace` overwrites `x`, as PyTorch's `inplace=True` (see `relu_`). */
export function relu(x: Tensor, options: InplaceOptions = {}): Tensor {
  checkTensor("relu", "input", x);
  if (options.inplace) return inPlace("relu_", x, [], (t) => t.relu());
  return x.relu();
}

/** The logistic sigmoid 1 / (1 + e^-x). */
export function sigmoid(x: Tensor): Tensor {
  checkTensor("sigmoid", "input", x);
  return x.sigmoid();
}

/** Hyperbolic tangent. */
export function tanh(x: Tensor): Tensor {
  checkTensor("tanh", "input", x);
  return x.tanh();
}

/** Options of {@link gelu}. */
export interface GeluOptions {
  /** `"none"` (default): the exact erf form; `"tanh"`: the tanh approximation. */
  approximate?: "none" | "tanh";
}

/** GELU, exact (erf) by default, as `torch.nn.functional.gelu`. */
export function gelu(x: Tensor, options: GeluOptions = {}): Tensor {
  checkTensor("gelu", "input", x);
  const approximate = options.approximate ?? "none";
  if (approximate === "none") return x.gelu();
  if (approximate !== "tanh") {
    throw new RangeError(
      `gelu: approximate must be "none" or "tanh", got ${JSON.stringify(approximate)}`,
    );
  }
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), PyTorch's constants.
  const inner = x.add(x.mul(x).mul(x).mul(0.044715)).mul(Math.sqrt(2 / Math.PI));
  return x.mul(0.5).mul(inner.tanh().add(1));
}

/** softmax along `dim` (required: PyTorch's implicit dim is deprecated). */
export function softmax(x: Tensor, dim: number): Tensor {
  checkTensor("softmax", "input", x);
  return x.softmax(dim);
}

/** log(softmax(x)) along `dim`, computed stably in one kernel. */
export function logSoftmax(x: Tensor, dim: number): Tensor {
  checkTensor("logSoftmax", "input", x);
  return x.logSoftmax(dim);
}

/** `x @ weightᵀ + bias` over the last dim of `x`. */
export function linear(x: Tensor, weight: Tensor, bias?: Tensor | null): Tensor {
  // Its un-biased product goes with the graph at backward, not with the GC.
  return forwardScope(() => linearUnscoped(x, weight, bias));
}

function linearUnscoped(x: Tensor, weight: Tensor, bias?: Tensor | null): Tensor {
  checkTensor("linear", "input", x);
  checkTensor("linear", "weight", weight);
  // Shapes, dtypes and devices are checked by the op (bias [outF], [1] or [], as PyTorch).
  if (bias != null) checkTensor("linear", "bias", bias);
  return linearOp(x, weight, bias);
}

// ---------------------------------------------------------------- normalisation

function normalizedDims(x: Tensor, normalizedShape: readonly number[], op: string): number[] {
  const k = normalizedShape.length;
  const tail = x.shape.slice(x.ndim - k);
  if (k === 0 || x.ndim < k || !sameShape(tail, normalizedShape)) {
    throw new RangeError(
      `${op}: normalized shape ${
        formatShape(normalizedShape)
      } does not match the trailing dims of input of shape ${formatShape(x.shape)}`,
    );
  }
  return normalizedShape.map((_, i) => x.ndim - k + i);
}

/** Options of {@link layerNorm}. */
export interface LayerNormOptions {
  /** Scale, of the normalized shape. */
  weight?: Tensor | null;
  /** Shift, of the normalized shape. */
  bias?: Tensor | null;
  /** Added to the variance (default 1e-5). */
  eps?: number;
}

/**
 * Normalizes over the trailing `normalizedShape` dims with the biased
 * variance, then scales and shifts, as `torch.nn.functional.layer_norm`.
 */
export function layerNorm(
  x: Tensor,
  normalizedShape: number | readonly number[],
  options: LayerNormOptions = {},
): Tensor {
  checkTensor("layerNorm", "input", x);
  const shape = typeof normalizedShape === "number" ? [normalizedShape] : [...normalizedShape];
  const dims = normalizedDims(x, shape, "layerNorm");
  const { weight, bias } = options;
  const eps = options.eps ?? 1e-5;
  for (const [name, t] of [["weight", weight], ["bias", bias]] as const) {
    if (t != null && !sameShape(t.shape, shape)) {
      throw new RangeError(
        `layerNorm: ${name} of shape ${formatShape(t.shape)} does not match the normalized shape ${
          formatShape(shape)
        }`,
      );
    }
  }
  sameDevice("layerNorm", { input: x, weight, bias });
  const mean = x.mean(dims, true);
  const centered = x.sub(mean);
  const variance = centered.mul(centered).mean(dims, true);
  let y = centered.div(variance.add(eps).sqrt());
  if (weight) y = y.mul(weight);
  if (bias) y = y.add(bias);
  return y;
}

/** Options of {@link batchNorm}. */
export interface BatchNormOptions {
  /** Per-channel scale [C]. */
  weight?: Tensor | null;
  /** Per-channel shift [C]. */
  bias?: Tensor | null;
  /**
   * Normalize with the batch's statistics (and update the running ones when
   * given) rather than with the running statistics. Default false.
   */
  training?: boolean;
  /**
   * Weight of the batch statistic in the running update (default 0.1): a
   * number, or a 0-dimensional tensor on the input's device (the module
   * passes `1 / num_batches_tracked` that way for a cumulative average).
   */
  momentum?: number | Tensor;
  /** Added to the variance (default 1e-5). */
  eps?: number;
}

/**
 * Batch normalisation over dim 1 of an [N, C, ...] input, as
 * `torch.nn.functional.batch_norm`. In training the batch mean and biased
 * variance normalize, and `runningMean`/`runningVar` (when given) are updated
 * in place with `momentum` and the UNBIASED variance; otherwise the running
 * statistics normalize. The update happens on the device (no host read).
 */
export function batchNorm(
  x: Tensor,
  runningMean: Tensor | null,
  runningVar: Tensor | null,
  options: BatchNormOptions = {},
): Tensor {
  // Intermediates go with the graph at backward, not with the GC.
  return forwardScope(() => batchNormUnscoped(x, runningMean, runningVar, options));
}

function batchNormUnscoped(
  x: Tensor,
  runningMean: Tensor | null,
  runningVar: Tensor | null,
  options: BatchNormOptions = {},
): Tensor {
  const { weight, bias } = options;
  const training = options.training ?? false;
  const momentum = options.momentum ?? 0.1;
  const eps = options.eps ?? 1e-5;
  checkBatchNorm(x, { runningMean, runningVar, weight, bias }, training);
  if (!training && (!runningMean || !runningVar)) {
    throw new Error("batchNorm: running_mean and running_var are required when not training");
  }
  if (momentum instanceof Tensor && (momentum.numel() !== 1 || momentum.device !== x.device)) {
    throw new RangeError(
      `batchNorm: a tensor momentum must have one element on ${x.device}, got shape ${
        formatShape(momentum.shape)
      } on ${momentum.device}`,
    );
  }
  const c = x.shape[1];
  // [1, C, 1, ...]: the per-channel view that broadcasts over x.
  const view = x.shape.map((_, i) => (i === 1 ? c : 1));
  const channel = view.slice(1);
  if (!training) {
    // Folded into one scale and one shift per channel: two passes over x.
    const scale = runningVar!.add(eps).rsqrt().mul(weight ?? 1);
    const shift = (bias ?? scale.mul(0)).sub(runningMean!.mul(scale));
    return x.mul(scale.reshape(channel)).add(shift.reshape(channel));
  }
  const n = x.numel() / c;
  const updateRunning = (mean: Tensor, variance: Tensor) => {
    if (!runningMean || !runningVar) return;
    noGrad(() =>
      tidy(() => {
        const m = momentum instanceof Tensor ? momentum.reshape([]) : momentum;
        const keep = m instanceof Tensor ? m.mul(-1).add(1) : 1 - m;
        const batchMean = mean.reshape([c]);
        const unbiased = variance.reshape([c]).mul(n / (n - 1));
        runningMean._assign(runningMean.mul(keep).add(batchMean.mul(m)).to(runningMean.dtype));
        runningVar._assign(runningVar.mul(keep).add(unbiased.mul(m)).to(runningVar.dtype));
      })
    );
  };
  const affine = weight && bias && weight.dtype === x.dtype && bias.dtype === x.dtype;
  const fused = affine ? fusedBatchNorm(x, weight, bias, eps) : null;
  if (fused) {
    updateRunning(fused.mean, fused.variance);
    return fused.y;
  }
  // [N, C, L] with statistics over dims 0 and 2: two reductions per sum.
  const x3 = x.reshape([x.shape[0], c, n / x.shape[0]]);
  const dims = [0, 2];
  const perChannel = [1, c, 1];
  // The forward runs without a graph and one node carries the closed-form
  // backward with per-channel coefficients: 6 passes over x forward and 7
  // backward, where the composed ops record about 40.
  const { y, centered, invstd } = noGrad(() => {
    const mean = x3.mean(dims, true);
    const centered = x3.sub(mean);
    const variance = centered.square().mean(dims, true);
    const invstd = variance.add(eps).rsqrt();
    const w = weight ? weight.reshape(perChannel) : null;
    const b = bias ? bias.reshape(perChannel) : null;
    let y = centered.mul(w ? invstd.mul(w) : invstd);
    if (b) y = y.add(b);
    updateRunning(mean, variance);
    return { y: y.reshape(x.shape), centered, invstd };
  });
  return record("batchNorm", [x, weight ?? null, bias ?? null], y, ([g]) => {
    if (recording()) {
      const inputs = [x, weight ?? null, bias ?? null];
      return recomputedBackward(inputs, () => composedBatchNorm(x, inputs[1], inputs[2], eps), g!);
    }
    const g3 = g!.reshape(x3.shape);
    // With xhat = centered · invstd, per channel: gsum = Σ g, gxc = Σ g · centered.
    const gsum = g3.sum(dims, true);
    const gxc = g3.mul(centered).sum(dims, true);
    const gw = weight?.requiresGrad ? gxc.mul(invstd).reshape([c]) : null;
    const gb = bias?.requiresGrad ? gsum.reshape([c]) : null;
    let gx: Tensor | null = null;
    if (x.requiresGrad) {
      // dx = w·invstd · (g - gsum/n - centered · invstd² · gxc/n) = a·g + b·centered + k
      const a = weight ? invstd.mul(weight.reshape(perChannel)) : invstd;
      const b = a.mul(invstd.square()).mul(gxc).mul(-1 / n);
      const k = a.mul(gsum).mul(-1 / n);
      gx = g3.mul(a).add(centered.mul(b)).add(k).reshape(x.shape);
    }
    return [gx, gw, gb];
  });
}

/** Options of {@link groupNorm}. */
export interface GroupNormOptions {
  /** Per-channel scale [C]. */
  weight?: Tensor | null;
  /** Per-channel shift [C]. */
  bias?: Tensor | null;
  /** Added to the variance (default 1e-5). */
  eps?: number;
}

/**
 * Group normalisation of [N, C, ...], as `torch.nn.functional.group_norm`:
 * each sample's channels split into `numGroups` groups, each normalized over
 * its channels and positions with the biased variance, then `weight` and
 * `bias` per channel.
 */
export function groupNorm(x: Tensor, numGroups: number, options: GroupNormOptions = {}): Tensor {
  // Intermediates go with the graph at backward, not with the GC.
  const { weight, bias } = options;
  return owned(() => forwardScope(() => groupNormUnscoped(x, numGroups, options)), x, weight, bias);
}

function groupNormUnscoped(x: Tensor, numGroups: number, options: GroupNormOptions = {}): Tensor {
  checkTensor("groupNorm", "input", x);
  const eps = options.eps ?? 1e-5;
  const { weight, bias } = options;
  if (x.ndim < 2 || !isFloat(x.dtype)) {
    throw new RangeError(
      `groupNorm: expected a floating-point input [N, C, ...], got ${x.dtype} of shape ${
        formatShape(x.shape)
      }`,
    );
  }
  const [n, c] = x.shape;
  if (!Number.isInteger(numGroups) || numGroups < 1 || c % numGroups !== 0) {
    throw new RangeError(
      `groupNorm: ${c} channels (input of shape ${
        formatShape(x.shape)
      }) are not divisible into ${numGroups} groups`,
    );
  }
  for (const [name, t] of [["weight", weight], ["bias", bias]] as const) {
    if (t != null && !sameShape(t.shape, [c])) {
      throw new RangeError(
        `groupNorm: ${name} of shape ${formatShape(t.shape)} does not match ${c} channels`,
      );
    }
  }
  sameDevice("groupNorm", { input: x, weight, bias });
  const grouped = x.reshape([n, numGroups, -1]);
  const mean = grouped.mean(2, true);
  const centered = grouped.sub(mean);
  const variance = centered.mul(centered).mean(2, true);
  let y = centered.div(variance.add(eps).sqrt()).reshape(x.shape);
  const view = x.shape.map((s, i) => (i === 1 ? s : 1)).slice(1);
  if (weight) y = y.mul(weight.reshape(view));
  if (bias) y = y.add(bias.reshape(view));
  return y;
}

// ---------------------------------------------------------------- losses

/** Options of {@link mseLoss}. */
export interface MSELossOptions {
  /** `"mean"` (default), `"sum"` or `"none"`. */
  reduction?: Reduction;
}

/** Mean squared error, as `torch.nn.functional.mse_loss`; shapes must be equal. */
export function mseLoss(input: Tensor, target: Tensor, options: MSELossOptions = {}): Tensor {
  // Its intermediates go with the graph at backward, not with the GC.
  return forwardScope(() => mseLossUnscoped(input, target, options));
}

function mseLossUnscoped(input: Tensor, target: Tensor, options: MSELossOptions): Tensor {
  checkTensor("mseLoss", "input", input);
  checkTensor("mseLoss", "target", target);
  const reduction = options.reduction ?? "mean";
  checkReduction("mseLoss", reduction);
  if (!sameShape(input.shape, target.shape)) {
    throw new RangeError(
      `mseLoss: input of shape ${formatShape(input.shape)} and target of shape ${
        formatShape(target.shape)
      } differ; they must have the same shape`,
    );
  }
  sameDevice("mseLoss", { input, target });
  const diff = input.sub(target);
  const squared = diff.mul(diff);
  if (reduction === "none") return squared;
  const total = squared.sum();
  // PyTorch divides the sum by the count; a reciprocal multiply rounds differently.
  return reduction === "sum" ? total : total.div(squared.numel());
}

/** Options of {@link crossEntropy}. */
export interface CrossEntropyOptions {
  /** Per-class weights [C]. */
  weight?: Tensor | null;
  /** Class-index targets equal to this are ignored (default -100, as PyTorch). */
  ignoreIndex?: number;
  /** `"mean"` (default, weighted mean over non-ignored targets), `"sum"` or `"none"`. */
  reduction?: Reduction;
  /** Mixes the target with the uniform distribution by this amount (default 0). */
  labelSmoothing?: number;
}

/**
 * Cross entropy between logits and targets, as
 * `torch.nn.functional.cross_entropy`: `input` is [N, C] (or [C], or
 * [N, C, d1, ...] with the class in dim 1); `target` holds int32 class
 * indices of shape [N] (resp. [], [N, d1, ...]) or class probabilities of
 * `input`'s shape. Computed through `logSoftmax` and a gather of the target
 * classes on the device, so a `-inf` logit that is not the target gives 0 (as
 * PyTorch) and nothing waits. Targets equal to `ignoreIndex` (default -100)
 * are left out of the loss and of the mean; any other class index outside
 * [0, C) makes the next read on the device reject with an error naming it
 * and the class count.
 */
export function crossEntropy(
  input: Tensor,
  target: Tensor,
  options: CrossEntropyOptions = {},
): Tensor {
  // Its log-probabilities and one-hots go with the graph at backward, not with the GC.
  return owned(() => forwardScope(() => crossEntropyUnscoped(input, target, options)), input);
}

function crossEntropyUnscoped(
  input: Tensor,
  target: Tensor,
  options: CrossEntropyOptions,
): Tensor {
  const op = "crossEntropy";
  checkTensor(op, "input", input);
  checkTensor(op, "target", target);
  const reduction = options.reduction ?? "mean";
  checkReduction(op, reduction);
  const ignoreIndex = options.ignoreIndex ?? -100;
  const smoothing = options.labelSmoothing ?? 0;
  const weight = options.weight ?? null;
  if (!isFloat(input.dtype)) {
    throw new TypeError(
      `${op}: expected floating-point logits, got ${input.dtype} (shape ${
        formatShape(input.shape)
      })`,
    );
  }
  if (input.ndim < 1) {
    throw new RangeError(`${op}: input must have at least 1 dim (classes), got shape []`);
  }
  if (!(smoothing >= 0 && smoothing <= 1)) {
    throw new RangeError(`${op}: labelSmoothing must be between 0 and 1, got ${smoothing}`);
  }
  const classDim = input.ndim === 1 ? 0 : 1;
  const c = input.shape[classDim];
  if (weight && !sameShape(weight.shape, [c])) {
    throw new RangeError(
      `${op}: weight of shape ${
        formatShape(weight.shape)
      } does not match the ${c} classes of input of shape ${formatShape(input.shape)}`,
    );
  }
  sameDevice(op, { input, target, weight });
  const probabilities = isFloat(target.dtype);
  const outShape = input.shape.filter((_, i) => i !== classDim);
  if (probabilities ? !sameShape(target.shape, input.shape) : !sameShape(target.shape, outShape)) {
    throw new RangeError(
      probabilities
        ? `${op}: probability target of shape ${
          formatShape(target.shape)
        } must match input of shape ${formatShape(input.shape)}${
          // tensor([0, 2]) is float32 here (int64 in PyTorch): say how to get class indices.
          sameShape(target.shape, outShape)
            ? `; for class indices make the target int32 (tensor(labels, { dtype: "int32" }) or .to("int32"))`
            : ""}`
        : `${op}: class-index target of shape ${
          formatShape(target.shape)
        } does not fit input of shape ${formatShape(input.shape)} (expected ${
          formatShape(outShape)
        }, int32)`,
    );
  }
  // Move classes last and flatten the rest: logits [M, C].
  const perm = input.shape.map((_, i) => i).filter((i) => i !== classDim).concat([classDim]);
  const moved = input.ndim > 2 ? input.permute(perm) : input;
  const m = numelOf(outShape);
  const logits = moved.reshape([m, c]);
  if (!probabilities && !Number.isInteger(ignoreIndex)) {
    throw new RangeError(`${op}: ignoreIndex must be an integer, got ${ignoreIndex}`);
  }
  if (!probabilities && !weight && smoothing === 0) {
    // The common case in two fused kernels (forward, backward) where the backend has them.
    if (reduction !== "none") {
      const reduced = crossEntropyReduced(
        op,
        logits,
        target.reshape([m]),
        ignoreIndex,
        reduction === "mean",
      );
      if (reduced) return reduced;
    }
    const fused = crossEntropyRows(op, logits, target.reshape([m]), ignoreIndex);
    if (fused) {
      const { losses, weights } = fused;
      if (reduction === "none") return losses.reshape(outShape);
      if (reduction === "sum") return losses.sum();
      return losses.sum().div(weights.sum());
    }
  }
  const logp = logits.logSoftmax(1);
  const weightRow = weight ? weight.to(logp.dtype).reshape([1, c]) : null;

  if (probabilities) {
    let t = (input.ndim > 2 ? target.permute(perm) : target).reshape([m, c]).to(logp.dtype);
    if (smoothing > 0) t = t.mul(1 - smoothing).add(smoothing / c);
    const picked = weightRow ? logp.mul(weightRow).mul(t) : logp.mul(t);
    const losses = picked.sum(1).neg();
    if (reduction === "none") return losses.reshape(outShape);
    const total = losses.sum();
    return reduction === "sum" ? total : total.div(m);
  }

  // Picked by index, not by a one-hot product: 0 · -inf would be NaN where a
  // logit that is not the target is -inf (PyTorch gives 0).
  const { losses: nll, sampleWeight, valid } = pickedNll(
    op,
    logp,
    target.reshape([m]),
    weight,
    ignoreIndex,
  );
  let smooth: Tensor | null = null;
  if (smoothing > 0) {
    const all = weightRow ? logp.mul(weightRow) : logp;
    smooth = where(valid, all.sum(1).neg(), 0);
  }
  const combine = (nllPart: Tensor, smoothPart: Tensor | null) =>
    smoothPart ? nllPart.mul(1 - smoothing).add(smoothPart.mul(smoothing / c)) : nllPart;
  if (reduction === "none") return combine(nll, smooth).reshape(outShape);
  if (reduction === "sum") return combine(nll.sum(), smooth?.sum() ?? null);
  const denominator = sampleWeight.sum();
  return combine(nll.sum().div(denominator), smooth ? smooth.sum().div(denominator) : null);
}
