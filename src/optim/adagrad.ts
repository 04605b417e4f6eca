/**
 * Adagrad, as `torch.optim.Adagrad`.
 * @module
 */

import { Tensor } from "../tensor.ts";
import { full } from "../ops/factory.ts";
import { Optimizer, type ParamGroup, type ParamGroupInput, type ScalarFn } from "./optimizer.ts";
import { checkNumber } from "./util.ts";

/** Options of {@link Adagrad}. */
export interface AdagradOptions {
  /** Learning rate (default 1e-2). */
  lr?: number;
  /** Decay of the learning rate per step: `lr / (1 + (step − 1)·lrDecay)` (default 0). */
  lrDecay?: number;
  /** L2 penalty added to the gradient (default 0). */
  weightDecay?: number;
  /** Starting value of the sum of squared gradients (default 0). */
  initialAccumulatorValue?: number;
  /** Added to the denominator after the square root (default 1e-10). */
  eps?: number;
  /** Maximize the objective instead (default false). */
  maximize?: boolean;
}

/** The options of an Adagrad parameter group, all set. */
export type AdagradGroupOptions = Required<AdagradOptions>;

/**
 * Adagrad with PyTorch's update: `g = grad + weightDecay·p`,
 * `sum = sum + g²`, `p = p − clr·g / (√sum + eps)` with
 * `clr = lr / (1 + (step − 1)·lrDecay)`. State per parameter: `step` and
 * `sum`, made when the optimizer is built (as PyTorch does), so a state
 * dict taken before the first step already holds them.
 */
export class Adagrad extends Optimizer<AdagradGroupOptions> {
  /** An optimizer over `params` (tensors or parameter groups). */
  constructor(
    params: Iterable<Tensor> | Iterable<ParamGroupInput<AdagradGroupOptions>>,
    options: AdagradOptions = {},
  ) {
    if (options === null || typeof options !== "object") {
      throw new TypeError("Adagrad: options must be an object");
    }
    // In PyTorch's order, which its state dicts show.
    super(params, {
      lr: options.lr ?? 1e-2,
      lrDecay: options.lrDecay ?? 0,
      eps: options.eps ?? 1e-10,
      weightDecay: options.weightDecay ?? 0,
      initialAccumulatorValue: options.initialAccumulatorValue ?? 0,
      maximize: options.maximize ?? false,
    }, options);
    for (const group of this.paramGroups) {
      for (const p of group.params) this.#initState(p, group.initialAccumulatorValue);
    }
  }

  #initState(p: Tensor, initialAccumulatorValue: number): void {
    const state = this.stateOf(p);
    state.step = 0;
    const sum = full([...p.shape], initialAccumulatorValue, { dtype: p.dtype, device: p.device });
    sum.storage.persistent = true;
    state.sum = sum;
  }

  /** Checks one group's options. */
  protected override validateOptions(o: AdagradGroupOptions): void {
    checkNumber("Adagrad", "learning rate", o.lr);
    checkNumber("Adagrad", "lr_decay value", o.lrDecay);
    checkNumber("Adagrad", "weight_decay value", o.weightDecay);
    checkNumber("Adagrad", "initial_accumulator_value value", o.initialAccumulatorValue);
    checkNumber("Adagrad", "epsilon value", o.eps);
    if (typeof o.maximize !== "boolean") {
      throw new TypeError("Adagrad: maximize must be a boolean");
    }
  }

  /** PyTorch's (single-tensor) Adagrad update of one group. */
  protected override updateGroup(group: ParamGroup<AdagradGroupOptions>, scalar: ScalarFn): void {
    const { lr, lrDecay, weightDecay, eps, maximize } = group;
    for (const p of group.params) {
      const grad = p.grad;
      if (!grad) continue;
      // A group added after construction (or state cleared by loadStateDict) starts here.
      if (!(this.state.get(p)?.sum instanceof Tensor)) {
        this.#initState(p, group.initialAccumulatorValue);
      }
      const state = this.stateOf(p);
      const step = (state.step as number) + 1;
      state.step = step;
      let g = maximize ? grad.neg() : grad;
      if (weightDecay !== 0) g = g.add(p.mul(scalar(weightDecay, p)));
      // The decayed rate in float64 on the host, as PyTorch computes it in Python.
      const clr = lr / (1 + (step - 1) * lrDecay);
      const sum = state.sum as Tensor;
      sum._assign(sum.add(g.mul(g)));
      const std = sum.sqrt().add(scalar(eps, p));
      // addcdiv_(g, std, value=-clr) computes (value·g)/std.
      p._assign(p.add(g.mul(scalar(-clr, p)).div(std)));
    }
  }
}
