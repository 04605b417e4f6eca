/**
 * Batched matrix products, with two kernel families:
 *
 * - register-blocked (CPU adapters such as llvmpipe): each invocation keeps
 *   8 rows x 8 columns of `out` in vec4 registers and streams A and B from
 *   memory, with no workgroup memory. On a CPU implementation a barrier is a
 *   coroutine switch, so shared-memory tiling costs more than it saves, and
 *   llvmpipe runs 8 invocations along x as SIMD lanes, so the workgroup is
 *   8 wide in x.
 * - shared-memory tiled (real GPUs): 64x64 output tiles staged through
 *   workgroup memory in 16-deep slices of K, 4x4 outputs per invocation.
 *
 * Sizes go through the parameter block, so one pipeline serves every shape
 * with the same transposes and vec4 alignment.
 * @module
 */

import type { AddmmArgs, MatmulArgs } from "../../backend.ts";
import { LOOP_STEPS, MAX_GROUPS, type Runtime } from "../runtime.ts";
import { IS_NAN_WGSL, mainGrid, mainTiles, PARAMS_WGSL, storage, wgslType } from "../wgsl.ts";
import { GELU_DERIVATIVE_WGSL, NORMAL_CDF_WGSL } from "./math.ts";

/** Which kernel family {@link matmul} uses. */
export type MatmulVariant = "auto" | "register" | "tiled";

/**
 * A device's matmul tuning, for tests and benchmarks (`webgpuBackend({
 * matmul })`). `variant: "auto"` picks register-blocked on CPU adapters and
 * tiled elsewhere (`webgpuBackend` on Deno's own WebGPU asks for
 * register-blocked everywhere: see there); `rows` x `cols` (cols a
 * multiple of 4) is the register block, 0 choosing it from the problem
 * size, and `wgX` x `wgY` the workgroup of the register-blocked kernel.
 */
export interface MatmulTuning {
  /** The kernel family. */
  readonly variant: MatmulVariant;
  /** Register block rows (0: from the problem size). */
  readonly rows: number;
  /** Register block columns, a multiple of 4 (0: from the problem size). */
  readonly cols: number;
  /** Workgroup width of the register-blocked kernel. */
  readonly wgX: number;
  /** Workgroup height of the register-blocked kernel. */
  readonly wgY: number;
  /**
   * Workgroups a product should give before the register-blocked kernel
   * picks a bigger block (0: from the CPU's core count, see {@link matmul}).
   */
  readonly minWorkgroups: number;
}

/** The tuning devices get unless told otherwise. */
export const DEFAULT_MATMUL_TUNING: MatmulTuning = {
  variant: "auto",
  rows: 0,
  cols: 0,
  wgX: 8,
  wgY: 4,
  minWorkgroups: 0,
};

/**
 * Register blocks from most to least work per invocation. Bigger blocks
 * reuse each loaded value more (16x16 measured ~30 GFLOP/s of CPU time at
 * 1024 on llvmpipe, 8x16 ~26, 8x8 ~23, 8x4 ~17) but leave fewer workgroups
 * to spread over the CPU's threads, so small products step down.
 */
const BLOCKS: readonly (readonly [number, number])[] = [
  [16, 16],
  [16, 8],
  [8, 16],
  [8, 8],
  [4, 8],
  [4, 4],
];
/**
 * Blocks for narrow outputs (n < 2 * wgX, e.g. a 10-class logit layer),
 * chosen with {@link NARROW_MIN_WORKGROUPS}: wider blocks leave most of the
 * SIMD lanes along x idle and compute padding columns, so these keep 4
 * columns and vary the rows. Measured on llvmpipe, ms per product
 * (transB / plain / transA): 256x512x10 with 8x4 0.30 / 0.44 / 0.40 vs
 * 0.50 / 1.03 / 1.07 with the 4x8 that `BLOCKS` gives; 1024x1024x10 with
 * 16x4 1.9 / 2.2 / 2.6 vs 4.8 / 8.4 / 5.5 with 16x16.
 */
