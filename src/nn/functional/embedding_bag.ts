/**
 * `embeddingBag`, as `torch.nn.functional.embedding_bag`: sums, means or
 * maxima of bags of embedding rows, composed from the lookup of
 * {@link embedding} and tensor ops: the bag of each index is worked out on
 * the device from the offsets (nothing is read back), and every backend
 * runs it forward and backward. The optional `segmentReduce` kernel, where
 * the backend has one (cpu, webgpu), reduces the bags in one pass instead.
 * @module
 */

import { noGrad, record } from "../../autograd.ts";
import { checkLater } from "../../ops/check.ts";
import { arangeOn, full } from "../../ops/factory.ts";
import { gatherInRange, scatterAddRaw, scatterToIndex, where } from "../../ops/indexing.ts";
import { empty, hasKernel, launch } from "../../ops/util.ts";
import { cat, checkIndexRange, stack } from "../../ops/view.ts";
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
 * gradient of each maximum goes to the row it came from, the first of its
 * bag on ties, and a NaN only where it is its bag's first value in that column (a later one
 * never wins), as PyTorch's. `offsets` must start at 0, never decrease
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
    const fused = hasKernel(weight.device, "segmentReduce");
    if ((mode === "max" || fused) && bags > 0 && n > 0) {
      const bounds = noGrad(() => bagBounds(input, offsets, n, bags, includeLastOffset));
      if (mode === "max") return bagMax(flat, weight, bounds, paddingIdx, maxNorm, normType);
      checkRows(flat, weight, maxNorm, normType);
      const index = noGrad(() => paddingIdx === null ? flat : where(flat.eq(paddingIdx), -1, flat));
      // Made now, while the input is sure to be alive, if a weight's gradient will need it.
      const positions = psw?.requiresGrad
        ? noGrad(() =>
          input.ndim === 2 ? bagsOfRows(input) : bagsOfOffsets(offsets!, n, bags, includeLastOffset)
        )
        : null;
      const bag = { index, bounds, mode, rows, positions };
      return reduceBags(weight, psw === null ? null : psw.reshape([n]), bag, false);
    }
    const rowsOf = lookup(flat, weight, paddingIdx, maxNorm, normType);
    if (bags === 0 || n === 0) {
      // Zeros that still reach weight and perSampleWeights (with zero gradients), as PyTorch's.
      const zeros = rowsOf.sum(0).unsqueeze(0).mul(0).expand([bags, dim]);
      return zeros.add(psw === null ? 0 : psw.reshape([n]).narrow(0, 0, 0).sum());
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
    // Rows in no bag (padding, a tail) are zeroed before the product: their weights' gradient,
    // the row times a zero, would be NaN for an inf or NaN row (PyTorch's is 0).
    const src = psw === null
      ? rowsOf
      : where(noGrad(() => bagOf.eq(bags).reshape([n, 1])), 0, rowsOf).mul(psw.reshape([n, 1]));
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
  // The gradient is linear in g alone: its node needs no saved input, and under createGraph
  // its own gradient is gg's rows picked back (gather, the scatter's adjoint, recorded too).
  return record("embeddingBag", [weight], picked, ([g]) => {
    const [n, d] = g!.shape;
    const rows = flat.reshape([n, 1]);
    // Out-of-range indices (reported by the lookup's check) are skipped by the scatter.
    const index = (paddingIdx === null ? rows : where(rows.eq(paddingIdx), -1, rows))
      .expand([n, d]);
    const scattered = noGrad(() => scatterAddRaw(g!, index, 0, num));
    return [
      record("embeddingBagBackward", [g!], scattered, ([gg]) => {
        const skipped = noGrad(() => index.lt(0).add(index.ge(num)).gt(0));
        return [where(skipped, 0, gatherInRange(gg!, 0, noGrad(() => index.clamp(0, num - 1))))];
      }),
    ];
  });
}

/**
 * Rows of `src` [n, d] summed by bag, [bags, d]: row i goes to bag `bagOf[i]`, or nowhere when
 * that is `bags`. A scatter-add rather than a product with a 0/1 bag matrix: that product would
 * carry an inf or NaN row into every bag (0 · inf is NaN), and take n · bags memory.
 */
