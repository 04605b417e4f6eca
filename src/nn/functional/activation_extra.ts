/**
 * More activations, as `torch.nn.functional`: `prelu`, `logsigmoid`,
 * `softmin`, `softsign`, `tanhshrink`, `threshold`, `glu`, `selu`, `celu`,
 * `hardshrink`, `softshrink`. Each is composed from tensor ops, so it runs
 * with forward and backward on every backend.
 *
 * Where PyTorch 1.13 computes an op in one native kernel, the forward and
 * the gradient here follow that kernel's formula term by term (as one graph
 * node whose backward is built from ops): the chain rule through a
 * composition would give other values at the kinks, at ±inf and at NaN.
 * PyTorch's CPU kernels have a vectorised body and a scalar tail (the last
 * `numel mod 16` float32 elements of a contiguous tensor); where the two
 * disagree (the gradients of `selu`, `celu`, `hardshrink` and `softshrink`
 * at NaN) the vectorised body is followed, since it computes all but a few
 * elements of any tensor of some size.
 * @module
 */

import { noGrad, record } from "../../autograd.ts";
import { where } from "../../ops/indexing.ts";
import { cat } from "../../ops/view.ts";
import { formatShape, normalizeDim } from "../../shape.ts";
import { forwardScope, tidy } from "../../storage.ts";
import type { Tensor } from "../../tensor.ts";
import { recomputedBackward, recording } from "../../autograd/recompute.ts";
import { checkFinite, checkFloatInput, checkTensor, sameDevice } from "../util.ts";
import { inPlace } from "../../ops/inplace.ts";
import type { InplaceOptions } from "./inplace.ts";

/**
 * One graph node for `inputs`. `forward` runs without a graph and returns the output and what
 * the backward needs (everything else it made is freed at once); `backward` gives the inputs'
 * gradients from the output's. What the backward keeps goes with the node.
 */
function node<S extends Tensor[]>(
  name: string,
  inputs: Tensor[],
  forward: () => [Tensor, ...S],
  backward: (g: Tensor, saved: S) => (Tensor | null)[],
): Tensor {
  return forwardScope(() => {
    const [out, ...saved] = noGrad(() => tidy(forward));
    return record(name, inputs, out, ([g]) =>
      // Under createGraph the forward, re-run with a graph, is differentiated instead.
      recording() ? recomputedBackward(inputs, () => forward()[0], g!) : backward(g!, saved as S));
  });
}

/** A 0/1 mask of where `a` or `b` is nonzero (both 0/1 masks). */
function either(a: Tensor, b: Tensor): Tensor {
  return a.add(b).gt(0);
}

/**
 * `x` where `x > 0`, else `weight * x`, as `torch.nn.functional.prelu`:
 * `weight` holds one slope, or one per channel (dim 1 of `x`; a 1-D input
 * has one channel). The gradients are PyTorch's: `g` (`weight * g` where
 * `x <= 0` or NaN) for `x`, and the sum of `x * g` over the places where
 * `x <= 0` (or NaN) for `weight`, so an infinite positive input gives
 * `weight` no NaN.
 */
export function prelu(x: Tensor, weight: Tensor): Tensor {
  checkFloatInput("prelu", x);
  checkTensor("prelu", "weight", weight);
  if (weight.ndim > 1) {
    throw new RangeError(
      `prelu: expected weight to be a scalar or 1D tensor, got shape ${formatShape(weight.shape)}`,
    );
  }
  if (weight.dtype !== x.dtype) {
    throw new TypeError(`prelu: weight is ${weight.dtype}, the input ${x.dtype}; they must match`);
  }
  sameDevice("prelu", { input: x, weight });
  const count = weight.numel();
  if (count !== 1) {
    const channels = x.ndim > 1 ? x.shape[1] : 1;
    if (x.ndim === 0 || channels !== count) {
      throw new RangeError(
        `prelu: weight has ${count} parameters but the input of shape ${
          formatShape(x.shape)
        } has ${channels} channel${
          channels === 1 ? "" : "s"
        } (dim 1); expected 1 parameter or one per channel`,
      );
    }
  }
  // The slope broadcast over x: [] for one parameter, [C, 1, ...] before x's trailing dims.
  const view = count === 1 ? [] : [count, ...x.shape.slice(2).map(() => 1)];
  const dims = x.shape.map((_, i) => i).filter((i) => count === 1 || i !== 1);
  return node("prelu", [x, weight], () => {
    const positive = x.gt(0);
    const slope = weight.reshape(view);
    return [where(positive, x, x.mul(slope)), positive, slope];
  }, (g, [positive, slope]) => [
    x.requiresGrad ? where(positive, g, g.mul(slope)) : null,
    weight.requiresGrad
      ? where(positive, 0, x.mul(g)).sum(dims.length > 0 ? dims : undefined).reshape(weight.shape)
      : null,
  ]);
}

