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

// `export *` only: deno doc lists a namespace's members only when they are re-exported this way
// (tests/docs_test.ts checks it), so these files export nothing internal (see lu_steps.ts).
export * from "./lu.ts";
export * from "./triangular.ts";
export * from "./cholesky.ts";
export * from "./qr.ts";
export * from "./norms.ts";
export * from "./products.ts";
export * from "./spectral.ts";
export * from "./decompositions.ts";
export * from "./extra.ts";
export * from "./errors.ts";
export * from "./norm.ts";
export type { LuUnpackOptions } from "./lu_unpack.ts";
