/**
 * `cast`: elementwise dtype conversion (float to int truncates toward zero,
 * saturating as WGSL's conversion does).
 * @module
 */

import type { CastArgs } from "../../backend.ts";
import { groups2d, type Runtime } from "../runtime.ts";
import { main1d, PARAMS_WGSL, storage, wgslType } from "../wgsl.ts";

const WG = 256;

/** Records `out[i] = to(x[i])`. */
export function cast(rt: Runtime, { x, out, numel, dtype: from, to }: CastArgs<GPUBuffer>): void {
  if (numel === 0) return;
  const tf = wgslType(from);
  const tt = wgslType(to);
  const vec = numel % 4 === 0;
  const count = vec ? numel / 4 : numel;
  const inT = vec ? `vec4<${tf}>` : tf;
  const outT = vec ? `vec4<${tt}>` : tt;
  rt.dispatch({
    name: "cast",
    key: `cast_${tf}_${tt}_${vec}`,
    wgsl: () =>
      PARAMS_WGSL + storage(1, "x", inT, false) +
      storage(2, "out", outT, true) + main1d(WG) +
      `  out[idx] = ${outT}(x[idx]);
}
`,
    signature: "rw",
    buffers: [x, out],
    params: [count],
    groups: groups2d(Math.ceil(count / WG)),
  });
}
