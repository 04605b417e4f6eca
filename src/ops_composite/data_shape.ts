/**
 * Ops whose output shape depends on the values: `nonzero`, `argwhere`,
 * `maskedSelect`, `unique`, `uniqueConsecutive`. multigrad never reads a
 * device synchronously, so these are async (as TensorFlow.js's
 * `whereAsync`): each reads its input back once, in one round trip, and
 * builds the result from the host values (gathering on the device where a
 * gradient must flow).
 * @module
 */

import { noGrad } from "../autograd.ts";
import type { TypedArray } from "../dtype.ts";
import { broadcastShapes, formatShape, normalizeDim } from "../shape.ts";
import type { Tensor } from "../tensor.ts";
import { tensor } from "../ops/factory.ts";
import { indexSelect } from "../ops/view.ts";
import { commonDevice } from "../ops/util.ts";
import { requireTensor } from "./util.ts";

/** int32 host values as a tensor on `device`. */
function ints(values: ArrayLike<number>, shape: number[], device: Tensor["device"]): Tensor {
  return tensor(Int32Array.from(values), { shape, dtype: "int32", device });
}

/** The flat positions of the nonzero values (NaN is nonzero, -0 is not). */
function positions(host: TypedArray): number[] {
  const out: number[] = [];
  for (let i = 0; i < host.length; i++) if (host[i] !== 0) out.push(i);
  return out;
}

/** Options of {@link nonzero}. */
export interface NonzeroOptions {
  /** One 1-D index tensor per dim instead of one `[n, ndim]` tensor (default false). */
  asTuple?: boolean;
}

/**
 * The indices of `x`'s nonzero elements (NaN included), as
 * `torch.nonzero`: an int32 `[n, ndim]` tensor, row-major order (PyTorch:
 * int64), or with `asTuple` one 1-D tensor per dim (a 0-d input counts as
 * 1-D). The count depends on the values, so it is async: the promise
 * settles once `x` has been read back (one read).
 */
export function nonzero(x: Tensor, options?: { asTuple?: false }): Promise<Tensor>;
/** {@link nonzero} as one index tensor per dim (`torch.nonzero(as_tuple=True)`). */
export function nonzero(x: Tensor, options: { asTuple: true }): Promise<Tensor[]>;
/** {@link nonzero} with the form chosen at run time. */
export function nonzero(x: Tensor, options: NonzeroOptions): Promise<Tensor | Tensor[]>;
export async function nonzero(
  x: Tensor,
  options: NonzeroOptions = {},
): Promise<Tensor | Tensor[]> {
  requireTensor("nonzero", x, "input");
  const host = await x.data();
  const at = positions(host);
  const shape = x.ndim === 0 && options.asTuple ? [1] : [...x.shape];
  const coords = shape.map(() => new Int32Array(at.length));
  at.forEach((p, row) => {
    for (let k = shape.length - 1; k >= 0; k--) {
      coords[k][row] = p % shape[k];
      p = Math.floor(p / shape[k]);
    }
  });
  if (options.asTuple) return coords.map((c) => ints(c, [at.length], x.device));
  const flat = new Int32Array(at.length * shape.length);
  at.forEach((_, row) => shape.forEach((_, k) => (flat[row * shape.length + k] = coords[k][row])));
  return ints(flat, [at.length, shape.length], x.device);
}

/**
 * The indices of `x`'s nonzero elements as an int32 `[n, ndim]` tensor, as
 * `torch.argwhere` (= {@link nonzero}; async, one read).
 */
export function argwhere(x: Tensor): Promise<Tensor> {
  return nonzero(x);
}

/**
 * The elements of `x` where `mask` is nonzero, as a 1-D tensor in
 * row-major order, as `torch.masked_select` (`x` and `mask` broadcast
 * together). Async: the promise settles once the mask has been read back
 * (one read); the elements are gathered on the device, so the gradient
 * flows back to them (summed over broadcasting).
 */
