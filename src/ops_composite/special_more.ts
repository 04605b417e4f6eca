/**
 * The Bessel, Airy and orthogonal-polynomial functions of `torch.special`
 * that PyTorch 1.13 added (`bessel_j0` … `legendre_polynomial_p`), composed
 * from the core's elementwise kernels so every backend runs them. Each
 * follows PyTorch's own algorithm (Cephes' rational and Chebyshev
 * approximations, the three-term recurrences, the trigonometric closed
 * forms of the Chebyshev polynomials inside (-1, 1)) step for step, so
 * float32 and float64 agree with PyTorch to a few ulp, its edge values
 * (NaN, ±inf, poles, `n < 0`) included. Like PyTorch 1.13, none of them is
 * differentiable: the output never requires grad, so `backward` through
 * one raises. Integer input is computed in float32, as PyTorch promotes it.
 * @module
 */

import { noGrad } from "../autograd.ts";
import { getDefaultDtype, isFloat } from "../dtype.ts";
import { forwardScope } from "../storage.ts";
import type { Tensor } from "../tensor.ts";
import { cast, operands } from "../ops/elementwise.ts";
import { full } from "../ops/factory.ts";
import { i0, i1, toFloat } from "./special_functions.ts";
import { scopedRounds } from "./util.ts";
import {
  AIRY_AD,
  AIRY_AFD,
  AIRY_AFN,
  AIRY_AGD,
  AIRY_AGN,
  AIRY_AN,
  J0_PP,
  J0_PQ,
  J0_QP,
  J0_QQ,
  J0_RP,
  J0_RQ,
  J1_PP,
  J1_PQ,
  J1_QP,
  J1_QQ,
  J1_RP,
  J1_RQ,
  K0_A,
  K0_B,
  K1_A,
  K1_B,
  Y0_YP,
  Y0_YQ,
  Y1_YP,
  Y1_YQ,
} from "./special_more_coefficients.ts";

const TWO_OVER_PI = 0.636619772367581343075535053490057448;
const SQRT_TWO_OVER_PI = 0.797884560802865355879892119868763737;
const PI_OVER_4 = 0.785398163397448309615660845819875721;
const THREE_PI_OVER_4 = 2.356194490192344928846982537459627163;

/** `c` in the shape, dtype and device of `t` (`t·0 + c` would be NaN where t is infinite). */
const fill = (t: Tensor, c: number): Tensor =>
  full([...t.shape], c, { dtype: t.dtype, device: t.device });

/** `c/t`, rounded once as PyTorch's `c / x` (not `(1/t)·c`). */
const over = (c: number, t: Tensor): Tensor => fill(t, c).div(t);

/** `atZero` where x is 0, NaN where it is below (the poles of Y and K). */
const pole = (x: Tensor, atZero: number): Tensor => fill(x, atZero).where(x.eq(0), NaN);

/**
 * `forward(x)` (x in float) with no graph and its intermediates freed:
 * PyTorch 1.13 defines no gradient for these functions.
 */
function unary(input: Tensor, forward: (x: Tensor) => Tensor): Tensor {
  const x = toFloat(input);
  return noGrad(() => forwardScope(() => forward(x)));
}

/** Cephes' polevl: Horner's rule from 0 over `cs` (highest power first). */
function polevl(t: Tensor, cs: readonly number[]): Tensor {
  return scopedRounds(cs.length - 1, [fill(t, cs[0])], ([p], i) => [p.mul(t).add(cs[i + 1])])[0];
}

/** Cephes' chbevl as PyTorch writes it: Clenshaw's recurrence in `t` (already 2·y), halved. */
function chbevl(t: Tensor, cs: readonly number[]): Tensor {
  const zero = fill(t, 0);
  // State [a, q, p]: each step's p is the last q, its q the last a.
  const [a, , p] = scopedRounds(cs.length - 1, [fill(t, cs[0]), zero, zero], ([a, q], i) => {
    return [t.mul(a).sub(q).add(cs[i + 1]), a, q];
  });
  return a.sub(p).mul(0.5);
}

