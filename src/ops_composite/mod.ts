/**
 * Tensor operations composed from the core's ops and kernels (no backend
 * needs a kernel of its own for them): as functions here, as Tensor
 * methods once `./install.ts` has run.
 * @module
 */

import "./install.ts";

export { flip, outer, repeat, roll, tile } from "./rearrange.ts";
export { cumprod, cumsum, prod } from "./scan.ts";
export { all, amax, amin, any, norm } from "./reduce.ts";
export { erf, frac, isfinite, isinf, isnan, lerp, nanToNum, trunc } from "./elementwise.ts";
export type { NanToNumOptions } from "./elementwise.ts";
export { argsort, sort, topk } from "./sort.ts";
export type { ValuesIndices } from "./sort.ts";
export { eye, linspace } from "./factory.ts";
