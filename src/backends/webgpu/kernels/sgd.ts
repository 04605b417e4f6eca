/**
 * `sgd` (optional fused kernel): one plain SGD step in place, four elements
 * per invocation when `numel` is a multiple of 4. Consecutive calls with the
 * same hyperparameters are held and recorded as one multi-tensor dispatch,
 * as `adam`'s are.
 * @module
 */

import type { SgdArgs } from "../../backend.ts";
import { dispatchForeach, dispatchSingle, foreachCapacity, type ForeachSpec } from "../foreach.ts";
import { f32Bits, type Runtime } from "../runtime.ts";
import { wgslType } from "../wgsl.ts";

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
    const tensors = items.map((a) => ({ buffers: [a.param, a.grad], numel: a.numel }));
    if (tensors.length === 1) dispatchSingle(rt, spec, tensors[0].buffers, tensors[0].numel);
    else dispatchForeach(rt, spec, tensors);
  });
}
