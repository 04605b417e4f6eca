/**
 * Reductions over the middle axis of [outer, size, inner].
 *
 * Long axes are reduced in several passes: each pass shrinks `size` to the
 * number of chunks, so no invocation runs a long serial loop and sums stay
 * close to pairwise accuracy. Contiguous rows (inner = 1) use a workgroup
 * tree per 1024-element chunk; strided columns use one invocation per output
 * column and chunk, which keeps neighbouring invocations on neighbouring
 * addresses. argmax/argmin carry (value, index) pairs between passes and
 * break ties toward the lower index, so the first extreme wins.
 * @module
 */

import type { MatmulArgs, ReduceArgs, ReduceOp } from "../../backend.ts";
import { HELD_MATMUL, type HeldProduct, matmulRowSums } from "./matmul.ts";
import { groups2d, type Runtime } from "../runtime.ts";
import {
  coordinates,
  IS_NAN_WGSL,
  literals,
  main1d,
  mainPerWorkgroup,
  PARAMS_WGSL,
  storage,
  wgslType,
} from "../wgsl.ts";

const WG = 256;
/** Elements one tree workgroup reduces. */
const TREE_CHUNK = WG * 4;
/** Longest serial run per invocation before the axis is split. */
const SERIAL_MAX = 256;
/** Contiguous rows reduced serially, not by trees, on CPU adapters when there are this many. */
const SERIAL_ROWS_MIN = 64;

/** WGSL for combining accumulators of `op`; see {@link reduce}. */
function combineWgsl(op: ReduceOp, t: "f32" | "i32"): string {
  return (t === "f32" ? IS_NAN_WGSL : "") + combineBody(op, t);
}

function combineBody(op: ReduceOp, t: "f32" | "i32"): string {
  const nan = (v: string) => t === "f32" ? `isNan(${v})` : "false";
  switch (op) {
    case "sum":
      return `fn comb(a: ${t}, b: ${t}) -> ${t} { return a + b; }\n`;
    case "max":
    case "min": {
      const cmp = op === "max" ? ">" : "<";
      // NaN propagates, as in PyTorch; it is decided by bits before the
      // comparison, which GL drivers fold as if NaN never occurs.
      return `fn comb(a: ${t}, b: ${t}) -> ${t} {
  return select(a, b, ${nan("b")} || (!${nan("a")} && b ${cmp} a));
}
`;
    }
    case "argmax":
    case "argmin": {
      const cmp = op === "argmax" ? ">" : "<";
      // Whether (bv, bi) should replace (av, ai): NaN counts as the extreme,
      // and equal values keep the lower index.
      return `fn better(av: ${t}, ai: i32, bv: ${t}, bi: i32) -> bool {
  let an = ${nan("av")};
  let bn = ${nan("bv")};
  if (an || bn) { return bn && (!an || bi < ai); }
  return bv ${cmp} av || (bv == av && bi < ai);
}
`;
    }
  }
}

interface Pass {
  readonly arg: boolean;
  /** The input carries indices from an earlier pass. */
  readonly hasIdx: boolean;
  /** The last pass: writes only what `out` holds. */
  readonly final: boolean;
}

function bindings(t: "f32" | "i32", p: Pass): { decl: string; sig: string } {
  let decl = storage(1, "xv", t, false);
  let sig = "r";
  let b = 2;
  if (p.hasIdx) {
    decl += storage(b++, "xi", "i32", false);
    sig += "r";
  }
  if (!p.arg || !p.final) {
    decl += storage(b++, "ov", t, true);
    sig += "w";
  }
  if (p.arg) {
    decl += storage(b++, "oi", "i32", true);
    sig += "w";
  }
  return { decl, sig };
}

function writeOut(p: Pass, v: string, i: string, at: string): string {
  if (!p.arg) return `ov[${at}] = ${v};`;
  if (p.final) return `oi[${at}] = ${i};`;
  return `ov[${at}] = ${v}; oi[${at}] = ${i};`;
}

