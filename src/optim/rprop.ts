/**
 * Rprop, as `torch.optim.Rprop`.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { Optimizer, type ParamGroup, type ParamGroupInput, type ScalarFn } from "./optimizer.ts";
import { checkNumber } from "./util.ts";

/** Options of {@link Rprop}. */
export interface RpropOptions {
  /** The initial step size of every element (default 1e-2). */
  lr?: number;
  /** `[etaminus, etaplus]`: step-size factors on a sign change and on the same sign, with `0 < etaminus < 1 < etaplus` (default [0.5, 1.2]). */
  etas?: readonly [number, number];
  /** `[min, max]`: the bounds of the step sizes (default [1e-6, 50]). */
  stepSizes?: readonly [number, number];
  /** Maximize the objective instead (default false). */
  maximize?: boolean;
}

/** The options of an Rprop parameter group, all set. */
export type RpropGroupOptions = Required<RpropOptions>;

function pair(value: readonly number[] | undefined, fallback: [number, number]): [number, number] {
  // A copy, so that editing the caller's array changes no group; a wrong length is left to the check.
  return (Array.isArray(value) ? [...value] : value ?? fallback) as [number, number];
}

/**
 * Resilient backpropagation with PyTorch's update, elementwise: where
 * `g·prev > 0` the step size is multiplied by `etaplus`, where `< 0` by
 * `etaminus` (and the gradient is taken as 0 for this step), then clamped
 * into `stepSizes`; `p = p − sign(g)·stepSize`, `prev = g`. Only the sign of
 * the gradient is used. State per parameter: `step` (a number, a Python int
 * in PyTorch 1.13), `prev` and `stepSize` (`step_size` in a state dict).
 */
export class Rprop extends Optimizer<RpropGroupOptions> {
  /** An optimizer over `params` (tensors or parameter groups). */
  constructor(
    params: Iterable<Tensor> | Iterable<ParamGroupInput<RpropGroupOptions>>,
    options: RpropOptions = {},
  ) {
    if (options === null || typeof options !== "object") {
      throw new TypeError("Rprop: options must be an object");
    }
    // In PyTorch's order, which its state dicts show.
    super(params, {
      lr: options.lr ?? 1e-2,
      etas: pair(options.etas, [0.5, 1.2]),
      stepSizes: pair(options.stepSizes, [1e-6, 50]),
      maximize: options.maximize ?? false,
    }, options);
  }

  /** The state a stepped parameter has (a loaded one lacking any is refused). */
  protected override requiredState(): { numbers: readonly string[]; tensors: readonly string[] } {
    return { numbers: ["step"], tensors: ["prev", "stepSize"] };
  }

  /** Checks one group's options. */
  protected override validateOptions(o: RpropGroupOptions): void {
    checkNumber("Rprop", "learning rate", o.lr);
    const etas = o.etas as unknown;
    if (!Array.isArray(etas) || etas.length !== 2 || !etas.every((e) => typeof e === "number")) {
      throw new TypeError(`Rprop: etas must be two numbers, got ${JSON.stringify(etas)}`);
    }
    if (!(0 < etas[0] && etas[0] < 1 && 1 < etas[1])) {
      throw new RangeError(
        `Rprop: invalid eta values: ${etas[0]}, ${etas[1]} (expected 0 < etaminus < 1 < etaplus)`,
      );
    }
    const sizes = o.stepSizes as unknown;
    if (
      !Array.isArray(sizes) || sizes.length !== 2 ||
      !sizes.every((s) => typeof s === "number" && !Number.isNaN(s))
    ) {
      throw new TypeError(`Rprop: stepSizes must be two numbers, got ${JSON.stringify(sizes)}`);
    }
    if (typeof o.maximize !== "boolean") {
      throw new TypeError("Rprop: maximize must be a boolean");
    }
  }

  /** PyTorch's (single-tensor) Rprop update of one group. */
  protected override updateGroup(group: ParamGroup<RpropGroupOptions>, scalar: ScalarFn): void {
    const [etaminus, etaplus] = group.etas;
    const [sizeMin, sizeMax] = group.stepSizes;
    for (const p of group.params) {
      const grad = p.grad;
      if (!grad) continue;
      const state = this.stateOf(p);
      if (typeof state.step !== "number") {
        state.step = 0;
        state.prev = this.zerosState(p);
        const stepSize = this.zerosState(p);
        stepSize._assign(stepSize.add(scalar(group.lr, p)));
        state.stepSize = stepSize;
      }
      state.step += 1;
      const g = group.maximize ? grad.neg() : grad;
      const prev = state.prev as Tensor;
      const stepSize = state.stepSize as Tensor;
      const sign = g.mul(prev).sign();
      const flipped = sign.lt(scalar(0, p));
      // sign(NaN) is 0, as PyTorch's: a NaN gradient leaves the step size, and (sign(g) being 0)
      // the parameter, as they were, and only prev takes the NaN.
      const factor = scalar(etaplus, p).where(
        sign.gt(scalar(0, p)),
        scalar(etaminus, p).where(flipped, scalar(1, p)),
      );
      stepSize._assign(stepSize.mul(factor).clamp(sizeMin, sizeMax));
      const kept = scalar(0, p).where(flipped, g);
      p._assign(p.sub(kept.sign().mul(stepSize)));
      prev._assign(kept);
    }
  }
}
