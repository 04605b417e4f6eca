/**
 * Elementwise functions of one operand.
 * @module
 */

import type { DType } from "../../../dtype.ts";
import type { UnaryOp } from "../../backend.ts";
import { groups2d, type Runtime } from "../runtime.ts";
import { IS_NAN_WGSL, main1d, PARAMS_WGSL, storage, wgslType } from "../wgsl.ts";
import { NORMAL_CDF_WGSL } from "./math.ts";

const WG = 256;

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
  gelu: "if (isNan(x)) { return x; } return x * phi(x);",
  geluGrad:
    "if (isNan(x)) { return x; } return phi(x) + x * 0.3989422804014327 * exp(-0.5 * x * x);",
  // sign(NaN) is 0, as in PyTorch.
  sign: "if (isNan(x)) { return 0.0; } return select(select(x, -1.0, x < 0.0), 1.0, x > 0.0);",
};

const INT_BODIES: Partial<Record<UnaryOp, string>> = {
  neg: "return 0 - x;",
  abs: "return select(x, 0 - x, x < 0);",
  relu: "return max(x, 0);",
  sign: "return select(select(0, -1, x < 0), 1, x > 0);",
};

/** Records `out[i] = op(x[i])`. */
export function unary(
  rt: Runtime,
  op: UnaryOp,
  x: GPUBuffer,
  out: GPUBuffer,
  numel: number,
  dtype: DType,
): void {
  const t = wgslType(dtype);
  const body = t === "f32" ? FLOAT_BODIES[op] : INT_BODIES[op];
  if (body === undefined) {
    throw new Error(`webgpu unary ${op} does not support dtype ${dtype}`);
  }
  if (numel === 0) return;
  const vec = numel % 4 === 0;
  const count = vec ? numel / 4 : numel;
  const vt = vec ? `vec4<${t}>` : t;
  const apply = vec
    ? `let v = x[idx]; out[idx] = vec4<${t}>(f(v.x), f(v.y), f(v.z), f(v.w));`
    : "out[idx] = f(x[idx]);";
  rt.dispatch({
    name: op,
    key: `unary_${op}_${t}_${vec}`,
    wgsl: () =>
      PARAMS_WGSL + storage(1, "x", vt, false) + storage(2, "out", vt, true) +
      (t === "f32" ? IS_NAN_WGSL : "") +
      (op === "gelu" || op === "geluGrad" ? NORMAL_CDF_WGSL : "") +
      `fn f(x: ${t}) -> ${t} { ${body} }\n` + main1d(WG) +
      `  if (idx >= pu(0u)) { return; }
  ${apply}
}
`,
    signature: "rw",
    buffers: [x, out],
    params: [count],
    groups: groups2d(Math.ceil(count / WG)),
  });
}
