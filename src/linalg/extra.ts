/**
 * More of `torch.linalg`: `vecdot`, `vander`, `cond`, `tensorinv`,
 * `tensorsolve`, `matrixExp` and `lstsq`, composed from the other linalg
 * functions and the core's ops (so every backend runs them and autograd
 * follows).
 * @module
 */

import { noGrad } from "../autograd.ts";
import { isFloat } from "../dtype.ts";
import { zeros } from "../ops/factory.ts";
import { cat } from "../ops/view.ts";
import { eye } from "../ops_composite/factory.ts";
import { norm } from "../ops_composite/reduce.ts";
import { formatShape, normalizeDim } from "../shape.ts";
import { forwardScope } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import { invWithInfo } from "./lu_steps.ts";
import { solve } from "./lu.ts";
import { matrixNorm } from "./norms.ts";
import { matrixRank, pinv, svdvals } from "./spectral.ts";
import { requireMatrix, requireSquare } from "./util.ts";

function requireTensor(op: string, x: unknown, name: string): asserts x is Tensor {
  if (!(x instanceof Tensor)) {
    throw new TypeError(`${op}: ${name} must be a Tensor, got ${typeof x}`);
  }
}

const product = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

/**
 * The dot products of `x` and `y` (broadcast) along `dim` (default -1), as
 * `torch.linalg.vecdot` (float dtypes, equal in both).
 */
export function vecdot(x: Tensor, y: Tensor, options: { dim?: number } = {}): Tensor {
  const op = "linalg.vecdot";
  requireTensor(op, x, "x");
  requireTensor(op, y, "y");
  if (!isFloat(x.dtype)) {
    throw new TypeError(
      `${op}: Expected a floating point or complex tensor as input. Got ${x.dtype}`,
    );
  }
  if (x.dtype !== y.dtype) {
    throw new TypeError(
      `${op}: Expected x and y to have the same dtype, but found x of type ${x.dtype} and y of type ${y.dtype} instead`,
    );
  }
  const { dim = -1 } = options;
  return forwardScope(() => {
    const p = x.mul(y);
    return p.sum(normalizeDim(dim, p.ndim, op));
  });
}

/**
 * The Vandermonde matrices of the vectors in `x` (`[..., n]` →
 * `[..., n, N]`, increasing powers `x⁰ … x^(N-1)`, N default n > 1), as
 * `torch.linalg.vander`; int32 stays int32.
 */
export function vander(x: Tensor, options: { N?: number } = {}): Tensor {
  const op = "linalg.vander";
  requireTensor(op, x, "x");
  if (x.ndim < 1) {
    throw new RangeError(`${op}: x must have at least one dimension, got a 0-d tensor`);
  }
  const N = options.N ?? x.shape.at(-1)!;
  if (!Number.isInteger(N) || N <= 1) {
    throw new RangeError(`${op}: N must be greater than 1, got ${N}`);
  }
  return forwardScope(() => {
    const powers = x.unsqueeze(-1).expand([...x.shape, N - 1]).cumprod(-1);
    return cat([zeros([...x.shape, 1], { dtype: x.dtype, device: x.device }).add(1), powers], -1);
  });
}

/**
 * The condition number of each matrix in `A` in the norm `p`, as
 * `torch.linalg.cond`: for p 2 (default) / -2 the ratio of the largest to
 * the smallest singular value (or back), any shape; for "fro", "nuc",
 * ±1, ±Infinity `‖A‖·‖A⁻¹‖` of square matrices, inf where `A` is singular.
 */
export function cond(A: Tensor, p: number | "fro" | "nuc" = 2): Tensor {
  const op = "linalg.cond";
  requireMatrix(op, A);
  const allowed = [2, -2, 1, -1, Infinity, -Infinity, "fro", "nuc"];
  if (!allowed.includes(p)) {
    throw new RangeError(`${op}: Order ${String(p)} not supported.`);
  }
  return forwardScope(() => {
    if (p === 2 || p === -2) {
      // No singular values: 0, as PyTorch's.
      if (Math.min(...A.shape.slice(-2)) === 0) {
        return zeros(A.shape.slice(0, -2), { dtype: A.dtype, device: A.device });
      }
      const s = svdvals(A);
      const [hi, lo] = [s.narrow(-1, 0, 1), s.narrow(-1, s.shape.at(-1)! - 1, 1)];
      return (p === 2 ? hi.div(lo) : lo.div(hi)).squeeze(-1);
    }
    requireSquare(op, A);
    const [inverse, info, own] = invWithInfo(A);
    // The NaN inverse of a matrix the elimination found singular is masked (its svd would fail).
    const invertible = noGrad(() => own.eq(0).unsqueeze(-1).unsqueeze(-1));
    const value = matrixNorm(A, { ord: p }).mul(
      matrixNorm(inverse.where(invertible, 0), { ord: p }),
    );
    return value.where(noGrad(() => info.eq(0).mul(own.eq(0))), Infinity);
  });
}

