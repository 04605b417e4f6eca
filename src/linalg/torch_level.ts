/**
 * The `torch.*` linear-algebra functions beside `torch.linalg`, PyTorch's
 * older names and conventions: `inverse`, `logdet`, `pinverse`,
 * `choleskySolve`, `choleskyInverse`, `triangularSolve`, `svd` (V, not Vh;
 * `some`), `lu`, `luUnpack`, `luSolve` (`b` first) and `matrixExp`. They
 * are exported from multigrad's `mod.ts` and, where PyTorch's Tensor has
 * them, installed as Tensor methods here (linalg sits above the composite
 * ops, which cannot import it).
 * @module
 */

import { noGrad, record } from "../autograd.ts";
import { sumTo } from "../ops/elementwise.ts";
import { zeros } from "../ops/factory.ts";
import { eye } from "../ops_composite/factory.ts";
import { formatShape } from "../shape.ts";
import { forwardScope } from "../storage.ts";
import { installTensorOps, Tensor } from "../tensor.ts";
import { luFactorEx, luSolve as linalgLuSolve } from "./decompositions.ts";
import { luUnpack } from "./lu_unpack.ts";
import { matrixExp } from "./extra.ts";
import { inv, slogdet } from "./lu.ts";
import { pinv, svd as linalgSvd } from "./spectral.ts";
import { solveTriangular } from "./triangular.ts";
import { failLater, indices, mT, requireMatrix, requireSquare } from "./util.ts";

export { luUnpack, matrixExp };
export type { LuUnpackOptions } from "./lu_unpack.ts";

/** The inverse of each square matrix in `A`, as `torch.inverse` (= `linalg.inv`). */
export function inverse(A: Tensor): Tensor {
  return inv(A);
}

/**
 * The log of each determinant, as `torch.logdet`: NaN for a negative
 * determinant, -inf for a singular matrix; differentiable (through
 * `slogdet`).
 */
export function logdet(A: Tensor): Tensor {
  requireSquare("logdet", A);
  return forwardScope(() => {
    const [sign, logabs] = slogdet(A);
    return logabs.where(noGrad(() => sign.ge(0)), NaN);
  });
}

/**
 * The pseudo-inverse, as `torch.pinverse`: `linalg.pinv` with singular
 * values below `rcond` (default 1e-15) times the largest cut.
 */
export function pinverse(A: Tensor, options: { rcond?: number } = {}): Tensor {
  return pinv(A, { rtol: options.rcond ?? 1e-15 });
}

/** Options of {@link choleskySolve} and {@link choleskyInverse}. */
export interface CholeskyFactorOptions {
  /** The factor is upper (`A = UᵀU`) rather than lower (`A = LLᵀ`, the default). */
  upper?: boolean;
}

function requireFactor(op: string, L: Tensor, name: string): number {
  if (!(L instanceof Tensor)) {
    throw new TypeError(`${op}: ${name} must be a Tensor, got ${typeof L}`);
  }
  return requireSquare(op, L, name);
}

/**
 * The solution of `AX = B` from the Cholesky factor of `A`, as
 * `torch.cholesky_solve(B, L)`: two triangular solves, batch dims
 * broadcast; differentiable in `B` and `L`.
 */
export function choleskySolve(B: Tensor, L: Tensor, options: CholeskyFactorOptions = {}): Tensor {
  const op = "cholesky_solve";
  const n = requireFactor(op, L, "input2");
  if (!(B instanceof Tensor) || B.ndim < 2) {
    throw new RangeError(
      `${op}: b should have at least 2 dimensions, but has ${B?.ndim} dimensions instead`,
    );
  }
  if (B.dtype !== L.dtype) {
    throw new TypeError(
      `${op}: Expected b and A to have the same dtype, but found b of type ${B.dtype} and A of type ${L.dtype} instead.`,
    );
  }
  if (B.shape.at(-2) !== n) {
    throw new RangeError(
      `${op}: Incompatible matrix sizes for cholesky_solve: each A matrix is ${n} by ${n} but each b matrix is ${
        B.shape.slice(-2).join(" by ")
      }`,
    );
  }
  const upper = options.upper ?? false;
  const x = noGrad(() =>
    forwardScope(() => {
      const y = solveTriangular(upper ? mT(L) : L, B, { upper: false });
      return solveTriangular(upper ? L : mT(L), y, { upper: true });
    })
  );
  // PyTorch's cholesky_solve_backward: L's gradient as if A = LLᵀ (UᵀU) with all of L, unmasked.
  return record(op, [B, L], x, ([g]) => {
    const gb = choleskySolve(g!, L, options);
    const common = gb.matmul(mT(x));
    const sym = common.add(mT(common));
    const gl = upper ? L.matmul(sym).neg() : sym.matmul(L).neg();
    return [sumTo(gb, B.shape), sumTo(gl, L.shape)];
  });
}

/**
 * The inverse of `A` from its Cholesky factor, as `torch.cholesky_inverse`
 * (`[..., n, n]`; differentiable). A factor with an exactly zero diagonal
 * element (a singular `A`) makes the next read reject with a
 * `linalg.LinAlgError`, as PyTorch raises one.
 */
