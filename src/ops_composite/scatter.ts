/**
 * Writes by a data-dependent index, out of place: `scatter`, `scatterAdd`,
 * `scatterReduce`, `indexReduce`, `indexPut`, `put`, `maskedScatter`, and
 * membership (`isin`). A backend with the optional `scatterReduce` kernel
 * (cpu) writes the scatters in one pass; the others compose them from the
 * scatter-add kernel, gathers, the sort and elementwise kernels: reductions
 * other than a sum sort each column's targets and reduce the runs of equal
 * targets by a segmented scan.
 * @module
 */

import { isGradEnabled, noGrad, record } from "../autograd.ts";
import { checkFill, isFloat, promoteTypes } from "../dtype.ts";
import { broadcastShapes, formatShape, normalizeDim } from "../shape.ts";
import { tidy } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import { arangeOn, full } from "../ops/factory.ts";
import { gatherInRange, scatterAddRaw, where } from "../ops/indexing.ts";
import { checkLater } from "../ops/check.ts";
import { cat, gatherLayout, narrow, stack } from "../ops/view.ts";
import { commonDevice, empty, hasKernel, launch } from "../ops/util.ts";
import { floorDivide } from "./binary.ts";
import { argsort, sort } from "./sort.ts";
import { scan } from "./scan.ts";
import { checkIndexInDim, searchsorted } from "./index_ops.ts";
import { requireTensor } from "./util.ts";
import { owned } from "./owned.ts";

/** How {@link scatterReduce} and {@link indexReduce} combine the values written to one place. */
export type ScatterReduction = "sum" | "prod" | "mean" | "amax" | "amin";

type Mode = "assign" | ScatterReduction;

const REDUCTIONS: readonly string[] = ["sum", "prod", "mean", "amax", "amin"];

/**
 * Checks a scatter's operands as PyTorch does (index int32 with the input's
 * number of dims unless empty, no larger than `src` in any dim nor than the input in any
 * dim but `dim`; `src` of the input's dtype; indices in range) and returns
 * the dim.
 */
function scatterArgs(op: string, x: Tensor, dim: number, index: Tensor, src: Tensor): number {
  requireTensor(op, x, "input");
  requireTensor(op, index, "index");
  requireTensor(op, src, "src");
  const d = normalizeDim(dim, Math.max(x.ndim, 1), op);
  if (index.dtype !== "int32") {
    throw new TypeError(`${op}: index must be an int32 tensor, got ${index.dtype}`);
  }
  commonDevice(op, x, index, src);
  if (src.dtype !== x.dtype) {
    throw new TypeError(`${op}: src is ${src.dtype}, the input ${x.dtype}; they must match`);
  }
  // As PyTorch: an empty index writes nothing whatever its shape, and a 0-d tensor counts as 1-D.
  if (index.numel() === 0) return d;
  const dims = (t: Tensor) => Math.max(t.ndim, 1);
  if (dims(index) !== dims(x) || dims(src) !== dims(x)) {
    throw new RangeError(
      `${op}: index (shape ${formatShape(index.shape)}) and src (shape ${
        formatShape(src.shape)
      }) must have as many dims as the input (shape ${formatShape(x.shape)})`,
    );
  }
  const sizes = (t: Tensor) => (t.ndim === 0 ? [1] : t.shape);
  const [xs, ss] = [sizes(x), sizes(src)];
  const fits = sizes(index).every((n, k) => n <= ss[k] && (k === d || n <= xs[k]));
  if (!fits) {
    throw new RangeError(
      `${op}: index of shape ${formatShape(index.shape)} does not fit src of shape ${
        formatShape(src.shape)
      } (no larger in any dim) and the input of shape ${
        formatShape(x.shape)
      } (no larger in any dim but ${d})`,
    );
  }
  checkIndexInDim(op, index, x, d);
  return d;
}

/** `t` widened to `shape` in every dim but `d` by `value` at the end. */
function padTo(t: Tensor, shape: readonly number[], d: number, value: number): Tensor {
  let out = t;
  for (let k = 0; k < shape.length; k++) {
    if (k === d || out.shape[k] === shape[k]) continue;
    const extra = out.shape.map((n, i) => (i === k ? shape[k] - n : n));
    out = cat([out, full(extra, value, { dtype: t.dtype, device: t.device })], k);
  }
  return out;
}

