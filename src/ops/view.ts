/**
 * Shape operations. Tensors are always contiguous: reshape shares storage,
 * everything else that moves elements is one strided-copy kernel.
 * @module
 */

import { isGradEnabled, noGrad, record } from "../autograd.ts";
import type { Device } from "../device.ts";
import { type DType, promoteTypes } from "../dtype.ts";
import {
  axisSplit,
  checkShape,
  chunkSizes,
  contiguousStrides,
  formatShape,
  normalizeDim,
  numelOf,
  type Shape,
} from "../shape.ts";
import { Tensor } from "../tensor.ts";
import { commonDevice, empty, launch } from "./util.ts";
import { cast, sumTo } from "./elementwise.ts";
import { checkLater } from "./check.ts";
import { backwardOp, tidy } from "../storage.ts";

/** `shape` with one -1 resolved against `numel`, or an error naming both. */
function resolveShape(shape: readonly number[], numel: number, from: Shape, op: string): number[] {
  const out = [...shape];
  const free = out.indexOf(-1);
  if (free !== out.lastIndexOf(-1)) {
    throw new RangeError(`${op}: only one dimension can be -1, got ${formatShape(shape)}`);
  }
  if (out.some((d, i) => i !== free && (!Number.isInteger(d) || d < 0))) {
    throw new RangeError(`${op}: invalid shape ${formatShape(shape)}`);
  }
  if (free >= 0) {
    const known = out.reduce((n, d, i) => (i === free ? n : n * d), 1);
    if (known === 0 || numel % known !== 0) {
      throw new RangeError(
        `${op}: shape ${formatShape(shape)} is invalid for input of shape ${
          formatShape(from)
        } (${numel} elements)`,
      );
    }
    out[free] = numel / known;
  }
  if (numelOf(out) !== numel) {
    throw new RangeError(
      `${op}: shape ${formatShape(shape)} is invalid for input of shape ${
        formatShape(from)
      } (${numel} elements)`,
    );
  }
  return out;
}

/**
 * The same storage seen with another shape (one dim may be -1). `own`: `x` or the result is an
 * op's intermediate no caller can reach, so sharing it hides no in-place change from a history.
 */
export function reshape(x: Tensor, shape: readonly number[], op = "reshape", own = false): Tensor {
  if (!Array.isArray(shape)) {
    throw new TypeError(`${op}: shape must be an array, e.g. ${op}([2, 3])`);
  }
  const target = resolveShape(shape, x.numel(), x.shape, op);
  const out = record(op, [x], new Tensor(x.storage, target), ([g]) => [g!.reshape(x.shape)]);
  if (!own) x.storage.aliased = true;
  return out;
}

/**
 * Memory holding a copy where PyTorch returns a view (narrow, permute,
 * expand, and select, transpose, split, diagonal... built on them), with the
 * op's name: an in-place change to it would not reach its source (see inplace.ts).
 */
export const viewCopies: WeakMap<object, string> = new WeakMap();

/** Strided copy of `x` read with `xStrides` into a new contiguous tensor of `shape`. */
function gatherCopy(
  x: Tensor,
  shape: number[],
  xStrides: number[],
  xOffset: number,
  op: string,
): Tensor {
  const out = empty(shape, x.dtype, x.device);
  if (op !== "clone") viewCopies.set(out.storage, op);
  if (out.numel() === 0) return out;
  const src = x.storage.buffer(op);
  const dst = out.storage.buffer();
  const layout = {
    shape,
    xStrides,
    xOffset,
    outStrides: contiguousStrides(shape),
    outOffset: 0,
    dtype: x.dtype,
  };
  launch(x.device, "copy", { x: src, out: dst, ...layout });
  return out;
}

/** A contiguous copy with its own storage. */
export function clone(x: Tensor): Tensor {
  const out = gatherCopy(x, [...x.shape], contiguousStrides(x.shape), 0, "clone");
  return record("clone", [x], out, ([g]) => [g]);
}

