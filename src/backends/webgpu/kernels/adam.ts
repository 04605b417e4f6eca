/**
 * `adam` (optional fused kernel): one Adam/AdamW step in place, four
 * elements per invocation when `numel` is a multiple of 4.
 * @module
 */

import type { AdamArgs } from "../../backend.ts";
import { f32Bits, groups2d, type Runtime } from "../runtime.ts";
import { main1d, PARAMS_WGSL, storage, wgslType } from "../wgsl.ts";

const WG = 256;

/** Records the update of {@link AdamArgs}. */
export function adam(rt: Runtime, args: AdamArgs<GPUBuffer>): void {
  const { param, grad, expAvg, expAvgSq, numel, dtype } = args;
  if (wgslType(dtype) !== "f32") throw new Error(`${rt.name} adam does not support dtype ${dtype}`);
  if (numel === 0) return;
  const vec = numel % 4 === 0;
  const count = vec ? numel / 4 : numel;
  const t = vec ? "vec4<f32>" : "f32";
  const decay = args.weightDecay !== 0;
  // Params: count, then f32 bit patterns: beta1, 1-beta1, beta2, 1-beta2,
  // weightDecay, 1-lr*weightDecay, correction2Sqrt, eps, -stepSize, sign.
  rt.dispatch({
    name: "adam",
    key: `adam_${vec}_${decay && args.decoupled}_${decay && !args.decoupled}`,
    wgsl: () =>
      PARAMS_WGSL + storage(1, "param", t, true) + storage(2, "grad", t, false) +
      storage(3, "expAvg", t, true) + storage(4, "expAvgSq", t, true) + main1d(WG) +
      `  var p = param[idx];
  var g = grad[idx] * pf(10u);
${decay && args.decoupled ? "  p = p * pf(6u);\n" : ""}${
        decay && !args.decoupled ? "  g = g + p * pf(5u);\n" : ""
      }  let m = expAvg[idx] * pf(1u) + g * pf(2u);
  let v = expAvgSq[idx] * pf(3u) + (g * pf(4u)) * g;
  expAvg[idx] = m;
  expAvgSq[idx] = v;
  param[idx] = p + (m * pf(9u)) / (sqrt(v) / pf(7u) + pf(8u));
}
`,
    signature: "wrww",
    buffers: [param, grad, expAvg, expAvgSq],
    params: [
      count,
      f32Bits(args.beta1),
      f32Bits(1 - args.beta1),
      f32Bits(args.beta2),
      f32Bits(1 - args.beta2),
      f32Bits(args.weightDecay),
      f32Bits(1 - args.lr * args.weightDecay),
      f32Bits(args.correction2Sqrt),
      f32Bits(args.eps),
      f32Bits(-args.stepSize),
      f32Bits(args.maximize ? -1 : 1),
    ],
    groups: groups2d(Math.ceil(count / WG)),
  });
}