function segmentSum(src: Tensor, bagOf: Tensor, bags: number): Tensor {
  const [n, d] = src.shape;
  // expand copies: the index is contiguous as the scatter reads it.
  const index = noGrad(() => bagOf.reshape([n, 1]).expand([n, d]));
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

/** Where each bag starts and ends, int32 [bags + 1]: a 2-D input's rows are bags of one length. */
function bagBounds(
  input: Tensor,
  offsets: Tensor | null,
  n: number,
  bags: number,
  includeLastOffset: boolean,
): Tensor {
  const device = input.device;
  if (input.ndim === 2) return arangeOn(bags + 1, device).mul(input.shape[1]);
  if (includeLastOffset) return offsets!;
  return cat([offsets!, full([1], n, { dtype: "int32", device })]);
}

/**
 * Mode `"max"`: the row of each bag's first maximum per column (padding left out), then those
 * values gathered from `weight`, so the gradient of a maximum goes to the one row it came from
 * (as PyTorch's, ties to the first) by gather's differentiable adjoint, never through [n, dim]
 * rows; an empty bag (or one of padding only) gives 0.
 */
function bagMax(
  flat: Tensor,
  weight: Tensor,
  bounds: Tensor,
  paddingIdx: number | null,
  maxNorm: number | null,
  normType: number,
): Tensor {
  const rows = weight.shape[0];
  checkRows(flat, weight, maxNorm, normType);
  const [values, winners] = noGrad(() => {
    const index = paddingIdx === null ? flat : where(flat.eq(paddingIdx), -1, flat);
    if (hasKernel(weight.device, "segmentReduce")) return kernelArgmax(weight, index, bounds);
    // A winner of -1 (an empty bag) gathers 0 and its gradient is skipped, as the kernel's.
    const found = composedArgmax(weight, index, bounds);
    return [gatherInRange(weight, 0, found), found];
  });
  return record(
    "embeddingBag",
    [weight],
    values,
    ([g]) => [scatterToIndex(g!, 0, winners, rows, "embeddingBag")],
  );
}

/** The renorm in place of the rows `flat` looks up (`maxNorm`), or else their index check. */
function checkRows(flat: Tensor, weight: Tensor, maxNorm: number | null, normType: number): void {
  const rows = weight.shape[0];
  if (maxNorm !== null) {
    noGrad(() => embedding(flat, weight, { maxNorm, normType })).dispose();
    return;
  }
  checkIndexRange(
    flat,
    rows,
    (bad) =>
      `embeddingBag: index ${bad} is out of range for weight with ${rows} rows (0 to ${rows - 1})`,
  );
}

/** What {@link reduceBags} reduces: positions, their rows (-1: skipped) and their bags. */
interface Bags {
  /** int32 [n]: each position's row of the table, -1 for padding. */
  readonly index: Tensor;
  /** int32 [bags + 1]: bag b is positions bounds[b] to bounds[b + 1]. */
  readonly bounds: Tensor;
  readonly mode: "sum" | "mean";
  /** Rows of the table. */
  readonly rows: number;
  /** The bag of each position, int32 [n] (`bags`: none), where a weight's gradient needs it. */
  readonly positions: Tensor | null;
}

/**
 * Modes `"sum"` and `"mean"` by the backend's `segmentReduce`: the bags of the table `x` [rows,
 * dim] (each row times its position's weight), or with `transpose` the adjoint, bag rows `x`
 * [bags, dim] added into a table at their positions' rows. Each is the other's gradient, so
 * gradients of every order stay one pass over the rows, where the composition makes five; a
 * weight's gradient is the row-dot of its position's table row and bag row, composed.
 */
function reduceBags(x: Tensor, weights: Tensor | null, bag: Bags, transpose: boolean): Tensor {
  const { index, bounds, mode, rows } = bag;
  const size = bounds.shape[0] - 1;
  const out = empty([transpose ? rows : size, x.shape[1]], x.dtype, x.device);
  launch(x.device, "segmentReduce", {
    x: x.storage.buffer("embeddingBag"),
    index: index.storage.buffer("embeddingBag"),
    bounds: bounds.storage.buffer("embeddingBag"),
    weights: weights === null ? null : weights.storage.buffer("embeddingBag"),
    out: out.storage.buffer(),
    indices: null,
    mode,
    transpose,
    rows,
    count: index.shape[0],
    size,
    inner: x.shape[1],
    dtype: x.dtype,
  });
  return record("embeddingBag", [x, weights], out, ([g]) => [
    reduceBags(g!, weights, bag, !transpose),
    weights?.requiresGrad ? positionDots(transpose ? g! : x, transpose ? x : g!, bag) : null,
  ]);
}

/** Each position's row of `table` dotted with its bag's row of `bagRows`, 0 where it has none. */
function positionDots(table: Tensor, bagRows: Tensor, bag: Bags): Tensor {
  const { index, rows } = bag;
  const size = bagRows.shape[0];
  const [valid, at, of] = noGrad(() => {
    const of = bag.positions!;
    const valid = index.ge(0).mul(index.lt(rows)).mul(of.lt(size));
    return [valid, index.clamp(0, rows - 1), of.clamp(0, size - 1)];
  });
  return where(valid, table.indexSelect(0, at).mul(bagRows.indexSelect(0, of)).sum(1), 0);
}

/** {@link SegmentReduceArgs}' maxima and their rows by the backend's kernel, each [segments, columns]. */
function kernelArgmax(x: Tensor, index: Tensor, bounds: Tensor): [Tensor, Tensor] {
  const [rows, inner] = x.shape;
  const size = bounds.shape[0] - 1;
  const values = empty([size, inner], x.dtype, x.device);
  const indices = empty([size, inner], "int32", x.device);
  launch(x.device, "segmentReduce", {
    x: x.storage.buffer("embeddingBag"),
    index: index.storage.buffer("embeddingBag"),
    bounds: bounds.storage.buffer("embeddingBag"),
    weights: null,
    out: values.storage.buffer(),
    indices: indices.storage.buffer(),
    mode: "max",
    transpose: false,
    rows,
    count: index.shape[0],
    size,
    inner,
    dtype: x.dtype,
  });
  return [values, indices];
}

/**
 * {@link SegmentReduceArgs}' max mode from tensor ops, for backends without the kernel: a segmented scan
 * in ⌈log₂ n⌉ steps, each keeping at every position the winner of its window or, when both lie
 * in one segment and the later is not strictly better, of the window `s` before, so position i
 * ends holding the first maximum of its segment up to i; a segment's is read at its last position.
 */
function composedArgmax(x: Tensor, index: Tensor, bounds: Tensor): Tensor {
  const [rows, d] = x.shape;
  const n = index.shape[0];
  const size = bounds.shape[0] - 1;
  const device = x.device;
  const clamped = bounds.clamp(0, n);
  const starts = clamped.narrow(0, 0, size);
  const ends = clamped.narrow(0, 1, size);
  // Equal for the positions of one segment (a tail after the last end only looks back).
  const segment = scatterAddRaw(full([size], 1, { dtype: "int32", device }), starts, 0, n + 1)
    .cumsum(0).narrow(0, 0, n);
  const valid = index.ge(0).mul(index.lt(rows)).reshape([n, 1]);
  // Keys compared in place of the values: PyTorch keeps a NaN only where it comes first (a
  // value replaces the held one only when greater), so a NaN is +inf at its segment's first
  // valid position and -inf elsewhere; ties keep the earlier, so the keys pick PyTorch's rows.
  const counted = valid.reshape([n]).to("int32");
  const upTo = counted.cumsum(0);
  const startOf = starts.indexSelect(0, segment.sub(1).clamp(0, size - 1)).clamp(0, n - 1);
  const first = valid.mul(
    upTo.sub(upTo.sub(counted).indexSelect(0, startOf)).eq(1).reshape([n, 1]),
  );
  const looked = x.indexSelect(0, index.clamp(0, rows - 1));
  const inf = full([], Infinity, { dtype: x.dtype, device });
  let values = where(looked.ne(looked), where(first, inf, -Infinity), looked);
  let at = where(valid, arangeOn(n, device).reshape([n, 1]), -1).expand([n, d]);
  for (let s = 1; s < n; s *= 2) {
    const [nextValues, nextAt] = tidy(() => {
      const before = cat([full([s, d], 0, { dtype: x.dtype, device }), values.narrow(0, 0, n - s)]);
      const beforeAt = cat([full([s, d], -1, { dtype: "int32", device }), at.narrow(0, 0, n - s)]);
      const together = cat([
        full([s, 1], 0, { dtype: "int32", device }),
        segment.narrow(0, s, n - s).eq(segment.narrow(0, 0, n - s)).to("int32").reshape([n - s, 1]),
      ]);
      const better = values.gt(before);
      const later = beforeAt.lt(0).add(at.ge(0).mul(better)).gt(0);
      const keepBefore = together.mul(later.eq(0));
      return [where(keepBefore, before, values), where(keepBefore, beforeAt, at)];
    });
    values.dispose();
    at.dispose();
    [values, at] = [nextValues, nextAt];
  }
  const found = at.indexSelect(0, ends.sub(1).clamp(0, n - 1));
  const row = index.indexSelect(0, found.clamp(0).reshape([size * d])).reshape([size, d]);
  return where(ends.gt(starts).reshape([size, 1]).mul(found.ge(0)), row, -1);
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
