/**
 * Order statistics and NaN-aware reductions: `median`, `nanmedian`,
 * `quantile`, `nanquantile`, `mode`, `varMean`, `stdMean`, `nansum`,
 * `nanmean`, `countNonzero`, `histc`, `bincount`, composed from the sort
 * network, gathers and scatter-adds, so every backend runs them.
 * @module
 */

import { isGradEnabled, noGrad, record } from "../autograd.ts";
import { isFloat } from "../dtype.ts";
import { formatShape, normalizeDim } from "../shape.ts";
import { tidy } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import { full, tensor } from "../ops/factory.ts";
import { gatherInRange } from "../ops/indexing.ts";
import { checkLater } from "../ops/check.ts";
import { cat, clone, narrow, scatterAddRaw, stack } from "../ops/view.ts";
import { commonDevice, requireFloat } from "../ops/util.ts";
import { argsort, sort, type ValuesIndices } from "./sort.ts";
import { lerp } from "./elementwise.ts";
import { scan } from "./scan.ts";
import { dimList, keptShape, requireTensor, valuesIndices } from "./util.ts";
import { owned } from "./owned.ts";

/** `shape` without dim `d` (a reduction without keepdim). */
const dropped = (shape: readonly number[], d: number) => shape.filter((_, i) => i !== d);

function requireNonEmptyDim(op: string, x: Tensor, d: number): void {
  if (x.shape[d] === 0) {
    throw new RangeError(
      `${op}: cannot reduce dim ${d} of size 0 (shape ${formatShape(x.shape)})`,
    );
  }
}

/**
 * The int32 index (keepdim shape) along `d` of the lower median, NaN-aware:
 * `median` picks a slice's first NaN when it has one (NaN propagates), and
 * `nanmedian` the lower median of the slice's other values (its first NaN
 * when all are NaN), as PyTorch.
 */
function medianIndex(x: Tensor, d: number, ignoreNan: boolean): Tensor {
  return noGrad(() =>
    tidy(() => {
      const n = x.shape[d];
      const order = argsort(x, d);
      const kept = keptShape(x.shape, [d]);
      let k: Tensor;
      if (!isFloat(x.dtype)) {
        k = full(kept, Math.floor((n - 1) / 2), { dtype: "int32", device: x.device });
      } else {
        // NaN sorts last, stably: the slice's first NaN sits at the count of the others.
        const m = x.eq(x).sum(d, true);
        k = ignoreNan
          ? m.sub(1).div(2).floor().maximum(0)
          : m.where(m.lt(n), Math.floor((n - 1) / 2));
        k = k.to("int32");
      }
      return gatherInRange(order, d, k);
    })
  );
}

function medianOp(
  op: "median" | "nanmedian",
  x: Tensor,
  dim: number | undefined,
  keepdim: boolean,
): Tensor | ValuesIndices {
  requireTensor(op, x, "input");
  const ignoreNan = op === "nanmedian";
  if (dim === undefined) {
    const flat = x.reshape([x.numel()]);
    if (x.numel() === 0) {
      if (!isFloat(x.dtype)) {
        throw new RangeError(
          `${op}: an empty int32 tensor has no median (NaN needs a float dtype)`,
        );
      }
      return record(op, [x], full([], NaN, { dtype: x.dtype, device: x.device }), () => [null]);
    }
    const index = medianIndex(flat, 0, ignoreNan);
    const out = noGrad(() => gatherInRange(flat, 0, index).reshape([]));
    // PyTorch's evenly_distribute_backward: the elements equal to the result share the gradient
    // (the NaNs, when the result is NaN).
    return record(op, [x], out, ([g]) => {
      const nanOut = out.ne(out);
      const mask = x.eq(out).maximum(x.ne(x).mul(nanOut));
      return [mask.mul(g!.div(mask.sum()))];
    });
  }
  const d = normalizeDim(dim, x.ndim, op);
  if (x.ndim === 0) {
    return valuesIndices(clone(x), full([], 0, { dtype: "int32", device: x.device }));
  }
  requireNonEmptyDim(op, x, d);
  const index = medianIndex(x, d, ignoreNan);
  const values = gatherInRange(x, d, index);
  if (keepdim) return valuesIndices(values, index);
  const shape = dropped(x.shape, d);
  return valuesIndices(values.reshape(shape), noGrad(() => index.reshape(shape)));
}

