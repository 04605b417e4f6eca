/**
 * Implicit reparameterization gradients of gamma and Dirichlet draws, as
 * PyTorch's `torch._standard_gamma_grad` and `torch._dirichlet_grad`: a draw
 * `x ~ Gamma(α)` moves with α as `dx/dα = -(∂F/∂α)(x; α) / p(x; α)` (F the
 * CDF, p the density), which has no closed form. PyTorch evaluates it with
 * approximations fitted per region (Jankowiak and Obermeyer, "Pathwise
 * derivatives beyond the reparameterization trick", 2018); these are the
 * same approximations as compositions of tensor ops, every region computed
 * and the right one selected, so every backend runs them.
 * @module
 */

import { Tensor } from "../tensor.ts";
import { noGrad } from "../autograd.ts";
import { forwardScope } from "../storage.ts";
import { formatShape } from "../shape.ts";
import { digamma } from "../ops_composite/special_functions.ts";

/**
 * `log(Number.MIN_VALUE)`: where `α·log x` is below it PyTorch's `x^α`
 * (in double) underflows to 0 and its small-x series gives 0/0, which it
 * returns as 0; the same cut here keeps the numbers PyTorch's.
 */
const LOG_MIN_DOUBLE = Math.log(Number.MIN_VALUE);

/** PyTorch's single-precision region bounds, as the double values it compares with. */
const F08 = Math.fround(0.8);
const F09 = Math.fround(0.9);
const F11 = Math.fround(1.1);

/**
 * The bivariate rational fit of `log(dx/dα)` in `u = log(x/α)` and
 * `v = log α` (rows: the u⁰, u¹, u² coefficients; columns: numerator then
 * denominator coefficients of v⁰…v³), PyTorch's.
 */
const GAMMA_UV = [
  [0.16009398, -0.094634809, 0.025146376, -0.0030648343, 1, 0.32668115, 0.10406089, 0.0014179084],
  [
    0.53487893,
    0.1298071,
    0.065735949,
    -0.0015649758,
    0.16639465,
    0.020070113,
    -0.0035938915,
    -0.00058392623,
  ],
  [
    0.040121004,
    -0.0065914022,
    -0.0026286047,
    -0.0013441777,
    0.017050642,
    -0.0021309326,
    0.00085092367,
    -1.5247877e-07,
  ],
];

/**
 * The rational correction of the Dirichlet gradient, PyTorch's: `[p|q][i][j]`
 * holds the cubic in `b = log Σα - log(α/x)` multiplying `uⁱ aʲ`
 * (`u = log x`, `a = log α - u`).
 */
const DIRICHLET_PQ = [
  [
    [
      [1.003668233, -0.01061107488, -0.0657888334, 0.01201642863],
      [0.6336835991, -0.3557432599, 0.05486251648, -0.001465281033],
      [-0.03276231906, 0.004474107445, 0.002429354597, -0.0001557569013],
    ],
    [
      [0.221950385, -0.3187676331, 0.01799915743, 0.01074823814],
      [-0.2951249643, 0.06219954479, 0.01535556598, 0.001550077057],
      [0.02155310298, 0.004170831599, 0.001292462449, 6.976601077e-05],
    ],
    [
      [-0.05980841433, 0.008441916499, 0.01085618172, 0.002319392565],
      [0.02911413504, 0.01400243777, -0.002721828457, 0.000751041181],
      [0.005900514878, -0.001936558688, -9.495446725e-06, 5.385558597e-05],
    ],
  ],
  [
    [
      [1, -0.02924021934, -0.04438342661, 0.007285809825],
      [0.6357567472, -0.3473456711, 0.05454656494, -0.002407477521],
      [-0.03301322327, 0.004845219414, 0.00231480583, -0.0002307248149],
    ],
    [
      [0.5925320577, -0.1757678135, 0.01505928619, 0.000564515273],
      [0.1014815858, -0.06589186703, 0.01272886114, -0.0007316646956],
      [-0.007258481865, 0.001096195486, 0.0003934994223, -4.12701925e-05],
    ],
    [
      [0.06469649321, -0.0236701437, 0.002902096474, -5.896963079e-05],
      [0.001925008108, -0.002869809258, 0.0008000589141, -6.063713228e-05],
      [-0.0003477407336, 6.959756487e-05, 1.097287507e-05, -1.650964693e-06],
    ],
  ],
];

