/**
 * Out-of-place writes along one dim by an index (`indexAdd`, `indexCopy`,
 * `indexFill`) and binary search (`searchsorted`, `bucketize`).
 * @module
 */

import { isGradEnabled, record } from "../autograd.ts";
import { checkFill } from "../dtype.ts";
import { formatShape, normalizeDim } from "../shape.ts";
import { Tensor } from "../tensor.ts";
import { binaryRaw, cast } from "../ops/elementwise.ts";
import { full, ones, zeros } from "../ops/factory.ts";
import { gatherInRange, scatterAddRaw } from "../ops/indexing.ts";
import { checkLater } from "../ops/check.ts";
import { checkIndexRange, indexSelect } from "../ops/view.ts";
import { computed } from "./util.ts";
import { owned } from "./owned.ts";

/** The checked dim and index of an index op (a 1-D int32 index in range for `dim` of `x`). */
function indexArgs(op: string, x: Tensor, dim: number, index: Tensor): number {
  if (!(x instanceof Tensor)) throw new TypeError(`${op}: input must be a Tensor, got ${typeof x}`);
  const d = normalizeDim(dim, Math.max(x.ndim, 1), op);
  if (!(index instanceof Tensor) || index.dtype !== "int32" || index.ndim > 1) {
    throw new TypeError(
      `${op}: index must be a 0-D or 1-D int32 tensor, got ${
        index instanceof Tensor
          ? `${index.dtype} of shape ${formatShape(index.shape)}`
          : typeof index
      }`,
    );
  }
  if (index.device !== x.device) {
    throw new TypeError(`${op}: index is on ${index.device}, the input on ${x.device}`);
  }
  checkIndexInDim(op, index, x, d);
  return d;
}

/** Checks every value of `index` in range for dim `d` of `x` (size 1 for a 0-D `x`). */
export function checkIndexInDim(op: string, index: Tensor, x: Tensor, d: number): void {
  const size = x.ndim === 0 ? 1 : x.shape[d];
  checkIndexRange(
    index,
    size,
    (bad) =>
      `${op}: index ${bad} is out of range for dim ${d} of size ${size} (shape ${
        formatShape(x.shape)
      })`,
  );
}

/** `source` checked against `x` for an index op: `x`'s shape with `index.numel()` at `d`. */
function sourceArgs(op: string, x: Tensor, d: number, index: Tensor, source: Tensor): void {
  if (!(source instanceof Tensor)) {
    throw new TypeError(`${op}: source must be a Tensor, got ${typeof source}`);
  }
  const want = x.ndim === 0
    ? [index.numel()]
    : x.shape.map((n, i) => (i === d ? index.numel() : n));
  // A 0-d input takes a 0-d or 1-D source of one element per index, as PyTorch.
  const fits = x.ndim === 0
    ? source.ndim <= 1 && source.numel() === index.numel()
    : source.ndim === want.length && want.every((n, i) => source.shape[i] === n);
  if (!fits) {
    throw new RangeError(
      `${op}: source of shape ${formatShape(source.shape)} does not fit the input of shape ${
        formatShape(x.shape)
      } with ${index.numel()} indices along dim ${d} (expected ${formatShape(want)})`,
    );
  }
  if (source.dtype !== x.dtype || source.device !== x.device) {
    throw new TypeError(
      `${op}: source is ${source.dtype} on ${source.device}, the input ${x.dtype} on ${x.device}`,
    );
  }
}

/** The input as [outer, size, inner] (a 0-d input as [1]) and the index as 1-D. */
function flat(x: Tensor, index: Tensor): [Tensor, Tensor] {
  return [x.ndim === 0 ? x.reshape([1]) : x, index.reshape([index.numel()])];
}

/** `src` (shaped as `x` but `count` at `d`) summed into a zero tensor of `x`'s shape by `index`. */
function scatterRows(x: Tensor, d: number, index: Tensor, src: Tensor): Tensor {
  const count = index.numel();
  // scatterAdd takes an index of the source's shape, as gather's adjoint.
  const full = index.reshape(src.shape.map((_, i) => (i === d ? count : 1))).expand(src.shape);
  return scatterAddRaw(src, full.clone(), d, x.shape[d]);
}

/** How many times each position along `d` is indexed, shaped to broadcast against `x`. */
function hits(x: Tensor, d: number, index: Tensor): Tensor {
  const size = x.shape[d];
  const counts = scatterAddRaw(
    ones([index.numel()], { dtype: "int32", device: x.device }),
    index,
    0,
    size,
  );
  return counts.reshape(x.shape.map((n, i) => (i === d ? n : 1)));
}

