/**
 * Selection by condition and by index: `where`, `maskedFill`, `triu`, `tril`,
 * `gather`, `select`, and their gradients.
 * @module
 */

import { record } from "../autograd.ts";
import { checkFill, getDefaultDtype } from "../dtype.ts";
import { broadcastShapes, formatShape, normalizeDim } from "../shape.ts";
import { Tensor } from "../tensor.ts";
import { commonDevice, empty, launch, scalar, type TensorLike } from "./util.ts";
import { checkFillTensor } from "./inplace.ts";
import { operands, sumTo, whereRaw } from "./elementwise.ts";
import { checkIndexRange, gatherLayout, narrow, reshape, scatterAddRaw } from "./view.ts";
import { arangeOn } from "./factory.ts";

// Callers outside the core take the scatter-add kernel from here, beside gather.
export { scatterAddRaw };

function requireCondition(op: string, cond: unknown): asserts cond is Tensor {
  if (!(cond instanceof Tensor)) {
    throw new TypeError(
      `${op}: the condition must be a Tensor (a comparison result or any dtype, nonzero = true), got ${typeof cond}`,
    );
  }
}

/**
 * `cond ? a : b` elementwise, with broadcasting of all three (PyTorch's
 * `torch.where`). `cond` is any tensor, true where nonzero (comparison
 * results are 1/0); `a` and `b` are promoted to one dtype and may be numbers.
 * Gradients flow to `a` where `cond` holds and to `b` elsewhere.
 */
export function where(cond: Tensor, a: TensorLike, b: TensorLike): Tensor {
  requireCondition("where", cond);
  let ta: Tensor;
  let tb: Tensor;
  if (typeof a === "number" && typeof b === "number") {
    const dtype = Number.isInteger(a) && Number.isInteger(b) ? "int32" : getDefaultDtype();
    ta = scalar(a, dtype, cond.device);
    tb = scalar(b, dtype, cond.device);
  } else [ta, tb] = operands("where", a, b);
  for (const v of [a, b]) if (typeof v === "number") checkFill(ta.dtype, v, "where");
  commonDevice("where", cond, ta, tb);
  const shape = broadcastShapes(cond.shape, broadcastShapes(ta.shape, tb.shape, "where"), "where");
  const out = whereRaw(cond, ta, tb, shape);
  return record("where", [ta, tb], out, ([g]) => {
    const zero = scalar(0, g!.dtype, g!.device);
    const pick = (g: Tensor, on: boolean): Tensor =>
      record("whereBackward", [g], whereRaw(cond, on ? g : zero, on ? zero : g, shape), ([gg]) => [
        pick(gg!, on),
      ]);
    return [
      ta.requiresGrad ? sumTo(pick(g!, true), ta.shape) : null,
      tb.requiresGrad ? sumTo(pick(g!, false), tb.shape) : null,
    ];
  });
}

/**
 * `x` with `value` where `mask` is nonzero (PyTorch's `masked_fill`). The
 * mask broadcasts to `x`'s shape; `value` is a number or a 0-d tensor (which
 * then gets the gradient of the filled places). A `-Infinity` fill before a
 * softmax gives those places probability 0.
 */
export function maskedFill(x: Tensor, mask: Tensor, value: number | Tensor): Tensor {
  requireCondition("maskedFill", mask);
  const shape = broadcastShapes(mask.shape, x.shape, "maskedFill");
  if (shape.length !== x.ndim || shape.some((n, i) => n !== x.shape[i])) {
    throw new RangeError(
      `maskedFill: the mask of shape ${
        formatShape(mask.shape)
      } must broadcast to the tensor's shape ${formatShape(x.shape)}`,
    );
  }
  let fill: Tensor;
  if (value instanceof Tensor) {
    if (value.ndim !== 0) {
      throw new RangeError(
        `maskedFill: a tensor value must be 0-dimensional, got shape ${formatShape(value.shape)}`,
      );
    }
    checkFillTensor(x.dtype, value, "maskedFill");
    fill = value.dtype === x.dtype ? value : value.to(x.dtype);
  } else {
    if (typeof value !== "number") {
      throw new TypeError(
        `maskedFill: value must be a number or a 0-d Tensor, got ${typeof value}`,
      );
    }
    checkFill(x.dtype, value, "maskedFill");
    fill = scalar(value, x.dtype, x.device);
  }
  return where(mask, fill, x);
}

/** `x` with the entries below diagonal `diagonal` of its last two dims zeroed (`torch.triu`). */
export function triu(x: Tensor, diagonal = 0): Tensor {
  return triangle("triu", x, diagonal);
}
/** `x` with the entries above diagonal `diagonal` of its last two dims zeroed (`torch.tril`). */
export function tril(x: Tensor, diagonal = 0): Tensor {
  return triangle("tril", x, diagonal);
}

