/**
 * The samplers of `torch.utils.data`: `SequentialSampler`, `RandomSampler`,
 * `SubsetRandomSampler`, `WeightedRandomSampler` and `BatchSampler`.
 * Their random draws come from the library's host generator (as
 * `DataLoader`'s shuffle and `randomSplit`): a `seed` gives a sampler its
 * own generator, else every epoch draws its seed from the global stream
 * (`manualSeed`), so programs stay reproducible either way. The sequences
 * differ from PyTorch's (another generator); their distributions do not.
 * Given a `Generator` (`generator` option) they draw PyTorch's exact sequences.
 * @module
 */

import { nextSeed } from "../ops/factory.ts";
import { Generator } from "../random/generator.ts";
import { seededRandom } from "../util.ts";
import { hostIndexList } from "./indices.ts";
import { Sampler } from "./sampler.ts";

/** Where a random sampler's draws come from (see {@link RandomSamplerOptions}). */
export interface SamplerRandomOptions {
  /**
   * Seed of the sampler's own generator: the same seed gives the same
   * sequence of epochs. Without it (and without `generator`) each epoch
   * draws its seed from the global stream (`manualSeed`).
   */
  seed?: number;
  /**
   * PyTorch's `generator`: a {@link Generator} draws exactly the indices
   * PyTorch's sampler draws from a `torch.Generator` in the same state; a
   * function giving floats in [0, 1) is drawn from with multigrad's own
   * algorithms instead (same distributions, other sequences). Share one between samplers to share a stream.
   */
  generator?: Generator | (() => number);
}

/** The generator an epoch draws from, by `options` (a {@link Generator} is handled apart). */
function randomSource(op: string, options: SamplerRandomOptions): () => () => number {
  const { seed, generator } = options;
  if (seed !== undefined && generator !== undefined) {
    throw new TypeError(`${op}: pass seed or generator, not both`);
  }
  if (generator instanceof Generator) {
    return () => {
      throw new Error(`${op}: internal: a Generator draws PyTorch's stream directly`);
    };
  }
  if (generator !== undefined) {
    if (typeof generator !== "function") {
      throw new TypeError(
        `${op}: generator must be a function giving floats in [0, 1), got ${typeof generator} (or a Generator)`,
      );
    }
    return () => generator;
  }
  if (seed !== undefined) {
    if (!Number.isFinite(seed)) {
      throw new RangeError(`${op}: seed must be a finite number, got ${seed}`);
    }
    const own = seededRandom(Math.trunc(seed));
    return () => own;
  }
  return () => seededRandom(nextSeed());
}

/** A uniform index in [0, n) from `random`, whatever the float it gives (a generator's 1 included). */
function below(random: () => number, n: number): number {
  return Math.min(n - 1, Math.floor(random() * n));
}

/** A random permutation of [0, n) (Fisher–Yates, as `DataLoader`'s shuffle). */
function permutation(random: () => number, n: number): Int32Array {
  const order = new Int32Array(n);
  for (let i = 0; i < n; i++) order[i] = i;
  for (let i = n - 1; i > 0; i--) {
    const j = below(random, i + 1);
    const t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  return order;
}

function sizeOf(op: string, dataSource: unknown): number {
  const n = (dataSource as { length?: unknown } | null)?.length;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 0) {
    throw new TypeError(
      `${op}: the data source must have a non-negative integer length, got ${String(n)}`,
    );
  }
  return n;
}

function checkBoolean(op: string, name: string, value: unknown, error: ErrorConstructor): void {
  if (typeof value !== "boolean") {
    throw new error(`${op}: ${name} should be a boolean value, but got ${name}=${String(value)}`);
  }
}

function checkCount(op: string, name: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value <= 0) {
    throw new RangeError(
      `${op}: ${name} should be a positive integer value, but got ${name}=${String(value)}`,
    );
  }
  return value;
}

/**
 * The indices 0, 1, ..., length - 1 of a data source, in order, as
 * `torch.utils.data.SequentialSampler`. The length is read at each
 * iteration, so a dataset that grows is followed.
 */
export class SequentialSampler extends Sampler {
  /** What is sampled (anything with a `length`). */
  readonly dataSource: { readonly length: number };

  /** A sampler over the indices of `dataSource`. */
  constructor(dataSource: { readonly length: number }) {
    super();
    sizeOf("SequentialSampler", dataSource);
    this.dataSource = dataSource;
  }

