/**
 * The margin losses of `torch.nn.functional` beyond `loss_extra.ts`:
 * `multiMarginLoss`, `multilabelMarginLoss`, `hingeEmbeddingLoss` and
 * `tripletMarginWithDistanceLoss`. Composed from tensor ops (every backend,
 * nothing read back) with PyTorch 1.13's formulas: the class-index hinges
 * pass no gradient where they are exactly 0 (PyTorch tests `z > 0`), the
 * clamped ones pass it (`clamp_min`).
 * @module
 */

import { noGrad } from "../../autograd.ts";
import { checkLater } from "../../ops/check.ts";
import { arangeOn } from "../../ops/factory.ts";
import { gatherInRange, where } from "../../ops/indexing.ts";
import { stack } from "../../ops/view.ts";
import { broadcastShapes, formatShape, sameShape } from "../../shape.ts";
import { forwardScope } from "../../storage.ts";
import { Tensor } from "../../tensor.ts";
import {
  checkClassRange,
  checkFinite,
  checkFloatInput,
  checkTensor,
  lossReduction,
  reduceLoss,
  sameDevice,
} from "../util.ts";
import type { ReductionOptions } from "./loss.ts";

/**
 * The [frames, classes] view of a class-score input of 0, 1 or 2 dims, as
 * PyTorch's multi-margin losses take it (a non-empty vector or a matrix).
 */
function framesOf(op: string, input: Tensor): [number, number] {
  checkFloatInput(op, input, "input");
  const d = input.ndim;
  if (!(d === 0 || (d === 1 && input.shape[0] > 0) || (d === 2 && input.shape[1] > 0))) {
    throw new RangeError(
      `${op}: expected a non-empty vector [C] or a matrix [N, C] of class scores, got shape ${
        formatShape(input.shape)
      }`,
    );
  }
  return [d === 2 ? input.shape[0] : 1, d === 0 ? 1 : input.shape[d - 1]];
}

// ---------------------------------------------------------------- class-index margins

/** Options of {@link multiMarginLoss}. */
export interface MultiMarginLossOptions extends ReductionOptions {
  /** 1 (default) or 2: the power of each hinge. */
  p?: number;
  /** Required gap between the target's score and the others' (default 1). */
  margin?: number;
  /** Per-class weights [C], applied by the target's class. */
  weight?: Tensor | null;
}

/**
 * The multi-class hinge loss, as `torch.nn.functional.multi_margin_loss`:
 * per sample `Σ_{i ≠ y} w[y] max(0, margin - x[y] + x[i])^p / C`, with
 * `input` [N, C] (or [C]) and int32 class indices `target` [N] (or [] /
 * [1]). `"none"` gives [N] (or [] for a 0-dim target). A target outside
 * [0, C) is reported by the next read on the device.
 */
export function multiMarginLoss(
  input: Tensor,
  target: Tensor,
  options: MultiMarginLossOptions = {},
): Tensor {
  const op = "multiMarginLoss";
  const [frames, classes] = framesOf(op, input);
  checkTensor(op, "target", target);
  const reduction = lossReduction(op, options);
  const p = options.p ?? 1;
  if (p !== 1 && p !== 2) throw new RangeError(`${op}: p must be 1 or 2, got ${p}`);
  const margin = checkFinite(op, "margin", options.margin ?? 1);
  if (target.dtype !== "int32" || target.ndim > 1 || target.numel() !== frames) {
    throw new RangeError(
      `${op}: target must hold ${frames} int32 class index(es) for input of shape ${
        formatShape(input.shape)
      }, got ${target.dtype} of shape ${formatShape(target.shape)}`,
    );
  }
  const weight = options.weight ?? null;
  if (weight) {
    checkFloatInput(op, weight, "weight");
    if (weight.ndim > 1 || weight.numel() !== classes) {
      throw new RangeError(
        `${op}: weight of shape ${
          formatShape(weight.shape)
        } does not match the ${classes} classes of input of shape ${formatShape(input.shape)}`,
      );
    }
  }
  sameDevice(op, { input, target, weight });
  // The masks and gathers go with the graph at backward, not with the GC.
  return forwardScope(() => {
    const x = input.reshape([frames, classes]);
    const y = target.reshape([frames, 1]);
    checkClassRange(op, y, classes);
    const z = x.sub(gatherInRange(x, 1, y)).add(margin);
    const counted = noGrad(() =>
      z.gt(0).mul(arangeOn(classes, x.device).reshape([1, classes]).ne(y))
    );
    let hinge = where(counted, p === 1 ? z : z.mul(z), 0);
    if (weight) {
      hinge = hinge.mul(
        gatherInRange(weight.to(x.dtype).reshape([classes]), 0, y.reshape([frames])).reshape([
          frames,
          1,
        ]),
      );
    }
    const losses = hinge.sum(1).div(classes);
    return reduceLoss(target.ndim === 0 ? losses.reshape([]) : losses, reduction);
  });
}

