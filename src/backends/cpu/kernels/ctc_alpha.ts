/**
 * `ctcAlpha` and `ctcAlphaBackward`: the CTC loss's log-space forward
 * recurrence over frames and its gradient, one launch each where the
 * composition takes a dozen kernels per frame.
 * @module
 */

import type { CtcAlphaArgs, CtcAlphaBackwardArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";

/** The shift of an lse: its largest term, finite (NaN stays NaN). */
const finite = (top: number) => (top < -3e38 ? -3e38 : top > 3e38 ? 3e38 : top);

/** `exp(v - m)`, without the call where it is exactly 1 or 0. */
const shifted = (v: number, m: number) => (v === m ? 1 : v === -Infinity ? 0 : Math.exp(v - m));

/** See {@link CtcAlphaArgs}. */
export function ctcAlpha(
  { x, start, sources, out, steps, batch, states }: CtcAlphaArgs<TypedArray>,
): void {
  const frame = batch * states;
  for (let k = 0; k < frame; k++) out[k] = x[k] + start[k];
  for (let t = 1; t < steps; t++) {
    for (let n = 0; n < batch; n++) {
      const before = (t - 1) * frame + n * states;
      const now = t * frame + n * states;
      const from = n * 3 * states;
      for (let j = 0; j < states; j++) {
        const a = out[before + sources[from + j]];
        const b = out[before + sources[from + states + j]];
        const c = out[before + sources[from + 2 * states + j]];
        const top = Math.max(a, b, c);
        if (top === -Infinity) {
          // An unreachable state (log(1/2) - inf is -inf), the most common kind: no exp.
          out[now + j] = top + x[now + j];
          continue;
        }
        const m = finite(top);
        const sum = shifted(a, m) + shifted(b, m) + shifted(c, m);
        out[now + j] = Math.log(sum < 0.5 ? 0.5 : sum) + top + x[now + j];
      }
    }
  }
}

/** See {@link CtcAlphaBackwardArgs}. */
export function ctcAlphaBackward(
  { alpha, sources, g, out, steps, batch, states }: CtcAlphaBackwardArgs<TypedArray>,
): void {
  const frame = batch * states;
  out.set(g.subarray(0, steps * frame));
  for (let t = steps - 1; t >= 1; t--) {
    for (let n = 0; n < batch; n++) {
      const before = (t - 1) * frame + n * states;
      const now = t * frame + n * states;
      const from = n * 3 * states;
      for (let j = 0; j < states; j++) {
        const sa = before + sources[from + j];
        const sb = before + sources[from + states + j];
        const sc = before + sources[from + 2 * states + j];
        const a = alpha[sa];
        const b = alpha[sb];
        const c = alpha[sc];
        const top = Math.max(a, b, c);
        // Terms all -inf: the lse's floor at 1/2 cuts their gradient.
        if (top === -Infinity) continue;
        const m = finite(top);
        const ea = shifted(a, m);
        const eb = shifted(b, m);
        const ec = shifted(c, m);
        const sum = ea + eb + ec;
        if (sum < 0.5) continue;
        const share = out[now + j] / sum;
        out[sa] += share * ea;
        out[sb] += share * eb;
        out[sc] += share * ec;
      }
    }
  }
}
