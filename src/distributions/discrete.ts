/**
 * Bernoulli, Categorical and OneHotCategorical, as `torch.distributions`:
 * parameterized by `probs` or `logits` (exactly one), sampled without
 * gradient.
 * @module
 */

import { Tensor } from "../tensor.ts";
import { noGrad } from "../autograd.ts";
import { arange, full, rand } from "../ops/mod.ts";
import { multinomial } from "../ops_composite/mod.ts";
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
  checkMaskLater,
  checkParam,
  clampProbs,
  constraints,
  defaultValidateArgs,
  enumerateValues,
  finfoMin,
  numberParam,
  softplus,
} from "./util.ts";
import { ExponentialFamily } from "./exp_family.ts";

/** `probs` or `logits` (exactly one). */
export interface ProbsOrLogits extends DistributionOptions {
  /** Probabilities (Bernoulli: in [0, 1]; Categorical: nonnegative, normalized along the last dim). */
  probs?: Tensor | number;
  /** Log-odds (Bernoulli) or unnormalized log-probabilities (Categorical). */
  logits?: Tensor | number;
}

function oneOf(op: string, options: ProbsOrLogits): ["probs" | "logits", Tensor, Tensor | number] {
  const { probs, logits } = options ?? {};
  if ((probs === undefined) === (logits === undefined)) {
    throw new TypeError(`${op}: either probs or logits must be given, but not both`);
  }
  const kind = probs !== undefined ? "probs" : "logits";
  const raw = (probs ?? logits)!;
  if (typeof raw === "number") return [kind, numberParam(raw), raw];
  if (!(raw instanceof Tensor)) {
    throw new TypeError(`${op}: ${kind} must be a Tensor or a number, got ${typeof raw}`);
  }
  if (raw.dtype !== "float32" && raw.dtype !== "float64") {
    throw new TypeError(`${op}: ${kind} must be a float tensor, got dtype ${raw.dtype}`);
  }
  return [kind, raw, raw];
}

/** `log p - log(1 - p)` of clamped probabilities. */
function probsToLogits(p: Tensor, binary: boolean): Tensor {
  const c = clampProbs(p);
  return binary ? c.log().sub(c.neg().log1p()) : c.log();
}

/**
 * The Bernoulli distribution over {0, 1}, as
 * `torch.distributions.Bernoulli({ probs })` or `({ logits })`.
 *
 * @example
 * ```ts
 * import { distributions, tensor } from "@multigrad/core";
 * const d = new distributions.Bernoulli({ probs: tensor([0.2, 0.9]) });
 * const lp = d.logProb(tensor([1, 0]));
 * ```
 */
export class Bernoulli extends ExponentialFamily {
  readonly #kind: "probs" | "logits";
  readonly #param: Tensor;

  /** Exactly one of `probs` (in [0, 1]) and `logits`. */
  constructor(options: ProbsOrLogits) {
    const [kind, param, raw] = oneOf("Bernoulli", options);
    super(param.shape, [], options.validateArgs ?? defaultValidateArgs());
    this.#kind = kind;
    this.#param = param;
    if (this.validateArgs) {
      checkParam(
        "Bernoulli",
        kind,
        raw,
        param,
        kind === "probs" ? constraints.unitInterval : constraints.real,
      );
    }
  }