/** Float tensors of one dtype, device and shape, or a TypeError/RangeError naming them. */
function checkSame(op: string, named: Record<string, unknown>): Tensor[] {
  const entries = Object.entries(named);
  for (const [name, t] of entries) {
    if (!(t instanceof Tensor)) {
      throw new TypeError(`${op}: ${name} must be a Tensor, got ${typeof t}`);
    }
    if (t.dtype !== "float32" && t.dtype !== "float64") {
      throw new TypeError(`${op}: ${name} must be a float tensor, got dtype ${t.dtype}`);
    }
  }
  const [firstName, first] = entries[0] as [string, Tensor];
  for (const [name, raw] of entries.slice(1)) {
    const t = raw as Tensor;
    if (t.dtype !== first.dtype) {
      throw new TypeError(
        `${op}: ${firstName} and ${name} must have the same dtype, got ${first.dtype} and ${t.dtype}`,
      );
    }
    if (t.device !== first.device) {
      throw new TypeError(
        `${op}: ${firstName} and ${name} must be on the same device, got ${first.device} and ${t.device}`,
      );
    }
    if (formatShape(t.shape) !== formatShape(first.shape)) {
      throw new RangeError(
        `${op}: ${firstName} and ${name} must have the same shape, got ${
          formatShape(first.shape)
        } and ${formatShape(t.shape)}`,
      );
    }
  }
  return entries.map(([, t]) => t as Tensor);
}

/** `t` with its NaNs replaced by 0 (PyTorch's series return 0 where they fail). */
function nanToZero(t: Tensor): Tensor {
  return t.maskedFill(t.isnan(), 0);
}

/** `t^-1.5` (NaN for negative t), without a GPU pow's exp2-of-log2 rounding. */
function powMinus15(t: Tensor): Tensor {
  return t.mul(t.sqrt()).reciprocal();
}

/**
 * `log(1 + u) - u` without the cancellation of the two for small u: with
 * `s = u/(2 + u)`, `log(1 + u) = 2·atanh(s)` and `2s - u = -u²/(2 + u)`.
 */
function log1pmx(u: Tensor): Tensor {
  const s = u.div(u.add(2));
  const s2 = s.square();
  // |u| <= 1/2 gives s² <= 1/9: eleven terms of Σ s^2k/(2k + 3) leave under 1e-11 of it;
  // beyond, log1p(u) - u is at least 0.09 in size and loses no digits.
  let series = s2.mul(1 / 23).add(1 / 21);
  for (let k = 8; k >= 0; k--) series = series.mul(s2).add(1 / (2 * k + 3));
  const small = u.square().neg().div(u.add(2)).add(s.mul(s2).mul(series).mul(2));
  return small.where(u.abs().le(0.5), u.log1p().sub(u));
}

/**
 * `ψ(a + b) - ψ(a)` for a, b > 0 without subtracting the two digammas (which
 * loses its digits in float32 where b ≪ a): both arguments moved up by 10
 * through `ψ(z) = ψ(z + 1) - 1/z`, each step's difference
 * `b/((a + k)(a + b + k))` exact, then the difference of the asymptotic
 * series with each power's difference factored.
 */
function digammaDiff(a: Tensor, b: Tensor): Tensor {
  let sum: Tensor | undefined;
  for (let k = 0; k < 10; k++) {
    const term = b.div(a.add(k).mul(a.add(b).add(k)));
    sum = sum ? sum.add(term) : term;
  }
  const p = a.add(10);
  const q = p.add(b);
  const ip = p.reciprocal();
  const iq = q.reciprocal();
  const ip2 = ip.square();
  const iq2 = iq.square();
  // 1/p^2m - 1/q^2m = (1/p² - 1/q²)·Σ_j p^-2j q^-2(m-1-j), with 1/p² - 1/q² = b(p + q)/(p q)².
  const d2 = b.mul(p.add(q)).mul(ip2).mul(iq2);
  const d4 = d2.mul(ip2.add(iq2));
  const d6 = d2.mul(ip2.square().add(ip2.mul(iq2)).add(iq2.square()));
  const d8 = d2.mul(ip2.add(iq2)).mul(ip2.square().add(iq2.square()));
  const asymptotic = b.div(p).log1p().add(b.mul(ip).mul(iq).mul(0.5))
    .add(d2.div(12)).sub(d4.div(120)).add(d6.div(252)).sub(d8.div(240));
  return sum!.add(asymptotic);
}

