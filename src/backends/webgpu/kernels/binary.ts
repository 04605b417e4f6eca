/**
 * Elementwise functions of two operands with broadcasting. Layouts are
 * coalesced first; contiguous operands and scalars take vectorised fast
 * paths, everything else a strided path compiled once per rank.
 * @module
 */

import type { BinaryArgs, BinaryOp } from "../../backend.ts";
import { numelOf } from "../../../shape.ts";
import { coalesce } from "../layout.ts";
import { groups2d, PARAM_SLOT_WORDS, type Runtime } from "../runtime.ts";
import {
  FLOAT_SPECIALS_WGSL,
  IS_NAN_WGSL,
  literals,
  main1d,
  PARAMS_WGSL,
  storage,
  stridedOffsets,
  wgslType,
} from "../wgsl.ts";

const WG = 256;

const CMP: Partial<Record<BinaryOp, string>> = {
  eq: "==",
  ne: "!=",
  lt: "<",
  le: "<=",
  gt: ">",
  ge: ">=",
};

function body(op: BinaryOp, t: "f32" | "i32"): string {
  const cmp = CMP[op];
  if (cmp !== undefined) {
    const { zero, one } = literals(t);
    // NaN is decided by bits before any float comparison: GL drivers fold
    // comparisons as if NaN never occurs. Every comparison with NaN is
    // false, so ne is the negation of eq.
    const ordered = t === "f32" ? "!isNan(a) && !isNan(b) && " : "";
    if (op === "ne") return `return select(${one}, ${zero}, ${ordered}a == b);`;
    return `return select(${zero}, ${one}, ${ordered}a ${cmp} b);`;
  }
  switch (op) {
    case "add":
      return "return a + b;";
    case "sub":
      return "return a - b;";
    case "mul":
      return "return a * b;";
    case "div":
      // WGSL's i32 division truncates toward zero and never traps.
      return "return a / b;";
    case "maximum":
      return t === "f32"
        ? "if (isNan(a) || isNan(b)) { return a + b; } return max(a, b);"
        : "return max(a, b);";
    case "minimum":
      return t === "f32"
        ? "if (isNan(a) || isNan(b)) { return a + b; } return min(a, b);"
        : "return min(a, b);";
    case "bitwiseAnd":
      if (t === "i32") return "return a & b;";
      break;
    case "bitwiseOr":
      if (t === "i32") return "return a | b;";
      break;
    case "bitwiseXor":
      if (t === "i32") return "return a ^ b;";
      break;
    // The count modulo 32, as the contract asks: masked here too, since SPIR-V and GLSL leave
    // counts >= 32 undefined should a WGSL translator not mask them. >> on i32 is arithmetic.
    case "leftShift":
      if (t === "i32") return "return a << (bitcast<u32>(b) & 31u);";
      break;
    case "rightShift":
      if (t === "i32") return "return a >> (bitcast<u32>(b) & 31u);";
      break;
    case "fmod":
      if (t !== "f32") break;
      // C's fmod, exact, on the bits: WGSL's % is x - y·trunc(x/y), wrong once x/y passes 2^24,
      // and float steps lose subnormals on a GPU that flushes them. The 24-bit significands
      // (subnormals normalized) are reduced as integers, mx·2^n mod my, 8 bits per u32 %
      // (mx < 2^24 keeps mx·2^8 in u32): at most 35 steps, 1 for |x/y| < 2^8.
      return `let ux = bitcast<u32>(a) & 0x7fffffffu;
  let uy = bitcast<u32>(b) & 0x7fffffffu;
  let sign = bitcast<u32>(a) & 0x80000000u;
  if (uy == 0u || ux >= 0x7f800000u || uy > 0x7f800000u) { return nanF32(); }
  if (ux < uy) { return a; }
  let sx = select(0u, countLeadingZeros(ux) - 8u, ux < 0x800000u);
  let sy = select(0u, countLeadingZeros(uy) - 8u, uy < 0x800000u);
  var mx = select((ux & 0x7fffffu) | 0x800000u, ux << sx, ux < 0x800000u);
  let my = select((uy & 0x7fffffu) | 0x800000u, uy << sy, uy < 0x800000u);
  let ey = max(i32(uy >> 23u), 1) - i32(sy);
  var n = max(i32(ux >> 23u), 1) - i32(sx) - ey;
  loop {
    let k = min(n, 8);
    mx = (mx << u32(k)) % my;
    n = n - k;
    if (n <= 0 || mx == 0u) { break; }
  }
  if (mx == 0u) { return bitcast<f32>(sign); }
  let s = countLeadingZeros(mx) - 8u;
  let e = ey - i32(s);
  let m = mx << s;
  let bits = select(m >> u32(1 - e), (u32(e) << 23u) | (m & 0x7fffffu), e > 0);
  return bitcast<f32>(bits | sign);`;
    case "pow":
      if (t !== "f32") break;
      // pow(x, 0) = pow(1, y) = 1 even for NaN, pow(-1, ±inf) = 1 (as C and
      // PyTorch); any other NaN operand gives NaN. WGSL pow is undefined for a < 0; handle
      // integral exponents and make the common squares and roots exact.
      return `let an = isNan(a);
  let bn = isNan(b);
  if ((!bn && b == 0.0) || (!an && a == 1.0)) { return 1.0; }
  if (an || bn) { return nanF32(); }
  if (a == -1.0 && abs(b) == infF32()) { return 1.0; }
  if (b == 1.0) { return a; }
  if (b == 2.0) { return a * a; }
  if (a == 0.0) {
    // WGSL leaves pow(0, y) undefined (llvmpipe gave 0 for y < 0); C's: 0 for y > 0, inf for
    // y < 0, negative for a = -0 and an odd integer y.
    let odd = floor(b) == b && floor(0.5 * b) != 0.5 * b;
    let zero = select(0.0, infF32(), b < 0.0);
    return select(zero, -zero, odd && (bitcast<u32>(a) & 0x80000000u) != 0u);
  }
  if (b == 0.5 && a >= 0.0) { return sqrt(a); }
  if (b == -1.0) { return 1.0 / a; }
  let r = pow(abs(a), b);
  if (a < 0.0) {
    // C's pow(-inf, y) for y not an integer: |x|^y (+inf or +0), no NaN.
    if (floor(b) != b) { return select(nanF32(), r, a == -infF32()); }
    let h = 0.5 * b;
    if (floor(h) != h) { return -r; }
  }
  return r;`;
  }
  throw new Error(`webgpu binary ${op} does not support dtype ${t}`);
}

