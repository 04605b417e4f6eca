/**
 * `binary`: elementwise functions of two operands, with broadcasting.
 * @module
 */

import type { BinaryArgs, BinaryOp } from "../../backend.ts";
import type { DType, TypedArray } from "../../../dtype.ts";
import { residentLoops, WASM_BINARY_OPS } from "../wasm/elementwise.ts";
import { numelOf } from "../../../shape.ts";

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
      // pow(1, y) is 1 even for NaN and ±inf, so is pow(-1, ±inf) (C and PyTorch; JavaScript
      // gives NaN for both).
      return (a, b) => (a === 1 || (a === -1 && Math.abs(b) === Infinity) ? 1 : Math.pow(a, b));
    case "fmod":
      // JavaScript's % is C's fmod, exact, but a slow loop (~25 times add, ~200 at |x/y| ~1e42).
      // For float32 operands with 1 <= |x/y| < 2^24, x - trunc(x/y)·y in float64 is exact: the
      // quotient is at least 2^-24 from an integer, far beyond float64's rounding of it, and
      // trunc·y needs 48 bits. A zero takes x's sign, as C's.
      if (dtype !== "float32") return (a, b) => a % b;
      return (a, b) => {
        const q = Math.abs(a / b);
        if (!(q < 16777216)) return a % b;
        if (q < 1) return a;
        const r = a - Math.trunc(a / b) * b;
        return r === 0 ? a * 0 : r;
      };
    case "maximum":
      return (a, b) => (a > b || Number.isNaN(a) ? a : b);
    case "minimum":
      return (a, b) => (a < b || Number.isNaN(a) ? a : b);
    case "eq":
      return (a, b) => +(a === b);
    case "ne":
      return (a, b) => +(a !== b);
    case "lt":
      return (a, b) => +(a < b);
    case "le":
      return (a, b) => +(a <= b);
    case "gt":
      return (a, b) => +(a > b);
    case "ge":
      return (a, b) => +(a >= b);
    // JavaScript's shifts take the count modulo 32, as the contract asks.
    case "bitwiseAnd":
      return (a, b) => a & b;
    case "bitwiseOr":
      return (a, b) => a | b;
    case "bitwiseXor":
      return (a, b) => a ^ b;
    case "leftShift":
      return (a, b) => a << b;
    case "rightShift":
      return (a, b) => a >> b;
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

// Comparisons are written `+(a > b)`, not `a > b ? 1 : 0`: V8 compiles the
// first without a branch, which on random data (a ReLU mask) is ~7x faster.
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
    for (let j = 0; j < n; j++, ai += sa, bi += sb) out[o + j] = +(a[ai] > b[bi]);
  },
  lt(out, o, a, ai, sa, b, bi, sb, n) {
    for (let j = 0; j < n; j++, ai += sa, bi += sb) out[o + j] = +(a[ai] < b[bi]);
  },
  ge(out, o, a, ai, sa, b, bi, sb, n) {
    for (let j = 0; j < n; j++, ai += sa, bi += sb) out[o + j] = +(a[ai] >= b[bi]);
  },
  le(out, o, a, ai, sa, b, bi, sb, n) {
    for (let j = 0; j < n; j++, ai += sa, bi += sb) out[o + j] = +(a[ai] <= b[bi]);
  },
  eq(out, o, a, ai, sa, b, bi, sb, n) {
    for (let j = 0; j < n; j++, ai += sa, bi += sb) out[o + j] = +(a[ai] === b[bi]);
  },
  ne(out, o, a, ai, sa, b, bi, sb, n) {
    for (let j = 0; j < n; j++, ai += sa, bi += sb) out[o + j] = +(a[ai] !== b[bi]);
  },
  maximum(out, o, a, ai, sa, b, bi, sb, n) {
    for (let j = 0; j < n; j++, ai += sa, bi += sb) {
      const x = a[ai], y = b[bi];
      out[o + j] = x > y || x !== x ? x : y;
    }
  },
};

