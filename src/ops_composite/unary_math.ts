/**
 * Elementwise math of one operand composed from the core's kernels: the
 * trigonometric and hyperbolic functions and their inverses (with
 * NumPy's `arc*` aliases), `log2`, `log10`, `exp2`, `sinc`, `logit`,
 * `deg2rad`, `rad2deg`, and PyTorch's aliases `sgn`, `positive`,
 * `negative`, `absolute`, `fix`, with `signbit`. Integer input gives
 * float32, as PyTorch promotes it (the aliases keep int32). Each has
 * PyTorch's gradient, recorded directly (not through the composition).
 * @module
 */

import { isFloat } from "../dtype.ts";
import type { Tensor } from "../tensor.ts";
import { abs, neg, pow, sign } from "../ops/elementwise.ts";
import { elementwise } from "./special_functions.ts";
import { atan2 } from "./binary.ts";
import { trunc } from "./elementwise.ts";
import { horner } from "./util.ts";

/** Tangent, as `torch.tan` (sin/cos). Gradient `1 + tan²`. */
export function tan(x: Tensor): Tensor {
  return elementwise(
    "tan",
    x,
    (v) => v.sin().div(v.cos()),
    (g, _v, out) => g.mul(out.square().add(1)),
  );
}

/** `√((1 - x)(1 + x))`, without the cancellation of `1 - x²` near ±1. */
const cosOfAsin = (x: Tensor) => x.neg().add(1).mul(x.add(1)).sqrt();

/** Arcsine on [-1, 1] (NaN outside), as `torch.asin`. Gradient `1/√(1 - x²)`. */
export function asin(x: Tensor): Tensor {
  return elementwise(
    "asin",
    x,
    (v) => atan2(v, cosOfAsin(v)),
    (g, v) => g.mul(v.square().neg().add(1).rsqrt()),
  );
}

/** Arccosine on [-1, 1] (NaN outside), as `torch.acos`. Gradient `-1/√(1 - x²)`. */
export function acos(x: Tensor): Tensor {
  return elementwise(
    "acos",
    x,
    (v) => atan2(cosOfAsin(v), v),
    (g, v) => g.mul(v.square().neg().add(1).rsqrt()).neg(),
  );
}

/** Arctangent, as `torch.atan` (±π/2 at ±inf). Gradient `1/(1 + x²)`. */
export function atan(x: Tensor): Tensor {
  return elementwise(
    "atan",
    x,
    (v) => atan2(v, 1),
    (g, v) => g.div(v.square().add(1)),
  );
}

/** `sign(x)·|f|`, keeping -0 at x = -0 (and NaN). */
const oddFrom = (x: Tensor, magnitude: Tensor) =>
  magnitude.where(x.gt(0), magnitude.neg()).where(x.ne(0), x);

/** `e^|x|/2` as `e^(|x|/2)·(e^(|x|/2)/2)`: finite as long as the result is. */
function halfExpAbs(a: Tensor): Tensor {
  const h = a.mul(0.5).exp();
  return h.mul(h.mul(0.5));
}

/**
 * Hyperbolic sine, as `torch.sinh`: by expm1 for |x| ≤ 20 (accurate near
 * 0), by `e^|x|/2` beyond (finite up to float's maximum). Gradient `cosh x`.
 */
export function sinh(x: Tensor): Tensor {
  return elementwise("sinh", x, (v) => {
    const a = v.abs();
    const e = a.clamp(undefined, 20).expm1();
    const small = e.add(e.div(e.add(1))).mul(0.5);
    return oddFrom(v, small.where(a.le(20), halfExpAbs(a)));
  }, (g, v) => g.mul(cosh(v)));
}

/** Hyperbolic cosine, as `torch.cosh` (finite up to float's maximum). Gradient `sinh x`. */
export function cosh(x: Tensor): Tensor {
  return elementwise("cosh", x, (v) => {
    const a = v.abs();
    const e = a.clamp(undefined, 20).exp();
    return e.add(e.reciprocal()).mul(0.5).where(a.le(20), halfExpAbs(a));
  }, (g, v) => g.mul(sinh(v)));
}

/** Beyond this |x|, asinh and acosh are `log|x| + log 2` to the last bit. */
const LARGE = 1e8;

/**
 * Inverse hyperbolic sine, as `torch.asinh`: `log1p(|x| + x²/(1 + √(1 + x²)))`
 * (accurate near 0), `log|x| + log 2` for large |x|. Gradient `1/√(x² + 1)`.
 */