/**
 * One invocation per (o, chunk, i): params are
 * [count, size, inner, chunkLen, nChunks].
 */
function serialWgsl(op: ReduceOp, t: "f32" | "i32", p: Pass): string {
  const { decl } = bindings(t, p);
  const idxOf = (r: string, at: string) => p.hasIdx ? `xi[${at}]` : `i32(${r})`;
  let loop: string;
  if (p.arg) {
    loop = `  var bv = xv[base + r0 * inner];
  var bi = ${idxOf("r0", "base + r0 * inner")};
  for (var r = r0 + 1u; r < r1; r++) {
    let at = base + r * inner;
    let v = xv[at];
    let i = ${idxOf("r", "at")};
    if (better(bv, bi, v, i)) { bv = v; bi = i; }
  }
`;
  } else if (op === "sum") {
    loop = `  var bv = ${literals(t).zero};
  let bi = 0;
  for (var r = r0; r < r1; r++) { bv = comb(bv, xv[base + r * inner]); }
`;
  } else {
    loop = `  var bv = xv[base + r0 * inner];
  let bi = 0;
  for (var r = r0 + 1u; r < r1; r++) { bv = comb(bv, xv[base + r * inner]); }
`;
  }
  return PARAMS_WGSL + decl + combineWgsl(op, t) + main1d(WG) +
    `  let size = pu(1u);
  let inner = pu(2u);
  let len = pu(3u);
  let nChunks = pu(4u);
${coordinates("idx", ["o", "c", "i"], ["nChunks", "inner"])}  let r0 = c * len;
  let r1 = min(r0 + len, size);
  let base = o * size * inner + i;
${loop}  ${writeOut(p, "bv", "bi", "idx")}
}
`;
}

/**
 * One workgroup per (o, chunk) of a contiguous row: params are
 * [size, nChunks].
 */
function treeWgsl(op: ReduceOp, t: "f32" | "i32", p: Pass): string {
  const { decl } = bindings(t, p);
  const shared = `var<workgroup> sv: array<${t}, ${WG}>;\n` +
    (p.arg ? `var<workgroup> si: array<i32, ${WG}>;\n` : "");
  const load = (r: string) => p.hasIdx ? `xi[rowBase + ${r}]` : `i32(${r})`;
  let first: string;
  let step: string;
  let merge: string;
  if (p.arg) {
    first = `  var bv = xv[rowBase + r0];
  var bi = ${load("r0")};
  for (var j = 1u; j < 4u; j++) {
    let r = start + lid + j * ${WG}u;
    if (r < size) {
      let v = xv[rowBase + r];
      let i = ${load("r")};
      if (better(bv, bi, v, i)) { bv = v; bi = i; }
    }
  }
  sv[lid] = bv; si[lid] = bi;
`;
    step = `      let v = sv[lid + s]; let i = si[lid + s];
      if (better(sv[lid], si[lid], v, i)) { sv[lid] = v; si[lid] = i; }`;
    merge = writeOut(p, "sv[0]", "si[0]", "g");
  } else {
    first = `  var bv = xv[rowBase + r0];
  for (var j = 1u; j < 4u; j++) {
    let r = start + lid + j * ${WG}u;
    if (r < size) { bv = comb(bv, xv[rowBase + r]); }
  }
  sv[lid] = bv;
`;
    step = "      sv[lid] = comb(sv[lid], sv[lid + s]);";
    merge = writeOut(p, "sv[0]", "0", "g");
  }
  return PARAMS_WGSL + decl + shared + combineWgsl(op, t) + mainPerWorkgroup(WG) + `
  let size = pu(0u);
  let nChunks = pu(1u);
${coordinates("g", ["o", "c"], ["nChunks"])}  let rowBase = o * size;
  let start = c * ${TREE_CHUNK}u;
  // Invocations past the row end repeat the chunk's first element, which
  // changes neither an extreme nor (with a later zero) a sum.
  var r0 = start + lid;
  let tail = r0 >= size;
  if (tail) { r0 = start; }
${first}${op === "sum" ? `  if (tail) { sv[lid] = ${literals(t).zero}; }\n` : ""}  for (var s = ${
    WG / 2
  }u; s > 0u; s = s >> 1u) {
    workgroupBarrier();
    if (lid < s) {
${step}
    }
  }
  if (lid == 0u) { ${merge} }
}
`;
}

