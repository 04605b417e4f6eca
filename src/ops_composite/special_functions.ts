/**
 * The special functions of `torch.special` that need more than one kernel:
 * the error function's relatives (`erfc`, `erfcx`, `erfinv`, `ndtr`,
 * `ndtri`, `logNdtr`), the gamma family (`lgamma`, `digamma`, `polygamma`,
 * `mvlgamma`, the Hurwitz `zeta`), the modified Bessel functions (`i0`,
 * `i0e`, `i1`, `i1e`), `entr`, `xlogy`, `xlog1py`. Each is composed from the
 * core's elementwise kernels (Chebyshev series fitted with mpmath,
 * Stirling's and Euler–Maclaurin series, reflection formulas, Newton
 * steps), so every backend runs it: float32 within PyTorch's float32
 * tolerance (a few ulp on the cpu; closer to the true value than PyTorch's
 * own float32 in places), float64 to 1e-12 relative or better (absolute
 * near a function's zeros), tails, poles and large arguments included.
 * Integer input is computed in float32, as PyTorch promotes it.
 * @module
 */

import { noGrad, record } from "../autograd.ts";
import { getDefaultDtype, isFloat } from "../dtype.ts";
import { forwardScope } from "../storage.ts";
import { horner, scopedRounds } from "./util.ts";
import type { Tensor } from "../tensor.ts";
import { cast, operands, sumTo } from "../ops/elementwise.ts";
import type { TensorLike } from "../ops/util.ts";
import {
  ERFCX,
  I0E_BIG,
  I0E_SMALL,
  I1E_BIG,
  I1E_SMALL,
  LGAMMA1P,
  TEMME_C0,
  TEMME_C1,
  TEMME_C2,
} from "./special_coefficients.ts";
import { GILES_32, GILES_64 } from "./special_giles.ts";
import type { Series } from "./special_coefficients.ts";

const SQRT_PI = Math.sqrt(Math.PI);
const LOG_PI = Math.log(Math.PI);
const SQRT_2PI = Math.sqrt(2 * Math.PI);

/** `x`, or `x` in the default dtype when it is int32 (PyTorch's promotion of these functions). */
export const toFloat = (x: Tensor): Tensor => isFloat(x.dtype) ? x : cast(x, getDefaultDtype());

/**
 * `forward(x)` with no graph and its intermediates freed, recorded with
 * the gradient `grad(g, x, out)` (itself differentiable).
 */
export function elementwise(
  name: string,
  input: Tensor,
  forward: (x: Tensor) => Tensor,
  grad: (g: Tensor, x: Tensor, out: Tensor) => Tensor,
): Tensor {
  const x = toFloat(input);
  const out = noGrad(() => forwardScope(() => forward(x)));
  return record(name, [x], out, ([g]) => [grad(g!, x, out)]);
}

/** Σ c_k T_k(y) by Clenshaw's recurrence, with the coefficients of `x`'s dtype. */
function chebyshev(y: Tensor, series: Series): Tensor {
  const cs = y.dtype === "float64" ? series.f64 : series.f32;
  const y2 = y.mul(2);
  const start = [y.mul(0).add(cs[cs.length - 1]), y.mul(0)];
  const [b1, b2] = scopedRounds(cs.length - 2, start, ([b1, b2], i) => {
    return [y2.mul(b1).sub(b2).add(cs[cs.length - 2 - i]), b1];
  });
  return y.mul(b1).sub(b2).add(cs[0]);
}

/**
 * `exp(sign·x²)` without the rounding of x² (which costs x²·ε relative):
 * x = h + l with h a multiple of 1/64, so h² is exact, and
 * `x² = h² + l·(x + h)`.
 */
function expSquare(x: Tensor, sign: 1 | -1): Tensor {
  const h = x.mul(64).round().div(64);
  const rest = x.sub(h).mul(x.add(h));
  const value = h.square().mul(sign).exp().mul(rest.mul(sign).exp());
  // Beyond 28 the result over/underflows in float64 too; there x·64 may overflow
  // and h²'s overflow meet rest's underflow (inf·0).
  return value.where(x.abs().gt(28).eq(0), sign > 0 ? Infinity : 0);
}

/** erfcx on x >= 0.5 (its Chebyshev series in t = 2/(2 + x), mapped onto [-1, 1]). */
function erfcxRight(x: Tensor): Tensor {
  const t = x.add(2).reciprocal().mul(2);
  return chebyshev(t.mul(2.5).sub(1), ERFCX).mul(t);
}

/** erfc(x) (forward, no graph). */
function erfcForward(x: Tensor): Tensor {
  const right = expSquare(x.clamp(0.5), -1).mul(erfcxRight(x.clamp(0.5)));
  return right.where(x.ge(0.5), x.erf().neg().add(1));
}

/** erfcx(x) (forward, no graph). */
function erfcxForward(x: Tensor): Tensor {
  const left = expSquare(x.clamp(undefined, 0.5), 1).mul(
    x.clamp(undefined, 0.5).erf().neg().add(1),
  );
  return erfcxRight(x.clamp(0.5)).where(x.ge(0.5), left);
}

/**
 * The complementary error function `1 - erf(x)`, as `torch.erfc`, accurate
 * in the right tail (a Chebyshev series of erfcx times `exp(-x²)`) where
 * `1 - erf` would round to 0. Gradient `-2/√π·exp(-x²)`.
 */
export function erfc(x: Tensor): Tensor {
  return elementwise(
    "erfc",
    x,
    erfcForward,
    (g, v) => g.mul(v.square().neg().exp()).mul(-2 / SQRT_PI),
  );
}

