/**
 * `embeddingBag`, as `torch.nn.functional.embedding_bag`: sums, means or
 * maxima of bags of embedding rows, composed from the lookup of
 * {@link embedding} and tensor ops: the bag of each index is worked out on
 * the device from the offsets (nothing is read back), and every backend
 * runs it forward and backward.
 * @module
 */

import { noGrad, record } from "../../autograd.ts";
import { firstOrderOnly } from "../../autograd/recompute.ts";
import { checkLater } from "../../ops/check.ts";
import { arangeOn, full } from "../../ops/factory.ts";
import { scatterAddRaw, where } from "../../ops/indexing.ts";
import { cat, stack } from "../../ops/view.ts";
import { formatShape, sameShape } from "../../shape.ts";
import { forwardScope, tidy } from "../../storage.ts";
import type { Tensor } from "../../tensor.ts";
import {
  checkFloatInput,
  checkLookup,
  checkMaxNorm,
  checkTensor,
  resolvePaddingIdx,
  sameDevice,
} from "../util.ts";
import { embedding } from "./sparse.ts";

/** How a bag's rows are reduced. */
export type EmbeddingBagMode = "sum" | "mean" | "max";

const MODES: readonly EmbeddingBagMode[] = ["sum", "mean", "max"];

/** Options of {@link embeddingBag}. */
export interface EmbeddingBagOptions {
  /** `"sum"`, `"mean"` (default, as PyTorch) or `"max"`. */
  mode?: EmbeddingBagMode;
  /**
   * Rows looked up whose `normType`-norm exceeds this are first rescaled in
   * place (no gradient) to norm `maxNorm`, as PyTorch's `max_norm`.
   */
  maxNorm?: number | null;
  /** The p of the norm `maxNorm` bounds (default 2; `Infinity` for the largest |w|). */
  normType?: number;
  /**
   * A weight per index, the input's shape, multiplying its row before the
   * sum (mode `"sum"` only); it gets a gradient too.
   */
  perSampleWeights?: Tensor | null;
  /**
   * `offsets` has one more entry, the end of the last bag (PyTorch's CSR
   * layout): `B + 1` offsets make `B` bags (default false).
   */
  includeLastOffset?: boolean;
  /**
   * Indices equal to this are left out of their bag (not summed, not counted
   * in a mean, never a maximum) and the row gets no gradient; negative counts
   * from the end.
   */
  paddingIdx?: number | null;
}

/**
 * Reduces bags of rows of `weight` [num, dim], as
 * `torch.nn.functional.embedding_bag`. `input` holds int32 indices: either
 * [B, L] (B bags of L indices; `offsets` must be null) or [N] with `offsets`
 * [B] (int32; bag b is `input[offsets[b] : offsets[b + 1]]`, the last one
 * running to the end, or to the extra last offset with
 * `includeLastOffset`; indices after it belong to no bag). Gives [B, dim];
 * an empty bag (or one of padding only) gives zeros. In mode `"max"` the
 * gradient of each maximum goes to the row it came from (different rows
 * tying for a maximum share it). `offsets` must start at 0, never decrease
 * and end at most at N, as PyTorch requires: that is checked on the device,
 * and the next read on it rejects when they do not.
 */
