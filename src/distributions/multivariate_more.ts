/**
 * Dirichlet, LowRankMultivariateNormal and MixtureSameFamily, as
 * `torch.distributions`: the vector-valued families besides
 * MultivariateNormal and Multinomial.
 * @module
 */

import { Tensor } from "../tensor.ts";
import { noGrad } from "../autograd.ts";
import { arange, randn } from "../ops/mod.ts";
import { eye } from "../ops_composite/mod.ts";
import { cholesky, solveTriangular } from "../linalg/mod.ts";
import { forwardScope } from "../storage.ts";
import { broadcastShapes, formatShape } from "../shape.ts";
import type { Device } from "../device.ts";
import { type Constraint, Distribution, type DistributionOptions } from "./distribution.ts";
import { checkMaskLater, constraints, defaultValidateArgs } from "./util.ts";
import { constraints as allConstraints } from "./constraints.ts";
import { Categorical } from "./discrete.ts";
import { attachDirichletGrad, standardGamma } from "./gamma_sampling.ts";
import { ExponentialFamily } from "./exp_family.ts";
import { takeFactor, withFactor, wtDinv } from "./mvn_util.ts";

const LOG_2PI = Math.log(2 * Math.PI);

/** The smallest normal number of `dtype` (`torch.finfo(dtype).tiny`). */
function tiny(dtype: Tensor["dtype"]): number {
  return dtype === "float64" ? 2.2250738585072014e-308 : 1.1754943508222875e-38;
}

/** A float tensor at least `ndim`-D, or a TypeError/RangeError naming it. */
function requireTensor(op: string, name: string, t: unknown, ndim: number): Tensor {
  if (!(t instanceof Tensor)) {
    throw new TypeError(`${op}: ${name} must be a Tensor, got ${typeof t}`);
  }
  if (t.dtype !== "float32" && t.dtype !== "float64") {
    throw new TypeError(`${op}: ${name} must be a float tensor, got dtype ${t.dtype}`);
  }
  if (t.ndim < ndim) {
    throw new RangeError(
      `${op}: ${name} must be at least ${ndim}-dimensional, got shape ${formatShape(t.shape)}`,
    );
  }
  return t;
}

/**
 * The Dirichlet distribution on the probability simplex of
 * `concentration` α (last dim K, the dims before it the batch), as
 * `torch.distributions.Dirichlet`. Draws normalize gamma draws; `rsample`
 * differentiates them implicitly in the concentration, with PyTorch's
 * `_dirichlet_grad`.
 */
export class Dirichlet extends ExponentialFamily {
  /** α, `batchShape + [K]`. */
  readonly concentration: Tensor;

