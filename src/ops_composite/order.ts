/**
 * Order statistics along a dim: `kthvalue`, `cummax`, `cummin`, `aminmax`,
 * `msort`, and `histogram`, composed from the sort, scans of elementwise
 * kernels, gathers and the scatter-add kernel, so every backend runs them.
 * @module
 */

import { noGrad } from "../autograd.ts";
import { isFloat } from "../dtype.ts";
import { formatShape, normalizeDim } from "../shape.ts";
import { tidy } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import { arange, full, tensor } from "../ops/factory.ts";
import { gatherInRange, scatterAddRaw } from "../ops/indexing.ts";
import { checkLater } from "../ops/check.ts";
import { cat, clone, narrow, stack } from "../ops/view.ts";
import { commonDevice, requireFloat } from "../ops/util.ts";
import { sort, type ValuesIndices } from "./sort.ts";
import { amax, amin } from "./reduce.ts";
import { linspace } from "./factory.ts";
import { searchsorted } from "./index_ops.ts";
import { requireTensor, valuesIndices } from "./util.ts";
import { owned } from "./owned.ts";

/**
 * The `k`-th smallest value along `dim` (k from 1) and its index, as
 * `torch.kthvalue`: NaN counts as the largest. Among equal values the
 * index is the one the stable sort puts at place k (PyTorch leaves it
 * unspecified). The gradient goes to the index.
 */
export function kthvalue(x: Tensor, k: number, dim = -1, keepdim = false): ValuesIndices {
  return owned(() => {
    requireTensor("kthvalue", x, "input");
    const d = normalizeDim(dim, Math.max(x.ndim, 1), "kthvalue");
    const size = x.ndim === 0 ? 1 : x.shape[d];
    if (!Number.isInteger(k) || k < 1 || k > size) {
      throw new RangeError(
        `kthvalue: k = ${k} is out of range for dim ${d} of size ${size} (shape ${
          formatShape(x.shape)
        }): expected 1 to ${size}`,
      );
    }
    if (x.ndim === 0) {
      return valuesIndices(clone(x), full([], 0, { dtype: "int32", device: x.device }));
    }
    const index = noGrad(() => tidy(() => narrow(sort(x, d).indices, d, k - 1, 1)));
    const values = gatherInRange(x, d, index);
    if (keepdim) return valuesIndices(values, index);
    const shape = x.shape.filter((_, i) => i !== d);
    return valuesIndices(values.reshape(shape), noGrad(() => index.reshape(shape)));
  }, x);
}

/** The inclusive scan of `x` along `d` by `combine` (Hillis and Steele), no graph. */
function runningBy(x: Tensor, d: number, combine: (a: Tensor, b: Tensor) => Tensor): Tensor {
  const n = x.shape[d];
  let y = x;
  for (let k = 1; k < n; k *= 2) {
    const tail = combine(narrow(y, d, k, n - k), narrow(y, d, 0, n - k));
    y = cat([narrow(y, d, 0, k), tail], d);
  }
  return y;
}

function cumulative(op: "cummax" | "cummin", x: Tensor, dim: number): ValuesIndices {
  requireTensor(op, x, "input");
  const d = normalizeDim(dim, Math.max(x.ndim, 1), op);
  if (x.ndim === 0) {
    return valuesIndices(clone(x), full([], 0, { dtype: "int32", device: x.device }));
  }
  if (x.numel() === 0) {
    return valuesIndices(clone(x), full([...x.shape], 0, { dtype: "int32", device: x.device }));
  }
  const max = op === "cummax";
  const indices = noGrad(() =>
    tidy(() => {
      const n = x.shape[d];
      const pick = max
        ? (a: Tensor, b: Tensor) => a.maximum(b)
        : (a: Tensor, b: Tensor) => a.minimum(b);
      const position = arange(n, { dtype: "int32", device: x.device })
        .reshape(x.shape.map((_, i) => (i === d ? n : 1)));
      let current: Tensor;
      if (isFloat(x.dtype)) {
        // As PyTorch's loop: a NaN takes over and stays; before one, a value equal to the
        // running extreme takes over (the last of ties).
        const nan = x.ne(x);
        const running = runningBy(x.where(nan.eq(0), max ? -Infinity : Infinity), d, pick);
        const nanSeen = runningBy(nan, d, (a, b) => a.maximum(b));
        current = nan.maximum(x.eq(running).mul(nanSeen.eq(0)));
      } else current = x.eq(runningBy(x, d, pick));
      return runningBy(position.where(current, -1), d, (a, b) => a.maximum(b));
    })
  );
  return valuesIndices(gatherInRange(x, d, indices), indices);
}