const NARROW_BLOCKS: readonly (readonly [number, number])[] = [
  [16, 4],
  [8, 4],
  [4, 4],
];
/** Workgroups a narrow product should give before a bigger block is used. */
const NARROW_MIN_WORKGROUPS = 8;

/**
 * Workgroups a product should give before a bigger register block is used:
 * one per core (llvmpipe runs one thread per core, each taking whole
 * workgroups), at least 2. More small workgroups cost more than they
 * spread: at 128x64x64 on 2 cores, 16x8 blocks (2 workgroups) took 137-388
 * µs per product where the 4x4 blocks that 16 workgroups asked for took
 * 302-546 (three shapes, interleaved, load 2.7).
 */
function coresWorkgroups(): number {
  const cores = (globalThis.navigator as { hardwareConcurrency?: number } | undefined)
    ?.hardwareConcurrency ?? 4;
  return Math.max(2, cores);
}

interface RbVariant {
  rows: number;
  /** Output columns per invocation, a multiple of 4. */
  cols: number;
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
  /** transB, k and batch stride % 4 == 0: B columns read as vec4 along k. */
  vecBT: boolean;
  /** The reduction loop steps by 4 (vecA or vecBT). */
  k4: boolean;
  /** out is written as vec4 (n % 4 == 0). */
  vecOut: boolean;
  /** `bias` (n elements, binding 4) is added to every row before the store (addmm). */
  bias: boolean;
  /**
   * An epilogue storing into `act` (the binding after `bias`) GELU of each
   * result (`gelu`), or each result times GELU's derivative at `pre` (the
   * last binding), as `geluBackward` (`geluGrad`).
   */
  act: "none" | "gelu" | "geluGrad";
  /**
   * transA, batch 1: the row sums of Aᵀ (over k) are stored into `sums`
   * (the last binding) by the invocations of column block 0: a linear
   * layer's bias gradient beside its weight gradient.
   */
  rowSums: boolean;
  /**
   * The sum over k is split over dispatches (words 6 and 7: this one's [kFrom, kTo)), each
   * adding its steps to what `out` (and `sums`) hold, the bias and activation only in the one
   * ending at k: llvmpipe silently ends a shader loop after 65535 iterations.
   */
  split: boolean;
}

/**
 * The `gelu` kernel's function (`x Φ(x)`, NaN kept) per value and per vec4,
 * for the product's epilogue: the same expression, so the same numbers.
 */
const GELU_EPILOGUE_WGSL = IS_NAN_WGSL + NORMAL_CDF_WGSL + `
fn gelu1(x: f32) -> f32 { if (isNan(x)) { return x; } return x * phi(x); }
fn gelu4(v: vec4<f32>) -> vec4<f32> { return vec4<f32>(gelu1(v.x), gelu1(v.y), gelu1(v.z), gelu1(v.w)); }
`;

