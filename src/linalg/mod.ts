/**
 * `torch.linalg`: norms, determinants, inverses, linear solves, the
 * Cholesky, LU, LDLᵀ, QR, symmetric eigen- and singular value decompositions, least squares, the
 * matrix exponential, batched over leading dims, float32 and
 * float64, on every backend (compositions of the core's ops; QR, eigh and svd through the backend's
 * kernels where it has them, as the cpu backend does).
 *
 * @example
 * ```ts
 * import { linalg, tensor } from "@multigrad/core";
 * const A = tensor([[4, 1], [1, 3]]);
 * const x = linalg.solve(A, tensor([1, 2]));
 * console.log(await linalg.det(A).item()); // 11
 * ```
 * @module
 */

import "../ops_composite/mod.ts";

export { det, inv, matrixPower, slogdet, solve } from "./lu.ts";
export type { SolveOptions } from "./lu.ts";
export { cholesky, solveTriangular } from "./triangular.ts";
export type { CholeskyOptions, SolveTriangularOptions } from "./triangular.ts";
export { qr } from "./qr.ts";
export type { QrOptions } from "./qr.ts";
export { matrixNorm, vectorNorm } from "./norms.ts";
export type { MatrixNormOptions, VectorNormOptions } from "./norms.ts";
export { cross, multiDot } from "./products.ts";
export { eigh, eigvalsh, matrixRank, pinv, svd, svdvals } from "./spectral.ts";
export type { EighOptions, PinvOptions, SvdOptions } from "./spectral.ts";
export { choleskyEx, householderProduct, invEx, ldlFactor, ldlFactorEx } from "./decompositions.ts";
export { ldlSolve, lu, luFactor, luFactorEx, luSolve, solveEx } from "./decompositions.ts";
export type { CheckErrorsOptions, LdlFactorOptions, LuFactorOptions } from "./decompositions.ts";
export type { LuSolveOptions, LuUnpackOptions, SolveExOptions } from "./decompositions.ts";
export { cond, lstsq, matrixExp, tensorinv, tensorsolve, vander, vecdot } from "./extra.ts";
export type { LstsqOptions, LstsqResult } from "./extra.ts";
export { LinAlgError } from "./errors.ts";
export { diagonal, matmul, norm } from "./norm.ts";
export type { DiagonalOptions, NormOptions } from "./norm.ts";