/** Records `out = op(a, b)` with broadcasting. */
export function binary(rt: Runtime, layout: BinaryArgs<GPUBuffer>): void {
  const { op, a, b, out } = layout;
  const t = wgslType(layout.dtype);
  const fn =
    (t === "f32" ? IS_NAN_WGSL + (op === "pow" || op === "fmod" ? FLOAT_SPECIALS_WGSL : "") : "") +
    `fn f(a: ${t}, b: ${t}) -> ${t} { ${body(op, t)} }\n`;
  const numel = numelOf(layout.shape);
  if (numel === 0) return;
  const { shape, strides: [as, bs] } = coalesce(layout.shape, [
    layout.aStrides,
    layout.bStrides,
  ]);
  const rank = shape.length;
  if (rank === 1 && (as[0] === 1 || as[0] === 0) && (bs[0] === 1 || bs[0] === 0)) {
    // Fast paths: a and b each contiguous or a single broadcast element.
    const va = as[0] === 1;
    const vb = bs[0] === 1;
    const vec = numel % 4 === 0;
    const count = vec ? numel / 4 : numel;
    const v4 = `vec4<${t}>`;
    const aT = vec && va ? v4 : t;
    const bT = vec && vb ? v4 : t;
    const outT = vec ? v4 : t;
    const ea = va ? "a[idx]" : "a[0]";
    const eb = vb ? "b[idx]" : "b[0]";
    let apply: string;
    if (vec) {
      const comp = (e: string, v: boolean, c: string) => v ? `${e}.${c}` : e;
      const parts = ["x", "y", "z", "w"].map((c) =>
        `f(${comp("va", va, c)}, ${comp("vb", vb, c)})`
      );
      apply = `let va = ${ea}; let vb = ${eb}; out[idx] = ${v4}(${parts.join(", ")});`;
    } else {
      apply = `out[idx] = f(${ea}, ${eb});`;
    }
    rt.dispatch({
      name: op,
      key: `binary_${op}_${t}_${va}_${vb}_${vec}`,
      wgsl: () =>
        PARAMS_WGSL + storage(1, "a", aT, false) + storage(2, "b", bT, false) +
        storage(3, "out", outT, true) + fn + main1d(WG) +
        `  ${apply}
}
`,
      signature: "rrw",
      buffers: [a, b, out],
      params: [count],
      groups: groups2d(Math.ceil(count / WG)),
    });
    return;
  }
  if (rank === 2 && shape[1] % 4 === 0) {
    const modes = [modeOf(as, shape[1]), modeOf(bs, shape[1])];
    if (modes[0] !== null && modes[1] !== null) {
      rowBroadcast(rt, op, fn, t, a, b, out, shape, modes[0], modes[1]);
      return;
    }
  }
  if (rank === 3 && shape[2] % 4 === 0) {
    // [outer, channels, inner] against one value per channel (a conv's
    // bias, a batch norm's scale): rows of `inner` with a channel mode.
    const modes = [channelModeOf(as, shape), channelModeOf(bs, shape)];
    if (modes[0] !== null && modes[1] !== null) {
      const rows = [shape[0] * shape[1], shape[2]];
      rowBroadcast(rt, op, fn, t, a, b, out, rows, modes[0], modes[1], shape[1]);
      return;
    }
  }
  if (1 + 3 * rank > PARAM_SLOT_WORDS) {
    throw new Error(`webgpu binary ${op}: rank ${rank} is too large`);
  }
  // General path: params are [numel, shape..., aStrides..., bStrides...].
  const params = [numel, ...shape, ...as.map((s) => s >>> 0), ...bs.map((s) => s >>> 0)];
  const index = stridedOffsets(rank, 1, [
    { name: "ia", stridesAt: 1 + rank },
    { name: "ib", stridesAt: 1 + 2 * rank },
  ]);
  rt.dispatch({
    name: op,
    key: `binary_${op}_${t}_r${rank}`,
    wgsl: () =>
      PARAMS_WGSL + storage(1, "a", t, false) + storage(2, "b", t, false) +
      storage(3, "out", t, true) + fn + main1d(WG) +
      `${index}  out[idx] = f(a[ia], b[ib]);
}
`,
    signature: "rrw",
    buffers: [a, b, out],
    params,
    groups: groups2d(Math.ceil(numel / WG)),
  });
}

