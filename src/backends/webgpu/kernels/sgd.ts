/**
 * `sgd` (optional fused kernel): one plain SGD step in place, four elements
 * per invocation when `numel` is a multiple of 4. Consecutive calls with the
 * same hyperparameters are held and recorded as one multi-tensor dispatch,
 * as `adam`'s are.
 * @module
 */

import type { SgdArgs } from "../../backend.ts";
import { dispatchForeach, foreachCapacity, type ForeachSpec } from "../foreach.ts";
import { f32Bits, groups2d, type Runtime } from "../runtime.ts";
import { main1d, PARAMS_WGSL, storage, wgslType } from "../wgsl.ts";

const WG = 256;

const ARRAYS = [
  { name: "param", write: true },
  { name: "grad", write: false },
] as const;

/** Records the update of {@link SgdArgs} (held until the next call that cannot join it). */
export function sgd(rt: Runtime, args: SgdArgs<GPUBuffer>): void {
  const { numel, dtype } = args;
  if (wgslType(dtype) !== "f32") throw new Error(`${rt.name} sgd does not support dtype ${dtype}`);
  if (numel === 0) return;
  const decay = args.weightDecay !== 0;
  // Parameter words 1-3: lr, weightDecay, sign (f32 bit patterns).
  const words = [f32Bits(args.lr), f32Bits(args.weightDecay), f32Bits(args.maximize ? -1 : 1)];
  const spec: ForeachSpec = {
    name: "sgd",
    key: `sgd_${decay}`,
    arrays: ARRAYS,
    body: (suffix) =>
      `      let p = param${suffix}[i];
      var d = grad${suffix}[i] * pf(3u);
${decay ? "      d = d + p * pf(2u);\n" : ""}      param${suffix}[i] = p - d * pf(1u);
`,
    scalars: words,
  };
  rt.defer(`${spec.key}|${words.join(",")}`, args, foreachCapacity(rt, spec), (items) => {
    if (items.length === 1) one(rt, items[0], spec);
    else {
      dispatchForeach(rt, spec, items.map((a) => ({ buffers: [a.param, a.grad], numel: a.numel })));
    }
  });
}

/** One tensor's update, vec4 when its size allows. */
function one(rt: Runtime, args: SgdArgs<GPUBuffer>, spec: ForeachSpec): void {
  const vec = args.numel % 4 === 0;
  const count = vec ? args.numel / 4 : args.numel;
  const t = vec ? "vec4<f32>" : "f32";
  rt.dispatch({
    name: "sgd",
    key: `${spec.key}_${vec}`,
    wgsl: () =>
      PARAMS_WGSL + ARRAYS.map((a, k) => storage(k + 1, a.name, t, a.write)).join("") +
      main1d(WG) + spec.body("").replace(/\[i\]/g, "[idx]") +
      "}\n",
    signature: "wr",
    buffers: [args.param, args.grad],
    params: [count, ...spec.scalars],
    groups: groups2d(Math.ceil(count / WG)),
  });
}
