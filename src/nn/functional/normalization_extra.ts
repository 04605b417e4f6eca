/**
 * Instance normalisation and local response normalisation, as
 * `torch.nn.functional.instance_norm` and `local_response_norm`.
 * @module
 */

import { noGrad, record } from "../../autograd.ts";
import { recomputedBackward, recording } from "../../autograd/recompute.ts";
import { isFloat } from "../../dtype.ts";
import { zeros } from "../../ops/factory.ts";
import { cat } from "../../ops/view.ts";
import { formatShape, sameShape } from "../../shape.ts";
import { forwardScope, tidy } from "../../storage.ts";
import type { Tensor } from "../../tensor.ts";
import { checkFinite, checkFloatInput, checkTensor, sameDevice } from "../util.ts";

/** Options of {@link instanceNorm}. */
export interface InstanceNormOptions {
  /** Running mean [C], updated in place when given and `useInputStats`. */
  runningMean?: Tensor | null;
  /** Running variance [C] (unbiased), updated in place when given and `useInputStats`. */
  runningVar?: Tensor | null;
  /** Per-channel scale [C]. */
  weight?: Tensor | null;
  /** Per-channel shift [C]. */
  bias?: Tensor | null;
  /**
   * Normalize each instance with its own statistics (default true); false
   * normalizes with `runningMean` and `runningVar`.
   */
  useInputStats?: boolean;
  /** Weight of the new statistics in the running update (default 0.1). */
  momentum?: number;
  /** Added to the variance (default 1e-5). */
  eps?: number;
}

/**
 * Instance normalisation of [N, C, ...], as
 * `torch.nn.functional.instance_norm`: each (sample, channel) slice is
 * normalized over its positions with its biased variance, then scaled and
 * shifted per channel (batch norm over [1, N·C, ...], as PyTorch computes
 * it). The running statistics (when given and `useInputStats`) are updated
 * as PyTorch does: each instance's copy moves towards that instance's mean
 * and unbiased variance by `momentum`, and the N copies are averaged into the
 * buffers. With `useInputStats` false they are left as they are (PyTorch
 * writes them back as the mean of their N copies, which can move them by an
 * ulp).
 */
export function instanceNorm(x: Tensor, options: InstanceNormOptions = {}): Tensor {
  const op = "instanceNorm";
  checkTensor(op, "input", x);
  const { runningMean = null, runningVar = null, weight = null, bias = null } = options;
  const useInputStats = options.useInputStats ?? true;
  // null is refused rather than read as the default: PyTorch takes no None here.
  const momentum = options.momentum === undefined ? 0.1 : options.momentum;
  const eps = options.eps ?? 1e-5;
  if (x.ndim < 2) {
    throw new RangeError(
      `${op}: expected an input [N, C, ...], got shape ${formatShape(x.shape)}`,
    );
  }
  if (!isFloat(x.dtype)) {
    throw new TypeError(`${op}: expected a floating-point input, got ${x.dtype}`);
  }
  if (typeof momentum !== "number" || !Number.isFinite(momentum)) {
    throw new RangeError(`${op}: momentum must be a finite number, got ${momentum}`);
  }
  if (typeof eps !== "number" || !(eps >= 0)) {
    throw new RangeError(`${op}: eps must be a non-negative number, got ${eps}`);
  }
  const [n, c] = x.shape;
  const channel = { runningMean, runningVar, weight, bias };
  for (const [name, t] of Object.entries(channel)) {
    if (t != null) checkTensor(op, name, t);
    if (t != null && !sameShape(t.shape, [c])) {
      throw new RangeError(
        `${op}: ${name} of shape ${
          formatShape(t.shape)
        } does not match the ${c} channels (dim 1) of input of shape ${formatShape(x.shape)}`,
      );
    }
  }
  sameDevice(op, { input: x, ...channel });
  const positions = x.shape.slice(2).reduce((a, b) => a * b, 1);
  // PyTorch refuses exactly one position (a variance of one value); an empty input passes.
  if (useInputStats && positions === 1) {
    throw new RangeError(
      `${op}: expected more than 1 spatial element when using input statistics, got input of shape ${
        formatShape(x.shape)
      }`,
    );
  }
  if (!useInputStats && (!runningMean || !runningVar)) {
    throw new Error(
      `${op}: runningMean and runningVar are required when useInputStats is false`,
    );
  }
  return forwardScope(() => {
    const x3 = x.reshape([n, c, positions]);
    const view = [1, c, 1];
    if (!useInputStats) {
      // Folded into one scale and one shift per channel, as batch norm's evaluation.
      let scale = runningVar!.add(eps).rsqrt();
      if (weight) scale = scale.mul(weight);
      const shift = bias ? bias.sub(runningMean!.mul(scale)) : runningMean!.mul(scale).neg();
      return x3.mul(scale.reshape(view)).add(shift.reshape(view)).reshape(x.shape);
    }
    // An empty input has no statistics to learn from (a mean of no values is NaN).
    if ((runningMean || runningVar) && x.numel() > 0) {
      updateRunning(x3, runningMean, runningVar, momentum);
    }
    return normalized(x3, weight, bias, eps).reshape(x.shape);
  });
}

