import type { BinaryLayout, BinaryOp, UnaryOp } from "../../backend.ts";
import type { DType, TypedArray } from "../../../dtype.ts";
import { numelOf } from "../../../shape.ts";
import { erfc } from "./erf.ts";
import { gelu } from "./gelu.ts";

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
  // Run by ./gelu.ts (float32 and float64 paths); kept here for the table's completeness.
  gelu: (x) => 0.5 * x * erfc(-x * SQRT1_2),
  geluGrad: (x) => 0.5 * erfc(-x * SQRT1_2) + x * INV_SQRT_2PI * Math.exp(-0.5 * x * x),
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
  if (op === "gelu" || op === "geluGrad") {
    gelu(x, out, numel, op === "geluGrad");
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

/**
 * One output row of a binary op: `out[o + j] = a[ai + j·sa] op b[bi + j·sb]`
 * for `j < n`. One function per op keeps each loop monomorphic (a call
 * through a closure per element costs V8 several times the arithmetic).
 */
type RowLoop = (
  out: TypedArray,
  o: number,
  a: TypedArray,
  ai: number,
  sa: number,
  b: TypedArray,
  bi: number,
  sb: number,
  n: number,
) => void;

const ROW_LOOPS: Partial<Record<BinaryOp, RowLoop>> = {
  add(out, o, a, ai, sa, b, bi, sb, n) {
    for (let j = 0; j < n; j++, ai += sa, bi += sb) out[o + j] = a[ai] + b[bi];
  },
  sub(out, o, a, ai, sa, b, bi, sb, n) {
    for (let j = 0; j < n; j++, ai += sa, bi += sb) out[o + j] = a[ai] - b[bi];
  },
  mul(out, o, a, ai, sa, b, bi, sb, n) {
    for (let j = 0; j < n; j++, ai += sa, bi += sb) out[o + j] = a[ai] * b[bi];
  },
  div(out, o, a, ai, sa, b, bi, sb, n) {
    for (let j = 0; j < n; j++, ai += sa, bi += sb) out[o + j] = a[ai] / b[bi];
  },
  gt(out, o, a, ai, sa, b, bi, sb, n) {
    for (let j = 0; j < n; j++, ai += sa, bi += sb) out[o + j] = a[ai] > b[bi] ? 1 : 0;
  },
  lt(out, o, a, ai, sa, b, bi, sb, n) {
    for (let j = 0; j < n; j++, ai += sa, bi += sb) out[o + j] = a[ai] < b[bi] ? 1 : 0;
  },
  eq(out, o, a, ai, sa, b, bi, sb, n) {
    for (let j = 0; j < n; j++, ai += sa, bi += sb) out[o + j] = a[ai] === b[bi] ? 1 : 0;
  },
  maximum(out, o, a, ai, sa, b, bi, sb, n) {
    for (let j = 0; j < n; j++, ai += sa, bi += sb) {
      const x = a[ai], y = b[bi];
      out[o + j] = x > y || x !== x ? x : y;
    }
  },
};

/** The row loop of `op` for `dtype`, or one calling `f` per element. */
function rowLoop(op: BinaryOp, dtype: DType, f: (a: number, b: number) => number): RowLoop {
  // int32 mul and div need Math.imul and truncation.
  const loop = dtype === "int32" && (op === "mul" || op === "div") ? undefined : ROW_LOOPS[op];
  return loop ?? ((out, o, a, ai, sa, b, bi, sb, n) => {
    for (let j = 0; j < n; j++, ai += sa, bi += sb) out[o + j] = f(a[ai], b[bi]);
  });
}

/**
 * The layout with size-1 dims dropped and neighbouring dims merged where
 * both operands step through them as one (contiguous runs, or broadcast in
 * both), so a bias add [m, n] + [n] becomes m rows of n and a same-shape
 * op one row.
 */
function collapse(
  shape: readonly number[],
  aStrides: readonly number[],
  bStrides: readonly number[],
): { shape: number[]; sa: number[]; sb: number[] } {
  const dims: number[] = [];
  const sa: number[] = [];
  const sb: number[] = [];
  for (let d = 0; d < shape.length; d++) {
    if (shape[d] === 1) continue;
    const last = dims.length - 1;
    if (
      last >= 0 && sa[last] === aStrides[d] * shape[d] && sb[last] === bStrides[d] * shape[d]
    ) {
      dims[last] *= shape[d];
      sa[last] = aStrides[d];
      sb[last] = bStrides[d];
      continue;
    }
    dims.push(shape[d]);
    sa.push(aStrides[d]);
    sb.push(bStrides[d]);
  }
  if (dims.length === 0) return { shape: [1], sa: [0], sb: [0] };
  return { shape: dims, sa, sb };
}

/** `out = op(a, b)` with broadcasting. */
export function binary(
  op: BinaryOp,
  a: TypedArray,
  b: TypedArray,
  out: TypedArray,
  layout: BinaryLayout,
): void {
  const numel = numelOf(layout.shape);
  if (numel === 0) return;
  const { shape, sa: aStrides, sb: bStrides } = collapse(
    layout.shape,
    layout.aStrides,
    layout.bStrides,
  );
  const loop = rowLoop(op, layout.dtype, binaryFunction(op, layout.dtype));
  const nd = shape.length;
  const last = shape[nd - 1];
  const sa = aStrides[nd - 1];
  const sb = bStrides[nd - 1];
  if (nd === 1) {
    loop(out, 0, a, 0, sa, b, 0, sb, last);
    return;
  }
  // Walk the output rows with an odometer over the outer dims.
  const index = new Array<number>(nd).fill(0);
  let ai = 0;
  let bi = 0;
  for (let o = 0; o < numel; o += last) {
    loop(out, o, a, ai, sa, b, bi, sb, last);
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