function triangle(op: "triu" | "tril", x: Tensor, diagonal: number): Tensor {
  if (x.ndim < 2) throw new RangeError(`${op}: needs 2 dims or more, got ${formatShape(x.shape)}`);
  if (!Number.isInteger(diagonal)) throw new TypeError(`${op}: non-integer diagonal ${diagonal}`);
  const [rows, cols] = x.shape.slice(-2);
  const [i, j] = [arangeOn(rows, x.device).reshape([rows, 1]), arangeOn(cols, x.device)];
  const offset = j.sub(i); // entry (i, j) lies on diagonal j - i
  return maskedFill(x, op === "triu" ? offset.lt(diagonal) : offset.gt(diagonal), 0);
}

function requireIndex(op: string, index: unknown, x: Tensor): asserts index is Tensor {
  if (!(index instanceof Tensor) || index.dtype !== "int32") {
    const got = index instanceof Tensor ? `${index.dtype} tensor` : typeof index;
    throw new TypeError(`${op}: index must be an int32 tensor, got ${got}`);
  }
  commonDevice(op, x, index);
}

/**
 * `out[i][j][k] = x[index[i][j][k]][j][k]` for `dim = 0` (and so on):
 * PyTorch's `gather`. `index` is int32 with `x`'s number of dims, no larger
 * than `x` in every dim but `dim`; the output has `index`'s shape. The
 * gradient scatter-adds back (repeated indices sum). An index outside
 * [0, size) is an error naming it (at once for indices from the host, at the
 * next read for ones the device computed).
 */
export const gather = (x: Tensor, dim: number, index: Tensor): Tensor =>
  gatherIndexed(x, dim, index, true);

/** {@link gather} for indices the caller has checked already (a loss's classes, a pool's argmax). */
export const gatherInRange = (x: Tensor, dim: number, index: Tensor): Tensor =>
  gatherIndexed(x, dim, index, false);

function gatherIndexed(x: Tensor, dim: number, index: Tensor, checkRange: boolean): Tensor {
  requireIndex("gather", index, x);
  if (x.ndim === 0 || index.ndim === 0) {
    if (x.ndim + index.ndim > 0 && x.ndim !== index.ndim) {
      throw new RangeError(
        `gather: index (shape ${
          formatShape(index.shape)
        }) must have as many dims as the input (shape ${formatShape(x.shape)})`,
      );
    }
    normalizeDim(dim, 0, "gather");
    return reshape(
      gatherIndexed(reshape(x, [1]), 0, reshape(index, [1]), checkRange),
      [],
      "gather",
    );
  }
  const d = normalizeDim(dim, x.ndim, "gather");
  if (index.ndim !== x.ndim || index.shape.some((n, i) => i !== d && n > x.shape[i])) {
    throw new RangeError(
      `gather: index of shape ${formatShape(index.shape)} does not fit the input of shape ${
        formatShape(x.shape)
      } (same number of dims, each no larger except dim ${d})`,
    );
  }
  // Trim the other dims to the index's sizes, so the kernel sees one
  // [outer, ·, inner] view on both sides (narrow's gradient pads back).
  let src = x;
  for (let i = 0; i < x.ndim; i++) {
    if (i !== d && index.shape[i] < x.shape[i]) src = narrow(src, i, 0, index.shape[i]);
  }
  const size = x.shape[d];
  if (checkRange) {
    checkIndexRange(
      index,
      size,
      (bad) =>
        `gather: index ${bad} is out of range for dim ${d} of size ${size} (shape ${
          formatShape(x.shape)
        })`,
    );
  }
  const out = empty(index.shape, x.dtype, x.device);
  if (out.numel() > 0) {
    const layout = gatherLayout(index.shape, d, size, x.dtype);
    const xb = src.storage.buffer("gather");
    const ib = index.storage.buffer("gather");
    const ob = out.storage.buffer();
    launch(x.device, "gather", { x: xb, index: ib, out: ob, ...layout });
  }
  return record("gather", [src], out, ([g]) => [scatterToIndex(g!, d, index, size, "gather")]);
}

/** `g` scatter-added to `n` along `d` at `at` (gather's adjoint, for `op`); its gradient gathers. */
export function scatterToIndex(g: Tensor, d: number, at: Tensor, n: number, op: string): Tensor {
  const gx = scatterAddRaw(g.detach(), at, d, n);
  return record(`${op}Backward`, [g], gx, ([gg]) => [gatherIndexed(gg!, d, at, false)]);
}

/** The slice at `index` along `dim`, with that dim removed (PyTorch's `select`). */
export function select(x: Tensor, dim: number, index: number): Tensor {
  const d = normalizeDim(dim, x.ndim, "select", false);
  const size = x.shape[d];
  if (!Number.isInteger(index) || index < -size || index >= size) {
    throw new RangeError(
      `select: index ${index} is out of range for dim ${d} of size ${size} (shape ${
        formatShape(x.shape)
      })`,
    );
  }
  const row = narrow(x, d, index < 0 ? index + size : index, 1);
  return reshape(row, x.shape.filter((_, i) => i !== d), "select");
}
