/**
 * Shape operations in NumPy's spelling, as PyTorch has them: `movedim`,
 * `swapaxes`, `broadcastTo`, `broadcastTensors`, `broadcastShapes`,
 * `atleast1d/2d/3d`, the `*stack`s, `tensorSplit` and `h/v/dsplit`,
 * `unflatten`, `ravel`, `flipud`, `fliplr`. All are compositions of
 * reshapes, permutes, expands, cats and narrows (their gradients come free).
 * @module
 */

import { broadcastShapes as broadcastPair, formatShape, normalizeDim } from "../shape.ts";
import { forwardScope } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import { cat, narrow } from "../ops/view.ts";
import { flip } from "./rearrange.ts";
import { requireTensor } from "./util.ts";
import { owned } from "./owned.ts";

function dimsOf(op: string, what: string, v: number | readonly number[]): number[] {
  const list = typeof v === "number" ? [v] : Array.isArray(v) ? [...v] : null;
  if (!list || !list.every(Number.isInteger)) {
    throw new TypeError(
      `${op}: ${what} must be an integer or an array of integers, got ${JSON.stringify(v)}`,
    );
  }
  return list;
}

/**
 * `x` with dims `source` moved to positions `destination`, the others
 * keeping their order, as `torch.movedim` (numbers or equal-length arrays).
 */
export function movedim(
  x: Tensor,
  source: number | readonly number[],
  destination: number | readonly number[],
): Tensor {
  requireTensor("movedim", x, "the input");
  const src = dimsOf("movedim", "source", source);
  const dst = dimsOf("movedim", "destination", destination);
  if (src.length !== dst.length) {
    throw new RangeError(
      `movedim: source ${JSON.stringify(source)} and destination ${
        JSON.stringify(destination)
      } must have the same number of dims (${src.length} vs ${dst.length})`,
    );
  }
  const s = src.map((d) => normalizeDim(d, x.ndim, "movedim"));
  const t = dst.map((d) => normalizeDim(d, x.ndim, "movedim"));
  for (const [what, list, given] of [["source", s, source], ["destination", t, destination]]) {
    if (new Set(list as number[]).size !== (list as number[]).length) {
      throw new RangeError(`movedim: repeated dim in ${what} ${JSON.stringify(given)}`);
    }
  }
  const order = new Array<number>(x.ndim).fill(-1);
  s.forEach((d, i) => (order[t[i]] = d));
  const rest = x.shape.map((_, i) => i).filter((i) => !s.includes(i));
  for (let i = 0, r = 0; i < x.ndim; i++) if (order[i] < 0) order[i] = rest[r++];
  return order.every((d, i) => d === i) ? x.reshape(x.shape) : x.permute(order);
}

/** As {@link movedim} (`torch.moveaxis`). */
export const moveaxis = (
  x: Tensor,
  source: number | readonly number[],
  destination: number | readonly number[],
): Tensor => movedim(x, source, destination);

/** Dims `dim0` and `dim1` swapped, as `torch.swapaxes` (= `transpose`). */
export function swapaxes(x: Tensor, dim0: number, dim1: number): Tensor {
  requireTensor("swapaxes", x, "the input");
  return x.transpose(dim0, dim1);
}

/** As {@link swapaxes} (`torch.swapdims`). */
export const swapdims = (x: Tensor, dim0: number, dim1: number): Tensor => swapaxes(x, dim0, dim1);

/** `x` broadcast to `shape` (-1 keeps a dim), as `torch.broadcast_to` (= `expand`). */
export function broadcastTo(x: Tensor, shape: readonly number[]): Tensor {
  requireTensor("broadcastTo", x, "the input");
  return x.expand(shape);
}

/**
 * The common broadcast shape of `shapes`, as `torch.broadcast_shapes` (a
 * number stands for a 1-D shape); a RangeError names the shapes that clash.
 */
export function broadcastShapes(...shapes: (number | readonly number[])[]): number[] {
  return shapes.reduce<number[]>((acc, s, i) => {
    const shape = typeof s === "number" ? [s] : s;
    if (!Array.isArray(shape) || !shape.every((n) => Number.isInteger(n) && n >= 0)) {
      throw new TypeError(
        `broadcastShapes: shape ${i} must be a non-negative integer or an array of them, got ${
          JSON.stringify(s)
        }`,
      );
    }
    return broadcastPair(acc, shape, "broadcastShapes");
  }, []);
}

/** The tensors broadcast to their common shape, as `torch.broadcast_tensors`. */
export function broadcastTensors(...tensors: Tensor[]): Tensor[] {
  tensors.forEach((t, i) => requireTensor("broadcastTensors", t, `argument ${i}`));
  const shape = broadcastShapes(...tensors.map((t) => t.shape));
  return tensors.map((t) => t.expand(shape));
}

function atleast(op: string, args: (Tensor | readonly Tensor[])[], fix: (t: Tensor) => Tensor) {
  const single = args.length === 1 && args[0] instanceof Tensor;
  const list = (args.length === 1 && Array.isArray(args[0]) ? args[0] : args) as Tensor[];
  list.forEach((t, i) => requireTensor(op, t, `argument ${i}`));
  return single ? fix(list[0]) : list.map(fix);
}