/**
 * `log(sigmoid(x))` computed stably as `min(x, 0) - log1p(e^-|x|)`, as
 * `torch.nn.functional.logsigmoid`; its gradient is PyTorch's kernel's
 * `(x < 0 ? 1 - q : q) · g` with `q = e^-|x| / (1 + e^-|x|)` (1/2 at 0).
 */
export function logsigmoid(x: Tensor): Tensor {
  checkFloatInput("logsigmoid", x);
  return node("logsigmoid", [x], () => {
    const z = x.abs().neg().exp();
    return [x.minimum(0).sub(z.log1p()), z];
  }, (g, [z]) => {
    const negative = x.lt(0);
    const q = z.div(z.add(1));
    // PyTorch's max_deriv - sign * q, with max_deriv = [x < 0] and sign = ±1.
    return [negative.sub(negative.mul(2).sub(1).mul(q)).mul(g)];
  });
}

/** `softmax(-x)` along `dim`, as `torch.nn.functional.softmin` (`dim` required, as for softmax). */
export function softmin(x: Tensor, dim: number): Tensor {
  checkFloatInput("softmin", x);
  if (!Number.isInteger(dim)) throw new TypeError(`softmin: dim must be an integer, got ${dim}`);
  return forwardScope(() => x.neg().softmax(dim));
}

/**
 * `x / (1 + |x|)`, as `torch.nn.functional.softsign` (NaN at ±inf, as
 * PyTorch); the gradient is what PyTorch's autograd gives that expression:
 * `g / d - g · ((x / d) / d) · sign(x)` with `d = 1 + |x|`.
 */
export function softsign(x: Tensor): Tensor {
  checkFloatInput("softsign", x);
  return node("softsign", [x], () => {
    const d = x.abs().add(1);
    return [x.div(d), d];
  }, (g, [d]) => [g.div(d).add(g.neg().mul(x.div(d).div(d)).mul(x.sign()))]);
}

/** `x - tanh(x)`, as `torch.nn.functional.tanhshrink`. */
export function tanhshrink(x: Tensor): Tensor {
  checkFloatInput("tanhshrink", x);
  return forwardScope(() => x.sub(x.tanh()));
}

/**
 * `value` where `x <= threshold`, else `x`, as
 * `torch.nn.functional.threshold` (a NaN input stays NaN). The gradient is
 * selected, not multiplied: `g` where `x > threshold` or NaN, else 0 (even
 * for an infinite or NaN `g`).
 */
export function threshold(
  x: Tensor,
  threshold: number,
  value: number,
  options: InplaceOptions = {},
): Tensor {
  if (options.inplace) return inPlace("threshold_", x, [], (t) => thresholdOf(t, threshold, value));
  checkFloatInput("threshold", x);
  for (const [name, v] of [["threshold", threshold], ["value", value]] as const) {
    if (typeof v !== "number") throw new TypeError(`threshold: ${name} must be a number, got ${v}`);
  }
  return forwardScope(() => where(noGrad(() => x.le(threshold)), value, x));
}
/** {@link threshold} where its `threshold` argument hides the function. */
const thresholdOf: typeof threshold = (...args) => threshold(...args);

/**
 * The gated linear unit `a · sigmoid(b)`, `a` and `b` the two halves of `x`
 * along `dim` (default -1), as `torch.nn.functional.glu`; the gradients are
 * PyTorch's kernel's: `sigmoid(b) · g` for `a`, `(1 - s) · s · a · g` for `b`.
 */
export function glu(x: Tensor, dim = -1): Tensor {
  checkFloatInput("glu", x);
  if (x.ndim === 0) {
    throw new RangeError("glu: does not support 0-dimensional inputs (halving size must be even)");
  }
  const d = normalizeDim(dim, x.ndim, "glu");
  const size = x.shape[d];
  if (size % 2 !== 0) {
    throw new RangeError(
      `glu: halving dimension must be even, but dimension ${d} of input of shape ${
        formatShape(x.shape)
      } is size ${size}`,
    );
  }
  const half = size / 2;
  return node("glu", [x], () => {
    const a = x.narrow(d, 0, half);
    const s = x.narrow(d, half, half).sigmoid();
    return [a.mul(s), a, s];
  }, (g, [a, s]) => [cat([s.mul(g), s.neg().add(1).mul(s).mul(a).mul(g)], d)]);
}

/**
 * PyTorch's ELU kernel with its three coefficients (`negcoef` = alpha · scale,
 * `poscoef` = scale, `negiptcoef` = input scale), vectorised form:
 * `x > 0 ? x · poscoef : expm1(x · negiptcoef) · negcoef`, gradient
 * `x > 0 ? g · poscoef : g · negiptcoef · negcoef · e^(x · negiptcoef)`. A
 * NaN input takes the second branch of both.
 */
