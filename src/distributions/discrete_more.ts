/**
 * Binomial, Geometric, NegativeBinomial, Poisson and Multinomial, as
 * `torch.distributions`: counting distributions whose draws carry no
 * gradient (as PyTorch, none has `rsample`), with log-masses, moments and
 * (where PyTorch has one) entropies differentiable in the parameters.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { noGrad } from "../autograd.ts";
import { arange, full, rand, tensor } from "../ops/mod.ts";
import { poisson } from "../ops_composite/mod.ts";
import { scopedRounds } from "../ops_composite/util.ts";
import { forwardScope } from "../storage.ts";
import { formatShape } from "../shape.ts";
import {
  type Constraint,
  Distribution,
  type DistributionOptions,
  type EnumerateSupportOptions,
  type Param,
} from "./distribution.ts";
import {
  broadcastAll,
  checkParam,
  clampProbs,
  constraints,
  defaultValidateArgs,
  enumerateValues,
  softplus,
} from "./util.ts";
import { constraints as allConstraints } from "./constraints.ts";
import { Categorical, type ProbsOrLogits } from "./discrete.ts";
import { standardGamma } from "./gamma_sampling.ts";
import { ExponentialFamily } from "./exp_family.ts";

/** `probs` or `logits` (exactly one) as given, with its kind. */
function oneOf(op: string, options: ProbsOrLogits): ["probs" | "logits", Param] {
  const { probs, logits } = options ?? {};
  if ((probs === undefined) === (logits === undefined)) {
    throw new TypeError(`${op}: either probs or logits must be given, but not both`);
  }
  return probs !== undefined ? ["probs", probs] : ["logits", logits!];
}

/** `log p - log(1 - p)` of probabilities clamped to [eps, 1 - eps] (`probs_to_logits`, binary). */
function binaryLogits(p: Tensor): Tensor {
  const c = clampProbs(p);
  return c.log().sub(c.neg().log1p());
}

/** `log σ(x)` without overflow. */
function logSigmoid(x: Tensor): Tensor {
  return softplus(x.neg()).neg();
}

/** `(max(x, 0) + x - min(x, 0))/2` (`_clamp_by_zero`: x⁺ with gradient ½ at 0, as PyTorch). */
function clampByZero(x: Tensor): Tensor {
  return x.clamp(0).add(x).sub(x.clamp(undefined, 0)).div(2);
}

/** Integers `0 <= x <= n` with `n` a tensor (`integer_interval(0, total_count)`). */
function countsUpTo(n: Tensor): Constraint {
  return {
    name: `integer in [0, totalCount]`,
    check: (x) => x.eq(x.floor()).mul(x.ge(0)).mul(x.le(n)),
    holds: (x) => Number.isInteger(x) && x >= 0,
  };
}

/** A number `totalCount` checked at once, or a tensor checked on the device. */
function checkCount(op: string, raw: Param, value: Tensor): void {
  checkParam(op, "totalCount", raw, value, allConstraints.nonnegativeInteger);
}

/** Rounds of geometric waiting times per draw where `n·q < 10` (P(X ≥ 40) below 1e-12). */
const INVERSION_ROUNDS = 40;
/** Rounds of BTRS proposals per draw where `n·q >= 10` (acceptance above 0.7 each). */
const BTRS_ROUNDS = 16;
/** `stirling_approx_tail(k)` for k = 0..9: `log k! - (k + ½) log(k + 1) + (k + 1) - ½ log 2π`. */
const STIRLING_TAIL = [
  0.08106146679532726,
  0.04134069595540929,
  0.02767792568499834,
  0.02079067210376509,
  0.01664469118982119,
  0.01387612882307075,
  0.01189670994589177,
  0.01041126526197209,
  0.009255462182712733,
  0.008330563433362871,
];

