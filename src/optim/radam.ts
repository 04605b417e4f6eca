/**
 * RAdam, as `torch.optim.RAdam`.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { Optimizer, type ParamGroup, type ParamGroupInput, type ScalarFn } from "./optimizer.ts";
import { checkBetas, checkNumber, copyBetas } from "./util.ts";

/** Options of {@link RAdam}. */
export interface RAdamOptions {
  /** Learning rate (default 1e-3). */
  lr?: number;
  /** Decay rates of the first and second moment estimates (default [0.9, 0.999]). */
  betas?: readonly [number, number];
  /** Added to the denominator (default 1e-8). */
  eps?: number;
  /** L2 penalty added to the gradient (default 0). */
  weightDecay?: number;
}

/** The options of an RAdam parameter group, all set. */
export type RAdamGroupOptions = Required<RAdamOptions>;

/**
 * RAdam (rectified Adam) with PyTorch 1.13's update: Adam's moments of
 * `g = grad + weightDecay·p`, `m̂ = expAvg / (1 − beta1^t)`,
 * `rho_inf = 2 / (1 − beta2) − 1`, `rho_t = rho_inf − 2t·beta2^t / (1 − beta2^t)`;
 * while `rho_t ≤ 5` (the first steps) `p = p − lr·m̂`, after it
 * `p = p − m̂·lr·(√(1 − beta2^t) / (√expAvgSq + eps))·rect` with PyTorch's
 * rectification `rect`. State per parameter: `step` (a number), `expAvg`
 * and `expAvgSq`. PyTorch 1.13's RAdam has no `maximize`.
 */
export class RAdam extends Optimizer<RAdamGroupOptions> {
  /** An optimizer over `params` (tensors or parameter groups). */
  constructor(
    params: Iterable<Tensor> | Iterable<ParamGroupInput<RAdamGroupOptions>>,
    options: RAdamOptions = {},
  ) {
    if (options === null || typeof options !== "object") {
      throw new TypeError("RAdam: options must be an object");
    }
    // In PyTorch's order, which its state dicts show.
    super(params, {
      lr: options.lr ?? 1e-3,
      betas: copyBetas(options.betas),
      eps: options.eps ?? 1e-8,
      weightDecay: options.weightDecay ?? 0,
    }, options);
  }

  /** The state a stepped parameter has (a loaded one lacking any is refused). */
  protected override requiredState(): { numbers: readonly string[]; tensors: readonly string[] } {
    return { numbers: ["step"], tensors: ["expAvg", "expAvgSq"] };
  }

  /** Checks one group's options. */
  protected override validateOptions(o: RAdamGroupOptions): void {
    checkNumber("RAdam", "learning rate", o.lr);
    checkNumber("RAdam", "epsilon value", o.eps);
    checkBetas("RAdam", o.betas);
    checkNumber("RAdam", "weight_decay value", o.weightDecay);
  }

  /** PyTorch's (single-tensor) RAdam update of one group. */
  protected override updateGroup(group: ParamGroup<RAdamGroupOptions>, scalar: ScalarFn): void {
    const { lr, eps, weightDecay } = group;
    const [beta1, beta2] = group.betas;
    for (const p of group.params) {
      const grad = p.grad;
      if (!grad) continue;
      const state = this.stateOf(p);
      if (typeof state.step !== "number") {
        state.step = 0;
        state.expAvg = this.zerosState(p);
        state.expAvgSq = this.zerosState(p);
      }
      const step = state.step + 1;
      state.step = step;
      // Everything scalar in float64 on the host, as PyTorch computes it in Python: the branch
      // taken must be PyTorch's.
      const correction1 = 1 - beta1 ** step;
      const correction2 = 1 - beta2 ** step;
      const rhoInf = 2 / (1 - beta2) - 1;
      const rhoT = rhoInf - 2 * step * beta2 ** step / correction2;
      const g = weightDecay !== 0 ? grad.add(p.mul(scalar(weightDecay, p))) : grad;
      const expAvg = state.expAvg as Tensor;
      const expAvgSq = state.expAvgSq as Tensor;
      expAvg._assign(expAvg.mul(scalar(beta1, p)).add(g.mul(scalar(1 - beta1, p))));
      // addcmul_(g, g, value=1-β2) computes value·g·g in that order.
      expAvgSq._assign(expAvgSq.mul(scalar(beta2, p)).add(g.mul(scalar(1 - beta2, p)).mul(g)));
      const corrected = expAvg.div(scalar(correction1, p));
      let update: Tensor;
      if (rhoT > 5) {
        const rect = Math.sqrt(
          (rhoT - 4) * (rhoT - 2) * rhoInf / ((rhoInf - 4) * (rhoInf - 2) * rhoT),
        );
        const adaptiveLr = scalar(Math.sqrt(correction2), p).div(
          expAvgSq.sqrt().add(scalar(eps, p)),
        );
        // PyTorch's left-to-right products: ((m̂·lr)·adaptiveLr)·rect.
        update = corrected.mul(scalar(lr, p)).mul(adaptiveLr).mul(scalar(rect, p));
      } else update = corrected.mul(scalar(lr, p));
      // add_(update, alpha=-1).
      p._assign(p.sub(update));
    }
  }
}
