/**
 * Elementwise functions of two operands composed from the core's kernels:
 * `atan2`, `hypot`, `logaddexp`, `logaddexp2`, `fmod`, `floorDivide`, and
 * the scan of logaddexp, `logcumsumexp`. The
 * operands broadcast and promote as the core's binary ops do (numbers
 * allowed beside a tensor).
 * @module
 */

import { noGrad, record } from "../autograd.ts";
import { isFloat } from "../dtype.ts";
import { formatShape, normalizeDim } from "../shape.ts";
import { tidy } from "../storage.ts";
import type { Tensor } from "../tensor.ts";
import { binaryRaw, operands, sumTo } from "../ops/elementwise.ts";
import { checkLater } from "../ops/check.ts";
import { requireFloat, type TensorLike } from "../ops/util.ts";
import { cat, clone, narrow } from "../ops/view.ts";
import { computed, scopedRounds } from "./util.ts";

function floats(op: string, a: TensorLike, b: TensorLike): [Tensor, Tensor] {
  const [x, y] = operands(op, a, b);
  if (!isFloat(x.dtype)) {
    throw new TypeError(
      `${op}: expected float operands, got ${x.dtype} (shapes ${formatShape(x.shape)} and ${
        formatShape(y.shape)
      }); convert with .to("float32")`,
    );
  }
  return [x, y];
}

/** Records `out = f(x, y)` with the gradients `gx`, `gy` (before summing broadcast dims). */
export function recordBinary(
  op: string,
  x: Tensor,
  y: Tensor,
  out: Tensor,
  grads: (g: Tensor) => [Tensor, Tensor],
): Tensor {
  return record(op, [x, y], out, ([g]) => {
    const [gx, gy] = grads(g!);
    return [
      x.requiresGrad ? sumTo(gx, x.shape) : null,
      y.requiresGrad ? sumTo(gy, y.shape) : null,
    ];
  });
}

/**
 * atan(t) for t in [0, 1] to about 4e-3 (a rational-free fit), the start
 * of {@link atan2}'s refinement.
 */
const roughAtan = (t: Tensor) => t.mul(Math.PI / 4).add(t.mul(t.neg().add(1)).mul(0.273));

/**
 * The angle of the point (`other`, `input`) in (-π, π], as `torch.atan2`
 * (`atan2(y, x)`): float operands, broadcast. There is no arctangent
 * kernel, so the angle in the first octant starts from a fit good to 4e-3
 * and is refined twice by the residual rotation (each step cubes the error,
 * so float64 comes out to the last bits); the octant, half plane and sign
 * are then restored, with PyTorch's values at zeros and infinities
 * (`atan2(±0, -0) = ±π`, `atan2(±inf, ±inf) = ±π/4` and so on). The gradient
 * is PyTorch's (`x/(x²+y²)`, `-y/(x²+y²)`; NaN at the origin).
 */
export function atan2(input: TensorLike, other: TensorLike): Tensor {
  const [y, x] = floats("atan2", input, other);
  const out = computed(() => {
    // With an infinite coordinate, the direction is that of (±1 or 0, ±1 or 0).
    const infinite = y.abs().eq(Infinity).maximum(x.abs().eq(Infinity));
    // The other coordinate becomes a zero of its own sign (`t·0`), or stays NaN.
    const finiteOr = (t: Tensor) =>
      t.where(infinite.eq(0), t.gt(0).sub(t.lt(0)).where(t.abs().eq(Infinity), t.mul(0)));
    const [ys, xs] = [finiteOr(y), finiteOr(x)];
    const [ay, ax] = [ys.abs(), xs.abs()];
    const steep = ay.gt(ax);
    const big = ay.maximum(ax);
    const t = ay.minimum(ax).div(big).where(big.ne(0), 0);
    let theta = roughAtan(t);
    for (let i = 0; i < 2; i++) {
      const [c, s] = [theta.cos(), theta.sin()];
      // (1, t) rotated by -θ: the remaining angle is atan(y'/x') ≈ y'/x'.
      theta = theta.add(t.mul(c).sub(s).div(c.add(t.mul(s))));
    }
    theta = theta.neg().add(Math.PI / 2).where(steep, theta);
    // x < 0, or x = -0 (1/x = -inf), is the left half plane.
    const left = xs.lt(0).maximum(xs.eq(0).mul(xs.reciprocal().lt(0)));
    theta = theta.neg().add(Math.PI).where(left, theta);
    const below = ys.lt(0).maximum(ys.eq(0).mul(ys.reciprocal().lt(0)));
    return theta.neg().where(below, theta);
  });
  return recordBinary("atan2", y, x, out, (g) => {
    const scale = y.square().add(x.square()).reciprocal();
    return [g.mul(x).mul(scale), g.mul(y.neg()).mul(scale)];
  });
}