/**
 * The lower median, as `torch.median`: of all elements (a 0-d tensor; the
 * gradient is shared by the elements equal to it), or along `dim`, giving
 * `[values, indices]` (int32; the gradient goes to the index). For an even
 * count it is the lower of the two middle values; a slice holding NaN gives
 * NaN. Among equal values which index is returned is unspecified in
 * PyTorch; here it is the one the stable sort puts at the median's place.
 */
export function median(x: Tensor): Tensor;
/** {@link median} along `dim`: `[values, indices]`. */
export function median(x: Tensor, dim: number, keepdim?: boolean): ValuesIndices;
export function median(x: Tensor, dim?: number, keepdim = false): Tensor | ValuesIndices {
  return owned(() => medianOp("median", x, dim, keepdim), x);
}

/**
 * {@link median} ignoring NaN, as `torch.nanmedian`: the lower median of a
 * slice's other values (NaN when all are NaN).
 */
export function nanmedian(x: Tensor): Tensor;
/** {@link nanmedian} along `dim`: `[values, indices]`. */
export function nanmedian(x: Tensor, dim: number, keepdim?: boolean): ValuesIndices;
export function nanmedian(x: Tensor, dim?: number, keepdim = false): Tensor | ValuesIndices {
  return owned(() => medianOp("nanmedian", x, dim, keepdim), x);
}

/** How {@link quantile} picks between the two values around a quantile's place. */
export type QuantileInterpolation = "linear" | "lower" | "higher" | "midpoint" | "nearest";

/** Options of {@link quantile} and {@link nanquantile}. */
export interface QuantileOptions {
  /** The dim to reduce; every element (flattened) when omitted. */
  dim?: number;
  /** Keep the reduced dim with size 1 (default false). */
  keepdim?: boolean;
  /** Default "linear". */
  interpolation?: QuantileInterpolation;
}

const INTERPOLATIONS: readonly string[] = ["linear", "lower", "higher", "midpoint", "nearest"];

function quantileOp(
  op: "quantile" | "nanquantile",
  x: Tensor,
  q: number | Tensor,
  options: QuantileOptions,
): Tensor {
  requireTensor(op, x, "input");
  requireFloat(op, x);
  const { dim, keepdim = false, interpolation = "linear" } = options;
  if (!INTERPOLATIONS.includes(interpolation)) {
    throw new RangeError(
      `${op}: interpolation must be one of ${INTERPOLATIONS.join(", ")}, got ${
        JSON.stringify(interpolation)
      }`,
    );
  }
  if (x.numel() === 0) {
    throw new RangeError(`${op}: the input must be non-empty, got shape ${formatShape(x.shape)}`);
  }
  let qs: Tensor;
  const scalarQ = typeof q === "number";
  if (typeof q === "number") {
    if (!(q >= 0 && q <= 1)) throw new RangeError(`${op}: q must be in [0, 1], got ${q}`);
    qs = tensor([q], { dtype: x.dtype, device: x.device });
  } else if (q instanceof Tensor) {
    commonDevice(op, x, q);
    if (q.ndim > 1) {
      throw new RangeError(
        `${op}: q must be a number or a 0-d or 1-d tensor, got shape ${formatShape(q.shape)}`,
      );
    }
    if (q.dtype !== x.dtype) {
      throw new TypeError(`${op}: q is ${q.dtype}, expected ${x.dtype} as the input`);
    }
    if (q.numel() > 0) {
      checkLater(
        noGrad(() => q.ge(0).mul(q.le(1)).eq(0).sum().reshape([1])),
        ([bad]) => bad > 0 ? `${op}: q values must be in [0, 1]; ${bad} of them are not` : null,
      );
    }
    qs = q.reshape([q.numel()]);
  } else {
    throw new TypeError(`${op}: q must be a number or a Tensor, got ${typeof q}`);
  }
  const scalarOut = scalarQ || (q as Tensor).ndim === 0;
  const d = dim === undefined ? 0 : normalizeDim(dim, x.ndim, op);
  const src = dim === undefined || x.ndim === 0 ? x.reshape([x.numel()]) : x;
  const dd = dim === undefined ? 0 : d;
  // The reduced dim last, so that the quantiles can line up along it.
  const perm = src.shape.map((_, i) => i).filter((i) => i !== dd);
  const last = src.shape[dd];
  const sorted = sort(src.permute([...perm, dd]), -1).values;
  const rest = perm.map((i) => src.shape[i]);
  const picked = noGrad(() => {
    const nan = sorted.ne(sorted).sum(-1, true); // NaNs per slice
    const qRow = qs.reshape([...rest.map(() => 1), qs.numel()]);
    let ranks: Tensor;
    if (op === "quantile") {
      // A slice with NaN takes its last (NaN) value, as PyTorch.
      ranks = qRow.mul(last - 1).where(nan.eq(0), last - 1);
    } else {
      ranks = qRow.mul(nan.neg().add(last - 1)).maximum(0);
    }
    ranks = ranks.expand([...rest, qs.numel()]);
    if (interpolation === "lower") ranks = ranks.floor();
    else if (interpolation === "higher") ranks = ranks.ceil();
    else if (interpolation === "nearest") ranks = ranks.round();
    const below = ranks.floor();
    return { ranks, below: below.to("int32"), above: ranks.ceil().to("int32"), below32: below };
  });
  let out = gatherInRange(sorted, -1, picked.below);
  if (interpolation === "linear" || interpolation === "midpoint") {
    const weight = interpolation === "midpoint"
      ? 0.5
      : noGrad(() => picked.ranks.sub(picked.below32));
    out = lerp(out, gatherInRange(sorted, -1, picked.above), weight);
  }
  // [...rest, Q] -> [Q, ...rest], with the reduced dim back as 1 under keepdim.
  const Q = qs.numel();
  out = out.permute([rest.length, ...rest.map((_, i) => i)]);
  const keptRest = dim === undefined ? x.shape.map(() => 1) : keptShape(x.shape, [d]);
  const shape = keepdim ? keptRest : rest;
  return out.reshape(scalarOut ? shape : [Q, ...shape]);
}