/** Records `out[o, i] = op over r of x[o, r, i]`. */
export function reduce(rt: Runtime, layout: ReduceArgs<GPUBuffer>): void {
  const { op, x, out, outer, inner } = layout;
  const t = wgslType(layout.dtype);
  if (outer * inner === 0) return;
  // A linear layer's bias gradient (g summed over its rows) right after its
  // weight gradient (gᵀ x, held for this): stored by that product, which
  // reads g anyway. Only for axes one serial pass would reduce here too.
  const held = op === "sum" && outer === 1 && layout.size <= SERIAL_MAX * 4
    ? rt.claimDeferred<HeldProduct<MatmulArgs<GPUBuffer>>>(
      HELD_MATMUL,
      ({ layout: l }) =>
        l.transA && l.a === x && l.m === inner && l.k === layout.size && l.m * l.n > 0 &&
        // Written while the product reads its operands: it must be none of them.
        out !== l.a && out !== l.b && out !== l.out,
    )
    : null;
  if (held) {
    matmulRowSums(rt, held, out);
    return;
  }
  const arg = op === "argmax" || op === "argmin";
  let size = layout.size;
  let xv = x;
  let xi: GPUBuffer | null = null;
  const temps: GPUBuffer[] = [];
  // CPU adapters run a workgroup's barriers as coroutine switches, which
  // made a tree per row of many short rows (a conv's bias gradient: 1024
  // rows of 784) several times slower than one serial invocation per row.
  const manyRows = rt.isCpuAdapter && outer >= SERIAL_ROWS_MIN;
  for (;;) {
    const tree = inner === 1 && size > SERIAL_MAX && !manyRows;
    const nChunks = tree
      ? Math.ceil(size / TREE_CHUNK)
      : size <= SERIAL_MAX * 4
      ? 1
      : Math.ceil(size / SERIAL_MAX);
    const p: Pass = { arg, hasIdx: xi !== null, final: nChunks === 1 };
    const count = outer * nChunks * inner;
    const buffers: GPUBuffer[] = [xv];
    if (xi) buffers.push(xi);
    let ov: GPUBuffer | null = null;
    let oi: GPUBuffer | null = null;
    if (p.final) {
      if (arg) oi = out;
      else ov = out;
    } else {
      ov = rt.storage.acquire(count * 4);
      temps.push(ov);
      if (arg) {
        oi = rt.storage.acquire(count * 4);
        temps.push(oi);
      }
    }
    if (ov) buffers.push(ov);
    if (oi) buffers.push(oi);
    const { sig } = bindings(t, p);
    const key = `reduce_${op}_${t}_${tree}_${p.hasIdx}_${p.final}`;
    if (tree) {
      rt.dispatch({
        name: op,
        key,
        wgsl: () => treeWgsl(op, t, p),
        signature: sig,
        buffers,
        params: [size, nChunks],
        groups: groups2d(outer * nChunks),
      });
    } else {
      const len = nChunks === 1 ? size : SERIAL_MAX;
      rt.dispatch({
        name: op,
        key,
        wgsl: () => serialWgsl(op, t, p),
        signature: sig,
        buffers,
        params: [count, size, inner, len, nChunks],
        groups: groups2d(Math.ceil(count / WG)),
      });
    }
    if (p.final) break;
    xv = ov!;
    xi = oi;
    size = nChunks;
  }
  // Later kernels that reuse these buffers are recorded after this one, so
  // queue order makes the early release safe.
  for (const b of temps) rt.release(b);
}
