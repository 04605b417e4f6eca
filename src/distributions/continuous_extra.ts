/**
 * Chi2, StudentT, FisherSnedecor, VonMises and ContinuousBernoulli, as
 * `torch.distributions`. The gamma-based ones draw through the library's
 * Marsaglia–Tsang sampler and, as {@link Gamma}, are reparameterized
 * (implicitly in their degrees of freedom); so is ContinuousBernoulli.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { noGrad } from "../autograd.ts";
import { full, rand, randn } from "../ops/mod.ts";
import { forwardScope } from "../storage.ts";
import { scopedRounds } from "../ops_composite/util.ts";
import {
  type Constraint,
  Distribution,
  type DistributionOptions,
  type Param,
} from "./distribution.ts";
import {
  broadcastAll,
  checkParam,
  clampProbs,
  constraints,
  defaultValidateArgs,
  softplus,
} from "./util.ts";
import type { ProbsOrLogits } from "./discrete.ts";
import { Gamma } from "./gamma.ts";
import { rsampleStandardGamma } from "./gamma_sampling.ts";
import { ExponentialFamily } from "./exp_family.ts";

const LOG_PI = Math.log(Math.PI);
const LOG_2PI = Math.log(2 * Math.PI);

/** The smallest normal number of `dtype` (`torch.finfo(dtype).tiny`). */
function tiny(dtype: Tensor["dtype"]): number {
  return dtype === "float64" ? 2.2250738585072014e-308 : 1.1754943508222875e-38;
}

/** `NaN` where `bad`, else `t` (the mask without gradient). */
function nanWhere(t: Tensor, bad: () => Tensor): Tensor {
  return t.where(noGrad(() => bad().eq(0)), NaN);
}

/**
 * The chi-squared distribution of `df` degrees of freedom, as
 * `torch.distributions.Chi2`: `Gamma(df/2, 1/2)` (a {@link Gamma}, so the
 * Gamma KL pairs and its `rsample` apply).
 */
export class Chi2 extends Gamma {
  /** `df > 0`. */
  constructor(df: Param, options: DistributionOptions = {}) {
    if (typeof df === "number" && (options.validateArgs ?? defaultValidateArgs()) && !(df > 0)) {
      throw new RangeError(`Chi2: df must satisfy x > 0, got ${df}`);
    }
    super(typeof df === "number" ? df * 0.5 : df.mul(0.5), 0.5, { validateArgs: false });
    (this as { validateArgs: boolean }).validateArgs = options.validateArgs ??
      defaultValidateArgs();
    if (this.validateArgs && typeof df !== "number") {
      checkParam("Chi2", "df", df, this.df, constraints.positive);
    }
  }
  /** The degrees of freedom, `2·concentration`. */
  get df(): Tensor {
    return this.concentration.mul(2);
  }
  /** `Chi2(df: ...)`, as PyTorch. */
  override toString(): string {
    return `Chi2(df: torch.Size([${this.concentration.shape.join(", ")}]))`;
  }
  /** A Chi2 from its parameters (`concentration = df/2`, `rate`). */
  protected override remake([c]: Param[], validateArgs = this.validateArgs): Distribution {
    const Kind = this.constructor as typeof Chi2;
    return new Kind(typeof c === "number" ? c * 2 : c.mul(2), { validateArgs });
  }
}

/**
 * Student's t distribution of `df` degrees of freedom, location `loc` and
 * scale `scale`, as `torch.distributions.StudentT` (reparameterized: its
 * chi-squared draw implicitly, see {@link Gamma}).
 */
export class StudentT extends Distribution {
  /** The degrees of freedom. */
  readonly df: Tensor;
  /** The location. */
  readonly loc: Tensor;
  /** The scale. */
  readonly scale: Tensor;