/**
 * Hankel's asymptotic form of J or Y (order 0 or 1) for x > 5:
 * `(P·trig(x - phase) ∓ 5/x·Q·trig'(x - phase))·√(2/π)/√x`, with P and Q
 * Cephes' rational functions of `w` (25/x², computed as PyTorch does per order).
 */
function hankel(
  x: Tensor,
  w: Tensor,
  coefficients: readonly (readonly number[])[],
  phase: number,
  kind: "j" | "y",
): Tensor {
  const [pp, pq, qp, qq] = coefficients.map((cs) => polevl(w, cs));
  const p = pp.div(pq);
  const q = over(5, x).mul(qp.div(qq));
  const shifted = x.sub(phase);
  const value = kind === "j"
    ? p.mul(shifted.cos()).sub(q.mul(shifted.sin()))
    : p.mul(shifted.sin()).add(q.mul(shifted.cos()));
  return value.mul(SQRT_TWO_OVER_PI).div(x.sqrt());
}

/** J₀ (forward). */
function j0Forward(x: Tensor): Tensor {
  const a = x.abs();
  const s = a.clamp(undefined, 5);
  const s2 = s.mul(s);
  const near = s2.sub(5.78318596294678452118e+00).mul(s2.sub(3.04712623436620863991e+01))
    .mul(polevl(s2, J0_RP)).div(polevl(s2, J0_RQ));
  const tiny = s2.div(4).neg().add(1);
  const b = a.clamp(5);
  const far = hankel(b, over(25, b.mul(b)), [J0_PP, J0_PQ, J0_QP, J0_QQ], PI_OVER_4, "j");
  return tiny.where(a.lt(0.00001), near).where(a.le(5), far).where(x.eq(x), NaN);
}

/** J₁ (forward): odd, from |x|. */
function j1Forward(x: Tensor): Tensor {
  const a = x.abs();
  const s = a.clamp(undefined, 5);
  const s2 = s.mul(s);
  const near = polevl(s2, J1_RP).div(polevl(s2, J1_RQ)).mul(s)
    .mul(s2.sub(1.46819706421238932572e+01)).mul(s2.sub(4.92184563216946036703e+01));
  const b = a.clamp(5);
  const r = over(5, b);
  const far = hankel(b, r.mul(r), [J1_PP, J1_PQ, J1_QP, J1_QQ], THREE_PI_OVER_4, "j");
  const value = near.where(a.le(5), far);
  // At ±0 PyTorch's x·(…) keeps x's sign: J₁(-0) = -0.
  return value.where(x.ge(0), value.neg()).where(x.ne(0), x).where(x.eq(x), NaN);
}

/** Y₀ (forward): -inf at 0, NaN below. */
function y0Forward(x: Tensor): Tensor {
  const s = x.where(x.gt(0), 1).clamp(undefined, 5);
  const s2 = s.mul(s);
  const near = polevl(s2, Y0_YP).div(polevl(s2, Y0_YQ))
    .add(s.log().mul(TWO_OVER_PI).mul(j0Forward(s)));
  const b = x.clamp(5);
  const far = hankel(b, over(25, b.mul(b)), [J0_PP, J0_PQ, J0_QP, J0_QQ], PI_OVER_4, "y");
  return near.where(x.gt(0), pole(x, -Infinity))
    .where(x.le(5), far).where(x.eq(x), NaN);
}

/** Y₁ (forward): -inf at 0, NaN below. */
function y1Forward(x: Tensor): Tensor {
  const s = x.where(x.gt(0), 1).clamp(undefined, 5);
  const s2 = s.mul(s);
  const near = s.mul(polevl(s2, Y1_YP).div(polevl(s2, Y1_YQ)))
    .add(j1Forward(s).mul(s.log()).sub(over(1, s)).mul(TWO_OVER_PI));
  const b = x.clamp(5);
  const r = over(5, b);
  const far = hankel(b, r.mul(r), [J1_PP, J1_PQ, J1_QP, J1_QQ], THREE_PI_OVER_4, "y");
  return near.where(x.gt(0), pole(x, -Infinity))
    .where(x.le(5), far).where(x.eq(x), NaN);
}