/**
 * The scaled complementary error function `exp(x²)·erfc(x)`, as
 * `torch.special.erfcx`: no overflow or underflow for large x (→ 1/(x√π)),
 * +inf below about -9.4 (float32) or -26.6 (float64). Gradient
 * `2x·erfcx(x) - 2/√π`.
 */
export function erfcx(x: Tensor): Tensor {
  return elementwise(
    "erfcx",
    x,
    erfcxForward,
    (g, v, out) => g.mul(v.mul(out).mul(2).sub(2 / SQRT_PI)),
  );
}

/**
 * The standard normal CDF `(1 + erf(x/√2))/2`, as `torch.special.ndtr`
 * (by erfc, so the left tail keeps its relative accuracy). Gradient
 * `exp(-x²/2)/√(2π)`.
 */
export function ndtr(x: Tensor): Tensor {
  return elementwise(
    "ndtr",
    x,
    (v) => erfcForward(v.mul(-Math.SQRT1_2)).mul(0.5),
    (g, v) => g.mul(v.square().mul(-0.5).exp()).div(SQRT_2PI),
  );
}

/** log ndtr(x) (forward, no graph), as PyTorch: by erfcx below -1, by log1p above. */
function logNdtrForward(x: Tensor): Tensor {
  const low = x.clamp(undefined, -1);
  const left = erfcxForward(low.mul(-Math.SQRT1_2)).mul(0.5).log().sub(low.square().mul(0.5));
  const right = erfcForward(x.mul(Math.SQRT1_2)).mul(-0.5).log1p();
  return left.where(x.lt(-1), right);
}

/**
 * `log ndtr(x)`, as `torch.special.log_ndtr`: accurate far into the left
 * tail (≈ -x²/2 there). Gradient `ndtr'(x)/ndtr(x)`, below -1 as
 * `√(2/π)/erfcx(-x/√2)`: ≈ -x far in the tail, where PyTorch's
 * `exp(-x²/2 - log_ndtr(x))/√(2π)` cancels to 0 (float32 below about -3e3).
 */
export function logNdtr(x: Tensor): Tensor {
  return elementwise(
    "logNdtr",
    x,
    logNdtrForward,
    (g, v, out) => {
      // pdf/ndtr; below -1 as √(2/π)/erfcx(-x/√2), which stays ≈ -x in the tail.
      const low = v.clamp(undefined, -1);
      const tail = erfcx(low.mul(-Math.SQRT1_2)).reciprocal().mul(Math.sqrt(2 / Math.PI));
      const middle = v.square().mul(-0.5).sub(out).exp().div(SQRT_2PI);
      // NaN at -inf, as PyTorch.
      return g.mul(tail.where(v.lt(-1), middle).where(v.ne(-Infinity), NaN));
    },
  );
}

/**
 * `erfinv(y)` for |y| < 1 from y and `w = -log((1-y)(1+y))` (given apart,
 * so that {@link ndtri} can pass it exactly): Giles' polynomials.
 */
function gilesErfinv(y: Tensor, w: Tensor): Tensor {
  if (y.dtype === "float64") {
    const [a, b, c] = GILES_64.map(([shift, cs], i) =>
      horner(i === 0 ? w.sub(shift) : w.sqrt().sub(shift), cs)
    );
    return a.where(w.lt(6.25), b.where(w.lt(16), c)).mul(y);
  }
  const p = horner(w.sub(2.5), GILES_32[0]);
  const q = horner(w.clamp(5).sqrt().sub(3), GILES_32[1]);
  return p.where(w.lt(5), q).mul(y);
}

/**
 * The inverse error function on [-1, 1], as `torch.erfinv` (±inf at ±1,
 * NaN outside): Giles' polynomials refined by Newton steps (on erfc near
 * ±1, so the tails keep their relative accuracy; PyTorch's float32 loses
 * some there).
 * Gradient `√π/2·exp(erfinv(y)²)`.
 */
export function erfinv(y: Tensor): Tensor {
  return elementwise(
    "erfinv",
    y,
    (v) => {
      // Giles' fits take |y| < 1; w comes from |y| itself.
      const a = v.abs();
      const inside = a.lt(1);
      const w = a.neg().add(1).mul(a.add(1)).log().neg().where(inside, 1);
      const x = newtonErfc(gilesErfinv(a.where(inside, 0.5), w), a, v.dtype === "float32" ? 2 : 1);
      const signed = x.where(v.ge(0), x.neg());
      return signed.where(a.ne(1), v.mul(Infinity)).where(a.le(1), NaN);
    },
    (g, _v, out) => g.mul(out.square().exp()).mul(SQRT_PI / 2),
  );
}

/** Newton steps for erf(x) = a (a ≥ 0): on erfc beyond 0.5, as 1 - a is exact there. */
function newtonErfc(x: Tensor, a: Tensor, steps: number): Tensor {
  const tail = a.gt(0.5);
  return scopedRounds(steps, [x], ([x]) => {
    const slope = x.square().neg().exp().mul(2 / SQRT_PI);
    const residual = x.erf().sub(a).where(tail.eq(0), a.neg().add(1).sub(erfcForward(x)));
    return [x.sub(residual.div(slope)).where(a.lt(1), x)];
  })[0];
}

/** The w beyond which Giles' fits do not reach; the asymptotic start takes over. */
const GILES_REACH = 36;

