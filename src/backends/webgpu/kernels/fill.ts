/**
 * `fill`: every element set to one value. Works on raw 32-bit words, so one
 * pipeline serves every dtype.
 * @module
 */

import type { FillArgs } from "../../backend.ts";
import { f32Bits, groups2d, i32Bits, type Runtime } from "../runtime.ts";
import { main1d, PARAMS_WGSL, storage, wgslType } from "../wgsl.ts";

const WG = 256;

/** Records `out[i] = value` for `i < numel`. */
export function fill(rt: Runtime, { out, numel, value, dtype }: FillArgs<GPUBuffer>): void {
  if (numel === 0) return;
  const bits = wgslType(dtype) === "f32" ? f32Bits(value) : i32Bits(value);
  const vec = numel % 4 === 0;
  const count = vec ? numel / 4 : numel;
  rt.dispatch({
    name: "fill",
    key: vec ? "fill4" : "fill",
    wgsl: () =>
      PARAMS_WGSL + storage(1, "out", vec ? "vec4<u32>" : "u32", true) +
      main1d(WG) +
      `  out[idx] = ${vec ? "vec4<u32>(pu(1u))" : "pu(1u)"};
}
`,
    signature: "w",
    buffers: [out],
    params: [count, bits],
    groups: groups2d(Math.ceil(count / WG)),
  });
}