/** The inclusive scan of `v` along `d` by `combine`, restarted wherever the sorted `r` changes. */
function segmentedScan(
  v: Tensor,
  r: Tensor,
  d: number,
  combine: (a: Tensor, b: Tensor) => Tensor,
): Tensor {
  const n = v.shape[d];
  for (let k = 1; k < n; k *= 2) {
    // r is sorted: equal targets k apart mean the whole stretch between is one segment.
    const same = narrow(r, d, k, n - k).eq(narrow(r, d, 0, n - k));
    const current = narrow(v, d, k, n - k);
    const tail = combine(current, narrow(v, d, 0, n - k)).where(same, current);
    v = cat([narrow(v, d, 0, k), tail], d);
  }
  return v;
}

/**
 * The raw scatter of `src` into `x` by `index` along `d` (shapes checked,
 * `src` trimmed to `index`'s shape), no graph: `[out, counts]`, counts the
 * number of sources written to each place (int32 from the kernel, else in
 * `x`'s dtype), null unless `keepCounts`.
 */
function scatterCore(
  x: Tensor,
  d: number,
  index: Tensor,
  src: Tensor,
  mode: Mode,
  includeSelf: boolean,
  keepCounts: boolean,
): [Tensor, Tensor | null] {
  return noGrad(() =>
    tidy(() => {
      const size = x.shape[d];
      // Indices of -1 (out of range: the kernels skip them) fill the places index does not reach.
      const at = padTo(index, x.shape, d, -1);
      const values = padTo(src, x.shape, d, 0);
      if (hasKernel(x.device, "scatterReduce")) {
        const out = empty([...x.shape], x.dtype, x.device);
        const counts = keepCounts ? empty([...x.shape], "int32", x.device) : null;
        launch(x.device, "scatterReduce", {
          self: x.storage.buffer("scatterReduce"),
          x: values.storage.buffer("scatterReduce"),
          index: at.storage.buffer("scatterReduce"),
          out: out.storage.buffer(),
          counts: counts && counts.storage.buffer(),
          mode,
          includeSelf,
          ...gatherLayout(at.shape, d, size, x.dtype),
        });
        return [out, counts];
      }
      const ones = full([...at.shape], 1, { dtype: x.dtype, device: x.device });
      const counts = scatterAddRaw(ones, at, d, size);
      const hit = counts.ne(0);
      let reduced: Tensor;
      if (mode === "sum" || mode === "mean") {
        reduced = scatterAddRaw(values, at, d, size);
      } else {
        // Each column's sources sorted by target (stably: the last written stays last), reduced
        // over each run of equal targets; the run's last element carries the result.
        const order = argsort(at, d);
        const targets = gatherInRange(at, d, order);
        let sorted = gatherInRange(values, d, order);
        if (mode !== "assign") {
          const combine = mode === "prod"
            ? (a: Tensor, b: Tensor) => a.mul(b)
            : mode === "amax"
            ? (a: Tensor, b: Tensor) => a.maximum(b)
            : (a: Tensor, b: Tensor) => a.minimum(b);
          sorted = segmentedScan(sorted, targets, d, combine);
        }
        const n = at.shape[d];
        const last = n === 1 ? null : narrow(targets, d, 0, n - 1).ne(narrow(targets, d, 1, n - 1));
        const endShape = at.shape.map((s, i) => (i === d ? 1 : s));
        const end = last
          ? cat([last, full(endShape, 1, { dtype: "int32", device: x.device })], d)
          : null;
        // Where each place's run ends, scattered (int32: exact), then the values gathered from
        // there: a scatter-add of the values would turn a -0 into 0 + -0 = +0. Places no source
        // reaches get position 0, masked below.
        const along = at.shape.map((_, i) => (i === d ? n : 1));
        const positions = arangeOn(n, x.device).reshape(along).expand([...at.shape]);
        const ends = scatterAddRaw(positions, end ? targets.where(end, -1) : targets, d, size);
        reduced = gatherInRange(sorted, d, ends);
      }
      let out: Tensor;
      if (mode === "assign" || !includeSelf) {
        out = mode === "mean" ? mean(reduced, counts.maximum(1)) : reduced;
        out = out.where(hit, x);
      } else if (mode === "sum") out = x.add(reduced);
      else if (mode === "mean") out = mean(x.add(reduced), counts.add(1));
      else {
        // reduced first: maximum and minimum return the second operand on ties; PyTorch keeps x.
        const both = mode === "prod"
          ? x.mul(reduced)
          : mode === "amax"
          ? reduced.maximum(x)
          : reduced.minimum(x);
        out = both.where(hit, x);
      }
      return [out, keepCounts ? counts : null];
    })
  );
}