/** ndtri (forward, no graph). */
function ndtriForward(p: Tensor): Tensor {
  // q = min(p, 1 - p) (exact); z = ndtri(q) ≤ 0, mirrored at the end.
  const q = p.where(p.lt(0.5), p.neg().add(1));
  const inside = q.gt(0);
  const qs = q.where(inside, 0.25);
  const w = qs.mul(4).mul(qs.neg().add(1)).log().neg();
  const reach = w.lt(GILES_REACH);
  let z = gilesErfinv(qs.mul(2).sub(1), w.where(reach, 1)).mul(Math.SQRT2);
  // Far tails: -log q ≈ z²/2 + log(-z·√(2π)).
  const u = qs.log().mul(-2);
  const start = u.sub(u.sub(Math.log(2 * Math.PI)).mul(2 * Math.PI).log()).sqrt().neg();
  z = z.where(reach, start);
  const steps = p.dtype === "float64" ? 4 : 3;
  const tail = p.dtype === "float64" ? reach.eq(0) : qs.lt(0.25);
  // Newton on log ndtr (concave, so it converges from the asymptotic start).
  [z] = scopedRounds(steps, [z], ([z]) => {
    const logPdf = z.square().mul(-0.5).sub(Math.log(SQRT_2PI));
    const ln = logNdtrForward(z);
    return [z.sub(ln.sub(qs.log()).mul(ln.sub(logPdf).exp())).where(tail, z)];
  });
  const mirrored = z.where(p.lt(0.5), z.neg());
  return mirrored.where(inside, p.sub(0.5).mul(Infinity)).where(p.ge(0).mul(p.le(1)), NaN);
}

/**
 * The inverse of {@link ndtr} on [0, 1], as `torch.special.ndtri` (±inf at
 * 1 and 0, NaN outside): Giles' erfinv with its w computed from p itself
 * (`-log(4p(1-p))`, so tiny p loses nothing to 2p - 1), then Newton steps
 * on log ndtr in the tails, down to the smallest subnormals. Gradient
 * `√(2π)·exp(ndtri(p)²/2)`.
 */
export function ndtri(p: Tensor): Tensor {
  return elementwise(
    "ndtri",
    p,
    ndtriForward,
    (g, _v, out) => g.mul(out.square().mul(0.5).exp()).mul(SQRT_2PI),
  );
}

// ---- the gamma family ----

/** How far lgamma/digamma/polygamma shift x up before the asymptotic series. */
const SHIFT = 8;
const HALF_LOG_2PI = 0.5 * Math.log(2 * Math.PI);

/** `Σ_{k<n} f(x + k)`, each term in a scope of its own. */
function shiftSum(x: Tensor, f: (t: Tensor) => Tensor, n = SHIFT): Tensor {
  return scopedRounds(n - 1, [f(x)], ([s], k) => [s.add(f(x.add(k + 1)))])[0];
}

/** `x - round(x)` in [-0.5, 0.5] (exact): sin(πx) and tan(πx) by it keep their accuracy at large x. */
const reduced = (x: Tensor) => x.sub(x.round());

/**
 * `cot(πx)`, its cosine as `sin(π(1/2 - |r|))` (r = x - round(x)), which is
 * exactly 0 at the half-integers where `cos(π·r)` would leave π's rounding.
 */
function cotPi(x: Tensor): Tensor {
  const r = reduced(x);
  return r.abs().neg().add(0.5).mul(Math.PI).sin().div(r.mul(Math.PI).sin());
}

/** The correction `log Γ(z) - ((z - 1/2)·log z - z + log(2π)/2)` for z ≥ 10.5. */
function stirlingCorrection(z: Tensor): Tensor {
  const r = z.reciprocal();
  const r2 = r.square();
  // 1/(12z) - 1/(360z³) + 1/(1260z⁵) - 1/(1680z⁷) + 1/(1188z⁹)
  return r.mul(
    r2.mul(r2.mul(r2.mul(r2.div(1188).sub(1 / 1680)).add(1 / 1260)).sub(1 / 360)).add(1 / 12),
  );
}

/** Stirling's series of log Γ(z), for z ≥ 10.5 (error below 1e-15 relative). */
function stirling(z: Tensor): Tensor {
  return z.sub(0.5).mul(z.log()).sub(z).add(HALF_LOG_2PI).add(stirlingCorrection(z));
}

/**
 * log Γ(x) on [1/2, 5/2], where it crosses 0 at 1 and 2: `t·S(t)` with S
 * the Chebyshev series of lgamma(1 + t)/t (t = x - 1), and
 * `lgamma(1 + t) + log1p(t)` (t = x - 2) above 3/2.
 */
function lgammaNearZeros(x: Tensor): Tensor {
  const upper = x.ge(1.5);
  const t = x.sub(2).where(upper, x.sub(1)).clamp(-0.5, 0.5);
  const near1 = t.mul(chebyshev(t.mul(2), LGAMMA1P));
  return near1.add(t.log1p()).where(upper, near1);
}

/** Below this, lgamma steps down to [1.5, 2.5) by the recurrence; above, Stirling's series. */
const STIRLING_FROM = 10.5;

/**
 * log Γ(x) for x > 0 without cancellation (Stirling's series after an
 * upward shift would leave log(8!)'s rounding at the zeros 1 and 2): the
 * series on [1/2, 5/2]; below 1/2 by `lgamma(x + 1) - log x`; up to 10.5 by
 * the recurrence down to [3/2, 5/2) (`+ log((x-1)…(x-m))`, m ≤ 9);
 * Stirling's series beyond.
 */
function lgammaPositive(x: Tensor): Tensor {
  const small = x.lt(0.5);
  const base = x.add(1).where(small, x).clamp(0.5, STIRLING_FROM);
  const steps = base.sub(1.5).floor().clamp(0);
  let product = base.mul(0).add(1);
  for (let k = 1; k < STIRLING_FROM - 1.5; k++) {
    product = product.mul(base.sub(k).where(steps.ge(k), 1));
  }
  const middle = lgammaNearZeros(base.sub(steps)).add(product.log());
  const low = middle.sub(x.where(small, 1).log());
  const high = stirling(x.clamp(STIRLING_FROM));
  return low.where(small, middle.where(x.lt(STIRLING_FROM), high));
}