/**
 * Each row of `x` [N, C, L] normalized with its mean and biased variance, then `weight` and
 * `bias` per channel: the forward without a graph, and one node with batch norm's closed-form
 * backward (per row: gsum = Σ g, gxc = Σ g · centered).
 */
function normalized(x: Tensor, weight: Tensor | null, bias: Tensor | null, eps: number): Tensor {
  const [, c, positions] = x.shape;
  const view = [1, c, 1];
  const forward = () => {
    const mean = x.mean(2, true);
    const centered = x.sub(mean);
    const invstd = centered.square().mean(2, true).add(eps).rsqrt();
    let y = centered.mul(weight ? invstd.mul(weight.reshape(view)) : invstd);
    if (bias) y = y.add(bias.reshape(view));
    return { y, centered, invstd };
  };
  const { y, centered, invstd } = noGrad(() => tidy(forward));
  return record("instanceNorm", [x, weight, bias], y, ([g]) => {
    // Under createGraph the forward, re-run with a graph, is differentiated instead.
    if (recording()) return recomputedBackward([x, weight, bias], () => forward().y, g!);
    const gsum = g!.sum(2, true);
    const gxc = g!.mul(centered).sum(2, true);
    const gw = weight?.requiresGrad ? gxc.mul(invstd).sum([0, 2]) : null;
    const gb = bias?.requiresGrad ? gsum.sum([0, 2]) : null;
    let gx: Tensor | null = null;
    if (x.requiresGrad) {
      // dx = a · (g - gsum / L - centered · invstd² · gxc / L), a = weight · invstd.
      const a = weight ? invstd.mul(weight.reshape(view)) : invstd;
      const b = a.mul(invstd.square()).mul(gxc).mul(-1 / positions);
      const k = a.mul(gsum).mul(-1 / positions);
      gx = g!.mul(a).add(centered.mul(b)).add(k);
    }
    return [gx, gw, gb];
  });
}

/**
 * PyTorch's update: each instance's copy of the statistics moves by `momentum` towards that
 * instance's mean and unbiased variance, then the N copies are averaged.
 */
function updateRunning(
  x: Tensor,
  runningMean: Tensor | null,
  runningVar: Tensor | null,
  momentum: number,
): void {
  noGrad(() =>
    tidy(() => {
      const c = x.shape[1];
      const blend = (running: Tensor, stat: Tensor) =>
        stat.mul(momentum).add(running.reshape([1, c]).mul(1 - momentum)).mean(0);
      if (runningMean) {
        runningMean._assign(blend(runningMean, x.mean(2)).to(runningMean.dtype));
      }
      if (runningVar) {
        runningVar._assign(blend(runningVar, x.var(2)).to(runningVar.dtype));
      }
    })
  );
}

/** Options of {@link localResponseNorm}. */
export interface LocalResponseNormOptions {
  /** Multiplies the window's mean square (default 1e-4). */
  alpha?: number;
  /** The exponent (default 0.75). */
  beta?: number;
  /** Added before the exponent (default 1). */
  k?: number;
}

/**
 * `x / (k + alpha · mean(x²))^beta` with the mean over a window of `size`
 * neighbouring channels (dim 1 of [N, C, ...], zero-padded: `size / 2`
 * before, `(size - 1) / 2` after, rounded down, the mean always divided by
 * `size`), as `torch.nn.functional.local_response_norm`.
 */
export function localResponseNorm(
  x: Tensor,
  size: number,
  options: LocalResponseNormOptions = {},
): Tensor {
  const op = "localResponseNorm";
  checkFloatInput(op, x);
  if (x.ndim < 3) {
    throw new RangeError(
      `${op}: expected an input of at least 3 dims [N, C, ...], got shape ${formatShape(x.shape)}`,
    );
  }
  if (!Number.isInteger(size) || size < 1) {
    throw new RangeError(`${op}: size must be a positive integer, got ${size}`);
  }
  const alpha = checkFinite(op, "alpha", options.alpha ?? 1e-4);
  const beta = checkFinite(op, "beta", options.beta ?? 0.75);
  const k = checkFinite(op, "k", options.k ?? 1);
  if (x.numel() === 0) return x;
  return forwardScope(() => {
    const c = x.shape[1];
    const square = x.mul(x);
    const pad = (n: number) =>
      zeros(x.shape.map((s, i) => (i === 1 ? n : s)), { dtype: x.dtype, device: x.device });
    const before = Math.floor(size / 2);
    const after = Math.floor((size - 1) / 2);
    const parts = [before > 0 ? pad(before) : null, square, after > 0 ? pad(after) : null];
    const padded = cat(parts.filter((t): t is Tensor => t !== null), 1);
    // PyTorch's average pool over the window: the sum in window order, then / size.
    let sum = padded.narrow(1, 0, c);
    for (let i = 1; i < size; i++) sum = sum.add(padded.narrow(1, i, c));
    return x.div(sum.div(size).mul(alpha).add(k).pow(beta));
  });
}