/** `sum / count`, for int32 rounded down as PyTorch (in integers: a float32 quotient is inexact past 2^24). */
function mean(sum: Tensor, count: Tensor): Tensor {
  return isFloat(sum.dtype) ? sum.div(count) : floorDivide(sum, count);
}

/** `t` narrowed to `shape` (no larger in any dim); the gradient pads back. */
function trimmed(t: Tensor, shape: readonly number[]): Tensor {
  let out = t;
  shape.forEach((n, k) => {
    if (out.shape[k] > n) out = narrow(out, k, 0, n);
  });
  return out;
}

/** The scatter of `src` with autograd: PyTorch's scatter / scatter_reduce backward formulas. */
function scatterOp(
  op: string,
  x: Tensor,
  dim: number,
  index: Tensor,
  src: Tensor,
  mode: Mode,
  includeSelf: boolean,
): Tensor {
  const d = scatterArgs(op, x, dim, index, src);
  if (index.numel() === 0) return x.clone();
  if (x.ndim === 0 || index.ndim === 0 || src.ndim === 0) {
    const flat = (t: Tensor) => (t.ndim === 0 ? t.reshape([1]) : t);
    const one = scatterOp(op, flat(x), 0, flat(index), flat(src), mode, includeSelf);
    return one.reshape(x.shape);
  }
  const part = trimmed(src, index.shape);
  // The counts are the backward's alone: without one, none are kept.
  const keepCounts = isGradEnabled() && (x.requiresGrad || part.requiresGrad);
  const [out, kept] = scatterCore(x, d, index, part, mode, includeSelf, keepCounts);
  return record(op, [x, part], out, ([g]) => {
    const counts = kept!;
    const gathered = (t: Tensor) => gatherInRange(t, d, index);
    const notHit = () => counts.eq(0);
    let gx: Tensor | null = null;
    let gs: Tensor | null = null;
    if (mode === "assign" || mode === "sum") {
      gx = mode === "sum" && includeSelf ? g! : g!.where(notHit(), 0);
      gs = gathered(g!);
    } else if (mode === "mean") {
      const n = (includeSelf ? counts.add(1) : counts).maximum(1).to(g!.dtype);
      gx = g!.div(n);
      gs = gathered(g!).div(gathered(n));
    } else if (mode === "amax" || mode === "amin") {
      const value = gathered(out);
      const selfIs = x.eq(out).to(g!.dtype);
      const srcIs = part.eq(value).to(g!.dtype);
      const share = g!.div(scatterAdd(selfIs, d, index, srcIs));
      gx = selfIs.mul(share);
      gs = srcIs.mul(gathered(share));
    } else {
      // PyTorch's prod rule: zeros get the product of the others, not result / 0.
      const selfZero = x.eq(0);
      const maskedSelf = x.where(selfZero.eq(0), 1);
      const withoutSelf = scatterReduce(maskedSelf, d, index, part, "prod", { includeSelf });
      gx = g!.mul(withoutSelf).div(maskedSelf);
      const srcZero = part.eq(0);
      // Not x·0: that is NaN at an infinite input.
      const none = full([...x.shape], 0, { dtype: x.dtype, device: x.device });
      const zeros = gathered(scatterAdd(none, d, index, srcZero.to(x.dtype)));
      const single = srcZero.mul(zeros.eq(1));
      const maskedSrc = part.where(single.eq(0), 1);
      const withoutSrc = scatterReduce(x, d, index, maskedSrc, "prod", { includeSelf });
      gs = where(
        single,
        gathered(g!.mul(withoutSrc)),
        gathered(g!.mul(out)).div(part.where(srcZero.eq(0), 1)),
      );
    }
    // A mask, not a product: the written places get 0 even where gx is inf or NaN, as PyTorch.
    if (mode !== "assign" && mode !== "sum" && !includeSelf) gx = gx.where(notHit(), 0);
    return [x.requiresGrad ? gx : null, part.requiresGrad ? gs : null];
  });
}

