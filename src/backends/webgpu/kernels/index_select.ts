/**
 * `indexSelect`: gathers rows along the middle axis, on raw 32-bit words.
 * @module
 */

import type { IndexSelectArgs } from "../../backend.ts";
import { groups2d, type Runtime } from "../runtime.ts";
import { coordinates, main1d, PARAMS_WGSL, storage } from "../wgsl.ts";

const WG = 256;

/**
 * Records `out[o, j, i] = x[o, indices[j], i]`. Out-of-range indices give 0
 * instead of reading outside the buffer.
 */
export function indexSelect(
  rt: Runtime,
  { x, indices, out, outer, size, inner, count }: IndexSelectArgs<GPUBuffer>,
): void {
  const numel = outer * count * inner;
  if (numel === 0) return;
  rt.dispatch({
    name: "indexSelect",
    key: "indexSelect",
    wgsl: () =>
      PARAMS_WGSL + storage(1, "x", "u32", false) +
      storage(2, "indices", "i32", false) + storage(3, "out", "u32", true) +
      main1d(WG) +
      `  let size = pu(1u);
  let count = pu(2u);
  let inner = pu(3u);
${coordinates("idx", ["o", "j", "i"], ["count", "inner"])}  let r = indices[j];
  if (r < 0 || u32(r) >= size) { out[idx] = 0u; return; }
  out[idx] = x[(o * size + u32(r)) * inner + i];
}
`,
    signature: "rrw",
    buffers: [x, indices, out],
    params: [numel, size, count, inner],
    groups: groups2d(Math.ceil(numel / WG)),
  });
}
