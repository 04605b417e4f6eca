/**
 * `segmentReduce`: embeddingBag's bags. Forward, one invocation per segment
 * and column walks its positions in order (the cpu loop's adds and
 * comparisons, so sums round alike and ties and NaN pick the same row). The
 * transpose (the sums' adjoint, a scatter into the table) has no float
 * atomics to lean on: one invocation per column adds every position in turn,
 * as `scatterAdd`'s per-column variant, each position's segment found first
 * by a binary search over the bounds.
 *
 * llvmpipe (Mesa's gallivm) silently ends a shader loop after 65535
 * iterations, those of the loops nested in it counted too: a bag longer than
 * that, or a column's walk over 20,000 bags of 2, stopped part way. So no
 * invocation walks more than {@link LOOP_STEPS} positions in one dispatch; longer
 * walks take several, the running sum (maximum and its row) carried in the
 * output, so the adds stay in the cpu loop's order.
 * @module
 */

import type { SegmentReduceArgs } from "../../backend.ts";
import { groups2d, LOOP_STEPS, type Runtime } from "../runtime.ts";
import { coordinates, main1d, PARAMS_WGSL, storage } from "../wgsl.ts";

const WG = 256;

/**
 * Positions [first, to) of segment `s` walked in dispatch number `step` (word 4), its bounds
 * clamped into [0, count].
 */
function spanWgsl(s: string): string {
  return `  let start = u32(clamp(bounds[${s}], 0, count));
  let end = u32(clamp(bounds[${s} + 1u], 0, count));
  let step = pu(4u);
  let first = start + step * ${LOOP_STEPS}u;
  let to = min(end, first + ${LOOP_STEPS}u);
`;
}

/** Records {@link SegmentReduceArgs} (float32 `x`). */
export function segmentReduce(rt: Runtime, args: SegmentReduceArgs<GPUBuffer>): void {
  if (args.mode === "max") segmentMax(rt, args);
  else if (args.transpose) segmentScatter(rt, args);
  else segmentSum(rt, args);
}

/** Dispatches a segment's walk takes: its positions lie within the `count`. */
function passesOf(count: number): number {
  return Math.max(1, Math.ceil(count / LOOP_STEPS));
}

function segmentMax(rt: Runtime, args: SegmentReduceArgs<GPUBuffer>): void {
  const { x, index, bounds, out, indices, rows, count, size, inner } = args;
  const numel = size * inner;
  if (numel === 0) return;
  for (let pass = 0; pass < passesOf(count); pass++) {
    rt.dispatch({
      name: "segmentReduce",
      key: "segmentReduce-max",
      wgsl: () =>
        PARAMS_WGSL + storage(1, "x", "f32", false) + storage(2, "index", "i32", false) +
        storage(3, "bounds", "i32", false) + storage(4, "out", "f32", true) +
        storage(5, "indices", "i32", true) + main1d(WG) +
        `  let rows = pu(1u);
  let count = i32(pu(2u));
  let inner = pu(3u);
${coordinates("idx", ["s", "c"], ["inner"])}${spanWgsl("s")}  var best = 0.0;
  var at = -1;
  if (step > 0u) {
    if (first >= end) { return; }
    best = out[idx];
    at = indices[idx];
  }
  for (var i = first; i < to; i++) {
    let r = index[i];
    if (r < 0 || u32(r) >= rows) { continue; }
    let v = x[u32(r) * inner + c];
    // Only greater (as the cpu loop): ties keep the first, a NaN wins only as the first.
    if (at < 0 || v > best) {
      best = v;
      at = r;
    }
  }
  out[idx] = best;
  indices[idx] = at;
}
`,
      signature: "rrrww",
      buffers: [x, index, bounds, out, indices!],
      params: [numel, rows, count, inner, pass],
      groups: groups2d(Math.ceil(numel / WG)),
    });
  }
}