/** Options of {@link scatter}. */
export interface ScatterOptions {
  /** Combine with the input's value rather than replace it: `"add"` or `"multiply"`. */
  reduce?: "add" | "multiply";
}

/**
 * `x` with `src[i][j][k]` written to `x[index[i][j][k]][j][k]` (for `dim`
 * 0, and so on), as `torch.scatter` (out of place): `src` a tensor of `x`'s
 * dtype, or a number written at every index (a fraction truncates toward zero
 * for int32, as PyTorch's). `index` is int32 with `x`'s
 * number of dims, no larger than `src` in any dim nor than `x` in any dim
 * but `dim` (as PyTorch, a 0-d tensor counts as 1-D, and an empty index
 * writes nothing whatever its shape). Where an index repeats, the last source along `dim` wins (as
 * PyTorch's cpu kernel; PyTorch leaves it unspecified). With `reduce`
 * ("add" or "multiply") the sources combine with `x`'s value instead, as
 * {@link scatterReduce}'s sum and prod. The gradient is `g` where `x` was
 * kept and `g` gathered at `index` for `src` (PyTorch 1.13 has no
 * gradient with `reduce`; here it is scatterReduce's).
 */
export function scatter(
  x: Tensor,
  dim: number,
  index: Tensor,
  src: Tensor | number,
  options: ScatterOptions = {},
): Tensor {
  const { reduce } = options;
  if (reduce !== undefined && reduce !== "add" && reduce !== "multiply") {
    throw new RangeError(
      `scatter: reduce must be "add" or "multiply", got ${JSON.stringify(reduce)}`,
    );
  }
  let source: Tensor;
  if (typeof src === "number") {
    requireTensor("scatter", x, "input");
    requireTensor("scatter", index, "index");
    checkFill(x.dtype, src, "scatter"); // full() would name itself
    source = full([...index.shape], src, { dtype: x.dtype, device: x.device });
  } else source = src;
  const mode: Mode = reduce === "add" ? "sum" : reduce === "multiply" ? "prod" : "assign";
  return scatterOp("scatter", x, dim, index, source, mode, true);
}

/**
 * `x` with every `src[i][j][k]` added to `x[index[i][j][k]][j][k]` (for
 * `dim` 0, and so on), as `torch.scatter_add` (out of place; repeated
 * indices add up; shapes as {@link scatter}). The gradient is `g` for `x`
 * and `g` gathered at `index` for `src`.
 */
export function scatterAdd(x: Tensor, dim: number, index: Tensor, src: Tensor): Tensor {
  return scatterOp("scatterAdd", x, dim, index, src, "sum", true);
}

/** Options of {@link scatterReduce} and {@link indexReduce}. */
export interface ScatterReduceOptions {
  /** Whether the input's own values take part in the reduction (default true). */
  includeSelf?: boolean;
}

function reduction(op: string, reduce: unknown, allowed: readonly string[]): void {
  if (typeof reduce !== "string" || !allowed.includes(reduce)) {
    throw new RangeError(
      `${op}: reduce must be one of ${allowed.join(", ")}, got ${JSON.stringify(reduce)}`,
    );
  }
}

/**
 * `x` with the sources written to each place (shapes and indexing as
 * {@link scatter}) reduced there by `reduce` ("sum", "prod", "mean",
 * "amax", "amin"), together with `x`'s own value unless `includeSelf` is
 * false, as `torch.scatter_reduce` (out of place). Places no index reaches
 * keep `x`'s value. An int32 mean rounds down, as PyTorch. NaN propagates
 * through amax and amin. Gradients are PyTorch's: amax/amin share `g`
 * evenly among the values equal to the result (the input's included), prod
 * gives a zero the product of the others.
 */
export function scatterReduce(
  x: Tensor,
  dim: number,
  index: Tensor,
  src: Tensor,
  reduce: ScatterReduction,
  options: ScatterReduceOptions = {},
): Tensor {
  reduction("scatterReduce", reduce, REDUCTIONS);
  const { includeSelf = true } = options;
  return scatterOp("scatterReduce", x, dim, index, src, reduce, includeSelf);
}