  /** `df > 0`, `loc` real (default 0), `scale > 0` (default 1), broadcast together. */
  constructor(df: Param, loc: Param = 0, scale: Param = 1, options: DistributionOptions = {}) {
    const [d, l, s] = broadcastAll("StudentT", { df, loc, scale });
    super(d.shape, [], options.validateArgs ?? defaultValidateArgs());
    this.df = d;
    this.loc = l;
    this.scale = s;
    if (this.validateArgs) {
      checkParam("StudentT", "df", df, d, constraints.positive);
      checkParam("StudentT", "loc", loc, l, constraints.real);
      checkParam("StudentT", "scale", scale, s, constraints.positive);
    }
  }
  /** The real line. */
  get support(): Constraint {
    return constraints.real;
  }
  /** `loc` where `df > 1`, else NaN. */
  get mean(): Tensor {
    return nanWhere(this.loc.mul(1), () => this.df.le(1));
  }
  /** `loc`. */
  override get mode(): Tensor {
    return this.loc;
  }
  /** `scale²·df/(df - 2)` where `df > 2`, infinity for `1 < df <= 2`, NaN for `df <= 1`. */
  get variance(): Tensor {
    const df = this.df;
    const safe = df.where(noGrad(() => df.gt(2)), 3);
    const v = this.scale.square().mul(safe).div(safe.sub(2));
    const inf = v.where(noGrad(() => df.gt(2).add(df.le(1))), Infinity);
    return nanWhere(inf, () => df.le(1));
  }
  /** True: draws are differentiable in every parameter. */
  override get hasRsample(): boolean {
    return true;
  }
  /** `loc + scale·X/√(Z/df)` with X standard normal and Z ~ χ²(df). */
  override rsample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    return forwardScope(() => {
      const opts = { dtype: this.df.dtype, device: this.df.device };
      const x = randn(shape, opts);
      const z = rsampleStandardGamma(this.df.mul(0.5).expand(shape)).mul(2);
      return this.loc.add(this.scale.mul(x.mul(z.div(this.df).rsqrt())));
    });
  }
  /** `-½(df + 1) log(1 + y²/df) - log Z` with `y = (x - loc)/scale`, as PyTorch. */
  logProb(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.logProb(value);
    this.validateSample("logProb", value, this.df);
    return forwardScope(() => {
      const df = this.df;
      const y = value.sub(this.loc).div(this.scale);
      const z = this.scale.log().add(df.log().mul(0.5)).add(0.5 * LOG_PI)
        .add(df.mul(0.5).lgamma()).sub(df.add(1).mul(0.5).lgamma());
      return y.square().div(df).log1p().mul(df.add(1).mul(-0.5)).sub(z);
    });
  }
  /** The entropy, as PyTorch's formula with `lbeta(df/2, 1/2)`. */
  override entropy(): Tensor {
    return forwardScope(() => {
      const df = this.df;
      const half = df.mul(0.5);
      const halfUp = df.add(1).mul(0.5);
      const lbeta = half.lgamma().add(0.5 * LOG_PI).sub(halfUp.lgamma());
      return this.scale.log().add(halfUp.mul(halfUp.digamma().sub(half.digamma())))
        .add(df.log().mul(0.5)).add(lbeta);
    });
  }
  /** `df`, `loc`, `scale`. */
  protected params(): Record<string, Tensor> {
    return { df: this.df, loc: this.loc, scale: this.scale };
  }
}

/**
 * The F distribution of `df1` and `df2` degrees of freedom, as
 * `torch.distributions.FisherSnedecor` (a ratio of gamma draws,
 * reparameterized as {@link Gamma}; PyTorch has no entropy for it either).
 */
export class FisherSnedecor extends Distribution {
  /** The numerator's degrees of freedom. */
  readonly df1: Tensor;
  /** The denominator's degrees of freedom. */
  readonly df2: Tensor;