function segmentSum(rt: Runtime, args: SegmentReduceArgs<GPUBuffer>): void {
  const { x, index, bounds, weights, out, mode, rows, count, size, inner } = args;
  const numel = size * inner;
  if (numel === 0) return;
  const weighted = weights !== null;
  const passes = passesOf(count);
  // Over several dispatches a mean divides at the end, by counts kept per segment.
  const mean = mode === "mean";
  const counts = mean && passes > 1 ? rt.storage.acquire(size * 4) : null;
  const factor = weighted ? " * weights[i]" : "";
  for (let pass = 0; pass < passes; pass++) {
    const b = weighted ? 5 : 4;
    rt.dispatch({
      name: "segmentReduce",
      key: `segmentReduce-sum-${weighted}-${mean}-${counts !== null}`,
      wgsl: () =>
        PARAMS_WGSL + storage(1, "x", "f32", false) + storage(2, "index", "i32", false) +
        storage(3, "bounds", "i32", false) +
        (weighted ? storage(4, "weights", "f32", false) : "") + storage(b, "out", "f32", true) +
        (counts ? storage(b + 1, "counts", "f32", true) : "") + main1d(WG) +
        `  let rows = pu(1u);
  let count = i32(pu(2u));
  let inner = pu(3u);
${coordinates("idx", ["s", "c"], ["inner"])}${spanWgsl("s")}  var acc = 0.0;
  var counted = 0.0;
  if (step > 0u) {
    if (first >= end) { return; }
    acc = out[idx];
  }
  for (var i = first; i < to; i++) {
    let r = index[i];
    if (r < 0 || u32(r) >= rows) { continue; }
    acc += x[u32(r) * inner + c]${factor};
    counted += 1.0;
  }
  ${
          counts
            ? `out[idx] = acc;
  if (c == 0u) { counts[s] = select(counts[s], 0.0, step == 0u) + counted; }`
            : `out[idx] = ${mean ? "acc / max(counted, 1.0)" : "acc"};`
        }
}
`,
      signature: (weighted ? "rrrrw" : "rrrw") + (counts ? "w" : ""),
      buffers: [
        x,
        index,
        bounds,
        ...(weighted ? [weights!] : []),
        out,
        ...(counts ? [counts] : []),
      ],
      params: [numel, rows, count, inner, pass],
      groups: groups2d(Math.ceil(numel / WG)),
    });
  }
  if (counts === null) return;
  rt.dispatch({
    name: "segmentReduce",
    key: "segmentReduce-mean-divide",
    wgsl: () =>
      PARAMS_WGSL + storage(1, "counts", "f32", false) + storage(2, "out", "f32", true) +
      main1d(WG) +
      `  let inner = pu(1u);
${coordinates("idx", ["s", "c"], ["inner"])}  out[idx] = out[idx] / max(counts[s], 1.0);
}
`,
    signature: "rw",
    buffers: [counts, out],
    params: [numel, inner],
    groups: groups2d(Math.ceil(numel / WG)),
  });
  rt.release(counts);
}