/** `dx/dα` for x < 0.8: the Taylor series of the lower incomplete gamma function. */
function gammaGradSmallX(alpha: Tensor, x: Tensor): Tensor {
  let numer: Tensor | undefined;
  let series1 = alpha.reciprocal();
  let series2 = series1.square();
  for (let i = 1; i <= 5; i++) {
    numer = numer ? numer.mul(x.div(-i)) : x.neg();
    const denom = alpha.add(i);
    const term = numer.div(denom);
    series1 = series1.add(term);
    series2 = series2.add(term.div(denom));
  }
  // -(∂F/∂α)/p with the common factor x^(α-1) cancelled (PyTorch divides both).
  const logx = x.log();
  const inner = logx.sub(digamma(alpha)).mul(series1).sub(series2);
  const result = nanToZero(x.neg().mul(x.exp()).mul(inner));
  return result.maskedFill(alpha.mul(logx).lt(LOG_MIN_DOUBLE), 0);
}

/** `dx/dα` for α > 8: Rice's saddle-point expansion (a polynomial near the mode). */
function gammaGradLargeAlpha(alpha: Tensor, x: Tensor): Tensor {
  const a2 = alpha.square();
  // Near x = α the expansion's terms cancel; the band takes its series there.
  const numer1 = alpha.mul(12).add(1).mul(alpha).mul(24).add(1);
  const numer2 = a2.mul(1440).add(x.mul(x.mul(-120).add(53)).mul(6))
    .sub(x.square().mul(65).div(alpha)).add(alpha.mul(x.mul(3600).add(107)));
  const band = numer1.div(a2).mul(numer2.div(a2)).div(1244160);
  const denom = alpha.mul(8).sqrt();
  const term2 = denom.div(alpha.sub(x));
  const logRatio = x.div(alpha).log();
  // x - α - α·log(x/α), which cancels to second order near x = α.
  const term3 = powMinus15(alpha.mul(log1pmx(x.sub(alpha).div(alpha))).neg());
  const term23 = term2.sub(term3).where(x.lt(alpha), term2.add(term3));
  const term1 = logRatio.mul(term23)
    .sub(alpha.reciprocal().mul(2).sqrt().mul(alpha.add(x)).div(alpha.sub(x).square()));
  const stirling = alpha.mul(24).reciprocal().add(1).div(alpha.mul(12)).add(1);
  const tail = stirling.mul(x).mul(term1).div(denom).neg();
  const inBand = alpha.mul(F09).le(x).mul(x.le(alpha.mul(F11)));
  return band.where(inBand, tail);
}

/** `dx/dα` elsewhere: the exponential of PyTorch's fitted rational function. */
function gammaGradRational(alpha: Tensor, x: Tensor): Tensor {
  const u = x.div(alpha).log();
  const v = alpha.log();
  const coef = (i: number) => u.mul(u.mul(GAMMA_UV[2][i]).add(GAMMA_UV[1][i])).add(GAMMA_UV[0][i]);
  const cubic = (k: number) =>
    v.mul(v.mul(v.mul(coef(k + 3)).add(coef(k + 2))).add(coef(k + 1))).add(coef(k));
  return cubic(0).div(cubic(4)).exp();
}

/**
 * The reparameterization gradient `dx/dα` of standard gamma draws `x` of
 * concentration `alpha` (same shape, dtype and device), as PyTorch's
 * `torch._standard_gamma_grad(alpha, x)`: a Taylor series for x < 0.8, a
 * Rice saddle-point expansion for α > 8, a fitted rational function in
 * between (0 where PyTorch's double-precision series underflow or fail).
 * Carries no gradient itself, as PyTorch's.
 */