  /** Number of indices: the data source's length. */
  get length(): number {
    return this.dataSource.length;
  }

  /** 0, 1, ..., length - 1. */
  *[Symbol.iterator](): Iterator<number> {
    const n = this.dataSource.length;
    for (let i = 0; i < n; i++) yield i;
  }
}

/** Options of {@link RandomSampler}. */
export interface RandomSamplerOptions extends SamplerRandomOptions {
  /** Draw each index independently, so indices repeat (default false). */
  replacement?: boolean;
  /** Indices per epoch (default: the data source's length). */
  numSamples?: number;
}

/**
 * Random indices of a data source, as `torch.utils.data.RandomSampler`:
 * without replacement each epoch is a permutation (`numSamples` above the
 * length chains whole permutations, then a part of one, as PyTorch 1.13);
 * with replacement `numSamples` independent uniform draws.
 *
 * @example
 * ```ts
 * const sampler = new data.RandomSampler(dataset, { seed: 0 });
 * const loader = new data.DataLoader(dataset, { sampler, batchSize: 16 });
 * ```
 */
export class RandomSampler extends Sampler {
  /** What is sampled (anything with a `length`). */
  readonly dataSource: { readonly length: number };
  /** Whether indices are drawn with replacement. */
  readonly replacement: boolean;
  readonly #numSamples: number | null;
  readonly #random: () => () => number;
  readonly #torch: Generator | null;

  /** A sampler over the indices of `dataSource`. */
  constructor(dataSource: { readonly length: number }, options: RandomSamplerOptions = {}) {
    super();
    const op = "RandomSampler";
    const n = sizeOf(op, dataSource);
    const replacement = options.replacement ?? false;
    checkBoolean(op, "replacement", replacement, TypeError);
    if (options.numSamples !== undefined) checkCount(op, "numSamples", options.numSamples);
    // An empty data source has no default count, as PyTorch's num_samples=0 error.
    else checkCount(op, "numSamples", n);
    this.dataSource = dataSource;
    this.replacement = replacement;
    this.#numSamples = options.numSamples ?? null;
    this.#random = randomSource(op, options);
    this.#torch = options.generator instanceof Generator ? options.generator : null;
  }

  /** Indices per epoch. */
  get numSamples(): number {
    return this.#numSamples ?? this.dataSource.length;
  }

  /** Indices per epoch (`numSamples`). */
  get length(): number {
    return this.numSamples;
  }

  /** One epoch of random indices. */
  *[Symbol.iterator](): Iterator<number> {
    const n = this.dataSource.length;
    const count = this.numSamples;
    if (count > 0 && n === 0) {
      throw new RangeError(
        `RandomSampler: cannot draw ${count} samples from an empty data source (length 0)`,
      );
    }
    const g = this.#torch;
    if (g) {
      // PyTorch 1.13's draws, lazily as its generator function: randint in chunks of 32, or
      // whole permutations, the last one drawn even when none of it is used.
      if (this.replacement) {
        for (let left = count; left >= 0; left -= 32) {
          yield* g.integers(Math.min(32, left), 0, n, "int64");
          if (left < 32) break;
        }
        return;
      }
      for (let k = 0; k < Math.floor(count / n); k++) yield* g.permutation(n);
      yield* g.permutation(n).subarray(0, count % n);
      return;
    }
    const random = this.#random();
    if (this.replacement) {
      for (let i = 0; i < count; i++) yield below(random, n);
      return;
    }
    for (let left = count; left > 0; left -= n) {
      const order = permutation(random, n);
      yield* order.subarray(0, Math.min(n, left));
    }
  }
}

/**
 * The given indices in a random order, a new one each epoch, as
 * `torch.utils.data.SubsetRandomSampler`.
 *
 * @example
 * ```ts
 * const train = new data.SubsetRandomSampler([0, 1, 2, 3, 4, 5, 6, 7], { seed: 1 });
 * const loader = new data.DataLoader(dataset, { sampler: train, batchSize: 4 });
 * ```
 */
export class SubsetRandomSampler extends Sampler {
  /** The indices sampled. */
  readonly indices: readonly number[];
  readonly #random: () => () => number;
  readonly #torch: Generator | null;