export function embeddingBag(
  input: Tensor,
  weight: Tensor,
  offsets: Tensor | null = null,
  options: EmbeddingBagOptions = {},
): Tensor {
  const op = "embeddingBag";
  checkTensor(op, "input", input);
  checkFloatInput(op, weight, "weight");
  const mode = options.mode ?? "mean";
  if (!MODES.includes(mode)) {
    throw new RangeError(`${op}: mode must be "sum", "mean" or "max", got ${JSON.stringify(mode)}`);
  }
  checkLookup(op, input, weight);
  const [rows, dim] = weight.shape;
  const paddingIdx = resolvePaddingIdx(op, options.paddingIdx, rows);
  const { maxNorm, normType } = checkMaxNorm(op, options.maxNorm, options.normType ?? 2);
  const includeLastOffset = options.includeLastOffset ?? false;
  const psw = options.perSampleWeights ?? null;
  if (psw !== null) {
    checkFloatInput(op, psw, "perSampleWeights");
    if (mode !== "sum") {
      throw new RangeError(
        `${op}: perSampleWeights is only supported for mode "sum" (got mode "${mode}")`,
      );
    }
    if (!sameShape(psw.shape, input.shape)) {
      throw new RangeError(
        `${op}: perSampleWeights of shape ${
          formatShape(psw.shape)
        } must have the shape of the input ${formatShape(input.shape)}`,
      );
    }
    if (psw.dtype !== weight.dtype) {
      throw new TypeError(
        `${op}: perSampleWeights is ${psw.dtype}, weight ${weight.dtype}; they must match`,
      );
    }
  }
  let bags: number;
  if (input.ndim === 2) {
    if (offsets !== null && offsets !== undefined) {
      throw new RangeError(
        `${op}: a 2-D input (shape ${
          formatShape(input.shape)
        }) is a batch of fixed-length bags: offsets must be null, got shape ${
          formatShape(offsets.shape)
        }`,
      );
    }
    bags = input.shape[0];
    if (input.shape[1] === 0 && bags > 0) {
      throw new RangeError(
        `${op}: a 2-D input of shape ${formatShape(input.shape)} has bags of no index`,
      );
    }
  } else if (input.ndim === 1) {
    if (offsets === null || offsets === undefined) {
      throw new RangeError(
        `${op}: a 1-D input (shape ${formatShape(input.shape)}) needs 1-D int32 offsets`,
      );
    }
    checkTensor(op, "offsets", offsets);
    if (offsets.ndim !== 1 || offsets.dtype !== "int32") {
      throw new RangeError(
        `${op}: offsets must be a 1-D int32 tensor, got ${offsets.dtype} of shape ${
          formatShape(offsets.shape)
        }`,
      );
    }
    bags = offsets.shape[0] - (includeLastOffset ? 1 : 0);
    if (bags < 0) {
      throw new RangeError(
        `${op}: with includeLastOffset, offsets needs at least 1 entry, got shape ${
          formatShape(offsets.shape)
        }`,
      );
    }
  } else {
    throw new RangeError(
      `${op}: input must be 1-D (with offsets) or 2-D, got shape ${formatShape(input.shape)}`,
    );
  }
  sameDevice(op, { input, weight, offsets, perSampleWeights: psw });
  const n = input.numel();
  if (input.ndim === 1 && offsets!.numel() > 0) checkOffsets(offsets!, n);

  return forwardScope(() => {
    const flat = input.reshape([n]);
    const rowsOf = lookup(flat, weight, paddingIdx, maxNorm, normType);
    if (bags === 0 || n === 0) {
      // Zeros that still reach weight (with zero gradient), as PyTorch's output does.
      return rowsOf.sum(0).unsqueeze(0).mul(0).expand([bags, dim]).add(0);
    }
    // The bag of each position; `bags` (no bag) for padding and a tail after the closing offset.
    const segment = noGrad(() =>
      input.ndim === 2 ? bagsOfRows(input) : bagsOfOffsets(offsets!, n, bags, includeLastOffset)
    );
    const padding = paddingIdx === null ? null : noGrad(() => flat.eq(paddingIdx));
    const bagOf = padding === null ? segment : noGrad(() => where(padding, bags, segment));
    // How many indices count in each bag (padding does not), [bags, 1].
    const count = () =>
      noGrad(() =>
        segmentSum(full([n, 1], 1, { dtype: weight.dtype, device: weight.device }), bagOf, bags)
      );
    if (mode === "max") {
      const values = padding === null ? rowsOf : where(padding.reshape([n, 1]), -Infinity, rowsOf);
      const best = input.ndim === 2
        ? values.reshape([bags, input.shape[1], dim]).max(1)
        : segmentMax(values, segment, offsets!, bags, includeLastOffset);
      return where(noGrad(() => count().gt(0)), best, 0);
    }
    const src = psw === null ? rowsOf : rowsOf.mul(psw.reshape([n, 1]));
    const summed = segmentSum(src, bagOf, bags);
    if (mode === "sum") return summed;
    return summed.div(noGrad(() => count().clamp(1)));
  });
}

/**
 * `weight`'s rows at `flat` [n], [n, dim], with `embedding`'s renorm and index check, and a
 * gradient scatter-added into the rows read, the padding row's lookups skipped by the scatter
 * itself: `embedding`'s own padding rule scales g by a 0/1 factor, a second pass over g that
 * would also carry 0 · inf = NaN into the padding row.
 */
function lookup(
  flat: Tensor,
  weight: Tensor,
  paddingIdx: number | null,
  maxNorm: number | null,
  normType: number,
): Tensor {
  const picked = noGrad(() => embedding(flat, weight, { maxNorm, normType }));
  const num = weight.shape[0];
  // The gradient is linear in g alone: its node needs no saved input.
  return record(
    "embeddingBag",
    [weight],
    picked,
    firstOrderOnly("embeddingBag", [], ([g]) => {
      const [n, d] = g!.shape;
      const rows = flat.reshape([n, 1]);
      // Out-of-range indices (reported by the lookup's check) are skipped by the scatter.
      const index = (paddingIdx === null ? rows : where(rows.eq(paddingIdx), -1, rows))
        .expand([n, d]);
      return [scatterAddRaw(g!, index, 0, num)];
    }),
  );
}