/** lgamma (forward, no graph): reflection `log(π/|sin πx|) - lgamma(1 - x)` below 0. */
function lgammaForward(x: Tensor): Tensor {
  const negative = x.lt(0);
  const a = x.neg().add(1).where(negative, x);
  const positive = lgammaPositive(a);
  const r = reduced(x);
  const sine = r.mul(Math.PI).sin().abs();
  // log(π/|sin πr|), as -log|r| where πr is exact to float precision (and may be subnormal).
  const tiny = r.abs().lt(1e-20);
  const logPiOverSine = sine.log().neg().add(LOG_PI).where(tiny.eq(0), r.abs().log().neg());
  const reflected = logPiOverSine.sub(positive);
  const out = reflected.where(negative, positive);
  // Poles (0 and the negative integers) and ±inf give +inf; NaN stays.
  return out.where(x.abs().ne(Infinity).mul(r.ne(0).add(x.gt(0))), Infinity);
}

/**
 * `log|Γ(x)|`, as `torch.lgamma` (`torch.special.gammaln`): Stirling's
 * series after the recurrence for x > 0, the reflection formula below 0;
 * +inf at 0, the negative integers and ±inf. Gradient `digamma(x)`.
 */
export function lgamma(x: Tensor): Tensor {
  return elementwise("lgamma", x, lgammaForward, (g, v) => g.mul(digamma(v)));
}

/** ψ(x) for x > 0 (and x = ±0: the recurrence's 1/x gives ∓inf). */
function digammaPositive(x: Tensor): Tensor {
  const z = x.add(SHIFT);
  const r2 = z.reciprocal().square();
  // log z - 1/(2z) - 1/(12z²) + 1/(120z⁴) - 1/(252z⁶) + 1/(240z⁸) - 1/(132z¹⁰)
  const series = r2.mul(
    r2.mul(r2.mul(r2.mul(r2.div(-132).add(1 / 240)).sub(1 / 252)).add(1 / 120)).sub(1 / 12),
  );
  const asym = z.log().sub(z.reciprocal().mul(0.5)).add(series);
  return asym.sub(shiftSum(x, (t) => t.reciprocal()));
}

/** digamma (forward, no graph): reflection `ψ(1 - x) - π/tan(πx)` below 0. */
function digammaForward(x: Tensor): Tensor {
  const negative = x.lt(0);
  const a = x.neg().add(1).where(negative, x);
  const positive = digammaPositive(a);
  const reflected = positive.sub(cotPi(x).mul(Math.PI));
  const out = reflected.where(negative, positive);
  // Negative integers and -inf give NaN, as PyTorch (0 gives -inf, -0 +inf).
  return out.where(negative.mul(reduced(x).eq(0).add(x.eq(-Infinity))).eq(0), NaN);
}

/**
 * The digamma function `ψ(x) = d/dx log Γ(x)`, as `torch.digamma`
 * (`torch.special.psi`): -inf at 0, +inf at -0, NaN at the negative
 * integers and -inf, as PyTorch. Gradient `polygamma(1, x)`.
 */
export function digamma(x: Tensor): Tensor {
  return elementwise("digamma", x, digammaForward, (g, v) => g.mul(polygamma(1, v)));
}

/** Bernoulli numbers B₂ … B₁₆ of the Euler–Maclaurin tail. */
const BERNOULLI = [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510];

const factorial = (n: number) => {
  let f = 1;
  for (let k = 2; k <= n; k++) f *= k;
  return f;
};

/**
 * `(c/t)^s` for an integer s ≥ 1 by squaring c/t: a GPU's pow (exp2 of log2)
 * loses about |s·log2 t| ulp (20-40 at t = 1e-6), this at most a few.
 */
function reciprocalPower(t: Tensor, s: number, c: number): Tensor {
  let base = c === 1 ? t.reciprocal() : t.reciprocal().mul(c);
  let result: Tensor | undefined;
  for (let n = s; n > 0; n >>= 1) {
    if (n & 1) result = result ? result.mul(base) : base;
    if (n > 1) base = base.square();
  }
  return result!;
}

/**
 * `c^s·Σ_{k≥0} (x + k)^-s` for x > 0 and an integer s ≥ 2 (Euler–Maclaurin
 * after a shift); c keeps the terms' powers in float32's range (polygamma's
 * n! = c^s·…: (x + k)^-21 underflows at x = 150, n!·(x + k)^-21 does not).
 */
function hurwitzPositive(x: Tensor, s: number, c = 1): Tensor {
  const shift = SHIFT + s;
  const z = x.add(shift);
  const head = shiftSum(x, (t) => reciprocalPower(t, s, c), shift);
  // z^(1-s)/(s-1) + z^-s/2 + Σ_j B_2j/(2j)!·s(s+1)…(s+2j-2)·z^(-s-2j+1)
  const zs = reciprocalPower(z, s, c);
  let tail = zs.mul(z).div(s - 1).add(zs.mul(0.5));
  const r2 = z.reciprocal().square();
  let term = zs.mul(z.reciprocal());
  let rising = s;
  for (let j = 1; j <= BERNOULLI.length; j++) {
    tail = tail.add(term.mul(BERNOULLI[j - 1] * rising / factorial(2 * j)));
    term = term.mul(r2);
    rising *= (s + 2 * j - 1) * (s + 2 * j);
  }
  return head.add(tail);
}