/** Params: [m, n, k, aBatchStride, bBatchStride, batchOffset]. */
function registerWgsl(v: RbVariant): string {
  const R = v.rows;
  const Q = v.cols / 4;
  const rows = [...Array(R).keys()];
  const groups = [...Array(Q).keys()];
  const lanes = [0, 1, 2, 3];
  let s = PARAMS_WGSL;
  s += storage(1, "a", v.vecA || v.vecAT ? "vec4<f32>" : "f32", false);
  s += storage(2, "b", v.vecB || v.vecBT ? "vec4<f32>" : "f32", false);
  s += storage(3, "out", v.vecOut ? "vec4<f32>" : "f32", true);
  if (v.bias) s += storage(4, "bias", "f32", false);
  const outType = v.vecOut ? "vec4<f32>" : "f32";
  let binding = v.bias ? 5 : 4;
  if (v.act !== "none") s += storage(binding++, "act", outType, true);
  if (v.rowSums) s += storage(binding++, "sums", "f32", true);
  if (v.act === "geluGrad") s += storage(binding++, "pre", outType, false);
  if (v.act === "gelu") s += GELU_EPILOGUE_WGSL;
  if (v.act === "geluGrad") s += IS_NAN_WGSL + GELU_DERIVATIVE_WGSL;
  s += mainGrid(v.wgX, v.wgY) + `  let m = pu(0u);
  let n = pu(1u);
  let k = pu(2u);
  let col = gid.x * ${v.cols}u;
  let row = gid.y * ${R}u;
  if (col >= n || row >= m) { return; }
  let bt = gid.z + pu(5u);
  let aBase = bt * pu(3u);
  let bBase = bt * pu(4u);
`;
  // Out-of-range rows and columns load clamped (valid) addresses; their
  // results are simply not stored, which keeps the inner loop branch-free.
  for (const i of rows) {
    for (const q of groups) s += `  var acc${i}_${q} = vec4<f32>(0.0);\n`;
    if (v.rowSums) s += `  var rs${i} = 0.0;\n`;
  }
  if (v.split) {
    // Later dispatches of a split sum go on from what the earlier ones stored.
    s += `  let kFrom = pu(6u);
  let kTo = pu(7u);
  let last = kTo == k;
  if (kFrom > 0u) {
    let ob = bt * m * n;
`;
    for (const i of rows) {
      s += `    let or${i} = ob + min(row + ${i}u, m - 1u) * n;\n`;
      for (const q of groups) {
        const at = (j: number) => `out[or${i} + min(col + ${4 * q + j}u, n - 1u)]`;
        s += v.vecOut
          ? `    if (col + ${4 * q}u < n) { acc${i}_${q} = out[(or${i} + col) / 4u + ${q}u]; }\n`
          : `    acc${i}_${q} = vec4<f32>(${lanes.map(at).join(", ")});\n`;
      }
      if (v.rowSums) s += `    rs${i} = sums[min(row + ${i}u, m - 1u)];\n`;
    }
    s += "  }\n";
  }
  if (v.transA) {
    if (v.vecAT) {
      for (let h = 0; h < R / 4; h++) {
        s += `  let ar${h} = select(row + ${4 * h}u, row, row + ${4 * h}u >= m) / 4u;\n`;
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
    s += `  let bc = bBase / 4u + gid.x * ${Q}u;\n  let n4 = n / 4u;\n`;
  } else {
    for (const q of groups) {
      for (const j of lanes) {
        s += `  let c${q}${j} = min(col + ${4 * q + j}u, n - 1u);\n`;
        if (v.transB) s += `  let bc${q}${j} = bBase + c${q}${j} * k;\n`;
        if (v.vecBT) s += `  let bq${q}${j} = bc${q}${j} / 4u;\n`;
      }
    }
  }
  const loadB = (kk: string, q: number) => {
    if (v.vecB) return `b[bc + (${kk}) * n4 + ${q}u]`;
    const at = (j: number) => v.transB ? `bc${q}${j} + ${kk}` : `bBase + (${kk}) * n + c${q}${j}`;
    return `vec4<f32>(${lanes.map((j) => `b[${at(j)}]`).join(", ")})`;
  };
  const loadAllB = (kk: string, name: string) =>
    groups.map((q) => `    let ${name}_${q} = ${loadB(kk, q)};\n`).join("");
  // The A value of row i at reduction index kk, for the per-k paths.
  const perK = (kk: string, b: string): string => {
    let t = "";
    const update = (i: number, x: string) =>
      groups.map((q) => `    acc${i}_${q} += ${x} * ${b}_${q};\n`).join("");
    if (v.transA && v.vecAT) {
      for (let h = 0; h < R / 4; h++) {
        t += `    { let x = a[aB4 + (${kk}) * m4 + ar${h}];\n`;
        for (const e of lanes) t += update(4 * h + e, `x.${"xyzw"[e]}`);
        if (v.rowSums) { for (const e of lanes) t += `    rs${4 * h + e} += x.${"xyzw"[e]};\n`; }
        t += "    }\n";
      }
    } else {
      for (const i of rows) {
        const at = v.transA ? `aBase + (${kk}) * m + ar${i}` : `ar${i} + ${kk}`;
        const sum = v.rowSums ? `    rs${i} += x;\n` : "";
        t += `    { let x = a[${at}];\n${update(i, "x")}${sum}    }\n`;
      }
    }
    return t;
  };
  if (v.k4) {
    // Four reduction steps per iteration: vec4 loads along k where the
    // layout allows (A rows, or B columns when B is transposed).
    s += (v.split
      ? "  for (var kq = kFrom / 4u; kq < kTo / 4u; kq++) {\n"
      : "  let k4 = k / 4u;\n  for (var kq = 0u; kq < k4; kq++) {\n") +
      "    let kk = kq * 4u;\n";
    if (v.vecBT) {
      for (const q of groups) {
        for (const j of lanes) {
          s += `    let t${q}${j} = b[bq${q}${j} + kq];\n`;
        }
        for (const e of lanes) {
          const c = "xyzw"[e];
          s +=
            `    let b${e}_${q} = vec4<f32>(t${q}0.${c}, t${q}1.${c}, t${q}2.${c}, t${q}3.${c});\n`;
        }
      }
    } else {
      for (const e of lanes) {
        s += loadAllB(e ? `kk + ${e}u` : "kk", `b${e}`);
      }
    }
    if (v.vecA) {
      for (const i of rows) {
        s += `    { let x = a[aq${i} + kq];\n`;
        for (const q of groups) {
          s +=
            `      acc${i}_${q} += x.x * b0_${q} + x.y * b1_${q} + x.z * b2_${q} + x.w * b3_${q};\n`;
        }
        s += "    }\n";
      }
    } else {
      for (const e of lanes) {
        s += perK(e ? `kk + ${e}u` : "kk", `b${e}`);
      }
    }
    s += "  }\n";
  } else {
    s += (v.split
      ? "  for (var kk = kFrom; kk < kTo; kk++) {\n"
      : "  for (var kk = 0u; kk < k; kk++) {\n") +
      loadAllB("kk", "bv") +
      perK("kk", "bv") + "  }\n";
  }
  if (v.rowSums) {
    s += "  if (gid.x == 0u) {\n";
    for (const i of rows) s += `    if (row + ${i}u < m) { sums[row + ${i}u] = rs${i}; }\n`;
    s += "  }\n";
  }
  s += "  let oBase = bt * m * n;\n";
  if (v.bias) {
    // Out-of-range columns read a clamped (valid) entry, never stored.
    for (const q of groups) {
      const at = (j: number) => `bias[min(col + ${4 * q + j}u, n - 1u)]`;
      s += `  let bv${q} = vec4<f32>(${lanes.map(at).join(", ")});\n`;
    }
  }
  const result = (i: number, q: number) =>
    !v.bias
      ? `acc${i}_${q}`
      : v.split
      ? `select(acc${i}_${q}, acc${i}_${q} + bv${q}, last)`
      : `(acc${i}_${q} + bv${q})`;
  // A split sum's activation is stored by its last dispatch only.
  const onlyLast = (act: string) => act && v.split ? ` if (last) {${act} }` : act;
  for (const i of rows) {
    s += `  if (row + ${i}u < m) {\n    let o = oBase + (row + ${i}u) * n + col;\n`;
    for (const q of groups) {
      if (v.vecOut) {
        const at = `o / 4u + ${q}u`;
        const act = v.act === "gelu"
          ? ` act[${at}] = gelu4(r);`
          : v.act === "geluGrad"
          ? ` let p = pre[${at}]; act[${at}] = r * vec4<f32>(geluDerivative(p.x), ` +
            "geluDerivative(p.y), geluDerivative(p.z), geluDerivative(p.w));"
          : "";
        s += `    if (col + ${4 * q}u < n) { let r = ${result(i, q)}; out[${at}] = r;${
          onlyLast(act)
        } }\n`;
      } else {
        for (const j of lanes) {
          const at = `o + ${4 * q + j}u`;
          const act = v.act === "gelu"
            ? ` act[${at}] = gelu1(r);`
            : v.act === "geluGrad"
            ? ` act[${at}] = r * geluDerivative(pre[${at}]);`
            : "";
          s += `    if (col + ${4 * q + j}u < n) { let r = ${result(i, q)}.${
            "xyzw"[j]
          }; out[${at}] = r;${onlyLast(act)} }\n`;
        }
      }
    }
    s += "  }\n";
  }
  return s + "}\n";
}

const T = 64;
const TK = 16;

/** The tiled kernel's epilogue bindings (scalar), in the register kernel's order. */
function epilogueBindings(bias: boolean, act: RbVariant["act"], rowSums: boolean): string {
  let binding = bias ? 5 : 4;
  let s = act !== "none" ? storage(binding++, "act", "f32", true) : "";
  if (rowSums) s += storage(binding++, "sums", "f32", true);
  if (act === "geluGrad") s += storage(binding++, "pre", "f32", false);
  if (act === "gelu") s += GELU_EPILOGUE_WGSL;
  if (act === "geluGrad") s += IS_NAN_WGSL + GELU_DERIVATIVE_WGSL;
  return s;
}

/** Params: [m, n, k, aBatchStride, bBatchStride, batchOffset]. */
function tiledWgsl(
  transA: boolean,
  transB: boolean,
  bias: boolean,
  act: RbVariant["act"],
  rowSums: boolean,
): string {
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
    storage(2, "b", "f32", false) + storage(3, "out", "f32", true) +
    (bias ? storage(4, "bias", "f32", false) : "") +
    epilogueBindings(bias, act, rowSums) + `
var<workgroup> As: array<f32, ${T * TK}>;
var<workgroup> Bs: array<f32, ${T * TK}>;
` + mainTiles(256) + `  let m = pu(0u);
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
  // Row sums of Aᵀ (rowSums): kept by the first column of workgroup column 0.
  var rs: array<f32, 4>;
  let summing = ${rowSums ? "wid.x == 0u && tx == 0u" : "false"};
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
      if (summing) { for (var i = 0u; i < 4u; i++) { rs[i] += av[i]; } }
    }
    workgroupBarrier();
  }
${
    rowSums
      ? `  if (summing) {
    for (var i = 0u; i < 4u; i++) {
      let r = row0 + ty + 16u * i;
      if (r < m) { sums[r] = rs[i]; }
    }
  }
`
      : ""
  }  let oBase = bt * m * n;
  for (var i = 0u; i < 4u; i++) {
    let r = row0 + ty + 16u * i;
    for (var j = 0u; j < 4u; j++) {
      let c = col0 + tx + 16u * j;
      if (r < m && c < n) {
        let v = acc[i][j]${bias ? " + bias[c]" : ""};
        out[oBase + r * n + c] = v;${
    act === "gelu"
      ? "\n        act[oBase + r * n + c] = gelu1(v);"
      : act === "geluGrad"
      ? "\n        act[oBase + r * n + c] = v * geluDerivative(pre[oBase + r * n + c]);"
      : ""
  }
      }
    }
  }
}
`;
}

/** Records the batched product described by `layout`. */
export function matmul(
  rt: Runtime,
  layout: MatmulArgs<GPUBuffer>,
  matmulOptions: MatmulTuning = DEFAULT_MATMUL_TUNING,
): void {
  if (layout.batch !== 1) {
    product(rt, layout, null, matmulOptions);
    return;
  }
  // Held in case the next call can be stored by this product: the bias
  // gradient after a weight gradient (matmulRowSums), GELU's backward after
  // an input gradient (matmulGeluBackward).
  const held: HeldProduct<MatmulArgs<GPUBuffer>> = { layout, tuning: matmulOptions };
  rt.defer(HELD_MATMUL, held, 1, ([h]) => product(rt, h.layout, null, h.tuning));
}

/** The {@link Runtime.defer} key of held 2-D products. */
export const HELD_MATMUL = "matmul";

/**
 * Records a held product whose epilogue also stores `act = out ·
 * geluDerivative(pre)`: `geluBackward` of the gradient this product makes
 * (a linear layer's input gradient, then its GELU's backward).
 */
export function matmulGeluBackward(
  rt: Runtime,
  held: HeldProduct<MatmulArgs<GPUBuffer>>,
  pre: GPUBuffer,
  act: GPUBuffer,
): void {
  product(rt, held.layout, null, held.tuning, act, null, pre);
}

/**
 * Records a held transA product that also stores the row sums of Aᵀ into
 * `sums` (m elements): the `reduce` sum of A over its rows that a linear
 * layer's backward asks for right after its weight gradient, read by the
 * product anyway (cuBLASLt's BGRADA epilogue).
 */
export function matmulRowSums(
  rt: Runtime,
  held: HeldProduct<MatmulArgs<GPUBuffer>>,
  sums: GPUBuffer,
): void {
  product(rt, held.layout, null, held.tuning, null, sums);
}

/** A product call held for the kernel after it (see {@link addmm}, {@link matmul}). */
export interface HeldProduct<L extends MatmulArgs<GPUBuffer>> {
  /** The call's arguments. */
  readonly layout: L;
  /** The device's tuning. */
  readonly tuning: MatmulTuning;
}

/** A held `addmm` call. */
export type HeldAddmm = HeldProduct<AddmmArgs<GPUBuffer>>;

/** The {@link Runtime.defer} key of held `addmm` calls. */
export const HELD_ADDMM = "addmm";

/**
 * Records `addmm`: the product with `layout.bias` added to every row. The
 * call is held (`Runtime.defer`) until the next kernel call: when that is
 * `gelu` of this output (`nn.Linear` then `nn.GELU`), both are recorded as
 * ONE dispatch whose epilogue stores the sum and its GELU ({@link
 * addmmGelu}), as cuBLASLt's bias+GELU epilogue keeps the pre-activation
 * for the backward. Any other call records it alone first.
 */
export function addmm(
  rt: Runtime,
  layout: AddmmArgs<GPUBuffer>,
  matmulOptions: MatmulTuning = DEFAULT_MATMUL_TUNING,
): void {
  const held: HeldAddmm = { layout, tuning: matmulOptions };
  rt.defer(HELD_ADDMM, held, 1, ([h]) => product(rt, h.layout, h.layout.bias, h.tuning, null));
}

/** Records a held `addmm` whose epilogue also stores GELU of each result into `act`. */
export function addmmGelu(rt: Runtime, held: HeldAddmm, act: GPUBuffer): void {
  product(rt, held.layout, held.layout.bias, held.tuning, act);
}

/**
 * The product, plus `bias` (n elements) on every row when given; into `act`
 * its GELU, or with `pre` the product times GELU's derivative at `pre`; and
 * (transA, batch 1) the row sums of Aᵀ into `sums`.
 */
function product(
  rt: Runtime,
  layout: MatmulArgs<GPUBuffer>,
  bias: GPUBuffer | null,
  matmulOptions: MatmulTuning,
  act: GPUBuffer | null = null,
  sums: GPUBuffer | null = null,
  pre: GPUBuffer | null = null,
): void {
  const { a, b, out, batch, m, n, k, aBatchStride, bBatchStride, transA, transB } = layout;
  const epilogue: RbVariant["act"] = act === null ? "none" : pre === null ? "gelu" : "geluGrad";
  const name = (bias ? "addmm" : "matmul") + (epilogue === "none" ? "" : `+${epilogue}`) +
    (sums ? "+sum" : "");
  if (wgslType(layout.dtype) !== "f32") {
    throw new Error(`webgpu ${name} does not support dtype ${layout.dtype}`);
  }
  if (batch * m * n === 0) return;
  // With a bias an empty sum still adds it: the kernels run with no k steps.
  if (k === 0 && !bias && !act && !sums) {
    // An empty sum: the product is all zeros.
    rt.encoder(out).clearBuffer(out, 0, batch * m * n * 4);
    return;
  }
  const variant = matmulOptions.variant === "auto"
    ? (rt.isCpuAdapter ? "register" : "tiled")
    : matmulOptions.variant;
  let key: string;
  let wgsl: () => string;
  let gx: number;
  let gy: number;
  // The k steps of one dispatch (all of k but for a split register sum).
  let kSpan = Math.max(k, 1);
  if (variant === "register") {
    const { wgX, wgY } = matmulOptions;
    const workgroups = ([r, c]: readonly [number, number]) =>
      Math.ceil(Math.ceil(n / c) / wgX) * Math.ceil(Math.ceil(m / r) / wgY) *
      batch;
    const narrow = n < 2 * wgX;
    const blocks = narrow ? NARROW_BLOCKS : BLOCKS;
    const least = matmulOptions.minWorkgroups > 0 ? matmulOptions.minWorkgroups : coresWorkgroups();
    const enough = narrow ? NARROW_MIN_WORKGROUPS : least;
    const [rows, cols] = matmulOptions.rows > 0 && matmulOptions.cols > 0
      ? [matmulOptions.rows, matmulOptions.cols]
      : blocks.find((b) => workgroups(b) >= enough) ??
        blocks[blocks.length - 1];
    const vecA = !transA && k % 4 === 0 && aBatchStride % 4 === 0;
    const vecBT = transB && k % 4 === 0 && bBatchStride % 4 === 0;
    const v: RbVariant = {
      rows,
      cols,
      wgX,
      wgY,
      transA,
      transB,
      vecA,
      vecAT: transA && rows % 4 === 0 && m % 4 === 0 &&
        aBatchStride % 4 === 0,
      vecB: !transB && n % 4 === 0 && bBatchStride % 4 === 0,
      vecBT,
      // Unrolling without vec4 loads to gain measured slower (more live
      // registers for nothing), so only vec4-along-k layouts step by 4.
      k4: vecA || vecBT,
      vecOut: n % 4 === 0,
      bias: bias !== null,
      act: epilogue,
      rowSums: sums !== null,
      split: (vecA || vecBT ? k / 4 : k) > LOOP_STEPS,
    };
    key = `matmul_rb_${JSON.stringify(v)}`;
    wgsl = () => registerWgsl(v);
    if (v.split) kSpan = LOOP_STEPS * (v.k4 ? 4 : 1);
    gx = Math.ceil(Math.ceil(n / cols) / wgX);
    gy = Math.ceil(Math.ceil(m / rows) / wgY);
  } else {
    key = `matmul_tiled_${transA}_${transB}_${bias !== null}_${epilogue}_${sums !== null}`;
    wgsl = () => tiledWgsl(transA, transB, bias !== null, epilogue, sums !== null);
    gx = Math.ceil(n / T);
    gy = Math.ceil(m / T);
  }
  if (gx > MAX_GROUPS || gy > MAX_GROUPS) {
    throw new Error(`webgpu matmul: ${m}x${n} output is too large`);
  }
  for (let b0 = 0; b0 < batch; b0 += MAX_GROUPS) {
    const nb = Math.min(MAX_GROUPS, batch - b0);
    for (let kFrom = 0; kFrom === 0 || kFrom < k; kFrom += kSpan) {
      rt.dispatch({
        name,
        key,
        wgsl,
        signature: "rrw" + (bias ? "r" : "") + (act ? "w" : "") + (sums ? "w" : "") +
          (pre ? "r" : ""),
        buffers: [a, b, out, ...[bias, act, sums, pre].filter((x) => x !== null)],
        params: [m, n, k, aBatchStride, bBatchStride, b0, kFrom, Math.min(k, kFrom + kSpan)],
        groups: [gx, gy, nb],
      });
    }
  }
}