/**
 * Rows of `src` [n, d] summed by bag, [bags, d]: row i goes to bag `bagOf[i]`, or nowhere when
 * that is `bags`. A scatter-add rather than a product with a 0/1 bag matrix: that product would
 * carry an inf or NaN row into every bag (0 · inf is NaN), and take n · bags memory.
 */
function segmentSum(src: Tensor, bagOf: Tensor, bags: number): Tensor {
  const [n, d] = src.shape;
  const index = noGrad(() => bagOf.reshape([n, 1]).expand([n, d]).add(0));
  const out = noGrad(() => scatterAddRaw(src, index, 0, bags + 1));
  const sums = record("embeddingBag", [src], out, ([g]) => [g!.indexSelect(0, bagOf)]);
  return sums.narrow(0, 0, bags);
}

/** The bag of each index of a 2-D input [bags, per]: row r is bag r. */
function bagsOfRows(input: Tensor): Tensor {
  const [bags, per] = input.shape;
  return arangeOn(bags, input.device).reshape([bags, 1]).expand([bags, per]).reshape([
    bags * per,
  ]);
}

/**
 * The bag of each of the `n` positions of a 1-D input: the number of bag starts at or before
 * it, less one (a 1 scattered at each start, summed cumulatively: O(n + bags), where comparing
 * every position with every offset would take n · bags); `bags` (none) at or after the closing
 * offset with `includeLastOffset`. Offsets are clamped into [0, n] first, so invalid ones (which
 * `checkOffsets` reports) never index out of bounds.
 */
function bagsOfOffsets(
  offsets: Tensor,
  n: number,
  bags: number,
  includeLastOffset: boolean,
): Tensor {
  const device = offsets.device;
  const starts = offsets.narrow(0, 0, bags).clamp(0, n);
  const marks = scatterAddRaw(full([bags], 1, { dtype: "int32", device }), starts, 0, n + 1);
  const bag = marks.cumsum(0).narrow(0, 0, n).sub(1);
  if (!includeLastOffset) return bag;
  return where(arangeOn(n, device).ge(offsets.select(0, bags)), bags, bag);
}

/**
 * The largest value per bag and column of `values` [n, d] (-inf for padding), [bags, d], for a
 * 1-D input: a segmented scan in ⌈log₂ n⌉ steps, each taking at every position the maximum of
 * its window and the window `s` before it when both lie in one bag, so position i ends holding
 * the maximum of its bag up to i, and a bag's maximum is read at its last position. Built from
 * `maximum` and `where`, so the gradient reaches the row the maximum came from (ties between
 * different positions share it, as `maximum`'s; a row repeated in a bag gets it once in all).
 * An empty bag reads a neighbour's value, which the caller replaces by 0.
 */
function segmentMax(
  values: Tensor,
  segment: Tensor,
  offsets: Tensor,
  bags: number,
  includeLastOffset: boolean,
): Tensor {
  const [n, d] = values.shape;
  const device = values.device;
  let best = values;
  for (let s = 1; s < n; s *= 2) {
    const before = cat([
      full([s, d], -Infinity, { dtype: values.dtype, device }),
      best.narrow(0, 0, n - s),
    ]);
    const together = noGrad(() =>
      segment.narrow(0, s, n - s).eq(segment.narrow(0, 0, n - s)).reshape([n - s, 1])
    );
    const joined = noGrad(() =>
      cat([full([s, 1], 0, { dtype: "int32", device }), together.to("int32")])
    );
    best = where(joined, best.maximum(before), best);
  }
  const last = noGrad(() => {
    const ends = includeLastOffset
      ? offsets.narrow(0, 1, bags)
      : cat([offsets.narrow(0, 1, bags - 1), full([1], n, { dtype: "int32", device })]);
    return ends.sub(1).clamp(0, n - 1);
  });
  return best.indexSelect(0, last);
}

/**
 * PyTorch's rules for `offsets` of an input of `n` indices, checked on the
 * device without waiting: the first is 0, none is below the one before, the
 * last is at most `n`.
 */
function checkOffsets(offsets: Tensor, n: number): void {
  const count = offsets.numel();
  const facts = noGrad(() =>
    tidy(() => {
      const steps = count > 1
        ? offsets.narrow(0, 1, count - 1).sub(offsets.narrow(0, 0, count - 1)).min()
        : full([], 0, { dtype: "int32", device: offsets.device });
      return stack([offsets.select(0, 0), steps, offsets.select(0, count - 1)]);
    })
  );
  checkLater(facts, ([first, smallestStep, last]) => {
    if (first !== 0) {
      return `embeddingBag: offsets[0] has to be 0 (the first bag starts at position 0), got ${first}`;
    }
    if (smallestStep < 0) {
      return `embeddingBag: offsets must not decrease, but one step goes down by ${-smallestStep}`;
    }
    if (last > n) {
      return `embeddingBag: offsets[-1] can not be greater than the input's length ${n}, got ${last}`;
    }
    return null;
  });
}