export function asinh(x: Tensor): Tensor {
  return elementwise("asinh", x, (v) => {
    const a = v.abs();
    const m = a.clamp(undefined, LARGE);
    const mid = m.add(m.square().div(m.square().add(1).sqrt().add(1))).log1p();
    return oddFrom(v, mid.where(a.le(LARGE), a.log().add(Math.LN2)));
  }, (g, v) => g.mul(v.square().add(1).rsqrt()));
}

/**
 * Inverse hyperbolic cosine on [1, inf) (NaN below), as `torch.acosh`:
 * `log1p(t + √(t(t + 2)))` with t = x - 1 (accurate near 1), `log x + log 2`
 * for large x. Gradient `1/√(x² - 1)`.
 */
export function acosh(x: Tensor): Tensor {
  return elementwise("acosh", x, (v) => {
    const t = v.clamp(undefined, LARGE).sub(1);
    const mid = t.add(t.mul(t.add(2)).sqrt()).log1p();
    // Below 1 (down to -inf, where t(t + 2) overflows or log1p(t + √…) is finite) NaN.
    return mid.where(v.le(LARGE), v.log().add(Math.LN2)).where(v.ge(1), NaN);
  }, (g, v) => g.mul(v.square().sub(1).rsqrt()));
}

/**
 * Inverse hyperbolic tangent on [-1, 1] (±inf at ±1, NaN outside), as
 * `torch.atanh`: `log1p(2|x|/(1 - |x|))/2` (1 - |x| is exact near 1).
 * Gradient `1/(1 - x²)`.
 */
export function atanh(x: Tensor): Tensor {
  return elementwise("atanh", x, (v) => {
    const a = v.abs();
    return oddFrom(v, a.mul(2).div(a.neg().add(1)).log1p().mul(0.5));
  }, (g, v) => g.div(v.square().neg().add(1)));
}

/** Alias of {@link asin} (`torch.arcsin`). */
export const arcsin: (x: Tensor) => Tensor = asin;
/** Alias of {@link acos} (`torch.arccos`). */
export const arccos: (x: Tensor) => Tensor = acos;
/** Alias of {@link atan} (`torch.arctan`). */
export const arctan: (x: Tensor) => Tensor = atan;
/** Alias of {@link asinh} (`torch.arcsinh`). */
export const arcsinh: (x: Tensor) => Tensor = asinh;
/** Alias of {@link acosh} (`torch.arccosh`). */
export const arccosh: (x: Tensor) => Tensor = acosh;
/** Alias of {@link atanh} (`torch.arctanh`). */
export const arctanh: (x: Tensor) => Tensor = atanh;

const MIN_NORMAL_32 = 1.1754943508222875e-38;
const MIN_NORMAL_64 = 2.2250738585072014e-308;

/**
 * `log(x)·scale`, exact at the powers of `base` (where the product rounds
 * off an integer: `base^n` is rebuilt and compared).
 */
function logBase(name: string, x: Tensor, base: number): Tensor {
  const scale = 1 / Math.log(base);
  return elementwise(name, x, (v) => {
    // Near 1 by log1p (x - 1 is exact there), as some GPUs' log loses digits there.
    const near = v.gt(0.5).mul(v.lt(2));
    const value = v.sub(1).where(near, 0).log1p().where(near, v.log()).mul(scale);
    const n = value.round();
    const power = pow(base, n);
    let exact = power.eq(v).mul(value.abs().ne(Infinity));
    // A subnormal near 10ⁿ is not 10ⁿ to float precision (its log10 is not n).
    if (base !== 2) exact = exact.mul(v.ge(v.dtype === "float64" ? MIN_NORMAL_64 : MIN_NORMAL_32));
    return n.where(exact, value);
  }, (g, v) => g.div(v.mul(Math.log(base))));
}

/** Base-2 logarithm, as `torch.log2` (exact at powers of 2). Gradient `1/(x·ln 2)`. */
export function log2(x: Tensor): Tensor {
  return logBase("log2", x, 2);
}

/** Base-10 logarithm, as `torch.log10` (exact at powers of 10). Gradient `1/(x·ln 10)`. */
export function log10(x: Tensor): Tensor {
  return logBase("log10", x, 10);
}

/** `2^x`, as `torch.exp2` (by the power kernel, exact at integers). Gradient `2^x·ln 2`. */
export function exp2(x: Tensor): Tensor {
  return elementwise(
    "exp2",
    x,
    (v) => pow(2, v),
    (g, _v, out) => g.mul(out).mul(Math.LN2),
  );
}

