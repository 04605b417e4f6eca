/**
 * Continuous relaxations of discrete distributions (Concrete / Gumbel
 * softmax), as `torch.distributions`: LogitRelaxedBernoulli,
 * RelaxedBernoulli, ExpRelaxedCategorical, RelaxedOneHotCategorical, and
 * OneHotCategoricalStraightThrough (one-hot draws with the
 * straight-through gradient).
 * @module
 */

import { Tensor } from "../tensor.ts";
import type { Device } from "../device.ts";
import { full, rand } from "../ops/mod.ts";
import { forwardScope } from "../storage.ts";
import { type Constraint, Distribution, type Param } from "./distribution.ts";
import { clampProbs, constraints as baseConstraints, softplus } from "./util.ts";
import { Bernoulli, Categorical, OneHotCategorical, type ProbsOrLogits } from "./discrete.ts";
import { constraints } from "./constraints.ts";
import { ExpTransform, SigmoidTransform } from "./transforms.ts";
import { TransformedDistribution } from "./transformed.ts";

/** `temperature` as a tensor of `like`'s dtype and device. */
function temperatureOf(op: string, temperature: Param, like: Tensor): Tensor {
  if (typeof temperature === "number") {
    if (!(temperature > 0)) {
      throw new RangeError(`${op}: temperature must be positive, got ${temperature}`);
    }
    return full([], temperature, { dtype: like.dtype, device: like.device });
  }
  if (!(temperature instanceof Tensor)) {
    throw new TypeError(
      `${op}: temperature must be a Tensor or a number, got ${typeof temperature}`,
    );
  }
  if (temperature.dtype !== like.dtype || temperature.device !== like.device) {
    throw new TypeError(
      `${op}: temperature (${temperature.dtype} on ${temperature.device}) must match the probabilities' dtype and device (${like.dtype} on ${like.device})`,
    );
  }
  return temperature;
}

/** A relaxed distribution of `d`'s family and temperature from its probs or logits `value`. */
function relaxedRemake(
  d: Distribution & { readonly temperature: Tensor },
  [value]: Param[],
  validateArgs: boolean,
): Distribution {
  const [kind] = Object.keys(d["params"]());
  const Kind = d.constructor as new (t: Param, options: ProbsOrLogits) => Distribution;
  return new Kind(d.temperature, { [kind]: value, validateArgs });
}

/** `log Γ(k)` of a positive integer k. */
function logFactorialBelow(k: number): number {
  let s = 0;
  for (let i = 2; i < k; i++) s += Math.log(i);
  return s;
}

/**
 * The logit of a relaxed Bernoulli draw (`(logit u + logits)/temperature`
 * of a uniform u), as `torch.distributions.LogitRelaxedBernoulli`.
 */
export class LogitRelaxedBernoulli extends Distribution {
  /** The relaxation temperature (draws approach hard ones as it goes to 0). */
  readonly temperature: Tensor;
  readonly #bernoulli: Bernoulli;

  /** `temperature` (positive) and exactly one of `probs` and `logits`. */
  constructor(temperature: Param, options: ProbsOrLogits) {
    const bernoulli = new Bernoulli(options);
    super(bernoulli.batchShape, [], bernoulli.validateArgs);
    this.#bernoulli = bernoulli;
    this.temperature = temperatureOf(new.target.name, temperature, this.param);
  }
  /** The wrapped Bernoulli's parameter (probs or logits), for dtype and device. */
  private get param(): Tensor {
    return Object.values(this.#bernoulli["params"]())[0];
  }
  /** The probability of the hard event. */
  get probs(): Tensor {
    return this.#bernoulli.probs;
  }
  /** Its log-odds. */
  get logits(): Tensor {
    return this.#bernoulli.logits;
  }
  /** The real line. */
  get support(): Constraint {
    return baseConstraints.real;
  }
  /** True. */
  override get hasRsample(): boolean {
    return true;
  }
  /** Not available in closed form (as PyTorch). */
  get mean(): Tensor {
    throw new TypeError(`${this.name}.mean: not implemented for ${this.name}`);
  }
  /** Not available in closed form (as PyTorch). */
  get variance(): Tensor {
    throw new TypeError(`${this.name}.variance: not implemented for ${this.name}`);
  }
  /** `(logit u + logit p)/temperature`, u and p clamped to [eps, 1 - eps]. */
  override rsample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    const p = clampProbs(this.probs.expand(shape));
    const u = clampProbs(rand(shape, { dtype: p.dtype, device: p.device }));
    return u.log().sub(u.neg().log1p()).add(p.log()).sub(p.neg().log1p()).div(this.temperature);
  }
  /** `log t + d - 2 log(1 + eᵈ)` with `d = logits - t·x`. */
  logProb(value: Tensor): Tensor {
    this.validateSample("logProb", value, this.param);
    return forwardScope(() => {
      const diff = this.logits.sub(value.mul(this.temperature));
      return this.temperature.log().add(diff).sub(softplus(diff).mul(2));
    });
  }
  /** `probs` or `logits`, whichever was given. */
  protected params(): Record<string, Tensor> {
    return this.#bernoulli["params"]();
  }
  /** The same temperature (not expanded, as PyTorch) with the given parameter. */
  protected override remake(values: Param[], validateArgs = this.validateArgs): Distribution {
    return relaxedRemake(this, values, validateArgs);
  }
  /** Itself: the temperature is a tensor (pass tensors on the values' device). */
  override withNumbersOn(_device: Device | undefined): Distribution {
    return this;
  }
}