/**
 * K₀ or K₁, plain or scaled by eˣ (forward): Cephes' Chebyshev series in
 * x² - 2 with the `log(x/2)·I` term up to 2, in 8/x - 2 beyond; +inf at
 * 0, NaN below, as PyTorch.
 */
function kForward(x: Tensor, order: 0 | 1, scaled: boolean): Tensor {
  const s = x.where(x.gt(0), 1).clamp(undefined, 2);
  const series = chbevl(s.mul(s).sub(2), order === 0 ? K0_A : K1_A);
  // PyTorch's K₀ takes log(0.5·x) in double, exact for float32's subnormals too.
  const half = s.mul(0.5).log();
  const logHalf = order === 0 && !scaled && s.dtype === "float32"
    ? half.where(s.ge(2 ** -125), s.log().sub(Math.LN2))
    : half;
  let near = order === 0 ? series.sub(logHalf.mul(i0(s))) : logHalf.mul(i1(s)).add(series.div(s));
  if (scaled) near = near.mul(s.exp());
  const b = x.clamp(2);
  const outer = chbevl(b.reciprocal().mul(8).sub(2), order === 0 ? K0_B : K1_B).div(b.sqrt());
  const far = scaled ? outer : b.neg().exp().mul(outer);
  return near.where(x.le(2), far).where(x.gt(0), pole(x, Infinity)).where(x.eq(x), NaN);
}

/**
 * The Bessel function of the first kind of order 0, as
 * `torch.special.bessel_j0` (Cephes' rational approximation up to 5,
 * Hankel's asymptotic form beyond; NaN at ±inf, as PyTorch). Not
 * differentiable (as in PyTorch 1.13).
 */
export function besselJ0(x: Tensor): Tensor {
  return unary(x, j0Forward);
}

/**
 * The Bessel function of the first kind of order 1, as
 * `torch.special.bessel_j1` (NaN at ±inf, as PyTorch). Not differentiable.
 */
export function besselJ1(x: Tensor): Tensor {
  return unary(x, j1Forward);
}

/**
 * The Bessel function of the second kind of order 0, as
 * `torch.special.bessel_y0`: -inf at 0, NaN for x < 0 and at ±inf, as
 * PyTorch. Not differentiable.
 */
export function besselY0(x: Tensor): Tensor {
  return unary(x, y0Forward);
}

/**
 * The Bessel function of the second kind of order 1, as
 * `torch.special.bessel_y1`: -inf at 0, NaN for x < 0 and at ±inf. Not
 * differentiable.
 */
export function besselY1(x: Tensor): Tensor {
  return unary(x, y1Forward);
}

/**
 * The largest |x| whose e^|x| is finite in each float dtype (ln of its
 * maximum, as the float32 or float64 comparison sees it).
 */
const EXP_LIMIT = { float32: 88.72283172607422, float64: 709.782712893384 };

/**
 * PyTorch's modified_bessel_i* compute e^|x|·series/√|x|: ±inf (the sign
 * of `value`) once e^|x| overflows, NaN at ±inf (inf/inf).
 */
function overflowAsTorch(x: Tensor, value: Tensor): Tensor {
  const limit = x.dtype === "float64" ? EXP_LIMIT.float64 : EXP_LIMIT.float32;
  const a = x.abs();
  const inf = fill(x, Infinity).where(value.ge(0), -Infinity);
  return inf.where(a.gt(limit), value).where(a.ne(Infinity), NaN);
}

/**
 * The modified Bessel function of the first kind of order 0, as
 * `torch.special.modified_bessel_i0` (the values of `torch.special.i0`,
 * but +inf once e^|x| overflows, past 88.72 in float32, and NaN at ±inf,
 * as PyTorch gives there). Not differentiable (use `special.i0` for a
 * gradient).
 */
export function modifiedBesselI0(x: Tensor): Tensor {
  return unary(x, (v) => overflowAsTorch(v, i0(v)));
}

/**
 * The modified Bessel function of the first kind of order 1, as
 * `torch.special.modified_bessel_i1` (±inf once e^|x| overflows, NaN at
 * ±inf, as PyTorch). Not differentiable (use `special.i1` for a gradient).
 */
