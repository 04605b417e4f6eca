/**
 * `softmaxBackward` (optional fused kernel): the gradient of softmax or
 * log-softmax over the middle axis of [outer, size, inner] in one dispatch,
 * from the forward output and its gradient.
 * @module
 */

import type { SoftmaxBackwardArgs } from "../../backend.ts";
import { groups2d, type Runtime } from "../runtime.ts";
import { main1d, PARAMS_WGSL, storage, wgslType } from "../wgsl.ts";

const WG = 256;
/** Threads cooperating on one contiguous row. */
const ROW_WG = 64;
/** Rows at least this long get a workgroup each (as the forward kernel). */
const ROW_MIN = 128;

/** The summand of Σ_r and the result at `at`, per the contract's formulas. */
function terms(log: boolean): { term: string; result: string } {
  return log
    ? { term: "g[at]", result: "g[at] - exp(y[at]) * s" }
    : { term: "g[at] * y[at]", result: "y[at] * (g[at] - s)" };
}

const BINDINGS = PARAMS_WGSL + storage(1, "y", "f32", false) + storage(2, "g", "f32", false) +
  storage(3, "out", "f32", true);

/** One invocation per (o, i), walking the axis twice. */
function serialWgsl(log: boolean): string {
  const { term, result } = terms(log);
  return BINDINGS + main1d(WG) + `  let size = pu(1u);
  let inner = pu(2u);
  let base = (idx / inner) * size * inner + idx % inner;
  var s = 0.0;
  for (var r = 0u; r < size; r++) { let at = base + r * inner; s += ${term}; }
  for (var r = 0u; r < size; r++) { let at = base + r * inner; out[at] = ${result}; }
}
`;
}

/** One workgroup per contiguous row, with a tree reduction for the sum. */
function rowWgsl(log: boolean): string {
  const { term, result } = terms(log);
  return BINDINGS + `var<workgroup> sh: array<f32, ${ROW_WG}>;
@compute @workgroup_size(${ROW_WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let size = pu(0u);
  let base = (wid.y * nwg.x + wid.x) * size;
  var s = 0.0;
  for (var r = lid; r < size; r += ${ROW_WG}u) { let at = base + r; s += ${term}; }
  sh[lid] = s;
  for (var k = ${ROW_WG / 2}u; k > 0u; k = k >> 1u) {
    workgroupBarrier();
    if (lid < k) { sh[lid] += sh[lid + k]; }
  }
  workgroupBarrier();
  s = sh[0];
  for (var r = lid; r < size; r += ${ROW_WG}u) { let at = base + r; out[at] = ${result}; }
}
`;
}

/** Records the gradient of softmax (or log-softmax) over the middle axis. */
export function softmaxBackward(rt: Runtime, args: SoftmaxBackwardArgs<GPUBuffer>): void {
  const { x: y, grad, out, outer, size, inner, log } = args;
  if (wgslType(args.dtype) !== "f32") {
    throw new Error(`${rt.name} softmaxBackward does not support dtype ${args.dtype}`);
  }
  if (outer * size * inner === 0) return;
  const name = log ? "logSoftmaxBackward" : "softmaxBackward";
  const common = { name, signature: "rrw", buffers: [y, grad, out] } as const;
  if (inner === 1 && size >= ROW_MIN) {
    rt.dispatch({
      ...common,
      key: `softmaxBackward_row_${log}`,
      wgsl: () => rowWgsl(log),
      params: [size],
      groups: groups2d(outer),
    });
    return;
  }
  const count = outer * inner;
  rt.dispatch({
    ...common,
    key: `softmaxBackward_serial_${log}`,
    wgsl: () => serialWgsl(log),
    params: [count, size, inner],
    groups: groups2d(Math.ceil(count / WG)),
  });
}