/**
 * `x` with `source`'s slices along `dim` reduced into the slices `index`
 * names, as `torch.index_reduce` (out of place): `reduce` is "prod",
 * "mean", "amax" or "amin"; `index` is 1-D int32 with one entry per slice
 * of `source`, which has `x`'s shape but for `dim`. Gradients as
 * {@link scatterReduce}'s.
 */
export function indexReduce(
  x: Tensor,
  dim: number,
  index: Tensor,
  source: Tensor,
  reduce: "prod" | "mean" | "amax" | "amin",
  options: ScatterReduceOptions = {},
): Tensor {
  reduction("indexReduce", reduce, ["prod", "mean", "amax", "amin"]);
  requireTensor("indexReduce", x, "input");
  requireTensor("indexReduce", index, "index");
  requireTensor("indexReduce", source, "source");
  const d = normalizeDim(dim, Math.max(x.ndim, 1), "indexReduce");
  if (index.dtype !== "int32" || index.ndim > 1) {
    throw new TypeError(
      `indexReduce: index must be a 0-D or 1-D int32 tensor, got ${index.dtype} of shape ${
        formatShape(index.shape)
      }`,
    );
  }
  const count = index.numel();
  const want = x.ndim === 0 ? [count] : x.shape.map((n, i) => (i === d ? count : n));
  const fits = x.ndim === 0
    ? source.numel() === count && source.ndim <= 1
    : source.ndim === want.length && want.every((n, i) => source.shape[i] === n);
  if (!fits) {
    throw new RangeError(
      `indexReduce: source of shape ${formatShape(source.shape)} does not fit the input of shape ${
        formatShape(x.shape)
      } with ${count} indices along dim ${d} (expected ${formatShape(want)})`,
    );
  }
  if (x.ndim === 0) {
    const flat = indexReduce(
      x.reshape([1]),
      0,
      index.reshape([count]),
      source.reshape([count]),
      reduce,
      options,
    );
    return flat.reshape([]);
  }
  // Checked before spreading: spread over an empty slice, a bad index would go unseen.
  checkIndexInDim("indexReduce", index, x, d);
  const spread = noGrad(() => index.reshape(want.map((n, i) => (i === d ? n : 1))).expand(want));
  spread.storage.knownRange = index.storage.knownRange;
  return scatterOp("indexReduce", x, d, spread, source, reduce, options.includeSelf ?? true);
}

/** Options of {@link indexPut} and {@link put}. */
export interface IndexPutOptions {
  /** Add the values to those in place (repeats add up) rather than replace them (default false). */
  accumulate?: boolean;
}

/**
 * `x` with `x[indices] = values`, as `torch.index_put` (out of place):
 * `indices` is a list of int32 tensors, one per leading dim of `x`,
 * broadcast together (negative ones count from the end); `values` broadcasts
 * to the indexed shape (the broadcast indices' shape, then `x`'s remaining
 * dims) and has `x`'s dtype. With `accumulate` the values add up; without,
 * the last of repeated indices wins (PyTorch leaves it unspecified).
 * Boolean-mask indices are not taken (use {@link maskedScatter}). The
 * gradient is `g` where `x` was kept (all of it with `accumulate`) and the
 * indexed `g`, summed over broadcasting, for `values`.
 */
