/**
 * `unary`: elementwise functions of one operand.
 * @module
 */

import type { UnaryArgs, UnaryOp } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";
import { residentLoops } from "../wasm/elementwise.ts";
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

/**
 * max(x, 0) with NaN kept. For float32 it masks the bits, without a branch
 * (a branch on the sign of random data mispredicts half the time: ~6x
 * slower): all ones where `!(x <= 0)` (positive or NaN), else +0.
 */
function relu(x: TypedArray, out: TypedArray, numel: number): void {
  if (x instanceof Float32Array && out instanceof Float32Array) {
    const loops = residentLoops(x, out);
    if (loops !== null) {
      loops.relu(out.byteOffset, x.byteOffset, numel);
      return;
    }
    const xi = new Int32Array(x.buffer, x.byteOffset, numel);
    const oi = new Int32Array(out.buffer, out.byteOffset, numel);
    for (let i = 0; i < numel; i++) oi[i] = xi[i] & -+!(x[i] <= 0);
    return;
  }
  for (let i = 0; i < numel; i++) out[i] = x[i] > 0 || x[i] !== x[i] ? x[i] : 0;
}

type Loop = (x: TypedArray, out: TypedArray, n: number) => void;

/**
 * Loops of the ops training runs over whole activations, each with its
 * arithmetic inline: the generic loop's call through `UNARY[op]` per element
 * is ~8x slower once several ops share it.
 */
const LOOPS: Partial<Record<UnaryOp, Loop>> = {
  neg(x, out, n) {
    for (let i = 0; i < n; i++) out[i] = -x[i];
  },
  square(x, out, n) {
    for (let i = 0; i < n; i++) out[i] = x[i] * x[i];
  },
  sqrt(x, out, n) {
    for (let i = 0; i < n; i++) out[i] = Math.sqrt(x[i]);
  },
  rsqrt(x, out, n) {
    for (let i = 0; i < n; i++) out[i] = 1 / Math.sqrt(x[i]);
  },
  reciprocal(x, out, n) {
    for (let i = 0; i < n; i++) out[i] = 1 / x[i];
  },
  exp(x, out, n) {
    for (let i = 0; i < n; i++) out[i] = Math.exp(x[i]);
  },
  log(x, out, n) {
    for (let i = 0; i < n; i++) out[i] = Math.log(x[i]);
  },
  abs(x, out, n) {
    for (let i = 0; i < n; i++) out[i] = Math.abs(x[i]);
  },
};

/** `out[i] = op(x[i])`. */
export function unary({ op, x, out, numel }: UnaryArgs<TypedArray>): void {
  if (op === "relu") {
    relu(x, out, numel);
    return;
  }
  if (op === "square" && out instanceof Int32Array) {
    // Wrapping int32 product: a float64 product loses low bits past 2^53.
    for (let i = 0; i < numel; i++) out[i] = Math.imul(x[i], x[i]);
    return;
  }
  if (op === "sigmoid" && out instanceof Float32Array) {
    // As PyTorch's float32 sigmoid, 1 / (1 + e^-x) with e^-x in float32: 0
    // once e^-x overflows (x < -88.72), not the subnormal float64 gives.
    for (let i = 0; i < numel; i++) out[i] = 1 / (1 + Math.fround(Math.exp(-x[i])));
    return;
  }
  const loop = LOOPS[op];
  if (loop) {
    loop(x, out, numel);
    return;
  }
  const f = UNARY[op];
  for (let i = 0; i < numel; i++) out[i] = f(x[i]);
}
