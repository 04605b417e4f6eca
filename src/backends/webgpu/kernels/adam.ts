/**
 * `adam` (optional fused kernel): one Adam/AdamW step in place, four
 * elements per invocation when `numel` is a multiple of 4. Consecutive
 * calls with the same hyperparameters (a parameter group's step) are held
 * and recorded as one multi-tensor dispatch, as many tensors as the
 * adapter's storage bindings allow.
 * @module
 */

import type { AdamArgs } from "../../backend.ts";
import { dispatchForeach, dispatchSingle, foreachCapacity, type ForeachSpec } from "../foreach.ts";
import { f32Bits, type Runtime } from "../runtime.ts";
import { wgslType } from "../wgsl.ts";

const ARRAYS = [
  { name: "param", write: true },
  { name: "grad", write: false },
  { name: "expAvg", write: true },
  { name: "expAvgSq", write: true },
] as const;

/**
 * The update of element `i` of arrays with `suffix`. Parameter words 1-10:
 * f32 bit patterns of beta1, 1-beta1, beta2, 1-beta2, weightDecay,
 * 1-lr*weightDecay, correction2Sqrt, eps, -stepSize, sign.
 */
function body(i: string, suffix: string, decoupled: boolean, l2: boolean): string {
  const [p, g, m, v] = ARRAYS.map((a) => `${a.name}${suffix}[${i}]`);
  return `  var p = ${p};
  var g = ${g} * pf(10u);
${decoupled ? "  p = p * pf(6u);\n" : ""}${
    l2 ? "  g = g + p * pf(5u);\n" : ""
  }  let m = ${m} * pf(1u) + g * pf(2u);
  let v = ${v} * pf(3u) + (g * pf(4u)) * g;
  ${m} = m;
  ${v} = v;
  ${p} = p + (m * pf(9u)) / (sqrt(v) / pf(7u) + pf(8u));
`;
}

function scalars(args: AdamArgs<GPUBuffer>): number[] {
  return [
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
  ];
}

/** Records the update of {@link AdamArgs} (held until the next call that cannot join it). */
export function adam(rt: Runtime, args: AdamArgs<GPUBuffer>): void {
  const { numel, dtype } = args;
  if (wgslType(dtype) !== "f32") throw new Error(`${rt.name} adam does not support dtype ${dtype}`);
  if (numel === 0) return;
  const decay = args.weightDecay !== 0;
  const decoupled = decay && args.decoupled;
  const l2 = decay && !args.decoupled;
  const words = scalars(args);
  const spec: ForeachSpec = {
    name: "adam",
    key: `adam_${decoupled}_${l2}`,
    arrays: ARRAYS,
    body: (suffix) => body("i", suffix, decoupled, l2).replace(/^/gm, "    "),
    scalars: words,
  };
  rt.defer(`${spec.key}|${words.join(",")}`, args, foreachCapacity(rt, spec), (items) => {
    const tensors = items.map((a) => ({
      buffers: [a.param, a.grad, a.expAvg, a.expAvgSq],
      numel: a.numel,
    }));
    if (tensors.length === 1) dispatchSingle(rt, spec, tensors[0].buffers, tensors[0].numel);
    else dispatchForeach(rt, spec, tensors);
  });
}
