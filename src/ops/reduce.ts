/**
 * Reductions: sum, mean, var, std, logsumexp, max, min, argmax, argmin, over
 * one dim, several, or all.
 * @module
 */

// Other ops are called as Tensor methods here: importing `./elementwise.ts`
// would close a circle (it sums broadcast gradients with `sumDims`).

import type { ReduceOp } from "../backends/backend.ts";
import { noGrad, record } from "../autograd.ts";
import { axisSplit, formatShape, normalizeDim } from "../shape.ts";
import { Tensor } from "../tensor.ts";
import { empty, launch, requireFloat } from "./util.ts";
import { arangeOn } from "./factory.ts";

/** One reduction kernel over `dim`, no graph; the dim is removed, or kept with size 1. */
function reduceRaw(op: ReduceOp, x: Tensor, dim: number, keep = false): Tensor {
  const shape = keep ? keptShape(x.shape, [dim]) : x.shape.filter((_, i) => i !== dim);
  const dtype = op === "argmax" || op === "argmin" ? "int32" : x.dtype;
  const { outer, size, inner } = axisSplit(x.shape, dim);
  if (size === 0 && op !== "sum" && outer * inner !== 0) {
    throw new RangeError(
      `${op}: cannot reduce an empty dim ${dim} of shape ${formatShape(x.shape)}`,
    );
  }
  const out = empty(shape, dtype, x.device);
  if (outer * inner === 0) return out;
  if (size === 0) {
    const ob = out.storage.buffer();
    launch(x.device, "fill", { out: ob, numel: outer * inner, value: 0, dtype });
    return out;
  }
  const args = { op, x: x.storage.buffer(op), out: out.storage.buffer() };
  launch(x.device, "reduce", { ...args, outer, size, inner, dtype: x.dtype });
  return out;
}

/** One reduction kernel over `dim`, no graph; the dim is kept with size 1. */
export function reduceKeepdim(op: ReduceOp, x: Tensor, dim: number): Tensor {
  return reduceRaw(op, x, dim, true);
}

function normalizeDims(x: Tensor, dims: number | number[] | undefined, op: string): number[] {
  if (dims === undefined) return x.shape.map((_, i) => i);
  const list = (Array.isArray(dims) ? dims : [dims]).map((d) => normalizeDim(d, x.ndim, op));
  if (new Set(list).size !== list.length) {
    throw new RangeError(`${op}: dim ${JSON.stringify(dims)} repeats a dim`);
  }
  return list.sort((a, b) => a - b);
}

function keptShape(shape: readonly number[], dims: number[]): number[] {
  return shape.map((d, i) => (dims.includes(i) ? 1 : d));
}

/** Sum over `dims` (sorted, distinct, in range), no normalisation. */
export function sumDims(x: Tensor, dims: number[], keepdim: boolean): Tensor {
  let out = x;
  for (let i = dims.length - 1; i >= 0; i--) out = reduceRaw("sum", out, dims[i]);
  if (dims.length === 0) out = x.clone();
  const result = keepdim ? out.reshape(keptShape(x.shape, dims)) : out;
  out.storage.aliased = false; // out is fresh and no caller's: the result owns its memory
  return record("sum", [x], result, ([g]) => [
    g!.reshape(keptShape(x.shape, dims)).expand(x.shape),
  ]);
}

/** Sum over `dim` (a number, an array, or every dim when omitted). */
export function sum(x: Tensor, dim?: number | number[], keepdim = false): Tensor {
  const dims = normalizeDims(x, dim, "sum"); // a 0-d tensor takes dim 0 or -1
  return sumDims(x, x.ndim === 0 ? [] : dims, keepdim);
}

/** Mean over `dim` (float tensors). */
export function mean(x: Tensor, dim?: number | number[], keepdim = false): Tensor {
  requireFloat("mean", x);
  const checked = normalizeDims(x, dim, "mean");
  const dims = x.ndim === 0 ? [] : checked;
  const count = dims.reduce((n, d) => n * x.shape[d], 1);
  return sumDims(x, dims, keepdim).mul(1 / count);
}

/** Options of {@link variance} and {@link std}. */
export interface VarianceOptions {
  /** Divide by n - 1 (default true, as PyTorch); false divides by n. */
  unbiased?: boolean;
  /** Keep the reduced dims with size 1 (default false). */
  keepdim?: boolean;
}