/**
 * How a rank-2 operand of [rows, cols] is read: whole, one row, one column,
 * one element, or one value per channel (row `r` reads `r % channels`).
 */
type Mode = "full" | "row" | "col" | "one" | "chan";

/** The mode of a rank-3 [outer, channels, inner] operand: whole or one value per channel. */
function channelModeOf(strides: readonly number[], shape: readonly number[]): Mode | null {
  const [o, c, i] = strides;
  if (o === shape[1] * shape[2] && c === shape[2] && i === 1) return "full";
  if (o === 0 && c === 1 && i === 0) return "chan";
  return null;
}

function modeOf(strides: readonly number[], cols: number): Mode | null {
  const [r, c] = strides;
  if (r === cols && c === 1) return "full";
  if (r === 0 && c === 1) return "row";
  if (r === 1 && c === 0) return "col";
  if (r === 0 && c === 0) return "one";
  return null;
}

/**
 * [rows, cols] with cols % 4 == 0 where each operand is whole, a broadcast
 * row (a bias), a broadcast column or one element: vec4 loads and one
 * division per 4 outputs, instead of the general path's division and
 * modulo per dim per element (about 4x faster on llvmpipe).
 */
function rowBroadcast(
  rt: Runtime,
  op: BinaryOp,
  fn: string,
  t: "f32" | "i32",
  a: GPUBuffer,
  b: GPUBuffer,
  out: GPUBuffer,
  shape: number[],
  ma: Mode,
  mb: Mode,
  channels = 1,
): void {
  const [rows, cols] = shape;
  const count = (rows * cols) / 4;
  const v4 = `vec4<${t}>`;
  const decl = (name: string, binding: number, m: Mode) =>
    storage(binding, name, m === "full" || m === "row" ? v4 : t, false);
  const load = (name: string, m: Mode) => {
    switch (m) {
      case "full":
        return `${name}[idx]`;
      case "row":
        return `${name}[idx % c4]`;
      case "col":
        return `${v4}(${name}[idx / c4])`;
      case "one":
        return `${v4}(${name}[0])`;
      case "chan":
        return `${v4}(${name}[(idx / c4) % pu(2u)])`;
    }
  };
  const parts = ["x", "y", "z", "w"].map((c) => `f(va.${c}, vb.${c})`);
  rt.dispatch({
    name: op,
    key: `binary_${op}_${t}_rc_${ma}_${mb}`,
    wgsl: () =>
      PARAMS_WGSL + decl("a", 1, ma) + decl("b", 2, mb) + storage(3, "out", v4, true) + fn +
      main1d(WG) +
      `  let c4 = pu(1u);
  let va = ${load("a", ma)}; let vb = ${load("b", mb)};
  out[idx] = ${v4}(${parts.join(", ")});
}
`,
    signature: "rrw",
    buffers: [a, b, out],
    params: [count, cols / 4, channels],
    groups: groups2d(Math.ceil(count / WG)),
  });
}