/**
 * The relaxed Bernoulli (binary Concrete) distribution on [0, 1]: the
 * sigmoid of a {@link LogitRelaxedBernoulli} draw, as
 * `torch.distributions.RelaxedBernoulli`.
 *
 * @example
 * ```ts
 * import { distributions, tensor } from "@multigrad/core";
 * const d = new distributions.RelaxedBernoulli(tensor(0.5), { probs: tensor([0.2, 0.9]) });
 * const x = d.rsample([3]); // [3, 2], in (0, 1)
 * ```
 */
export class RelaxedBernoulli extends TransformedDistribution {
  /** `temperature` (positive) and exactly one of `probs` and `logits`. */
  constructor(temperature: Param, options: ProbsOrLogits) {
    super(new LogitRelaxedBernoulli(temperature, options), new SigmoidTransform(), options);
  }
  /** The base distribution, with its type. */
  private get logit(): LogitRelaxedBernoulli {
    return this.baseDist as LogitRelaxedBernoulli;
  }
  /** The relaxation temperature. */
  get temperature(): Tensor {
    return this.logit.temperature;
  }
  /** The probability of the hard event. */
  get probs(): Tensor {
    return this.logit.probs;
  }
  /** Its log-odds. */
  get logits(): Tensor {
    return this.logit.logits;
  }
  /** `0 <= x <= 1`. */
  override get support(): Constraint {
    return constraints.unitInterval;
  }
  /** PyTorch's repr, which shows no parameters for this family: `RelaxedBernoulli()`. */
  override toString(): string {
    return "RelaxedBernoulli()";
  }
  /** `probs` or `logits`, whichever was given. */
  protected override params(): Record<string, Tensor> {
    return this.logit["params"]();
  }
  /** The same temperature (not expanded, as PyTorch) with the given parameter. */
  protected override remake(values: Param[], validateArgs = this.validateArgs): Distribution {
    return relaxedRemake(this, values, validateArgs);
  }
  /** Itself (see {@link LogitRelaxedBernoulli.withNumbersOn}). */
  override withNumbersOn(_device: Device | undefined): Distribution {
    return this;
  }
}

/**
 * The log of a relaxed one-hot categorical draw (log-softmax of
 * `(logits + Gumbel noise)/temperature`), as
 * `torch.distributions.ExpRelaxedCategorical`.
 */
export class ExpRelaxedCategorical extends Distribution {
  /** The relaxation temperature. */
  readonly temperature: Tensor;
  readonly #categorical: Categorical;

