/**
 * Softmax and log-softmax over the middle axis of [outer, size, inner],
 * subtracting the maximum first so large inputs do not overflow.
 *
 * llvmpipe (Mesa's gallivm) silently ends a shader loop after 65535
 * iterations: an invocation walking a longer strided axis (or a workgroup
 * lane a contiguous row of over 4M) stopped part way. Such axes take the
 * chunked path: the running maximum, then the running sum, carried in
 * buffers over dispatches of at most {@link LOOP_STEPS} steps each, then the
 * outputs likewise (the same operations in the same order as the serial
 * walk).
 * @module
 */

import type { SoftmaxArgs } from "../../backend.ts";
import { groups2d, LOOP_STEPS, type Runtime } from "../runtime.ts";
import {
  coordinates,
  main1d,
  mainPerWorkgroup,
  MAX_NAN_WGSL,
  PARAMS_WGSL,
  storage,
  wgslType,
} from "../wgsl.ts";

const WG = 256;
/** Threads cooperating on one contiguous row. */
const ROW_WG = 64;
/** Rows at least this long get a workgroup each. */
const ROW_MIN = 128;

function finish(log: boolean, v: string): string {
  return log ? `${v} - m - log(s)` : `exp(${v} - m) / s`;
}

/** One invocation per (o, i), walking the axis three times. */
function serialWgsl(log: boolean): string {
  return PARAMS_WGSL + MAX_NAN_WGSL + storage(1, "x", "f32", false) +
    storage(2, "out", "f32", true) + main1d(WG) +
    `  let size = pu(1u);
  let inner = pu(2u);
${coordinates("idx", ["o", "i"], ["inner"])}  let base = o * size * inner + i;
  var m = x[base];
  for (var r = 1u; r < size; r++) {
    let v = x[base + r * inner];
    m = maxNan(m, v);
  }
  var s = 0.0;
  for (var r = 0u; r < size; r++) { s += exp(x[base + r * inner] - m); }
  for (var r = 0u; r < size; r++) {
    let at = base + r * inner;
    out[at] = ${finish(log, "x[at]")};
  }
}
`;
}

/** One workgroup per contiguous row, with tree reductions for max and sum. */
function rowWgsl(log: boolean): string {
  return PARAMS_WGSL + MAX_NAN_WGSL + storage(1, "x", "f32", false) +
    storage(2, "out", "f32", true) +
    `var<workgroup> sh: array<f32, ${ROW_WG}>;\n` + mainPerWorkgroup(ROW_WG) + `
  let row = g;
  let size = pu(0u);
  let base = row * size;
  var m = x[base];
  for (var r = lid; r < size; r += ${ROW_WG}u) {
    let v = x[base + r];
    m = maxNan(m, v);
  }
  sh[lid] = m;
  for (var k = ${ROW_WG / 2}u; k > 0u; k = k >> 1u) {
    workgroupBarrier();
    if (lid < k) {
      let v = sh[lid + k];
      let w = sh[lid];
      sh[lid] = maxNan(w, v);
    }
  }
  workgroupBarrier();
  m = sh[0];
  workgroupBarrier();
  var s = 0.0;
  for (var r = lid; r < size; r += ${ROW_WG}u) { s += exp(x[base + r] - m); }
  sh[lid] = s;
  for (var k = ${ROW_WG / 2}u; k > 0u; k = k >> 1u) {
    workgroupBarrier();
    if (lid < k) { sh[lid] += sh[lid + k]; }
  }
  workgroupBarrier();
  s = sh[0];
  for (var r = lid; r < size; r += ${ROW_WG}u) {
    let at = base + r;
    out[at] = ${finish(log, "x[at]")};
  }
}
`;
}

/**
 * Word 3 (the phase) 0: `m[idx]` = the running maximum of column idx = (o, i) over the rows of
 * word 4's chunk; 1: `s[idx]` = the running sum of exp(x - m) likewise; 2: those rows of `out`.
 */