/** Variance over `dim` (every dim when omitted), as `torch.var` (float tensors). */
export function variance(
  x: Tensor,
  dim?: number | number[],
  options: VarianceOptions = {},
): Tensor {
  requireFloat("var", x);
  const dims = x.ndim === 0 ? [] : normalizeDims(x, dim, "var");
  const count = dims.reduce((n, d) => n * x.shape[d], 1);
  const deviation = x.sub(mean(x, dims, true));
  // count - 1 = 0 gives NaN (a 0/0), as PyTorch.
  const sq = sumDims(deviation.mul(deviation), dims, options.keepdim ?? false);
  return sq.div(count - (options.unbiased ?? true ? 1 : 0));
}

/** Standard deviation over `dim`, as `torch.std`; where it is 0 its gradient is 0 (not 0·∞). */
export function std(x: Tensor, dim?: number | number[], options: VarianceOptions = {}): Tensor {
  const v = variance(x, dim, options);
  const nonzero = noGrad(() => v.ne(0));
  return v.where(nonzero, 1).sqrt().where(nonzero, 0);
}

/** log Σ exp(x) over `dim`, as `torch.logsumexp`: shifted by the maximum, so it never overflows. */
export function logsumexp(x: Tensor, dim: number | number[], keepdim = false): Tensor {
  requireFloat("logsumexp", x);
  const dims = x.ndim === 0 ? [] : normalizeDims(x, dim, "logsumexp");
  // The shift is a constant (its gradient cancels); an infinite maximum shifts by 0, so that a
  // slice of -inf gives -inf and one holding +inf gives +inf, as PyTorch.
  const shift = noGrad(() => {
    const max = dims.reduce((t, d) => t.max(d, true), x);
    return max.where(max.abs().lt(Infinity), 0);
  });
  const sums = sumDims(x.sub(shift).exp(), dims, keepdim).log();
  return sums.add(keepdim ? shift : shift.reshape(sums.shape));
}

function extreme(
  kind: "max" | "min",
  x: Tensor,
  dim: number | undefined,
  keepdim: boolean,
): Tensor {
  const flat = dim === undefined ? new Tensor(x.storage, [x.numel()]) : x; // no graph, no alias
  const d = dim === undefined ? 0 : normalizeDim(dim, x.ndim, kind);
  if (flat.ndim === 0) return x.clone();
  const values = reduceRaw(kind, flat, d, keepdim && dim !== undefined);
  const index = reduceRaw(kind === "max" ? "argmax" : "argmin", flat, d);
  const kept = keptShape(flat.shape, [d]);
  return record(kind, [x], values, ([g]) => {
    if (dim === undefined) { // Of all elements: shared evenly by the ties (NaN ties NaN), as PyTorch.
      const ties = x.eq(values).add(x.ne(x).mul(values.ne(values))).to(x.dtype);
      return [ties.mul(g!.div(ties.sum()))];
    }
    // The gradient goes to the index the forward picked (PyTorch's rule for max(dim)).
    const size = flat.shape[d];
    const positions = arangeOn(size, flat.device).reshape(
      flat.shape.map((_, i) => (i === d ? size : 1)),
    );
    const onehot = index.reshape(kept).eq(positions).to(x.dtype);
    return [onehot.mul(g!.reshape(kept)).reshape(x.shape)];
  });
}

/** Maximum over `dim` (values), or of all elements. Indices: {@link argmax}. */
export const max = (x: Tensor, dim?: number, keepdim = false): Tensor =>
  extreme("max", x, dim, keepdim);
/** Minimum over `dim` (values), or of all elements. */
export const min = (x: Tensor, dim?: number, keepdim = false): Tensor =>
  extreme("min", x, dim, keepdim);

function argExtreme(
  op: "argmax" | "argmin",
  x: Tensor,
  dim: number | undefined,
  keepdim: boolean,
): Tensor {
  if (dim === undefined) {
    const flat = reduceRaw(op, new Tensor(x.storage, [x.numel()]), 0); // x keeps no alias mark
    return keepdim ? flat.reshape(x.shape.map(() => 1)) : flat;
  }
  const d = normalizeDim(dim, x.ndim, op);
  if (x.ndim === 0) return reduceRaw(op, new Tensor(x.storage, [1]), 0);
  const out = reduceRaw(op, x, d);
  return keepdim ? out.reshape(keptShape(x.shape, [d])) : out;
}

/** Index of the maximum (first on ties), int32. */
export const argmax = (x: Tensor, dim?: number, keepdim = false): Tensor =>
  argExtreme("argmax", x, dim, keepdim);
/** Index of the minimum (first on ties), int32. */
export const argmin = (x: Tensor, dim?: number, keepdim = false): Tensor =>
  argExtreme("argmin", x, dim, keepdim);