/** The coefficients of P_n (lowest first), where dⁿ/dxⁿ cot(πx) = πⁿ·P_n(cot πx). */
function cotDerivative(n: number): number[] {
  let p = [0, 1];
  for (let k = 0; k < n; k++) {
    // P' then times -(1 + c²).
    const d = p.slice(1).map((c, i) => c * (i + 1));
    const next = new Array(d.length + 2).fill(0);
    d.forEach((c, i) => {
      next[i] -= c;
      next[i + 2] -= c;
    });
    p = next;
  }
  return p;
}

/** polygamma(n, x) for n ≥ 1 (forward, no graph). */
function polygammaForward(n: number, x: Tensor): Tensor {
  const negative = x.lt(0);
  const a = x.neg().add(1).where(negative, x);
  const sign = n % 2 === 1 ? 1 : -1;
  // n! = c^(n+1)·rest, c a float32 number (exact in the kernels), rest ≈ 1.
  const c = Math.fround(factorial(n) ** (1 / (n + 1)));
  const positive = hurwitzPositive(a, n + 1, c).mul(sign * factorial(n) / c ** (n + 1));
  // ψ⁽ⁿ⁾(x) = (-1)ⁿ ψ⁽ⁿ⁾(1 - x) - π^(n+1) P_n(cot πx)
  const p = horner(cotPi(x), cotDerivative(n).reverse());
  const reflected = positive.mul(n % 2 === 0 ? 1 : -1).sub(p.mul(Math.PI ** (n + 1)));
  let out = reflected.where(negative, positive);
  // The poles (0 and the negative integers) as PyTorch: (-1)^(n+1)·inf; -inf
  // likewise for n ≥ 2 and NaN for n = 1; +inf gives 0 (n = 1) or NaN.
  const pole = x.le(0).mul(reduced(x).eq(0));
  out = out.where(pole.eq(0), sign * Infinity);
  out = out.where(x.ne(-Infinity), n === 1 ? NaN : sign * Infinity);
  return out.where(x.ne(Infinity), n === 1 ? 0 : NaN);
}

/**
 * The n-th derivative of the digamma function, as `torch.polygamma(n, x)`
 * (`torch.special.polygamma`): n = 0 is {@link digamma}; for n ≥ 1 the
 * Hurwitz series `(-1)^(n+1)·n!·Σ (x+k)^-(n+1)` (Euler–Maclaurin after a
 * shift), the reflection formula for x < 0. At the poles: +inf for n = 1,
 * `(-1)^(n+1)·inf` otherwise (PyTorch's float32 trigamma gives a large
 * finite number at the negative integers instead). Gradient
 * `polygamma(n + 1, x)`.
 */
export function polygamma(n: number, x: Tensor): Tensor {
  if (!Number.isInteger(n) || n < 0) {
    throw new RangeError(`polygamma: n must be a non-negative integer, got ${n}`);
  }
  if (n === 0) return digamma(x);
  return elementwise(
    "polygamma",
    x,
    (v) => polygammaForward(n, v),
    (g, v) => g.mul(polygamma(n + 1, v)),
  );
}

/**
 * The multivariate log-gamma function of dimension `p`, as
 * `torch.mvlgamma(x, p)` (`torch.special.multigammaln`):
 * `Σ_{j<p} lgamma(x - j/2) + p(p-1)/4·log π`. Like PyTorch 1.13 it does
 * not check `x > (p-1)/2`.
 */
export function mvlgamma(x: Tensor, p: number): Tensor {
  if (!Number.isInteger(p) || p < 1) {
    throw new RangeError(`mvlgamma: p must be an integer >= 1, got ${p}`);
  }
  const v = toFloat(x);
  return forwardScope(() => {
    let sum = lgamma(v);
    for (let j = 1; j < p; j++) sum = sum.add(lgamma(v.sub(j / 2)));
    return sum.add(p * (p - 1) / 4 * LOG_PI);
  });
}

/**
 * `Σ_{k≥0} (q + k)^-s` for q > 0 and real s > 1 (tensors, broadcast):
 * Euler–Maclaurin after a shift of 9, as Cephes.
 */
function hurwitzReal(s: Tensor, q: Tensor): Tensor {
  const shift = 9;
  const z = q.add(shift);
  const power = (t: Tensor) => t.pow(s.neg());
  const [head] = scopedRounds(shift - 1, [power(q)], ([h], k) => [h.add(power(q.add(k + 1)))]);
  const zs = power(z);
  const r2 = z.reciprocal().square();
  const start = [zs.mul(z).div(s.sub(1)).add(zs.mul(0.5)), zs.div(z).mul(s)];
  const [tail] = scopedRounds(BERNOULLI.length, start, ([tail, term], i) => {
    const j = i + 1;
    // The rising factorial s(s+1)…(s+2j) and one more z^-2.
    const next = term.mul(s.add(2 * j - 1)).mul(s.add(2 * j)).mul(r2);
    return [tail.add(term.mul(BERNOULLI[j - 1] / factorial(2 * j))), next];
  });
  return head.add(tail);
}

/**
 * The Hurwitz zeta function `Σ_{k≥0} (q + k)^-s`, as
 * `torch.special.zeta(s, q)`: tensors or numbers, broadcast, float (int32
 * gives float32). As PyTorch (Cephes): +inf at s = 1 and at q a
 * non-positive integer, NaN for s < 1, for q < 0 with s not an integer,
 * and at q = +inf. For q < 0 (s an integer) it uses
 * `ζ(s, q) = ζ(s, f) + (-1)^s·(ζ(s, 1 - f) - ζ(s, 1 - q))`, f = q - ⌊q⌋,
 * so any q works without a loop of data-dependent length. No gradient
 * (PyTorch has none either: backward raises).
 */