export function choleskyInverse(L: Tensor, options: CholeskyFactorOptions = {}): Tensor {
  const n = requireFactor("cholesky_inverse", L, "input");
  // Per matrix, the 1-based index of the first zero on the diagonal (0 for none), as LAPACK's info.
  const info = noGrad(() =>
    forwardScope(() => {
      const first = L.diagonal(0, -2, -1).eq(0).mul(indices(n, L).neg().add(n)).amax(-1);
      return first.gt(0).mul(first.neg().add(n + 1));
    })
  );
  failLater(
    "cholesky_inverse",
    info,
    L.ndim > 2,
    (i) =>
      `The diagonal element ${i} is zero, the inversion could not be completed because the input matrix is singular.`,
  );
  return forwardScope(() =>
    choleskySolve(eye(n, { dtype: L.dtype, device: L.device }).expand([...L.shape]), L, options)
  );
}

/** Options of {@link triangularSolve}. */
export interface TriangularSolveOptions {
  /** `A` is upper triangular (the default, as PyTorch's) or lower. */
  upper?: boolean;
  /** Solve `AᵀX = B`. */
  transpose?: boolean;
  /** Take `A`'s diagonal as ones. */
  unitriangular?: boolean;
}

/**
 * `[solution, clonedCoefficient]` of `AX = B` for triangular `A`, as
 * `torch.triangular_solve(B, A)` (upper by default; `transpose` solves
 * with `Aᵀ`). Differentiable in `B` and `A`.
 */
export function triangularSolve(
  B: Tensor,
  A: Tensor,
  options: TriangularSolveOptions = {},
): [Tensor, Tensor] {
  const op = "triangular_solve";
  requireFactor(op, A, "A");
  if (!(B instanceof Tensor) || B.ndim < 2) {
    throw new RangeError(
      `${op}: b should have at least 2 dimensions, but has ${B?.ndim} dimensions instead`,
    );
  }
  const { upper = true, transpose = false, unitriangular = false } = options;
  return forwardScope(() => {
    const a = transpose ? mT(A) : A;
    const x = solveTriangular(a, B, { upper: transpose ? !upper : upper, unitriangular });
    // The coefficient comes back broadcast to the solution's batch, as PyTorch's.
    return [x, A.expand([...x.shape.slice(0, -2), ...A.shape.slice(-2)]).clone()];
  });
}

/** Options of {@link svd}. */
export interface TorchSvdOptions {
  /** Reduced U `[..., m, k]` and V `[..., n, k]` (default true) or square ones. */
  some?: boolean;
  /** Compute U and V (default true); when false they come back as zeros `[m, m]`, `[n, n]`. */
  computeUv?: boolean;
}

/**
 * `[U, S, V]` with `A = U diag(S) Vᵀ`, as `torch.svd` (V, not `linalg.svd`'s
 * Vh; `some` for the reduced factors). Gradients are `linalg.svd`'s.
 */
export function svd(A: Tensor, options: TorchSvdOptions = {}): [Tensor, Tensor, Tensor] {
  requireMatrix("svd", A, "input");
  const { some = true, computeUv = true } = options;
  const [m, n] = A.shape.slice(-2);
  return forwardScope(() => {
    const [u, s, vh] = linalgSvd(A, { fullMatrices: !some });
    if (!computeUv) {
      const batch = A.shape.slice(0, -2);
      const z = (k: number) => zeros([...batch, k, k], { dtype: A.dtype, device: A.device });
      return [z(m), s, z(n)];
    }
    return [u, s, mT(vh)];
  });
}

/** Options of {@link lu}. */
export interface TorchLuOptions {
  /** Partial pivoting (default true; false is refused, as PyTorch's cpu refuses it). */
  pivot?: boolean;
  /** Also return LAPACK's `info` per matrix (int32). */
  getInfos?: boolean;
}

/**
 * `[LU, pivots]` (with `getInfos`, `[LU, pivots, infos]`), as `torch.lu`:
 * `linalg.lu_factor_ex`'s packed factors, without its error.
 */
export function lu(A: Tensor, options: TorchLuOptions = {}): Tensor[] {
  const [LU, pivots, info] = luFactorEx(A, { pivot: options.pivot });
  return options.getInfos ? [LU, pivots, info] : [LU, pivots];
}

/**
 * The solution of `AX = b` from `torch.lu`'s factors, as
 * `torch.lu_solve(b, LU_data, LU_pivots)` (linalg's `luSolve` takes `LU`
 * first).
 */
export function luSolve(b: Tensor, LU: Tensor, pivots: Tensor): Tensor {
  if (!(b instanceof Tensor)) throw new TypeError(`lu_solve: b must be a Tensor, got ${typeof b}`);
  if (b.ndim < 2) {
    throw new RangeError(
      `lu_solve: b must have at least 2 dims, got shape ${formatShape(b.shape)}`,
    );
  }
  return linalgLuSolve(LU, pivots, b);
}

installTensorOps({
  inverse,
  logdet,
  pinverse,
  choleskySolve,
  choleskyInverse,
  triangularSolve,
  svd,
  lu,
  luSolve,
  matrixExp,
});