/** The error of Stirling's approximation of `log k!` (PyTorch's `stirling_approx_tail`). */
function stirlingTail(k: Tensor): Tensor {
  const kp1 = k.add(1);
  const sq = kp1.square();
  const series = sq.reciprocal().div(-1260).add(1 / 360).div(sq).neg().add(1 / 12).div(kp1);
  // One lookup, not a masked sum per entry (60 of a BTRS round's 110 ops were these sums).
  const entries = tensor(STIRLING_TAIL, { dtype: k.dtype, device: k.device });
  const table = entries.indexSelect(0, k.clamp(0, 9).reshape([-1]).int()).reshape(k.shape);
  return series.where(k.gt(9), table);
}

/**
 * Binomial draws of `count` trials with probability `prob` (same shape),
 * as PyTorch's sampler: with `q = min(p, 1 - p)`, Hörmann's BTRS rejection
 * where `n·q >= 10`, else geometric waiting times, each a fixed number of
 * rounds on every element (a draw none of whose rounds is accepted takes
 * the rounded mean; probability below 3e-9, at `n·q = 10`).
 */
function binomialDraws(count: Tensor, prob: Tensor): Tensor {
  const shape = [...count.shape];
  const opts = { dtype: prob.dtype, device: prob.device };
  const flip = prob.gt(0.5);
  const q = prob.neg().add(1).where(flip, prob);
  // Geometric waiting times: the successes are the waits that fit in n trials.
  const logq = q.neg().log1p();
  const opened: [Tensor, Tensor, Tensor] = [
    full(shape, 0, opts),
    full(shape, 0, opts),
    full(shape, 1, opts),
  ];
  const [, inverted] = scopedRounds(INVERSION_ROUNDS, opened, ([sum, inverted, open]) => {
    const geom = rand(shape, opts).log().div(logq).ceil();
    const added = sum.add(geom).where(open.gt(0), sum);
    const fits = added.le(count).mul(open);
    return [added, inverted.add(fits), fits];
  });
  // BTRS.
  const n = count;
  const stddev = n.mul(q).mul(q.neg().add(1)).sqrt();
  const b = stddev.mul(2.53).add(1.15);
  const a = b.mul(0.0248).add(q.mul(0.01)).sub(0.0873);
  const c = n.mul(q).add(0.5);
  const vr = b.reciprocal().mul(-4.2).add(0.92);
  const r = q.div(q.neg().add(1));
  const alpha = b.reciprocal().mul(5.1).add(2.83).mul(stddev);
  const m = n.add(1).mul(q).floor();
  const fixed = m.add(0.5).mul(m.add(1).div(r.mul(n.sub(m).add(1))).log())
    .add(stirlingTail(m)).add(stirlingTail(n.sub(m)));
  const proposed: [Tensor, Tensor] = [c.sub(0.5).round(), full(shape, 1, opts)];
  const [btrs] = scopedRounds(BTRS_ROUNDS, proposed, ([btrs, pending]) => {
    const u = rand(shape, opts).sub(0.5);
    const v = rand(shape, opts);
    const us = u.abs().neg().add(0.5);
    const k = a.mul(2).div(us).add(b).mul(u).add(c).floor();
    const inRange = k.ge(0).mul(k.le(n));
    const quick = us.ge(0.07).mul(v.le(vr));
    const kk = k.clamp(0).minimum(n);
    const lhs = v.mul(alpha).div(a.div(us.square()).add(b)).log();
    // log1p of (k - m)/(n - k + 1), not log of a ratio near 1: float32 loses the latter at large n.
    const bound = fixed.add(n.add(1).mul(kk.sub(m).div(n.sub(kk).add(1)).log1p()))
      .add(kk.add(0.5).mul(r.mul(n.sub(kk).add(1)).div(kk.add(1)).log()))
      .sub(stirlingTail(kk)).sub(stirlingTail(n.sub(kk)));
    const accept = inRange.mul(quick.add(lhs.le(bound)).gt(0)).mul(pending);
    return [k.where(accept.gt(0), btrs), pending.mul(accept.eq(0))];
  });
  const drawn = inverted.where(n.mul(q).lt(10), btrs);
  const out = n.sub(drawn).where(flip, drawn);
  // n = 0 or p = 0 give 0, p = 1 gives n (PyTorch's first cases).
  return out.where(n.gt(0).mul(prob.gt(0)), 0).where(prob.lt(1), n);
}