export function zeta(input: TensorLike, other: TensorLike): Tensor {
  const [a, b] = operands("zeta", input, other);
  const s = toFloat(a);
  const q = b.dtype === s.dtype ? b : cast(b, s.dtype);
  const out = noGrad(() =>
    forwardScope(() => {
      const positive = (t: Tensor) => hurwitzReal(s, t.where(t.gt(0), 1));
      const f = q.sub(q.floor());
      const even = s.div(2).floor().mul(2).eq(s);
      const sign = even.mul(2).sub(1);
      const negative = positive(f).add(
        sign.mul(positive(f.neg().add(1)).sub(positive(q.neg().add(1)))),
      );
      let value = positive(q).where(q.gt(0), negative);
      const integerS = s.floor().eq(s);
      value = value.where(q.gt(0).add(integerS).gt(0), NaN);
      value = value.where(q.gt(0).add(f.ne(0)).gt(0), Infinity);
      value = value.where(q.ne(Infinity), NaN);
      value = value.where(s.ne(1), Infinity).where(s.ge(1), NaN);
      return value.where(s.eq(s).mul(q.eq(q)), NaN);
    })
  );
  return record("zeta", [s, q], out, () => {
    throw new Error("zeta: the derivative is not implemented (as in PyTorch)");
  });
}

/** Above this `a`, the incomplete gamma functions use Temme's uniform expansion. */
const TEMME_FROM = 200;

/**
 * `log(x^a·e^-x/Γ(a))`: directly for small a, and for a ≥ 10.5 as
 * `a·(log1p(d) - d) + log(a/2π)/2 - corr(a)` (d = x/a - 1), which keeps
 * the cancellation of `a·log x - x - lgamma(a)` out.
 */
function logGammaDensity(a: Tensor, x: Tensor): Tensor {
  const direct = a.mul(x.log()).sub(x).sub(lgammaForward(a));
  const big = a.clamp(STIRLING_FROM);
  const d = x.div(big).sub(1);
  const scaled = big.mul(d.log1p().sub(d)).add(big.div(2 * Math.PI).log().mul(0.5))
    .sub(stirlingCorrection(big));
  return scaled.where(a.ge(STIRLING_FROM), direct);
}

/**
 * [P(a, x), Q(a, x)] (forward, no graph) for a > 0, x > 0: the series of
 * P below x = a + 1 and the continued fraction of Q (modified Lentz) above,
 * each with a fixed number of terms that converges for a ≤ 200; Temme's
 * uniform expansion (C₀, C₁, C₂) beyond.
 */
function incompleteGamma(a: Tensor, x: Tensor): [Tensor, Tensor] {
  const f64 = a.dtype === "float64";
  const steps = f64 ? 120 : 80;
  const tiny = f64 ? 1e-300 : 1e-30;
  const density = logGammaDensity(a, x).exp();
  // P = density/a · Σ_n x^n/((a+1)…(a+n))
  // Each term in a scope of its own (the state it replaces freed): kept to the end, the two
  // loops held 1,950 arrays of the input's size at once.
  const one = a.mul(0).add(1);
  const [, sum] = scopedRounds(steps - 1, [one, one], ([term, sum], i) => {
    const next = term.mul(x).div(a.add(i + 1));
    return [next, sum.add(next)];
  });
  const seriesP = density.div(a).mul(sum);
  // Q = density · 1/(x+1-a- 1(1-a)/(x+3-a- 2(2-a)/(x+5-a- …)))
  const b0 = x.add(1).sub(a);
  const lentz = [b0, b0.mul(0).add(1 / tiny), b0.reciprocal(), b0.reciprocal()];
  const [, , , h] = scopedRounds(steps - 1, lentz, ([before, c0, d0, h], k) => {
    const i = k + 1;
    const an = a.sub(i).mul(i);
    const b = before.add(2);
    const dn = d0.mul(an).add(b);
    const d = dn.where(dn.ne(0), tiny).reciprocal();
    const cn = an.div(c0).add(b);
    const c = cn.where(cn.ne(0), tiny);
    return [b, c, d, h.mul(d).mul(c)];
  });
  const fractionQ = density.mul(h);
  const bySeries = x.lt(a.add(1));
  let p = seriesP.where(bySeries, fractionQ.neg().add(1));
  let q = seriesP.neg().add(1).where(bySeries, fractionQ);
  // Temme: Q = erfc(η√(a/2))/2 + e^(-aη²/2)/√(2πa)·(C₀(η) + C₁(η)/a + C₂(η)/a²).
  const big = a.clamp(TEMME_FROM);
  const dl = x.div(big).sub(1);
  const half = dl.log1p().sub(dl);
  const eta = half.mul(-2).clamp(0).sqrt().where(dl.ge(0), half.mul(-2).clamp(0).sqrt().neg());
  const near = eta.abs().le(1);
  const e = eta.where(near, 1);
  const m = dl.where(near, 1);
  const c0 = chebyshev(eta.clamp(-1, 1), TEMME_C0).where(near, m.reciprocal().sub(e.reciprocal()));
  const c1 = chebyshev(eta.clamp(-1, 1), TEMME_C1).where(
    near,
    e.pow(-3).sub(m.pow(-3)).sub(m.pow(-2)).sub(m.mul(12).reciprocal()),
  );
  const c2 = chebyshev(eta.clamp(-1, 1), TEMME_C2).where(
    near,
    e.pow(-5).mul(-3).add(m.pow(-5).mul(3)).add(m.pow(-4).mul(5)).add(m.pow(-3).mul(25 / 12))
      .add(m.pow(-2).div(12)).add(m.mul(288).reciprocal()),
  );
  const series = c0.add(c1.add(c2.div(big)).div(big));
  const r = big.mul(half).exp().div(big.mul(2 * Math.PI).sqrt()).mul(series);
  const y = eta.mul(big.mul(0.5).sqrt());
  const temme = a.gt(TEMME_FROM);
  p = erfcForward(y.neg()).mul(0.5).sub(r).where(temme, p);
  q = erfcForward(y).mul(0.5).add(r).where(temme, q);
  // 1 - (the other) may round a hair outside [0, 1].
  return [p.clamp(0, 1), q.clamp(0, 1)];
}

