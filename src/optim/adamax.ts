/**
 * Adamax, as `torch.optim.Adamax`.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { Optimizer, type ParamGroup, type ParamGroupInput, type ScalarFn } from "./optimizer.ts";
import { checkBetas, checkNumber, copyBetas } from "./util.ts";

/** Options of {@link Adamax}. */
export interface AdamaxOptions {
  /** Learning rate (default 2e-3). */
  lr?: number;
  /** Decay rates of the first moment and of the infinity norm (default [0.9, 0.999]). */
  betas?: readonly [number, number];
  /** Added to |g| before the infinity norm's maximum (default 1e-8). */
  eps?: number;
  /** L2 penalty added to the gradient (default 0). */
  weightDecay?: number;
  /** Maximize the objective instead (default false). */
  maximize?: boolean;
}

/** The options of an Adamax parameter group, all set. */
export type AdamaxGroupOptions = Required<AdamaxOptions>;

/**
 * Adamax (Adam with the infinity norm) with PyTorch's update:
 * `g = grad + weightDecay·p`, `expAvg = beta1·expAvg + (1 − beta1)·g`,
 * `expInf = max(beta2·expInf, |g| + eps)`,
 * `p = p − lr / (1 − beta1^step)·expAvg / expInf`. State per parameter:
 * `step` (a number), `expAvg` and `expInf`.
 */
export class Adamax extends Optimizer<AdamaxGroupOptions> {
  /** An optimizer over `params` (tensors or parameter groups). */
  constructor(
    params: Iterable<Tensor> | Iterable<ParamGroupInput<AdamaxGroupOptions>>,
    options: AdamaxOptions = {},
  ) {
    if (options === null || typeof options !== "object") {
      throw new TypeError("Adamax: options must be an object");
    }
    // In PyTorch's order, which its state dicts show.
    super(params, {
      lr: options.lr ?? 2e-3,
      betas: copyBetas(options.betas),
      eps: options.eps ?? 1e-8,
      weightDecay: options.weightDecay ?? 0,
      maximize: options.maximize ?? false,
    }, options);
  }

  /** The state a stepped parameter has (a loaded one lacking any is refused). */
  protected override requiredState(): { numbers: readonly string[]; tensors: readonly string[] } {
    return { numbers: ["step"], tensors: ["expAvg", "expInf"] };
  }

  /** Checks one group's options. */
  protected override validateOptions(o: AdamaxGroupOptions): void {
    checkNumber("Adamax", "learning rate", o.lr);
    checkNumber("Adamax", "epsilon value", o.eps);
    checkBetas("Adamax", o.betas);
    checkNumber("Adamax", "weight_decay value", o.weightDecay);
    if (typeof o.maximize !== "boolean") {
      throw new TypeError("Adamax: maximize must be a boolean");
    }
  }

  /** PyTorch's (single-tensor) Adamax update of one group. */
  protected override updateGroup(group: ParamGroup<AdamaxGroupOptions>, scalar: ScalarFn): void {
    const { lr, eps, weightDecay, maximize } = group;
    const [beta1, beta2] = group.betas;
    for (const p of group.params) {
      const grad = p.grad;
      if (!grad) continue;
      const state = this.stateOf(p);
      if (typeof state.step !== "number") {
        state.step = 0;
        state.expAvg = this.zerosState(p);
        state.expInf = this.zerosState(p);
      }
      const step = state.step + 1;
      state.step = step;
      let g = maximize ? grad.neg() : grad;
      if (weightDecay !== 0) g = g.add(p.mul(scalar(weightDecay, p)));
      const expAvg = state.expAvg as Tensor;
      const expInf = state.expInf as Tensor;
      expAvg._assign(expAvg.mul(scalar(beta1, p)).add(g.mul(scalar(1 - beta1, p))));
      expInf._assign(expInf.mul(scalar(beta2, p)).maximum(g.abs().add(scalar(eps, p))));
      // The bias correction in float64 on the host, as PyTorch computes it in Python.
      const clr = lr / (1 - beta1 ** step);
      // addcdiv_(expAvg, expInf, value=-clr) computes (value·expAvg)/expInf.
      p._assign(p.add(expAvg.mul(scalar(-clr, p)).div(expInf)));
    }
  }
}