/**
 * The running maximum along `dim` and where each came from, as
 * `torch.cummax`: the last index among equal values; a NaN takes over
 * from there on. The gradient goes to those indices.
 */
export function cummax(x: Tensor, dim: number): ValuesIndices {
  return cumulative("cummax", x, dim);
}

/** The running minimum along `dim` and its indices, as `torch.cummin` (see {@link cummax}). */
export function cummin(x: Tensor, dim: number): ValuesIndices {
  return cumulative("cummin", x, dim);
}

/** The minimum and maximum, as PyTorch's `(min, max)` named tuple. */
export type MinMax = readonly [min: Tensor, max: Tensor] & {
  /** The minimum. */
  readonly min: Tensor;
  /** The maximum. */
  readonly max: Tensor;
};

/** Options of {@link aminmax}. */
export interface AminmaxOptions {
  /** The dim to reduce (every element when omitted). */
  dim?: number;
  /** Keep the reduced dim with size 1 (default false). */
  keepdim?: boolean;
}

/**
 * The minimum and maximum over `dim` (of every element when omitted), as
 * `torch.aminmax`: `[min, max]`. NaN propagates. Ties share the gradient,
 * as {@link amin} and {@link amax} (PyTorch 1.13 has no gradient here).
 */
export function aminmax(x: Tensor, options: AminmaxOptions = {}): MinMax {
  requireTensor("aminmax", x, "input");
  const { dim, keepdim = false } = options;
  const d = dim === undefined ? undefined : normalizeDim(dim, Math.max(x.ndim, 1), "aminmax");
  const empty = x.numel() === 0 && (d === undefined || x.ndim === 0 || x.shape[d] === 0);
  if (empty) {
    throw new RangeError(
      `aminmax: cannot reduce an empty ${d === undefined ? "tensor" : `dim ${d}`} (shape ${
        formatShape(x.shape)
      }): the operation has no identity`,
    );
  }
  const dims = d === undefined || x.ndim === 0 ? undefined : d;
  let [min, max] = [amin(x, dims, keepdim), amax(x, dims, keepdim)];
  if (keepdim && d === undefined) {
    const ones = x.shape.map(() => 1);
    [min, max] = [min.reshape(ones), max.reshape(ones)];
  }
  return Object.assign([min, max] as const, { min, max });
}

/** `x` sorted along its first dim, as `torch.msort` (= `sort(x, 0).values`). */
export function msort(x: Tensor): Tensor {
  requireTensor("msort", x, "input");
  return sort(x, 0).values;
}

/** Options of {@link histogram}. */
export interface HistogramOptions {
  /** `[min, max]` of the bins (default: the data's; not with bin edges given). */
  range?: readonly [number, number];
  /** A weight per element (the input's shape and dtype), summed instead of counting 1. */
  weight?: Tensor;
  /** Divide by the total and the bin widths, so that the histogram integrates to 1. */
  density?: boolean;
}

/** A histogram and its bin edges, as PyTorch's `(hist, bin_edges)` named tuple. */
export type Histogram = readonly [hist: Tensor, binEdges: Tensor] & {
  /** The count (or weight sum, or density) per bin. */
  readonly hist: Tensor;
  /** The `bins + 1` edges, ascending. */
  readonly binEdges: Tensor;
};

/**
 * A histogram of `x`'s elements, as `torch.histogram`: `bins` equal-width
 * bins over `range` (default the data's minimum and maximum, widened by 0.5
 * each way when they are equal; [0, 1] for no elements), or the bins
 * between the given ascending 1-D `bins` edges. A bin holds the values from
 * its left edge up to its right, the last one its right edge too; values
 * outside and NaN are not counted. Float input; the histogram has its
 * dtype. With the data's range its edges are computed on the device
 * (`lo + step·i` for the first half, `hi - step·(bins - i)` after, which
 * may differ from PyTorch's fused multiply-adds in the last bit), and a
 * NaN or infinite element is an error reported by the next read. No
 * gradient (as PyTorch).
 */