  /** A sampler over `indices`. */
  constructor(indices: ArrayLike<number> | Iterable<number>, options: SamplerRandomOptions = {}) {
    super();
    const list = hostIndexList("SubsetRandomSampler", indices);
    list.forEach((index, i) => {
      if (!Number.isInteger(index)) {
        throw new TypeError(
          `SubsetRandomSampler: indices[${i}] = ${String(index)} is not an integer`,
        );
      }
    });
    this.indices = Object.freeze(list);
    this.#random = randomSource("SubsetRandomSampler", options);
    this.#torch = options.generator instanceof Generator ? options.generator : null;
  }

  /** Number of indices. */
  get length(): number {
    return this.indices.length;
  }

  /** The indices, permuted. */
  *[Symbol.iterator](): Iterator<number> {
    const n = this.indices.length;
    const order = this.#torch ? this.#torch.permutation(n) : permutation(this.#random(), n);
    for (const i of order) yield this.indices[i];
  }
}

/** Options of {@link WeightedRandomSampler}. */
export interface WeightedRandomSamplerOptions extends SamplerRandomOptions {
  /** Draw each index independently, so indices repeat (default true). */
  replacement?: boolean;
}

/**
 * Indices 0 .. weights.length - 1 drawn with probabilities proportional to
 * `weights` (which need not sum to 1), as
 * `torch.utils.data.WeightedRandomSampler` (`torch.multinomial`). Without
 * replacement an index is drawn at most once per epoch, each draw among the
 * rest in proportion to their weights; once the positive weights are used
 * up, the zero-weight indices follow in index order (PyTorch also gives
 * them last, in an order of its own).
 *
 * With a `Generator`, draws are `torch.multinomial`'s exactly (PyTorch
 * 1.13 cpu, float64 weights), with or without replacement.
 *
 * Bad weights (negative, NaN, infinite, all zero) and `numSamples` above
 * the number of weights without replacement are refused here, where
 * PyTorch raises only when the sampler is first iterated.
 *
 * @example
 * ```ts
 * // Balance two classes of 90 and 10 samples.
 * const weights = labels.map((y) => (y === 0 ? 1 / 90 : 1 / 10));
 * const sampler = new data.WeightedRandomSampler(weights, 100, { seed: 0 });
 * ```
 */
export class WeightedRandomSampler extends Sampler {
  /** The weights, as float64. */
  readonly weights: Float64Array;
  /** Indices per epoch. */
  readonly numSamples: number;
  /** Whether indices are drawn with replacement. */
  readonly replacement: boolean;
  /** The weights over their largest: sums neither overflow (1e308s) nor lose denormals. */
  readonly #scaled: Float64Array;
  readonly #cumulative: Float64Array;
  readonly #random: () => () => number;
  readonly #torch: Generator | null;

  /** A sampler drawing `numSamples` indices by `weights`. */
  constructor(
    weights: ArrayLike<number> | Iterable<number>,
    numSamples: number,
    options: WeightedRandomSamplerOptions = {},
  ) {
    super();
    const op = "WeightedRandomSampler";
    checkCount(op, "numSamples", numSamples);
    const replacement = options.replacement ?? true;
    // PyTorch raises ValueError here (TypeError in RandomSampler).
    checkBoolean(op, "replacement", replacement, RangeError);
    if (
      weights === null || typeof weights !== "object" ||
      !("length" in weights || Symbol.iterator in weights)
    ) {
      throw new TypeError(
        `${op}: weights must be a 1-d sequence of numbers, got ${typeof weights}`,
      );
    }
    if (typeof (weights as { toArray?: unknown }).toArray === "function") {
      throw new TypeError(
        `${op}: weights must be a 1-d sequence of numbers read on the host; for a Tensor pass (await w.toArray()) or its data`,
      );
    }
    const list = Array.from(weights as ArrayLike<number>);
    let total = 0;
    let max = 0;
    list.forEach((w, i) => {
      if (typeof w !== "number") {
        throw new RangeError(
          `${op}: weights should be a 1-d sequence of numbers, but weights[${i}] is ${
            Array.isArray(w) ? "an array" : typeof w
          }`,
        );
      }
      if (Number.isNaN(w) || !Number.isFinite(w)) {
        throw new RangeError(`${op}: weights[${i}] = ${w}; weights must be finite numbers`);
      }
      if (w < 0) {
        throw new RangeError(`${op}: weights[${i}] = ${w}; weights must be >= 0`);
      }
      total += w;
      max = Math.max(max, w);
    });
    if (!(total > 0)) {
      throw new RangeError(
        `${op}: the ${list.length} weights sum to ${total}; at least one must be positive (invalid multinomial distribution)`,
      );
    }
    if (!replacement && numSamples > list.length) {
      throw new RangeError(
        `${op}: cannot draw numSamples=${numSamples} indices without replacement from ${list.length} weights`,
      );
    }
    this.weights = Float64Array.from(list);
    this.numSamples = numSamples;
    this.replacement = replacement;
    this.#scaled = this.weights.map((w) => w / max);
    let sum = 0;
    this.#cumulative = this.#scaled.map((w) => (sum += w));
    this.#random = randomSource(op, options);
    this.#torch = options.generator instanceof Generator ? options.generator : null;
  }