  /** The probability of 1 (from `logits` by the sigmoid). */
  get probs(): Tensor {
    return this.#kind === "probs" ? this.#param : this.#param.sigmoid();
  }
  /** The log-odds (from `probs` clamped to [eps, 1 - eps]). */
  get logits(): Tensor {
    return this.#kind === "logits" ? this.#param : probsToLogits(this.#param, true);
  }
  /** {0, 1}. */
  get support(): Constraint {
    return constraints.boolean;
  }
  /** 1 where `probs > 1/2`, 0 below, NaN at 1/2 (a tie), as PyTorch. */
  override get mode(): Tensor {
    const p = this.probs;
    return p.ge(0.5).to(p.dtype).where(p.ne(0.5), NaN);
  }
  /** `probs`. */
  get mean(): Tensor {
    return this.probs;
  }
  /** `probs·(1 - probs)`. */
  get variance(): Tensor {
    const p = this.probs;
    return p.mul(p.neg().add(1));
  }
  /** 1 where a uniform draw falls below `probs`, else 0 (float, as PyTorch). */
  override sample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    return noGrad(() => {
      const p = this.probs;
      return rand(shape, { dtype: p.dtype, device: p.device }).lt(p);
    });
  }
  /** `-BCEWithLogits(logits, x)`. */
  logProb(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.logProb(value);
    this.validateSample("logProb", value, this.#param);
    return forwardScope(() => {
      const l = this.logits;
      // ±inf·0 is NaN; PyTorch's BCE-with-logits gives -inf for value 0 at logits +inf.
      const keep = noGrad(() => value.ne(0).add(l.isinf().eq(0)).gt(0));
      return softplus(l).sub(l.where(keep, 0).mul(value)).neg();
    });
  }
  /** `BCEWithLogits(logits, probs)`. */
  override entropy(): Tensor {
    return forwardScope(() => {
      const l = this.logits;
      return softplus(l).sub(l.mul(this.probs));
    });
  }
  /** `(log(p/(1 - p)))`. */
  get naturalParams(): Tensor[] {
    const p = this.probs;
    return [p.div(p.neg().add(1)).log()];
  }
  /** `log(1 + eˣ)`. */
  logNormalizer(x: Tensor): Tensor {
    return softplus(x);
  }
  /** 0 (PyTorch 1.13 leaves it unimplemented). */
  override get meanCarrierMeasure(): number {
    return 0;
  }
  /** True: {0, 1}. */
  override get hasEnumerateSupport(): boolean {
    return true;
  }
  /** `[0, 1]` shaped `[2, 1, ..., 1]`, or `[2, ...batchShape]` with `expand`. */
  override enumerateSupport(options: EnumerateSupportOptions = {}): Tensor {
    return enumerateValues(2, this.batchShape, this.#param, options);
  }
  /** `probs` or `logits`, whichever was given. */
  protected params(): Record<string, Tensor> {
    return { [this.#kind]: this.#param };
  }
  /** A Bernoulli of the same kind from its parameter. */
  protected override remake([value]: Param[], validateArgs = this.validateArgs): Distribution {
    const Kind = this.constructor as typeof Bernoulli;
    return new Kind({ [this.#kind]: value, validateArgs });
  }
}

/**
 * The categorical distribution over `0 .. K-1` (K the last dim of `probs`
 * or `logits`; the dims before it are the batch), as
 * `torch.distributions.Categorical`. Samples and `logProb`'s values are
 * int32 indices.
 */
export class Categorical extends Distribution {
  readonly #kind: "probs" | "logits";
  /** The given parameter, normalized. */
  readonly #param: Tensor;
  /** The number of categories. */
  readonly numEvents: number;

  /** Exactly one of `probs` (nonnegative, normalized here) and `logits`, at least 1-D. */
  constructor(options: ProbsOrLogits) {
    const [kind, param, raw] = oneOf("Categorical", options);
    if (param.ndim < 1) {
      throw new RangeError(
        `Categorical: ${kind} must be at least one-dimensional, got shape ${
          formatShape(param.shape)
        }`,
      );
    }
    super(param.shape.slice(0, -1), [], options.validateArgs ?? defaultValidateArgs());
    this.#kind = kind;
    this.numEvents = param.shape[param.ndim - 1];
    if (this.validateArgs) {
      checkParam(
        "Categorical",
        kind,
        raw,
        param,
        kind === "probs" ? constraints.nonnegative : constraints.real,
      );
    }
    this.#param = forwardScope(() =>
      kind === "probs" ? param.div(param.sum(-1, true)) : param.sub(param.logsumexp(-1, true))
    );
  }

  /** The normalized probabilities (softmax of `logits`). */
  get probs(): Tensor {
    return this.#kind === "probs" ? this.#param : this.#param.softmax(-1);
  }
  /** The normalized log-probabilities (log of clamped `probs`). */
  get logits(): Tensor {
    return this.#kind === "logits" ? this.#param : probsToLogits(this.#param, false);
  }
  /** Integers in [0, numEvents). */
  get support(): Constraint {
    const k = this.numEvents;
    return {
      name: `integer in [0, ${k - 1}]`,
      check: (x) => x.ge(0).mul(x.lt(k)).mul(x.eq(x.round())),
      holds: (x) => Number.isInteger(x) && x >= 0 && x < k,
    };
  }
  /** The most probable category (the first on ties). */
  override get mode(): Tensor {
    return this.probs.argmax(-1);
  }
  /** NaN (undefined for categories), as PyTorch. */
  get mean(): Tensor {
    return full(this.batchShape, NaN, { dtype: this.#param.dtype, device: this.#param.device });
  }
  /** NaN, as PyTorch. */
  get variance(): Tensor {
    return this.mean;
  }
  /** int32 category indices drawn with the probabilities. */
  override sample(sampleShape: number[] = []): Tensor {
    const n = sampleShape.reduce((a, b) => a * b, 1);
    const shape = this.extendedShape(sampleShape);
    const rows = this.batchShape.reduce((a, b) => a * b, 1);
    return noGrad(() => {
      if (n === 0 || rows === 0) {
        return full(shape, 0, { dtype: "int32", device: this.#param.device });
      }
      const p2 = this.probs.reshape([rows, this.numEvents]);
      const draws = multinomial(p2, n, { replacement: true });
      return draws.t().reshape(shape);
    });
  }
  /** `logits[value]` (value an int32 tensor broadcast with the batch shape). */
  logProb(value: Tensor): Tensor {
    this.checkIndex(value);
    return forwardScope(() => {
      const logits = this.logits;
      const v = value.to("int32").unsqueeze(-1);
      const batch = [...this.batchShape];
      const shape = broadcastTo(v.shape.slice(0, -1), batch);
      const l = logits.expand([...shape, this.numEvents]);
      return l.gather(-1, v.expand([...shape, 1])).squeeze(-1);
    });
  }
  /** `-Σ p·log p` (log p clamped to the finite range, so that p = 0 adds 0). */
  override entropy(): Tensor {
    return forwardScope(() => {
      const l = this.logits.clamp(finfoMin(this.#param.dtype));
      return l.mul(this.probs).sum(-1).neg();
    });
  }
  /** True: `0 .. numEvents-1`. */
  override get hasEnumerateSupport(): boolean {
    return true;
  }
  /**
   * The int32 categories `0 .. K-1` shaped `[K, 1, ..., 1]`, or
   * `[K, ...batchShape]` with `expand` (int32 where PyTorch gives int64).
   */
  override enumerateSupport(options: EnumerateSupportOptions = {}): Tensor {
    const like = { dtype: "int32" as const, device: this.#param.device };
    return enumerateValues(this.numEvents, this.batchShape, like, options);
  }
  /** `probs` or `logits`, whichever was given. */
  protected params(): Record<string, Tensor> {
    return { [this.#kind]: this.#param };
  }
  /** A Categorical of the same kind from its (normalized) parameter. */
  protected override remake([value]: Param[], validateArgs = this.validateArgs): Distribution {
    const Kind = this.constructor as typeof Categorical;
    return new Kind({ [this.#kind]: value, validateArgs });
  }

  /** Checks a `logProb` argument: a tensor of category indices. */
  private checkIndex(value: Tensor): void {
    if (!(value instanceof Tensor)) {
      throw new TypeError(`${this.name}.logProb: value must be a Tensor, got ${typeof value}`);
    }
    if (value.device !== this.#param.device) {
      throw new TypeError(
        `${this.name}.logProb: value is on ${value.device}, the distribution on ${this.#param.device}`,
      );
    }
    broadcastTo(value.shape, this.batchShape, `${this.name}.logProb`);
    if (!this.validateArgs) return;
    const support = this.support;
    const v = value.to(this.#param.dtype);
    checkMaskLater(
      noGrad(() => support.check(v)),
      v,
      (i, x) =>
        `${this.name}.logProb: value must be within the support (${support.name}), got ${x} at index ${i}`,
    );
  }
}

/** The broadcast of two shapes, or a RangeError naming both. */
function broadcastTo(a: readonly number[], b: readonly number[], op = "Categorical"): number[] {
  const n = Math.max(a.length, b.length);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const x = a[a.length - n + i] ?? 1;
    const y = b[b.length - n + i] ?? 1;
    if (x !== y && x !== 1 && y !== 1) {
      throw new RangeError(
        `${op}: value shape ${formatShape(a)} does not broadcast with batch shape ${
          formatShape(b)
        }`,
      );
    }
    out.push(x === 1 ? y : x);
  }
  return out;
}

/**
 * The categorical distribution with one-hot draws (event shape `[K]`), as
 * `torch.distributions.OneHotCategorical`.
 */
export class OneHotCategorical extends Distribution {
  /** The categorical distribution of the hot index. */
  readonly categorical: Categorical;

  /** Exactly one of `probs` and `logits`, as {@link Categorical}. */
  constructor(options: ProbsOrLogits) {
    const categorical = new Categorical(options);
    super(categorical.batchShape, [categorical.numEvents], categorical.validateArgs);
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
  /** One-hot vectors. */
  get support(): Constraint {
    return {
      name: "one-hot",
      check: (x) => {
        const binary = x.eq(0).add(x.eq(1));
        return binary.mul(x.sum(-1, true).eq(1));
      },
      holds: () => true,
    };
  }
  /** The most probable category, one-hot (the first on ties). */
  override get mode(): Tensor {
    const p = this.probs;
    return p.argmax(-1, true).eq(
      arange(0, p.shape[p.ndim - 1], 1, { dtype: "int32", device: p.device }),
    ).to(p.dtype);
  }
  /** `probs`. */
  get mean(): Tensor {
    return this.probs;
  }
  /** `probs·(1 - probs)`. */
  get variance(): Tensor {
    const p = this.probs;
    return p.mul(p.neg().add(1));
  }
  /** One-hot draws (float, of the probabilities' dtype). */
  override sample(sampleShape: number[] = []): Tensor {
    return noGrad(() => {
      const index = this.categorical.sample(sampleShape);
      const p = this.probs;
      const k = arange(0, this.categorical.numEvents, 1, { dtype: "int32", device: p.device });
      return index.unsqueeze(-1).eq(k).to(p.dtype);
    });
  }
  /** The categorical log-probability of each vector's hot index. */
  logProb(value: Tensor): Tensor {
    this.validateSample("logProb", value, this.probs);
    return this.categorical.logProb(noGrad(() => value.argmax(-1)));
  }
  /** The categorical entropy. */
  override entropy(): Tensor {
    return this.categorical.entropy();
  }
  /** True: the K one-hot vectors. */
  override get hasEnumerateSupport(): boolean {
    return true;
  }
  /**
   * The rows of the K × K identity shaped `[K, 1, ..., 1, K]`, or
   * `[K, ...batchShape, K]` with `expand`.
   */
  override enumerateSupport(options: EnumerateSupportOptions = {}): Tensor {
    const p = this.categorical.logits;
    const k = this.categorical.numEvents;
    const index = enumerateValues(
      k,
      this.batchShape,
      { dtype: "int32", device: p.device },
      options,
    );
    const columns = arange(0, k, 1, { dtype: "int32", device: p.device });
    return index.unsqueeze(-1).eq(columns).to(p.dtype);
  }
  /** The categorical's parameter. */
  protected params(): Record<string, Tensor> {
    return this.categorical["params"]();
  }
  /** The same family (straight-through included) from the categorical's parameter. */
  protected override remake([value]: Param[], validateArgs = this.validateArgs): Distribution {
    const [kind] = Object.keys(this.params());
    const Kind = this.constructor as new (options: ProbsOrLogits) => Distribution;
    return new Kind({ [kind]: value, validateArgs });
  }
}
