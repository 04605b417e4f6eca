/**
 * Every tensor operation as a function (`add(a, b)`, `cat([a, b], 0)`), as
 * `torch.*` offers them beside the methods.
 * @module
 */

import "./install.ts";

export { abs, add, ceil, clamp, cos, div, exp, expm1, floor, gelu, log } from "./elementwise.ts";
export { log1p, maximum, minimum, mul, neg, pow, reciprocal, relu, round } from "./elementwise.ts";
export { rsqrt, sigmoid, sign, sin, sqrt, square, sub, tanh } from "./elementwise.ts";
export { gather, maskedFill, select, tril, triu, where } from "./indexing.ts";
export { argmax, argmin, logsumexp, max, mean, min, std, sum, variance as var } from "./reduce.ts";
export type { VarianceOptions } from "./reduce.ts";
export { cat, chunk, clone, expand, flatten, narrow, permute, reshape, split } from "./view.ts";
export { squeeze, stack, transpose, unbind, unsqueeze } from "./view.ts";
export { linear, matmul } from "./linalg.ts";
export { logSoftmax, softmax } from "./softmax.ts";
export { arange, full, getRngState, initialSeed, manualSeed } from "./factory.ts";
export { normal, ones, rand, randn } from "./factory.ts";
export { setRngState, tensor, uniform, zeros } from "./factory.ts";
export { fullLike, onesLike, randLike, randnLike, zerosLike } from "./factory.ts";
export type { NestedArray, RngState, TensorOptions } from "./factory.ts";
export type { TensorLike } from "./util.ts";