/** Dims reordered: `out.shape[i] = x.shape[dims[i]]`; `op`: the name recorded (transpose's, t's). */
export function permute(x: Tensor, dims: readonly number[], op = "permute"): Tensor {
  if (!Array.isArray(dims) || dims.length !== x.ndim) {
    throw new RangeError(
      `permute: expected ${x.ndim} dims for shape ${formatShape(x.shape)}, got ${
        JSON.stringify(dims)
      }`,
    );
  }
  const perm = dims.map((d) => normalizeDim(d, x.ndim, "permute"));
  if (new Set(perm).size !== perm.length) {
    throw new RangeError(`permute: dims ${JSON.stringify(dims)} repeat`);
  }
  const strides = contiguousStrides(x.shape);
  const out = gatherCopy(x, perm.map((d) => x.shape[d]), perm.map((d) => strides[d]), 0, "permute");
  const inverse = new Array<number>(perm.length);
  perm.forEach((d, i) => (inverse[d] = i));
  return record(op, [x], out, ([g]) => [permute(g!, inverse)]);
}

/** Swaps two dims. */
export function transpose(x: Tensor, dim0: number, dim1: number): Tensor {
  const a = normalizeDim(dim0, x.ndim, "transpose");
  const b = normalizeDim(dim1, x.ndim, "transpose");
  if (x.ndim < 2) return reshape(x, x.shape, "transpose");
  const perm = x.shape.map((_, i) => i);
  [perm[a], perm[b]] = [perm[b], perm[a]];
  return permute(x, perm, "transpose");
}

/** Removes size-1 dims (all, or the given one when it has size 1). */
export function squeeze(x: Tensor, dim?: number): Tensor {
  if (dim === undefined) return reshape(x, x.shape.filter((d) => d !== 1), "squeeze");
  const d = normalizeDim(dim, x.ndim, "squeeze");
  if (x.ndim === 0) return reshape(x, [], "squeezeDim");
  return reshape(x, x.shape[d] === 1 ? x.shape.filter((_, i) => i !== d) : x.shape, "squeezeDim");
}

/** Inserts a size-1 dim at `dim` (in [-ndim-1, ndim]). */
export function unsqueeze(x: Tensor, dim: number): Tensor {
  const d = normalizeDim(dim, x.ndim + 1, "unsqueeze");
  const shape = [...x.shape];
  shape.splice(d, 0, 1);
  return reshape(x, shape, "unsqueeze");
}

/** Broadcasts size-1 dims (and new leading dims) to `shape`; -1 keeps a dim. */
export function expand(x: Tensor, shape: readonly number[]): Tensor {
  if (!Array.isArray(shape) || shape.length < x.ndim) {
    throw new RangeError(
      `expand: cannot expand shape ${formatShape(x.shape)} to ${JSON.stringify(shape)}`,
    );
  }
  const lead = shape.length - x.ndim;
  const target = shape.map((d, i) => (d === -1 && i >= lead ? x.shape[i - lead] : d));
  checkShape(target, "expand shape");
  const strides = contiguousStrides(x.shape);
  const src = target.map((d, i) => {
    if (i < lead) return 0;
    const have = x.shape[i - lead];
    if (have === d) return have === 1 ? 0 : strides[i - lead];
    if (have === 1) return 0;
    throw new RangeError(
      `expand: the expanded size ${d} must match the existing size ${have} at dim ${i} (shape ${
        formatShape(x.shape)
      } to ${formatShape(target)})`,
    );
  });
  const out = gatherCopy(x, target, src, 0, "expand");
  return record("expand", [x], out, ([g]) => [sumTo(g!, x.shape)]);
}

/** Elements `start..start+length-1` along `dim`. */
export function narrow(x: Tensor, dim: number, start: number, length: number): Tensor {
  const d = normalizeDim(dim, x.ndim, "narrow", false);
  const size = x.shape[d];
  const s = start < 0 ? start + size : start;
  if (
    !Number.isInteger(s) || !Number.isInteger(length) || s < 0 || length < 0 || s + length > size
  ) {
    throw new RangeError(
      `narrow: start ${start} and length ${length} are out of range for dim ${d} of size ${size} (shape ${
        formatShape(x.shape)
      })`,
    );
  }
  const out = narrowRaw(x, d, s, length);
  return record("narrow", [x], out, ([g]) => [
    record(
      "narrowBackward",
      [g],
      padInto(g!, x.shape, d, s),
      ([gg]) => [narrow(gg!, d, s, length)],
    ),
  ]);
}

