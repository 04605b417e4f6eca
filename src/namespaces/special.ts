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
import {
  airyAi as opsAiryAi,
  besselJ0 as opsBesselJ0,
  besselJ1 as opsBesselJ1,
  besselY0 as opsBesselY0,
  besselY1 as opsBesselY1,
  chebyshevPolynomialT as opsChebyshevPolynomialT,
  chebyshevPolynomialU as opsChebyshevPolynomialU,
  chebyshevPolynomialV as opsChebyshevPolynomialV,
  chebyshevPolynomialW as opsChebyshevPolynomialW,
  hermitePolynomialH as opsHermitePolynomialH,
  hermitePolynomialHe as opsHermitePolynomialHe,
  laguerrePolynomialL as opsLaguerrePolynomialL,
  legendrePolynomialP as opsLegendrePolynomialP,
  modifiedBesselI0 as opsModifiedBesselI0,
  modifiedBesselI1 as opsModifiedBesselI1,
  modifiedBesselK0 as opsModifiedBesselK0,
  modifiedBesselK1 as opsModifiedBesselK1,
  scaledModifiedBesselK0 as opsScaledModifiedBesselK0,
  scaledModifiedBesselK1 as opsScaledModifiedBesselK1,
  shiftedChebyshevPolynomialT as opsShiftedChebyshevPolynomialT,
  shiftedChebyshevPolynomialU as opsShiftedChebyshevPolynomialU,
  shiftedChebyshevPolynomialV as opsShiftedChebyshevPolynomialV,
  shiftedChebyshevPolynomialW as opsShiftedChebyshevPolynomialW,
  sphericalBesselJ0 as opsSphericalBesselJ0,
} from "../ops_composite/special_more.ts";
import {
  digamma as opsDigamma,
  entr as opsEntr,
  erfc as opsErfc,
  erfcx as opsErfcx,
  erfinv as opsErfinv,
  gammainc as opsGammainc,
  gammaincc as opsGammaincc,
  i0 as opsI0,
  i0e as opsI0e,
  i1 as opsI1,
  i1e as opsI1e,
  lgamma as opsLgamma,
  logNdtr as opsLogNdtr,
  mvlgamma as opsMvlgamma,
  ndtr as opsNdtr,
  ndtri as opsNdtri,
  polygamma as opsPolygamma,
  xlog1py as opsXlog1py,
  xlogy as opsXlogy,
  zeta as opsZeta,
} from "../ops_composite/special_functions.ts";
import { erf as opsErf } from "../ops_composite/elementwise.ts";
import {
  exp2 as opsExp2,
  logit as opsLogit,
  sinc as opsSinc,
} from "../ops_composite/unary_math.ts";
import { logSoftmax as opsLogSoftmax, softmax as opsSoftmax } from "../ops/softmax.ts";
import { MAX_POLYNOMIAL_DEGREE as opsMaxPolynomialDegree } from "../ops_composite/special_more.ts";
import type { LogitOptions as OpsLogitOptions } from "../ops_composite/unary_math.ts";
import type { PolynomialFunction as OpsPolynomialFunction } from "../ops_composite/special_more.ts";

// Declared, not re-exported: deno doc lists a namespace's members only when they are declared
// or re-exported with `export *`, and these live in files with many other public ops.
/** torch.special.airy_ai: the Airy function Ai. */
export const airyAi: typeof opsAiryAi = opsAiryAi;

/** torch.special.bessel_j0: the Bessel function of the first kind of order 0. */
export const besselJ0: typeof opsBesselJ0 = opsBesselJ0;

/** torch.special.bessel_j1: the Bessel function of the first kind of order 1. */
export const besselJ1: typeof opsBesselJ1 = opsBesselJ1;

/** torch.special.bessel_y0: the Bessel function of the second kind of order 0. */
export const besselY0: typeof opsBesselY0 = opsBesselY0;

/** torch.special.bessel_y1: the Bessel function of the second kind of order 1. */
export const besselY1: typeof opsBesselY1 = opsBesselY1;

/** torch.special.chebyshev_polynomial_t: the Chebyshev polynomial of the first kind T_n(x). */
export const chebyshevPolynomialT: typeof opsChebyshevPolynomialT = opsChebyshevPolynomialT;

