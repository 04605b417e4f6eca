/**
 * NAdam, as `torch.optim.NAdam`.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { Optimizer, type ParamGroup, type ParamGroupInput, type ScalarFn } from "./optimizer.ts";
import { checkBetas, checkNumber, copyBetas } from "./util.ts";

/** Options of {@link NAdam}. */
export interface NAdamOptions {
  /** Learning rate (default 2e-3). */
  lr?: number;
  /** Decay rates of the first and second moment estimates (default [0.9, 0.999]). */
  betas?: readonly [number, number];
  /** Added to the denominator (default 1e-8). */
  eps?: number;
  /** L2 penalty added to the gradient (default 0). */
  weightDecay?: number;
  /** How fast the momentum schedule `mu_t` approaches `beta1` (default 4e-3). */
  momentumDecay?: number;
}

/** The options of an NAdam parameter group, all set. */
export type NAdamGroupOptions = Required<NAdamOptions>;

/**
 * NAdam (Adam with Nesterov momentum) with PyTorch 1.13's update:
 * `g = grad + weightDecay·p`, `mu_t = beta1·(1 − 0.5·0.96^(t·momentumDecay))`,
 * `muProduct = muProduct·mu_t`, Adam's moments, `denom = √(expAvgSq / (1 − beta2^t)) + eps`,
 * `p = p − lr·(1 − mu_t) / (1 − muProduct)·g / denom
 *      − lr·mu_{t+1} / (1 − muProduct·mu_{t+1})·expAvg / denom`.
 * State per parameter: `step` and `muProduct` (numbers; PyTorch's 0-d
 * tensors, so `mu_product` in a state dict), `expAvg` and `expAvgSq`.
 * PyTorch 1.13's NAdam has no `maximize`.
 */
export class NAdam extends Optimizer<NAdamGroupOptions> {
  /** An optimizer over `params` (tensors or parameter groups). */
  constructor(
    params: Iterable<Tensor> | Iterable<ParamGroupInput<NAdamGroupOptions>>,
    options: NAdamOptions = {},
  ) {
    if (options === null || typeof options !== "object") {
      throw new TypeError("NAdam: options must be an object");
    }
    // In PyTorch's order, which its state dicts show.
    super(params, {
      lr: options.lr ?? 2e-3,
      betas: copyBetas(options.betas),
      eps: options.eps ?? 1e-8,
      weightDecay: options.weightDecay ?? 0,
      momentumDecay: options.momentumDecay ?? 4e-3,
    }, options);
  }

  /** The state a stepped parameter has (a loaded one lacking any is refused). */
  protected override requiredState(): { numbers: readonly string[]; tensors: readonly string[] } {
    return { numbers: ["step", "muProduct"], tensors: ["expAvg", "expAvgSq"] };
  }

  /** Checks one group's options. */
  protected override validateOptions(o: NAdamGroupOptions): void {
    checkNumber("NAdam", "learning rate", o.lr);
    checkNumber("NAdam", "epsilon value", o.eps);
    checkBetas("NAdam", o.betas);
    checkNumber("NAdam", "weight_decay value", o.weightDecay);
    checkNumber("NAdam", "momentum_decay value", o.momentumDecay);
  }

  /** PyTorch's (single-tensor) NAdam update of one group. */
  protected override updateGroup(group: ParamGroup<NAdamGroupOptions>, scalar: ScalarFn): void {
    const { lr, eps, weightDecay, momentumDecay } = group;
    const [beta1, beta2] = group.betas;
    for (const p of group.params) {
      const grad = p.grad;
      if (!grad) continue;
      const state = this.stateOf(p);
      if (typeof state.step !== "number") {
        state.step = 0;
        state.muProduct = 1;
        state.expAvg = this.zerosState(p);
        state.expAvgSq = this.zerosState(p);
      }
      const step = state.step + 1;
      state.step = step;
      // PyTorch keeps mu_product as a float32 0-d tensor and multiplies it by
      // Python floats cast to float32: fround reproduces its roundings on the host.
      const f = Math.fround;
      const mu = beta1 * (1 - 0.5 * 0.96 ** (step * momentumDecay));
      const muNext = beta1 * (1 - 0.5 * 0.96 ** ((step + 1) * momentumDecay));
      const muProduct = f(f(state.muProduct as number) * f(mu));
      state.muProduct = muProduct;
      // mu twice is PyTorch 1.13's own formula (`mu_product * mu * mu_next`, after mu_product
      // already took mu), kept so that the trajectories are 1.13's.
      const muProductNext = f(f(muProduct * f(mu)) * f(muNext));
      const correction2 = 1 - beta2 ** step;
      const g = weightDecay !== 0 ? grad.add(p.mul(scalar(weightDecay, p))) : grad;
      const expAvg = state.expAvg as Tensor;
      const expAvgSq = state.expAvgSq as Tensor;
      expAvg._assign(expAvg.mul(scalar(beta1, p)).add(g.mul(scalar(1 - beta1, p))));
      // addcmul_(g, g, value=1-β2) computes value·g·g in that order.
      expAvgSq._assign(expAvgSq.mul(scalar(beta2, p)).add(g.mul(scalar(1 - beta2, p)).mul(g)));
      const denom = expAvgSq.div(scalar(correction2, p)).sqrt().add(scalar(eps, p));
      // Two addcdiv_ in PyTorch's order, each (value·t)/denom.
      const gradStep = -lr * (1 - mu) / (1 - muProduct);
      const avgStep = -lr * muNext / (1 - muProductNext);
      const half = p.add(g.mul(scalar(gradStep, p)).div(denom));
      p._assign(half.add(expAvg.mul(scalar(avgStep, p)).div(denom)));
    }
  }
}