  /** Both positive, broadcast together. */
  constructor(df1: Param, df2: Param, options: DistributionOptions = {}) {
    const [a, b] = broadcastAll("FisherSnedecor", { df1, df2 });
    super(a.shape, [], options.validateArgs ?? defaultValidateArgs());
    this.df1 = a;
    this.df2 = b;
    if (this.validateArgs) {
      checkParam("FisherSnedecor", "df1", df1, a, constraints.positive);
      checkParam("FisherSnedecor", "df2", df2, b, constraints.positive);
    }
  }
  /** `x > 0`. */
  get support(): Constraint {
    return constraints.positive;
  }
  /** `df2/(df2 - 2)` where `df2 > 2`, else NaN. */
  get mean(): Tensor {
    const df2 = nanWhere(this.df2, () => this.df2.le(2));
    return df2.div(df2.sub(2));
  }
  /** `(df1 - 2)/df1 · df2/(df2 + 2)` where `df1 > 2`, else NaN (zero gradients there, as PyTorch). */
  override get mode(): Tensor {
    const [df1, df2] = [this.df1, this.df2];
    const safe = df1.where(noGrad(() => df1.gt(2)), 3);
    return nanWhere(safe.sub(2).div(safe).mul(df2).div(df2.add(2)), () => df1.le(2));
  }
  /**
   * `2·df2²(df1 + df2 - 2)/(df1(df2 - 2)²(df2 - 4))` where `df2 > 4`, else
   * NaN (with NaN gradients in df1 there, as PyTorch).
   */
  get variance(): Tensor {
    const df1 = this.df1;
    const df2 = nanWhere(this.df2, () => this.df2.le(4));
    return df2.square().mul(2).mul(df1.add(df2).sub(2))
      .div(df1.mul(df2.sub(2).square()).mul(df2.sub(4)));
  }
  /** True: draws are differentiable in both degrees of freedom. */
  override get hasRsample(): boolean {
    return true;
  }
  /** `(X₁/df1)/(X₂/df2)` of χ² draws, clamped to the smallest normal number. */
  override rsample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    return forwardScope(() => {
      const t = tiny(this.df1.dtype);
      const x1 = rsampleStandardGamma(this.df1.mul(0.5).expand(shape)).div(this.df1).clamp(t);
      const x2 = rsampleStandardGamma(this.df2.mul(0.5).expand(shape)).div(this.df2).clamp(t);
      return x1.div(x2).clamp(t);
    });
  }
  /** The log-density, as PyTorch's formula. */
  logProb(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.logProb(value);
    this.validateSample("logProb", value, this.df1);
    return forwardScope(() => {
      const ct1 = this.df1.mul(0.5);
      const ct2 = this.df2.mul(0.5);
      const ct3 = this.df1.div(this.df2);
      const t1 = ct1.add(ct2).lgamma().sub(ct1.lgamma()).sub(ct2.lgamma());
      const t2 = ct1.mul(ct3.log()).add(ct1.sub(1).mul(value.log()));
      const t3 = ct1.add(ct2).mul(ct3.mul(value).log1p());
      return t1.add(t2).sub(t3);
    });
  }
  /** `df1`, `df2`. */
  protected params(): Record<string, Tensor> {
    return { df1: this.df1, df2: this.df2 };
  }
}

const I0_SMALL = [1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.360768e-1, 0.45813e-2];
const I0_LARGE = [
  0.39894228,
  0.1328592e-1,
  0.225319e-2,
  -0.157565e-2,
  0.916281e-2,
  -0.2057706e-1,
  0.2635537e-1,
  -0.1647633e-1,
  0.392377e-2,
];
const I1_SMALL = [0.5, 0.87890594, 0.51498869, 0.15084934, 0.2658733e-1, 0.301532e-2, 0.32411e-3];
const I1_LARGE = [
  0.39894228,
  -0.3988024e-1,
  -0.362018e-2,
  0.163801e-2,
  -0.1031555e-1,
  0.2282967e-1,
  -0.2895312e-1,
  0.1787654e-1,
  -0.420059e-2,
];

/** Horner's rule, lowest coefficient first. */
function poly(y: Tensor, coef: number[]): Tensor {
  let r = y.mul(0).add(coef[coef.length - 1]);
  for (let i = coef.length - 2; i >= 0; i--) r = r.mul(y).add(coef[i]);
  return r;
}

/**
 * `log I₀(x)` or `log I₁(x)` for x > 0 by the polynomial approximations
 * PyTorch's VonMises uses (relative error near 1e-7), so that its numbers
 * match PyTorch's.
 */