/** torch.special.chebyshev_polynomial_u: the Chebyshev polynomial of the second kind U_n(x). */
export const chebyshevPolynomialU: typeof opsChebyshevPolynomialU = opsChebyshevPolynomialU;

/** torch.special.chebyshev_polynomial_v: the Chebyshev polynomial of the third kind V_n(x). */
export const chebyshevPolynomialV: typeof opsChebyshevPolynomialV = opsChebyshevPolynomialV;

/** torch.special.chebyshev_polynomial_w: the Chebyshev polynomial of the fourth kind W_n(x). */
export const chebyshevPolynomialW: typeof opsChebyshevPolynomialW = opsChebyshevPolynomialW;

/** torch.special.digamma: the digamma function ψ(x), the derivative of log Γ(x) (the top-level `digamma`). */
export const digamma: typeof opsDigamma = opsDigamma;

/** torch.special.entr: the elementwise entropy term -x·log(x). */
export const entr: typeof opsEntr = opsEntr;

/** torch.special.erf: the error function (the top-level `erf`). */
export const erf: typeof opsErf = opsErf;

/** torch.special.erfc: the complementary error function 1 - erf(x) (the top-level `erfc`). */
export const erfc: typeof opsErfc = opsErfc;

/** torch.special.erfcx: the scaled complementary error function e^(x²)·erfc(x). */
export const erfcx: typeof opsErfcx = opsErfcx;

/** torch.special.erfinv: the inverse error function (the top-level `erfinv`). */
export const erfinv: typeof opsErfinv = opsErfinv;

/** torch.special.exp2: 2^x (the top-level `exp2`). */
export const exp2: typeof opsExp2 = opsExp2;

/** torch.special.gammainc: the regularized lower incomplete gamma function P(a, x). */
export const gammainc: typeof opsGammainc = opsGammainc;

/** torch.special.gammaincc: the regularized upper incomplete gamma function Q(a, x). */
export const gammaincc: typeof opsGammaincc = opsGammaincc;

/** torch.special.gammaln: log |Γ(x)| (the top-level `lgamma`). */
export const gammaln: typeof opsLgamma = opsLgamma;

/** torch.special.hermite_polynomial_h: the physicists' Hermite polynomial H_n(x). */
export const hermitePolynomialH: typeof opsHermitePolynomialH = opsHermitePolynomialH;

/** torch.special.hermite_polynomial_he: the probabilists' Hermite polynomial He_n(x). */
export const hermitePolynomialHe: typeof opsHermitePolynomialHe = opsHermitePolynomialHe;

/** torch.special.i0: the modified Bessel function of the first kind of order 0 (the top-level `i0`). */
export const i0: typeof opsI0 = opsI0;

/** torch.special.i0e: the exponentially scaled modified Bessel function of order 0, e^(-|x|)·I0(x). */
export const i0e: typeof opsI0e = opsI0e;

/** torch.special.i1: the modified Bessel function of the first kind of order 1. */
export const i1: typeof opsI1 = opsI1;

/** torch.special.i1e: the exponentially scaled modified Bessel function of order 1, e^(-|x|)·I1(x). */
export const i1e: typeof opsI1e = opsI1e;

/** torch.special.laguerre_polynomial_l: the Laguerre polynomial L_n(x). */
export const laguerrePolynomialL: typeof opsLaguerrePolynomialL = opsLaguerrePolynomialL;

/** torch.special.legendre_polynomial_p: the Legendre polynomial P_n(x). */
export const legendrePolynomialP: typeof opsLegendrePolynomialP = opsLegendrePolynomialP;

/** torch.special.log_ndtr: the log of the standard normal cdf. */
export const logNdtr: typeof opsLogNdtr = opsLogNdtr;

/** torch.special.log_softmax: log(softmax(x)) along a dim (the top-level `logSoftmax`). */
export const logSoftmax: typeof opsLogSoftmax = opsLogSoftmax;

/** torch.special.logit: log(p / (1 - p)), with an optional eps clamp (the top-level `logit`). */
export const logit: typeof opsLogit = opsLogit;

/** torch.special.modified_bessel_i0: the modified Bessel function of the first kind of order 0. */
export const modifiedBesselI0: typeof opsModifiedBesselI0 = opsModifiedBesselI0;

/** torch.special.modified_bessel_i1: the modified Bessel function of the first kind of order 1. */
export const modifiedBesselI1: typeof opsModifiedBesselI1 = opsModifiedBesselI1;