export function histogram(
  x: Tensor,
  bins: number | Tensor,
  options: HistogramOptions = {},
): Histogram {
  requireTensor("histogram", x, "input");
  requireFloat("histogram", x);
  const { range, weight, density = false } = options;
  if (weight !== undefined) {
    requireTensor("histogram", weight, "weight");
    commonDevice("histogram", x, weight);
    if (
      weight.dtype !== x.dtype || weight.shape.join() !== x.shape.join() || weight.ndim !== x.ndim
    ) {
      throw new RangeError(
        `histogram: weight (${weight.dtype}, shape ${
          formatShape(weight.shape)
        }) must have the input's dtype and shape (${x.dtype}, ${formatShape(x.shape)})`,
      );
    }
  }
  let edges: Tensor;
  if (bins instanceof Tensor) {
    commonDevice("histogram", x, bins);
    if (range !== undefined) {
      throw new TypeError("histogram: give range only with a number of bins, not with bin edges");
    }
    if (bins.ndim !== 1 || bins.numel() < 2 || bins.dtype !== x.dtype) {
      throw new RangeError(
        `histogram: bin edges must be a 1-D ${x.dtype} tensor of at least 2 edges (1 bin), got ${bins.dtype} of shape ${
          formatShape(bins.shape)
        }`,
      );
    }
    edges = clone(bins);
  } else {
    if (!Number.isInteger(bins) || bins <= 0) {
      throw new RangeError(`histogram: bins must be a positive integer, got ${bins}`);
    }
    edges = binEdges(x, bins, range);
  }
  const count = edges.numel() - 1;
  const n = x.numel();
  const hist = noGrad(() =>
    tidy(() => {
      if (count === 0 || n === 0) {
        // With density, 0 / 0 as PyTorch: NaN.
        return full([Math.max(count, 0)], density ? NaN : 0, { dtype: x.dtype, device: x.device });
      }
      const flat = x.reshape([n]);
      const lo = narrow(edges, 0, 0, 1);
      const hi = narrow(edges, 0, count, 1);
      const inside = flat.ge(lo).mul(flat.le(hi));
      // The last edge i with edges[i] <= v (the right edge itself in the last bin).
      const bin = searchsorted(edges, flat, { right: true }).sub(1).minimum(count - 1);
      const at = bin.where(inside, count).reshape([1, n, 1]);
      const ones = weight
        ? weight.reshape([1, n, 1])
        : full([1, n, 1], 1, { dtype: x.dtype, device: x.device });
      let h = scatterAddRaw(ones, at, 1, count + 1).reshape([count + 1]).narrow(0, 0, count);
      if (density) {
        const widths = narrow(edges, 0, 1, count).sub(narrow(edges, 0, 0, count));
        h = h.div(h.sum().mul(widths));
      }
      return h;
    })
  );
  return Object.assign([hist, edges] as const, { hist, binEdges: edges });
}

/** The `bins + 1` edges over `range`, or over the data's range (on the device). */
function binEdges(x: Tensor, bins: number, range: readonly [number, number] | undefined): Tensor {
  const options = { dtype: x.dtype, device: x.device };
  if (range !== undefined) {
    const [lo, hi] = range ?? [];
    if (
      typeof lo !== "number" || typeof hi !== "number" || !Number.isFinite(lo) ||
      !Number.isFinite(hi)
    ) {
      throw new RangeError(`histogram: range of [${lo}, ${hi}] is not finite`);
    }
    if (lo > hi) throw new RangeError(`histogram: range min ${lo} must not exceed max ${hi}`);
    return lo === hi
      ? linspace(lo - 0.5, hi + 0.5, bins + 1, options)
      : linspace(lo, hi, bins + 1, options);
  }
  if (x.numel() === 0) return linspace(0, 1, bins + 1, options);
  return noGrad(() =>
    tidy(() => {
      const flat = x.reshape([x.numel()]);
      const extremes = stack([flat.min(), flat.max()]);
      checkLater(
        extremes,
        ([a, b]) =>
          Number.isFinite(a) && Number.isFinite(b)
            ? null
            : `histogram: the input's range [${a}, ${b}] is not finite`,
      );
      const same = narrow(extremes, 0, 0, 1).eq(narrow(extremes, 0, 1, 1)).mul(0.5);
      const lo = narrow(extremes, 0, 0, 1).sub(same);
      const hi = narrow(extremes, 0, 1, 1).add(same);
      const step = hi.sub(lo).div(bins);
      const half = Math.floor((bins + 1) / 2);
      const i = tensor(Array.from({ length: bins + 1 }, (_, j) => j), options);
      const first = lo.add(step.mul(i));
      const second = hi.sub(step.mul(i.neg().add(bins)));
      const isFirst = tensor(
        Array.from({ length: bins + 1 }, (_, j) => (j < half ? 1 : 0)),
        options,
      );
      return first.where(isFirst, second);
    })
  );
}