/**
 * The `q`-th quantiles along `dim` (of all elements when omitted), as
 * `torch.quantile`: `q` a number or a 0-d/1-d tensor of the input's dtype
 * in [0, 1] (a 1-d `q` adds a leading dim of its length). A slice holding
 * NaN gives NaN. The gradient flows through the sort to the values used.
 * q values outside [0, 1] in a tensor are reported by the next read
 * (PyTorch checks at once; a number q is checked at once here too).
 */
export function quantile(x: Tensor, q: number | Tensor, options: QuantileOptions = {}): Tensor {
  return owned(() => quantileOp("quantile", x, q, options), x, q);
}

/** {@link quantile} ignoring NaN, as `torch.nanquantile` (NaN where a slice is all NaN). */
export function nanquantile(x: Tensor, q: number | Tensor, options: QuantileOptions = {}): Tensor {
  return owned(() => quantileOp("nanquantile", x, q, options), x, q);
}

/**
 * The most frequent value along `dim` and an index of it, as `torch.mode`:
 * the smallest among equally frequent values, and its last index (PyTorch's
 * cpu kernel gives the last index of short rows; its unstable sort may give
 * another of a long row's). Sorted runs are counted with a scatter-add, so it costs
 * a sort. NaN values never equal each other here (PyTorch leaves NaN's mode
 * unspecified). The gradient goes to the index.
 */
export function mode(x: Tensor, dim = -1, keepdim = false): ValuesIndices {
  requireTensor("mode", x, "input");
  const d = normalizeDim(dim, x.ndim, "mode");
  if (x.ndim === 0) {
    return valuesIndices(clone(x), full([], 0, { dtype: "int32", device: x.device }));
  }
  requireNonEmptyDim("mode", x, d);
  const n = x.shape[d];
  const perm = x.shape.map((_, i) => i).filter((i) => i !== d);
  const rest = perm.map((i) => x.shape[i]);
  const rows = rest.reduce((a, b) => a * b, 1);
  const index = noGrad(() =>
    tidy(() => {
      const flat = x.permute([...perm, d]).reshape([rows, n]);
      const [values, order] = sort(flat, 1);
      const ones = full([rows, 1], 1, { dtype: "float32", device: x.device });
      // 1 where a run of equal values starts; its running sum numbers the runs.
      const starts = n === 1 ? ones : cat([
        ones,
        narrow(values, 1, 1, n - 1).ne(narrow(values, 1, 0, n - 1)).to("float32"),
      ], 1);
      const runId = scan(starts, 1, "add").sub(1).to("int32");
      const counts = scatterAddRaw(
        full([rows, n, 1], 1, { dtype: "float32", device: x.device }),
        runId.reshape([rows, n, 1]),
        1,
        n,
      ).reshape([rows, n]);
      // The first of the longest runs holds the smallest value; its end, the last index.
      const best = counts.argmax(1, true);
      const ends = scan(counts, 1, "add").sub(1).to("int32");
      const end = gatherInRange(ends, 1, best);
      return gatherInRange(order, 1, end).reshape([...rest, 1]);
    })
  );
  const back = [...perm, d].map((_, i) => [...perm, d].indexOf(i));
  const kept = index.permute(back);
  const values = gatherInRange(x, d, kept);
  if (keepdim) return valuesIndices(values, kept);
  const shape = dropped(x.shape, d);
  return valuesIndices(values.reshape(shape), noGrad(() => kept.reshape(shape)));
}