export function indexPut(
  x: Tensor,
  indices: readonly Tensor[],
  values: Tensor,
  options: IndexPutOptions = {},
): Tensor {
  const op = "indexPut";
  requireTensor(op, x, "input");
  requireTensor(op, values, "values");
  if (!Array.isArray(indices) || indices.length === 0 || indices.length > x.ndim) {
    throw new RangeError(
      `${op}: indices must be a list of 1 to ${x.ndim} int32 tensors (one per leading dim of shape ${
        formatShape(x.shape)
      }), got ${Array.isArray(indices) ? indices.length : typeof indices}`,
    );
  }
  indices.forEach((t, k) => {
    requireTensor(op, t, `indices[${k}]`);
    if (t.dtype !== "int32") {
      throw new TypeError(
        `${op}: indices[${k}] must be int32, got ${t.dtype} (masks are not taken)`,
      );
    }
  });
  commonDevice(op, x, values, ...indices);
  if (values.dtype !== x.dtype) {
    throw new TypeError(`${op}: values are ${values.dtype}, the input ${x.dtype}; they must match`);
  }
  const k = indices.length;
  const lead: readonly number[] = indices.reduce(
    (s: readonly number[], t) => broadcastShapes(s, t.shape, op),
    [],
  );
  const rest = x.shape.slice(k);
  const target = [...lead, ...rest];
  const joint = broadcastShapes(values.shape, target, op);
  if (joint.length !== target.length || joint.some((n, i) => n !== target[i])) {
    throw new RangeError(
      `${op}: values of shape ${formatShape(values.shape)} do not broadcast to the indexed shape ${
        formatShape(target)
      }`,
    );
  }
  const places = x.shape.slice(0, k).reduce((a, b) => a * b, 1);
  const n = lead.reduce((a, b) => a * b, 1);
  indices.forEach((t, j) => checkWrapped(op, t, x.shape[j], j, x.shape));
  const linear = noGrad(() =>
    tidy(() => {
      let flat = full([n], 0, { dtype: "int32", device: x.device });
      let stride = places;
      for (const [j, t] of indices.entries()) {
        stride /= x.shape[j];
        const wrapped = t.add(t.lt(0).mul(x.shape[j])).expand([...lead]).reshape([n]);
        flat = flat.add(stride === 1 ? wrapped : wrapped.mul(stride));
      }
      const spread = [n, ...rest];
      return flat.reshape(spread.map((s, i) => (i === 0 ? s : 1))).expand(spread);
    })
  );
  // checkWrapped vouches for the indices (or reports them): the flat ones need no second check.
  linear.storage.knownRange = [0, Math.max(places - 1, 0)];
  const flatX = x.reshape([places, ...rest]);
  const flatValues = values.expand(target).reshape([n, ...rest]);
  const out = scatterOp(
    op,
    flatX,
    0,
    linear,
    flatValues,
    options.accumulate ? "sum" : "assign",
    true,
  );
  return out.reshape(x.shape);
}

/** Checks that `t`'s indices lie in [-size, size) (at once for host data, else at the next read). */
function checkWrapped(
  op: string,
  t: Tensor,
  size: number,
  dim: number,
  shape: readonly number[],
): void {
  if (t.numel() === 0) return;
  const verdict = (bounds: ArrayLike<number>) => {
    const [lo, hi] = [bounds[0], bounds[1]];
    const bad = lo < -size ? lo : hi >= size ? hi : null;
    return bad === null
      ? null
      : `${op}: index ${bad} is out of range for dim ${dim} of size ${size} (shape ${
        formatShape(shape)
      })`;
  };
  const known = t.storage.knownRange;
  if (known) {
    const message = verdict(known);
    if (message !== null) throw new RangeError(message);
    return;
  }
  checkLater(noGrad(() => tidy(() => stack([t.min(), t.max()]))), verdict);
}

/**
 * `x` with `source`'s elements written to the flat positions `index` names
 * (`x` seen as 1-D; negative indices count from the end), as `torch.put`
 * (out of place): `index` and `source` have as many elements. With
 * `accumulate` they add up; without, the last of repeated indices wins.
 * Gradients as {@link indexPut}'s.
 */
export function put(
  x: Tensor,
  index: Tensor,
  source: Tensor,
  options: IndexPutOptions = {},
): Tensor {
  return owned(
    () => {
      requireTensor("put", x, "input");
      requireTensor("put", index, "index");
      requireTensor("put", source, "source");
      if (index.numel() !== source.numel()) {
        throw new RangeError(
          `put: index (shape ${formatShape(index.shape)}) and source (shape ${
            formatShape(source.shape)
          }) must have as many elements`,
        );
      }
      if (x.numel() === 0 && index.numel() > 0) {
        throw new RangeError(
          `put: cannot put into an empty tensor (shape ${formatShape(x.shape)})`,
        );
      }
      const n = index.numel();
      const flat = indexPut(
        x.reshape([x.numel()]),
        [index.reshape([n])],
        source.reshape([n]),
        options,
      );
      return flat.reshape(x.shape);
    },
    x,
    source,
  );
}

/**
 * `x` with the places where `mask` is nonzero filled, in row-major order,
 * by `source`'s leading elements, as `torch.masked_scatter` (out of
 * place): `x` and `mask` broadcast together, `source` has `x`'s dtype and at
 * least as many elements as the mask has nonzeros (checked at the next
 * read). The gradient is `g` where `x` was kept, and the masked `g` for
 * `source`'s leading elements (0 for the rest).
 */
