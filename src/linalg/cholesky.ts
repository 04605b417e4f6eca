/**
 * `torch.linalg.cholesky`: the Cholesky factor of symmetric
 * positive-definite matrices, batched over leading dims.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { choleskyInfo } from "./cholesky_steps.ts";

/** Options of {@link cholesky}. */
export interface CholeskyOptions {
  /** Read `A`'s upper triangle and return the upper factor `U` (`A = UᵀU`) instead of `L`. */
  upper?: boolean;
}

/**
 * The Cholesky factor `L` (lower, `A = LLᵀ`) of each symmetric
 * positive-definite matrix in `A`, as `torch.linalg.cholesky`: only the
 * lower triangle is read (the upper one with `upper: true`, as LAPACK's uplo). A matrix that is not positive-definite makes the
 * next read on the device reject with PyTorch's message (the batch element
 * and the order of the failing leading minor). The gradient is PyTorch's
 * symmetric one, `½(S + Sᵀ)` with `S = L⁻ᵀ Φ(Lᵀ gL) L⁻¹`.
 */
export function cholesky(A: Tensor, options: CholeskyOptions = {}): Tensor {
  return choleskyInfo("linalg.cholesky", A, options, true)[0];
}
