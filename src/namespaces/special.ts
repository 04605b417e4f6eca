/**
 * `torch.special`: the error function and its relatives, the gamma
 * family (with the Hurwitz zeta and the regularized incomplete gamma
 * functions), modified Bessel functions, entropy and `x·log` terms, with
 * PyTorch's names in camelCase (`log_ndtr` → `logNdtr`). Every function is
 * elementwise (except `logsumexp`, `softmax`, `logSoftmax`), differentiable
 * as in PyTorch (`zeta` and gammainc's `a` not, as there), and runs on
 * every backend. The Bessel functions of other kinds and the orthogonal
 * polynomials of `torch.special` are not here yet.
 *
 * @example
 * ```ts
 * import { special, tensor } from "@multigrad/core";
 * const p = special.ndtr(tensor([-1, 0, 1]));
 * const z = special.ndtri(p); // [-1, 0, 1]
 * ```
 * @module
 */

import "../ops_composite/mod.ts";
import type { Tensor } from "../tensor.ts";
import { noGrad, record } from "../autograd.ts";
import { round as roundHalfEven, sigmoid } from "../ops/elementwise.ts";
import { isFloat } from "../dtype.ts";
import { formatShape } from "../shape.ts";

export {
  digamma,
  entr,
  erfc,
  erfcx,
  erfinv,
  gammainc,
  gammaincc,
  i0,
  i0e,
  i1,
  i1e,
  lgamma as gammaln,
  logNdtr,
  ndtr,
  ndtri,
  polygamma,
  xlog1py,
  xlogy,
  zeta,
} from "../ops_composite/special_functions.ts";
export { digamma as psi, mvlgamma as multigammaln } from "../ops_composite/special_functions.ts";
export { exp2, logit, sinc } from "../ops_composite/unary_math.ts";
export type { LogitOptions } from "../ops_composite/unary_math.ts";
export { erf } from "../ops_composite/elementwise.ts";
export { expm1, log1p } from "../ops/elementwise.ts";
export { logsumexp } from "../ops/reduce.ts";
export { logSoftmax, softmax } from "../ops/softmax.ts";

/** The logistic sigmoid `1/(1 + e^-x)`, as `torch.special.expit`. */
export const expit = (x: Tensor): Tensor => sigmoid(x);

/** Options of {@link round}. */
export interface RoundOptions {
  /** Decimal places to keep (negative: round to tens, hundreds, ...); default 0. */
  decimals?: number;
}

/**
 * Rounds half to even, as `torch.special.round` (`torch.round`): to
 * `decimals` places when given (`round(x·10^d)/10^d`, as PyTorch computes
 * it; like PyTorch, decimals need a float tensor). Zero gradient.
 */
export function round(x: Tensor, options: RoundOptions = {}): Tensor {
  const { decimals = 0 } = options;
  if (!Number.isInteger(decimals)) {
    throw new RangeError(`round: decimals must be an integer, got ${decimals}`);
  }
  if (decimals === 0) return roundHalfEven(x);
  if (!isFloat(x.dtype)) {
    throw new TypeError(
      `round: decimals needs a floating-point tensor, got ${x.dtype} (shape ${
        formatShape(x.shape)
      })`,
    );
  }
  const scale = 10 ** Math.abs(decimals);
  const out = noGrad(() =>
    decimals > 0 ? roundHalfEven(x.mul(scale)).div(scale) : roundHalfEven(x.div(scale)).mul(scale)
  );
  return record("round", [x], out, ([g]) => [g!.mul(0)]);
}