  /** `concentration` positive, at least 1-D. */
  constructor(concentration: Tensor, options: DistributionOptions = {}) {
    const c = requireTensor("Dirichlet", "concentration", concentration, 1);
    super(c.shape.slice(0, -1), c.shape.slice(-1), options.validateArgs ?? defaultValidateArgs());
    this.concentration = c;
    if (this.validateArgs) {
      checkMaskLater(
        noGrad(() => c.gt(0)),
        c,
        (i, v) => `Dirichlet: concentration must satisfy x > 0, got ${v} at index ${i}`,
      );
    }
  }
  /** The simplex. */
  get support(): Constraint {
    return allConstraints.simplex;
  }
  /** `α/Σα`. */
  get mean(): Tensor {
    return this.concentration.div(this.concentration.sum(-1, true));
  }
  /**
   * `(α - 1)⁺/Σ(α - 1)⁺`; where every α < 1 (the density is unbounded at
   * every vertex) the first vertex, and NaN where the α - 1 sum to 0 otherwise,
   * as PyTorch.
   */
  override get mode(): Tensor {
    return forwardScope(() => {
      const c = this.concentration;
      const k = c.shape[c.ndim - 1];
      // clamp(min=0) as PyTorch's backward: a NaN gradient stays out of the clamped entries.
      const below = c.sub(1);
      const cm1 = below.where(noGrad(() => below.ge(0)), 0);
      const allBelow = noGrad(() => c.lt(1).amin(-1, true));
      // Those rows take the vertex: a safe sum keeps 0/0's NaN out of their gradient.
      const mode = cm1.div(cm1.sum(-1, true).where(allBelow.eq(0), 1));
      const first = noGrad(() =>
        arange(0, k, 1, { dtype: c.dtype, device: c.device }).eq(0).to(c.dtype).expand([...c.shape])
      );
      return first.where(allBelow.gt(0).expand([...c.shape]), mode);
    });
  }
  /** `α(α₀ - α)/(α₀²(α₀ + 1))` with `α₀ = Σα`. */
  get variance(): Tensor {
    const c = this.concentration;
    const total = c.sum(-1, true);
    return c.mul(total.sub(c)).div(total.square().mul(total.add(1)));
  }
  /** True: draws are differentiable in the concentration. */
  override get hasRsample(): boolean {
    return true;
  }
  /** The same draws, differentiable in the concentration (PyTorch's `_Dirichlet` backward). */
  override rsample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    return attachDirichletGrad(this.concentration.expand(shape), this.sample(sampleShape));
  }
  /** Normalized gamma draws, without gradient. */
  override sample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    return noGrad(() =>
      forwardScope(() => {
        const g = standardGamma(this.concentration.expand(shape));
        return g.div(g.sum(-1, true)).clamp(tiny(g.dtype));
      })
    );
  }
  /** `Σ (α - 1) log x + log Γ(Σα) - Σ log Γ(α)`. */
  logProb(value: Tensor): Tensor {
    this.validateSample("logProb", value, this.concentration);
    return forwardScope(() => {
      const c = this.concentration;
      return value.log().mul(c.sub(1)).sum(-1).add(c.sum(-1).lgamma()).sub(c.lgamma().sum(-1));
    });
  }
  /** `Σ log Γ(α) - log Γ(α₀) - (K - α₀)ψ(α₀) - Σ (α - 1)ψ(α)`. */
  override entropy(): Tensor {
    return forwardScope(() => {
      const c = this.concentration;
      const k = c.shape[c.ndim - 1];
      const a0 = c.sum(-1);
      return c.lgamma().sum(-1).sub(a0.lgamma()).sub(a0.neg().add(k).mul(a0.digamma()))
        .sub(c.sub(1).mul(c.digamma()).sum(-1));
    });
  }
  /** `(α)`. */
  get naturalParams(): Tensor[] {
    return [this.concentration];
  }
  /** `Σ log Γ(xᵢ) - log Γ(Σ xᵢ)`. */
  logNormalizer(x: Tensor): Tensor {
    return x.lgamma().sum(-1).sub(x.sum(-1).lgamma());
  }
  /**
   * `E[-Σ log xᵢ] = K ψ(α₀) - Σ ψ(αᵢ)` (of the carrier `1/Π xᵢ`; PyTorch
   * 1.13 leaves it unimplemented).
   */
  override get meanCarrierMeasure(): Tensor {
    const c = this.concentration;
    return c.sum(-1).digamma().mul(c.shape[c.ndim - 1]).sub(c.digamma().sum(-1));
  }
  /** `concentration`. */
  protected params(): Record<string, Tensor> {
    return { concentration: this.concentration };
  }
}

/** The Cholesky factor of the capacitance `I + Wᵀ D⁻¹ W` (`_batch_capacitance_tril`). */
function capacitanceTril(w: Tensor, d: Tensor): Tensor {
  const m = w.shape[w.ndim - 1];
  const k = wtDinv(w, d).matmul(w).add(eye(m, { dtype: w.dtype, device: w.device }));
  return cholesky(k);
}

/** `log|W Wᵀ + D| = 2 Σ log diag C + Σ log D` (the matrix determinant lemma). */
function lowrankLogdet(d: Tensor, capTril: Tensor): Tensor {
  return capTril.diagonal(0, -2, -1).log().sum(-1).mul(2).add(d.log().sum(-1));
}

/** `‖L⁻¹x‖²` over the last dim, batch dims broadcast (`_batch_mahalanobis`). */
function mahalanobis(l: Tensor, x: Tensor): Tensor {
  const shape = broadcastShapes(l.shape.slice(0, -2), x.shape.slice(0, -1));
  const n = x.shape[x.ndim - 1];
  const lb = l.expand([...shape, n, n]);
  const xb = x.expand([...shape, n]).unsqueeze(-1);
  return solveTriangular(lb, xb, { upper: false }).squeeze(-1).square().sum(-1);
}