/** Options of {@link varMean} and {@link stdMean}. */
export interface VarMeanOptions {
  /** Subtracted from the count in the divisor (default 1: Bessel's correction). */
  correction?: number;
  /** `false` is `correction: 0`, `true` is 1 (PyTorch's older spelling). */
  unbiased?: boolean;
  /** Keep the reduced dims with size 1 (default false). */
  keepdim?: boolean;
}

function varianceAndMean(
  op: "varMean" | "stdMean",
  x: Tensor,
  dim: number | readonly number[] | undefined,
  options: VarMeanOptions,
): readonly [Tensor, Tensor] {
  requireTensor(op, x, "input");
  requireFloat(op, x);
  const { unbiased, keepdim = false } = options;
  if (options.correction !== undefined && unbiased !== undefined) {
    throw new TypeError(`${op}: give correction or unbiased, not both`);
  }
  const correction = options.correction ?? (unbiased === false ? 0 : 1);
  if (typeof correction !== "number" || !Number.isFinite(correction)) {
    throw new TypeError(`${op}: correction must be a finite number, got ${correction}`);
  }
  const dims = dimList(x, dim, op);
  // A 0-d tensor's dim 0 (or -1) is its one element.
  const count = x.ndim === 0 ? 1 : dims.reduce((n, d) => n * x.shape[d], 1);
  const mean = x.ndim === 0 ? x : x.mean(dims, true);
  // PyTorch divides by max(0, N - correction): a 0 divisor gives inf (or NaN for 0/0).
  const divisor = Math.max(0, count - correction);
  const deviation = noGrad(() => x.sub(mean));
  const variance = record(
    op,
    [x],
    noGrad(() => {
      const squares = deviation.mul(deviation);
      return (x.ndim === 0 ? squares : squares.sum(dims, keepdim)).div(divisor);
    }),
    // PyTorch's var_backward, 2·g·(x - mean) / divisor: the mean's own share sums to zero, and
    // leaving it out keeps a zero divisor's gradient infinite rather than inf - inf.
    // Under createGraph (grad mode on in backward) the deviation is recomputed with a graph.
    ([g]) => [
      g!.reshape(keptShape(x.shape, dims)).mul(isGradEnabled() ? x.sub(mean) : deviation)
        .mul(2 / divisor),
    ],
  );
  const m = keepdim || x.ndim === 0 ? mean : mean.reshape(variance.shape);
  if (op === "varMean") return [variance, m];
  // As PyTorch's std_backward: no gradient through a zero deviation (not NaN).
  const nonzero = noGrad(() => variance.ne(0));
  return [variance.where(nonzero, 1).sqrt().where(nonzero, 0), m];
}

/**
 * The variance and mean over `dim` (every dim when omitted), as
 * `torch.var_mean`: `[variance, mean]`, the variance divided by
 * `max(0, N - correction)` (default correction 1).
 */
export function varMean(
  x: Tensor,
  dim?: number | readonly number[],
  options: VarMeanOptions = {},
): readonly [Tensor, Tensor] {
  return varianceAndMean("varMean", x, dim, options);
}

/** The standard deviation and mean, as `torch.std_mean`: `[std, mean]` (see {@link varMean}). */
export function stdMean(
  x: Tensor,
  dim?: number | readonly number[],
  options: VarMeanOptions = {},
): readonly [Tensor, Tensor] {
  return varianceAndMean("stdMean", x, dim, options);
}

function sumDims(
  x: Tensor,
  dim: number | readonly number[] | undefined,
  keepdim: boolean,
  op: string,
) {
  const dims = dimList(x, dim, op);
  return x.ndim === 0 ? x : x.sum(dims, keepdim);
}