/** The adjoint of {@link segmentSum}: `out` [rows, inner] from segment rows `x` [size, inner]. */
function segmentScatter(rt: Runtime, args: SegmentReduceArgs<GPUBuffer>): void {
  const { x, index, bounds, weights, out, mode, rows, count, size, inner } = args;
  if (inner === 0 || rows === 0) return;
  const weighted = weights !== null;
  const mean = mode === "mean";
  rt.dispatch({
    name: "segmentReduce",
    key: "segmentReduce-zero",
    wgsl: () =>
      PARAMS_WGSL + storage(1, "out", "f32", true) + main1d(WG) + "  out[idx] = 0.0;\n}\n",
    signature: "w",
    buffers: [out],
    params: [rows * inner],
    groups: groups2d(Math.ceil((rows * inner) / WG)),
  });
  if (count === 0 || size === 0) return;
  // Each position's segment (-1: none), by a binary search: at most 32 steps per invocation.
  const seg = rt.storage.acquire(count * 4);
  rt.dispatch({
    name: "segmentReduce",
    key: "segmentReduce-positions",
    wgsl: () =>
      PARAMS_WGSL + storage(1, "bounds", "i32", false) + storage(2, "seg", "i32", true) +
      main1d(WG) +
      `  let count = i32(pu(0u));
  let size = pu(1u);
  let i = i32(idx);
  // The first segment starting after i: i lies in the one before, unless that ends at or before i.
  var lo = 0u;
  var hi = size;
  while (lo < hi) {
    let mid = (lo + hi) / 2u;
    if (clamp(bounds[mid], 0, count) <= i) { lo = mid + 1u; } else { hi = mid; }
  }
  var s = -1;
  if (lo > 0u && i < clamp(bounds[lo], 0, count)) { s = i32(lo) - 1; }
  seg[idx] = s;
}
`,
    signature: "rw",
    buffers: [bounds, seg],
    params: [count, size],
    groups: groups2d(Math.ceil(count / WG)),
  });
  const passes = passesOf(count);
  const counts = mean ? rt.storage.acquire(size * 4) : null;
  if (counts) {
    for (let pass = 0; pass < passes; pass++) {
      rt.dispatch({
        name: "segmentReduce",
        key: "segmentReduce-counts",
        wgsl: () =>
          PARAMS_WGSL + storage(1, "index", "i32", false) + storage(2, "bounds", "i32", false) +
          storage(3, "counts", "f32", true) + main1d(WG) +
          `  let rows = pu(1u);
  let count = i32(pu(2u));
  let s = idx;
${spanWgsl("s")}  if (step > 0u && first >= end) { return; }
  var counted = 0.0;
  for (var i = first; i < to; i++) {
    let r = index[i];
    if (r >= 0 && u32(r) < rows) { counted += 1.0; }
  }
  counts[s] = select(counts[s], 0.0, step == 0u) + counted;
}
`,
        signature: "rrw",
        buffers: [index, bounds, counts],
        params: [size, rows, count, 0, pass],
        groups: groups2d(Math.ceil(size / WG)),
      });
    }
  }
  const factor = weighted ? " * weights[i]" : "";
  for (let pass = 0; pass < passes; pass++) {
    // Word 0 is the column count here; the invocation owns column c of the table.
    rt.dispatch({
      name: "segmentReduce",
      key: `segmentReduce-scatter-${weighted}-${mean}`,
      wgsl: () =>
        PARAMS_WGSL + storage(1, "x", "f32", false) + storage(2, "index", "i32", false) +
        storage(3, "seg", "i32", false) +
        (weighted ? storage(4, "weights", "f32", false) : "") +
        (mean ? storage(4, "counts", "f32", false) : "") +
        storage(weighted || mean ? 5 : 4, "out", "f32", true) +
        main1d(WG) +
        `  let rows = pu(1u);
  let count = pu(2u);
  let inner = pu(0u);
  let c = idx;
  let first = pu(4u) * ${LOOP_STEPS}u;
  let to = min(count, first + ${LOOP_STEPS}u);
  for (var i = first; i < to; i++) {
    let s = seg[i];
    let r = index[i];
    if (s < 0 || r < 0 || u32(r) >= rows) { continue; }
    let g = x[u32(s) * inner + c]${mean ? " / max(counts[s], 1.0)" : ""};
    let at = u32(r) * inner + c;
    out[at] = out[at] + g${factor};
  }
}
`,
      signature: weighted || mean ? "rrrrw" : "rrrw",
      buffers: [
        x,
        index,
        seg,
        ...(weighted ? [weights!] : mean ? [counts!] : []),
        out,
      ],
      params: [inner, rows, count, 0, pass],
      groups: groups2d(Math.ceil(inner / WG)),
    });
  }
  rt.release(seg);
  if (counts) rt.release(counts);
}
