/**
 * `adam` (optional fused kernel): one Adam/AdamW step in place, each
 * operation rounded to the dtype as the composed ops (and PyTorch) round
 * it: a float32 result of +, -, ×, ÷ or √ on float32 values computed in
 * float64 and rounded once is the correctly rounded float32 result, so
 * this gives the composition's numbers bit for bit.
 * @module
 */

import type { AdamArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";

const same = (x: number) => x;

/** See {@link AdamArgs}. */
export function adam(args: AdamArgs<TypedArray>): void {
  const { param, grad, expAvg, expAvgSq, numel } = args;
  const r = param instanceof Float32Array ? Math.fround : same;
  const beta1 = r(args.beta1), keep1 = r(1 - args.beta1);
  const beta2 = r(args.beta2), keep2 = r(1 - args.beta2);
  const decay = args.weightDecay === 0 ? 0 : r(args.weightDecay);
  const shrink = r(1 - args.lr * args.weightDecay);
  const c2 = r(args.correction2Sqrt), eps = r(args.eps), step = r(-args.stepSize);
  const decoupled = args.decoupled && decay !== 0;
  const coupled = !args.decoupled && decay !== 0;
  const sign = args.maximize ? -1 : 1;
  for (let i = 0; i < numel; i++) {
    let p = param[i];
    let g = sign * grad[i];
    if (decoupled) p = r(p * shrink);
    else if (coupled) g = r(g + r(p * decay));
    const m = r(r(expAvg[i] * beta1) + r(g * keep1));
    const v = r(r(expAvgSq[i] * beta2) + r(r(g * keep2) * g));
    const denom = r(r(r(Math.sqrt(v)) / c2) + eps);
    expAvg[i] = m;
    expAvgSq[i] = v;
    param[i] = r(p + r(r(m * step) / denom));
  }
}