export function standardGammaGrad(alpha: Tensor, x: Tensor): Tensor {
  const [a, v] = checkSame("standardGammaGrad", { alpha, x });
  return noGrad(() =>
    forwardScope(() => {
      const small = gammaGradSmallX(a, v);
      const large = gammaGradLargeAlpha(a, v);
      const mid = gammaGradRational(a, v);
      return small.where(v.lt(F08), large.where(a.gt(8), mid));
    })
  );
}

/**
 * The Beta(α, β) draw's `dx/dα` near x = 0 (Taylor series in x), as
 * PyTorch's `_beta_grad_alpha_small`.
 */
function betaGradAlphaSmall(x: Tensor, alpha: Tensor, beta: Tensor): Tensor {
  const factor = digammaDiff(alpha, beta).add(x.log()).neg();
  let numer: Tensor | undefined;
  let series = alpha.reciprocal().mul(factor.add(alpha.reciprocal()));
  for (let i = 1; i <= 10; i++) {
    const step = beta.neg().add(i).mul(x).div(i);
    numer = numer ? numer.mul(step) : step;
    const denom = alpha.add(i);
    series = series.add(numer.div(denom).mul(factor.add(denom.reciprocal())));
  }
  return nanToZero(x.mul(x.neg().add(1).pow(beta.neg())).mul(series));
}

/**
 * The Beta(α, β) draw's `dx/dβ` near x = 0 (Taylor series in x), as
 * PyTorch's `_beta_grad_beta_small`.
 */
function betaGradBetaSmall(x: Tensor, alpha: Tensor, beta: Tensor): Tensor {
  const factor = digammaDiff(beta, alpha);
  let numer: Tensor | undefined;
  let betas: Tensor | undefined;
  let dbetas: Tensor | undefined;
  let series = factor.div(alpha);
  for (let i = 1; i <= 8; i++) {
    numer = numer ? numer.mul(x.div(-i)) : x.neg();
    const shifted = beta.sub(i);
    // With betas₀ = 1 and dbetas₀ = 0: the falling factorial of β and its β-derivative.
    dbetas = dbetas && betas ? dbetas.mul(shifted).add(betas) : shifted.mul(0).add(1);
    betas = betas ? betas.mul(shifted) : shifted;
    series = series.add(numer.div(alpha.add(i)).mul(dbetas.add(factor.mul(betas))));
  }
  return nanToZero(x.neg().add(1).pow(beta.neg().add(1)).mul(series).neg());
}

/**
 * The Beta(α, β) draw's `dx/dα` for α, β > 6: Rice's saddle-point
 * expansion (a polynomial within a tenth of a standard deviation of the
 * mean), as PyTorch's `_beta_grad_alpha_mid`.
 */