export async function maskedSelect(x: Tensor, mask: Tensor): Promise<Tensor> {
  requireTensor("maskedSelect", x, "input");
  requireTensor("maskedSelect", mask, "mask");
  commonDevice("maskedSelect", x, mask);
  const shape = [...broadcastShapes(x.shape, mask.shape, "maskedSelect")];
  const full = (
    t: Tensor,
  ) => (t.shape.length === shape.length && t.shape.every((n, i) => n === shape[i])
    ? t
    : t.expand(shape));
  const host = await noGrad(() => full(mask)).data();
  const at = positions(host);
  const n = shape.reduce((a, b) => a * b, 1);
  return indexSelect(full(x).reshape([n]), 0, ints(at, [at.length], x.device));
}

/** Options of {@link unique}. */
export interface UniqueOptions {
  /** Accepted for PyTorch's signature: the output is sorted either way (false allows any order). */
  sorted?: boolean;
  /** Also give, for each element (each slice along `dim`), the index of its unique value. */
  returnInverse?: boolean;
  /** Also give how often each unique value occurs. */
  returnCounts?: boolean;
  /** Unique slices along this dim instead of unique elements of the flattened input. */
  dim?: number;
}

/** Options of {@link uniqueConsecutive}. */
export type UniqueConsecutiveOptions = Omit<UniqueOptions, "sorted">;

/**
 * The unique values and, as asked, the inverse indices and counts, in
 * PyTorch's order: `[values, inverse]`, `[values, counts]` or `[values,
 * inverse, counts]`, also as named fields.
 */
export type UniqueResult = readonly Tensor[] & {
  /** The unique values (slices along `dim`). */
  readonly values: Tensor;
  /** int32: where each element (slice) of the input went among `values`. */
  readonly inverse?: Tensor;
  /** int32: how many elements (slices) each unique value stands for. */
  readonly counts?: Tensor;
};

type Slices = { count: number; key: (i: number) => number[] };

/** The input as `count` slices along `dim` (every element its own slice without one). */
function slicesOf(x: Tensor, host: TypedArray, dim: number | undefined): Slices {
  if (dim === undefined) return { count: host.length, key: (i) => [host[i]] };
  const d = normalizeDim(dim, x.ndim, "unique");
  const outer = x.shape.slice(0, d).reduce((a, b) => a * b, 1);
  const size = x.shape[d];
  const inner = x.shape.slice(d + 1).reduce((a, b) => a * b, 1);
  return {
    count: size,
    key: (i) => {
      const out: number[] = [];
      for (let o = 0; o < outer; o++) {
        for (let k = 0; k < inner; k++) out.push(host[(o * size + i) * inner + k]);
      }
      return out;
    },
  };
}

/** Ascending lexicographic order, NaN after every number; 0 for equal keys (NaN never equal). */
function compareKeys(a: number[], b: number[]): number {
  for (let i = 0; i < a.length; i++) {
    const [u, v] = [a[i], b[i]];
    if (u === v) continue;
    if (Number.isNaN(u)) return Number.isNaN(v) ? 0 : 1;
    if (Number.isNaN(v)) return -1;
    return u < v ? -1 : 1;
  }
  return 0;
}
const sameKey = (a: number[], b: number[]) => a.every((u, i) => u === b[i]);

function uniqueResult(
  op: string,
  x: Tensor,
  dim: number | undefined,
  groups: number[][],
  count: number,
  options: UniqueConsecutiveOptions,
): Tensor | UniqueResult {
  // Each group's first member stands for it; values are gathered, so they are exactly x's.
  const firsts = ints(groups.map((g) => g[0]), [groups.length], x.device);
  const values = noGrad(() => {
    if (dim === undefined) return indexSelect(x.reshape([x.numel()]), 0, firsts);
    return indexSelect(x, normalizeDim(dim, x.ndim, op), firsts);
  });
  const { returnInverse = false, returnCounts = false } = options;
  if (!returnInverse && !returnCounts) return values;
  const parts: Tensor[] = [values];
  const named: { values: Tensor; inverse?: Tensor; counts?: Tensor } = { values };
  if (returnInverse) {
    const inverse = new Int32Array(count);
    groups.forEach((g, j) => g.forEach((i) => (inverse[i] = j)));
    named.inverse = ints(inverse, dim === undefined ? [...x.shape] : [count], x.device);
    parts.push(named.inverse);
  }
  if (returnCounts) {
    named.counts = ints(groups.map((g) => g.length), [groups.length], x.device);
    parts.push(named.counts);
  }
  return Object.assign(parts, named) as UniqueResult;
}

