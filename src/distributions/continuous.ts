/**
 * Normal, Uniform, Exponential and Laplace, as `torch.distributions`: each
 * reparameterizable (`rsample` draws from the library's seeded generators
 * and moves them by the parameters).
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { noGrad } from "../autograd.ts";
import { rand, randn } from "../ops/mod.ts";
import "../ops_composite/mod.ts";
import { erfinv } from "../ops_composite/special_functions.ts";
import { forwardScope } from "../storage.ts";
import { ExponentialFamily } from "./exp_family.ts";
import {
  type Constraint,
  Distribution,
  type DistributionOptions,
  type Param,
} from "./distribution.ts";
import {
  broadcastAll,
  checkMaskLater,
  checkParam,
  checkProbArg,
  constraints,
  defaultValidateArgs,
  eps,
} from "./util.ts";

const LOG_SQRT_2PI = 0.5 * Math.log(2 * Math.PI);

/**
 * The normal distribution N(loc, scale²), as `torch.distributions.Normal`.
 *
 * @example
 * ```ts
 * import { distributions, tensor } from "@multigrad/core";
 * const d = new distributions.Normal(tensor([0, 1]), 2);
 * const lp = d.logProb(tensor([0.5, 0.5]));
 * ```
 */
export class Normal extends ExponentialFamily {
  /** The mean. */
  readonly loc: Tensor;
  /** The standard deviation. */
  readonly scale: Tensor;

  /** `loc` and `scale` broadcast together; `scale` must be positive. */
  constructor(loc: Param, scale: Param, options: DistributionOptions = {}) {
    const [l, s] = broadcastAll("Normal", { loc, scale });
    super(l.shape, [], options.validateArgs ?? defaultValidateArgs());
    this.loc = l;
    this.scale = s;
    if (this.validateArgs) {
      checkParam("Normal", "loc", loc, l, constraints.real);
      checkParam("Normal", "scale", scale, s, constraints.positive);
    }
  }

  /** The real line. */
  get support(): Constraint {
    return constraints.real;
  }
  /** True. */
  override get hasRsample(): boolean {
    return true;
  }
  /** `loc`. */
  override get mode(): Tensor {
    return this.loc;
  }
  /** `loc`. */
  get mean(): Tensor {
    return this.loc;
  }
  /** `scale`. */
  override get stddev(): Tensor {
    return this.scale;
  }
  /** `scale²`. */
  get variance(): Tensor {
    return this.scale.square();
  }
  /** `loc + scale·ε` with ε standard normal draws. */
  override rsample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    const e = randn(shape, { dtype: this.loc.dtype, device: this.loc.device });
    return this.loc.add(e.mul(this.scale));
  }
  /** `-(x - loc)²/(2 scale²) - log scale - log √(2π)`. */
  logProb(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.logProb(value);
    this.validateSample("logProb", value, this.loc);
    return forwardScope(() =>
      value.sub(this.loc).square().div(this.variance.mul(2)).neg()
        .sub(this.scale.log()).sub(LOG_SQRT_2PI)
    );
  }
  /** `½(1 + erf((x - loc)/(scale√2)))`. */
  override cdf(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.cdf(value);
    this.validateSample("cdf", value, this.loc);
    return forwardScope(() =>
      value.sub(this.loc).mul(this.scale.reciprocal()).div(Math.SQRT2).erf().add(1).mul(0.5)
    );
  }
  /** `loc + scale·erfinv(2p - 1)·√2`. */
  override icdf(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.icdf(value);
    checkProbArg(this, "icdf", value, this.loc);
    return forwardScope(() =>
      this.loc.add(this.scale.mul(erfinv(value.mul(2).sub(1))).mul(Math.SQRT2))
    );
  }
  /** `½ + ½ log(2π) + log scale`. */
  override entropy(): Tensor {
    return this.scale.log().add(0.5 + LOG_SQRT_2PI);
  }
  /** `(loc/scale², -1/(2 scale²))`. */
  get naturalParams(): Tensor[] {
    const v = this.scale.square();
    return [this.loc.div(v), v.reciprocal().mul(-0.5)];
  }
  /** `-x²/(4y) + ½ log(-π/y)`. */
  logNormalizer(x: Tensor, y: Tensor): Tensor {
    return x.square().div(y).mul(-0.25).add(y.reciprocal().mul(-Math.PI).log().mul(0.5));
  }
  /** 0. */
  override get meanCarrierMeasure(): number {
    return 0;
  }
  /** `loc`, `scale`. */
  protected params(): Record<string, Tensor> {
    return { loc: this.loc, scale: this.scale };
  }
}