/** Options of {@link indexAdd}. */
export interface IndexAddOptions {
  /** The factor of `source` (default 1). */
  alpha?: number;
}

/**
 * `x` with `alpha·source[j]` added to slice `index[j]` along `dim`, as
 * `torch.index_add` (out of place): `source` has `x`'s shape but
 * `index.numel()` at `dim`; repeated indices add up. `index` is int32. The
 * gradient is `g` for `x` and `alpha·g[index]` for `source`.
 */
export function indexAdd(
  x: Tensor,
  dim: number,
  index: Tensor,
  source: Tensor,
  options: IndexAddOptions = {},
): Tensor {
  return owned(
    () => {
      const { alpha = 1 } = options;
      if (typeof alpha !== "number") throw new TypeError(`indexAdd: alpha must be a number`);
      const d = indexArgs("indexAdd", x, dim, index);
      sourceArgs("indexAdd", x, d, index, source);
      const out = computed(() => {
        const [fx, fi] = flat(x, index);
        const src = source.reshape(fx.ndim === 1 && x.ndim === 0 ? [fi.numel()] : source.shape);
        const added = scatterRows(fx, d, fi, alpha === 1 ? src : src.mul(alpha));
        return fx.add(added).reshape(x.shape);
      });
      return record("indexAdd", [x, source], out, ([g]) => {
        // Recorded under createGraph (grad mode is on in backward only then).
        const [fg, fi] = flat(g!, index);
        const rows = indexSelect(fg, d, fi);
        const picked = (alpha === 1 ? rows : rows.mul(alpha)).reshape(source.shape);
        return [x.requiresGrad ? g : null, source.requiresGrad ? picked : null];
      });
    },
    x,
    source,
  );
}

/**
 * `x` with slice `index[j]` along `dim` replaced by `source[j]`, as
 * `torch.index_copy` (out of place). A repeated index is an error (PyTorch
 * leaves which copy wins unspecified), found at the next read of the
 * device. The gradient is `g` where `x` was kept and `g[index]` for `source`.
 */
export function indexCopy(x: Tensor, dim: number, index: Tensor, source: Tensor): Tensor {
  return owned(
    () => {
      const d = indexArgs("indexCopy", x, dim, index);
      sourceArgs("indexCopy", x, d, index, source);
      const [fx, fi] = flat(x, index);
      const [kept, most] = computed(() => {
        const count = hits(fx, d, fi);
        return [count.eq(0), count.max().reshape([1])];
      });
      if (fi.numel() > 1) {
        checkLater(
          most,
          (host) =>
            host[0] > 1
              ? `indexCopy: index repeats a position along dim ${d} (${fi.numel()} indices, shape ${
                formatShape(x.shape)
              }); each must be distinct`
              : null,
        );
      } else most.dispose();
      const out = computed(() => {
        const src = source.reshape(fx.ndim === 1 && x.ndim === 0 ? [fi.numel()] : source.shape);
        return fx.where(kept, scatterRows(fx, d, fi, src)).reshape(x.shape);
      });
      // The mask is the backward's alone: without one, it goes now rather than at GC.
      if (!isGradEnabled() || !x.requiresGrad) kept.dispose();
      return record("indexCopy", [x, source], out, ([g]) => {
        const [fg] = flat(g!, index);
        return [
          x.requiresGrad ? fg.mul(cast(kept, g!.dtype)).reshape(x.shape) : null,
          source.requiresGrad ? indexSelect(fg, d, fi).reshape(source.shape) : null,
        ];
      });
    },
    x,
    source,
  );
}

/**
 * `x` with every slice `index[j]` along `dim` set to `value`, as
 * `torch.index_fill` (out of place; repeats allowed). The gradient passes
 * where `x` was kept and is 0 where it was filled. A fraction for an int32
 * `x` truncates toward zero, as PyTorch's (a value int32 cannot hold is a RangeError).
 */
export function indexFill(x: Tensor, dim: number, index: Tensor, value: number): Tensor {
  return owned(() => {
    if (typeof value !== "number") {
      throw new TypeError(`indexFill: value must be a number, got ${typeof value}`);
    }
    checkFill(x.dtype, value, "indexFill");
    // where() would promote a fraction to float32: truncate it first, as PyTorch's int32 fill.
    const fill = x.dtype === "int32" ? Math.trunc(value) : value;
    const d = indexArgs("indexFill", x, dim, index);
    const [fx, fi] = flat(x, index);
    const kept = computed(() => hits(fx, d, fi).eq(0));
    const out = computed(() => fx.where(kept, fill).reshape(x.shape));
    if (!isGradEnabled() || !x.requiresGrad) kept.dispose();
    return record("indexFill", [x], out, ([g]) => [
      flat(g!, index)[0].mul(cast(kept, g!.dtype)).reshape(x.shape),
    ]);
  }, x);
}