function eluKernel(
  name: string,
  x: Tensor,
  negcoef: number,
  poscoef: number,
  negiptcoef: number,
): Tensor {
  // PyTorch multiplies alpha and scale in the tensor's type.
  const neg = x.dtype === "float32" ? Math.fround(negcoef) : negcoef;
  const scaleIn = (t: Tensor) => (negiptcoef === 1 ? t : t.mul(negiptcoef));
  const scaleOut = (t: Tensor) => (poscoef === 1 ? t : t.mul(poscoef));
  return node(name, [x], () => {
    const positive = x.gt(0);
    return [where(positive, scaleOut(x), scaleIn(x).expm1().mul(neg)), positive];
  }, (g, [positive]) => [where(positive, scaleOut(g), scaleIn(g).mul(neg).mul(scaleIn(x).exp()))]);
}

const SELU_ALPHA = 1.6732632423543772848170429916717;
const SELU_SCALE = 1.0507009873554804934193349852946;

/**
 * `scale · (x > 0 ? x : alpha · (e^x - 1))` with PyTorch's constants
 * (alpha ≈ 1.6733, scale ≈ 1.0507), as `torch.nn.functional.selu`; the
 * gradient at 0 is `alpha · scale`, as PyTorch's.
 */
export function selu(x: Tensor, options: InplaceOptions = {}): Tensor {
  if (options.inplace) return inPlace("selu_", x, [], (t) => selu(t));
  checkFloatInput("selu", x);
  const f32 = x.dtype === "float32";
  const alpha = f32 ? Math.fround(SELU_ALPHA) : SELU_ALPHA;
  const scale = f32 ? Math.fround(SELU_SCALE) : SELU_SCALE;
  return eluKernel("selu", x, alpha * scale, scale, 1);
}

/** Options of {@link celu}. */
export interface CeluOptions extends InplaceOptions {
  /** `alpha · (e^(x / alpha) - 1)` for `x <= 0` (default 1; not 0). */
  alpha?: number;
}

/**
 * `x > 0 ? x : alpha · (e^(x / alpha) - 1)`, as
 * `torch.nn.functional.celu` (PyTorch's ELU kernel with input scale
 * `1 / alpha`); the gradient at 0 is 1.
 */
export function celu(x: Tensor, options: CeluOptions = {}): Tensor {
  if (options.inplace) {
    return inPlace("celu_", x, [], (t) => celu(t, { ...options, inplace: false }));
  }
  checkFloatInput("celu", x);
  const alpha = checkFinite("celu", "alpha", options.alpha ?? 1, { nonZero: true });
  return eluKernel("celu", x, alpha, 1, 1 / alpha);
}

/** Options of {@link hardshrink} and {@link softshrink}. */
export interface ShrinkOptions {
  /** Half-width of the band sent to 0 (default 0.5). */
  lambd?: number;
}

/** PyTorch's shrink backward (vectorised): `g` where `x < -lambd` or `x > lambd`, else 0. */
function shrinkGrad(x: Tensor, g: Tensor, lambd: number): Tensor {
  return where(either(x.lt(-lambd), x.gt(lambd)), g, 0);
}

/**
 * 0 where `-lambd <= x <= lambd`, else `x`, as
 * `torch.nn.functional.hardshrink` (a NaN stays NaN, with gradient 0).
 */
export function hardshrink(x: Tensor, options: ShrinkOptions = {}): Tensor {
  checkFloatInput("hardshrink", x);
  const lambd = checkFinite("hardshrink", "lambd", options.lambd ?? 0.5);
  return node(
    "hardshrink",
    [x],
    () => [where(x.ge(-lambd).mul(x.le(lambd)), 0, x)],
    (g) => [shrinkGrad(x, g, lambd)],
  );
}

/**
 * `x - lambd` above `lambd`, `x + lambd` below `-lambd`, else 0, as
 * `torch.nn.functional.softshrink` (`lambd >= 0`; a NaN gives 0, with
 * gradient 0, as PyTorch).
 */
export function softshrink(x: Tensor, options: ShrinkOptions = {}): Tensor {
  checkFloatInput("softshrink", x);
  const lambd = checkFinite("softshrink", "lambd", options.lambd ?? 0.5);
  if (lambd < 0) {
    throw new RangeError(`softshrink: lambd must be greater or equal to 0, got ${lambd}`);
  }
  return node(
    "softshrink",
    [x],
    () => [where(x.gt(lambd), x.sub(lambd), where(x.lt(-lambd), x.add(lambd), 0))],
    (g) => [shrinkGrad(x, g, lambd)],
  );
}
