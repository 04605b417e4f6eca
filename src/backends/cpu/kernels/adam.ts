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
import { residentLoops } from "../wasm/elementwise.ts";

/** See {@link AdamArgs}. */
export function adam(args: AdamArgs<TypedArray>): void {
  if (args.param instanceof Float32Array) adamFloat32(args);
  else adamExact(args);
}

/**
 * float32: every operation rounded with `Math.fround`, written out (not
 * through a function variable) so that V8 inlines it.
 */
function adamFloat32(args: AdamArgs<TypedArray>): void {
  const { param, grad, expAvg, expAvgSq, numel } = args;
  const f = Math.fround;
  const beta1 = f(args.beta1), keep1 = f(1 - args.beta1);
  const beta2 = f(args.beta2), keep2 = f(1 - args.beta2);
  const decay = f(args.weightDecay), shrink = f(1 - args.lr * args.weightDecay);
  const c2 = f(args.correction2Sqrt), eps = f(args.eps), step = f(-args.stepSize);
  const mode = args.weightDecay === 0 ? 0 : args.decoupled ? 1 : 2;
  const sign = args.maximize ? -1 : 1;
  // In the kernel's memory: WebAssembly, the same float32 operations.
  const loops = residentLoops(param, grad, expAvg, expAvgSq);
  if (loops !== null) {
    loops.adam(
      ...[param.byteOffset, grad.byteOffset, expAvg.byteOffset, expAvgSq.byteOffset, numel],
      ...[beta1, keep1, beta2, keep2, decay, shrink, c2, eps, step, mode, sign],
    );
    return;
  }
  for (let i = 0; i < numel; i++) {
    let p = param[i];
    let g = sign * grad[i];
    if (mode === 1) p = Math.fround(p * shrink);
    else if (mode === 2) g = Math.fround(g + Math.fround(p * decay));
    const m = Math.fround(Math.fround(expAvg[i] * beta1) + Math.fround(g * keep1));
    const v = Math.fround(
      Math.fround(expAvgSq[i] * beta2) + Math.fround(Math.fround(g * keep2) * g),
    );
    const denom = Math.fround(Math.fround(Math.fround(Math.sqrt(v)) / c2) + eps);
    expAvg[i] = m;
    expAvgSq[i] = v;
    param[i] = p + Math.fround(Math.fround(m * step) / denom);
  }
}

/** float64: the same operations, in float64. */
function adamExact(args: AdamArgs<TypedArray>): void {
  const { param, grad, expAvg, expAvgSq, numel } = args;
  const { beta1, beta2, eps } = args;
  const keep1 = 1 - beta1, keep2 = 1 - beta2, step = -args.stepSize;
  const decay = args.weightDecay, shrink = 1 - args.lr * args.weightDecay;
  const mode = args.weightDecay === 0 ? 0 : args.decoupled ? 1 : 2;
  const sign = args.maximize ? -1 : 1;
  for (let i = 0; i < numel; i++) {
    let p = param[i];
    let g = sign * grad[i];
    if (mode === 1) p = p * shrink;
    else if (mode === 2) g = g + p * decay;
    const m = expAvg[i] * beta1 + g * keep1;
    const v = expAvgSq[i] * beta2 + g * keep2 * g;
    expAvg[i] = m;
    expAvgSq[i] = v;
    param[i] = p + (m * step) / (Math.sqrt(v) / args.correction2Sqrt + eps);
  }
}