export function modifiedBesselI1(x: Tensor): Tensor {
  return unary(x, (v) => overflowAsTorch(v, i1(v)));
}

/**
 * The modified Bessel function of the second kind of order 0, as
 * `torch.special.modified_bessel_k0`: +inf at 0, NaN for x < 0, 0 at +inf.
 * Not differentiable.
 */
export function modifiedBesselK0(x: Tensor): Tensor {
  return unary(x, (v) => kForward(v, 0, false));
}

/**
 * The modified Bessel function of the second kind of order 1, as
 * `torch.special.modified_bessel_k1`: +inf at 0, NaN for x < 0, 0 at +inf.
 * Not differentiable.
 */
export function modifiedBesselK1(x: Tensor): Tensor {
  return unary(x, (v) => kForward(v, 1, false));
}

/**
 * `eˣ·K₀(x)`, as `torch.special.scaled_modified_bessel_k0`: no underflow
 * for large x (→ √(π/2x)); +inf at 0, NaN for x < 0. Not differentiable.
 */
export function scaledModifiedBesselK0(x: Tensor): Tensor {
  return unary(x, (v) => kForward(v, 0, true));
}

/**
 * `eˣ·K₁(x)`, as `torch.special.scaled_modified_bessel_k1`: +inf at 0, NaN
 * for x < 0. Not differentiable.
 */
export function scaledModifiedBesselK1(x: Tensor): Tensor {
  return unary(x, (v) => kForward(v, 1, true));
}

/** The Taylor coefficients of sin(x)/x in x² that PyTorch uses below 1/2. */
const SINC_SERIES = [
  1 / 6227020800,
  -1 / 39916800,
  1 / 362880,
  -1 / 5040,
  1 / 120,
  -1 / 6,
];

/**
 * The spherical Bessel function of the first kind of order 0, `sin(x)/x`,
 * as `torch.special.spherical_bessel_j0` (its Taylor series below 1/2, 0 at
 * ±inf, 1 at 0). Not differentiable.
 */
export function sphericalBesselJ0(x: Tensor): Tensor {
  return unary(x, (v) => {
    const small = v.clamp(-0.5, 0.5);
    const s2 = small.mul(small);
    const series = s2.mul(polevl(s2, SINC_SERIES)).add(1);
    const safe = v.where(v.abs().ge(0.5), 1);
    return series.where(v.abs().lt(0.5), safe.sin().div(safe)).where(v.abs().ne(Infinity), 0)
      .where(v.eq(v), NaN);
  });
}

/** Ai(x) (forward), Cephes' three regions; NaN at ±inf and 0 beyond 103.892, as PyTorch. */
function airyForward(x: Tensor): Tensor {
  // x < -2.09: the asymptotic oscillating form.
  const neg = x.clamp(undefined, -2.09);
  const root = neg.neg().sqrt();
  const zeta = neg.mul(-2).mul(root).div(3);
  const z = zeta.reciprocal();
  const zz = z.mul(z);
  const afn = polevl(zz, AIRY_AFN);
  const afd = polevl(zz, AIRY_AFD);
  const agn = polevl(zz, AIRY_AGN);
  const agd = polevl(zz, AIRY_AGD);
  const t = zeta.add(0.25 * Math.PI);
  const oscillating = over(5.64189583547756286948e-01, root.sqrt()).mul(
    t.sin().mul(zz.mul(afn).div(afd).add(1)).sub(t.cos().mul(z.mul(agn).div(agd))),
  );
  // x >= 2.09: the asymptotic decaying form.
  const pos = x.clamp(2.09);
  const zp = pos.mul(2).mul(pos.sqrt()).div(3);
  const rp = zp.reciprocal();
  const ratio = polevl(rp, AIRY_AN).div(polevl(rp, AIRY_AD));
  const decaying = ratio.mul(5.64189583547756286948e-01)
    .div(pos.sqrt().sqrt().mul(2).mul(zp.exp()));
  // In between: the Maclaurin series f, g, summed (as PyTorch) until a term is below ε.
  const mid = x.clamp(-2.09, 2.09);
  const eps = x.dtype === "float64" ? 2.220446049250313e-16 : 1.1920928955078125e-7;
  const cube = mid.mul(mid).mul(mid);
  let f = fill(mid, 1);
  let g = mid;
  let m = f;
  let n = mid;
  let k = 1;
  let active = fill(mid, 1);
  for (let i = 0; i < (x.dtype === "float64" ? 14 : 10); i++) {
    const on = active.ne(0);
    const m1 = m.mul(cube).div(k + 1);
    const n1 = n.mul(cube).div(k + 2);
    const m2 = m1.div(k + 2);
    const n2 = n1.div(k + 3);
    k += 3;
    f = f.add(m2).where(on, f);
    g = g.add(n2).where(on, g);
    m = m2.where(on, m);
    n = n2.where(on, n);
    active = m.div(f).abs().gt(eps).mul(active);
  }
  const series = f.mul(0.355028053887817239260).sub(g.mul(0.258819403792806798405));
  return oscillating.where(x.lt(-2.09), decaying.where(x.ge(2.09), series))
    .where(x.le(103.892), 0).where(x.abs().ne(Infinity), NaN).where(x.eq(x), NaN);
}

