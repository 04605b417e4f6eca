/**
 * Stochastic gradient descent, as `torch.optim.SGD`.
 * @module
 */

import { Tensor } from "../tensor.ts";
import { Optimizer, type ParamGroup, type ParamGroupInput, type ScalarFn } from "./optimizer.ts";
import { checkNumber } from "./util.ts";
import { hasKernel, launch } from "../ops/util.ts";

/** Options of {@link SGD}. */
export interface SGDOptions {
  /** Learning rate (required, here or in every parameter group). */
  lr?: number;
  /** Momentum factor (default 0). */
  momentum?: number;
  /** Dampening of the momentum (default 0); not applied on the first step. */
  dampening?: number;
  /** Nesterov momentum (default false; needs momentum > 0 and dampening 0). */
  nesterov?: boolean;
  /** L2 penalty added to the gradient (default 0). */
  weightDecay?: number;
  /** Maximize the objective instead (default false). */
  maximize?: boolean;
}

/** The options of an SGD parameter group, all set. */
export type SGDGroupOptions = Required<SGDOptions>;

/**
 * SGD with optional momentum, dampening, Nesterov momentum and weight decay,
 * with PyTorch's update rule: `g = grad + weightDecay·p`; with momentum,
 * `buf = g` on the first step, then `buf = momentum·buf + (1 − dampening)·g`,
 * and `g = nesterov ? g + momentum·buf : buf`; finally `p = p − lr·g`.
 * The state of a parameter is `momentumBuffer`.
 */
export class SGD extends Optimizer<SGDGroupOptions> {
  /** An optimizer over `params` (tensors or parameter groups). */
  constructor(
    params: Iterable<Tensor> | Iterable<ParamGroupInput<SGDGroupOptions>>,
    options: SGDOptions,
  ) {
    if (options === null || typeof options !== "object") {
      throw new TypeError("SGD: options { lr, ... } are required");
    }
    // In PyTorch's order, which its state dicts show.
    super(params, {
      // Left out when every group gives its own: each group's is checked.
      lr: options.lr as number,
      momentum: options.momentum ?? 0,
      dampening: options.dampening ?? 0,
      weightDecay: options.weightDecay ?? 0,
      nesterov: options.nesterov ?? false,
      maximize: options.maximize ?? false,
    }, options);
  }

  /** Checks one group's options. */
  protected override validateOptions(o: SGDGroupOptions, defaults = false): void {
    if (o.lr === undefined && !defaults) {
      throw new TypeError(
        "SGD: the learning rate lr is required (in the options, or in every parameter group)",
      );
    }
    if (o.lr !== undefined) checkNumber("SGD", "learning rate", o.lr);
    checkNumber("SGD", "momentum value", o.momentum);
    checkNumber("SGD", "dampening value", o.dampening, -Infinity);
    checkNumber("SGD", "weight_decay value", o.weightDecay);
    if (typeof o.nesterov !== "boolean" || typeof o.maximize !== "boolean") {
      throw new TypeError("SGD: nesterov and maximize must be booleans");
    }
    if (o.nesterov && (o.momentum <= 0 || o.dampening !== 0)) {
      throw new RangeError(
        `SGD: Nesterov momentum requires a momentum and zero dampening (got momentum ${o.momentum}, dampening ${o.dampening})`,
      );
    }
  }

  /**
   * PyTorch's SGD update of one group: the backend's fused `sgd` kernel
   * where it has one (without momentum), else composed from elementwise ops.
   */
  protected override updateGroup(group: ParamGroup<SGDGroupOptions>, scalar: ScalarFn): void {
    const { lr, momentum, dampening, nesterov, weightDecay, maximize } = group;
    for (const p of group.params) {
      const grad = p.grad;
      if (!grad) continue;
      if (
        momentum === 0 && hasKernel(p.device, "sgd") && grad.device === p.device &&
        grad.dtype === p.dtype
      ) {
        // One kernel instead of 2-4 per parameter, the same numbers.
        launch(p.device, "sgd", {
          param: p.storage.buffer("SGD.step"),
          grad: grad.storage.buffer("SGD.step"),
          numel: p.numel(),
          lr,
          weightDecay,
          maximize,
          dtype: p.dtype,
        });
        p.storage.markModified();
        continue;
      }
      let d = maximize ? grad.neg() : grad;
      if (weightDecay !== 0) d = d.add(p.mul(scalar(weightDecay, p)));
      if (momentum !== 0) {
        const state = this.stateOf(p);
        let buf = state.momentumBuffer;
        if (buf instanceof Tensor) {
          buf._assign(buf.mul(scalar(momentum, p)).add(d.mul(scalar(1 - dampening, p))));
        } else {
          // The first step takes the gradient itself: no dampening.
          buf = d.clone();
          buf.storage.persistent = true;
          state.momentumBuffer = buf;
        }
        d = nesterov ? d.add(buf.mul(scalar(momentum, p))) : buf;
      }
      p._assign(p.sub(d.mul(scalar(lr, p))));
    }
  }
}
