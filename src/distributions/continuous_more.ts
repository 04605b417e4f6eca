/**
 * Cauchy, and the continuous families PyTorch builds as transformed
 * distributions: LogNormal, Gumbel, HalfNormal, HalfCauchy, Weibull,
 * Pareto, Kumaraswamy and LogisticNormal, as `torch.distributions`.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { noGrad } from "../autograd.ts";
import { full, rand } from "../ops/mod.ts";
import { forwardScope } from "../storage.ts";
import {
  type Constraint,
  Distribution,
  type DistributionOptions,
  type Param,
} from "./distribution.ts";
import { broadcastAll, checkParam, checkProbArg, defaultValidateArgs, eps } from "./util.ts";
import { Exponential, Normal, Uniform } from "./continuous.ts";
import { digamma, lgamma } from "../ops_composite/special_functions.ts";
import { constraints } from "./constraints.ts";
import {
  AbsTransform,
  AffineTransform,
  ExpTransform,
  PowerTransform,
  StickBreakingTransform,
} from "./transforms.ts";
import { TransformedDistribution } from "./transformed.ts";
import { HalfDistribution } from "./half.ts";

/** The Euler–Mascheroni constant γ. */
const EULER = 0.5772156649015329;

/**
 * The Cauchy (Lorentz) distribution of `loc` and `scale`, as
 * `torch.distributions.Cauchy`.
 *
 * @example
 * ```ts
 * import { distributions, tensor } from "@multigrad/core";
 * const d = new distributions.Cauchy(tensor([0, 1]), 2);
 * const lp = d.logProb(tensor([0.5, 3]));
 * ```
 */
export class Cauchy extends Distribution {
  /** The median. */
  readonly loc: Tensor;
  /** The half width at half maximum. */
  readonly scale: Tensor;

  /** `loc` and `scale` broadcast together; `scale` must be positive. */
  constructor(loc: Param, scale: Param, options: DistributionOptions = {}) {
    const [l, s] = broadcastAll("Cauchy", { loc, scale });
    super(l.shape, [], options.validateArgs ?? defaultValidateArgs());
    this.loc = l;
    this.scale = s;
    if (this.validateArgs) {
      checkParam("Cauchy", "loc", loc, l, constraints.real);
      checkParam("Cauchy", "scale", scale, s, constraints.positive);
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
  /** NaN (undefined), as PyTorch. */
  get mean(): Tensor {
    return full(this.extendedShape(), NaN, { dtype: this.loc.dtype, device: this.loc.device });
  }
  /** `loc`. */
  override get mode(): Tensor {
    return this.loc;
  }
  /** Infinity, as PyTorch. */
  get variance(): Tensor {
    return full(this.extendedShape(), Infinity, { dtype: this.loc.dtype, device: this.loc.device });
  }
  /** `loc + scale·tan(π(u - ½))` with u uniform in [0, 1). */
  override rsample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    const u = rand(shape, { dtype: this.loc.dtype, device: this.loc.device });
    const e = noGrad(() => u.sub(0.5).mul(Math.PI).tan());
    return this.loc.add(e.mul(this.scale));
  }
  /** `-log π - log scale - log(1 + ((x - loc)/scale)²)`. */
  logProb(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.logProb(value);
    this.validateSample("logProb", value, this.loc);
    return forwardScope(() =>
      value.sub(this.loc).div(this.scale).square().log1p().neg().sub(this.scale.log())
        .sub(Math.log(Math.PI))
    );
  }
  /** `atan((x - loc)/scale)/π + ½`. */
  override cdf(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.cdf(value);
    this.validateSample("cdf", value, this.loc);
    return forwardScope(() => value.sub(this.loc).div(this.scale).atan().div(Math.PI).add(0.5));
  }
  /** `tan(π(p - ½))·scale + loc`. */
  override icdf(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.icdf(value);
    checkProbArg(this, "icdf", value, this.loc);
    return forwardScope(() => value.sub(0.5).mul(Math.PI).tan().mul(this.scale).add(this.loc));
  }
  /** `log(4π) + log scale`. */
  override entropy(): Tensor {
    return this.scale.log().add(Math.log(4 * Math.PI));
  }
  /** `loc`, `scale`. */
  protected params(): Record<string, Tensor> {
    return { loc: this.loc, scale: this.scale };
  }
}

/**
 * The log-normal distribution: `exp` of N(loc, scale²), as
 * `torch.distributions.LogNormal`.
 */
export class LogNormal extends TransformedDistribution {
  /** `loc` and `scale` of the underlying normal (`scale` positive). */
  constructor(loc: Param, scale: Param, options: DistributionOptions = {}) {
    const [l, s] = broadcastAll("LogNormal", { loc, scale });
    if (options.validateArgs ?? defaultValidateArgs()) {
      checkParam("LogNormal", "loc", loc, l, constraints.real);
      checkParam("LogNormal", "scale", scale, s, constraints.positive);
    }
    super(new Normal(l, s, { validateArgs: false }), new ExpTransform(), options);
  }
  /** The underlying normal's mean. */
  get loc(): Tensor {
    return (this.baseDist as Normal).loc;
  }
  /** The underlying normal's standard deviation. */
  get scale(): Tensor {
    return (this.baseDist as Normal).scale;
  }
  /** `x > 0`. */
  override get support(): Constraint {
    return constraints.positive;
  }
  /** `exp(loc + scale²/2)`. */
  override get mean(): Tensor {
    return this.loc.add(this.scale.square().div(2)).exp();
  }
  /** `exp(loc - scale²)`. */
  override get mode(): Tensor {
    return this.loc.sub(this.scale.square()).exp();
  }
  /** `(exp(scale²) - 1)·exp(2 loc + scale²)`. */
  override get variance(): Tensor {
    return forwardScope(() => {
      const s2 = this.scale.square();
      return s2.expm1().mul(this.loc.mul(2).add(s2).exp());
    });
  }
  /** The normal's entropy plus `loc`. */
  override entropy(): Tensor {
    return this.baseDist.entropy().add(this.loc);
  }
  /** `loc`, `scale`. */
  /** PyTorch's repr, which shows no parameters for this family: `LogNormal()`. */
  override toString(): string {
    return "LogNormal()";
  }
  /** The parameters, in the order `remake` takes them. */
  protected override params(): Record<string, Tensor> {
    return { loc: this.loc, scale: this.scale };
  }
}

/** The smallest normal number of `dtype` (`torch.finfo(dtype).tiny`). */
function tiny(dtype: Tensor["dtype"]): number {
  return dtype === "float64" ? 2.2250738585072014e-308 : 1.1754943508222875e-38;
}

/**
 * The Gumbel (type-I extreme value) distribution of `loc` and `scale`, as
 * `torch.distributions.Gumbel`: `loc - scale·log(-log u)` of a uniform u.
 */
export class Gumbel extends TransformedDistribution {
  /** The location (mode). */
  readonly loc: Tensor;
  /** The scale. */
  readonly scale: Tensor;