function logBessel(x: Tensor, order: 0 | 1): Tensor {
  const y = x.div(3.75).square();
  let small = poly(y, order === 0 ? I0_SMALL : I1_SMALL);
  if (order === 1) small = x.abs().mul(small);
  const isSmall = noGrad(() => x.lt(3.75));
  const smallSafe = small.where(isSmall, 1).log();
  const xl = x.where(isSmall.eq(0), 3.75);
  const large = xl.sub(xl.log().mul(0.5)).add(
    poly(xl.reciprocal().mul(3.75), order === 0 ? I0_LARGE : I1_LARGE).log(),
  );
  return smallSafe.where(isSmall, large);
}

/** Rounds of Best–Fisher proposals per draw (acceptance at least 65% each). */
const VM_ROUNDS = 40;

/**
 * The von Mises distribution (a circular normal) of mean angle `loc` and
 * `concentration` κ > 0, as `torch.distributions.VonMises`: support the
 * real line (angles modulo 2π), mean and variance circular. Draws by Best
 * and Fisher's rejection, a fixed number of rounds on the device, without
 * gradient (as PyTorch).
 */
export class VonMises extends Distribution {
  /** The mean angle. */
  readonly loc: Tensor;
  /** The concentration κ. */
  readonly concentration: Tensor;

  /** `loc` real, `concentration > 0`, broadcast together. */
  constructor(loc: Param, concentration: Param, options: DistributionOptions = {}) {
    const [l, k] = broadcastAll("VonMises", { loc, concentration });
    super(l.shape, [], options.validateArgs ?? defaultValidateArgs());
    this.loc = l;
    this.concentration = k;
    if (this.validateArgs) {
      checkParam("VonMises", "loc", loc, l, constraints.real);
      checkParam("VonMises", "concentration", concentration, k, constraints.positive);
    }
  }
  /** The real line (angles). */
  get support(): Constraint {
    return constraints.real;
  }
  /** `loc` (the circular mean). */
  get mean(): Tensor {
    return this.loc;
  }
  /** `loc`. */
  override get mode(): Tensor {
    return this.loc;
  }
  /** `1 - I₁(κ)/I₀(κ)` (the circular variance). */
  get variance(): Tensor {
    return forwardScope(() =>
      logBessel(this.concentration, 1).sub(logBessel(this.concentration, 0)).exp().neg().add(1)
    );
  }
  /** Angles in [-π, π), without gradient. */
  override sample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    return noGrad(() =>
      forwardScope(() => {
        const opts = { dtype: this.loc.dtype, device: this.loc.device };
        const k = this.concentration.expand(shape);
        const tau = k.square().mul(4).add(1).sqrt().add(1);
        // (τ - √(2τ))/(2κ) without the cancellation that makes it 0 (and the draws loc) for tiny κ.
        const rho = k.mul(2).div(tau.add(tau.mul(2).sqrt()));
        const r = rho.square().add(1).div(rho.mul(2));
        const initial: [Tensor, Tensor] = [full(shape, 0, opts), full(shape, 1, opts)];
        const [x] = scopedRounds(VM_ROUNDS, initial, ([x, open]) => {
          const u1 = rand(shape, opts);
          const u2 = rand(shape, opts);
          const u3 = rand(shape, opts);
          const z = u1.mul(Math.PI).cos();
          const f = r.mul(z).add(1).div(r.add(z));
          const c = k.mul(r.sub(f));
          const accept = c.mul(c.neg().add(2)).sub(u2).gt(0)
            .add(c.div(u2).log().add(1).sub(c).ge(0)).gt(0);
          const take = accept.mul(open).gt(0);
          return [
            u3.sub(0.5).sign().mul(f.clamp(-1, 1).acos()).where(take, x),
            open.mul(take.eq(0)),
          ];
        });
        return x.add(Math.PI).add(this.loc).remainder(2 * Math.PI).sub(Math.PI);
      })
    );
  }
  /** `κ cos(x - loc) - log 2π - log I₀(κ)`. */
  logProb(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.logProb(value);
    this.validateSample("logProb", value, this.loc);
    return forwardScope(() =>
      this.concentration.mul(value.sub(this.loc).cos()).sub(LOG_2PI)
        .sub(logBessel(this.concentration, 0))
    );
  }
  /** `loc`, `concentration`. */
  protected params(): Record<string, Tensor> {
    return { loc: this.loc, concentration: this.concentration };
  }
}