function betaGradAlphaMid(x: Tensor, alpha: Tensor, beta: Tensor): Tensor {
  const total = alpha.add(beta);
  const mean = alpha.div(total);
  const std = alpha.mul(beta).div(total.add(1)).sqrt().div(total);
  const b2 = beta.square();
  const omx = x.neg().add(1);
  const inner4 = omx.mul(8).mul(beta.mul(135).sub(11));
  const inner3 = beta.mul(1620).mul(omx).add(453).sub(x.mul(455)).mul(beta)
    .add(alpha.mul(inner4));
  const inner2 = beta.mul(180).add(59).sub(x.mul(90)).mul(3).mul(b2).add(alpha.mul(inner3));
  const inner1 = beta.mul(27).add(16).mul(x).mul(20).add(43).mul(b2).mul(beta)
    .add(alpha.mul(inner2));
  const poly = x.mul(47).mul(b2.square()).add(alpha.mul(inner1));
  const preNum = alpha.mul(12).add(1).mul(beta.mul(12).add(1)).div(total.square());
  // PyTorch's 12960·α³β²(1 + 12·total), divided in steps to stay in float32's range.
  const band = preNum.div(omx).mul(poly.div(alpha.square().mul(alpha)).div(b2))
    .div(total.mul(12).add(1).mul(12960));
  const prefactor = x.neg().div(alpha.mul(beta).mul(2).div(total).sqrt());
  const stir = (t: Tensor) => t.mul(12).reciprocal().add(1).add(t.square().mul(288).reciprocal());
  const stirling = stir(alpha).mul(stir(beta)).div(stir(total));
  const xm1 = x.sub(1);
  const term1Num = alpha.square().mul(2).mul(xm1).add(alpha.mul(beta).mul(xm1))
    .sub(x.mul(b2));
  const axbx = alpha.mul(xm1).add(beta.mul(x));
  const term1Den = alpha.mul(2).div(beta).sqrt().mul(total.mul(total.sqrt())).mul(axbx.square());
  const term1 = term1Num.div(term1Den);
  // With d = x - mean: log(α/(total·x)) = log1p(-d/x) and log(β/(total(1-x))) = log1p(d/(1-x));
  // term4's base (a KL divergence, second order in d) is summed without its cancelling first order.
  const d = axbx.div(total);
  const v = d.neg().div(x);
  const u = d.div(omx);
  const term2 = v.log1p().mul(0.5);
  const term3 = alpha.mul(beta).mul(8).div(total).sqrt().div(axbx);
  const base = beta.mul(log1pmx(u)).add(alpha.mul(log1pmx(v)))
    .add(total.mul(d.square()).div(x.mul(omx)));
  const term4 = powMinus15(base);
  const term1234 = term1.add(term2.mul(term3.add(term4.where(x.lt(mean), term4.neg()))));
  const tail = stirling.mul(prefactor).mul(term1234);
  const inBand = mean.sub(std.mul(0.1)).le(x).mul(x.le(mean.add(std.mul(0.1))));
  return band.where(inBand, tail);
}

/** The Dirichlet gradient elsewhere: PyTorch's rational correction to an analytic approximation. */
function dirichletGradRational(x: Tensor, alpha: Tensor, total: Tensor): Tensor {
  const u = x.log();
  const a = alpha.log().sub(u);
  const b = total.log().sub(a);
  const powU = [undefined, u, u.square()];
  const powA = [undefined, a, a.square()];
  const sum = (c: number[][][]) => {
    let out: Tensor | undefined;
    for (let i = 0; i < 3; i++) {
      for (let j = 0; j < 3; j++) {
        const k = c[i][j];
        let term = b.mul(b.mul(b.mul(k[3]).add(k[2])).add(k[1])).add(k[0]);
        if (powU[i]) term = term.mul(powU[i]!);
        if (powA[j]) term = term.mul(powA[j]!);
        out = out ? out.add(term) : term;
      }
    }
    return out!;
  };
  const beta = total.sub(alpha);
  const approx = x.mul(digammaDiff(alpha, beta)).div(beta);
  return sum(DIRICHLET_PQ[0]).div(sum(DIRICHLET_PQ[1])).mul(approx);
}

/**
 * The Dirichlet reparameterization gradient of draws `x` of concentration
 * `alpha` with `total = Σα` (expanded to x's shape; all of one shape, dtype
 * and device), as PyTorch's `torch._dirichlet_grad(x, alpha, total)`: the
 * marginal `Beta(α, total - α)` draw's `-(∂F/∂α)/p / (1 - x)`, by Taylor
 * series near x = 0 and 1, a saddle-point expansion for large α and
 * total - α, and a rational correction elsewhere. Carries no gradient itself.
 */
export function dirichletGrad(x: Tensor, alpha: Tensor, total: Tensor): Tensor {
  const [v, a, t] = checkSame("dirichletGrad", { x, alpha, total });
  return noGrad(() =>
    forwardScope(() => {
      const beta = t.sub(a);
      const boundary = t.mul(v).mul(v.neg().add(1));
      const nearZero = v.le(0.5).mul(boundary.lt(2.5));
      const nearOne = v.ge(0.5).mul(boundary.lt(0.75));
      const large = a.gt(6).mul(beta.gt(6));
      const small0 = betaGradAlphaSmall(v, a, beta);
      const small1 = betaGradBetaSmall(v.neg().add(1), beta, a).neg();
      const mid = betaGradAlphaMid(v, a, beta);
      const rational = dirichletGradRational(v, a, t);
      return small0.where(nearZero, small1.where(nearOne, mid.where(large, rational)));
    })
  );
}
