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

/** Options of {@link leakyRelu}. */
export interface LeakyReluOptions {
  /** Slope for negative inputs (default 0.01). */
  negativeSlope?: number;
}

/**
 * `x` where `x > 0`, else `negativeSlope * x`, as
 * `torch.nn.functional.leaky_relu`. The gradient at 0 is `negativeSlope`, as
 * PyTorch's.
 */
export function leakyRelu(x: Tensor, options: LeakyReluOptions = {}): Tensor {
  checkFloatInput("leakyRelu", x);
  const slope = checkFinite("leakyRelu", "negativeSlope", options.negativeSlope ?? 0.01);
  // One factor per element (1 or the slope), outside the graph: forward and
  // backward are then one multiply each.
  const factor = noGrad(() => tidy(() => x.gt(0).mul(1 - slope).add(slope)));
  return x.mul(factor);
}

/** `x * sigmoid(x)` (swish), as `torch.nn.functional.silu`. */
export function silu(x: Tensor): Tensor {
  checkFloatInput("silu", x);
  return x.mul(x.sigmoid());
}

/** Options of {@link elu}. */
export interface EluOptions {
  /** Scale of the negative part, `alpha * (e^x - 1)` (default 1). */
  alpha?: number;
}

/**
 * `x` where `x > 0`, else `alpha * (e^x - 1)`, as
 * `torch.nn.functional.elu`. The exponential only sees `min(x, 0)`, so a large
 * input cannot overflow it; the gradient at 0 is `alpha`, as PyTorch's.
 */
export function elu(x: Tensor, options: EluOptions = {}): Tensor {
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