/**
 * The sum over `dim` (every dim when omitted), NaN counted as zero, as
 * `torch.nansum`; NaN elements get no gradient.
 */
export function nansum(x: Tensor, dim?: number | readonly number[], keepdim = false): Tensor {
  requireTensor("nansum", x, "input");
  if (!isFloat(x.dtype)) return sumDims(x, dim, keepdim, "nansum");
  return sumDims(zeroNan(x, "nansum"), dim, keepdim, "nansum");
}

/**
 * `x` with NaN replaced by 0; the gradient is PyTorch's `g · !isnan(x)`, a
 * product, so that an infinite `g` (a nanmean of no numbers) gives NaN there.
 */
function zeroNan(x: Tensor, op: string): Tensor {
  const kept = noGrad(() => x.eq(x));
  return record(op, [x], noGrad(() => x.where(kept, 0)), ([g]) => [g!.mul(kept)]);
}

/**
 * The mean of the elements that are not NaN over `dim` (every dim when
 * omitted), as `torch.nanmean` (NaN where a slice is all NaN); float only.
 */
export function nanmean(x: Tensor, dim?: number | readonly number[], keepdim = false): Tensor {
  requireTensor("nanmean", x, "input");
  requireFloat("nanmean", x);
  const kept = noGrad(() => x.eq(x));
  return sumDims(zeroNan(x, "nanmean"), dim, keepdim, "nanmean")
    .div(noGrad(() => sumDims(kept, dim, keepdim, "nanmean")));
}

/**
 * The number of nonzero elements over `dim` (every dim when omitted), as
 * `torch.count_nonzero`: int32 (PyTorch: int64); NaN is nonzero.
 */
export function countNonzero(x: Tensor, dim?: number | readonly number[]): Tensor {
  requireTensor("countNonzero", x, "input");
  return noGrad(() => sumDims(x.ne(0), dim, false, "countNonzero").to("int32"));
}

/** Options of {@link histc}. */
export interface HistcOptions {
  /** How many equal-width bins (default 100). */
  bins?: number;
  /** The lower end of the range (default 0; with max, both 0 means the data's minimum). */
  min?: number;
  /** The upper end, inclusive (default 0; equal to min means the data's maximum). */
  max?: number;
}

/** Counts of `index` (int32, 1-D, values in [0, size]) per value below `size`, in `dtype`, no graph. */
function countBy(index: Tensor, weights: Tensor | null, size: number): Tensor {
  const n = index.numel();
  const ones = weights ?? full([n], 1, { dtype: "float32", device: index.device });
  return scatterAddRaw(ones.reshape([1, n, 1]), index.reshape([1, n, 1]), 1, size + 1)
    .reshape([size + 1]).narrow(0, 0, size);
}

/**
 * A histogram of `x`'s elements in `bins` equal-width bins over
 * `[min, max]`, as `torch.histc`: elements outside it are not counted,
 * `max` falls in the last bin. NaN is not counted either (PyTorch 1.13's cpu
 * kernel counts it in the first bin, an artifact of its comparisons). With
 * `min` = `max` the range is the data's (widened by 1 each way when all
 * elements are equal; a NaN or infinite element then is an error, reported
 * by the next read). Float
 * input; the counts have its dtype. No gradient (as PyTorch).
 */
export function histc(x: Tensor, options: HistcOptions = {}): Tensor {
  requireTensor("histc", x, "input");
  requireFloat("histc", x);
  const { bins = 100, min = 0, max = 0 } = options;
  if (!Number.isInteger(bins) || bins <= 0) {
    throw new RangeError(`histc: bins must be a positive integer, got ${bins}`);
  }
  if (typeof min !== "number" || typeof max !== "number" || !(min <= max)) {
    throw new RangeError(`histc: max must be larger than min, got min ${min} and max ${max}`);
  }
  if (!Number.isFinite(min) || !Number.isFinite(max)) {
    throw new RangeError(`histc: range of [${min}, ${max}] is not finite`);
  }
  const n = x.numel();
  if (n === 0) return full([bins], 0, { dtype: x.dtype, device: x.device });
  return noGrad(() =>
    tidy(() => {
      const flat = x.reshape([n]);
      let lo: Tensor | number = min;
      let hi: Tensor | number = max;
      if (min === max) {
        const range = stack([flat.min(), flat.max()]);
        checkLater(
          range,
          ([a, b]) =>
            Number.isFinite(a) && Number.isFinite(b)
              ? null
              : `histc: range of [${a}, ${b}] is not finite`,
        );
        const same = range.narrow(0, 0, 1).eq(range.narrow(0, 1, 1));
        lo = range.narrow(0, 0, 1).sub(same);
        hi = range.narrow(0, 1, 1).add(same);
      }
      const inside = flat.ge(lo).mul(flat.le(hi));
      // As PyTorch's kernel: (x - min) * bins / (max - min), truncated; max itself in the last bin.
      const width = typeof hi === "number" ? hi - (lo as number) : hi.sub(lo);
      const position = flat.sub(lo).mul(bins).div(width).floor().minimum(bins - 1);
      const index = position.where(inside, bins).to("int32");
      return countBy(index, null, bins).to(x.dtype);
    })
  );
}