/**
 * A row against one value of `b` (a bias per row, a comparison with 0):
 * `out[o + j] = a[ai + j·sa] op v`. Measured 3-5x faster than the general
 * loop with `sb = 0` on a [64, 16, 784] + [16, 1] bias add.
 */
type ScalarLoop = (
  out: TypedArray,
  o: number,
  a: TypedArray,
  ai: number,
  sa: number,
  v: number,
  n: number,
) => void;

const SCALAR_LOOPS: Partial<Record<BinaryOp, ScalarLoop>> = {
  add(out, o, a, ai, sa, v, n) {
    for (let j = 0; j < n; j++, ai += sa) out[o + j] = a[ai] + v;
  },
  sub(out, o, a, ai, sa, v, n) {
    for (let j = 0; j < n; j++, ai += sa) out[o + j] = a[ai] - v;
  },
  mul(out, o, a, ai, sa, v, n) {
    for (let j = 0; j < n; j++, ai += sa) out[o + j] = a[ai] * v;
  },
  div(out, o, a, ai, sa, v, n) {
    for (let j = 0; j < n; j++, ai += sa) out[o + j] = a[ai] / v;
  },
  gt(out, o, a, ai, sa, v, n) {
    for (let j = 0; j < n; j++, ai += sa) out[o + j] = +(a[ai] > v);
  },
  ge(out, o, a, ai, sa, v, n) {
    for (let j = 0; j < n; j++, ai += sa) out[o + j] = +(a[ai] >= v);
  },
  lt(out, o, a, ai, sa, v, n) {
    for (let j = 0; j < n; j++, ai += sa) out[o + j] = +(a[ai] < v);
  },
  le(out, o, a, ai, sa, v, n) {
    for (let j = 0; j < n; j++, ai += sa) out[o + j] = +(a[ai] <= v);
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

/**
 * For float32 operands in the matmul kernel's memory (a `b` of one value per
 * row may be a host array), a row loop in WebAssembly SIMD for contiguous
 * rows of `a`: against a contiguous `b` or one value of it.
 */
function residentRowLoop(op: BinaryOp, { a, b, out }: BinaryArgs<TypedArray>): RowLoop | undefined {
  const code = (WASM_BINARY_OPS as Partial<Record<BinaryOp, number>>)[op];
  if (code === undefined) return undefined;
  const withB = residentLoops(a, b, out);
  const withoutB = withB ?? residentLoops(a, out);
  if (withoutB === null) return undefined;
  return (out, o, a, ai, _sa, b, bi, sb, n) => {
    const [at, to] = [a.byteOffset + 4 * ai, out.byteOffset + 4 * o];
    if (sb === 0) withoutB.binary_scalar(code, to, at, b[bi], n);
    else if (withB !== null) withB.binary(code, to, at, b.byteOffset + 4 * bi, n);
    else ROW_LOOPS[op]!(out, o, a, ai, 1, b, bi, sb, n);
  };
}

/** `out = op(a, b)` with broadcasting. */
export function binary(layout: BinaryArgs<TypedArray>): void {
  const { op, a, b, out } = layout;
  const numel = numelOf(layout.shape);
  if (numel === 0) return;
  const { shape, sa: aStrides, sb: bStrides } = collapse(
    layout.shape,
    layout.aStrides,
    layout.bStrides,
  );
  let loop = rowLoop(op, layout.dtype, binaryFunction(op, layout.dtype));
  const wasmLoop = layout.dtype === "float32" ? residentRowLoop(op, layout) : undefined;
  const nd = shape.length;
  const last = shape[nd - 1];
  const sa = aStrides[nd - 1];
  const sb = bStrides[nd - 1];
  const scalar = sb === 0 && !(layout.dtype === "int32" && (op === "mul" || op === "div"))
    ? SCALAR_LOOPS[op]
    : undefined;
  if (scalar) loop = (out, o, a, ai, sa, b, bi, _sb, n) => scalar(out, o, a, ai, sa, b[bi], n);
  if (wasmLoop !== undefined && sa === 1 && (sb === 1 || sb === 0)) loop = wasmLoop;
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