/**
 * The inverse of `A` as a tensor: `A` reshaped to a square matrix of
 * `prod(shape[:ind])` rows, inverted and given the shape
 * `[...shape[ind:], ...shape[:ind]]`, as `torch.linalg.tensorinv` (ind
 * default 2).
 */
export function tensorinv(A: Tensor, options: { ind?: number } = {}): Tensor {
  const op = "linalg.tensorinv";
  requireTensor(op, A, "A");
  const { ind = 2 } = options;
  if (!Number.isInteger(ind) || ind <= 0) {
    throw new RangeError(`${op}: Expected a strictly positive integer for 'ind', but got ${ind}`);
  }
  const [front, back] = [A.shape.slice(0, ind), A.shape.slice(ind)];
  if (product(front) !== product(back)) {
    throw new RangeError(
      `${op}: Expected self to satisfy the requirement prod(self.shape[ind:]) == prod(self.shape[:ind]), but got ${
        product(back)
      } != ${product(front)} (shape ${formatShape(A.shape)}, ind ${ind})`,
    );
  }
  return forwardScope(() => {
    const n = product(front);
    const inverse = solve(A.reshape([n, n]), eye(n, { dtype: A.dtype, device: A.device }));
    return inverse.reshape([...back, ...front]);
  });
}

/**
 * The `X` with `tensordot(A, X, X.ndim) = B`, as `torch.linalg.tensorsolve`:
 * `A`'s dims in `dims` moved last first; `X` takes `A.shape[B.ndim:]`.
 */
export function tensorsolve(
  A: Tensor,
  B: Tensor,
  options: { dims?: readonly number[] } = {},
): Tensor {
  const op = "linalg.tensorsolve";
  requireTensor(op, A, "A");
  requireTensor(op, B, "B");
  return forwardScope(() => {
    let a = A;
    if (options.dims !== undefined) {
      const moved = options.dims.map((d) => normalizeDim(d, A.ndim, op));
      const kept = A.shape.map((_, i) => i).filter((i) => !moved.includes(i));
      a = A.permute([...kept, ...moved]);
    }
    const resultShape = a.shape.slice(B.ndim);
    const [rows, cols] = [product(a.shape.slice(0, B.ndim)), product(resultShape)];
    if (rows !== cols || rows !== B.numel()) {
      throw new RangeError(
        `${op}: Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == prod(self.shape[:other.ndim]), but got ${cols} != ${rows} (A shape ${
          formatShape(a.shape)
        }, B shape ${formatShape(B.shape)})`,
      );
    }
    return solve(a.reshape([rows, cols]), B.reshape([rows])).reshape(resultShape);
  });
}

/** Squarings a matrix exponential may take: beyond 2^50·‖A‖ the result is inf anyway. */
const MAX_SQUARINGS = 50;

/** 1/k! for k = 0..18: Taylor to degree 18 is exact to float64 for ‖X‖₁ ≤ 1. */
const TAYLOR = Array.from({ length: 19 }, (_, k) => {
  let f = 1;
  for (let i = 2; i <= k; i++) f *= i;
  return 1 / f;
});

/**
 * The matrix exponential of each square matrix in `A`, as
 * `torch.linalg.matrix_exp`: each matrix scaled by 2^-s to 1-norm ≤ 1,
 * its degree-18 Taylor polynomial (Horner), squared s times (s chosen on
 * the device per matrix, at most 50; a larger ‖A‖₁ loses accuracy, where
 * exp overflows anyway unless A is far from normal). Differentiable
 * through the composition.
 */
export function matrixExp(A: Tensor): Tensor {
  const op = "linalg.matrix_exp";
  const n = requireSquare(op, A);
  if (n === 0) return A.clone();
  return forwardScope(() => {
    const [s, scale] = noGrad(() => {
      const norm1 = A.abs().sum(-2, true).amax(-1, true);
      const s = norm1.log().div(Math.LN2).ceil().clamp(0, MAX_SQUARINGS).where(
        norm1.gt(1),
        0,
      );
      return [s, s.mul(0).add(2).pow(s.neg())];
    });
    const x = A.mul(scale);
    const identity = noGrad(() => eye(n, { dtype: A.dtype, device: A.device }));
    let p = identity.mul(TAYLOR[18]);
    for (let k = 17; k >= 0; k--) p = x.matmul(p).add(identity.mul(TAYLOR[k]));
    for (let i = 0; i < MAX_SQUARINGS; i++) {
      p = p.matmul(p).where(noGrad(() => s.gt(i)), p);
    }
    return p;
  });
}

