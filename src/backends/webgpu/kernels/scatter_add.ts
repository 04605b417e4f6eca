/**
 * `scatterAdd`: the adjoint of `gather`. WGSL has no float atomics, so each
 * output element sums its own matches over the index axis: deterministic
 * (the same order as the cpu loop), at `count` reads per output element.
 * @module
 */

import type { ScatterAddArgs } from "../../backend.ts";
import { groups2d, type Runtime } from "../runtime.ts";
import { coordinates, literals, main1d, PARAMS_WGSL, storage, wgslType } from "../wgsl.ts";

const WG = 256;

/**
 * Records `out[o, r, i] = Σ src[o, j, i]` over the j with
 * `index[o, j, i] = r` (0 where none).
 */
export function scatterAdd(
  rt: Runtime,
  { x: src, index, out, outer, size, count, inner, dtype }: ScatterAddArgs<GPUBuffer>,
): void {
  const numel = outer * size * inner;
  if (numel === 0) return;
  const t = wgslType(dtype);
  rt.dispatch({
    name: "scatterAdd",
    key: `scatterAdd_${t}`,
    wgsl: () =>
      PARAMS_WGSL + storage(1, "src", t, false) + storage(2, "index", "i32", false) +
      storage(3, "out", t, true) + main1d(WG) +
      `  let size = pu(1u);
  let count = pu(2u);
  let inner = pu(3u);
${coordinates("idx", ["o", "row", "i"], ["size", "inner"])}
  let r = i32(row);
  let first = o * count * inner + i;
  var acc = ${literals(t).zero};
  for (var j = 0u; j < count; j++) {
    let k = first + j * inner;
    if (index[k] == r) { acc += src[k]; }
  }
  out[idx] = acc;
}
`,
    signature: "rrw",
    buffers: [src, index, out],
    params: [numel, size, count, inner],
    groups: groups2d(Math.ceil(numel / WG)),
  });
}