/** gammainc or gammaincc (`upper`), with PyTorch's values at the edges and its gradient. */
function regularizedGamma(
  op: string,
  input: TensorLike,
  other: TensorLike,
  upper: boolean,
): Tensor {
  const [ta, tx] = operands(op, input, other);
  const a = toFloat(ta);
  const x = tx.dtype === a.dtype ? tx : cast(tx, a.dtype);
  const out = noGrad(() =>
    forwardScope(() => {
      const inside = a.gt(0).mul(x.gt(0)).mul(a.lt(Infinity)).mul(x.lt(Infinity));
      const [p, q] = incompleteGamma(a.where(inside, 1), x.where(inside, 1));
      // Cephes' edges: x = 0 gives P = 0; a = 0 (x > 0) and x = inf give P = 1;
      // a = inf gives P = 0 (NaN beside x = inf); a, x < 0, a = x = 0 and NaN give NaN.
      // Cephes' tests in its order (the first that holds wins, so they apply last
      // first): a or x < 0 NaN; a = 0: x > 0 gives P = 1, else NaN; x = 0 gives
      // P = 0; a = inf: P = 0 (NaN at x = inf); x = inf: P = 1; else NaN stays NaN.
      const [zero, one] = upper ? [1, 0] : [0, 1];
      let value = (upper ? q : p).where(a.eq(a).mul(x.eq(x)), NaN);
      value = value.where(x.ne(Infinity), one);
      const infA = a.eq(Infinity);
      value = value.where(infA.eq(0), zero).where(infA.mul(x.eq(Infinity)).eq(0), NaN);
      value = value.where(x.ne(0), zero);
      const zeroA = a.eq(0);
      value = value.where(zeroA.eq(0), one).where(zeroA.mul(x.gt(0).eq(0)).eq(0), NaN);
      return value.where(a.lt(0).add(x.lt(0)).eq(0), NaN);
    })
  );
  return record(op, [a, x], out, ([g]) => {
    if (a.requiresGrad) {
      throw new Error(
        `${op}: the derivative with respect to the first argument (a) is not implemented (as in PyTorch)`,
      );
    }
    // x^(a-1)·e^-x/Γ(a); for a ≥ 10.5 by logGammaDensity, without the cancellation
    // of a·log x - x - lgamma(a) (which costs float32 a·log(x)·ε, 0.1% at a = 2500).
    const direct = a.sub(1).mul(x.log()).sub(x).sub(lgamma(a)).exp();
    const scaled = logGammaDensity(a, x).sub(x.where(x.gt(0), 1).log()).exp();
    // The edges (x = 0, x or a infinite) as PyTorch's formula gives them.
    const finite = x.gt(0).mul(x.lt(Infinity)).mul(a.lt(Infinity));
    const density = scaled.where(a.ge(STIRLING_FROM).mul(finite), direct);
    return [null, sumTo(g!.mul(upper ? density.neg() : density), x.shape)];
  });
}

/**
 * The regularized lower incomplete gamma function
 * `P(a, x) = γ(a, x)/Γ(a)`, as `torch.special.gammainc(a, x)`: tensors or
 * numbers, broadcast, float (int32 gives float32). Series or continued
 * fraction up to a = 200, Temme's uniform expansion beyond; PyTorch's
 * (Cephes') values at the edges (P(a, 0) = 0, P(0, x > 0) = 1, NaN for
 * negative arguments). Gradient in x `x^(a-1)·e^-x/Γ(a)`; in a none (an
 * error, as PyTorch).
 */
export function gammainc(input: TensorLike, other: TensorLike): Tensor {
  return regularizedGamma("gammainc", input, other, false);
}

/**
 * The regularized upper incomplete gamma function `Q(a, x) = 1 - P(a, x)`,
 * as `torch.special.gammaincc(a, x)`; see {@link gammainc}. Gradient in x
 * `-x^(a-1)·e^-x/Γ(a)`.
 */
export function gammaincc(input: TensorLike, other: TensorLike): Tensor {
  return regularizedGamma("gammaincc", input, other, true);
}

// ---- modified Bessel functions ----

/**
 * i0e or i1e at a = |x| (forward): a Chebyshev series on [0, 8] (times
 * `factor` there), one in 16/a - 1 beyond.
 */
function besselScaled(a: Tensor, small: Series, big: Series, factor?: Tensor): Tensor {
  const series = chebyshev(a.clamp(undefined, 8).div(4).sub(1), small);
  const near = factor ? series.mul(factor) : series;
  const far = a.clamp(8);
  const outer = chebyshev(far.reciprocal().mul(16).sub(1), big).div(far.sqrt());
  return near.where(a.le(8), outer);
}

/** `scaled·e^|x|` as `(scaled·e^(|x|/2))·e^(|x|/2)`: no overflow before the result's own. */
function unscale(scaled: Tensor, x: Tensor): Tensor {
  const h = x.abs().mul(0.5).exp();
  return scaled.mul(h).mul(h);
}

