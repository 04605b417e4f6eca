/**
 * The base of HalfNormal and HalfCauchy (`|X|` of a symmetric
 * distribution). Internal: not part of `distributions`.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { noGrad } from "../autograd.ts";
import { forwardScope } from "../storage.ts";
import type { Constraint } from "./distribution.ts";
import { checkProbArg } from "./util.ts";
import { constraints } from "./constraints.ts";
import { TransformedDistribution } from "./transformed.ts";

/**
 * `|x|` of a distribution symmetric about 0 with a `scale` (the base of
 * {@link HalfNormal} and {@link HalfCauchy}): the base's density doubled
 * on `x >= 0`, its cdf `2 F(x) - 1`.
 */
export abstract class HalfDistribution extends TransformedDistribution {
  /** The underlying distribution's scale. */
  abstract get scale(): Tensor;
  /** `x >= 0`. */
  override get support(): Constraint {
    return constraints.nonnegative;
  }
  /** 0. */
  override get mode(): Tensor {
    return this.scale.mul(0);
  }
  /** The base's log-density plus log 2 (-inf below 0). */
  override logProb(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.logProb(value);
    this.validateSample("logProb", value, this.scale);
    return forwardScope(() => {
      const lp = this.baseDist.logProb(value).add(Math.LN2);
      return lp.where(noGrad(() => value.ge(0)), -Infinity);
    });
  }
  /** `2 F(x) - 1` of the base. */
  override cdf(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.cdf(value);
    this.validateSample("cdf", value, this.scale);
    return forwardScope(() => this.baseDist.cdf(value).mul(2).sub(1));
  }
  /** The base's icdf at `(p + 1)/2`. */
  override icdf(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.icdf(value);
    checkProbArg(this, "icdf", value, this.scale);
    return forwardScope(() => this.baseDist.icdf(value.add(1).div(2)));
  }
  /** The base's entropy minus log 2. */
  override entropy(): Tensor {
    return this.baseDist.entropy().sub(Math.LN2);
  }
}