  /** `loc` and `scale` broadcast together; `scale` must be positive. */
  constructor(loc: Param, scale: Param, options: DistributionOptions = {}) {
    const [l, s] = broadcastAll("Gumbel", { loc, scale });
    if (options.validateArgs ?? defaultValidateArgs()) {
      checkParam("Gumbel", "loc", loc, l, constraints.real);
      checkParam("Gumbel", "scale", scale, s, constraints.positive);
    }
    const o = { dtype: l.dtype, device: l.device };
    const shape = [...l.shape];
    const base = new Uniform(full(shape, tiny(l.dtype), o), full(shape, 1 - eps(l.dtype), o), {
      validateArgs: false,
    });
    super(base, [
      new ExpTransform().inv,
      new AffineTransform(0, full(shape, -1, o)),
      new ExpTransform().inv,
      new AffineTransform(l, s.neg()),
    ], options);
    this.loc = l;
    this.scale = s;
  }
  /** The real line. */
  override get support(): Constraint {
    return constraints.real;
  }
  /** `z - eᶻ - log scale` with `z = (loc - x)/scale` (directly, for precision). */
  override logProb(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.logProb(value);
    this.validateSample("logProb", value, this.loc);
    return forwardScope(() => {
      const z = this.loc.sub(value).div(this.scale);
      return z.sub(z.exp()).sub(this.scale.log());
    });
  }
  /** `loc + γ·scale`. */
  override get mean(): Tensor {
    return this.scale.mul(EULER).add(this.loc);
  }
  /** `loc`. */
  override get mode(): Tensor {
    return this.loc;
  }
  /** `π/√6·scale`. */
  override get stddev(): Tensor {
    return this.scale.mul(Math.PI / Math.sqrt(6));
  }
  /** `π²/6·scale²`. */
  override get variance(): Tensor {
    return this.stddev.square();
  }
  /** `log scale + 1 + γ`. */
  override entropy(): Tensor {
    return this.scale.log().add(1 + EULER);
  }
  /** `loc`, `scale`. */
  protected override params(): Record<string, Tensor> {
    return { loc: this.loc, scale: this.scale };
  }
}

/** `new Kind(0, scale)` with the zero in scale's dtype and device. */
function zeroLoc(scale: Tensor): Tensor {
  return full([], 0, { dtype: scale.dtype, device: scale.device });
}

/** The half-normal distribution: `|x|` of N(0, scale²), as `torch.distributions.HalfNormal`. */
export class HalfNormal extends HalfDistribution {
  /** `scale` must be positive. */
  constructor(scale: Param, options: DistributionOptions = {}) {
    const [s] = broadcastAll("HalfNormal", { scale });
    if (options.validateArgs ?? defaultValidateArgs()) {
      checkParam("HalfNormal", "scale", scale, s, constraints.positive);
    }
    super(new Normal(zeroLoc(s), s, { validateArgs: false }), new AbsTransform(), options);
  }
  /** The underlying normal's scale. */
  get scale(): Tensor {
    return (this.baseDist as Normal).scale;
  }
  /** `scale·√(2/π)`. */
  override get mean(): Tensor {
    return this.scale.mul(Math.sqrt(2 / Math.PI));
  }
  /** `scale²·(1 - 2/π)`. */
  override get variance(): Tensor {
    return this.scale.square().mul(1 - 2 / Math.PI);
  }
  /** PyTorch's repr, which shows no parameters for this family: `HalfNormal()`. */
  override toString(): string {
    return "HalfNormal()";
  }
  /** `scale`. */
  protected override params(): Record<string, Tensor> {
    return { scale: this.scale };
  }
}

/** The half-Cauchy distribution: `|x|` of Cauchy(0, scale), as `torch.distributions.HalfCauchy`. */
export class HalfCauchy extends HalfDistribution {
  /** `scale` must be positive. */
  constructor(scale: Param, options: DistributionOptions = {}) {
    const [s] = broadcastAll("HalfCauchy", { scale });
    if (options.validateArgs ?? defaultValidateArgs()) {
      checkParam("HalfCauchy", "scale", scale, s, constraints.positive);
    }
    super(new Cauchy(zeroLoc(s), s, { validateArgs: false }), new AbsTransform(), options);
  }
  /** The underlying Cauchy's scale. */
  get scale(): Tensor {
    return (this.baseDist as Cauchy).scale;
  }
  /** Infinity, as PyTorch. */
  override get mean(): Tensor {
    return full(this.extendedShape(), Infinity, {
      dtype: this.scale.dtype,
      device: this.scale.device,
    });
  }
  /** Infinity (the Cauchy's), as PyTorch. */
  override get variance(): Tensor {
    return this.baseDist.variance;
  }
  /** PyTorch's repr, which shows no parameters for this family: `HalfCauchy()`. */
  override toString(): string {
    return "HalfCauchy()";
  }
  /** `scale`. */
  protected override params(): Record<string, Tensor> {
    return { scale: this.scale };
  }
}

/**
 * The Weibull distribution of `scale` λ and `concentration` k, as
 * `torch.distributions.Weibull`: `λ·E^{1/k}` of a standard exponential E.
 */
export class Weibull extends TransformedDistribution {
  /** The scale λ. */
  readonly scale: Tensor;
  /** The shape k. */
  readonly concentration: Tensor;
  /** `1/k`. */
  readonly concentrationReciprocal: Tensor;

