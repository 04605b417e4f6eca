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
export { bitwiseAnd, bitwiseLeftShift, bitwiseNot, bitwiseOr } from "./binary_extra.ts";
export { bitwiseRightShift, bitwiseXor, clampMax, clampMin, clip } from "./binary_extra.ts";
export { copysign, divide, floatPower, fmax, fmin, gcd, heaviside } from "./binary_extra.ts";
export { lcm, ldexp, multiply, remainder, rsub, subtract, trueDivide } from "./binary_extra.ts";
export type { DivideOptions, SubtractOptions } from "./binary_extra.ts";
export { arctan2 } from "./binary_extra.ts";
export { allclose, eq, equal, ge, greater, greaterEqual, gt, isclose } from "./logical.ts";
export { isneginf, isposinf, isreal, le, less, lessEqual, logicalAnd } from "./logical.ts";
export { logicalNot, logicalOr, logicalXor, lt, ne, notEqual } from "./logical.ts";
export type { IscloseOptions } from "./logical.ts";
export { bucketize, indexAdd, indexCopy, indexFill, searchsorted } from "./index_ops.ts";
export type { IndexAddOptions, SearchsortedOptions } from "./index_ops.ts";
export { indexPut, indexReduce, isin, maskedScatter, put, scatter } from "./scatter.ts";
export { scatterAdd, scatterReduce } from "./scatter.ts";
export type { IndexPutOptions, IsinOptions, ScatterOptions } from "./scatter.ts";
export type { ScatterReduceOptions, ScatterReduction } from "./scatter.ts";
export { argwhere, maskedSelect, nonzero, unique, uniqueConsecutive } from "./data_shape.ts";
export type { NonzeroOptions, UniqueConsecutiveOptions } from "./data_shape.ts";
export type { UniqueOptions, UniqueResult } from "./data_shape.ts";
export { aminmax, cummax, cummin, histogram, kthvalue, msort } from "./order.ts";
export type { AminmaxOptions, Histogram, HistogramOptions, MinMax } from "./order.ts";
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
export type { GeneratorOptions, MultinomialOptions } from "./random.ts";
export { addbmm, addmm, addmv, addr, baddbmm, bmm, chainMatmul, dot, ger } from "./products.ts";
export { inner, mm, mv, tensordot, vdot } from "./products.ts";
export type { AddProductOptions } from "./products.ts";
export { atleast1d, atleast2d, atleast3d, broadcastShapes, broadcastTensors } from "./shape_ops.ts";
export { broadcastTo, columnStack, concat, concatenate, dsplit, dstack } from "./shape_ops.ts";
export { fliplr, flipud, hsplit, hstack, moveaxis, movedim, ravel, rowStack } from "./shape_ops.ts";
export { swapaxes, swapdims, tensorSplit, unflatten, vsplit, vstack } from "./shape_ops.ts";
export { blockDiag, combinations, diagEmbed, diagflat, diagonal } from "./structure_more.ts";
export { diagonalScatter, diff, repeatInterleave, selectScatter } from "./structure_more.ts";
export { sliceScatter, take, takeAlongDim, trilIndices, triuIndices } from "./structure_more.ts";
export { vander } from "./structure_more.ts";
export type { CombinationsOptions, DiffOptions, IndicesOptions } from "./structure_more.ts";
export type { RepeatInterleaveOptions, SliceScatterOptions } from "./structure_more.ts";
export type { VanderOptions } from "./structure_more.ts";
export { corrcoef, cov, cumulativeTrapezoid, dist, gradient, renorm } from "./statistics.ts";
export { trapezoid, trapz } from "./statistics.ts";
export type { CovOptions, GradientOptions, TrapezoidOptions } from "./statistics.ts";
export {
  asTensor,
  bartlettWindow,
  blackmanWindow,
  canCast,
  empty,
  emptyLike,
} from "./factory_extra.ts";
export {
  finfo,
  hammingWindow,
  hannWindow,
  iinfo,
  kaiserWindow,
  logspace,
} from "./factory_extra.ts";
export { promoteTypes, resultType, scalarTensor } from "./factory_extra.ts";
export { getDefaultDtype, setDefaultDtype } from "./default_dtype.ts";
export type { AsTensorOptions, FInfo, HammingWindowOptions, IInfo } from "./factory_extra.ts";
export type { KaiserWindowOptions, LogspaceOptions, WindowOptions } from "./factory_extra.ts";
export { absolute, acos, acosh, arccos, arccosh, arcsin, arcsinh, arctan } from "./unary_math.ts";
export {
  arctanh,
  asin,
  asinh,
  atan,
  atanh,
  cosh,
  deg2rad,
  exp2,
  fix,
  log10,
} from "./unary_math.ts";
export {
  log2,
  logit,
  negative,
  positive,
  rad2deg,
  sgn,
  signbit,
  sinc,
  sinh,
  tan,
} from "./unary_math.ts";
export type { LogitOptions } from "./unary_math.ts";
export {
  digamma,
  erfc,
  erfinv,
  i0,
  lgamma,
  mvlgamma,
  polygamma,
  xlogy,
} from "./special_functions.ts";
// In-place variants (PyTorch's trailing-underscore methods) and random fills.
export * from "./inplace_variants.ts";
export * from "./inplace_random.ts";
// `Tensor.format()`'s op: printing as PyTorch (`src/printing/`).
export { formatTensor } from "../printing/tensor_str.ts";
