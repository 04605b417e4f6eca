/**
 * `unary`: elementwise functions of one operand.
 * @module
 */

import type { UnaryArgs, UnaryOp } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";
import { erf } from "./erf.ts";

const UNARY: Record<UnaryOp, (x: number) => number> = {
  neg: (x) => -x,
  exp: Math.exp,
  log: Math.log,
  sqrt: Math.sqrt,
  abs: Math.abs,
  // NaN propagates, as in PyTorch.
  relu: (x) => (x > 0 || x !== x ? x : 0),
  sigmoid: (x) => 1 / (1 + Math.exp(-x)),
  tanh: Math.tanh,
  erf,
  // NaN gives 0 and -0 gives +0, as PyTorch.
  sign: (x) => (x > 0 ? 1 : x < 0 ? -1 : 0),
  sin: Math.sin,
  cos: Math.cos,
  floor: Math.floor,
  ceil: Math.ceil,
  round: roundHalfEven,
  log1p: Math.log1p,
  expm1: Math.expm1,
  rsqrt: (x) => 1 / Math.sqrt(x),
  reciprocal: (x) => 1 / x,
  square: (x) => x * x,
};

/** Rounds to the nearest integer, halves to the even one (as PyTorch and WGSL). */
function roundHalfEven(x: number): number {
  const r = Math.round(x); // halves go up here
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** `out[i] = op(x[i])`. */
export function unary({ op, x, out, numel }: UnaryArgs<TypedArray>): void {
  if (op === "relu") {
    for (let i = 0; i < numel; i++) out[i] = x[i] > 0 || x[i] !== x[i] ? x[i] : 0;
    return;
  }
  if (op === "square" && out instanceof Int32Array) {
    // Wrapping int32 product: a float64 product loses low bits past 2^53.
    for (let i = 0; i < numel; i++) out[i] = Math.imul(x[i], x[i]);
    return;
  }
  const f = UNARY[op];
  for (let i = 0; i < numel; i++) out[i] = f(x[i]);
}