/** i0e (forward). */
const i0eForward = (x: Tensor) => besselScaled(x.abs(), I0E_SMALL, I0E_BIG);
/** i1e (forward): odd; the series on [0, 8] is of i1e(x)/x, for relative accuracy near 0. */
function i1eForward(x: Tensor): Tensor {
  const a = x.abs();
  const v = besselScaled(a, I1E_SMALL, I1E_BIG, a.clamp(undefined, 8));
  return v.where(x.ge(0), v.neg());
}

/**
 * The modified Bessel function of the first kind of order 0, as `torch.i0`
 * (`torch.special.i0`): +inf at ±inf. Gradient `i1(x)`.
 */
export function i0(x: Tensor): Tensor {
  return elementwise(
    "i0",
    x,
    (v) => unscale(i0eForward(v), v),
    (g, v) => g.mul(i1(v)),
  );
}

/** The exponentially scaled `e^-|x|·I₀(x)`, as `torch.special.i0e`. Gradient `i1e(x) - sgn(x)·i0e(x)`. */
export function i0e(x: Tensor): Tensor {
  return elementwise("i0e", x, i0eForward, (g, v, out) => g.mul(i1e(v).sub(v.sign().mul(out))));
}

/**
 * The modified Bessel function of the first kind of order 1, as
 * `torch.special.i1` (±inf at ±inf). Gradient `i0(x) - i1(x)/x` (1/2 at 0).
 */
export function i1(x: Tensor): Tensor {
  return elementwise(
    "i1",
    x,
    (v) => unscale(i1eForward(v), v),
    (g, v) => {
      // 1/2 below 1e-30 (i1(x)/x loses digits on subnormals); PyTorch gives 1/2 at NaN too.
      const nonzero = v.abs().ge(1e-30);
      const safe = v.where(nonzero, 1);
      return g.mul(i0(v).sub(i1(v).div(safe)).where(nonzero, 0.5));
    },
  );
}

/**
 * The exponentially scaled `e^-|x|·I₁(x)`, as `torch.special.i1e`.
 * Gradient `i0e(x) - i1e(x)·(sgn(x) + 1/x)` (1/2 at 0).
 */
export function i1e(x: Tensor): Tensor {
  return elementwise("i1e", x, i1eForward, (g, v) => {
    // 1/2 - |x| + …: 1/2 below 1e-30 (where 1/x may overflow) and at NaN, as i1's.
    const nonzero = v.abs().ge(1e-30);
    const safe = v.where(nonzero, 1);
    const d = i0e(v).sub(i1e(v).mul(v.sign().add(safe.reciprocal())));
    return g.mul(d.where(nonzero, 0.5));
  });
}

// ---- entropy and x·log ----

/**
 * The elementwise entropy `-x·log x`, as `torch.special.entr`: 0 at 0,
 * -inf for x < 0. Gradient PyTorch's `-(1 + log x)` (+inf at 0, NaN below).
 */
export function entr(x: Tensor): Tensor {
  return elementwise(
    "entr",
    x,
    (v) => {
      const positive = v.gt(0);
      const value = v.where(positive, 1).log().mul(v).neg().where(positive, 0);
      return value.where(v.ge(0), -Infinity).where(v.eq(v), NaN);
    },
    (g, v) => g.mul(v.log().add(1).neg()),
  );
}

/**
 * `x·f(y)` that is 0 where x is 0 (unless y is NaN), with PyTorch's
 * gradients: `f(y)` in x (0 where x is 0 and y ≤ `pole`), `xdf(x, y) = x·f'(y)` in y.
 */
function xTimes(
  op: string,
  input: TensorLike,
  other: TensorLike,
  f: (y: Tensor) => Tensor,
  xdf: (x: Tensor, y: Tensor) => Tensor,
  pole: number,
): Tensor {
  const [a, b] = operands(op, input, other);
  const x = toFloat(a);
  const y = b.dtype === x.dtype ? b : cast(b, x.dtype);
  const times = (u: Tensor, v: Tensor) => u.mul(f(v)).where(u.ne(0).add(v.ne(v)).gt(0), 0);
  const out = noGrad(() => forwardScope(() => times(x, y)));
  return record(op, [x, y], out, ([g]) => [
    x.requiresGrad ? sumTo(g!.mul(f(y)).where(x.eq(0).mul(y.le(pole)).eq(0), 0), x.shape) : null,
    y.requiresGrad ? sumTo(g!.mul(xdf(x, y)), y.shape) : null,
  ]);
}

/**
 * `x·log(y)`, 0 where x is 0 (unless y is NaN), as `torch.xlogy`
 * (`torch.special.xlogy`): broadcast; numbers allowed on either side;
 * int32 computes in float32. Gradients PyTorch's (`log y`, 0 where x is 0
 * and y ≤ 0; `x/y`).
 */
export function xlogy(input: TensorLike, other: TensorLike): Tensor {
  // x/y, not x·(1/y): 1/y overflows on subnormal y (0·inf at x = 0).
  return xTimes("xlogy", input, other, (y) => y.log(), (x, y) => x.div(y), 0);
}

/**
 * `x·log1p(y)`, 0 where x is 0 (unless y is NaN), as
 * `torch.special.xlog1py`; see {@link xlogy}. Gradients `log1p(y)` (0 where
 * x is 0 and y ≤ -1) and `x/(1 + y)`.
 */
export function xlog1py(input: TensorLike, other: TensorLike): Tensor {
  return xTimes("xlog1py", input, other, (y) => y.log1p(), (x, y) => x.div(y.add(1)), -1);
}