  /** Both positive, broadcast together. */
  constructor(scale: Param, concentration: Param, options: DistributionOptions = {}) {
    const [s, c] = broadcastAll("Weibull", { scale, concentration });
    if (options.validateArgs ?? defaultValidateArgs()) {
      checkParam("Weibull", "scale", scale, s, constraints.positive);
      checkParam("Weibull", "concentration", concentration, c, constraints.positive);
    }
    const r = c.reciprocal();
    const base = new Exponential(full([...s.shape], 1, { dtype: s.dtype, device: s.device }), {
      validateArgs: false,
    });
    super(base, [new PowerTransform(r), new AffineTransform(0, s)], options);
    this.scale = s;
    this.concentration = c;
    this.concentrationReciprocal = r;
  }
  /** `x > 0`. */
  override get support(): Constraint {
    return constraints.positive;
  }
  /** `λ·Γ(1 + 1/k)`. */
  override get mean(): Tensor {
    return this.scale.mul(lgamma(this.concentrationReciprocal.add(1)).exp());
  }
  /** `λ·((k - 1)/k)^{1/k}`. */
  override get mode(): Tensor {
    const k = this.concentration;
    return this.scale.mul(k.sub(1).div(k).pow(k.reciprocal()));
  }
  /** `λ²·(Γ(1 + 2/k) - Γ(1 + 1/k)²)`. */
  override get variance(): Tensor {
    return forwardScope(() => {
      const r = this.concentrationReciprocal;
      return this.scale.square().mul(
        lgamma(r.mul(2).add(1)).exp().sub(lgamma(r.add(1)).mul(2).exp()),
      );
    });
  }
  /** `γ(1 - 1/k) + log(λ/k) + 1`. */
  override entropy(): Tensor {
    return forwardScope(() => {
      const r = this.concentrationReciprocal;
      return r.neg().add(1).mul(EULER).add(this.scale.mul(r).log()).add(1);
    });
  }
  /** `scale`, `concentration`. */
  protected override params(): Record<string, Tensor> {
    return { scale: this.scale, concentration: this.concentration };
  }
}

/**
 * The Pareto (type I) distribution of `scale` (the minimum) and `alpha`,
 * as `torch.distributions.Pareto`: `scale·e^E` of an exponential E of rate
 * alpha.
 */
export class Pareto extends TransformedDistribution {
  /** The minimum value. */
  readonly scale: Tensor;
  /** The tail index. */
  readonly alpha: Tensor;