/**
 * `sqrt(x² + y²)` without overflow or underflow on the way (scaled by the
 * larger magnitude), as `torch.hypot`: +inf when either is infinite (even
 * beside NaN), float operands, broadcast. The gradient is PyTorch's
 * (`g·x/hypot`, `g·y/hypot`; NaN at the origin).
 */
export function hypot(input: TensorLike, other: TensorLike): Tensor {
  const [x, y] = floats("hypot", input, other);
  const out = computed(() => {
    const [ax, ay] = [x.abs(), y.abs()];
    const big = ax.maximum(ay);
    const ratio = ax.minimum(ay).div(big).where(big.ne(0), 0);
    const h = big.mul(ratio.square().add(1).sqrt());
    return h.where(ax.eq(Infinity).maximum(ay.eq(Infinity)).eq(0), Infinity);
  });
  return recordBinary("hypot", x, y, out, (g) => [g.mul(x).div(out), g.mul(y).div(out)]);
}

/**
 * `log(exp(x) + exp(y))` without overflow, as `torch.logaddexp`: the
 * larger plus `log1p(exp(-|x - y|))`, and `x` when both are the same
 * infinity. Float operands, broadcast; PyTorch's gradient
 * (`g/(1 + exp(y - x))`, NaN where both are -inf).
 */
export function logaddexp(input: TensorLike, other: TensorLike): Tensor {
  const [x, y] = floats("logaddexp", input, other);
  const out = computed(() => softPlusMax(x, y, (d) => d.exp().log1p()));
  return recordBinary("logaddexp", x, y, out, (g) => [
    g.div(y.sub(x).exp().add(1)),
    g.div(x.sub(y).exp().add(1)),
  ]);
}

/**
 * `log2(2^x + 2^y)` without overflow, as `torch.logaddexp2`; see
 * {@link logaddexp}. The gradient is PyTorch's (`g/(1 + 2^(y - x))`).
 */
export function logaddexp2(input: TensorLike, other: TensorLike): Tensor {
  const [x, y] = floats("logaddexp2", input, other);
  const out = computed(() => softPlusMax(x, y, (d) => d.mul(Math.LN2).exp().log1p().div(Math.LN2)));
  const pow2 = (t: Tensor) => t.mul(Math.LN2).exp();
  return recordBinary("logaddexp2", x, y, out, (g) => [
    g.div(pow2(y.sub(x)).add(1)),
    g.div(pow2(x.sub(y)).add(1)),
  ]);
}

/** `max(x, y) + soft(-|x - y|)`, and `x` where both are one infinity (their difference is NaN). */
function softPlusMax(x: Tensor, y: Tensor, soft: (d: Tensor) => Tensor): Tensor {
  const value = x.maximum(y).add(soft(x.sub(y).abs().neg()));
  const sameInfinity = x.eq(y).mul(x.abs().eq(Infinity));
  return value.where(sameInfinity.eq(0), x);
}

/** int32 division by zero is an error in PyTorch: checked at the next read of the device. */
export function checkNoZeroDivisor(op: string, y: Tensor): void {
  if (isFloat(y.dtype) || y.numel() === 0) return;
  const known = y.storage.knownRange;
  const message = `${op}: integer division by zero (divisor of shape ${formatShape(y.shape)})`;
  if (known && (known[0] > 0 || known[1] < 0)) return;
  checkLater(noGrad(() => y.eq(0).sum().reshape([1])), (host) => (host[0] > 0 ? message : null));
}

/** The remainder rounded toward zero (C's `fmod`, exact for floats), no graph. */
export function truncRemainder(x: Tensor, y: Tensor): Tensor {
  if (!isFloat(x.dtype)) return x.sub(binaryRaw("div", x, y).mul(y)); // the int32 kernel truncates
  return binaryRaw("fmod", x, y);
}

/**
 * The remainder of `input / other` with the dividend's sign (C's `fmod`),
 * as `torch.fmod`; int32 stays int32 (a zero divisor is an error), floats
 * give NaN for a zero divisor or an infinite dividend. Exact at any quotient,
 * as C's `fmod` and PyTorch's (whose vectorized float32 loop gives NaN where
 * `x/y` overflows float32; multigrad gives the exact remainder there too).
 * The gradient is PyTorch's: `g` for the input,
 * `-g·trunc(x/y)` for the divisor.
 */