/** `xᵀ(W Wᵀ + D)⁻¹x` by the Woodbury identity (`_batch_lowrank_mahalanobis`). */
function lowrankMahalanobis(w: Tensor, d: Tensor, x: Tensor, capTril: Tensor): Tensor {
  const wtdx = wtDinv(w, d).matmul(x.unsqueeze(-1)).squeeze(-1);
  return x.square().div(d).sum(-1).sub(mahalanobis(capTril, wtdx));
}

/**
 * The normal distribution whose covariance is `W Wᵀ + diag(D)` with a
 * low-rank `covFactor` W (`[..., n, m]`) and a positive `covDiag` D
 * (`[..., n]`), as `torch.distributions.LowRankMultivariateNormal`:
 * densities by the Woodbury identity and the matrix determinant lemma, at
 * O(n·m²) per element.
 *
 * @example
 * ```ts
 * import { distributions, tensor } from "@multigrad/core";
 * const d = new distributions.LowRankMultivariateNormal(
 *   tensor([0, 0, 0]),
 *   tensor([[1], [0.5], [0]]),
 *   tensor([1, 1, 2]),
 * );
 * const lp = d.logProb(tensor([0.1, 0.2, -0.3]));
 * ```
 */
export class LowRankMultivariateNormal extends Distribution {
  /** The mean, `batchShape + [n]`. */
  readonly loc: Tensor;
  /** W, `batchShape + [n, m]`. */
  readonly covFactor: Tensor;
  /** D, `batchShape + [n]`. */
  readonly covDiag: Tensor;
  /** The Cholesky factor of `I + Wᵀ D⁻¹ W`, `batchShape + [m, m]`. */
  readonly capacitanceTril: Tensor;