  /** Both positive, broadcast together. */
  constructor(scale: Param, alpha: Param, options: DistributionOptions = {}) {
    const [s, a] = broadcastAll("Pareto", { scale, alpha });
    if (options.validateArgs ?? defaultValidateArgs()) {
      checkParam("Pareto", "scale", scale, s, constraints.positive);
      checkParam("Pareto", "alpha", alpha, a, constraints.positive);
    }
    const base = new Exponential(a, { validateArgs: false });
    super(base, [new ExpTransform(), new AffineTransform(0, s)], options);
    this.scale = s;
    this.alpha = a;
  }
  /** `x >= scale`. */
  override get support(): Constraint {
    return constraints.greaterThanEq(this.scale);
  }
  /** `α·scale/(α - 1)` (infinite for α <= 1). */
  override get mean(): Tensor {
    const a = clampBelow(this.alpha, 1);
    return a.mul(this.scale).div(a.sub(1));
  }
  /** `scale`. */
  override get mode(): Tensor {
    return this.scale;
  }
  /** `scale²·α/((α - 1)²(α - 2))` (infinite for α <= 2). */
  override get variance(): Tensor {
    return forwardScope(() => {
      const a = clampBelow(this.alpha, 2);
      return this.scale.square().mul(a).div(a.sub(1).square().mul(a.sub(2)));
    });
  }
  /** `log(scale/α) + 1 + 1/α`. */
  override entropy(): Tensor {
    return this.scale.div(this.alpha).log().add(this.alpha.reciprocal().add(1));
  }
  /** `scale`, `alpha`. */
  /** PyTorch's repr, `alpha` first (its `arg_constraints` order). */
  override toString(): string {
    const size = (t: Tensor) => `torch.Size([${t.shape.join(", ")}])`;
    return `Pareto(alpha: ${size(this.alpha)}, scale: ${size(this.scale)})`;
  }
  /** The parameters, in the order `remake` takes them. */
  protected override params(): Record<string, Tensor> {
    return { scale: this.scale, alpha: this.alpha };
  }
}

/**
 * `x` raised to `min` below it, as `clamp(min)`, by a select: the formula
 * after it is infinite at `min`, and a gradient through the clamp's mask
 * would be 0·inf = NaN where PyTorch gives 0.
 */
function clampBelow(x: Tensor, min: number): Tensor {
  return x.where(noGrad(() => x.ge(min)), min);
}

/** `b·B(1 + n/a, b)`: the n-th moment of Kumaraswamy(a, b). */
function kumaraswamyMoment(a: Tensor, b: Tensor, n: number): Tensor {
  const arg = a.reciprocal().mul(n).add(1);
  return b.mul(lgamma(arg).add(lgamma(b)).sub(lgamma(arg.add(b))).exp());
}

/**
 * The Kumaraswamy distribution on [0, 1] of `concentration1` a and
 * `concentration0` b (density `a b x^{a-1}(1 - x^a)^{b-1}`), as
 * `torch.distributions.Kumaraswamy`.
 */
export class Kumaraswamy extends TransformedDistribution {
  /** a. */
  readonly concentration1: Tensor;
  /** b. */
  readonly concentration0: Tensor;

