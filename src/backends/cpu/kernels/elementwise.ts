import type { BinaryLayout, BinaryOp, UnaryOp } from "../../backend.ts";
import type { DType, TypedArray } from "../../../dtype.ts";
import { numelOf } from "../../../shape.ts";
import { erf } from "./erf.ts";

const SQRT1_2 = Math.SQRT1_2;
const INV_SQRT_2PI = 1 / Math.sqrt(2 * Math.PI);

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
  gelu: (x) => 0.5 * x * (1 + erf(x * SQRT1_2)),
  geluGrad: (x) => 0.5 * (1 + erf(x * SQRT1_2)) + x * INV_SQRT_2PI * Math.exp(-0.5 * x * x),
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
export function unary(
  op: UnaryOp,
  x: TypedArray,
  out: TypedArray,
  numel: number,
): void {
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

function binaryFunction(
  op: BinaryOp,
  dtype: DType,
): (a: number, b: number) => number {
  switch (op) {
    case "add":
      return (a, b) => a + b;
    case "sub":
      return (a, b) => a - b;
    case "mul":
      return dtype === "int32" ? Math.imul : (a, b) => a * b;
    case "div":
      return dtype === "int32" ? (a, b) => (b === 0 ? 0 : Math.trunc(a / b)) : (a, b) => a / b;
    case "pow":
      // pow(1, y) is 1 even for NaN and ±inf (C and PyTorch; JavaScript gives NaN).
      return (a, b) => (a === 1 ? 1 : Math.pow(a, b));
    case "maximum":
      return (a, b) => (a > b || Number.isNaN(a) ? a : b);
    case "minimum":
      return (a, b) => (a < b || Number.isNaN(a) ? a : b);
    case "eq":
      return (a, b) => (a === b ? 1 : 0);
    case "ne":
      return (a, b) => (a !== b ? 1 : 0);
    case "lt":
      return (a, b) => (a < b ? 1 : 0);
    case "le":
      return (a, b) => (a <= b ? 1 : 0);
    case "gt":
      return (a, b) => (a > b ? 1 : 0);
    case "ge":
      return (a, b) => (a >= b ? 1 : 0);
  }
}

function isContiguous(
  strides: readonly number[],
  shape: readonly number[],
): boolean {
  let s = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    if (shape[i] !== 1 && strides[i] !== s) return false;
    s *= shape[i];
  }
  return true;
}

/** `out = op(a, b)` with broadcasting. */
export function binary(
  op: BinaryOp,
  a: TypedArray,
  b: TypedArray,
  out: TypedArray,
  layout: BinaryLayout,
): void {
  const { shape, aStrides, bStrides } = layout;
  const f = binaryFunction(op, layout.dtype);
  const numel = numelOf(shape);
  if (numel === 0) return;
  const aFlat = isContiguous(aStrides, shape);
  const bFlat = isContiguous(bStrides, shape);
  const bScalar = bStrides.every((s) => s === 0);
  if (aFlat && bFlat) {
    if (op === "add") { for (let i = 0; i < numel; i++) out[i] = a[i] + b[i]; }
    else if (op === "mul" && layout.dtype !== "int32") {
      for (let i = 0; i < numel; i++) out[i] = a[i] * b[i];
    } else if (op === "sub") {
      for (let i = 0; i < numel; i++) out[i] = a[i] - b[i];
    } else for (let i = 0; i < numel; i++) out[i] = f(a[i], b[i]);
    return;
  }
  if (aFlat && bScalar) {
    const s = b[0];
    for (let i = 0; i < numel; i++) out[i] = f(a[i], s);
    return;
  }
  // General case: walk the output with an odometer over all but the last dim.
  const nd = shape.length;
  const last = shape[nd - 1];
  const sa = aStrides[nd - 1];
  const sb = bStrides[nd - 1];
  const index = new Array<number>(nd).fill(0);
  let ai = 0;
  let bi = 0;
  for (let o = 0; o < numel; o += last) {
    for (let j = 0; j < last; j++) {
      out[o + j] = f(a[ai + j * sa], b[bi + j * sb]);
    }
    for (let d = nd - 2; d >= 0; d--) {
      index[d]++;
      ai += aStrides[d];
      bi += bStrides[d];
      if (index[d] < shape[d]) break;
      ai -= aStrides[d] * shape[d];
      bi -= bStrides[d] * shape[d];
      index[d] = 0;
    }
  }
}

/** Elementwise conversion; float to int truncates toward zero. */
export function cast(
  x: TypedArray,
  out: TypedArray,
  numel: number,
  to: DType,
): void {
  if (to === "int32") {
    for (let i = 0; i < numel; i++) out[i] = Math.trunc(x[i]);
  } else for (let i = 0; i < numel; i++) out[i] = x[i];
}
