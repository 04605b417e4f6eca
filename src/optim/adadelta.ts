/**
 * Adadelta, as `torch.optim.Adadelta`.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { Optimizer, type ParamGroup, type ParamGroupInput, type ScalarFn } from "./optimizer.ts";
import { checkNumber } from "./util.ts";

/** Options of {@link Adadelta}. */
export interface AdadeltaOptions {
  /** Scales the update (default 1.0). */
  lr?: number;
  /** Decay of the running averages of squared gradients and updates, in [0, 1] (default 0.9). */
  rho?: number;
  /** Added inside both square roots (default 1e-6). */
  eps?: number;
  /** L2 penalty added to the gradient (default 0). */
  weightDecay?: number;
  /** Maximize the objective instead (default false). */
  maximize?: boolean;
}

/** The options of an Adadelta parameter group, all set. */
export type AdadeltaGroupOptions = Required<AdadeltaOptions>;

/**
 * Adadelta with PyTorch's update: `g = grad + weightDecay·p`,
 * `squareAvg = rho·squareAvg + (1 − rho)·g²`,
 * `delta = √(accDelta + eps) / √(squareAvg + eps)·g`,
 * `accDelta = rho·accDelta + (1 − rho)·delta²`, `p = p − lr·delta`. State
 * per parameter: `step` (a number), `squareAvg` and `accDelta`.
 */
export class Adadelta extends Optimizer<AdadeltaGroupOptions> {
  /** An optimizer over `params` (tensors or parameter groups). */
  constructor(
    params: Iterable<Tensor> | Iterable<ParamGroupInput<AdadeltaGroupOptions>>,
    options: AdadeltaOptions = {},
  ) {
    if (options === null || typeof options !== "object") {
      throw new TypeError("Adadelta: options must be an object");
    }
    // In PyTorch's order, which its state dicts show.
    super(params, {
      lr: options.lr ?? 1.0,
      rho: options.rho ?? 0.9,
      eps: options.eps ?? 1e-6,
      weightDecay: options.weightDecay ?? 0,
      maximize: options.maximize ?? false,
    }, options);
  }

  /** The state a stepped parameter has (a loaded one lacking any is refused). */
  protected override requiredState(): { numbers: readonly string[]; tensors: readonly string[] } {
    return { numbers: ["step"], tensors: ["squareAvg", "accDelta"] };
  }

  /** Checks one group's options. */
  protected override validateOptions(o: AdadeltaGroupOptions): void {
    checkNumber("Adadelta", "learning rate", o.lr);
    // PyTorch allows rho = 1 (the averages then never change), so not checkNumber's [0, 1).
    if (typeof o.rho !== "number" || !(o.rho >= 0 && o.rho <= 1)) {
      throw new RangeError(
        `Adadelta: invalid rho value: ${o.rho} (expected a number >= 0 and <= 1)`,
      );
    }
    checkNumber("Adadelta", "epsilon value", o.eps);
    checkNumber("Adadelta", "weight_decay value", o.weightDecay);
    if (typeof o.maximize !== "boolean") {
      throw new TypeError("Adadelta: maximize must be a boolean");
    }
  }

  /** PyTorch's (single-tensor) Adadelta update of one group. */
  protected override updateGroup(group: ParamGroup<AdadeltaGroupOptions>, scalar: ScalarFn): void {
    const { lr, rho, eps, weightDecay, maximize } = group;
    for (const p of group.params) {
      const grad = p.grad;
      if (!grad) continue;
      const state = this.stateOf(p);
      if (typeof state.step !== "number") {
        state.step = 0;
        state.squareAvg = this.zerosState(p);
        state.accDelta = this.zerosState(p);
      }
      // PyTorch 1.13 counts Adadelta's steps but its update never reads them.
      state.step += 1;
      let g = maximize ? grad.neg() : grad;
      if (weightDecay !== 0) g = g.add(p.mul(scalar(weightDecay, p)));
      const squareAvg = state.squareAvg as Tensor;
      const accDelta = state.accDelta as Tensor;
      const epsT = scalar(eps, p);
      // addcmul_(t, t, value=1-rho) computes value·t·t in that order.
      squareAvg._assign(squareAvg.mul(scalar(rho, p)).add(g.mul(scalar(1 - rho, p)).mul(g)));
      const std = squareAvg.add(epsT).sqrt();
      const delta = accDelta.add(epsT).sqrt().div(std).mul(g);
      accDelta._assign(accDelta.mul(scalar(rho, p)).add(delta.mul(scalar(1 - rho, p)).mul(delta)));
      // add_(delta, alpha=-lr) computes p + alpha·delta.
      p._assign(p.add(delta.mul(scalar(-lr, p))));
    }
  }
}
