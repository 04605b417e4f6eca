/**
 * `gather`: one element along the axis per index entry, on raw 32-bit words.
 * @module
 */

import type { GatherArgs } from "../../backend.ts";
import { groups2d, type Runtime } from "../runtime.ts";
import { coordinates, main1d, PARAMS_WGSL, storage } from "../wgsl.ts";

const WG = 256;

/**
 * Records `out[o, j, i] = x[o, index[o, j, i], i]`. An out-of-range index
 * gives 0 instead of reading outside the buffer.
 */
export function gather(
  rt: Runtime,
  { x, index, out, outer, size, count, inner }: GatherArgs<GPUBuffer>,
): void {
  const numel = outer * count * inner;
  if (numel === 0) return;
  rt.dispatch({
    name: "gather",
    key: "gather",
    wgsl: () =>
      PARAMS_WGSL + storage(1, "x", "u32", false) + storage(2, "index", "i32", false) +
      storage(3, "out", "u32", true) + main1d(WG) +
      `  let size = pu(1u);
  let count = pu(2u);
  let inner = pu(3u);
${coordinates("idx", ["o", "j", "i"], ["count", "inner"])}  let r = index[idx];
  if (r < 0 || u32(r) >= size) { out[idx] = 0u; return; }
  out[idx] = x[(o * size + u32(r)) * inner + i];
}
`,
    signature: "rrw",
    buffers: [x, index, out],
    params: [numel, size, count, inner],
    groups: groups2d(Math.ceil(numel / WG)),
  });
}
