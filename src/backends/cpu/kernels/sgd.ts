/**
 * `sgd` (optional fused kernel): one plain SGD step in place, each
 * operation rounded to the dtype as the composed ops (and PyTorch) round it.
 * @module
 */

import type { SgdArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";

const same = (x: number) => x;

/** See {@link SgdArgs}. */
export function sgd({ param, grad, numel, lr, weightDecay, maximize }: SgdArgs<TypedArray>): void {
  const r = param instanceof Float32Array ? Math.fround : same;
  const rate = r(lr);
  const decay = r(weightDecay);
  const sign = maximize ? -1 : 1;
  if (weightDecay === 0) {
    for (let i = 0; i < numel; i++) param[i] = r(param[i] - r(sign * grad[i] * rate));
  } else {
    for (let i = 0; i < numel; i++) {
      const p = param[i];
      param[i] = r(p - r(r(sign * grad[i] + r(p * decay)) * rate));
    }
  }
}
