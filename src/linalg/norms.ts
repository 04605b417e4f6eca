/**
 * Vector and matrix norms.
 * @module
 */

import { normalizeDim } from "../shape.ts";
import { forwardScope } from "../storage.ts";
import type { Tensor } from "../tensor.ts";
import { norm } from "../ops_composite/mod.ts";
import { svdvals } from "./spectral.ts";
import { requireMatrix } from "./util.ts";

/** Options of {@link vectorNorm}. */
export interface VectorNormOptions {
  /** The order: any number, ±Infinity included (default 2). */
  ord?: number;
  /** The dims to reduce (default: every element, as one flat vector). */
  dim?: number | readonly number[];
  /** Keep the reduced dims with size 1. */
  keepdim?: boolean;
}

/**
 * The vector `ord`-norm of `x` over `dim` (every element when omitted), as
 * `torch.linalg.vector_norm`: `(Σ|x|^ord)^(1/ord)`, the max (min) |x| for
 * ±Infinity, the count of nonzeros for 0. Gradients as PyTorch's
 * `norm_backward` (0 at a zero norm).
 */
export function vectorNorm(x: Tensor, options: VectorNormOptions = {}): Tensor {
  const { ord = 2, dim, keepdim = false } = options;
  if (typeof ord !== "number" || Number.isNaN(ord)) {
    throw new TypeError(`linalg.vector_norm: ord must be a number, got ${String(ord)}`);
  }
  if (x.dtype !== "float32" && x.dtype !== "float64") {
    throw new TypeError(
      `linalg.vector_norm: Expected a floating point tensor as input. Got ${x.dtype}`,
    );
  }
  if (ord < 0 && x.numel() === 0 && dim === undefined) {
    throw new RangeError(
      `linalg.vector_norm cannot compute the ${ord} norm on an empty tensor because the operation does not have an identity`,
    );
  }
  return norm(x, ord, dim, keepdim);
}

/** Options of {@link matrixNorm}. */
export interface MatrixNormOptions {
  /** `"fro"` (default), `"nuc"`, 1, -1, 2, -2, Infinity or -Infinity. */
  ord?: "fro" | "nuc" | number;
  /** The two matrix dims (default `[-2, -1]`). */
  dim?: readonly [number, number];
  /** Keep the reduced dims with size 1. */
  keepdim?: boolean;
}

/**
 * The matrix norm of each matrix in `A`, as `torch.linalg.matrix_norm`:
 * `"fro"` (Frobenius), 1 / -1 (largest / smallest column sum of |A|),
 * Infinity / -Infinity (largest / smallest row sum), 2 / -2 (largest /
 * smallest singular value), `"nuc"` (their sum), through {@link svdvals}.
 */
export function matrixNorm(A: Tensor, options: MatrixNormOptions = {}): Tensor {
  const op = "linalg.matrix_norm";
  const { ord = "fro", dim = [-2, -1], keepdim = false } = options;
  requireMatrix(op, A);
  const supported = ord === "fro" || ord === "nuc" || ord === 1 || ord === -1 ||
    ord === 2 || ord === -2 || ord === Infinity || ord === -Infinity;
  if (!supported) throw new RangeError(`${op}: Order ${String(ord)} not supported.`);
  if (!Array.isArray(dim) || dim.length !== 2) {
    throw new RangeError(`${op}: dim must be a 2-tuple. Got ${JSON.stringify(dim)}`);
  }
  const d0 = normalizeDim(dim[0], A.ndim, op, false);
  const d1 = normalizeDim(dim[1], A.ndim, op, false);
  if (d0 === d1) {
    throw new RangeError(`${op}: dims must be different. Got (${dim[0]}, ${dim[1]})`);
  }
  if (ord === "fro") return norm(A, 2, [d0, d1], keepdim);
  return forwardScope(() => {
    if (ord === "nuc" || Math.abs(ord) === 2) {
      // The matrix dims moved last, as svdvals takes them.
      const rest = A.shape.map((_, i) => i).filter((i) => i !== d0 && i !== d1);
      const s = svdvals(A.permute([...rest, d0, d1]));
      const out = ord === "nuc" ? s.sum(-1) : ord === 2 ? s.amax(-1) : s.amin(-1);
      if (!keepdim) return out;
      const kept = A.shape.map((size, i) => (i === d0 || i === d1 ? 1 : size));
      return out.reshape(kept);
    }
    // 1 / -1 sum over rows (d0) then pick among columns (d1); ±Infinity the other way round.
    const [summed, picked] = Math.abs(ord as number) === 1 ? [d0, d1] : [d1, d0];
    const sums = A.abs().sum(summed, true);
    const out = (ord as number) > 0 ? sums.amax(picked, true) : sums.amin(picked, true);
    return keepdim ? out : out.squeeze(Math.max(d0, d1)).squeeze(Math.min(d0, d1));
  });
}
