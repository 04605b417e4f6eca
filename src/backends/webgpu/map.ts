/**
 * The one-operand elementwise dispatch shared by `unary`, `gelu` and
 * `geluDerivative`: `out[i] = f(x[i])`, four elements per invocation when
 * `numel` is a multiple of 4.
 * @module
 */

import { groups2d, type Runtime } from "./runtime.ts";
import { FLOAT_SPECIALS_WGSL, IS_NAN_WGSL, main1d, PARAMS_WGSL, storage } from "./wgsl.ts";

const WG = 256;

/** What {@link dispatchMap} records. */
export interface MapSpec {
  /** The kernel name in errors. */
  readonly name: string;
  /** Names the function among cached pipelines (with the type and width added). */
  readonly key: string;
  /** The WGSL scalar type of `x` and `out`. */
  readonly type: "f32" | "i32";
  /** The body of `fn f(x: T) -> T`; `isNan`, `isFinite`, `nanF32`, `infF32` are in scope for f32. */
  readonly body: string;
  /** Helper functions the body calls. */
  readonly helpers?: string;
}

/** Records `out[i] = f(x[i])` for `i < numel`. */
export function dispatchMap(
  rt: Runtime,
  spec: MapSpec,
  x: GPUBuffer,
  out: GPUBuffer,
  numel: number,
): void {
  if (numel === 0) return;
  const t = spec.type;
  const vec = numel % 4 === 0;
  const count = vec ? numel / 4 : numel;
  const vt = vec ? `vec4<${t}>` : t;
  const apply = vec
    ? `let v = x[idx]; out[idx] = vec4<${t}>(f(v.x), f(v.y), f(v.z), f(v.w));`
    : "out[idx] = f(x[idx]);";
  rt.dispatch({
    name: spec.name,
    key: `map_${spec.key}_${t}_${vec}`,
    wgsl: () =>
      PARAMS_WGSL + storage(1, "x", vt, false) + storage(2, "out", vt, true) +
      (t === "f32" ? IS_NAN_WGSL + FLOAT_SPECIALS_WGSL : "") + (spec.helpers ?? "") +
      `fn f(x: ${t}) -> ${t} { ${spec.body} }\n` + main1d(WG) +
      `  ${apply}
}
`,
    signature: "rw",
    buffers: [x, out],
    params: [count],
    groups: groups2d(Math.ceil(count / WG)),
  });
}