/**
 * The multi-label hinge loss, as `torch.nn.functional.multilabel_margin_loss`:
 * `target` (int32, the input's shape [N, C]; C entries for [C] or [])
 * lists each sample's labels, ended by the first -1; per sample
 * `Σ_{j label} Σ_{i not a label} max(0, 1 - (x[j] - x[i])) / C` (a repeated
 * label counts twice, as in PyTorch). `"none"` gives [N] (or [] for [C]).
 * Every entry, read or not, must be in [-1, C), as PyTorch checks; one that
 * is not is reported by the next read on the device.
 */
export function multilabelMarginLoss(
  input: Tensor,
  target: Tensor,
  options: ReductionOptions = {},
): Tensor {
  const op = "multilabelMarginLoss";
  const [frames, classes] = framesOf(op, input);
  checkTensor(op, "target", target);
  const reduction = lossReduction(op, options);
  // PyTorch takes any target of C entries and at most one dim for an input of at most one.
  const fits = input.ndim < 2
    ? target.ndim < 2 && target.numel() === classes
    : sameShape(target.shape, input.shape);
  if (target.dtype !== "int32" || !fits) {
    throw new RangeError(
      `${op}: target must be int32 labels of the input's shape ${
        formatShape(input.shape)
      }, got ${target.dtype} of shape ${formatShape(target.shape)}`,
    );
  }
  sameDevice(op, { input, target });
  // The masks and gathers go with the graph at backward, not with the GC.
  return forwardScope(() => {
    const x = input.reshape([frames, classes]);
    const { labels, listed, other } = noGrad(() => {
      const y = target.reshape([frames, classes]);
      if (y.numel() > 0) {
        checkLater(
          stack([y.min(), y.max()]),
          ([lowest, highest]) =>
            lowest < -1 || highest >= classes
              ? `${op}: target entry ${
                lowest < -1 ? lowest : highest
              } is out of range: labels are in [0, ${classes}) and -1 ends a list`
              : null,
        );
      }
      // The labels before the first -1.
      const listed = y.ge(0).to("int32").cumprod(1);
      const labels = where(listed, y, 0).to("int32");
      const classIds = arangeOn(classes, x.device).reshape([1, 1, classes]);
      const hit = labels.reshape([frames, classes, 1]).eq(classIds).mul(
        listed.reshape([frames, classes, 1]),
      );
      return { labels, listed, other: hit.sum(1).eq(0) };
    });
    // z[n, j, i] = 1 - x[label j] + x[i]
    const z = x.reshape([frames, 1, classes]).sub(
      gatherInRange(x, 1, labels).reshape([frames, classes, 1]),
    ).add(1);
    const counted = noGrad(() =>
      z.gt(0).mul(listed.reshape([frames, classes, 1])).mul(other.reshape([frames, 1, classes]))
    );
    const losses = where(counted, z, 0).sum([1, 2]).div(classes);
    return reduceLoss(input.ndim < 2 ? losses.reshape([]) : losses, reduction);
  });
}

// ---------------------------------------------------------------- embedding margins

/** Options of {@link hingeEmbeddingLoss}. */
export interface HingeEmbeddingLossOptions extends ReductionOptions {
  /** Distance below which dissimilar pairs (y = -1) cost (default 1). */
  margin?: number;
}

