/**
 * Batched matrix products, with two kernel families:
 *
 * - register-blocked (CPU adapters such as llvmpipe): each invocation keeps
 *   `ROWS` rows x 4 columns of `out` in registers and streams A and B from
 *   memory, with no workgroup memory. On a CPU implementation a barrier is a
 *   coroutine switch, so shared-memory tiling costs more than it saves.
 * - shared-memory tiled (real GPUs): 64x64 output tiles staged through
 *   workgroup memory in 16-deep slices of K, 4x4 outputs per invocation.
 *
 * Sizes go through the parameter block, so one pipeline serves every shape
 * with the same transposes and vec4 alignment.
 * @module
 */

import type { MatmulLayout } from "../../backend.ts";
import { MAX_GROUPS, type Runtime } from "../runtime.ts";
import { PARAMS_WGSL, storage, wgslType } from "../wgsl.ts";

/** Which kernel family {@link matmul} uses. */
export type MatmulVariant = "auto" | "register" | "tiled";

/**
 * Kernel family override, for tests and benchmarks; `"auto"` picks
 * register-blocked on CPU adapters and tiled elsewhere.
 */
export const matmulOptions: {
  variant: MatmulVariant;
  rows: number;
  wgX: number;
  wgY: number;
} = {
  variant: "auto",
  rows: 8,
  wgX: 8,
  wgY: 8,
};

interface RbVariant {
  rows: number;
  wgX: number;
  wgY: number;
  transA: boolean;
  transB: boolean;
  /** A is read as vec4 along k (row-major A, k and batch stride % 4 == 0). */
  vecA: boolean;
  /** transA and m, batch stride % 4 == 0: vec4 loads along rows. */
  vecAT: boolean;
  /** B is read as vec4 along n. */
  vecB: boolean;
  /** out is written as vec4 (n % 4 == 0). */
  vecOut: boolean;
}