/** Options of {@link bincount}. */
export interface BincountOptions {
  /** Added instead of 1 for each element (1-D, the input's length; float). */
  weights?: Tensor;
  /** The least length of the result (default 0). */
  minlength?: number;
}

/**
 * How often each value 0, 1, ... occurs in the 1-D non-negative int32 `x`
 * (the sum of `weights` there instead, with weights), as `torch.bincount`:
 * `max(x) + 1` long, at least `minlength`. The length depends on the data,
 * which multigrad does not read back synchronously: it comes from the range
 * known for tensors made from host data (checked at the next read to be
 * reached, since rows picked from such data keep their source's range as a
 * bound); for values computed on a device `minlength` sets the length and
 * must exceed every value (checked at the next read). Negative values are
 * reported by the next read. Counts are int32 (PyTorch: int64); weighted
 * sums have the weights' dtype.
 */
export function bincount(x: Tensor, options: BincountOptions = {}): Tensor {
  requireTensor("bincount", x, "input");
  const { weights, minlength = 0 } = options;
  if (x.dtype !== "int32" || x.ndim !== 1) {
    throw new TypeError(
      `bincount: the input must be a 1-D int32 tensor, got ${x.dtype} of shape ${
        formatShape(x.shape)
      }`,
    );
  }
  if (!Number.isInteger(minlength) || minlength < 0) {
    throw new RangeError(`bincount: minlength must be a non-negative integer, got ${minlength}`);
  }
  if (weights !== undefined) {
    requireTensor("bincount", weights, "weights");
    commonDevice("bincount", x, weights);
    requireFloat("bincount", weights);
    if (weights.ndim !== 1 || weights.shape[0] !== x.shape[0]) {
      throw new RangeError(
        `bincount: weights of shape ${
          formatShape(weights.shape)
        } must be 1-D and as long as the input (shape ${formatShape(x.shape)})`,
      );
    }
  }
  const n = x.numel();
  const known = x.storage.knownRange;
  let length = minlength;
  if (n > 0) {
    if (known) {
      length = Math.max(minlength, known[1] + 1);
      if (known[1] >= minlength) {
        // The known range bounds the values (rows picked from host data inherit their source's);
        // the length is PyTorch's only if the bound is reached.
        checkLater(
          noGrad(() => x.max().reshape([1])),
          ([top]) =>
            top === known[1]
              ? null
              : `bincount: the input's maximum is ${top}, below the bound ${
                known[1]
              } its length was taken from (values picked from host data): the output would be longer than PyTorch's`,
        );
      }
    } else if (minlength === 0) {
      throw new RangeError(
        "bincount: the input was computed on the device, so its maximum (the output's length) is not known without a read; pass minlength above every value",
      );
    }
    if (!known || known[0] < 0) {
      // A negative known bound may come from rows picked out of host data: the device decides.
      checkLater(
        noGrad(() => stack([x.min(), x.max()])),
        ([a, b]) =>
          a < 0
            ? `bincount: the input holds a negative value, ${a}`
            : b >= minlength
            ? `bincount: the input holds ${b}, not below minlength ${minlength} (the length given for device-computed input)`
            : null,
      );
    }
  }
  const dtype = weights?.dtype ?? "int32";
  if (n === 0 || length === 0) return full([length], 0, { dtype, device: x.device });
  return noGrad(() =>
    tidy(() => {
      // Values the checks above reject go to a spare bin, so that no write leaves the output.
      const index = x.where(x.ge(0).mul(x.lt(length)), length);
      const counts = countBy(index, weights ? weights : null, length);
      return weights ? counts : counts.to("int32");
    })
  );
}
