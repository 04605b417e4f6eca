/**
 * Gamma and Beta, as `torch.distributions` (their `lgamma`, `digamma` and
 * `xlogy` are `torch.special`'s, re-exported here for the other distributions).
 * Draws use Marsaglia and Tsang's method with a fixed number of rounds on
 * the device; `rsample` differentiates them implicitly in the concentrations
 * as PyTorch (./gamma_grad.ts).
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { noGrad } from "../autograd.ts";
import { stack } from "../ops/mod.ts";
import { forwardScope } from "../storage.ts";
import { digamma, lgamma, xlogy } from "../ops_composite/special_functions.ts";
import {
  attachDirichletGrad,
  logStandardGamma,
  rsampleStandardGamma,
  standardGamma,
  tiny,
} from "./gamma_sampling.ts";
import { ExponentialFamily } from "./exp_family.ts";
import type { Constraint, DistributionOptions, Param } from "./distribution.ts";
import { broadcastAll, checkParam, constraints, defaultValidateArgs, eps } from "./util.ts";

// One implementation of the special functions: torch.special's (accurate near
// lgamma's zeros, in float32 too); re-exported for the other distributions.

/**
 * The gamma distribution of `concentration` α and `rate` β (density
 * `βᵅ xᵅ⁻¹ e^{-βx} / Γ(α)`), as `torch.distributions.Gamma`.
 *
 * `rsample` is differentiable in both parameters: in β as a product, in α
 * implicitly through the CDF (`dx/dα = -(∂F/∂α)/p`), as PyTorch.
 */
export class Gamma extends ExponentialFamily {
  /** The shape α. */
  readonly concentration: Tensor;
  /** The rate β. */
  readonly rate: Tensor;

  /** Both positive, broadcast together. */
  constructor(concentration: Param, rate: Param, options: DistributionOptions = {}) {
    const [a, b] = broadcastAll("Gamma", { concentration, rate });
    super(a.shape, [], options.validateArgs ?? defaultValidateArgs());
    this.concentration = a;
    this.rate = b;
    if (this.validateArgs) {
      checkParam("Gamma", "concentration", concentration, a, constraints.positive);
      checkParam("Gamma", "rate", rate, b, constraints.positive);
    }
  }
  /** `x >= 0`. */
  get support(): Constraint {
    return constraints.nonnegative;
  }
  /** `max(α - 1, 0)/β`. */
  override get mode(): Tensor {
    return this.concentration.sub(1).div(this.rate).clamp(0);
  }
  /** `α/β`. */
  get mean(): Tensor {
    return this.concentration.div(this.rate);
  }
  /** `α/β²`. */
  get variance(): Tensor {
    return this.concentration.div(this.rate.square());
  }
  /** True: draws are differentiable in both parameters. */
  override get hasRsample(): boolean {
    return true;
  }
  /** Marsaglia–Tsang draws divided by the rate, without gradient. */
  override sample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    return noGrad(() => standardGamma(this.concentration.expand(shape)).div(this.rate));
  }
  /** The same draws, differentiable in α (implicitly) and β. */
  override rsample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    return forwardScope(() =>
      rsampleStandardGamma(this.concentration.expand(shape)).div(this.rate)
    );
  }
  /** `α log β + (α - 1) log x - βx - log Γ(α)`. */
  logProb(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.logProb(value);
    this.validateSample("logProb", value, this.rate);
    return forwardScope(() => {
      const a = this.concentration;
      return xlogy(a, this.rate).add(xlogy(a.sub(1), value)).sub(this.rate.mul(value))
        .sub(lgamma(a));
    });
  }
  /** `α - log β + log Γ(α) + (1 - α) ψ(α)`. */
  override entropy(): Tensor {
    return forwardScope(() => {
      const a = this.concentration;
      return a.sub(this.rate.log()).add(lgamma(a)).add(a.neg().add(1).mul(digamma(a)));
    });
  }
  /** `(α - 1, -β)`. */
  get naturalParams(): Tensor[] {
    return [this.concentration.sub(1), this.rate.neg()];
  }
  /** `log Γ(x + 1) + (x + 1)·log(-1/y)`. */
  logNormalizer(x: Tensor, y: Tensor): Tensor {
    return lgamma(x.add(1)).add(x.add(1).mul(y.reciprocal().neg().log()));
  }
  /** 0. */
  override get meanCarrierMeasure(): number {
    return 0;
  }
  /** `concentration`, `rate`. */
  protected params(): Record<string, Tensor> {
    return { concentration: this.concentration, rate: this.rate };
  }
}

/**
 * The beta distribution on [0, 1] with `concentration1` (α, of x) and
 * `concentration0` (β, of 1 - x), as `torch.distributions.Beta`. Draws are
 * `X/(X + Y)` of gamma draws; `rsample` differentiates them as the first
 * coordinate of a two-component Dirichlet, as PyTorch.
 */
export class Beta extends ExponentialFamily {
  /** α. */
  readonly concentration1: Tensor;
  /** β. */
  readonly concentration0: Tensor;