/**
 * The binomial distribution of `totalCount` trials with success
 * probability `probs` (or log-odds `logits`), as
 * `torch.distributions.Binomial(total_count, probs=, logits=)`.
 *
 * Draws by PyTorch's algorithms (BTRS rejection or geometric waiting
 * times) in a fixed number of rounds on the device. {@link entropy} needs
 * `totalCount` as a number: PyTorch needs one count for every element,
 * which a tensor `totalCount` would have to be read from the device for.
 *
 * @example
 * ```ts
 * import { distributions, tensor } from "@multigrad/core";
 * const d = new distributions.Binomial(10, { probs: tensor([0.2, 0.7]) });
 * const lp = d.logProb(tensor([3, 7]));
 * ```
 */
export class Binomial extends Distribution {
  /** The number of trials, broadcast with the parameter. */
  readonly totalCount: Tensor;
  readonly #count: number | undefined;
  readonly #kind: "probs" | "logits";
  readonly #param: Tensor;

  /** `totalCount` a nonnegative integer (default 1); exactly one of `probs` (in [0, 1]) and `logits`. */
  constructor(totalCount: Param = 1, options: ProbsOrLogits) {
    const [kind, raw] = oneOf("Binomial", options);
    const [n, p] = broadcastAll("Binomial", { totalCount, [kind]: raw });
    super(p.shape, [], options.validateArgs ?? defaultValidateArgs());
    this.totalCount = n;
    this.#count = typeof totalCount === "number" ? totalCount : undefined;
    this.#kind = kind;
    this.#param = p;
    if (this.validateArgs) {
      checkCount("Binomial", totalCount, n);
      checkParam(
        "Binomial",
        kind,
        raw,
        p,
        kind === "probs" ? constraints.unitInterval : constraints.real,
      );
    }
  }
  /** The success probability (the sigmoid of `logits`). */
  get probs(): Tensor {
    return this.#kind === "probs" ? this.#param : this.#param.sigmoid();
  }
  /** The log-odds (of `probs` clamped to [eps, 1 - eps]). */
  get logits(): Tensor {
    return this.#kind === "logits" ? this.#param : binaryLogits(this.#param);
  }
  /** Integers in `[0, totalCount]`. */
  get support(): Constraint {
    return countsUpTo(this.totalCount);
  }
  /** `n·p`. */
  get mean(): Tensor {
    return this.totalCount.mul(this.probs);
  }
  /** `min(floor((n + 1)·p), n)`. */
  override get mode(): Tensor {
    const m = this.totalCount.add(1).mul(this.probs).floor();
    // clamp(max=n) as PyTorch: a tie passes the gradient to the floor (zero), not to n.
    return m.where(noGrad(() => m.le(this.totalCount)), this.totalCount);
  }
  /** `n·p·(1 - p)`. */
  get variance(): Tensor {
    const p = this.probs;
    return this.totalCount.mul(p).mul(p.neg().add(1));
  }
  /** Binomial counts by PyTorch's algorithms (float, as PyTorch), without gradient. */
  override sample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    return noGrad(() =>
      forwardScope(() => binomialDraws(this.totalCount.expand(shape), this.probs.expand(shape)))
    );
  }
  /** `log C(n, k) + k·logit - n·log(1 + e^logit)`, computed as PyTorch. */
  logProb(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.logProb(value);
    this.validateSample("logProb", value, this.#param);
    return forwardScope(() => {
      const n = this.totalCount;
      const l = this.logits;
      const logFactN = n.add(1).lgamma();
      const logFactK = value.add(1).lgamma();
      const logFactNmK = n.sub(value).add(1).lgamma();
      const normalize = n.mul(clampByZero(l)).add(n.mul(l.abs().neg().exp().log1p())).sub(logFactN);
      return value.mul(l).sub(logFactK).sub(logFactNmK).sub(normalize);
    });
  }
  /** `-Σₖ P(k) log P(k)` over `k = 0..totalCount` (a number `totalCount` only). */
  override entropy(): Tensor {
    const count = this.requireCount("entropy");
    return forwardScope(() => {
      const p = this.#param;
      const ks = arange(0, count + 1, 1, { dtype: p.dtype, device: p.device })
        .reshape([count + 1, ...this.batchShape.map(() => 1)]);
      const lp = this.logProb(ks.expand([count + 1, ...this.batchShape]));
      return lp.exp().mul(lp).sum(0).neg();
    });
  }
  /** `totalCount` and `probs` or `logits`, whichever was given. */
  protected params(): Record<string, Tensor> {
    return { total_count: this.totalCount, [this.#kind]: this.#param };
  }
  /** A Binomial of the same kind from its parameters (a number count stays a number). */
  protected override remake([n, p]: Param[], validateArgs = this.validateArgs): Distribution {
    const Kind = this.constructor as typeof Binomial;
    return new Kind(this.#count ?? n, { [this.#kind]: p, validateArgs });
  }
  /** True: `0 .. totalCount` (a number count). */
  override get hasEnumerateSupport(): boolean {
    return true;
  }
  /**
   * `0 .. totalCount` shaped `[n + 1, 1, ..., 1]`, or `[n + 1, ...batchShape]`
   * with `expand`. Needs `totalCount` as a number: PyTorch reads a tensor
   * count's maximum from the device and refuses unequal counts.
   */
  override enumerateSupport(options: EnumerateSupportOptions = {}): Tensor {
    const n = this.requireCount("enumerateSupport");
    return enumerateValues(n + 1, this.batchShape, this.#param, options);
  }
  /** `totalCount` as a number, or a clear error naming `op` when it is a tensor. */
  private requireCount(op: string): number {
    if (this.#count === undefined) {
      throw new TypeError(
        `Binomial.${op}: needs totalCount as a number (got a tensor of shape ${
          formatShape(this.totalCount.shape)
        }, whose values live on ${this.totalCount.device})`,
      );
    }
    return this.#count;
  }
}

/**
 * The number of failures before the first success in Bernoulli trials of
 * success probability `probs` (or log-odds `logits`), as
 * `torch.distributions.Geometric`.
 */
export class Geometric extends Distribution {
  readonly #kind: "probs" | "logits";
  readonly #param: Tensor;

  /** Exactly one of `probs` (in (0, 1]) and `logits`. */
  constructor(options: ProbsOrLogits) {
    const [kind, raw] = oneOf("Geometric", options);
    const [p] = broadcastAll("Geometric", { [kind]: raw });
    super(p.shape, [], options.validateArgs ?? defaultValidateArgs());
    this.#kind = kind;
    this.#param = p;
    if (this.validateArgs) {
      const inUnit: Constraint = {
        name: "0 < x <= 1",
        check: (x) => x.gt(0).mul(x.le(1)),
        holds: (x) => x > 0 && x <= 1,
      };
      checkParam("Geometric", kind, raw, p, kind === "probs" ? inUnit : constraints.real);
    }
  }
  /** The success probability. */
  get probs(): Tensor {
    return this.#kind === "probs" ? this.#param : this.#param.sigmoid();
  }
  /** The log-odds. */
  get logits(): Tensor {
    return this.#kind === "logits" ? this.#param : binaryLogits(this.#param);
  }
  /** Integers `>= 0`. */
  get support(): Constraint {
    return allConstraints.nonnegativeInteger;
  }
  /** `1/p - 1`. */
  get mean(): Tensor {
    return this.probs.reciprocal().sub(1);
  }
  /** 0. */
  override get mode(): Tensor {
    const p = this.#param;
    return full(this.batchShape, 0, { dtype: p.dtype, device: p.device });
  }
  /** `(1/p - 1)/p`. */
  get variance(): Tensor {
    const p = this.probs;
    return p.reciprocal().sub(1).div(p);
  }
  /** `floor(log u / log(1 - p))` with u uniform in [tiny, 1). */
  override sample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    return noGrad(() =>
      forwardScope(() => {
        const p = this.probs;
        const tiny = p.dtype === "float64" ? 2.2250738585072014e-308 : 1.1754943508222875e-38;
        const u = rand(shape, { dtype: p.dtype, device: p.device }).clamp(tiny);
        return u.log().div(p.neg().log1p()).floor();
      })
    );
  }
  /** `k·log(1 - p) + log p` (0 at k = 0 for p = 1). */
  logProb(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.logProb(value);
    this.validateSample("logProb", value, this.#param);
    return forwardScope(() => {
      const p = this.probs;
      // PyTorch zeroes p where p = 1 and k = 0, so that 0·log 0 does not give NaN.
      const sure = noGrad(() => p.eq(1).mul(value.eq(0)));
      const safe = p.where(sure.eq(0), 0);
      return value.mul(safe.neg().log1p()).add(p.log());
    });
  }
  /** `BCEWithLogits(logits, p)/p`. */
  override entropy(): Tensor {
    return forwardScope(() => {
      const l = this.logits;
      const p = this.probs;
      return softplus(l).sub(l.mul(p)).div(p);
    });
  }
  /** `probs` or `logits`, whichever was given. */
  protected params(): Record<string, Tensor> {
    return { [this.#kind]: this.#param };
  }
  /** A Geometric of the same kind from its parameter. */
  protected override remake([p]: Param[], validateArgs = this.validateArgs): Distribution {
    const Kind = this.constructor as typeof Geometric;
    return new Kind({ [this.#kind]: p, validateArgs });
  }
}

/**
 * The number of successes before `totalCount` failures in Bernoulli trials
 * of success probability `probs` (or log-odds `logits`), as
 * `torch.distributions.NegativeBinomial`. Draws are Poisson draws of
 * gamma-distributed rates, without gradient.
 */
export class NegativeBinomial extends Distribution {
  /** The number of failures (a nonnegative real), broadcast with the parameter. */
  readonly totalCount: Tensor;
  readonly #kind: "probs" | "logits";
  readonly #param: Tensor;

  /** `totalCount >= 0`; exactly one of `probs` (in [0, 1)) and `logits`. */
  constructor(totalCount: Param, options: ProbsOrLogits) {
    const [kind, raw] = oneOf("NegativeBinomial", options);
    const [n, p] = broadcastAll("NegativeBinomial", { totalCount, [kind]: raw });
    super(p.shape, [], options.validateArgs ?? defaultValidateArgs());
    this.totalCount = n;
    this.#kind = kind;
    this.#param = p;
    if (this.validateArgs) {
      checkParam("NegativeBinomial", "totalCount", totalCount, n, constraints.nonnegative);
      const halfOpen: Constraint = {
        name: "0 <= x < 1",
        check: (x) => x.ge(0).mul(x.lt(1)),
        holds: (x) => x >= 0 && x < 1,
      };
      checkParam(
        "NegativeBinomial",
        kind,
        raw,
        p,
        kind === "probs" ? halfOpen : constraints.real,
      );
    }
  }
  /** The success probability. */
  get probs(): Tensor {
    return this.#kind === "probs" ? this.#param : this.#param.sigmoid();
  }
  /** The log-odds. */
  get logits(): Tensor {
    return this.#kind === "logits" ? this.#param : binaryLogits(this.#param);
  }
  /** Integers `>= 0`. */
  get support(): Constraint {
    return allConstraints.nonnegativeInteger;
  }
  /** `n·e^logit`. */
  get mean(): Tensor {
    return this.totalCount.mul(this.logits.exp());
  }
  /** `max(floor((n - 1)·e^logit), 0)`. */
  override get mode(): Tensor {
    return this.totalCount.sub(1).mul(this.logits.exp()).floor().clamp(0);
  }
  /** `mean/σ(-logit)`. */
  get variance(): Tensor {
    return this.mean.div(this.logits.neg().sigmoid());
  }
  /** `Poisson(Gamma(n, e^{-logit}))` draws (float, as PyTorch). */
  override sample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    return noGrad(() =>
      forwardScope(() => {
        const rate = standardGamma(this.totalCount.expand(shape)).mul(this.logits.exp());
        return poisson(rate);
      })
    );
  }
  /**
   * `n·log σ(-l) + k·log σ(l) + log Γ(n + k) - log Γ(k + 1) - log Γ(n)`
   * (the normalization 0 where `n + k = 0`).
   */
  logProb(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.logProb(value);
    this.validateSample("logProb", value, this.#param);
    return forwardScope(() => {
      const n = this.totalCount;
      const l = this.logits;
      const unnormalized = n.mul(logSigmoid(l.neg())).add(value.mul(logSigmoid(l)));
      const empty = noGrad(() => n.add(value).eq(0));
      // As PyTorch's masked_fill: lgamma(0) = inf is masked, its NaN gradient is not.
      const norm = n.add(value).lgamma().neg().add(value.add(1).lgamma()).add(n.lgamma())
        .where(empty.eq(0), 0);
      return unnormalized.sub(norm);
    });
  }
  /** `totalCount` and `probs` or `logits`, whichever was given. */
  protected params(): Record<string, Tensor> {
    return { total_count: this.totalCount, [this.#kind]: this.#param };
  }
  /** A NegativeBinomial of the same kind from its parameters. */
  protected override remake([n, p]: Param[], validateArgs = this.validateArgs): Distribution {
    const Kind = this.constructor as typeof NegativeBinomial;
    return new Kind(n, { [this.#kind]: p, validateArgs });
  }
}

/**
 * The Poisson distribution of `rate` λ ≥ 0 (mass `λᵏ e^{-λ} / k!`), as
 * `torch.distributions.Poisson`; draws by `poisson`, without gradient.
 */
export class Poisson extends ExponentialFamily {
  /** The rate λ. */
  readonly rate: Tensor;

  /** `rate >= 0`. */
  constructor(rate: Param, options: DistributionOptions = {}) {
    const [r] = broadcastAll("Poisson", { rate });
    super(r.shape, [], options.validateArgs ?? defaultValidateArgs());
    this.rate = r;
    if (this.validateArgs) checkParam("Poisson", "rate", rate, r, constraints.nonnegative);
  }
  /** Integers `>= 0`. */
  get support(): Constraint {
    return allConstraints.nonnegativeInteger;
  }
  /** λ. */
  get mean(): Tensor {
    return this.rate;
  }
  /** `floor(λ)`. */
  override get mode(): Tensor {
    return this.rate.floor();
  }
  /** λ. */
  get variance(): Tensor {
    return this.rate;
  }
  /** Poisson counts (float, as PyTorch). */
  override sample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    return noGrad(() => poisson(this.rate.expand(shape)));
  }
  /** `k·log λ - λ - log k!` (0·log 0 = 0). */
  logProb(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.logProb(value);
    this.validateSample("logProb", value, this.rate);
    return forwardScope(() => value.xlogy(this.rate).sub(this.rate).sub(value.add(1).lgamma()));
  }
  /** `(log rate)`. */
  get naturalParams(): Tensor[] {
    return [this.rate.log()];
  }
  /** `eˣ`. */
  logNormalizer(x: Tensor): Tensor {
    return x.exp();
  }
  /** `rate`. */
  protected params(): Record<string, Tensor> {
    return { rate: this.rate };
  }
}

/**
 * Counts of `totalCount` categorical draws over the last dim of `probs`
 * (or `logits`), as `torch.distributions.Multinomial(total_count, probs=,
 * logits=)`; event shape `[K]`. `logProb` accepts any count vector (as
 * PyTorch, it does not use `totalCount`).
 */
export class Multinomial extends Distribution {
  /** The number of draws. */
  readonly totalCount: number;
  /** The categorical distribution of one draw. */
  readonly categorical: Categorical;

  /** `totalCount` a nonnegative integer (default 1); `probs` or `logits` at least 1-D. */
  constructor(totalCount = 1, options: ProbsOrLogits) {
    if (typeof totalCount !== "number" || !Number.isInteger(totalCount) || totalCount < 0) {
      throw new TypeError(
        `Multinomial: totalCount must be a nonnegative integer number, got ${totalCount}`,
      );
    }
    const categorical = new Categorical(options);
    super(categorical.batchShape, [categorical.numEvents], categorical.validateArgs);
    this.totalCount = totalCount;
    this.categorical = categorical;
  }
  /** The normalized probabilities. */
  get probs(): Tensor {
    return this.categorical.probs;
  }
  /** The normalized log-probabilities. */
  get logits(): Tensor {
    return this.categorical.logits;
  }
  /** Nonnegative vectors summing to at most `totalCount` (as PyTorch, integers are not checked). */
  get support(): Constraint {
    return allConstraints.multinomial(this.totalCount);
  }
  /** `n·p`. */
  get mean(): Tensor {
    return this.probs.mul(this.totalCount);
  }
  /** `n·p·(1 - p)`. */
  get variance(): Tensor {
    const p = this.probs;
    return p.mul(p.neg().add(1)).mul(this.totalCount);
  }
  /** Count vectors of `totalCount` categorical draws (float, of the parameter's dtype). */
  override sample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    const n = this.totalCount;
    return noGrad(() =>
      forwardScope(() => {
        const p = this.probs;
        if (n === 0) return full(shape, 0, { dtype: p.dtype, device: p.device });
        const index = this.categorical.sample([n, ...sampleShape]);
        const k = arange(0, this.categorical.numEvents, 1, { dtype: "int32", device: p.device });
        return index.unsqueeze(-1).eq(k).to(p.dtype).sum(0);
      })
    );
  }
  /** `log n! - Σ log xᵢ! + Σ xᵢ log pᵢ` with `n = Σ xᵢ`. */
  logProb(value: Tensor): Tensor {
    const logits0 = this.logits;
    this.validateSample("logProb", value, logits0);
    return forwardScope(() => {
      const shape = [...value.shape.slice(0, -1), this.eventShape[0]];
      const batch = broadcastShape2(shape, logits0.shape);
      const v = value.expand(batch);
      // 0·(-inf) is NaN; PyTorch takes 0 there (a zero count of an impossible category).
      const l = logits0.expand(batch).where(noGrad(() => v.eq(0).mul(logits0.isinf()).eq(0)), 0);
      const logFactN = v.sum(-1).add(1).lgamma();
      const logFactX = v.add(1).lgamma().sum(-1);
      return logFactN.sub(logFactX).add(l.mul(v).sum(-1));
    });
  }
  /**
   * `n·H(categorical) - log n! + Σ E[log xᵢ!]` with each count's binomial
   * mass, as PyTorch (whose `log n!` is a float32 `lgamma`, rounded so here
   * too).
   */
  override entropy(): Tensor {
    return forwardScope(() => {
      const n = this.totalCount;
      const p = this.probs;
      const binomial = new Binomial(n, { probs: p, validateArgs: false });
      const ks = arange(0, n + 1, 1, { dtype: p.dtype, device: p.device })
        .reshape([n + 1, ...p.shape.map(() => 1)]).expand([n + 1, ...p.shape]);
      const weights = binomial.logProb(ks).exp();
      const logFact = ks.add(1).lgamma();
      return this.categorical.entropy().mul(n).sub(Math.fround(logFactorial(n)))
        .add(weights.mul(logFact).sum([0, -1]));
    });
  }
  /** The categorical's parameter (PyTorch's repr shows it only). */
  protected params(): Record<string, Tensor> {
    return this.categorical["params"]();
  }
  /** A Multinomial of this `totalCount` from the categorical's parameter. */
  protected override remake([value]: Param[], validateArgs = this.validateArgs): Distribution {
    const [kind] = Object.keys(this.params());
    const Kind = this.constructor as typeof Multinomial;
    return new Kind(this.totalCount, { [kind]: value, validateArgs });
  }
}

/** `log n!` of a nonnegative integer host number. */
function logFactorial(n: number): number {
  let s = 0;
  for (let k = 2; k <= n; k++) s += Math.log(k);
  return s;
}

/** The broadcast of two shapes (the caller has checked they broadcast). */
function broadcastShape2(a: readonly number[], b: readonly number[]): number[] {
  const n = Math.max(a.length, b.length);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const x = a[a.length - n + i] ?? 1;
    const y = b[b.length - n + i] ?? 1;
    out.push(x === 1 ? y : x);
  }
  return out;
}