function uniqueArgs(op: string, x: Tensor, dim: number | undefined): void {
  requireTensor(op, x, "input");
  if (dim !== undefined) {
    if (x.ndim === 0) {
      throw new RangeError(`${op}: a 0-d tensor has no dim ${dim} to take slices along`);
    }
    const d = normalizeDim(dim, x.ndim, op);
    // PyTorch has no slices to compare when a dim other than `dim` is empty.
    if (x.shape.some((n, k) => n === 0 && k !== d)) {
      throw new RangeError(
        `${op}: cannot take unique slices along dim ${d} of a tensor with 0-sized dims other than dim ${d} (shape ${
          formatShape(x.shape)
        })`,
      );
    }
  }
}

/**
 * The unique elements of `x` (or unique slices along `dim`), sorted
 * ascending (lexicographically for slices), as `torch.unique`; with
 * `returnInverse` and/or `returnCounts` a {@link UniqueResult}. NaNs are
 * never equal, so each NaN is its own unique value, after every number
 * (PyTorch 1.13's cpu kernel gives the same values, but mixes up the
 * inverse and counts of NaN). Indices and counts are int32 (PyTorch:
 * int64). Async (one read of `x`); no gradient (PyTorch has none).
 */
export function unique(
  x: Tensor,
  options?: UniqueOptions & { returnInverse?: false; returnCounts?: false },
): Promise<Tensor>;
/** {@link unique} with the inverse indices and/or counts. */
export function unique(x: Tensor, options: UniqueOptions): Promise<UniqueResult>;
export async function unique(
  x: Tensor,
  options: UniqueOptions = {},
): Promise<Tensor | UniqueResult> {
  uniqueArgs("unique", x, options.dim);
  const host = await x.data();
  const { count, key } = slicesOf(x, host, options.dim);
  const groups: number[][] = [];
  if (options.dim === undefined) {
    // Elements, not slices: the numbers compared directly (a key array each is ~5x slower).
    const order = new Uint32Array(count).map((_, i) => i);
    order.sort((a, b) => {
      const u = host[a];
      const v = host[b];
      if (u < v) return -1;
      if (u > v) return 1;
      // Equal, or NaN (after every number; NaNs among themselves by position).
      const nan = Number(Number.isNaN(u)) - Number(Number.isNaN(v));
      return nan || a - b;
    });
    for (const i of order) {
      const last = groups.at(-1);
      if (last && host[last[0]] === host[i]) last.push(i);
      else groups.push([i]);
    }
  } else {
    const keys = Array.from({ length: count }, (_, i) => key(i));
    const order = keys.map((_, i) => i).sort((a, b) => compareKeys(keys[a], keys[b]) || a - b);
    for (const i of order) {
      const last = groups.at(-1);
      if (last && sameKey(keys[last[0]], keys[i])) last.push(i);
      else groups.push([i]);
    }
  }
  return uniqueResult("unique", x, options.dim, groups, count, options);
}

/**
 * `x` with each run of equal consecutive elements (slices along `dim`)
 * collapsed to one, as `torch.unique_consecutive`; with `returnInverse`
 * and/or `returnCounts` a {@link UniqueResult}. NaNs are never equal.
 * Async (one read of `x`); no gradient.
 */
export function uniqueConsecutive(
  x: Tensor,
  options?: UniqueConsecutiveOptions & { returnInverse?: false; returnCounts?: false },
): Promise<Tensor>;
/** {@link uniqueConsecutive} with the inverse indices and/or counts. */
export function uniqueConsecutive(
  x: Tensor,
  options: UniqueConsecutiveOptions,
): Promise<UniqueResult>;
export async function uniqueConsecutive(
  x: Tensor,
  options: UniqueConsecutiveOptions = {},
): Promise<Tensor | UniqueResult> {
  uniqueArgs("uniqueConsecutive", x, options.dim);
  const host = await x.data();
  const { count, key } = slicesOf(x, host, options.dim);
  const groups: number[][] = [];
  let previous: number[] | null = null;
  for (let i = 0; i < count; i++) {
    const k = key(i);
    if (previous && sameKey(previous, k)) groups.at(-1)!.push(i);
    else groups.push([i]);
    previous = k;
  }
  return uniqueResult("uniqueConsecutive", x, options.dim, groups, count, options);
}