  /** Indices per epoch (`numSamples`). */
  get length(): number {
    return this.numSamples;
  }

  /** One epoch of weighted draws. */
  *[Symbol.iterator](): Iterator<number> {
    if (this.#torch) {
      // torch.multinomial on the float64 weights, as PyTorch's cpu kernels.
      yield* this.#torch.multinomial(this.weights, 1, this.numSamples, this.replacement, "float64");
      return;
    }
    const random = this.#random();
    const w = this.#scaled;
    const n = w.length;
    if (this.replacement) {
      const cumulative = this.#cumulative;
      const total = cumulative[n - 1];
      for (let k = 0; k < this.numSamples; k++) {
        // The first index whose cumulative weight exceeds the draw: a zero weight never is.
        const target = random() * total;
        let lo = 0;
        let hi = n - 1;
        while (lo < hi) {
          const mid = (lo + hi) >> 1;
          if (cumulative[mid] > target) hi = mid;
          else lo = mid + 1;
        }
        // Rounding can land on a trailing zero weight: step back to the last positive one.
        while (w[lo] === 0) lo--;
        yield lo;
      }
      return;
    }
    // Successive draws without replacement are the smallest of the keys Exp(1) / w
    // (the exponential race torch.multinomial uses too): one sort instead of k passes.
    // Zero weights get Infinity and the stable sort keeps them in index order.
    const keys = new Float64Array(n);
    for (let i = 0; i < n; i++) keys[i] = w[i] > 0 ? -Math.log(1 - random()) / w[i] : Infinity;
    const order = Array.from({ length: n }, (_, i) => i).sort((a, b) =>
      keys[a] < keys[b] ? -1 : keys[a] > keys[b] ? 1 : 0
    );
    yield* order.slice(0, this.numSamples);
  }
}

/**
 * Groups a sampler's indices into batches of `batchSize`, as
 * `torch.utils.data.BatchSampler`: the last, smaller batch is kept unless
 * `dropLast`. Pass one as `DataLoader(ds, { batchSampler })`.
 *
 * @example
 * ```ts
 * [...new data.BatchSampler(new data.SequentialSampler({ length: 10 }), 3, false)];
 * // [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
 * ```
 */
export class BatchSampler implements Iterable<number[]> {
  /** The sampler (or any iterable of indices) batched. */
  readonly sampler: Iterable<number>;
  /** Indices per batch. */
  readonly batchSize: number;
  /** Whether a last, smaller batch is dropped. */
  readonly dropLast: boolean;

  /** Batches of `batchSize` indices of `sampler`. */
  constructor(sampler: Iterable<number>, batchSize: number, dropLast: boolean) {
    const op = "BatchSampler";
    if (
      sampler === null || typeof sampler !== "object" ||
      typeof (sampler as Iterable<number>)[Symbol.iterator] !== "function"
    ) {
      throw new TypeError(`${op}: sampler must be an iterable of indices, got ${typeof sampler}`);
    }
    checkCount(op, "batchSize", batchSize);
    checkBoolean(op, "dropLast", dropLast, RangeError);
    this.sampler = sampler;
    this.batchSize = batchSize;
    this.dropLast = dropLast;
  }

  /** Number of batches: needs the sampler's length. */
  get length(): number {
    const n = (this.sampler as { length?: unknown }).length;
    if (typeof n !== "number") {
      throw new TypeError(
        "BatchSampler: the sampler has no length, so the batch sampler has none (PyTorch raises here too)",
      );
    }
    return this.dropLast ? Math.floor(n / this.batchSize) : Math.ceil(n / this.batchSize);
  }

  /** One epoch of batches of indices. */
  *[Symbol.iterator](): Iterator<number[]> {
    let batch: number[] = [];
    for (const index of this.sampler) {
      batch.push(index);
      if (batch.length === this.batchSize) {
        yield batch;
        batch = [];
      }
    }
    if (batch.length > 0 && !this.dropLast) yield batch;
  }
}