/** Options of {@link lstsq}. */
export interface LstsqOptions {
  /** Singular values below `rcond` times the largest count as zero (default eps·max(m, n)). */
  rcond?: number;
  /** LAPACK's driver, for which outputs are filled (default "gelsy", as PyTorch's cpu). */
  driver?: "gels" | "gelsy" | "gelsd" | "gelss";
}

/** The result of {@link lstsq}, as PyTorch's named tuple. */
export interface LstsqResult {
  /** The least-squares (minimum-norm) solution `[..., n, k]`. */
  solution: Tensor;
  /** Squared residuals per column `[..., k]` when m > n and the driver is not gelsy, else empty. */
  residuals: Tensor;
  /** The effective rank (int32) for gelsy, gelsd and gelss, else empty. */
  rank: Tensor;
  /** The singular values for gelsd and gelss, else empty. */
  singularValues: Tensor;
}

/**
 * The least-squares solution of `AX = B`, as `torch.linalg.lstsq`
 * (`A` `[..., m, n]`, `B` `[..., m, k]` or `[..., m]`): the
 * minimum-norm solution through the pseudo-inverse (with singular values
 * below `rcond`·σmax cut; gels ignores `rcond`), differentiable in `A` and
 * `B`; residuals `[..., k]` (`[..., 1]` for a vector `B`, as PyTorch's). The outputs each
 * driver fills are PyTorch's; residuals are given for every A with m > n
 * (PyTorch leaves them empty for a rank-deficient A, a shape it only
 * knows after reading the rank). Where `rcond` cuts singular values the
 * gradient is that of the cut solution (PyTorch's backward ignores
 * `rcond`).
 */
export function lstsq(A: Tensor, B: Tensor, options: LstsqOptions = {}): LstsqResult {
  const op = "torch.linalg.lstsq";
  requireMatrix(op, A, "input");
  requireTensor(op, B, "other");
  if (A.dtype !== B.dtype) {
    throw new TypeError(
      `${op}: Expected input and other to have the same dtype, but got input's dtype ${A.dtype} and other's dtype ${B.dtype}`,
    );
  }
  if (A.ndim < B.ndim || A.ndim - B.ndim > 1) {
    throw new RangeError(
      `${op}: input.dim() must be greater or equal to other.dim() and (input.dim() - other.dim()) <= 1 (shapes ${
        formatShape(A.shape)
      } and ${formatShape(B.shape)})`,
    );
  }
  const { driver = "gelsy" } = options;
  if (!["gels", "gelsy", "gelsd", "gelss"].includes(driver)) {
    throw new RangeError(
      `${op}: parameter \`driver\` should be one of (gels, gelsy, gelsd, gelss), got ${driver}`,
    );
  }
  const vector = B.ndim === A.ndim - 1;
  const b = vector ? B.unsqueeze(-1) : B;
  const [m, n] = A.shape.slice(-2);
  if (b.shape.at(-2) !== m) {
    throw new RangeError(
      `${op}: input.size(-2) should match other.size(-2) (shapes ${formatShape(A.shape)} and ${
        formatShape(B.shape)
      })`,
    );
  }
  const eps = A.dtype === "float64" ? Number.EPSILON : 2 ** -23;
  // gels (QR, A assumed of full rank) ignores rcond, as LAPACK's.
  const rtol = options.rcond !== undefined && options.rcond > 0 && driver !== "gels"
    ? options.rcond
    : eps * Math.max(m, n);
  return forwardScope(() => {
    const x = pinv(A, { rtol }).matmul(b);
    const empty = (dtype: "int32" | typeof A.dtype = A.dtype) =>
      zeros([0], { dtype, device: A.device });
    const residuals = m > n && driver !== "gelsy"
      ? norm(A.matmul(x).sub(b), 2, [-2]).square()
      : empty();
    const rank = driver === "gels"
      ? empty("int32")
      : noGrad(() => matrixRank(A, { rtol }).to("int32"));
    const singularValues = driver === "gelsd" || driver === "gelss" ? svdvals(A) : empty();
    return {
      solution: vector ? x.squeeze(-1) : x,
      residuals,
      rank,
      singularValues,
    };
  });
}
