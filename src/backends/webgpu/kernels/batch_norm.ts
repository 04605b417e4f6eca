/**
 * `batchNorm` (optional fused kernel): a training batch norm, one workgroup
 * per channel. The statistics take two passes over the channel (the mean,
 * then the centered squares): the sums are float32 here, where the cpu's
 * one shifted pass is float64, and a one-pass variance in float32 cancels
 * when the mean is large against the spread. A third pass normalizes.
 * Each channel's values are taken relative to its first value throughout.
 * @module
 */

import type { BatchNormArgs } from "../../backend.ts";
import { f32Bits, groups2d, type Runtime } from "../runtime.ts";
import { mainPerWorkgroup, PARAMS_WGSL, storage, wgslType } from "../wgsl.ts";

/** Invocations per channel (within WebGPU's compatibility-mode limits). */
export const CHANNEL_WG = 64;

/**
 * Channels whose rows (`inner` elements per sample) are at least this long
 * are walked row by row; shorter ones as one flat range with a division per
 * element (llvmpipe has no vector integer division: ~8x slower per element).
 */
const ROW_MIN = 32;

/** The parameter words of {@link channelLoop}: outer, channels, inner. */
export const CHANNEL_PARAMS_WGSL = `
  let outer = pu(0u); let channels = pu(1u); let inner = pu(2u);
  let c = g;
  // The grid may round the channel count up (more than 65535 channels).
  if (c >= channels) { return; }
`;

/**
 * A WGSL loop running `body` once per element of channel `c` of
 * [outer, channels, inner] in this invocation's share, with the element's
 * offset in `at`.
 */
export function channelLoop(rows: boolean, body: string): string {
  return rows
    ? `  for (var o = 0u; o < outer; o++) {
    let row = (o * channels + c) * inner;
    for (var i = lid; i < inner; i += ${CHANNEL_WG}u) {
      let at = row + i;
${body}
    }
  }
`
    : `  for (var j = lid; j < outer * inner; j += ${CHANNEL_WG}u) {
    let o = j / inner;
    let at = (o * channels + c) * inner + (j - o * inner);
${body}
  }
`;
}

/** Whether {@link channelLoop} walks rows for this shape. */
export function channelRows(inner: number): boolean {
  return inner >= ROW_MIN;
}

/**
 * `<name>(v, lid)`: the workgroup's sum of every invocation's `v` (a tree
 * over {@link CHANNEL_WG} slots), the same for every invocation. Each sum
 * of a kernel gets its own slots: reusing one array for a second sum gave
 * wrong variances on Dawn's GL backend (llvmpipe), as if the barrier after
 * the first total was read did not hold.
 */
export function workgroupSumWgsl(name: string, type: string): string {
  return `var<workgroup> ${name}Slots: array<${type}, ${CHANNEL_WG}>;
fn ${name}(v: ${type}, lid: u32) -> ${type} {
  ${name}Slots[lid] = v;
  for (var k = ${CHANNEL_WG / 2}u; k > 0u; k = k >> 1u) {
    workgroupBarrier();
    if (lid < k) { ${name}Slots[lid] = ${name}Slots[lid] + ${name}Slots[lid + k]; }
  }
  workgroupBarrier();
  return ${name}Slots[0];
}
`;
}

function batchNormWgsl(rows: boolean): string {
  return PARAMS_WGSL + storage(1, "x", "f32", false) + storage(2, "weight", "f32", false) +
    storage(3, "bias", "f32", false) + storage(4, "mean", "f32", true) +
    storage(5, "invstd", "f32", true) + storage(6, "variance", "f32", true) +
    storage(7, "out", "f32", true) + workgroupSumWgsl("sumOfValues", "f32") +
    workgroupSumWgsl("sumOfSquares", "f32") + mainPerWorkgroup(CHANNEL_WG) +
    CHANNEL_PARAMS_WGSL +
    `  let n = f32(outer * inner);
  // Everything relative to one of the channel's own values: x - shift is
  // exact for nearby values, where x - mean would carry the rounding of a
  // large mean (1000 ± 0.01 lost 1% of the spread that way).
  let shift = x[c * inner];
  var s = 0.0;
${channelLoop(rows, "      s += x[at] - shift;")}  let centeredMean = sumOfValues(s, lid) / n;
  var q = 0.0;
${
      channelLoop(rows, "      let d = (x[at] - shift) - centeredMean;\n      q += d * d;")
    }  let v = sumOfSquares(q, lid) / n;
  let inv = 1.0 / sqrt(v + pf(3u));
  if (lid == 0u) {
    mean[c] = shift + centeredMean;
    variance[c] = v;
    invstd[c] = inv;
  }
  let scale = inv * weight[c];
  let b = bias[c];
${channelLoop(rows, "      out[at] = ((x[at] - shift) - centeredMean) * scale + b;")}}
`;
}

/** Records the batch norm of {@link BatchNormArgs}. */
export function batchNorm(rt: Runtime, args: BatchNormArgs<GPUBuffer>): void {
  const { x, weight, bias, mean, invstd, variance, out, outer, channels, inner, dtype } = args;
  if (wgslType(dtype) !== "f32") {
    throw new Error(`${rt.name} batchNorm does not support dtype ${dtype}`);
  }
  if (channels === 0) return;
  const rows = channelRows(inner);
  rt.dispatch({
    name: "batchNorm",
    key: `batch_norm_${rows ? "rows" : "flat"}`,
    wgsl: () => batchNormWgsl(rows),
    signature: "rrrwwww",
    buffers: [x, weight, bias, mean, invstd, variance, out],
    params: [outer, channels, inner, f32Bits(args.eps)],
    groups: groups2d(channels),
  });
}