/**
 * `x` where y = 1, `max(0, margin - x)` where y = -1, as
 * `torch.nn.functional.hinge_embedding_loss` (any other y gets both terms,
 * as in PyTorch). Input and target broadcast together; the gradient passes
 * where the hinge is exactly 0 (`clamp_min`).
 */
export function hingeEmbeddingLoss(
  input: Tensor,
  target: Tensor,
  options: HingeEmbeddingLossOptions = {},
): Tensor {
  const op = "hingeEmbeddingLoss";
  checkFloatInput(op, input, "input");
  checkTensor(op, "target", target);
  const reduction = lossReduction(op, options);
  const margin = checkFinite(op, "margin", options.margin ?? 1);
  sameDevice(op, { input, target });
  broadcastShapes(input.shape, target.shape, `${op} (input and target)`);
  return forwardScope(() => {
    const [notPositive, notNegative] = noGrad(() => [target.ne(1), target.ne(-1)]);
    const losses = where(notPositive, input.neg().add(margin).clamp(0), 0)
      .add(where(notNegative, input, 0));
    return reduceLoss(losses, reduction);
  });
}

/** A distance between two batches of embeddings, one value per row. */
export type DistanceFunction = (a: Tensor, b: Tensor) => Tensor;

/** Options of {@link tripletMarginWithDistanceLoss}. */
export interface TripletMarginWithDistanceLossOptions extends ReductionOptions {
  /**
   * The distance (default `‖a - b + 1e-6‖₂` over the last dim, as
   * `pairwise_distance`).
   */
  distanceFunction?: DistanceFunction | null;
  /** Required gap between the positive and negative distances (default 1). */
  margin?: number;
  /** Use the positive-negative distance when it is smaller (default false). */
  swap?: boolean;
}

/** `‖a - b + 1e-6‖₂` over the last dim, as `torch.pairwise_distance`'s defaults. */
function pairwiseDistance(a: Tensor, b: Tensor): Tensor {
  return a.sub(b).add(1e-6).norm(2, -1);
}

/**
 * `max(0, margin + d(a, p) - d(a, n))` with any distance `d`, as
 * `torch.nn.functional.triplet_margin_with_distance_loss`; with `swap`,
 * `d(a, n)` is `min(d(a, n), d(p, n))` (ties split the gradient, as
 * `torch.min`). The inputs are whatever the distance takes (the default
 * broadcasts them and reduces the last dim).
 */
export function tripletMarginWithDistanceLoss(
  anchor: Tensor,
  positive: Tensor,
  negative: Tensor,
  options: TripletMarginWithDistanceLossOptions = {},
): Tensor {
  const op = "tripletMarginWithDistanceLoss";
  const tensors = { anchor, positive, negative };
  for (const [name, t] of Object.entries(tensors)) checkFloatInput(op, t, name);
  sameDevice(op, tensors);
  const reduction = lossReduction(op, options);
  const margin = checkFinite(op, "margin", options.margin ?? 1);
  const given = options.distanceFunction ?? null;
  if (given !== null && typeof given !== "function") {
    throw new TypeError(
      `${op}: distanceFunction must be a function (a, b) => Tensor, got ${typeof given}`,
    );
  }
  const distance = (a: Tensor, b: Tensor, pair: string): Tensor => {
    const d = (given ?? pairwiseDistance)(a, b);
    if (!(d instanceof Tensor)) {
      throw new TypeError(`${op}: distanceFunction(${pair}) returned ${typeof d}, not a Tensor`);
    }
    return d;
  };
  const run = () => {
    const dPos = distance(anchor, positive, "anchor, positive");
    const dNeg = distance(anchor, negative, "anchor, negative");
    const dSwap = options.swap ? distance(positive, negative, "positive, negative") : null;
    // The distances stay out of this scope: a user's function may keep what it makes.
    return forwardScope(() => {
      const far = dSwap ? dNeg.minimum(dSwap) : dNeg;
      return reduceLoss(dPos.sub(far).add(margin).clamp(0), reduction);
    });
  };
  // The default distance keeps nothing: its work goes with the graph too.
  return given === null ? forwardScope(run) : run();
}