export function fmod(input: TensorLike, other: TensorLike): Tensor {
  const [x, y] = operands("fmod", input, other);
  checkNoZeroDivisor("fmod", y);
  const out = computed(() => truncRemainder(x, y));
  if (!isFloat(x.dtype)) return out;
  return recordBinary("fmod", x, y, out, (g) => {
    const quotient = x.div(y);
    return [g, g.mul(quotient.ceil().where(quotient.lt(0), quotient.floor())).neg()];
  });
}

/**
 * `input / other` rounded toward -inf, as `torch.floor_divide` (PyTorch
 * 1.13 floors, as Python's `//`), with PyTorch's float algorithm (from the
 * `fmod` remainder, so `5.0 // 0.1` is 49 as in Python). int32 stays int32
 * (a zero divisor is an error); a float zero divisor gives ±inf or NaN. Not
 * differentiable: the result never requires grad (PyTorch's backward
 * raises).
 */
export function floorDivide(input: TensorLike, other: TensorLike): Tensor {
  const [x, y] = operands("floorDivide", input, other);
  checkNoZeroDivisor("floorDivide", y);
  return computed(() => {
    if (!isFloat(x.dtype)) {
      const q = binaryRaw("div", x, y);
      const r = x.sub(q.mul(y));
      return q.sub(r.ne(0).mul(r.lt(0).ne(y.lt(0))));
    }
    const mod = truncRemainder(x, y);
    let div = x.sub(mod).div(y);
    div = div.sub(mod.ne(0).mul(y.lt(0).ne(mod.lt(0))));
    const floored = div.floor();
    const rounded = floored.add(div.sub(floored).gt(0.5));
    const signedZero = x.div(y).mul(0);
    return rounded.where(div.ne(0), signedZero).where(y.ne(0), x.div(y));
  });
}

/** The inclusive scan of `x` along `d` by `combine`, no graph, in ⌈log₂ n⌉ steps (see `scan.ts`). */
function scanBy(x: Tensor, d: number, combine: (a: Tensor, b: Tensor) => Tensor) {
  const n = x.shape[d];
  const steps = Math.ceil(Math.log2(Math.max(n, 1)));
  return noGrad(() => {
    // Each step in a scope of its own, the one before freed (see scopedRounds).
    const [y] = scopedRounds(steps, [x], ([y], i) => {
      const k = 2 ** i;
      const head = narrow(y, d, 0, k);
      return [cat([head, combine(narrow(y, d, k, n - k), narrow(y, d, 0, n - k))], d)];
    });
    return y === x ? tidy(() => clone(x)) : y;
  });
}

const logAdd = (a: Tensor, b: Tensor) => softPlusMax(a, b, (t) => t.exp().log1p());

/**
 * `log(cumsum(exp(x), dim))` without overflow or underflow, as
 * `torch.logcumsumexp`: a scan whose step is {@link logaddexp}, so
 * `[-1000, 0]` gives `[-1000, 0]` (not `-inf` at the first element) and
 * `-inf` entries add nothing. Float tensors. The gradient is PyTorch's
 * (split into positive and negative parts of `g`, each a reversed
 * log-cumsum-exp, so it stays finite where the output is).
 */
export function logcumsumexp(x: Tensor, dim: number): Tensor {
  requireFloat("logcumsumexp", x);
  const d = normalizeDim(dim, x.ndim, "logcumsumexp");
  if (x.ndim === 0) return clone(x);
  const out = scanBy(x, d, logAdd);
  // Recorded ops on the input, the output (whose node is this one) and logcumsumexp itself, so
  // that under createGraph the gradient is differentiable (PyTorch's double backward).
  return record("logcumsumexp", [x], out, ([g]) => {
    const lowest = x.dtype === "float32" ? -3.4028234663852886e38 : -Number.MAX_VALUE;
    // log of 1 where unused: log(0)'s infinite derivative would make the masked branch's NaN.
    const logOf = (t: Tensor, mask: Tensor) => t.where(mask, 1).log().where(mask, lowest);
    const logPositive = logOf(g!, g!.gt(0));
    const logNegative = logOf(g!.neg(), g!.lt(0));
    const part = (logG: Tensor) => logcumsumexp(logG.sub(out).flip(d), d).flip(d).add(x).exp();
    return [part(logPositive).sub(part(logNegative))];
  });
}