  /** `temperature` (positive) and exactly one of `probs` and `logits` (last dim: the categories). */
  constructor(temperature: Param, options: ProbsOrLogits) {
    const categorical = new Categorical(options);
    super(categorical.batchShape, [categorical.numEvents], categorical.validateArgs);
    this.#categorical = categorical;
    this.temperature = temperatureOf(new.target.name, temperature, categorical.logits);
  }
  /** The normalized probabilities. */
  get probs(): Tensor {
    return this.#categorical.probs;
  }
  /** The normalized log-probabilities. */
  get logits(): Tensor {
    return this.#categorical.logits;
  }
  /** Real vectors (the true support is a submanifold). */
  get support(): Constraint {
    return constraints.realVector;
  }
  /** True. */
  override get hasRsample(): boolean {
    return true;
  }
  /** Not available in closed form (as PyTorch). */
  get mean(): Tensor {
    throw new TypeError(`${this.name}.mean: not implemented for ${this.name}`);
  }
  /** Not available in closed form (as PyTorch). */
  get variance(): Tensor {
    throw new TypeError(`${this.name}.variance: not implemented for ${this.name}`);
  }
  /** Log-softmax of `(logits + g)/temperature`, g standard Gumbel draws. */
  override rsample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    const l = this.logits;
    const u = clampProbs(rand(shape, { dtype: l.dtype, device: l.device }));
    const g = u.log().neg().log().neg();
    const scores = l.add(g).div(this.temperature);
    return scores.sub(scores.logsumexp(-1, true));
  }
  /** The Concrete log-density of the log-probabilities `value`. */
  logProb(value: Tensor): Tensor {
    this.validateSample("logProb", value, this.logits);
    return forwardScope(() => {
      const k = this.#categorical.numEvents;
      const t = this.temperature;
      const logScale = t.log().mul(k - 1).add(logFactorialBelow(k));
      const score = this.logits.sub(value.mul(t));
      return score.sub(score.logsumexp(-1, true)).sum(-1).add(logScale);
    });
  }
  /** PyTorch's repr, which shows no parameters for this family: `ExpRelaxedCategorical()`. */
  override toString(): string {
    return "ExpRelaxedCategorical()";
  }
  /** `probs` or `logits`, whichever was given. */
  protected params(): Record<string, Tensor> {
    return this.#categorical["params"]();
  }
  /** The same temperature (not expanded, as PyTorch) with the given parameter. */
  protected override remake(values: Param[], validateArgs = this.validateArgs): Distribution {
    return relaxedRemake(this, values, validateArgs);
  }
  /** Itself (see {@link LogitRelaxedBernoulli.withNumbersOn}). */
  override withNumbersOn(_device: Device | undefined): Distribution {
    return this;
  }
}

/**
 * The relaxed one-hot categorical (Concrete, Gumbel-softmax) distribution
 * on the simplex, as `torch.distributions.RelaxedOneHotCategorical`.
 */
export class RelaxedOneHotCategorical extends TransformedDistribution {
  /** `temperature` (positive) and exactly one of `probs` and `logits`. */
  constructor(temperature: Param, options: ProbsOrLogits) {
    super(new ExpRelaxedCategorical(temperature, options), new ExpTransform(), options);
  }
  /** The base distribution, with its type. */
  private get exp(): ExpRelaxedCategorical {
    return this.baseDist as ExpRelaxedCategorical;
  }
  /** The relaxation temperature. */
  get temperature(): Tensor {
    return this.exp.temperature;
  }
  /** The normalized probabilities. */
  get probs(): Tensor {
    return this.exp.probs;
  }
  /** The normalized log-probabilities. */
  get logits(): Tensor {
    return this.exp.logits;
  }
  /** The simplex. */
  override get support(): Constraint {
    return constraints.simplex;
  }
  /** PyTorch's repr, which shows no parameters for this family: `RelaxedOneHotCategorical()`. */
  override toString(): string {
    return "RelaxedOneHotCategorical()";
  }
  /** `probs` or `logits`, whichever was given. */
  protected override params(): Record<string, Tensor> {
    return this.exp["params"]();
  }
  /** The same temperature (not expanded, as PyTorch) with the given parameter. */
  protected override remake(values: Param[], validateArgs = this.validateArgs): Distribution {
    return relaxedRemake(this, values, validateArgs);
  }
  /** Itself (see {@link LogitRelaxedBernoulli.withNumbersOn}). */
  override withNumbersOn(_device: Device | undefined): Distribution {
    return this;
  }
}

/**
 * {@link OneHotCategorical} with reparameterized draws by the
 * straight-through estimator: the values are hard one-hot draws, the
 * gradient that of `probs`, as
 * `torch.distributions.OneHotCategoricalStraightThrough`.
 */
export class OneHotCategoricalStraightThrough extends OneHotCategorical {
  /** True. */
  override get hasRsample(): boolean {
    return true;
  }
  /** PyTorch's repr, which shows no parameters for this family: `OneHotCategoricalStraightThrough()`. */
  override toString(): string {
    return "OneHotCategoricalStraightThrough()";
  }
  /** `sample + (probs - probs.detach())`. */
  override rsample(sampleShape: number[] = []): Tensor {
    const s = this.sample(sampleShape);
    const p = this.probs;
    return s.add(p.sub(p.detach()));
  }
}
