/**
 * `torch.special`: the error function and its relatives, the gamma
 * family (with the Hurwitz zeta and the regularized incomplete gamma
 * functions), modified Bessel functions, entropy and `x·log` terms, with
 * PyTorch's names in camelCase (`log_ndtr` → `logNdtr`). Every function is
 * elementwise (except `logsumexp`, `softmax`, `logSoftmax`), differentiable
 * as in PyTorch (`zeta` and gammainc's `a` not, as there), and runs on
 * every backend. PyTorch 1.13's Bessel and Airy functions and orthogonal
 * polynomials (`besselJ0` … `legendrePolynomialP`) are here too, without
 * gradients as in 1.13 (a tensor of polynomial degrees makes the result a
 * Promise).
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
import {
  expm1 as expm1Float,
  log1p as log1pFloat,
  round as roundHalfEven,
  sigmoid,
} from "../ops/elementwise.ts";
import { logsumexp as logsumexpFloat } from "../ops/reduce.ts";
import { isFloat } from "../dtype.ts";
import { toFloat } from "../ops_composite/special_functions.ts";
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
export {
  airyAi,
  besselJ0,
  besselJ1,
  besselY0,
  besselY1,
  chebyshevPolynomialT,
  chebyshevPolynomialU,
  chebyshevPolynomialV,
  chebyshevPolynomialW,
  hermitePolynomialH,
  hermitePolynomialHe,
  laguerrePolynomialL,
  legendrePolynomialP,
  MAX_POLYNOMIAL_DEGREE,
  modifiedBesselI0,
  modifiedBesselI1,
  modifiedBesselK0,
  modifiedBesselK1,
  scaledModifiedBesselK0,
  scaledModifiedBesselK1,
  shiftedChebyshevPolynomialT,
  shiftedChebyshevPolynomialU,
  shiftedChebyshevPolynomialV,
  shiftedChebyshevPolynomialW,
  sphericalBesselJ0,
} from "../ops_composite/special_more.ts";
export type { PolynomialFunction } from "../ops_composite/special_more.ts";
export { logSoftmax, softmax } from "../ops/softmax.ts";

/** The logistic sigmoid `1/(1 + e^-x)`, as `torch.special.expit` (int32 gives float32). */
export const expit = (x: Tensor): Tensor => sigmoid(toFloat(x));

/** `log(1 + x)`, as `torch.special.log1p` (int32 gives float32). */
export const log1p = (x: Tensor): Tensor => log1pFloat(toFloat(x));

/** `e^x - 1`, as `torch.special.expm1` (int32 gives float32). */
export const expm1 = (x: Tensor): Tensor => expm1Float(toFloat(x));

/** `log Σ exp` over `dim`, as `torch.special.logsumexp` (int32 gives float32). */
export const logsumexp = (x: Tensor, dim: number | number[], keepdim = false): Tensor =>
  logsumexpFloat(toFloat(x), dim, keepdim);

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
