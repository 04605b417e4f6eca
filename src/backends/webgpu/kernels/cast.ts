/**
 * `cast`: elementwise dtype conversion. Float to int32 truncates toward zero;
 * NaN (told by its bits), ±inf and values outside the int32 range give
 * -2147483648, the contract's rule (WGSL's own conversion saturates).
 * @module
 */

import type { CastArgs } from "../../backend.ts";
import { groups2d, type Runtime } from "../runtime.ts";
import { main1d, PARAMS_WGSL, storage, wgslType } from "../wgsl.ts";

const WG = 256;

/** A u32 literal, splatted to vec4 when `vec`. */
function u32(vec: boolean, literal: string): string {
  return vec ? `vec4<u32>(${literal})` : literal;
}

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
      (tf === "f32" && tt === "i32"
        // |v| >= 2^31 (0x4f000000), NaN and inf included, decided on the
        // bits so that no compiler folds a NaN comparison; -2^31 itself
        // converts to the same -2147483648.
        ? `  let v = x[idx];
  let bad = (bitcast<${vec ? "vec4<u32>" : "u32"}>(v) & ${u32(vec, "0x7fffffffu")}) >= ${
          u32(vec, "0x4f000000u")
        };
  out[idx] = select(${outT}(v), ${outT}(bitcast<i32>(0x80000000u)), bad);
}
`
        : `  out[idx] = ${outT}(x[idx]);
}
`),
    signature: "rw",
    buffers: [x, out],
    params: [count],
    groups: groups2d(Math.ceil(count / WG)),
  });
}
