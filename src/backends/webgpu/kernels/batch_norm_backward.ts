/**
 * `batchNormBackward` (optional fused kernel): a training batch norm's
 * gradients, one workgroup per channel: one pass for the two sums, one for
 * the input gradient. It binds 8 storage buffers besides the parameters,
 * so a device offers it only where the limit allows 9. Channels too long
 * for one dispatch's walk (llvmpipe's loop limit: see `batch_norm.ts`) take
 * several, the lanes' running sums kept in `gradInput`.
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
  channelWalk,
  CHUNK_WGSL,
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

/**
 * {@link batchNormBackwardWgsl} a range at a time: pass 0 sums (each lane's running sums in
 * `gradInput` at its slots), 1 writes the input gradient, the range holding the slots last.
 */
function batchNormBackwardChunkedWgsl(rows: boolean): string {
  return PARAMS_WGSL + storage(1, "x", "f32", false) + storage(2, "weight", "f32", false) +
    storage(3, "mean", "f32", false) + storage(4, "invstd", "f32", false) +
    storage(5, "grad", "f32", false) + storage(6, "gradInput", "f32", true) +
    storage(7, "gradWeight", "f32", true) + storage(8, "gradBias", "f32", true) +
    workgroupSumWgsl("sumBoth", "vec2<f32>") + mainPerWorkgroup(CHANNEL_WG) + CHANNEL_PARAMS_WGSL +
    CHUNK_WGSL +
    `  let n = f32(outer * inner);
  let m = mean[c];
  let s = invstd[c];
  let held = vec2<f32>(gradInput[slotX], gradInput[slotY]);
  // Every lane has read its sums before any lane writes the slots' elements.
  storageBarrier();
  if (phase == 0u) {
    var sums = select(vec2<f32>(0.0, 0.0), held, begin > 0u);
${
      channelLoop(
        rows,
        "      let g = grad[at];\n      sums += vec2<f32>(g, g * (x[at] - m));",
        true,
      )
    }    gradInput[slotX] = sums.x;
    gradInput[slotY] = sums.y;
    return;
  }
  let sums = sumBoth(held, lid);
  let gsum = sums.x;
  let gxc = sums.y;
  if (lid == 0u && begin == 0u) {
    gradWeight[c] = gxc * s;
    gradBias[c] = gsum;
  }
  let a = weight[c] * s;
  let b = (-a * s * s * gxc) / n;
  let k = (-a * gsum) / n;
${channelLoop(rows, "      gradInput[at] = a * grad[at] + b * (x[at] - m) + k;", true)}}
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
  const { chunks } = channelWalk(outer, inner);
  if (chunks) {
    const { rows } = channelWalk(outer, inner);
    for (const phase of [0, 1]) {
      for (const [from, to] of phase === 1 ? [...chunks].reverse() : chunks) {
        rt.dispatch({
          name: "batchNormBackward",
          key: `batch_norm_backward_chunked_${rows ? "rows" : "flat"}`,
          wgsl: () => batchNormBackwardChunkedWgsl(rows),
          signature: "rrrrrwww",
          buffers: [x, weight, mean, invstd, grad, gradInput, gradWeight, gradBias],
          params: [outer, channels, inner, 0, phase, from, to],
          groups: groups2d(channels),
        });
      }
    }
    return;
  }
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