/** `length` elements from `start` along `dim` (all checked), no graph. */
function narrowRaw(x: Tensor, dim: number, start: number, length: number): Tensor {
  const strides = contiguousStrides(x.shape);
  const shape = x.shape.map((n, i) => (i === dim ? length : n));
  return gatherCopy(x, shape, strides, start * strides[dim], "narrow");
}

/** Zeros of `shape` with `part` written at `start` along `dim` (narrow's backward). */
function padInto(part: Tensor, shape: Shape, dim: number, start: number): Tensor {
  const out = zeroed(shape, part.dtype, part.device);
  writeRegion(part, out, dim, start);
  return out;
}

/** A new tensor of zeros (no graph). */
function zeroed(shape: Shape, dtype: DType, device: Device): Tensor {
  const out = empty(shape, dtype, device);
  const ob = out.storage.buffer();
  const n = out.numel();
  launch(device, "fill", { out: ob, numel: n, value: 0, dtype: dtype });
  return out;
}

/** Copies `part` into `out` at offset `start` along `dim` (same other dims). */
function writeRegion(part: Tensor, out: Tensor, dim: number, start: number): void {
  if (part.numel() === 0) return;
  const strides = contiguousStrides(out.shape);
  const layout = {
    shape: [...part.shape],
    xStrides: contiguousStrides(part.shape),
    xOffset: 0,
    outStrides: strides,
    outOffset: start * (strides[dim] ?? 0),
    dtype: part.dtype,
  };
  const src = part.storage.buffer("cat");
  const dst = out.storage.buffer();
  launch(part.device, "copy", { x: src, out: dst, ...layout });
}

/** Splits into pieces of `sizes` (an array summing to the dim) or of one size. */
export function split(x: Tensor, sizes: number | readonly number[], dim = 0): Tensor[] {
  const d = normalizeDim(dim, x.ndim, "split", false);
  const n = x.shape[d];
  let parts: number[];
  if (typeof sizes === "number") {
    if (!Number.isInteger(sizes) || sizes <= 0) {
      throw new RangeError(`split: split size must be a positive integer, got ${sizes}`);
    }
    parts = [];
    for (let s = 0; s < n; s += sizes) parts.push(Math.min(sizes, n - s));
    if (n === 0) parts = [0];
  } else {
    parts = [...sizes];
    const total = parts.reduce((a, b) => a + b, 0);
    if (parts.some((p) => !Number.isInteger(p) || p < 0) || total !== n) {
      throw new RangeError(
        `split: sizes ${
          JSON.stringify(sizes)
        } must be non-negative integers summing to ${n} (dim ${d} of shape ${
          formatShape(x.shape)
        })`,
      );
    }
  }
  const starts: number[] = [];
  let start = 0;
  const pieces = parts.map((p) => {
    starts.push(start);
    start += p;
    return narrowRaw(x, d, starts.at(-1)!, p);
  });
  // One node for all pieces: backward writes each piece's gradient into one
  // zeroed tensor (a narrow per piece would make a full-size gradient each).
  return record("split", [x], pieces, (grads) => {
    const out = zeroed(x.shape, x.dtype, x.device);
    grads.forEach((g, i) => g && writeRegion(g, out, d, starts[i]));
    return [
      record(
        "splitBackward",
        grads,
        out,
        ([gg]) => grads.map((_, i) => narrow(gg!, d, starts[i], parts[i])),
      ),
    ];
  });
}

/** The slices along `dim` with that dim removed, as `torch.unbind`. */
export function unbind(x: Tensor, dim = 0): Tensor[] {
  const d = normalizeDim(dim, x.ndim, "unbind", false);
  const shape = x.shape.filter((_, i) => i !== d);
  if (x.shape[d] === 0) return [];
  return split(x, 1, d).map((piece) => reshape(piece, shape, "unbind"));
}