/**
 * The uniform distribution on [low, high), as `torch.distributions.Uniform`.
 */
export class Uniform extends Distribution {
  /** The lower end (inclusive). */
  readonly low: Tensor;
  /** The upper end (exclusive). */
  readonly high: Tensor;

  /** `low` and `high` broadcast together; `low < high` is required. */
  constructor(low: Param, high: Param, options: DistributionOptions = {}) {
    const [lo, hi] = broadcastAll("Uniform", { low, high });
    super(lo.shape, [], options.validateArgs ?? defaultValidateArgs());
    this.low = lo;
    this.high = hi;
    if (this.validateArgs) {
      if (typeof low === "number" && typeof high === "number") {
        if (!(low < high)) {
          throw new RangeError(`Uniform: low must be less than high, got low=${low}, high=${high}`);
        }
      } else {
        checkMaskLater(
          noGrad(() => lo.lt(hi)),
          lo,
          (i, v) => `Uniform: low must be less than high, got low=${v} at index ${i}`,
        );
      }
    }
  }

  /** `[low, high]` (closed, as PyTorch's `constraints.interval`). */
  get support(): Constraint {
    return {
      name: "low <= x <= high",
      check: (x) => x.ge(this.low).mul(x.le(this.high)),
      holds: () => true,
    };
  }
  /** True. */
  override get hasRsample(): boolean {
    return true;
  }
  /** NaN: every point of the interval is a mode (PyTorch says NaN). */
  override get mode(): Tensor {
    return this.high.mul(NaN);
  }
  /** `(low + high)/2`. */
  get mean(): Tensor {
    return this.high.add(this.low).div(2);
  }
  /** `(high - low)/√12`. */
  override get stddev(): Tensor {
    return this.high.sub(this.low).div(Math.sqrt(12));
  }
  /** `(high - low)²/12`. */
  get variance(): Tensor {
    return this.high.sub(this.low).square().div(12);
  }
  /** `low + u·(high - low)` with u uniform in [0, 1). */
  override rsample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    const u = rand(shape, { dtype: this.low.dtype, device: this.low.device });
    return this.low.add(u.mul(this.high.sub(this.low)));
  }
  /** `-log(high - low)` inside [low, high), -inf outside. */
  logProb(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.logProb(value);
    this.validateSample("logProb", value, this.low);
    return forwardScope(() => {
      const inside = noGrad(() => this.low.le(value).mul(this.high.gt(value)));
      return inside.log().sub(this.high.sub(this.low).log());
    });
  }
  /** `(x - low)/(high - low)`, clamped to [0, 1]. */
  override cdf(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.cdf(value);
    this.validateSample("cdf", value, this.low);
    return forwardScope(() => value.sub(this.low).div(this.high.sub(this.low)).clamp(0, 1));
  }
  /** `low + p·(high - low)`. */
  override icdf(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.icdf(value);
    checkProbArg(this, "icdf", value, this.low);
    return forwardScope(() => value.mul(this.high.sub(this.low)).add(this.low));
  }
  /** `log(high - low)`. */
  override entropy(): Tensor {
    return this.high.sub(this.low).log();
  }
  /** `low`, `high`. */
  protected params(): Record<string, Tensor> {
    return { low: this.low, high: this.high };
  }
}

/** The exponential distribution of `rate`, as `torch.distributions.Exponential`. */
export class Exponential extends ExponentialFamily {
  /** The rate (inverse mean). */
  readonly rate: Tensor;

  /** `rate` must be positive. */
  constructor(rate: Param, options: DistributionOptions = {}) {
    const [r] = broadcastAll("Exponential", { rate });
    super(r.shape, [], options.validateArgs ?? defaultValidateArgs());
    this.rate = r;
    if (this.validateArgs) checkParam("Exponential", "rate", rate, r, constraints.positive);
  }