export function maskedScatter(x: Tensor, mask: Tensor, source: Tensor): Tensor {
  const op = "maskedScatter";
  requireTensor(op, x, "input");
  requireTensor(op, mask, "mask");
  requireTensor(op, source, "source");
  commonDevice(op, x, mask, source);
  if (source.dtype !== x.dtype) {
    throw new TypeError(`${op}: source is ${source.dtype}, the input ${x.dtype}; they must match`);
  }
  // Out of place, PyTorch broadcasts the input and the mask together.
  const shape = [...broadcastShapes(mask.shape, x.shape, op)];
  if (shape.length !== x.ndim || shape.some((n, i) => n !== x.shape[i])) x = x.expand(shape);
  const n = x.numel();
  const available = source.numel();
  const [on, rank] = noGrad(() =>
    tidy(() => {
      const on = mask.ne(0).to("int32").expand([...x.shape]).reshape([n]);
      // The k-th masked place (row-major) takes source element k.
      const rank = n === 0 ? on : scan(on, 0, "add").sub(1).maximum(0);
      return [on, available === 0 ? rank.mul(0) : rank.minimum(available - 1)];
    })
  );
  if (n > 0) {
    checkLater(
      noGrad(() => on.sum().reshape([1])),
      ([taken]) =>
        taken > available
          ? `${op}: the mask selects ${taken} elements, but source (shape ${
            formatShape(source.shape)
          }) has only ${available}`
          : null,
    );
  }
  if (available === 0) return where(on.reshape([...x.shape]), x.mul(0), x);
  const picked = gatherInRange(source.reshape([available]), 0, rank).reshape([...x.shape]);
  const out = where(on.reshape([...x.shape]), picked, x);
  if (!isGradEnabled()) on.dispose();
  return out;
}

/** Options of {@link isin}. */
export interface IsinOptions {
  /** Both inputs hold no repeats (accepted for PyTorch's signature; the result is the same). */
  assumeUnique?: boolean;
  /** 1 where an element is NOT among the test elements (default false). */
  invert?: boolean;
}

/**
 * 1 where an element of `elements` is among `testElements` (else 0), as
 * `torch.isin`: either may be a number (not both); the result has
 * `elements`' shape and, as the repo's comparisons, the two inputs'
 * promoted dtype (PyTorch: bool). NaN is never found. It sorts the test
 * elements and binary-searches them, so it costs O((n + m) log m). No
 * gradient.
 */
export function isin(
  elements: Tensor | number,
  testElements: Tensor | number,
  options: IsinOptions = {},
): Tensor {
  const { invert = false } = options;
  if (!(elements instanceof Tensor) && !(testElements instanceof Tensor)) {
    throw new TypeError(
      `isin: at least one of elements and testElements must be a Tensor, got ${typeof elements} and ${typeof testElements}`,
    );
  }
  for (const [name, v] of [["elements", elements], ["testElements", testElements]] as const) {
    if (!(v instanceof Tensor) && typeof v !== "number") {
      throw new TypeError(`isin: ${name} must be a Tensor or a number, got ${typeof v}`);
    }
  }
  const device = elements instanceof Tensor ? elements.device : (testElements as Tensor).device;
  const dtypeOf = (v: Tensor | number) =>
    v instanceof Tensor ? v.dtype : Number.isInteger(v) ? "int32" as const : "float32" as const;
  const dtype = promoteTypes(dtypeOf(elements), dtypeOf(testElements));
  const asTensor = (v: Tensor | number) =>
    v instanceof Tensor ? (v.dtype === dtype ? v : v.to(dtype)) : full([], v, { dtype, device });
  return noGrad(() =>
    tidy(() => {
      const e = asTensor(elements);
      const t = asTensor(testElements);
      commonDevice("isin", e, t);
      const m = t.numel();
      const flat = e.reshape([e.numel()]);
      let found: Tensor;
      // Not flat·0 ≠ 0: that is true at ±inf and NaN.
      if (m === 0 || flat.numel() === 0) found = full([flat.numel()], 0, { dtype, device });
      else {
        const sorted = sort(t.reshape([m]), 0).values;
        const at = searchsorted(sorted, flat).minimum(m - 1);
        found = gatherInRange(sorted, 0, at).eq(flat);
      }
      return (invert ? found.eq(0) : found).reshape([...e.shape]);
    })
  );
}
