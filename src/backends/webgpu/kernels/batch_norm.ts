/**
 * `batchNorm` (optional fused kernel): a training batch norm, one workgroup
 * per channel. The statistics take two passes over the channel (the mean,
 * then the centered squares): the sums are float32 here, where the cpu's
 * one shifted pass is float64, and a one-pass variance in float32 cancels
 * when the mean is large against the spread. A third pass normalizes.
 * Each channel's values are taken relative to its first value throughout.
 *
 * llvmpipe (Mesa's gallivm) silently ends a shader loop after 65535
 * iterations, those of the loops nested in it counted too: a lane walking
 * a channel of a few million values stopped part way. So where a lane
 * would walk more than {@link LOOP_STEPS} steps, each pass takes several
 * dispatches of at most that many ({@link channelWalk}), each lane's
 * running sum kept between them in two of the channel's own output
 * elements (no further binding: the backward already needs nine), the
 * same adds in the same order as one dispatch.
 * @module
 */

import type { BatchNormArgs } from "../../backend.ts";
import { f32Bits, groups2d, LOOP_STEPS, type Runtime } from "../runtime.ts";
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
 * offset in `at`; `chunked`: only the share of the range [`begin`, `end`)
 * (of `o` walking rows, else of the flat index) of {@link CHUNK_WGSL}.
 */
export function channelLoop(rows: boolean, body: string, chunked = false): string {
  const [from, to] = chunked ? ["begin", "end"] : ["0u", rows ? "outer" : "outer * inner"];
  return rows
    ? `  for (var o = ${from}; o < ${to}; o++) {
    let row = (o * channels + c) * inner;
    for (var i = lid; i < inner; i += ${CHANNEL_WG}u) {
      let at = row + i;
${body}
    }
  }
`
    : `  for (var j = ${from} + lid; j < ${to}; j += ${CHANNEL_WG}u) {
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

/** How a lane walks a channel: by rows, and in which dispatches. */
export interface ChannelWalk {
  /** Rows of the last dims (else one flat range). */
  readonly rows: boolean;
  /** The ranges [from, to) of one dispatch each (of `o`, or the flat index); null: one. */
  readonly chunks: readonly (readonly [number, number])[] | null;
}

/** The {@link ChannelWalk} of [outer, channels, inner], at most {@link LOOP_STEPS} steps a lane. */
export function channelWalk(outer: number, inner: number): ChannelWalk {
  // A single row longer than a dispatch's walk goes flat (only ranges of rows are split).
  const rows = channelRows(inner) && inner <= CHANNEL_WG * LOOP_STEPS;
  const units = rows ? outer : Math.ceil((outer * inner) / CHANNEL_WG);
  // A row costs the outer loop's step, the inner loop's steps and its exit check: llvmpipe
  // counts every loop of the invocation together, exits too (the unchunked kernels walk the
  // channel two or three times, so 1 + ceil(inner / 64) let rows of 64 or 128 run past 65,535).
  const per = rows ? 2 + Math.ceil(inner / CHANNEL_WG) : 1;
  if (units * per <= LOOP_STEPS) return { rows, chunks: null };
  const step = Math.max(1, Math.floor(LOOP_STEPS / per));
  const chunks: [number, number][] = [];
  for (let u = 0; u < units; u += step) {
    const end = Math.min(units, u + step);
    chunks.push(
      rows ? [u, end] : [u * CHANNEL_WG, Math.min(outer * inner, end * CHANNEL_WG)],
    );
  }
  return { rows, chunks };
}

/**
 * The words of a chunked walk's dispatch (4: the pass, 5 and 6: `begin`, `end`) and `slotX`,
 * `slotY`: the offsets of channel `c`'s elements 2·lid and 2·lid + 1 (a chunked channel has
 * far more than 2·{@link CHANNEL_WG}), where a lane keeps its running sums between dispatches.
 */
export const CHUNK_WGSL = `
  let phase = pu(4u); let begin = pu(5u); let end = pu(6u);
  let o0 = (2u * lid) / inner;
  let slotX = (o0 * channels + c) * inner + (2u * lid - o0 * inner);
  let o1 = (2u * lid + 1u) / inner;
  let slotY = (o1 * channels + c) * inner + (2u * lid + 1u - o1 * inner);
`;

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

/**
 * {@link batchNormWgsl} a range at a time: pass 0 sums the values, 1 the centered squares
 * (each lane's running sum in `out` at its slots), 2 normalizes. The last pass's dispatches run
 * with the range holding the slots last, as every one reads them.
 */
function batchNormChunkedWgsl(rows: boolean): string {
  return PARAMS_WGSL + storage(1, "x", "f32", false) + storage(2, "weight", "f32", false) +
    storage(3, "bias", "f32", false) + storage(4, "mean", "f32", true) +
    storage(5, "invstd", "f32", true) + storage(6, "variance", "f32", true) +
    storage(7, "out", "f32", true) + workgroupSumWgsl("sumOfValues", "f32") +
    workgroupSumWgsl("sumOfSquares", "f32") + mainPerWorkgroup(CHANNEL_WG) +
    CHANNEL_PARAMS_WGSL + CHUNK_WGSL +
    `  let n = f32(outer * inner);
  let shift = x[c * inner];
  let px = out[slotX];
  let py = out[slotY];
  // Every lane has read its sums before any lane writes the slots' elements.
  storageBarrier();
  if (phase == 0u) {
    var s = select(0.0, px, begin > 0u);
${channelLoop(rows, "      s += x[at] - shift;", true)}    out[slotX] = s;
    return;
  }
  let centeredMean = sumOfValues(px, lid) / n;
  if (phase == 1u) {
    var q = select(0.0, py, begin > 0u);
${
      channelLoop(rows, "      let d = (x[at] - shift) - centeredMean;\n      q += d * d;", true)
    }    out[slotY] = q;
    return;
  }
  let v = sumOfSquares(py, lid) / n;
  let inv = 1.0 / sqrt(v + pf(3u));
  if (lid == 0u && begin == 0u) {
    mean[c] = shift + centeredMean;
    variance[c] = v;
    invstd[c] = inv;
  }
  let scale = inv * weight[c];
  let b = bias[c];
${channelLoop(rows, "      out[at] = ((x[at] - shift) - centeredMean) * scale + b;", true)}}
`;
}

/** Records the batch norm of {@link BatchNormArgs}. */
export function batchNorm(rt: Runtime, args: BatchNormArgs<GPUBuffer>): void {
  const { x, weight, bias, mean, invstd, variance, out, outer, channels, inner, dtype } = args;
  if (wgslType(dtype) !== "f32") {
    throw new Error(`${rt.name} batchNorm does not support dtype ${dtype}`);
  }
  if (channels === 0) return;
  const { rows, chunks } = channelWalk(outer, inner);
  if (chunks) {
    for (const phase of [0, 1, 2]) {
      for (const [from, to] of phase === 2 ? [...chunks].reverse() : chunks) {
        rt.dispatch({
          name: "batchNorm",
          key: `batch_norm_chunked_${rows ? "rows" : "flat"}`,
          wgsl: () => batchNormChunkedWgsl(rows),
          signature: "rrrwwww",
          buffers: [x, weight, bias, mean, invstd, variance, out],
          params: [outer, channels, inner, f32Bits(args.eps), phase, from, to],
          groups: groups2d(channels),
        });
      }
    }
    return;
  }
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