/** Options of {@link ContinuousBernoulli}. */
export interface ContinuousBernoulliOptions extends ProbsOrLogits {
  /**
   * The interval around ½ where Taylor expansions replace the closed forms
   * (default `[0.499, 0.501]`, as PyTorch).
   */
  lims?: [number, number];
}

/**
 * The continuous Bernoulli distribution on [0, 1] (density ∝ `pˣ(1 - p)¹⁻ˣ`),
 * as `torch.distributions.ContinuousBernoulli({ probs })` or `({ logits })`;
 * reparameterized through its inverse cdf.
 */
export class ContinuousBernoulli extends ExponentialFamily {
  readonly #kind: "probs" | "logits";
  readonly #param: Tensor;
  readonly #lims: [number, number];

  /** Exactly one of `probs` (in [0, 1], clamped to [eps, 1 - eps]) and `logits`. */
  constructor(options: ContinuousBernoulliOptions) {
    const { probs, logits } = options ?? {};
    if ((probs === undefined) === (logits === undefined)) {
      throw new TypeError(
        `ContinuousBernoulli: either probs or logits must be given, but not both`,
      );
    }
    const kind = probs !== undefined ? "probs" : "logits";
    const raw = (probs ?? logits)!;
    const [p] = broadcastAll("ContinuousBernoulli", { [kind]: raw });
    super(p.shape, [], options.validateArgs ?? defaultValidateArgs());
    this.#kind = kind;
    this.#param = p;
    this.#lims = options.lims ?? [0.499, 0.501];
    if (this.validateArgs) {
      checkParam(
        "ContinuousBernoulli",
        kind,
        raw,
        p,
        kind === "probs" ? constraints.unitInterval : constraints.real,
      );
    }
  }
  /** The parameter `p`, clamped to [eps, 1 - eps]. */
  get probs(): Tensor {
    return clampProbs(this.#kind === "probs" ? this.#param : this.#param.sigmoid());
  }
  /** `log p - log(1 - p)`. */
  get logits(): Tensor {
    if (this.#kind === "logits") return this.#param;
    const c = clampProbs(this.probs);
    return c.log().sub(c.neg().log1p());
  }
  /** `0 <= x <= 1`. */
  get support(): Constraint {
    return constraints.unitInterval;
  }
  /** True. */
  override get hasRsample(): boolean {
    return true;
  }
  /** 1 where the closed forms are used (p outside the `lims` interval). */
  private outside(p: Tensor): Tensor {
    return noGrad(() => p.le(this.#lims[0]).add(p.gt(this.#lims[1])).gt(0));
  }
  /** `p` outside the unstable interval, else its lower end. */
  private cut(p: Tensor): Tensor {
    return p.where(this.outside(p), this.#lims[0]);
  }
  /** The log normalizing constant `log C(p)`, as PyTorch's `_cont_bern_log_norm`. */
  logNorm(): Tensor {
    return forwardScope(() => {
      const p = this.probs;
      const cut = this.cut(p);
      const le = noGrad(() => cut.le(0.5));
      const below = cut.where(le, 0);
      const above = cut.where(noGrad(() => cut.ge(0.5)), 1);
      const logNorm = cut.neg().log1p().sub(cut.log()).abs().log().sub(
        below.mul(-2).log1p().where(le, above.mul(2).sub(1).log()),
      );
      const x = p.sub(0.5).square();
      const taylor = x.mul(104 / 45).add(4 / 3).mul(x).add(Math.LN2);
      return logNorm.where(this.outside(p), taylor);
    });
  }
  /** The mean (a Taylor expansion near p = ½). */
  get mean(): Tensor {
    return forwardScope(() => {
      const p = this.probs;
      const cut = this.cut(p);
      const mus = cut.div(cut.mul(2).sub(1)).add(cut.neg().log1p().sub(cut.log()).reciprocal());
      const x = p.sub(0.5);
      const taylor = x.square().mul(16 / 45).add(1 / 3).mul(x).add(0.5);
      return mus.where(this.outside(p), taylor);
    });
  }
  /** The variance (a Taylor expansion near p = ½). */
  get variance(): Tensor {
    return forwardScope(() => {
      const p = this.probs;
      const cut = this.cut(p);
      const vars = cut.mul(cut.sub(1)).div(cut.mul(-2).add(1).square())
        .add(cut.neg().log1p().sub(cut.log()).square().reciprocal());
      const x = p.sub(0.5).square();
      const taylor = x.mul(128 / 945).sub(1 / 15).mul(x).add(1 / 12);
      return vars.where(this.outside(p), taylor);
    });
  }
  /** `icdf(u)` with u uniform in [0, 1). */
  override rsample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    const p = this.#param;
    return this.icdfOf(rand(shape, { dtype: p.dtype, device: p.device }));
  }
  /** `-BCEWithLogits(logits, x) + log C(p)`. */
  logProb(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.logProb(value);
    this.validateSample("logProb", value, this.#param);
    return forwardScope(() => {
      const l = this.logits;
      return softplus(l).sub(l.mul(value)).neg().add(this.logNorm());
    });
  }
  /** `(pˣ(1 - p)¹⁻ˣ + p - 1)/(2p - 1)`, 0 below 0 and 1 above 1. */
  override cdf(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.cdf(value);
    this.validateSample("cdf", value, this.#param);
    return forwardScope(() => {
      const p = this.probs;
      const cut = this.cut(p);
      const cdfs = cut.pow(value).mul(cut.neg().add(1).pow(value.neg().add(1))).add(cut).sub(1)
        .div(cut.mul(2).sub(1));
      const unbounded = cdfs.where(this.outside(p), value);
      const ge1 = noGrad(() => value.ge(1));
      const le0 = noGrad(() => value.le(0));
      return unbounded.where(ge1.eq(0), 1).where(le0.eq(0), 0);
    });
  }
  /** The inverse cdf. */
  override icdf(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.icdf(value);
    return this.icdfOf(value);
  }
  /** The inverse cdf at `value`, for this distribution's own parameters. */
  private icdfOf(value: Tensor): Tensor {
    return forwardScope(() => {
      const p = this.probs;
      const cut = this.cut(p);
      const inv = cut.neg().add(value.mul(cut.mul(2).sub(1))).log1p().sub(cut.neg().log1p())
        .div(cut.log().sub(cut.neg().log1p()));
      return inv.where(this.outside(p), value);
    });
  }
  /** `mean·(log(1 - p) - log p) - log C(p) - log(1 - p)`. */
  override entropy(): Tensor {
    return forwardScope(() => {
      const p = this.probs;
      const lp0 = p.neg().log1p();
      const lp1 = p.log();
      return this.mean.mul(lp0.sub(lp1)).sub(this.logNorm()).sub(lp0);
    });
  }
  /** `(logits)`. */
  get naturalParams(): Tensor[] {
    return [this.logits];
  }
  /**
   * `log|eˣ - 1| - log|x|`, by its Taylor series `x/2 + x²/24 - x⁴/2880`
   * where x is within `lims - ½` (as PyTorch, which compares the natural
   * parameter with `lims - ½`).
   */
  logNormalizer(x: Tensor): Tensor {
    const [lo, hi] = [this.#lims[0] - 0.5, this.#lims[1] - 0.5];
    const outside = noGrad(() => x.le(lo).add(x.gt(hi)).gt(0));
    const cut = x.where(outside, lo);
    const logNorm = cut.expm1().abs().log().sub(cut.abs().log());
    const x2 = x.square();
    const taylor = x.mul(0.5).add(x2.div(24)).sub(x2.square().div(2880));
    return logNorm.where(outside, taylor);
  }
  /** 0. */
  override get meanCarrierMeasure(): number {
    return 0;
  }
  /** `probs` or `logits`, whichever was given. */
  protected params(): Record<string, Tensor> {
    return { [this.#kind]: this.#param };
  }
  /** A ContinuousBernoulli of the same kind (and `lims`) from its parameter. */
  protected override remake([p]: Param[], validateArgs = this.validateArgs): Distribution {
    const Kind = this.constructor as typeof ContinuousBernoulli;
    return new Kind({ [this.#kind]: p, lims: this.#lims, validateArgs });
  }
}