/**
 * The Airy function Ai(x), as `torch.special.airy_ai` (NaN at ±inf and 0
 * beyond 103.892, as PyTorch). Not differentiable.
 */
export function airyAi(x: Tensor): Tensor {
  return unary(x, airyForward);
}

// ---- orthogonal polynomials ----

/**
 * The largest degree the polynomials take: PyTorch loops n times per
 * element in a kernel; here each step of the recurrence is a tensor op.
 */
export const MAX_POLYNOMIAL_DEGREE = 4096;

/** The degree: a number (truncated toward 0, as PyTorch's cast) or a tensor of them. */
interface Degree {
  /** The degrees (x's dtype, truncated; negative for NaN and ±inf). */
  n: Tensor;
  /** The largest degree (the loop's length). */
  steps: number;
  /** Whether every element has the degree `steps` (a number n): no freezing needed. */
  fixed: boolean;
}

/** 2⁶³: degrees from here on (and NaN) are outside int64. */
const INT64_RANGE = 2 ** 63;

/** A polynomial evaluated at x (float) for the degree(s) `d`. */
type Recurrence = (x: Tensor, d: Degree) => Tensor;

/**
 * The degree as a float tensor of x's dtype, truncated toward 0; NaN, ±inf
 * and |n| ≥ 2⁶³ become a negative degree (PyTorch's cast to int64 gives
 * INT64_MIN for them on x86, so its result there is 0).
 */
function degreeTensor(n: Tensor, x: Tensor): Tensor {
  const t = n.dtype === x.dtype ? n : cast(n, x.dtype);
  return t.trunc().where(t.abs().lt(INT64_RANGE), -1);
}

function checkDegree(op: string, steps: number): void {
  if (steps > MAX_POLYNOMIAL_DEGREE) {
    throw new RangeError(
      `${op}: the degree n = ${steps} is above the largest supported, ` +
        `${MAX_POLYNOMIAL_DEGREE} (each step of the recurrence is a tensor op)`,
    );
  }
}

/** The float dtype of the pair (int32 alone gives the default dtype). */
function polynomialOperands(op: string, x: Tensor | number, n: Tensor | number): [Tensor, Tensor] {
  const [a, b] = operands(op, x, n);
  const dtype = isFloat(a.dtype) ? a.dtype : getDefaultDtype();
  return [a.dtype === dtype ? a : cast(a, dtype), b.dtype === dtype ? b : cast(b, dtype)];
}

/** Evaluates `body` with the degree known to be at most `steps`. */
function evaluate(x: Tensor, n: Tensor, steps: number, fixed: boolean, body: Recurrence): Tensor {
  return noGrad(() => forwardScope(() => body(x, { n: degreeTensor(n, x), steps, fixed })));
}

/**
 * The polynomial for a number degree (sync) or a tensor of degrees (async:
 * its largest entry, read back, is the loop's length).
 */
