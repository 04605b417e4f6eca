/**
 * `segmentReduce`: embeddingBag's bags. Forward, one invocation per segment
 * and column walks its positions in order (the cpu loop's adds and
 * comparisons, so sums round alike and ties and NaN pick the same row). The
 * transpose (the sums' adjoint, a scatter into the table) has no float
 * atomics to lean on: one invocation per column zeroes it and adds every
 * position in turn, as `scatterAdd`'s per-column variant.
 * @module
 */

import type { SegmentReduceArgs } from "../../backend.ts";
import { groups2d, type Runtime } from "../runtime.ts";
import { coordinates, IS_NAN_WGSL, main1d, PARAMS_WGSL, storage } from "../wgsl.ts";

const WG = 256;

/** Positions [start, end) of segment `s`, and the factor of `weights` at position `i`. */
function prelude(weighted: boolean): string {
  return PARAMS_WGSL + storage(1, "x", "f32", false) + storage(2, "index", "i32", false) +
    storage(3, "bounds", "i32", false) +
    (weighted ? storage(4, "weights", "f32", false) : "") +
    storage(weighted ? 5 : 4, "out", "f32", true);
}

function spanWgsl(s: string): string {
  return `  let start = u32(clamp(bounds[${s}], 0, count));
  let end = u32(clamp(bounds[${s} + 1u], 0, count));
`;
}

/** Records {@link SegmentReduceArgs} (float32 `x`). */
export function segmentReduce(rt: Runtime, args: SegmentReduceArgs<GPUBuffer>): void {
  const { x, index, bounds, weights, out, indices, mode, transpose, rows, count, size, inner } =
    args;
  const weighted = weights !== null && mode !== "max";
  const mean = mode === "mean";
  const buffers = [x, index, bounds, ...(weighted ? [weights!] : []), out];
  const signature = weighted ? "rrrrw" : "rrrw";
  if (mode === "max") {
    const numel = size * inner;
    if (numel === 0) return;
    rt.dispatch({
      name: "segmentReduce",
      key: "segmentReduce-max",
      wgsl: () =>
        prelude(false) + IS_NAN_WGSL + storage(5, "indices", "i32", true) + main1d(WG) +
        `  let rows = pu(1u);
  let count = i32(pu(2u));
  let inner = pu(3u);
${coordinates("idx", ["s", "c"], ["inner"])}${spanWgsl("s")}  var best = 0.0;
  var at = -1;
  for (var i = start; i < end; i++) {
    let r = index[i];
    if (r < 0 || u32(r) >= rows) { continue; }
    let v = x[u32(r) * inner + c];
    // Greater, or NaN over a number; ties keep the first.
    if (at < 0 || v > best || (isNan(v) && !isNan(best))) {
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
      params: [numel, rows, count, inner],
      groups: groups2d(Math.ceil(numel / WG)),
    });
    return;
  }
  const factor = weighted ? " * weights[i]" : "";
  if (!transpose) {
    const numel = size * inner;
    if (numel === 0) return;
    rt.dispatch({
      name: "segmentReduce",
      key: `segmentReduce-sum-${weighted}-${mean}`,
      wgsl: () =>
        prelude(weighted) + main1d(WG) +
        `  let rows = pu(1u);
  let count = i32(pu(2u));
  let inner = pu(3u);
${coordinates("idx", ["s", "c"], ["inner"])}${spanWgsl("s")}  var acc = 0.0;
  var counted = 0.0;
  for (var i = start; i < end; i++) {
    let r = index[i];
    if (r < 0 || u32(r) >= rows) { continue; }
    acc += x[u32(r) * inner + c]${factor};
    counted += 1.0;
  }
  out[idx] = ${mean ? "acc / max(counted, 1.0)" : "acc"};
}
`,
      signature,
      buffers,
      params: [numel, rows, count, inner],
      groups: groups2d(Math.ceil(numel / WG)),
    });
    return;
  }
  if (inner === 0 || rows === 0) return;
  // Word 0 is the column count here; the invocation owns column c of the table.
  rt.dispatch({
    name: "segmentReduce",
    key: `segmentReduce-scatter-${weighted}-${mean}`,
    wgsl: () =>
      prelude(weighted) + main1d(WG) +
      `  let rows = pu(1u);
  let count = i32(pu(2u));
  let size = pu(3u);
  let c = idx;
  let inner = pu(0u);
  for (var r = 0u; r < rows; r++) { out[r * inner + c] = 0.0; }
  for (var s = 0u; s < size; s++) {
${spanWgsl("s")}    var counted = 0.0;
    ${
        mean
          ? `for (var i = start; i < end; i++) {
      let r = index[i];
      if (r >= 0 && u32(r) < rows) { counted += 1.0; }
    }`
          : ""
      }
    let g = x[s * inner + c]${mean ? " / max(counted, 1.0)" : ""};
    for (var i = start; i < end; i++) {
      let r = index[i];
      if (r < 0 || u32(r) >= rows) { continue; }
      let at = u32(r) * inner + c;
      out[at] = out[at] + g${factor};
    }
  }
}
`,
    signature,
    buffers,
    params: [inner, rows, count, size],
    groups: groups2d(Math.ceil(inner / WG)),
  });
}