/** torch.special.modified_bessel_k0: the modified Bessel function of the second kind of order 0. */
export const modifiedBesselK0: typeof opsModifiedBesselK0 = opsModifiedBesselK0;

/** torch.special.modified_bessel_k1: the modified Bessel function of the second kind of order 1. */
export const modifiedBesselK1: typeof opsModifiedBesselK1 = opsModifiedBesselK1;

/** torch.special.multigammaln: the multivariate log-gamma function of dimension p (the top-level `mvlgamma`). */
export const multigammaln: typeof opsMvlgamma = opsMvlgamma;

/** torch.special.ndtr: the standard normal cdf. */
export const ndtr: typeof opsNdtr = opsNdtr;

/** torch.special.ndtri: the inverse of the standard normal cdf. */
export const ndtri: typeof opsNdtri = opsNdtri;

/** torch.special.polygamma: the n-th derivative of the digamma function (the top-level `polygamma`). */
export const polygamma: typeof opsPolygamma = opsPolygamma;

/** torch.special.psi: the digamma function ψ(x) (the top-level `digamma`). */
export const psi: typeof opsDigamma = opsDigamma;

/** torch.special.scaled_modified_bessel_k0: the exponentially scaled modified Bessel function K0, e^x·K0(x). */
export const scaledModifiedBesselK0: typeof opsScaledModifiedBesselK0 = opsScaledModifiedBesselK0;

/** torch.special.scaled_modified_bessel_k1: the exponentially scaled modified Bessel function K1, e^x·K1(x). */
export const scaledModifiedBesselK1: typeof opsScaledModifiedBesselK1 = opsScaledModifiedBesselK1;

/** torch.special.shifted_chebyshev_polynomial_t: the shifted Chebyshev polynomial of the first kind T*_n(x). */
export const shiftedChebyshevPolynomialT: typeof opsShiftedChebyshevPolynomialT =
  opsShiftedChebyshevPolynomialT;

/** torch.special.shifted_chebyshev_polynomial_u: the shifted Chebyshev polynomial of the second kind U*_n(x). */
export const shiftedChebyshevPolynomialU: typeof opsShiftedChebyshevPolynomialU =
  opsShiftedChebyshevPolynomialU;

/** torch.special.shifted_chebyshev_polynomial_v: the shifted Chebyshev polynomial of the third kind V*_n(x). */
export const shiftedChebyshevPolynomialV: typeof opsShiftedChebyshevPolynomialV =
  opsShiftedChebyshevPolynomialV;

/** torch.special.shifted_chebyshev_polynomial_w: the shifted Chebyshev polynomial of the fourth kind W*_n(x). */
export const shiftedChebyshevPolynomialW: typeof opsShiftedChebyshevPolynomialW =
  opsShiftedChebyshevPolynomialW;

/** torch.special.sinc: the normalized sinc function sin(πx)/(πx) (the top-level `sinc`). */
export const sinc: typeof opsSinc = opsSinc;

/** torch.special.softmax: the softmax along a dim (the top-level `softmax`). */
export const softmax: typeof opsSoftmax = opsSoftmax;

/** torch.special.spherical_bessel_j0: the spherical Bessel function of the first kind of order 0. */
export const sphericalBesselJ0: typeof opsSphericalBesselJ0 = opsSphericalBesselJ0;

/** torch.special.xlog1py: x·log1p(y), 0 where x is 0. */
export const xlog1py: typeof opsXlog1py = opsXlog1py;

/** torch.special.xlogy: x·log(y), 0 where x is 0 (the top-level `xlogy`). */
export const xlogy: typeof opsXlogy = opsXlogy;

/** torch.special.zeta: the Hurwitz zeta function ζ(x, q). */
export const zeta: typeof opsZeta = opsZeta;

/** The largest polynomial degree the orthogonal polynomials take (here each recurrence step is a tensor op). */
export const MAX_POLYNOMIAL_DEGREE: number = opsMaxPolynomialDegree;

/** Options of {@link logit} (`eps`). */
export type LogitOptions = OpsLogitOptions;

/** The signature of the orthogonal polynomial functions (a tensor of degrees makes the result a Promise). */
export type PolynomialFunction = OpsPolynomialFunction;

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