  /** Both positive, broadcast together. */
  constructor(concentration1: Param, concentration0: Param, options: DistributionOptions = {}) {
    const [a, b] = broadcastAll("Beta", { concentration1, concentration0 });
    super(a.shape, [], options.validateArgs ?? defaultValidateArgs());
    this.concentration1 = a;
    this.concentration0 = b;
    if (this.validateArgs) {
      checkParam("Beta", "concentration1", concentration1, a, constraints.positive);
      checkParam("Beta", "concentration0", concentration0, b, constraints.positive);
    }
  }
  /** `0 <= x <= 1`. */
  get support(): Constraint {
    return constraints.unitInterval;
  }
  /** `α/(α + β)`. */
  get mean(): Tensor {
    return this.concentration1.div(this.concentration1.add(this.concentration0));
  }
  /** `αβ/((α + β)²(α + β + 1))`. */
  get variance(): Tensor {
    const total = this.concentration1.add(this.concentration0);
    return this.concentration1.mul(this.concentration0).div(total.square().mul(total.add(1)));
  }
  /** True: draws are differentiable in both concentrations. */
  override get hasRsample(): boolean {
    return true;
  }
  /** `X/(X + Y)` with `X ~ Gamma(α)`, `Y ~ Gamma(β)`, without gradient. */
  override sample(sampleShape: number[] = []): Tensor {
    return noGrad(() => forwardScope(() => this.draws(sampleShape).select(-1, 0)));
  }
  /**
   * The same draws, differentiable in α and β through PyTorch's Dirichlet
   * gradient of `[X, Y]/(X + Y)` at `[α, β]`.
   */
  override rsample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    return forwardScope(() => {
      const c = stack([this.concentration1.expand(shape), this.concentration0.expand(shape)], -1);
      return attachDirichletGrad(c, this.draws(sampleShape)).select(-1, 0);
    });
  }
  /** `[X, Y]/(X + Y)` (the last dim), each clamped as PyTorch's Dirichlet draws. */
  private draws(sampleShape: number[]): Tensor {
    const shape = this.extendedShape(sampleShape);
    return noGrad(() =>
      forwardScope(() => {
        // X/(X + Y) = sigmoid(log X - log Y): X and Y may both underflow for small α, β;
        // Y/(X + Y) apart, as 1 - X/(X + Y) loses its digits where it is small.
        const lx = logStandardGamma(this.concentration1.expand(shape));
        const ly = logStandardGamma(this.concentration0.expand(shape));
        const dtype = this.concentration1.dtype;
        const clamp = (t: Tensor) => t.sigmoid().clamp(tiny(dtype), 1 - eps(dtype) / 2);
        return stack([clamp(lx.sub(ly)), clamp(ly.sub(lx))], -1);
      })
    );
  }
  /**
   * `(α - 1) log x + (β - 1) log(1 - x) + log Γ(α + β) - log Γ(α) - log Γ(β)`
   * (NaN at x = 0 or 1 where the matching concentration is 1, as PyTorch 1.13).
   */
  logProb(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.logProb(value);
    this.validateSample("logProb", value, this.concentration1);
    return forwardScope(() => {
      const [a, b] = [this.concentration1, this.concentration0];
      // PyTorch 1.13's Dirichlet takes log(x)·(α - 1), not xlogy: NaN at x = 0 with α = 1.
      return value.log().mul(a.sub(1)).add(value.neg().add(1).log().mul(b.sub(1)))
        .add(lgamma(a.add(b))).sub(lgamma(a)).sub(lgamma(b));
    });
  }
  /** The entropy of the two-component Dirichlet, as PyTorch. */
  override entropy(): Tensor {
    return forwardScope(() => {
      const [a, b] = [this.concentration1, this.concentration0];
      const c = stack([a, b], -1);
      const a0 = a.add(b);
      return lgamma(c).sum(-1).sub(lgamma(a0)).sub(a0.neg().add(2).mul(digamma(a0)))
        .sub(c.sub(1).mul(digamma(c)).sum(-1));
    });
  }
  /**
   * The first coordinate of the two-component Dirichlet's mode, as PyTorch:
   * `(α - 1)⁺/((α - 1)⁺ + (β - 1)⁺)`, 1 where both are below 1, NaN where
   * the clamped sum is 0 otherwise.
   */
  override get mode(): Tensor {
    return forwardScope(() => {
      const [a, b] = [this.concentration1, this.concentration0];
      const [am, bm] = [a.sub(1), b.sub(1)];
      const ap = am.where(noGrad(() => am.ge(0)), 0);
      const bp = bm.where(noGrad(() => bm.ge(0)), 0);
      const both = noGrad(() => a.lt(1).mul(b.lt(1)).eq(0));
      return ap.div(ap.add(bp).where(both, 1)).where(both, 1);
    });
  }
  /** `(α, β)`. */
  get naturalParams(): Tensor[] {
    return [this.concentration1, this.concentration0];
  }
  /** `log Γ(x) + log Γ(y) - log Γ(x + y)`. */
  logNormalizer(x: Tensor, y: Tensor): Tensor {
    return lgamma(x).add(lgamma(y)).sub(lgamma(x.add(y)));
  }
  /**
   * `E[-log x - log(1 - x)] = 2ψ(α + β) - ψ(α) - ψ(β)` (of the carrier
   * `1/(x(1 - x))` of these natural parameters; PyTorch 1.13 leaves it
   * unimplemented).
   */
  override get meanCarrierMeasure(): Tensor {
    const [a, b] = [this.concentration1, this.concentration0];
    return digamma(a.add(b)).mul(2).sub(digamma(a)).sub(digamma(b));
  }
  /** `concentration1`, `concentration0`. */
  protected params(): Record<string, Tensor> {
    return { concentration1: this.concentration1, concentration0: this.concentration0 };
  }
}