  /** `loc` `[..., n]`, `covFactor` `[..., n, m]`, `covDiag` `[..., n]` positive; batch dims broadcast. */
  constructor(loc: Tensor, covFactor: Tensor, covDiag: Tensor, options: DistributionOptions = {}) {
    const op = "LowRankMultivariateNormal";
    requireTensor(op, "loc", loc, 1);
    requireTensor(op, "covFactor", covFactor, 2);
    requireTensor(op, "covDiag", covDiag, 1);
    const n = loc.shape[loc.ndim - 1];
    if (covFactor.shape[covFactor.ndim - 2] !== n) {
      throw new RangeError(
        `${op}: covFactor must be a batch of matrices of shape [${n}, m] (loc has shape ${
          formatShape(loc.shape)
        }), got ${formatShape(covFactor.shape)}`,
      );
    }
    if (covDiag.shape[covDiag.ndim - 1] !== n) {
      throw new RangeError(
        `${op}: covDiag must be a batch of vectors of shape [${n}] (loc has shape ${
          formatShape(loc.shape)
        }), got ${formatShape(covDiag.shape)}`,
      );
    }
    for (const [name, t] of [["covFactor", covFactor], ["covDiag", covDiag]] as const) {
      if (t.dtype !== loc.dtype || t.device !== loc.device) {
        throw new TypeError(
          `${op}: loc and ${name} must have one dtype and device, got ${loc.dtype} on ${loc.device} and ${t.dtype} on ${t.device}`,
        );
      }
    }
    let batch: number[];
    try {
      batch = broadcastShapes(
        broadcastShapes(loc.shape.slice(0, -1), covFactor.shape.slice(0, -2), op),
        covDiag.shape.slice(0, -1),
        op,
      );
    } catch {
      throw new RangeError(
        `${op}: incompatible batch shapes: loc ${formatShape(loc.shape)}, covFactor ${
          formatShape(covFactor.shape)
        }, covDiag ${formatShape(covDiag.shape)}`,
      );
    }
    super(batch, [n], options.validateArgs ?? defaultValidateArgs());
    const m = covFactor.shape[covFactor.ndim - 1];
    this.loc = loc.expand([...batch, n]);
    this.covFactor = covFactor.expand([...batch, n, m]);
    this.covDiag = covDiag.expand([...batch, n]);
    if (this.validateArgs) {
      for (const [name, t] of [["loc", loc], ["covFactor", covFactor]] as const) {
        checkMaskLater(
          noGrad(() => t.eq(t)),
          t,
          (i, v) => `${op}: ${name} must satisfy real, got ${v} at index ${i}`,
        );
      }
      checkMaskLater(
        noGrad(() => covDiag.gt(0)),
        covDiag,
        (i, v) => `${op}: covDiag must satisfy x > 0, got ${v} at index ${i}`,
      );
    }
    this.capacitanceTril = takeFactor(
      covFactor,
      () => forwardScope(() => capacitanceTril(this.covFactor, this.covDiag)),
    );
  }
  /** The real vectors. */
  get support(): Constraint {
    return constraints.real;
  }
  /** True. */
  override get hasRsample(): boolean {
    return true;
  }
  /** `loc`. */
  get mean(): Tensor {
    return this.loc;
  }
  /** `loc`. */
  override get mode(): Tensor {
    return this.loc;
  }
  /** `Σⱼ W²ᵢⱼ + Dᵢ`. */
  get variance(): Tensor {
    return this.covFactor.square().sum(-1).add(this.covDiag);
  }
  /** `W Wᵀ + diag(D)`. */
  get covarianceMatrix(): Tensor {
    return this.covFactor.matmul(this.covFactor.transpose(-1, -2)).add(this.covDiag.diagEmbed());
  }
  /** `D⁻¹ - Aᵀ A` with `A = C⁻¹ Wᵀ D⁻¹` (Woodbury). */
  get precisionMatrix(): Tensor {
    return forwardScope(() => {
      const a = solveTriangular(this.capacitanceTril, wtDinv(this.covFactor, this.covDiag), {
        upper: false,
      });
      return this.covDiag.reciprocal().diagEmbed().sub(a.transpose(-1, -2).matmul(a));
    });
  }
  /** `√D · cholesky(I + D^{-½} W Wᵀ D^{-½})`, as PyTorch. */
  get scaleTril(): Tensor {
    return forwardScope(() => {
      const n = this.eventShape[0];
      const s = this.covDiag.sqrt().unsqueeze(-1);
      const dw = this.covFactor.div(s);
      const k = dw.matmul(dw.transpose(-1, -2)).add(
        eye(n, { dtype: s.dtype, device: s.device }),
      );
      return s.mul(cholesky(k));
    });
  }
  /** `loc + W·ε_W + √D·ε_D` with standard normal ε's. */
  override rsample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    const m = this.covFactor.shape[this.covFactor.ndim - 1];
    const opts = { dtype: this.loc.dtype, device: this.loc.device };
    const ew = randn([...shape.slice(0, -1), m], opts);
    const ed = randn(shape, opts);
    return this.loc.add(this.covFactor.matmul(ew.unsqueeze(-1)).squeeze(-1))
      .add(this.covDiag.sqrt().mul(ed));
  }
  /** `-½(n log 2π + log|Σ| + (x - loc)ᵀ Σ⁻¹ (x - loc))`. */
  logProb(value: Tensor): Tensor {
    this.validateSample("logProb", value, this.loc);
    return forwardScope(() => {
      const diff = value.sub(this.loc);
      const shape = broadcastShapes(diff.shape.slice(0, -1), this.batchShape);
      const n = this.eventShape[0];
      const m = this.covFactor.shape[this.covFactor.ndim - 1];
      const w = this.covFactor.expand([...shape, n, m]);
      const d = this.covDiag.expand([...shape, n]);
      const maha = lowrankMahalanobis(w, d, diff.expand([...shape, n]), this.capacitanceTril);
      const logdet = this.logdet();
      return maha.add(logdet).add(n * LOG_2PI).mul(-0.5);
    });
  }
  /** `½(n(1 + log 2π) + log|Σ|)`. */
  override entropy(): Tensor {
    const n = this.eventShape[0];
    return forwardScope(() => this.logdet().add(n * (1 + LOG_2PI)).mul(0.5));
  }
  /** `log|W Wᵀ + D|`. */
  logdet(): Tensor {
    return lowrankLogdet(this.covDiag, this.capacitanceTril);
  }
  /** `xᵀ Σ⁻¹ x` (Woodbury), batch dims of x as the distribution's. */
  mahalanobis(x: Tensor): Tensor {
    return lowrankMahalanobis(this.covFactor, this.covDiag, x, this.capacitanceTril);
  }
  /** `loc`, `covFactor`, `covDiag`. */
  protected params(): Record<string, Tensor> {
    return { loc: this.loc, cov_factor: this.covFactor, cov_diag: this.covDiag };
  }
  /** The parameters and the capacitance factor expanded (no factoring per copy). */
  protected override expanded(batchShape: number[]): Distribution {
    const [n, m] = this.covFactor.shape.slice(-2);
    const factor = this.covFactor.expand([...batchShape, n, m]);
    return withFactor(
      factor,
      this.capacitanceTril.expand([...batchShape, m, m]),
      () =>
        this.remake([
          this.loc.expand([...batchShape, n]),
          factor,
          this.covDiag.expand([...batchShape, n]),
        ], false),
    );
  }
}

