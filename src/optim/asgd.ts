/**
 * Averaged SGD, as `torch.optim.ASGD`.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { Optimizer, type ParamGroup, type ParamGroupInput, type ScalarFn } from "./optimizer.ts";
import { checkNumber } from "./util.ts";

/** Options of {@link ASGD}. */
export interface ASGDOptions {
  /** Learning rate (default 1e-2). */
  lr?: number;
  /** Decay term (default 1e-4). */
  lambd?: number;
  /** Power of the learning-rate decay `eta` (default 0.75). */
  alpha?: number;
  /** The step from which the average `ax` starts to average (default 1e6). */
  t0?: number;
  /** L2 penalty added to the gradient (default 0). */
  weightDecay?: number;
  /** Maximize the objective instead (default false). */
  maximize?: boolean;
}

/** The options of an ASGD parameter group, all set. */
export type ASGDGroupOptions = Required<ASGDOptions>;

/**
 * Averaged stochastic gradient descent with PyTorch 1.13's update:
 * `g = grad + weightDecay·p`, `p = p·(1 − lambd·eta) − eta·g`, then the
 * average `ax = p` while `mu` is 1, else `ax = ax + (p − ax)·mu`; after the
 * step `eta = lr / (1 + lambd·lr·step)^alpha` and
 * `mu = 1 / max(1, step − t0)`. The averaged parameters are the state's
 * `ax` (the parameters themselves are the plain SGD iterate).
 * State per parameter: `step`, `eta` and `mu` (numbers, PyTorch's float32
 * 0-d tensors, rounded as they are), and `ax`.
 */
export class ASGD extends Optimizer<ASGDGroupOptions> {
  /** An optimizer over `params` (tensors or parameter groups). */
  constructor(
    params: Iterable<Tensor> | Iterable<ParamGroupInput<ASGDGroupOptions>>,
    options: ASGDOptions = {},
  ) {
    if (options === null || typeof options !== "object") {
      throw new TypeError("ASGD: options must be an object");
    }
    // In PyTorch's order, which its state dicts show.
    super(params, {
      lr: options.lr ?? 1e-2,
      lambd: options.lambd ?? 1e-4,
      alpha: options.alpha ?? 0.75,
      t0: options.t0 ?? 1e6,
      weightDecay: options.weightDecay ?? 0,
      maximize: options.maximize ?? false,
    }, options);
  }

  /** The state a stepped parameter has (a loaded one lacking any is refused). */
  protected override requiredState(): { numbers: readonly string[]; tensors: readonly string[] } {
    return { numbers: ["step", "eta", "mu"], tensors: ["ax"] };
  }

  /** Checks one group's options. */
  protected override validateOptions(o: ASGDGroupOptions): void {
    checkNumber("ASGD", "learning rate", o.lr);
    checkNumber("ASGD", "weight_decay value", o.weightDecay);
    // PyTorch checks only the two above; NaN or a string would still make every number NaN.
    for (const key of ["lambd", "alpha", "t0"] as const) {
      if (typeof o[key] !== "number" || Number.isNaN(o[key])) {
        throw new TypeError(`ASGD: ${key} must be a number, got ${String(o[key])}`);
      }
    }
    if (typeof o.maximize !== "boolean") {
      throw new TypeError("ASGD: maximize must be a boolean");
    }
  }

  /** PyTorch's (single-tensor) ASGD update of one group. */
  protected override updateGroup(group: ParamGroup<ASGDGroupOptions>, scalar: ScalarFn): void {
    const { lr, lambd, alpha, t0, weightDecay, maximize } = group;
    const f = Math.fround;
    for (const p of group.params) {
      const grad = p.grad;
      if (!grad) continue;
      const state = this.stateOf(p);
      if (typeof state.step !== "number") {
        state.step = 0;
        state.eta = f(lr);
        state.mu = 1;
        state.ax = this.zerosState(p);
      }
      // step, eta and mu are float32 0-d tensors in PyTorch: their values are float32's.
      const step = f(state.step + 1);
      state.step = step;
      const eta = state.eta as number;
      const mu = state.mu as number;
      let g = maximize ? grad.neg() : grad;
      if (weightDecay !== 0) g = g.add(p.mul(scalar(weightDecay, p)));
      const decayed = p.mul(scalar(1 - lambd * eta, p));
      p._assign(decayed.add(g.mul(scalar(-eta, p))));
      const ax = state.ax as Tensor;
      if (mu !== 1) ax._assign(ax.add(p.sub(ax).mul(scalar(mu, p))));
      else ax._assign(p);
      state.eta = f(lr / (1 + lambd * lr * step) ** alpha);
      state.mu = f(1 / Math.max(1, step - t0));
    }
  }
}