/** Options of {@link searchsorted} and {@link bucketize}. */
export interface SearchsortedOptions {
  /**
   * Whether a value equal to sorted entries goes after them (the last
   * index `i` with `sorted[i-1] <= v`) rather than before them (default
   * false: the first `i` with `v <= sorted[i]`).
   */
  right?: boolean;
}

/**
 * Where each value would be inserted into `sorted` (ascending along its
 * last dim) to keep it sorted, as `torch.searchsorted`: int32 indices in
 * [0, n], of `values`' shape. A 1-D `sorted` serves every value; otherwise
 * its leading dims must equal those of `values` (one sorted row per row of
 * values). NaN goes last (index n), as PyTorch's comparisons place it. It
 * is PyTorch's binary search (⌈log₂(n+1)⌉ gathers for all values at once),
 * so NaN among the sorted entries gives PyTorch's answers too; `sorted`
 * and `values` share a dtype.
 */
export function searchsorted(
  sorted: Tensor,
  values: Tensor,
  options: SearchsortedOptions = {},
): Tensor {
  return search("searchsorted", sorted, values, options.right ?? false);
}

/**
 * The bucket of each element of `input` among the 1-D ascending
 * `boundaries`, as `torch.bucketize`: `searchsorted(boundaries, input)`
 * (with `right`, a value equal to a boundary goes to the bucket above it).
 */
export function bucketize(
  input: Tensor,
  boundaries: Tensor,
  options: SearchsortedOptions = {},
): Tensor {
  if (boundaries instanceof Tensor && boundaries.ndim !== 1) {
    throw new RangeError(
      `bucketize: boundaries must be 1-D, got shape ${formatShape(boundaries.shape)}`,
    );
  }
  return search("bucketize", boundaries, input, options.right ?? false);
}

function search(op: string, sorted: Tensor, values: Tensor, right: boolean): Tensor {
  if (!(sorted instanceof Tensor) || !(values instanceof Tensor)) {
    throw new TypeError(`${op}: expected Tensors, got ${typeof sorted} and ${typeof values}`);
  }
  if (sorted.ndim === 0) throw new RangeError(`${op}: the sorted tensor must have at least 1 dim`);
  const lead = sorted.shape.slice(0, -1);
  if (
    sorted.ndim > 1 &&
    (values.ndim !== sorted.ndim || lead.some((n, i) => values.shape[i] !== n))
  ) {
    throw new RangeError(
      `${op}: the sorted tensor (shape ${
        formatShape(sorted.shape)
      }) must be 1-D or share all but its last dim with the values (shape ${
        formatShape(values.shape)
      })`,
    );
  }
  if (sorted.dtype !== values.dtype || sorted.device !== values.device) {
    throw new TypeError(
      `${op}: the sorted tensor is ${sorted.dtype} on ${sorted.device}, the values ${values.dtype} on ${values.device}`,
    );
  }
  const n = sorted.shape.at(-1)!;
  return computed(() => {
    // PyTorch's binary search, step for step (so a NaN among the sorted entries sends each
    // value where PyTorch's does), every value at once: [start, end) halves each step.
    const flatValues = sorted.ndim === 1 ? values.reshape([values.numel()]) : values;
    let start = zeros([...flatValues.shape], { dtype: "int32", device: values.device });
    if (n === 0) return start.reshape(values.shape);
    let end = start.add(n);
    const two = full([], 2, { dtype: "int32", device: values.device });
    for (let length = n; length > 0; length >>= 1) {
      const mid = binaryRaw("div", start.add(end), two).minimum(n - 1);
      const at = gatherInRange(sorted, -1, mid);
      // Not (at >= v), or not (at > v) with `right`: NaN on either side moves the start.
      const before = (right ? at.gt(flatValues) : at.ge(flatValues)).eq(0);
      const active = start.lt(end);
      const [up, down] = [active.mul(before), active.mul(before.eq(0))];
      start = mid.add(1).where(up, start);
      end = mid.where(down, end);
    }
    return start.reshape(values.shape);
  });
}
