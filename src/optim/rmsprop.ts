/**
 * RMSprop, as `torch.optim.RMSprop`.
 * @module
 */

import { Tensor } from "../tensor.ts";
import { Optimizer, type ParamGroup, type ParamGroupInput, type ScalarFn } from "./optimizer.ts";
import { checkNumber } from "./util.ts";

/** Options of {@link RMSprop}. */
export interface RMSpropOptions {
  /** Learning rate (default 1e-2). */
  lr?: number;
  /** Smoothing constant of the squared-gradient average (default 0.99). */
  alpha?: number;
  /** Added to the denominator after the square root (default 1e-8). */
  eps?: number;
  /** L2 penalty added to the gradient (default 0). */
  weightDecay?: number;
  /** Momentum factor (default 0). */
  momentum?: number;
  /** Normalise by an estimate of the gradient's variance instead (default false). */
  centered?: boolean;
  /** Maximize the objective instead (default false). */
  maximize?: boolean;
}

/** The options of an RMSprop parameter group, all set. */
export type RMSpropGroupOptions = Required<RMSpropOptions>;

/**
 * RMSprop with PyTorch's update: `g = grad + weightDecay·p`,
 * `squareAvg = alpha·squareAvg + (1 − alpha)·g²`; centered, also
 * `gradAvg = alpha·gradAvg + (1 − alpha)·g` and the variance
 * `squareAvg − gradAvg²` is used; `avg = √(…) + eps`. With momentum,
 * `buf = momentum·buf + g / avg` and `p = p − lr·buf`, else
 * `p = p − lr·g / avg`. State per parameter: `step`, `squareAvg`, and
 * `momentumBuffer` / `gradAvg` when used.
 */
export class RMSprop extends Optimizer<RMSpropGroupOptions> {
  /** An optimizer over `params` (tensors or parameter groups). */
  constructor(
    params: Iterable<Tensor> | Iterable<ParamGroupInput<RMSpropGroupOptions>>,
    options: RMSpropOptions = {},
  ) {
    if (options === null || typeof options !== "object") {
      throw new TypeError("RMSprop: options must be an object");
    }
    // In PyTorch's order, which its state dicts show.
    super(params, {
      lr: options.lr ?? 1e-2,
      momentum: options.momentum ?? 0,
      alpha: options.alpha ?? 0.99,
      eps: options.eps ?? 1e-8,
      centered: options.centered ?? false,
      weightDecay: options.weightDecay ?? 0,
      maximize: options.maximize ?? false,
    }, options);
  }

  /** Checks one group's options. */
  protected override validateOptions(o: RMSpropGroupOptions): void {
    checkNumber("RMSprop", "learning rate", o.lr);
    checkNumber("RMSprop", "epsilon value", o.eps);
    checkNumber("RMSprop", "momentum value", o.momentum);
    checkNumber("RMSprop", "weight_decay value", o.weightDecay);
    checkNumber("RMSprop", "alpha value", o.alpha);
    if (typeof o.centered !== "boolean" || typeof o.maximize !== "boolean") {
      throw new TypeError("RMSprop: centered and maximize must be booleans");
    }
  }

  /** PyTorch's (single-tensor) RMSprop update of one group. */
  protected override updateGroup(group: ParamGroup<RMSpropGroupOptions>, scalar: ScalarFn): void {
    const { lr, alpha, eps, weightDecay, momentum, centered, maximize } = group;
    for (const p of group.params) {
      const grad = p.grad;
      if (!grad) continue;
      const state = this.stateOf(p);
      if (typeof state.step !== "number") {
        state.step = 0;
        state.squareAvg = this.zerosState(p);
      }
      // Buffers a group's later options need (momentum or centered turned on after some steps).
      if (momentum > 0 && !(state.momentumBuffer instanceof Tensor)) {
        state.momentumBuffer = this.zerosState(p);
      }
      if (centered && !(state.gradAvg instanceof Tensor)) state.gradAvg = this.zerosState(p);
      state.step += 1;
      let g = maximize ? grad.neg() : grad;
      if (weightDecay !== 0) g = g.add(p.mul(scalar(weightDecay, p)));
      const squareAvg = state.squareAvg as Tensor;
      // addcmul_(g, g, value=1-alpha) computes value·g·g in that order.
      squareAvg._assign(
        squareAvg.mul(scalar(alpha, p)).add(g.mul(scalar(1 - alpha, p)).mul(g)),
      );
      let avg: Tensor;
      if (centered) {
        const gradAvg = state.gradAvg as Tensor;
        gradAvg._assign(gradAvg.mul(scalar(alpha, p)).add(g.mul(scalar(1 - alpha, p))));
        avg = squareAvg.add(gradAvg.mul(scalar(-1, p)).mul(gradAvg)).sqrt();
      } else avg = squareAvg.sqrt();
      avg = avg.add(scalar(eps, p));
      if (momentum > 0) {
        const buf = state.momentumBuffer as Tensor;
        buf._assign(buf.mul(scalar(momentum, p)).add(g.div(avg)));
        p._assign(p.add(buf.mul(scalar(-lr, p))));
      } else {
        // addcdiv_(g, avg, value=-lr) computes (value·g)/avg.
        p._assign(p.add(g.mul(scalar(-lr, p)).div(avg)));
      }
    }
  }
}