function columnWgsl(log: boolean): string {
  return PARAMS_WGSL + MAX_NAN_WGSL + storage(1, "x", "f32", false) +
    storage(2, "m", "f32", true) + storage(3, "s", "f32", true) +
    storage(4, "out", "f32", true) + main1d(WG) +
    `  let size = pu(1u);
  let inner = pu(2u);
  let phase = pu(3u);
  let r0 = pu(4u) * ${LOOP_STEPS}u;
  let r1 = min(size, r0 + ${LOOP_STEPS}u);
${coordinates("idx", ["o", "i"], ["inner"])}  let base = o * size * inner + i;
  if (phase == 0u) {
    var mv = x[base];
    if (r0 > 0u) { mv = m[idx]; }
    for (var r = max(r0, 1u); r < r1; r++) { mv = maxNan(mv, x[base + r * inner]); }
    m[idx] = mv;
  } else if (phase == 1u) {
    let mv = m[idx];
    var sv = 0.0;
    if (r0 > 0u) { sv = s[idx]; }
    for (var r = r0; r < r1; r++) { sv += exp(x[base + r * inner] - mv); }
    s[idx] = sv;
  } else {
    let m = m[idx];
    let s = s[idx];
    for (var r = r0; r < r1; r++) {
      let at = base + r * inner;
      out[at] = ${finish(log, "x[at]")};
    }
  }
}
`;
}

/**
 * Softmax (log-softmax with `log`) of every column (o, i) of the [outer, size, inner] view `x`
 * into `out`, by dispatches of at most {@link LOOP_STEPS} steps per invocation: the serial walk's
 * operations in its order. Returns each column's maximum `m` and sum of exp(x - m) `s`, fresh
 * storage buffers of outer · inner floats that the caller releases.
 */
export function columnSoftmax(
  rt: Runtime,
  x: GPUBuffer,
  out: GPUBuffer,
  view: { outer: number; size: number; inner: number; log: boolean },
): [GPUBuffer, GPUBuffer] {
  const { outer, size, inner, log } = view;
  const count = outer * inner;
  const m = rt.storage.acquire(count * 4);
  const s = rt.storage.acquire(count * 4);
  for (const phase of [0, 1, 2]) {
    for (let chunk = 0; chunk * LOOP_STEPS < size; chunk++) {
      rt.dispatch({
        name: log ? "logSoftmax" : "softmax",
        key: `softmax_column_${log}`,
        wgsl: () => columnWgsl(log),
        signature: "rwww",
        buffers: [x, m, s, out],
        params: [count, size, inner, phase, chunk],
        groups: groups2d(Math.ceil(count / WG)),
      });
    }
  }
  return [m, s];
}

/** Records softmax (or log-softmax) of `x` over the middle axis. */
export function softmax(rt: Runtime, layout: SoftmaxArgs<GPUBuffer>): void {
  const { x, out, outer, size, inner, log } = layout;
  if (wgslType(layout.dtype) !== "f32") {
    throw new Error(`webgpu softmax does not support dtype ${layout.dtype}`);
  }
  if (outer * size * inner === 0) return;
  const name = log ? "logSoftmax" : "softmax";
  const row = inner === 1 && size >= ROW_MIN;
  // Past these the serial walk (or a row lane's) would exceed llvmpipe's loop limit.
  if (row ? size > ROW_WG * LOOP_STEPS : size > LOOP_STEPS) {
    const [m, s] = columnSoftmax(rt, x, out, layout);
    // Later kernels that reuse these buffers are recorded after this one, so
    // queue order makes the early release safe.
    rt.release(m);
    rt.release(s);
    return;
  }
  if (row) {
    rt.dispatch({
      name,
      key: `softmax_row_${log}`,
      wgsl: () => rowWgsl(log),
      signature: "rw",
      buffers: [x, out],
      params: [size],
      groups: groups2d(outer),
    });
    return;
  }
  const count = outer * inner;
  rt.dispatch({
    name,
    key: `softmax_serial_${log}`,
    wgsl: () => serialWgsl(log),
    signature: "rw",
    buffers: [x, out],
    params: [count, size, inner],
    groups: groups2d(Math.ceil(count / WG)),
  });
}