/** Params: [m, n, k, aBatchStride, bBatchStride, batchOffset]. */
function registerWgsl(v: RbVariant): string {
  const R = v.rows;
  const rows = [...Array(R).keys()];
  let s = PARAMS_WGSL;
  s += storage(1, "a", v.vecA || v.vecAT ? "vec4<f32>" : "f32", false);
  s += storage(2, "b", v.vecB ? "vec4<f32>" : "f32", false);
  s += storage(3, "out", v.vecOut ? "vec4<f32>" : "f32", true);
  s += `
@compute @workgroup_size(${v.wgX}, ${v.wgY})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let m = pu(0u);
  let n = pu(1u);
  let k = pu(2u);
  let col = gid.x * 4u;
  let row = gid.y * ${R}u;
  if (col >= n || row >= m) { return; }
  let bt = gid.z + pu(5u);
  let aBase = bt * pu(3u);
  let bBase = bt * pu(4u);
`;
  // Out-of-range rows and columns load clamped (valid) addresses; their
  // results are simply not stored, which keeps the inner loop branch-free.
  for (const i of rows) {
    s += `  var acc${i} = vec4<f32>(0.0);\n`;
  }
  if (v.transA) {
    if (v.vecAT) {
      for (let q = 0; q < R / 4; q++) {
        s += `  let ar${q} = select(row + ${4 * q}u, row, row + ${4 * q}u >= m) / 4u;\n`;
      }
      s += `  let aB4 = aBase / 4u;\n  let m4 = m / 4u;\n`;
    } else {
      for (const i of rows) s += `  let ar${i} = min(row + ${i}u, m - 1u);\n`;
    }
  } else {
    for (const i of rows) {
      s += `  let ar${i} = aBase + min(row + ${i}u, m - 1u) * k;\n`;
    }
    if (v.vecA) { for (const i of rows) s += `  let aq${i} = ar${i} / 4u;\n`; }
  }
  if (v.vecB) {
    s += `  let bc = bBase / 4u + gid.x;\n  let n4 = n / 4u;\n`;
  } else {
    for (let j = 0; j < 4; j++) {
      s += `  let c${j} = min(col + ${j}u, n - 1u);\n`;
      if (v.transB) s += `  let bc${j} = bBase + c${j} * k;\n`;
    }
  }
  const loadB = (kk: string) => {
    if (v.vecB) return `b[bc + (${kk}) * n4]`;
    if (v.transB) {
      return `vec4<f32>(b[bc0 + ${kk}], b[bc1 + ${kk}], b[bc2 + ${kk}], b[bc3 + ${kk}])`;
    }
    return `vec4<f32>(b[bBase + (${kk}) * n + c0], b[bBase + (${kk}) * n + c1], b[bBase + (${kk}) * n + c2], b[bBase + (${kk}) * n + c3])`;
  };
  if (v.vecA) {
    s += `  let k4 = k / 4u;
  for (var kq = 0u; kq < k4; kq++) {
    let kk = kq * 4u;
    let b0 = ${loadB("kk")};
    let b1 = ${loadB("kk + 1u")};
    let b2 = ${loadB("kk + 2u")};
    let b3 = ${loadB("kk + 3u")};
`;
    for (const i of rows) {
      s += `    { let x = a[aq${i} + kq];
      acc${i} += x.x * b0 + x.y * b1 + x.z * b2 + x.w * b3; }\n`;
    }
    s += "  }\n";
  } else {
    s += `  for (var kk = 0u; kk < k; kk++) {
    let bv = ${loadB("kk")};
`;
    if (v.transA && v.vecAT) {
      for (let q = 0; q < R / 4; q++) {
        s += `    let x${q} = a[aB4 + kk * m4 + ar${q}];\n`;
        for (let e = 0; e < 4; e++) {
          s += `    acc${4 * q + e} += x${q}.${"xyzw"[e]} * bv;\n`;
        }
      }
    } else {
      for (const i of rows) {
        const at = v.transA ? `aBase + kk * m + ar${i}` : `ar${i} + kk`;
        s += `    acc${i} += a[${at}] * bv;\n`;
      }
    }
    s += "  }\n";
  }
  s += "  let oBase = bt * m * n;\n";
  for (const i of rows) {
    s += `  if (row + ${i}u < m) {\n`;
    if (v.vecOut) {
      s += `    out[(oBase + (row + ${i}u) * n + col) / 4u] = acc${i};\n`;
    } else {
      s += `    let o = oBase + (row + ${i}u) * n + col;\n`;
      for (let j = 0; j < 4; j++) {
        s += `    if (col + ${j}u < n) { out[o + ${j}u] = acc${i}.${"xyzw"[j]}; }\n`;
      }
    }
    s += "  }\n";
  }
  return s + "}\n";
}

const T = 64;
const TK = 16;