/** `x` itself when it has ≥ 1 dim, else reshaped to [1] (`torch.atleast_1d`); several give an array. */
export function atleast1d(x: Tensor): Tensor;
/** Each tensor given at least 1 dim. */
export function atleast1d(...tensors: Tensor[]): Tensor[];
/** Each tensor of the array given at least 1 dim. */
export function atleast1d(tensors: readonly Tensor[]): Tensor[];
export function atleast1d(...args: (Tensor | readonly Tensor[])[]): Tensor | Tensor[] {
  return atleast("atleast1d", args, (t) => (t.ndim >= 1 ? t : t.reshape([1])));
}

/** `x` with ≥ 2 dims: 0-d → [1, 1], [n] → [1, n] (`torch.atleast_2d`); several give an array. */
export function atleast2d(x: Tensor): Tensor;
/** Each tensor given at least 2 dims. */
export function atleast2d(...tensors: Tensor[]): Tensor[];
/** Each tensor of the array given at least 2 dims. */
export function atleast2d(tensors: readonly Tensor[]): Tensor[];
export function atleast2d(...args: (Tensor | readonly Tensor[])[]): Tensor | Tensor[] {
  return atleast("atleast2d", args, to2d);
}

const to2d = (t: Tensor) => (t.ndim >= 2 ? t : t.reshape([1, t.numel()]));

/**
 * `x` with ≥ 3 dims: 0-d → [1, 1, 1], [n] → [1, n, 1], [m, n] → [m, n, 1]
 * (`torch.atleast_3d`); several give an array.
 */
export function atleast3d(x: Tensor): Tensor;
/** Each tensor given at least 3 dims. */
export function atleast3d(...tensors: Tensor[]): Tensor[];
/** Each tensor of the array given at least 3 dims. */
export function atleast3d(tensors: readonly Tensor[]): Tensor[];
export function atleast3d(...args: (Tensor | readonly Tensor[])[]): Tensor | Tensor[] {
  return atleast("atleast3d", args, to3d);
}

const to3d = (t: Tensor) =>
  t.ndim >= 3 ? t : t.ndim === 2 ? t.reshape([...t.shape, 1]) : t.reshape([1, t.numel(), 1]);

function tensorList(op: string, tensors: readonly Tensor[]): Tensor[] {
  if (!Array.isArray(tensors) || tensors.length === 0) {
    throw new RangeError(`${op}: expected a non-empty array of tensors`);
  }
  tensors.forEach((t, i) => requireTensor(op, t, `tensor ${i}`));
  return [...tensors];
}

/**
 * Concatenated along dim 1 (dim 0 for 1-D tensors), 0-d ones as [1], as
 * `torch.hstack`.
 */
export function hstack(tensors: readonly Tensor[]): Tensor {
  const list = tensorList("hstack", tensors).map((t) => (t.ndim >= 1 ? t : t.reshape([1])));
  return forwardScope(() => cat(list, list[0].ndim === 1 ? 0 : 1));
}

/** Concatenated along dim 0 after `atleast2d`, as `torch.vstack` (= `rowStack`). */
export function vstack(tensors: readonly Tensor[]): Tensor {
  return forwardScope(() => cat(tensorList("vstack", tensors).map(to2d), 0));
}

/** As {@link vstack} (`torch.row_stack`). */
export const rowStack = (tensors: readonly Tensor[]): Tensor => vstack(tensors);

/** Concatenated along dim 2 after `atleast3d`, as `torch.dstack`. */
export function dstack(tensors: readonly Tensor[]): Tensor {
  return owned(() => forwardScope(() => cat(tensorList("dstack", tensors).map(to3d), 2)), tensors);
}

/** 0-d and 1-D tensors as columns [n, 1], then `hstack`, as `torch.column_stack`. */
export function columnStack(tensors: readonly Tensor[]): Tensor {
  const list = tensorList("columnStack", tensors);
  const column = (t: Tensor) => (t.ndim <= 1 ? t.reshape([t.numel(), 1]) : t);
  return owned(() => forwardScope(() => cat(list.map(column), 1)), list);
}

/** As `cat` (`torch.concat`). */
export function concat(tensors: readonly Tensor[], dim = 0): Tensor {
  return cat(tensors, dim);
}

/** As `cat` (`torch.concatenate`). */
export function concatenate(tensors: readonly Tensor[], dim = 0): Tensor {
  return cat(tensors, dim);
}

/**
 * `x` cut along `dim`, as `torch.tensor_split`: a number `n` gives `n`
 * pieces, the first `size % n` one longer; an array of indices cuts before
 * each (indices past the end or out of order give empty pieces).
 */
