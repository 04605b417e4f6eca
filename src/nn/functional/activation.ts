/**
 * Activations beyond the core ops, as `torch.nn.functional`: `leakyRelu`,
 * `silu`, `elu`, `softplus`. Each is composed from tensor ops, so it runs with
 * forward and backward on every backend; the formulations keep PyTorch's
 * values and gradients at the extremes (no overflow in a branch that is not
 * taken, PyTorch's gradient at the kinks).
 * @module
 */

import { noGrad } from "../../autograd.ts";
import { tidy } from "../../storage.ts";
import { where } from "../../ops/indexing.ts";
import type { Tensor } from "../../tensor.ts";
import { checkFinite, checkFloatInput } from "../util.ts";
import { inPlace } from "../../ops/inplace.ts";
import type { InplaceOptions } from "./inplace.ts";

/** Options of {@link leakyRelu}. */
export interface LeakyReluOptions extends InplaceOptions {
  /** Slope for negative inputs (default 0.01). */
  negativeSlope?: number;
}

/**
 * `x` where `x > 0`, else `negativeSlope * x`, as
 * `torch.nn.functional.leaky_relu`. The gradient at 0 is `negativeSlope`, as
 * PyTorch's.
 */
export function leakyRelu(x: Tensor, options: LeakyReluOptions = {}): Tensor {
  if (options.inplace) {
    return inPlace("leakyRelu_", x, [], (t) => leakyRelu(t, { ...options, inplace: false }));
  }
  checkFloatInput("leakyRelu", x);
  const slope = checkFinite("leakyRelu", "negativeSlope", options.negativeSlope ?? 0.01);
  // One factor per element (1 or the slope), outside the graph: forward and
  // backward are then one multiply each.
  const factor = noGrad(() => tidy(() => x.gt(0).mul(1 - slope).add(slope)));
  return x.mul(factor);
}

/** `x * sigmoid(x)` (swish), as `torch.nn.functional.silu`. */
export function silu(x: Tensor, options: InplaceOptions = {}): Tensor {
  if (options.inplace) return inPlace("silu_", x, [], (t) => silu(t));
  checkFloatInput("silu", x);
  return x.mul(x.sigmoid());
}

/** Options of {@link elu}. */
export interface EluOptions extends InplaceOptions {
  /** Scale of the negative part, `alpha * (e^x - 1)` (default 1). */
  alpha?: number;
}

/**
 * `x` where `x > 0`, else `alpha * (e^x - 1)`, as
 * `torch.nn.functional.elu`. The exponential only sees `min(x, 0)`, so a large
 * input cannot overflow it; the gradient at 0 is `alpha`, as PyTorch's.
 */
export function elu(x: Tensor, options: EluOptions = {}): Tensor {
  if (options.inplace) return inPlace("elu_", x, [], (t) => elu(t, { ...options, inplace: false }));
  checkFloatInput("elu", x);
  const alpha = checkFinite("elu", "alpha", options.alpha ?? 1);
  // expm1 only sees min(x, 0); clamp passes the gradient at its bound, so
  // the slope at 0 is alpha, as PyTorch's.
  const negative = x.clamp(undefined, 0).expm1().mul(alpha);
  return where(x.gt(0), x, negative);
}

/** Options of {@link softplus}. */
export interface SoftplusOptions {
  /** `log(1 + e^(beta x)) / beta` (default 1). */
  beta?: number;
  /** Above `beta * x > threshold` the result is `x` itself (default 20). */
  threshold?: number;
}

/**
 * `log(1 + e^(beta x)) / beta`, and `x` where `beta x > threshold`, as
 * `torch.nn.functional.softplus`. The exponential only sees values up to the
 * threshold, so a large input cannot overflow it (nor give a NaN gradient).
 */
export function softplus(x: Tensor, options: SoftplusOptions = {}): Tensor {
  checkFloatInput("softplus", x);
  const beta = checkFinite("softplus", "beta", options.beta ?? 1, { nonZero: true });
  const threshold = checkFinite("softplus", "threshold", options.threshold ?? 20);
  const scaled = beta === 1 ? x : x.mul(beta);
  const soft = scaled.clamp(undefined, threshold).exp().log1p();
  return where(scaled.gt(threshold), x, beta === 1 ? soft : soft.div(beta));
}

/** Options of {@link hardtanh}. */
export interface HardtanhOptions extends InplaceOptions {
  /** Lower bound (default -1). */
  minVal?: number;
  /** Upper bound (default 1). */
  maxVal?: number;
}

/**
 * `x` clamped into [minVal, maxVal], as `torch.nn.functional.hardtanh`. The
 * gradient passes strictly inside the bounds only (0 at them, as PyTorch's;
 * `clamp` passes it at its bounds).
 */
export function hardtanh(x: Tensor, options: HardtanhOptions = {}): Tensor {
  if (options.inplace) {
    return inPlace("hardtanh_", x, [], (t) => hardtanh(t, { ...options, inplace: false }));
  }
  checkFloatInput("hardtanh", x);
  const lo = checkFinite("hardtanh", "minVal", options.minVal ?? -1);
  const hi = checkFinite("hardtanh", "maxVal", options.maxVal ?? 1);
  if (!(lo <= hi)) throw new RangeError(`hardtanh: minVal ${lo} is above maxVal ${hi}`);
  return clampInside(x, [lo, hi], x, [lo, hi]);
}

/** `y` clamped into `range`, its gradient passed only where `x` is strictly inside `open`. */
function clampInside(x: Tensor, open: number[], y: Tensor, range: number[]): Tensor {
  const inside = noGrad(() => tidy(() => x.gt(open[0]).mul(x.lt(open[1]))));
  return where(inside, y, noGrad(() => y.clamp(range[0], range[1])));
}

/** `min(max(x, 0), 6)`, as `torch.nn.functional.relu6` (gradient 0 at 0 and 6). */
export function relu6(x: Tensor, options: InplaceOptions = {}): Tensor {
  if (options.inplace) return inPlace("relu6_", x, [], (t) => relu6(t));
  checkFloatInput("relu6", x);
  return clampInside(x, [0, 6], x, [0, 6]);
}

/** `x / 6 + 1/2` clamped into [0, 1], as `torch.nn.functional.hardsigmoid`. */
export function hardsigmoid(x: Tensor, options: InplaceOptions = {}): Tensor {
  if (options.inplace) return inPlace("hardsigmoid_", x, [], (t) => hardsigmoid(t));
  checkFloatInput("hardsigmoid", x);
  return clampInside(x, [-3, 3], x.div(6).add(0.5), [0, 1]);
}

/**
 * `x · relu6(x + 3) / 6`, as `torch.nn.functional.hardswish`; the gradient is
 * `x / 3 + 1/2` on [-3, 3), 0 below, 1 from 3 on (PyTorch's vectorised
 * kernel; its scalar one, for tensors of a few elements, gives 1.5 at 3).
 */
export function hardswish(x: Tensor, options: InplaceOptions = {}): Tensor {
  if (options.inplace) return inPlace("hardswish_", x, [], (t) => hardswish(t));
  checkFloatInput("hardswish", x);
  return where(x.lt(-3), 0, where(x.ge(3), x, x.mul(x.add(3)).div(6)));
}

/** `x · tanh(softplus(x))`, as `torch.nn.functional.mish`. */
export function mish(x: Tensor, options: InplaceOptions = {}): Tensor {
  if (options.inplace) return inPlace("mish_", x, [], (t) => mish(t));
  checkFloatInput("mish", x);
  return x.mul(softplus(x).tanh());
}