/** Params: [m, n, k, aBatchStride, bBatchStride, batchOffset]. */
function tiledWgsl(transA: boolean, transB: boolean): string {
  // Global reads are arranged so consecutive invocations touch consecutive
  // addresses for the stored layout of each operand.
  const loadA = transA
    ? `let kk = e / ${T}u; let r = e % ${T}u;`
    : `let r = e / ${TK}u; let kk = e % ${TK}u;`;
  const addrA = transA ? "aBase + gk * m + gr" : "aBase + gr * k + gk";
  const loadB = transB
    ? `let c = e / ${TK}u; let kk = e % ${TK}u;`
    : `let kk = e / ${T}u; let c = e % ${T}u;`;
  const addrB = transB ? "bBase + gc * k + gk" : "bBase + gk * n + gc";
  return PARAMS_WGSL + storage(1, "a", "f32", false) +
    storage(2, "b", "f32", false) + storage(3, "out", "f32", true) + `
var<workgroup> As: array<f32, ${T * TK}>;
var<workgroup> Bs: array<f32, ${T * TK}>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let m = pu(0u);
  let n = pu(1u);
  let k = pu(2u);
  let bt = wid.z + pu(5u);
  let aBase = bt * pu(3u);
  let bBase = bt * pu(4u);
  let row0 = wid.y * ${T}u;
  let col0 = wid.x * ${T}u;
  let tx = lid % 16u;
  let ty = lid / 16u;
  var acc: array<array<f32, 4>, 4>;
  for (var t = 0u; t < k; t += ${TK}u) {
    for (var l = 0u; l < 4u; l++) {
      let e = lid + l * 256u;
      {
        ${loadA}
        let gr = row0 + r;
        let gk = t + kk;
        var v = 0.0;
        if (gr < m && gk < k) { v = a[${addrA}]; }
        As[kk * ${T}u + r] = v;
      }
      {
        ${loadB}
        let gc = col0 + c;
        let gk = t + kk;
        var v = 0.0;
        if (gc < n && gk < k) { v = b[${addrB}]; }
        Bs[kk * ${T}u + c] = v;
      }
    }
    workgroupBarrier();
    for (var kk = 0u; kk < ${TK}u; kk++) {
      var av: array<f32, 4>;
      var bv: array<f32, 4>;
      for (var i = 0u; i < 4u; i++) {
        av[i] = As[kk * ${T}u + ty + 16u * i];
        bv[i] = Bs[kk * ${T}u + tx + 16u * i];
      }
      for (var i = 0u; i < 4u; i++) {
        for (var j = 0u; j < 4u; j++) {
          acc[i][j] += av[i] * bv[j];
        }
      }
    }
    workgroupBarrier();
  }
  let oBase = bt * m * n;
  for (var i = 0u; i < 4u; i++) {
    let r = row0 + ty + 16u * i;
    for (var j = 0u; j < 4u; j++) {
      let c = col0 + tx + 16u * j;
      if (r < m && c < n) { out[oBase + r * n + c] = acc[i][j]; }
    }
  }
}
`;
}

/** Records the batched product described by `layout`. */
export function matmul(
  rt: Runtime,
  a: GPUBuffer,
  b: GPUBuffer,
  out: GPUBuffer,
  layout: MatmulLayout,
): void {
  const { batch, m, n, k, aBatchStride, bBatchStride, transA, transB } = layout;
  if (wgslType(layout.dtype) !== "f32") {
    throw new Error(`webgpu matmul does not support dtype ${layout.dtype}`);
  }
  if (batch * m * n === 0) return;
  if (k === 0) {
    // An empty sum: the product is all zeros.
    rt.encoder().clearBuffer(out, 0, batch * m * n * 4);
    return;
  }
  const variant = matmulOptions.variant === "auto"
    ? (rt.isCpuAdapter ? "register" : "tiled")
    : matmulOptions.variant;
  let key: string;
  let wgsl: () => string;
  let gx: number;
  let gy: number;
  if (variant === "register") {
    const rows = matmulOptions.rows;
    const { wgX, wgY } = matmulOptions;
    const v: RbVariant = {
      rows,
      wgX,
      wgY,
      transA,
      transB,
      vecA: !transA && k % 4 === 0 && aBatchStride % 4 === 0,
      vecAT: transA && rows % 4 === 0 && m % 4 === 0 &&
        aBatchStride % 4 === 0,
      vecB: !transB && n % 4 === 0 && bBatchStride % 4 === 0,
      vecOut: n % 4 === 0,
    };
    key = `matmul_rb_${JSON.stringify(v)}`;
    wgsl = () => registerWgsl(v);
    gx = Math.ceil(Math.ceil(n / 4) / wgX);
    gy = Math.ceil(Math.ceil(m / rows) / wgY);
  } else {
    key = `matmul_tiled_${transA}_${transB}`;
    wgsl = () => tiledWgsl(transA, transB);
    gx = Math.ceil(n / T);
    gy = Math.ceil(m / T);
  }
  if (gx > MAX_GROUPS || gy > MAX_GROUPS) {
    throw new Error(`webgpu matmul: ${m}x${n} output is too large`);
  }
  for (let b0 = 0; b0 < batch; b0 += MAX_GROUPS) {
    const nb = Math.min(MAX_GROUPS, batch - b0);
    rt.dispatch({
      name: "matmul",
      key,
      wgsl,
      signature: "rrw",
      buffers: [a, b, out],
      params: [m, n, k, aBatchStride, bBatchStride, b0],
      groups: [gx, gy, nb],
    });
  }
}