/** d/dp sinc's series `Σ_k (-1)^k·2k·p^(2k-1)/(2k+1)!` over p^(2k-2), highest first. */
const SINC_SERIES = Array.from({ length: 9 }, (_, i) => {
  const k = 9 - i;
  let f = 1;
  for (let j = 2; j <= 2 * k + 1; j++) f *= j;
  return (k % 2 === 0 ? 2 : -2) * k / f;
});

/**
 * The normalized sinc `sin(πx)/(πx)`, 1 at 0, as `torch.sinc`. Gradient
 * PyTorch's `(πx·cos πx - sin πx)/(πx²)`, 0 at 0.
 */
export function sinc(x: Tensor): Tensor {
  return elementwise("sinc", x, (v) => {
    const nonzero = v.ne(0);
    const p = v.where(nonzero, 1).mul(Math.PI);
    return p.sin().div(p).where(nonzero, 1);
  }, (g, v) => {
    // Below |πx| = 1 by its Taylor series: the quotient cancels there (and is 0/0
    // once πx² underflows); PyTorch's float32 loses digits there too.
    const near = v.abs().lt(1 / Math.PI);
    const safe = v.where(near.eq(0), 1);
    const p = safe.mul(Math.PI);
    const d = p.mul(p.cos()).sub(p.sin()).div(p.mul(safe));
    const t = v.mul(Math.PI).where(near, 0);
    const series = horner(t.square(), SINC_SERIES).mul(t).mul(Math.PI);
    return g.mul(d.where(near.eq(0), series));
  });
}

/** Options of {@link logit}. */
export interface LogitOptions {
  /** Clamp the input into [eps, 1 - eps] first (default: no clamping). */
  eps?: number;
}

/**
 * The log-odds `log(x/(1 - x))`, as `torch.logit` (`torch.special.logit`),
 * the input clamped into [eps, 1 - eps] first when `eps` is given.
 * Gradient PyTorch's `1/(x(1 - x))`: NaN outside [0, 1] without eps, 0
 * outside [eps, 1 - eps] with it.
 */
export function logit(x: Tensor, options: LogitOptions = {}): Tensor {
  const { eps } = options;
  if (eps !== undefined && (typeof eps !== "number" || Number.isNaN(eps))) {
    throw new TypeError(`logit: eps must be a number, got ${eps}`);
  }
  const [lo, hi] = eps === undefined || eps < 0 ? [0, 1] : [eps, 1 - eps];
  return elementwise("logit", x, (v) => {
    const z = eps === undefined || eps < 0 ? v : v.clamp(lo, hi);
    return z.div(z.neg().add(1)).log();
  }, (g, v) => {
    const d = g.div(v.mul(v.neg().add(1)));
    return d.where(v.ge(lo).mul(v.le(hi)), eps === undefined || eps < 0 ? NaN : 0);
  });
}

/** Degrees to radians, as `torch.deg2rad` (int32 gives float32). */
export function deg2rad(x: Tensor): Tensor {
  return elementwise("deg2rad", x, (v) => v.mul(Math.PI / 180), (g) => g.mul(Math.PI / 180));
}

/** Radians to degrees, as `torch.rad2deg` (int32 gives float32). */
export function rad2deg(x: Tensor): Tensor {
  return elementwise("rad2deg", x, (v) => v.mul(180 / Math.PI), (g) => g.mul(180 / Math.PI));
}

/** The sign, as `torch.sgn` (for real tensors the same as `sign`; int32 stays int32). */
export const sgn = (x: Tensor): Tensor => sign(x);

/** `-x`, as `torch.negative` (alias of `neg`). */
export const negative = (x: Tensor): Tensor => neg(x);

/** `|x|`, as `torch.absolute` (alias of `abs`). */
export const absolute = (x: Tensor): Tensor => abs(x);

/** Rounded toward zero, as `torch.fix` (alias of `trunc`). */
export const fix = (x: Tensor): Tensor => trunc(x);

/** `x` itself, as `torch.positive` (the same tensor, as PyTorch returns it). */
export const positive = (x: Tensor): Tensor => x;

/**
 * 1 where the sign bit is set (negative numbers, -0, -inf), else 0, in the
 * input's dtype as the comparisons give it (there is no bool dtype), as
 * `torch.signbit`; no gradient. NaN gives 0 whatever its sign bit (no
 * kernel exposes it; PyTorch reads it).
 */
export function signbit(x: Tensor): Tensor {
  if (!isFloat(x.dtype)) return x.lt(0);
  // -0 is told from +0 by the sign of 1/x.
  return x.lt(0).add(x.eq(0).mul(x.reciprocal().lt(0)));
}