  /** Both positive, broadcast together. */
  constructor(concentration1: Param, concentration0: Param, options: DistributionOptions = {}) {
    const [a, b] = broadcastAll("Kumaraswamy", { concentration1, concentration0 });
    if (options.validateArgs ?? defaultValidateArgs()) {
      checkParam("Kumaraswamy", "concentration1", concentration1, a, constraints.positive);
      checkParam("Kumaraswamy", "concentration0", concentration0, b, constraints.positive);
    }
    const o = { dtype: b.dtype, device: b.device };
    const shape = [...b.shape];
    const base = new Uniform(full(shape, 0, o), full(shape, 1, o), { validateArgs: false });
    super(base, [
      new PowerTransform(b.reciprocal()),
      new AffineTransform(1, -1),
      new PowerTransform(a.reciprocal()),
    ], options);
    this.concentration1 = a;
    this.concentration0 = b;
  }
  /** `0 <= x <= 1`. */
  override get support(): Constraint {
    return constraints.unitInterval;
  }
  /** `b·B(1 + 1/a, b)`. */
  override get mean(): Tensor {
    return forwardScope(() => kumaraswamyMoment(this.concentration1, this.concentration0, 1));
  }
  /**
   * `((a - 1)/(ab - 1))^{1/a}`, NaN where a < 1 or b < 1 (PyTorch 1.13's
   * formula takes `log1p(-b)`, NaN for every b > 1; this is the textbook mode).
   */
  override get mode(): Tensor {
    return forwardScope(() => {
      const [a, b] = [this.concentration1, this.concentration0];
      const logMode = a.sub(1).log().sub(a.mul(b).sub(1).log()).div(a);
      const bad = noGrad(() => b.lt(1).add(a.lt(1)).gt(0));
      return logMode.where(bad.eq(0), NaN).exp();
    });
  }
  /** The second moment minus the squared mean. */
  override get variance(): Tensor {
    return forwardScope(() =>
      kumaraswamyMoment(this.concentration1, this.concentration0, 2).sub(this.mean.square())
    );
  }
  /** `(1 - 1/b) + (1 - 1/a)(ψ(b + 1) + γ) - log a - log b`. */
  override entropy(): Tensor {
    return forwardScope(() => {
      const [a, b] = [this.concentration1, this.concentration0];
      const t1 = a.reciprocal().neg().add(1);
      const t0 = b.reciprocal().neg().add(1);
      const h0 = digamma(b.add(1)).add(EULER);
      return t0.add(t1.mul(h0)).sub(a.log()).sub(b.log());
    });
  }
  /** `concentration1`, `concentration0`. */
  protected override params(): Record<string, Tensor> {
    return { concentration1: this.concentration1, concentration0: this.concentration0 };
  }
}

/**
 * The logistic-normal distribution on the simplex: stick breaking of
 * N(loc, scale²) draws (event shape `[K + 1]` for `loc` of last dim K), as
 * `torch.distributions.LogisticNormal`.
 */
export class LogisticNormal extends TransformedDistribution {
  /** `loc` and `scale` broadcast together (at least one dim; a scalar acts as `[1]`). */
  constructor(loc: Param, scale: Param, options: DistributionOptions = {}) {
    let [l, s] = broadcastAll("LogisticNormal", { loc, scale });
    if (options.validateArgs ?? defaultValidateArgs()) {
      checkParam("LogisticNormal", "loc", loc, l, constraints.real);
      checkParam("LogisticNormal", "scale", scale, s, constraints.positive);
    }
    // PyTorch expands a scalar base to [1]: one stick break, two categories.
    if (l.ndim === 0) [l, s] = [l.reshape([1]), s.reshape([1])];
    const base = new Normal(l, s, { validateArgs: false });
    super(base, new StickBreakingTransform(), options);
  }
  /** The underlying normal's mean. */
  get loc(): Tensor {
    return (this.baseDist as unknown as { baseDist: Normal }).baseDist.loc;
  }
  /** The underlying normal's standard deviation. */
  get scale(): Tensor {
    return (this.baseDist as unknown as { baseDist: Normal }).baseDist.scale;
  }
  /** The simplex. */
  override get support(): Constraint {
    return constraints.simplex;
  }
  /** `loc`, `scale`. */
  /** PyTorch's repr, which shows no parameters for this family: `LogisticNormal()`. */
  override toString(): string {
    return "LogisticNormal()";
  }
  /** The parameters, in the order `remake` takes them. */
  protected override params(): Record<string, Tensor> {
    return { loc: this.loc, scale: this.scale };
  }
}
