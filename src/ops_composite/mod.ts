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
export { einsum } from "./einsum.ts";
export { cartesianProd, diag, kron, meshgrid, rot90, trace } from "./structure.ts";
export type { MeshgridOptions } from "./structure.ts";
export { atan2, floorDivide, fmod, hypot, logaddexp, logaddexp2, logcumsumexp } from "./binary.ts";
export { bucketize, indexAdd, indexCopy, indexFill, searchsorted } from "./index_ops.ts";
export type { IndexAddOptions, SearchsortedOptions } from "./index_ops.ts";
export { cdist } from "./distance.ts";
export type { CdistOptions } from "./distance.ts";
export { bincount, countNonzero, histc, median, mode, nanmean, nanmedian } from "./stats.ts";
export { nanquantile, nansum, quantile, stdMean, varMean } from "./stats.ts";
export type { BincountOptions, HistcOptions, QuantileInterpolation } from "./stats.ts";
export type { QuantileOptions, VarMeanOptions } from "./stats.ts";
export {
  bernoulli,
  multinomial,
  normal,
  poisson,
  randint,
  randintLike,
  randperm,
} from "./random.ts";
export type { MultinomialOptions } from "./random.ts";