/**
 * A mixture of `K` components of one family: `mixtureDistribution` a
 * {@link Categorical} over the rightmost batch dim of
 * `componentDistribution`, as `torch.distributions.MixtureSameFamily`.
 *
 * @example
 * ```ts
 * import { distributions, tensor } from "@multigrad/core";
 * const mix = new distributions.Categorical({ probs: tensor([0.3, 0.7]) });
 * const comp = new distributions.Normal(tensor([-1, 2]), tensor([0.5, 1]));
 * const gmm = new distributions.MixtureSameFamily(mix, comp);
 * const lp = gmm.logProb(tensor([0.0, 1.5]));
 * ```
 */
export class MixtureSameFamily extends Distribution {
  /** The categorical distribution of the component index. */
  readonly mixtureDistribution: Categorical;
  /** The components, batch shape `batchShape + [K]`. */
  readonly componentDistribution: Distribution;

  /** The mixture's batch shape must broadcast with the components' minus the last dim, of size K. */
  constructor(
    mixtureDistribution: Categorical,
    componentDistribution: Distribution,
    options: DistributionOptions = {},
  ) {
    const op = "MixtureSameFamily";
    if (!(mixtureDistribution instanceof Categorical)) {
      throw new TypeError(`${op}: mixtureDistribution must be a Categorical`);
    }
    if (!(componentDistribution instanceof Distribution)) {
      throw new TypeError(`${op}: componentDistribution must be a Distribution`);
    }
    const cbs = componentDistribution.batchShape;
    if (cbs.length < 1) {
      throw new RangeError(
        `${op}: componentDistribution must have at least one batch dim (the components), got batch shape []`,
      );
    }
    const mdbs = mixtureDistribution.batchShape;
    const cdbs = cbs.slice(0, -1);
    for (let i = 1; i <= Math.min(mdbs.length, cdbs.length); i++) {
      const [a, b] = [mdbs[mdbs.length - i], cdbs[cdbs.length - i]];
      if (a !== 1 && b !== 1 && a !== b) {
        throw new RangeError(
          `${op}: mixtureDistribution batch shape ${
            formatShape(mdbs)
          } does not broadcast with componentDistribution batch shape ${
            formatShape(cdbs)
          } (its batch shape ${formatShape(cbs)} without the last dim)`,
        );
      }
    }
    const km = mixtureDistribution.numEvents;
    const kc = cbs[cbs.length - 1];
    if (km !== kc) {
      throw new RangeError(
        `${op}: mixtureDistribution has ${km} components but componentDistribution's last batch dim is ${kc}`,
      );
    }
    super(cdbs, componentDistribution.eventShape, options.validateArgs ?? defaultValidateArgs());
    this.mixtureDistribution = mixtureDistribution;
    this.componentDistribution = componentDistribution;
  }
  /** The components' support. */
  get support(): Constraint {
    return this.componentDistribution.support;
  }
  /** The device of the components. */
  override get paramDevice(): Device | undefined {
    return this.componentDistribution.paramDevice;
  }
  /** Itself (its parts keep their devices). */
  override withNumbersOn(_device: Device | undefined): Distribution {
    return this;
  }
  /** The event dims of one component draw. */
  private get eventNdims(): number {
    return this.eventShape.length;
  }
  /** `x` with a size-1 component dim before the event dims. */
  private pad(x: Tensor): Tensor {
    return x.unsqueeze(-1 - this.eventNdims);
  }
  /** The mixture probabilities with size-1 event dims after the component dim. */
  private padProbs(): Tensor {
    let p = this.mixtureDistribution.probs;
    for (let i = 0; i < this.eventNdims; i++) p = p.unsqueeze(-1);
    return p;
  }
  /** `Σₖ πₖ μₖ`. */
  get mean(): Tensor {
    return forwardScope(() =>
      this.padProbs().mul(this.componentDistribution.mean).sum(-1 - this.eventNdims)
    );
  }
  /** The law of total variance: `Σₖ πₖ σₖ² + Σₖ πₖ (μₖ - μ)²`. */
  get variance(): Tensor {
    return forwardScope(() => {
      const p = this.padProbs();
      const dim = -1 - this.eventNdims;
      const c = this.componentDistribution;
      const condVar = p.mul(c.variance).sum(dim);
      const varCond = p.mul(c.mean.sub(this.pad(this.mean)).square()).sum(dim);
      return condVar.add(varCond);
    });
  }
  /** `Σₖ πₖ Fₖ(x)` (univariate components only). */
  override cdf(value: Tensor): Tensor {
    if (this.eventNdims !== 0) {
      throw new TypeError(
        `MixtureSameFamily.cdf: needs univariate components, got event shape ${
          formatShape(this.eventShape)
        }`,
      );
    }
    return forwardScope(() =>
      this.componentDistribution.cdf(this.pad(value)).mul(this.mixtureDistribution.probs).sum(-1)
    );
  }
  /** `logsumexp_k(log πₖ + log pₖ(x))`. */
  logProb(value: Tensor): Tensor {
    if (!(value instanceof Tensor)) {
      throw new TypeError(`MixtureSameFamily.logProb: value must be a Tensor, got ${typeof value}`);
    }
    return forwardScope(() => {
      const lp = this.componentDistribution.logProb(this.pad(value));
      const logMix = this.mixtureDistribution.logits.logSoftmax(-1);
      return lp.add(logMix).logsumexp(-1);
    });
  }
  /** A component index, then that component's draw, without gradient. */
  override sample(sampleShape: number[] = []): Tensor {
    return noGrad(() =>
      forwardScope(() => {
        const mix = this.mixtureDistribution.sample(sampleShape);
        const comp = this.componentDistribution.sample(sampleShape);
        const ed = this.eventNdims;
        const dim = comp.ndim - 1 - ed;
        let index = mix;
        // The mixture's batch dims may be broadcast against the components'.
        const target = comp.shape.slice(0, dim);
        index = index.reshape([
          ...target.slice(0, target.length - index.ndim).map(() => 1),
          ...index.shape,
        ]).expand(target);
        for (let i = 0; i <= ed; i++) index = index.unsqueeze(-1);
        index = index.expand([...target, 1, ...this.eventShape]);
        return comp.gather(dim, index).squeeze(dim);
      })
    );
  }
  /** `MixtureSameFamily(\n  mixture,\n  components)`, as PyTorch. */
  override toString(): string {
    return `MixtureSameFamily(\n  ${this.mixtureDistribution},\n  ${this.componentDistribution})`;
  }
  /** None of its own (see {@link toString}). */
  protected params(): Record<string, Tensor> {
    return {};
  }
  /** The mixture expanded to `batchShape`, the components to `batchShape + [K]`. */
  protected override expanded(batchShape: number[]): Distribution {
    const k = this.mixtureDistribution.numEvents;
    const Kind = this.constructor as typeof MixtureSameFamily;
    return new Kind(
      this.mixtureDistribution.expand(batchShape),
      this.componentDistribution.expand([...batchShape, k]),
      { validateArgs: false },
    );
  }
}