/** `torch.chunk`: pieces of ceil(n / chunks), the remainder last. */
export function chunk(x: Tensor, chunks: number, dim = 0): Tensor[] {
  const d = normalizeDim(dim, x.ndim, "chunk", false);
  return split(x, chunkSizes(x.shape[d], chunks), d);
}

/** Concatenates along `dim`; all other dims must match. */
export function cat(tensors: readonly Tensor[], dim = 0): Tensor {
  if (!(tensors?.length > 0)) throw new RangeError("cat: expected a non-empty array of tensors");
  const first = tensors[0];
  if (first.ndim === 0) {
    throw new RangeError("cat: zero-dimensional tensors cannot be concatenated (use stack)");
  }
  const d = normalizeDim(dim, first.ndim, "cat");
  const device = commonDevice("cat", ...tensors);
  tensors.forEach((t, i) => {
    if (t.ndim !== first.ndim || t.shape.some((n, j) => j !== d && n !== first.shape[j])) {
      throw new RangeError(
        `cat: tensor ${i} has shape ${formatShape(t.shape)}, expected ${`[${
          first.shape.map((n, j) => (j === d ? "*" : n)).join(", ")
        }]`} to match tensor 0 (${formatShape(first.shape)}) in every dim but ${d}`,
      );
    }
  });
  const dtype = tensors.map((t) => t.dtype).reduce(promoteTypes);
  const inputs = tensors.map((t) => cast(t, dtype));
  const total = inputs.reduce((s, t) => s + t.shape[d], 0);
  const out = empty(first.shape.map((n, j) => (j === d ? total : n)), dtype, device);
  let start = 0;
  const starts = inputs.map((t) => {
    writeRegion(t, out, d, start);
    start += t.shape[d];
    return start - t.shape[d];
  });
  return record(
    "cat",
    inputs,
    out,
    ([g]) => inputs.map((t, i) => (t.requiresGrad ? narrow(g!, d, starts[i], t.shape[d]) : null)),
  );
}

/** Stacks equal-shaped tensors along a new dim. */
export function stack(tensors: readonly Tensor[], dim = 0): Tensor {
  if (!(tensors?.length > 0)) throw new RangeError("stack: expected a non-empty array of tensors");
  const shape = tensors[0].shape;
  tensors.forEach((t, i) => {
    if (t.ndim !== shape.length || t.shape.some((n, j) => n !== shape[j])) {
      throw new RangeError(
        `stack: tensor ${i} has shape ${formatShape(t.shape)}, but tensor 0 has ${
          formatShape(shape)
        }; stack needs equal shapes`,
      );
    }
  });
  const d = normalizeDim(dim, shape.length + 1, "stack");
  const one = [...shape.slice(0, d), 1, ...shape.slice(d)]; // cat copies: the views stay internal
  return cat(tensors.map((t) => reshape(t, one, "stack", true)), d);
}

/** Flattens dims `startDim..endDim` into one; `x` itself when that is one dim, as PyTorch. */
export function flatten(x: Tensor, startDim = 0, endDim = -1): Tensor {
  if (x.ndim === 0) return reshape(x, [1], "flatten");
  const s = normalizeDim(startDim, x.ndim, "flatten");
  const e = normalizeDim(endDim, x.ndim, "flatten");
  if (s > e) {
    throw new RangeError(
      `flatten: startDim ${startDim} comes after endDim ${endDim} (${x.ndim} dims)`,
    );
  }
  const shape = [...x.shape.slice(0, s), numelOf(x.shape.slice(s, e + 1)), ...x.shape.slice(e + 1)];
  return s === e ? x : reshape(x, shape, "flatten");
}

/**
 * Checks that the int32 `indices` lie in [0, size): at once when they were
 * written from the host (a RangeError), else on the device without waiting
 * (the next read on their device rejects); `describe(bad)` words the error.
 */