  /** `x >= 0`. */
  get support(): Constraint {
    return constraints.nonnegative;
  }
  /** True. */
  override get hasRsample(): boolean {
    return true;
  }
  /** 0. */
  override get mode(): Tensor {
    return this.rate.zerosLike();
  }
  /** `1/rate`. */
  get mean(): Tensor {
    return this.rate.reciprocal();
  }
  /** `1/rate`. */
  override get stddev(): Tensor {
    return this.rate.reciprocal();
  }
  /** `1/rate²`. */
  get variance(): Tensor {
    return this.rate.square().reciprocal();
  }
  /** `-log(1 - u)/rate` with u uniform in [0, 1). */
  override rsample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    const u = rand(shape, { dtype: this.rate.dtype, device: this.rate.device });
    return u.neg().log1p().neg().div(this.rate);
  }
  /** `log rate - rate·x`. */
  logProb(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.logProb(value);
    this.validateSample("logProb", value, this.rate);
    return forwardScope(() => this.rate.log().sub(this.rate.mul(value)));
  }
  /** `1 - exp(-rate·x)`. */
  override cdf(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.cdf(value);
    this.validateSample("cdf", value, this.rate);
    return forwardScope(() => this.rate.neg().mul(value).exp().neg().add(1));
  }
  /** `-log(1 - p)/rate`. */
  override icdf(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.icdf(value);
    checkProbArg(this, "icdf", value, this.rate);
    return forwardScope(() => value.neg().log1p().neg().div(this.rate));
  }
  /** `1 - log rate`. */
  override entropy(): Tensor {
    return this.rate.log().neg().add(1);
  }
  /** `(-rate)`. */
  get naturalParams(): Tensor[] {
    return [this.rate.neg()];
  }
  /** `-log(-x)`. */
  logNormalizer(x: Tensor): Tensor {
    return x.neg().log().neg();
  }
  /** 0. */
  override get meanCarrierMeasure(): number {
    return 0;
  }
  /** `rate`. */
  protected params(): Record<string, Tensor> {
    return { rate: this.rate };
  }
}

/** The Laplace distribution, as `torch.distributions.Laplace`. */
export class Laplace extends Distribution {
  /** The mean. */
  readonly loc: Tensor;
  /** The scale (`variance = 2 scale²`). */
  readonly scale: Tensor;

  /** `loc` and `scale` broadcast together; `scale` must be positive. */
  constructor(loc: Param, scale: Param, options: DistributionOptions = {}) {
    const [l, s] = broadcastAll("Laplace", { loc, scale });
    super(l.shape, [], options.validateArgs ?? defaultValidateArgs());
    this.loc = l;
    this.scale = s;
    if (this.validateArgs) {
      checkParam("Laplace", "loc", loc, l, constraints.real);
      checkParam("Laplace", "scale", scale, s, constraints.positive);
    }
  }

  /** The real line. */
  get support(): Constraint {
    return constraints.real;
  }
  /** True. */
  override get hasRsample(): boolean {
    return true;
  }
  /** `loc`. */
  override get mode(): Tensor {
    return this.loc;
  }
  /** `loc`. */
  get mean(): Tensor {
    return this.loc;
  }
  /** `√2·scale`. */
  override get stddev(): Tensor {
    return this.scale.mul(Math.SQRT2);
  }
  /** `2 scale²`. */
  get variance(): Tensor {
    return this.scale.square().mul(2);
  }
  /** `loc - scale·sign(u)·log(1 - |u|)` with u uniform in (-1, 1). */
  override rsample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    const e = eps(this.loc.dtype);
    const u = rand(shape, { dtype: this.loc.dtype, device: this.loc.device }).mul(2).sub(1)
      .clamp(e - 1);
    return this.loc.sub(this.scale.mul(u.sign()).mul(u.abs().neg().log1p()));
  }
  /** `-log(2 scale) - |x - loc|/scale`. */
  logProb(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.logProb(value);
    this.validateSample("logProb", value, this.loc);
    return forwardScope(() =>
      this.scale.mul(2).log().neg().sub(value.sub(this.loc).abs().div(this.scale))
    );
  }
  /** `½ - ½·sign(x - loc)·expm1(-|x - loc|/scale)`. */
  override cdf(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.cdf(value);
    this.validateSample("cdf", value, this.loc);
    return forwardScope(() => {
      const d = value.sub(this.loc);
      return d.sign().mul(d.abs().neg().div(this.scale).expm1()).mul(-0.5).add(0.5);
    });
  }
  /** `loc - scale·sign(p - ½)·log1p(-2|p - ½|)`. */
  override icdf(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.icdf(value);
    checkProbArg(this, "icdf", value, this.loc);
    return forwardScope(() => {
      const t = value.sub(0.5);
      return this.loc.sub(this.scale.mul(t.sign()).mul(t.abs().mul(-2).log1p()));
    });
  }
  /** `1 + log(2 scale)`. */
  override entropy(): Tensor {
    return this.scale.mul(2).log().add(1);
  }
  /** `loc`, `scale`. */
  protected params(): Record<string, Tensor> {
    return { loc: this.loc, scale: this.scale };
  }
}