function polynomial(
  op: string,
  x: Tensor | number,
  n: Tensor | number,
  body: Recurrence,
): Tensor | Promise<Tensor> {
  if (typeof n === "number") {
    if (typeof x === "number") {
      throw new TypeError(
        `${op}: expected at least one Tensor operand, got the numbers ${x} and ${n}`,
      );
    }
    const steps = Math.abs(n) < INT64_RANGE ? Math.max(Math.trunc(n), 0) : 0;
    checkDegree(op, steps);
    const [a, b] = polynomialOperands(op, x, n);
    return evaluate(a, b, steps, true, body);
  }
  const [a, b] = polynomialOperands(op, x, n);
  return (async () => {
    const d = noGrad(() => degreeTensor(b, a));
    const steps = Math.max(d.numel() === 0 ? 0 : await d.max().item(), 0);
    checkDegree(op, steps);
    return evaluate(a, b, steps, false, body);
  })();
}

/** `n mod 2 == 0` (n an integer-valued tensor). */
const even = (n: Tensor) => n.sub(n.div(2).floor().mul(2)).eq(0);

/**
 * Runs `p_{k+1} = next(k, p_k, p_{k-1})` from (p0, p1) for k = 1 … n - 1 (per
 * element, frozen past its n), then p_n, with 1 at n = 0 and 0 below.
 */
function recurrence(
  d: Degree,
  p0: Tensor,
  p1: Tensor,
  next: (k: number, q: Tensor, p: Tensor) => Tensor,
): Tensor {
  // Each step in its own scope, and the pair it drops freed: otherwise
  // the enclosing scope holds every step's tensors (memory ∝ n·numel).
  const start: [Tensor, Tensor] = [p0, p1];
  const [, q] = scopedRounds(Math.max(d.steps - 1, 0), start, ([p, q], i) => {
    const k = i + 1;
    const r = next(k, q, p);
    if (d.fixed) return [q, r];
    const go = d.n.gt(k);
    return [q.where(go, p), r.where(go, q)];
  });
  return q.where(d.n.ge(1), fill(p0, 1)).where(d.n.ge(0), 0);
}

/** Which Chebyshev polynomial: of the first, second, third or fourth kind. */
type Chebyshev = "t" | "u" | "v" | "w";

/**
 * A Chebyshev polynomial of y (= x, or 2x - 1 when `shifted`), as PyTorch:
 * edge values at y = ±1 (tested on x), the trigonometric closed form for
 * |y| < 1 above `closedFrom`, the recurrence `2y·q - p` otherwise.
 */
function chebyshevBody(kind: Chebyshev, shifted: boolean, closedFrom: number): Recurrence {
  return (x, d) => {
    const { n } = d;
    const y = shifted ? x.add(x).sub(1) : x;
    const twoY = y.add(y);
    const p1 = kind === "t" ? y : kind === "u" ? twoY : kind === "v" ? twoY.sub(1) : twoY.add(1);
    let value = recurrence(d, fill(y, 1), p1, (_k, q, p) => twoY.mul(q).sub(p));
    if (d.fixed && d.steps <= closedFrom) return edges(kind, shifted, x, n, value);
    // Inside (-1, 1) for large n: cos(nθ), sin((n+1)θ)/sin θ,
    // cos((n+½)θ)/cos(θ/2), sin((n+½)θ)/sin(θ/2).
    const theta = y.clamp(-1, 1).acos();
    const twoN1 = n.mul(2).add(1);
    const parity = (v: Tensor) => v.where(even(n), v.neg());
    let closed: Tensor;
    if (kind === "t") {
      closed = n.mul(theta).cos();
    } else if (kind === "u") {
      const s = theta.sin();
      const a = n.add(1).mul(theta);
      closed = a.sin().div(s).where(s.ne(0), n.add(1).mul(a.cos()).div(y));
    } else if (kind === "v") {
      const half = theta.div(2);
      closed = n.add(0.5).mul(theta).cos().div(half.cos()).where(half.sin().ne(1), parity(twoN1));
    } else {
      const half = theta.div(2);
      const edge = shifted ? parity(fill(n, 1)) : twoN1.where(y.gt(0), parity(fill(n, 1)));
      closed = n.add(0.5).mul(theta).sin().div(half.sin()).where(half.cos().ne(1), edge);
    }
    value = closed.where(n.gt(closedFrom).mul(y.abs().lt(1)), value);
    return edges(kind, shifted, x, n, value);
  };
}