export function checkIndexRange(
  indices: Tensor,
  size: number,
  describe: (bad: number) => string,
): void {
  if (indices.numel() === 0) return;
  const verdict = (bounds: ArrayLike<number>) => {
    const [lowest, highest] = [bounds[0], bounds[1]];
    const bad = lowest < 0 ? lowest : highest >= size ? highest : null;
    return bad === null ? null : describe(bad);
  };
  const known = indices.storage.knownRange;
  if (known) {
    const message = verdict(known);
    if (message !== null) throw new RangeError(message);
    return;
  }
  checkLater(noGrad(() => tidy(() => stack([indices.min(), indices.max()]))), verdict);
}

/**
 * Rows of `x` along `dim` picked by int32 `indices` (1-dimensional); an index
 * outside [0, size) is an error naming it and the size (at once for indices
 * from the host, at the next read for ones the device computed).
 */
export function indexSelect(x: Tensor, dim: number, indices: Tensor): Tensor {
  const d = normalizeDim(dim, x.ndim, "indexSelect");
  commonDevice("indexSelect", x, indices);
  if (indices.dtype !== "int32" || indices.ndim !== 1) {
    throw new TypeError(
      `indexSelect: indices must be a 1-dimensional int32 tensor, got ${indices.dtype} of shape ${
        formatShape(indices.shape)
      }`,
    );
  }
  const { outer, size, inner } = axisSplit(x.shape, d);
  const count = indices.shape[0];
  checkIndexRange(
    indices,
    size,
    (bad) =>
      `indexSelect: index ${bad} is out of range for dim ${d} of size ${size} (indices must be 0 to ${
        size - 1
      })`,
  );
  const out = empty(x.shape.map((n, i) => (i === d ? count : n)), x.dtype, x.device);
  // Picked values keep the source's host-known range (a data loader's targets).
  out.storage.knownRange = x.storage.knownRange;
  if (out.numel() > 0) {
    const xb = x.storage.buffer("indexSelect");
    const ib = indices.storage.buffer("indexSelect");
    const ob = out.storage.buffer();
    launch(x.device, "indexSelect", {
      x: xb,
      indices: ib,
      out: ob,
      outer,
      size,
      inner,
      count,
      dtype: x.dtype,
    });
  }
  return record("indexSelect", [x], out, ([g]) => {
    // A scatter-add, linear in g's size (a one-hot product was [count, size]: 160 MiB for 4096
    // lookups of a 10,000-row table).
    const at = expand(reshape(indices, [1, count, 1]), [outer, count, inner]);
    const gx = scatterAddRaw(g!.detach().reshape([outer, count, inner]), at, 1, size).reshape(
      x.shape,
    );
    return [record("indexSelectBackward", [g], gx, ([gg]) => [indexSelect(gg!, d, indices)])];
  });
}

/** The scatter-add kernel: `[outer, size, inner]` sums of `src` by `index`, no graph. */
export function scatterAddRaw(src: Tensor, index: Tensor, dim: number, size: number): Tensor {
  if (src.requiresGrad && isGradEnabled() && backwardOp()) { // createGraph, where no caller records it
    throw new Error(`${backwardOp()}'s backward is not differentiable (createGraph)`);
  }
  const shape = index.shape.map((n, i) => (i === dim ? size : n));
  const out = empty(shape, src.dtype, src.device);
  if (out.numel() === 0) return out;
  const layout = gatherLayout(index.shape, dim, size, src.dtype);
  const sb = src.storage.buffer("gather backward");
  const ib = index.storage.buffer("gather backward");
  const ob = out.storage.buffer();
  launch(src.device, "scatterAdd", { x: sb, index: ib, out: ob, ...layout });
  return out;
}

export function gatherLayout(indexShape: Shape, dim: number, size: number, dtype: Tensor["dtype"]) {
  let outer = 1;
  for (let i = 0; i < dim; i++) outer *= indexShape[i];
  let inner = 1;
  for (let i = dim + 1; i < indexShape.length; i++) inner *= indexShape[i];
  return { outer, size, count: indexShape[dim], inner, dtype };
}
