/**
 * `batchNormBackward` (optional fused kernel): a training batch norm's
 * gradients, one workgroup per channel: one pass for the two sums, one for
 * the input gradient. It binds 8 storage buffers besides the parameters,
 * so a device offers it only where the limit allows 9.
 * @module
 */

import type { BatchNormBackwardArgs } from "../../backend.ts";
import { groups2d, type Runtime } from "../runtime.ts";
import { mainPerWorkgroup, PARAMS_WGSL, storage, wgslType } from "../wgsl.ts";
import {
  CHANNEL_PARAMS_WGSL,
  CHANNEL_WG,
  channelLoop,
  channelRows,
  workgroupSumWgsl,
} from "./batch_norm.ts";

/** Storage bindings the kernel needs, its parameter block included. */
export const BATCH_NORM_BACKWARD_BINDINGS = 9;

function batchNormBackwardWgsl(rows: boolean): string {
  return PARAMS_WGSL + storage(1, "x", "f32", false) + storage(2, "weight", "f32", false) +
    storage(3, "mean", "f32", false) + storage(4, "invstd", "f32", false) +
    storage(5, "grad", "f32", false) + storage(6, "gradInput", "f32", true) +
    storage(7, "gradWeight", "f32", true) + storage(8, "gradBias", "f32", true) +
    workgroupSumWgsl("sumBoth", "vec2<f32>") + mainPerWorkgroup(CHANNEL_WG) + CHANNEL_PARAMS_WGSL +
    `  let n = f32(outer * inner);
  let m = mean[c];
  let s = invstd[c];
  // (Σ grad, Σ grad · (x - mean)).
  var sums = vec2<f32>(0.0, 0.0);
${
      channelLoop(rows, "      let g = grad[at];\n      sums += vec2<f32>(g, g * (x[at] - m));")
    }  sums = sumBoth(sums, lid);
  let gsum = sums.x;
  let gxc = sums.y;
  if (lid == 0u) {
    gradWeight[c] = gxc * s;
    gradBias[c] = gsum;
  }
  // gradInput = a·grad + b·(x - mean) + k, per channel.
  let a = weight[c] * s;
  let b = (-a * s * s * gxc) / n;
  let k = (-a * gsum) / n;
${channelLoop(rows, "      gradInput[at] = a * grad[at] + b * (x[at] - m) + k;")}}
`;
}

/** Records the gradients of {@link BatchNormBackwardArgs}. */
export function batchNormBackward(rt: Runtime, args: BatchNormBackwardArgs<GPUBuffer>): void {
  const { x, weight, mean, invstd, grad, gradInput, gradWeight, gradBias } = args;
  const { outer, channels, inner, dtype } = args;
  if (wgslType(dtype) !== "f32") {
    throw new Error(`${rt.name} batchNormBackward does not support dtype ${dtype}`);
  }
  if (channels === 0) return;
  const rows = channelRows(inner);
  rt.dispatch({
    name: "batchNormBackward",
    key: `batch_norm_backward_${rows ? "rows" : "flat"}`,
    wgsl: () => batchNormBackwardWgsl(rows),
    signature: "rrrrrwww",
    buffers: [x, weight, mean, invstd, grad, gradInput, gradWeight, gradBias],
    params: [outer, channels, inner],
    groups: groups2d(channels),
  });
}
