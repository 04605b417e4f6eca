/**
 * `torch.linalg.norm`, `torch.linalg.diagonal` and `torch.linalg.matmul`:
 * the linalg spellings of what {@link vectorNorm}, {@link matrixNorm},
 * `diagonal` and `matmul` compute.
 * @module
 */

import type { DType } from "../dtype.ts";
import { matmul as coreMatmul } from "../ops/linalg.ts";
import { diagonal as composedDiagonal } from "../ops_composite/mod.ts";
import { Tensor } from "../tensor.ts";
import { matrixNorm, vectorNorm } from "./norms.ts";

/** Options of {@link norm}. */
export interface NormOptions {
  /** Keep the reduced dims with size 1 (default false). */
  keepdim?: boolean;
  /**
   * Compute in (and return) this dtype: the input is converted first. As
   * PyTorch, a float64 input cannot be narrowed to float32 this way.
   */
  dtype?: DType;
}

/**
 * `x` in the dtype `op` computes in: `dtype`, checked as PyTorch's norms
 * check it (floating point, and no narrower than the input's). A non-float
 * `x` is left for the norm itself to refuse, as PyTorch refuses it even with
 * a dtype.
 */
function inDtype(op: string, x: Tensor, dtype: DType | undefined): Tensor {
  if (dtype === undefined || x.dtype === dtype) return x;
  if (x.dtype !== "float32" && x.dtype !== "float64") return x;
  if (dtype !== "float32" && dtype !== "float64") {
    throw new TypeError(`${op}: dtype should be floating point, but got ${dtype}`);
  }
  if (x.dtype === "float64" && dtype === "float32") {
    throw new TypeError(
      `${op}: the dtype of the input (float64) should be convertible without narrowing to the specified dtype (float32)`,
    );
  }
  return x.to(dtype);
}

/**
 * The vector or matrix norm of `x`, as `torch.linalg.norm(x, ord, dim,
 * keepdim, dtype)` and with its rules:
 * - `ord` omitted (or null): the 2-norm of `x` flattened, or over `dim`
 *   (one dim or two: for two that is the Frobenius norm), whatever `x`'s rank;
 * - a numeric `ord` with `dim` one dim, or with `dim` omitted and `x` 1-D: the
 *   vector norm {@link vectorNorm} (any order: ±Infinity, 0, negative, p);
 * - a numeric `ord` with `dim` two dims, or with `dim` omitted and `x` 2-D:
 *   the matrix norm {@link matrixNorm} (±1, ±2, ±Infinity);
 * - `"fro"` and `"nuc"`: matrix norms over `dim` (default `[0, 1]`; `x` must
 *   then be 2-D).
 * Without `dim`, an `ord` needs `x` 1-D or 2-D, as PyTorch; a `dim` must
 * name one or two dims. Gradients are those of the norm computed.
 */
export function norm(
  x: Tensor,
  ord?: number | "fro" | "nuc" | null,
  dim?: number | readonly number[] | null,
  options: NormOptions = {},
): Tensor {
  const op = "linalg.norm";
  if (!(x instanceof Tensor)) throw new TypeError(`${op}: x must be a Tensor, got ${typeof x}`);
  const keepdim = options.keepdim ?? false;
  const dims = dim === undefined || dim === null ? null : typeof dim === "number" ? [dim] : dim;
  if (dims !== null && (!Array.isArray(dims) || (dims.length !== 1 && dims.length !== 2))) {
    throw new RangeError(
      `${op}: If dim is specified, it must be of length 1 or 2. Got ${JSON.stringify(dim)}`,
    );
  }
  const hasOrd = ord !== undefined && ord !== null;
  if (hasOrd && typeof ord !== "number" && ord !== "fro" && ord !== "nuc") {
    throw new RangeError(`${op}: Order ${String(ord)} not supported.`);
  }
  if (dims === null && hasOrd && x.ndim !== 1 && x.ndim !== 2) {
    throw new RangeError(
      `${op}: If dim is not specified but ord is, the input must be 1D or 2D. Got ${x.ndim}D.`,
    );
  }
  const matrix = typeof ord === "string" ||
    (hasOrd && (dims !== null ? dims.length === 2 : x.ndim === 2));
  if (matrix) {
    const a = inDtype("linalg.matrix_norm", x, options.dtype);
    const pair = (dims ?? [0, 1]) as unknown as readonly [number, number];
    return matrixNorm(a, { ord: ord as number | "fro" | "nuc", dim: pair, keepdim });
  }
  const v = inDtype("linalg.vector_norm", x, options.dtype);
  return vectorNorm(v, { ord: hasOrd ? ord as number : 2, dim: dims ?? undefined, keepdim });
}

/** Options of {@link diagonal}. */
export interface DiagonalOptions {
  /** Which diagonal: 0 the main one (default), positive above it, negative below. */
  offset?: number;
  /** The first dim of the planes (default -2). */
  dim1?: number;
  /** The second dim of the planes (default -1). */
  dim2?: number;
}

/**
 * The diagonals of the matrices in `A` (the planes of dims `dim1`, `dim2`,
 * by default the last two), as `torch.linalg.diagonal`: `torch.diagonal`
 * with linalg's defaults. Those dims are removed and the diagonal appended
 * as the last dim. Unlike PyTorch, which returns a view, the result is a
 * copy (writes to it do not reach `A`); gradients flow back to `A`.
 */
export function diagonal(A: Tensor, options: DiagonalOptions = {}): Tensor {
  const { offset = 0, dim1 = -2, dim2 = -1 } = options;
  return composedDiagonal(A, offset, dim1, dim2);
}

/**
 * The matrix product of `input` and `other`, as `torch.linalg.matmul`: an
 * alias of `matmul` (1-D operands, batch broadcasting and gradients as
 * there).
 */
export function matmul(input: Tensor, other: Tensor): Tensor {
  return coreMatmul(input, other);
}
