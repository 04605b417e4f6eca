/**
 * `unary`: elementwise functions of one operand.
 * @module
 */

import type { UnaryArgs, UnaryOp } from "../../backend.ts";
import { dispatchMap } from "../map.ts";
import type { Runtime } from "../runtime.ts";
import { wgslType } from "../wgsl.ts";
import { ERF_WGSL, SIN_COS_WGSL } from "./math.ts";

/**
 * Every float body sees NaN first, by bits: GL drivers fold float
 * comparisons as if NaN never occurs (`x < 0.0` turning into `!(x >= 0.0)`),
 * which made `relu(NaN)` 0 there.
 */
const FLOAT_BODIES: Record<UnaryOp, string> = {
  neg: "return -x;",
  exp: "return exp(x);",
  log: "return log(x);",
  sqrt: "return sqrt(x);",
  abs: "return abs(x);",
  relu: "if (isNan(x)) { return x; } return select(x, 0.0, x < 0.0);",
  // Two branches so exp never overflows into inf / inf.
  sigmoid: "if (isNan(x)) { return x; } if (x >= 0.0) { return 1.0 / (1.0 + exp(-x)); } " +
    "let e = exp(x); return e / (1.0 + e);",
  // Some drivers compute tanh from exp and give NaN for large |x|.
  tanh: "if (isNan(x)) { return x; } if (abs(x) > 9.0) { return select(-1.0, 1.0, x > 0.0); } " +
    "return tanh(x);",
  erf: "if (isNan(x)) { return x; } return erf(x);",
  // sign(NaN) is 0 and sign(-0) is +0 as in PyTorch (through i32).
  sign: "if (isNan(x)) { return 0.0; } return f32(select(0, 1, x > 0.0) - select(0, 1, x < 0.0));",
  // Drivers may compute sin/cos of inf as anything; PyTorch gives NaN.
  sin: "if (!isFinite(x)) { return nanF32(); } return sinCos(x, false);",
  cos: "if (!isFinite(x)) { return nanF32(); } return sinCos(x, true);",
  floor: "if (!isFinite(x)) { return x; } return floor(x);",
  ceil: "if (!isFinite(x)) { return x; } return ceil(x);",
  // WGSL's round is half to even, as PyTorch's.
  round: "if (!isFinite(x)) { return x; } return round(x);",
  // WGSL's log and exp are only accurate to an absolute 2^-21 near 1 and
  // 0, so near 0 these use series: log1p(x) = 2 atanh(s) with
  // s = x / (2 + x), |s| <= 1/3 (9 odd terms), and the Taylor series of
  // e^x - 1 for |x| < 0.5 (9 terms); both keep float32 relative accuracy.
  log1p: `if (isNan(x) || x < -1.0) { return nanF32(); }
  if (x == -1.0) { return -infF32(); }
  if (!isFinite(x)) { return x; }
  if (x <= -0.5 || x >= 1.0) { return log(1.0 + x); }
  let s = x / (2.0 + x);
  let s2 = s * s;
  var p = 1.0 / 19.0;
  for (var k = 8; k >= 0; k--) { p = 1.0 / f32(2 * k + 1) + s2 * p; }
  return 2.0 * s * p;`,
  expm1: `if (isNan(x)) { return x; }
  if (x > 88.8) { return infF32(); }
  if (x < -17.5) { return -1.0; }
  if (abs(x) >= 0.5) { return exp(x) - 1.0; }
  var p = 1.0;
  for (var k = 9; k >= 2; k--) { p = 1.0 + x / f32(k) * p; }
  return x * p;`,
  rsqrt: "if (isNan(x) || x < 0.0) { return nanF32(); } return 1.0 / sqrt(x);",
  reciprocal: "return 1.0 / x;",
  square: "return x * x;",
};

const INT_BODIES: Partial<Record<UnaryOp, string>> = {
  neg: "return 0 - x;",
  abs: "return select(x, 0 - x, x < 0);",
  relu: "return max(x, 0);",
  sign: "return select(select(0, -1, x < 0), 1, x > 0);",
  floor: "return x;",
  ceil: "return x;",
  round: "return x;",
  square: "return x * x;",
};

/** Records `out[i] = op(x[i])`. */
export function unary(rt: Runtime, { op, x, out, numel, dtype }: UnaryArgs<GPUBuffer>): void {
  const type = wgslType(dtype);
  const body = type === "f32" ? FLOAT_BODIES[op] : INT_BODIES[op];
  if (body === undefined) {
    throw new Error(`${rt.name} unary ${op} does not support dtype ${dtype}`);
  }
  const helpers = op === "erf" ? ERF_WGSL : op === "sin" || op === "cos" ? SIN_COS_WGSL : "";
  dispatchMap(rt, { name: op, key: `unary_${op}`, type, body, helpers }, x, out, numel);
}
