/**
 * `sgd` (optional fused kernel): one plain SGD step in place, four elements
 * per invocation when `numel` is a multiple of 4.
 * @module
 */

import type { SgdArgs } from "../../backend.ts";
import { f32Bits, groups2d, type Runtime } from "../runtime.ts";
import { main1d, PARAMS_WGSL, storage, wgslType } from "../wgsl.ts";

const WG = 256;

/** Records the update of {@link SgdArgs}. */
export function sgd(rt: Runtime, args: SgdArgs<GPUBuffer>): void {
  const { param, grad, numel, dtype } = args;
  if (wgslType(dtype) !== "f32") throw new Error(`${rt.name} sgd does not support dtype ${dtype}`);
  if (numel === 0) return;
  const vec = numel % 4 === 0;
  const count = vec ? numel / 4 : numel;
  const t = vec ? "vec4<f32>" : "f32";
  const decay = args.weightDecay !== 0;
  // Params: count, lr, weightDecay, sign (f32 bit patterns).
  rt.dispatch({
    name: "sgd",
    key: `sgd_${vec}_${decay}`,
    wgsl: () =>
      PARAMS_WGSL + storage(1, "param", t, true) + storage(2, "grad", t, false) + main1d(WG) +
      `  let p = param[idx];
  var d = grad[idx] * pf(3u);
${decay ? "  d = d + p * pf(2u);\n" : ""}  param[idx] = p - d * pf(1u);
}
`,
    signature: "wr",
    buffers: [param, grad],
    params: [count, f32Bits(args.lr), f32Bits(args.weightDecay), f32Bits(args.maximize ? -1 : 1)],
    groups: groups2d(Math.ceil(count / WG)),
  });
}