/**
 * PyTorch's values of a Chebyshev polynomial at y = 1 and y = -1 (tested on
 * x: 1 and -1, or 1 and 0 when `shifted`), and 0 for n < 0, over `value`.
 */
function edges(
  kind: Chebyshev,
  shifted: boolean,
  x: Tensor,
  n: Tensor,
  value: Tensor,
): Tensor {
  const [top, bottom] = shifted ? [x.eq(1), x.eq(0)] : [x.eq(1), x.eq(-1)];
  const one = fill(n, 1);
  const twoN1 = n.mul(2).add(1);
  const parity = (v: Tensor) => v.where(even(n), v.neg());
  const [atTop, atBottom] = kind === "t"
    ? [one, parity(one)]
    : kind === "u"
    ? [n.add(1), parity(n.add(1))]
    : kind === "v"
    ? [one, parity(twoN1)]
    : [twoN1, parity(one)];
  return atTop.where(top, atBottom.where(bottom, value)).where(n.ge(0), 0);
}

/**
 * The signature of the polynomial functions: a tensor of degrees makes the
 * result a Promise (the loop's length is its largest entry, read back).
 */
export interface PolynomialFunction {
  /** With a number degree n (truncated toward 0; below 0 gives 0). */
  (x: Tensor, n: number): Tensor;
  /** With a tensor of degrees (broadcast against x): async, the loop's length read from it. */
  (x: Tensor | number, n: Tensor): Promise<Tensor>;
}

function polynomialFunction(op: string, body: Recurrence): PolynomialFunction {
  return ((x: Tensor | number, n: Tensor | number) =>
    polynomial(op, x, n, body)) as PolynomialFunction;
}

/**
 * The Chebyshev polynomial of the first kind Tₙ(x), as
 * `torch.special.chebyshev_polynomial_t(x, n)`: the recurrence, or
 * `cos(n·acos x)` for |x| < 1 and n > 6 as PyTorch; 0 for n < 0. With a
 * tensor n the result is a Promise. Not differentiable. n is limited to
 * {@link MAX_POLYNOMIAL_DEGREE}.
 */
export const chebyshevPolynomialT: PolynomialFunction = polynomialFunction(
  "chebyshevPolynomialT",
  chebyshevBody("t", false, 6),
);

/**
 * The Chebyshev polynomial of the second kind Uₙ(x), as
 * `torch.special.chebyshev_polynomial_u(x, n)` (closed form for |x| < 1
 * and n > 8). See {@link chebyshevPolynomialT}.
 */
export const chebyshevPolynomialU: PolynomialFunction = polynomialFunction(
  "chebyshevPolynomialU",
  chebyshevBody("u", false, 8),
);

/**
 * The Chebyshev polynomial of the third kind Vₙ(x), as
 * `torch.special.chebyshev_polynomial_v(x, n)`. See {@link chebyshevPolynomialT}.
 */
export const chebyshevPolynomialV: PolynomialFunction = polynomialFunction(
  "chebyshevPolynomialV",
  chebyshevBody("v", false, 8),
);

/**
 * The Chebyshev polynomial of the fourth kind Wₙ(x), as
 * `torch.special.chebyshev_polynomial_w(x, n)`. See {@link chebyshevPolynomialT}.
 */
export const chebyshevPolynomialW: PolynomialFunction = polynomialFunction(
  "chebyshevPolynomialW",
  chebyshevBody("w", false, 8),
);

/**
 * The shifted Chebyshev polynomial Tₙ*(x) = Tₙ(2x - 1) on [0, 1], as
 * `torch.special.shifted_chebyshev_polynomial_t(x, n)`. See {@link chebyshevPolynomialT}.
 */
export const shiftedChebyshevPolynomialT: PolynomialFunction = polynomialFunction(
  "shiftedChebyshevPolynomialT",
  chebyshevBody("t", true, 6),
);

