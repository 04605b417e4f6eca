/**
 * Softmax and log-softmax over the middle axis of [outer, size, inner],
 * subtracting the maximum first so large inputs do not overflow.
 * @module
 */

import type { SoftmaxArgs } from "../../backend.ts";
import { groups2d, type Runtime } from "../runtime.ts";
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

/** Records softmax (or log-softmax) of `x` over the middle axis. */
export function softmax(rt: Runtime, layout: SoftmaxArgs<GPUBuffer>): void {
  const { x, out, outer, size, inner, log } = layout;
  if (wgslType(layout.dtype) !== "f32") {
    throw new Error(`webgpu softmax does not support dtype ${layout.dtype}`);
  }
  if (outer * size * inner === 0) return;
  const name = log ? "logSoftmax" : "softmax";
  if (inner === 1 && size >= ROW_MIN) {
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
