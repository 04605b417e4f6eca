/**
 * `sgd` (optional fused kernel): one plain SGD step in place, each
 * operation rounded to the dtype as the composed ops (and PyTorch) round it.
 * @module
 */

import type { SgdArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";

/** See {@link SgdArgs}. */
export function sgd({ param, grad, numel, lr, weightDecay, maximize }: SgdArgs<TypedArray>): void {
  const sign = maximize ? -1 : 1;
  if (param instanceof Float32Array) {
    // Math.fround written out (not through a variable) so that V8 inlines it.
    const rate = Math.fround(lr), decay = Math.fround(weightDecay);
    if (weightDecay === 0) {
      for (let i = 0; i < numel; i++) param[i] = param[i] - Math.fround(sign * grad[i] * rate);
    } else {
      for (let i = 0; i < numel; i++) {
        const p = param[i];
        param[i] = p - Math.fround(Math.fround(sign * grad[i] + Math.fround(p * decay)) * rate);
      }
    }
  } else {
    for (let i = 0; i < numel; i++) {
      const p = param[i];
      param[i] = p - (sign * grad[i] + (weightDecay === 0 ? 0 : p * weightDecay)) * lr;
    }
  }
}