export function tensorSplit(
  x: Tensor,
  indicesOrSections: number | readonly number[],
  dim = 0,
): Tensor[] {
  requireTensor("tensorSplit", x, "the input");
  if (x.ndim === 0) {
    throw new RangeError("tensorSplit: expected at least a 1-dimensional tensor, got a 0-d one");
  }
  const d = normalizeDim(dim, x.ndim, "tensorSplit");
  const size = x.shape[d];
  let bounds: number[];
  if (typeof indicesOrSections === "number") {
    const n = indicesOrSections;
    if (!Number.isInteger(n) || n <= 0) {
      throw new RangeError(`tensorSplit: number of sections must be a positive integer, got ${n}`);
    }
    const [base, extra] = [Math.floor(size / n), size % n];
    bounds = [0];
    for (let i = 0; i < n; i++) bounds.push(bounds[i] + base + (i < extra ? 1 : 0));
  } else {
    const list = dimsOf("tensorSplit", "indices", indicesOrSections);
    const clip = (i: number) => Math.min(size, Math.max(0, i < 0 ? i + size : i));
    bounds = [0, ...list.map(clip), size];
  }
  return forwardScope(() =>
    bounds.slice(1).map((end, i) => {
      const start = bounds[i];
      return narrow(x, d, start, Math.max(0, end - start));
    })
  );
}

function directionalSplit(
  op: string,
  x: Tensor,
  split: number | readonly number[],
  minDims: number,
  dim: number,
): Tensor[] {
  requireTensor(op, x, "the input");
  if (x.ndim < minDims) {
    throw new RangeError(
      `${op}: expected a tensor with at least ${minDims} dims, got shape ${formatShape(x.shape)}`,
    );
  }
  if (typeof split === "number" && (split <= 0 || x.shape[dim] % split !== 0)) {
    throw new RangeError(
      `${op}: dim ${dim} of size ${x.shape[dim]} (shape ${
        formatShape(x.shape)
      }) cannot be split into ${split} equal sections`,
    );
  }
  return tensorSplit(x, split, dim);
}

/** `tensorSplit` along dim 1 (dim 0 of a 1-D tensor), equal sections only, as `torch.hsplit`. */
export function hsplit(x: Tensor, sections: number | readonly number[]): Tensor[] {
  return directionalSplit("hsplit", x, sections, 1, x?.ndim === 1 ? 0 : 1);
}

/** `tensorSplit` along dim 0 of a ≥ 2-D tensor, as `torch.vsplit`. */
export function vsplit(x: Tensor, sections: number | readonly number[]): Tensor[] {
  return directionalSplit("vsplit", x, sections, 2, 0);
}

/** `tensorSplit` along dim 2 of a ≥ 3-D tensor, as `torch.dsplit`. */
export function dsplit(x: Tensor, sections: number | readonly number[]): Tensor[] {
  return directionalSplit("dsplit", x, sections, 3, 2);
}

/** Dim `dim` expanded into `sizes` (one may be -1), as `torch.unflatten`. */
export function unflatten(x: Tensor, dim: number, sizes: readonly number[]): Tensor {
  requireTensor("unflatten", x, "the input");
  if (x.ndim === 0) {
    throw new RangeError("unflatten: expected a tensor with at least 1 dim, got a 0-d one");
  }
  const d = normalizeDim(dim, x.ndim, "unflatten");
  if (!Array.isArray(sizes) || sizes.length === 0 || !sizes.every(Number.isInteger)) {
    throw new RangeError(
      `unflatten: sizes must be a non-empty array of integers, got ${JSON.stringify(sizes)}`,
    );
  }
  const known = sizes.filter((n) => n !== -1);
  const free = sizes.length - known.length;
  const product = known.reduce((p, n) => p * n, 1);
  const n = x.shape[d];
  const bad = free > 1 || known.some((s) => s < 0) ||
    (free === 0 ? product !== n : product === 0 || n % product !== 0);
  if (bad) {
    throw new RangeError(
      `unflatten: sizes ${JSON.stringify(sizes)} do not multiply to dim ${d}'s size ${n} (shape ${
        formatShape(x.shape)
      })`,
    );
  }
  const full = sizes.map((s) => (s === -1 ? n / product : s));
  return x.reshape([...x.shape.slice(0, d), ...full, ...x.shape.slice(d + 1)]);
}

/** `x` flattened to 1-D, as `torch.ravel`. */
export function ravel(x: Tensor): Tensor {
  requireTensor("ravel", x, "the input");
  return x.reshape([x.numel()]);
}

/** Reversed along dim 0, as `torch.flipud` (≥ 1 dim). */
export function flipud(x: Tensor): Tensor {
  requireTensor("flipud", x, "the input");
  if (x.ndim < 1) throw new RangeError("flipud: expected a tensor with at least 1 dim, got 0-d");
  return flip(x, 0);
}

/** Reversed along dim 1, as `torch.fliplr` (≥ 2 dims). */
export function fliplr(x: Tensor): Tensor {
  requireTensor("fliplr", x, "the input");
  if (x.ndim < 2) {
    throw new RangeError(
      `fliplr: expected a tensor with at least 2 dims, got shape ${formatShape(x.shape)}`,
    );
  }
  return flip(x, 1);
}