/**
 * The shifted Chebyshev polynomial Uₙ*(x) = Uₙ(2x - 1), as
 * `torch.special.shifted_chebyshev_polynomial_u(x, n)`. See {@link chebyshevPolynomialT}.
 */
export const shiftedChebyshevPolynomialU: PolynomialFunction = polynomialFunction(
  "shiftedChebyshevPolynomialU",
  chebyshevBody("u", true, 6),
);

/**
 * The shifted Chebyshev polynomial Vₙ*(x) = Vₙ(2x - 1), as
 * `torch.special.shifted_chebyshev_polynomial_v(x, n)`. See {@link chebyshevPolynomialT}.
 */
export const shiftedChebyshevPolynomialV: PolynomialFunction = polynomialFunction(
  "shiftedChebyshevPolynomialV",
  chebyshevBody("v", true, 6),
);

/**
 * The shifted Chebyshev polynomial Wₙ*(x) = Wₙ(2x - 1), as
 * `torch.special.shifted_chebyshev_polynomial_w(x, n)`. See {@link chebyshevPolynomialT}.
 */
export const shiftedChebyshevPolynomialW: PolynomialFunction = polynomialFunction(
  "shiftedChebyshevPolynomialW",
  chebyshevBody("w", true, 4),
);

/**
 * The physicists' Hermite polynomial Hₙ(x), as
 * `torch.special.hermite_polynomial_h(x, n)`: `H_{k+1} = 2x·H_k - 2k·H_{k-1}`;
 * 0 for n < 0. With a tensor n the result is a Promise. Not differentiable.
 */
export const hermitePolynomialH: PolynomialFunction = polynomialFunction(
  "hermitePolynomialH",
  (x, d) => {
    const twoX = x.add(x);
    return recurrence(d, fill(x, 1), twoX, (k, q, p) => twoX.mul(q).sub(p.mul(2 * k)));
  },
);

/**
 * The probabilists' Hermite polynomial Heₙ(x), as
 * `torch.special.hermite_polynomial_he(x, n)`: `He_{k+1} = x·He_k - k·He_{k-1}`.
 * See {@link hermitePolynomialH}.
 */
export const hermitePolynomialHe: PolynomialFunction = polynomialFunction(
  "hermitePolynomialHe",
  (x, d) => recurrence(d, fill(x, 1), x, (k, q, p) => x.mul(q).sub(p.mul(k))),
);

/**
 * The Laguerre polynomial Lₙ(x), as `torch.special.laguerre_polynomial_l(x, n)`:
 * `L_{k+1} = ((2k + 1 - x)·L_k - k·L_{k-1})/(k + 1)`; 1 at x = 0 (n ≥ 0),
 * 0 for n < 0. See {@link hermitePolynomialH}.
 */
export const laguerrePolynomialL: PolynomialFunction = polynomialFunction(
  "laguerrePolynomialL",
  (x, d) => {
    const oneMinusX = x.neg().add(1);
    const value = recurrence(
      d,
      fill(x, 1),
      oneMinusX,
      (k, q, p) => oneMinusX.add(2 * k).mul(q).sub(p.mul(k)).div(k + 1),
    );
    return value.where(x.ne(0), 1).where(d.n.ge(0), 0);
  },
);

/**
 * The Legendre polynomial Pₙ(x), as `torch.special.legendre_polynomial_p(x, n)`:
 * `P_{k+1} = ((2k + 1)·x·P_k - k·P_{k-1})/(k + 1)`; ±1 at x = ±1, 0 for
 * n < 0. See {@link hermitePolynomialH}.
 */
export const legendrePolynomialP: PolynomialFunction = polynomialFunction(
  "legendrePolynomialP",
  (x, d) => {
    const value = recurrence(
      d,
      fill(x, 1),
      x,
      (k, q, p) => x.mul(2 * k + 1).mul(q).sub(p.mul(k)).div(k + 1),
    );
    const one = d.n.mul(0).add(1);
    const edge = one.where(x.gt(0).add(even(d.n)).gt(0), -1);
    return edge.where(x.abs().eq(1), value).where(d.n.ge(0), 0);
  },
);
