/**
 * `Subset` and `randomSplit`, as `torch.utils.data.Subset` and
 * `random_split`: views of a dataset through a list of indices, and a
 * random partition of a dataset into such views.
 * @module
 */

import { nextSeed } from "../ops/factory.ts";
import { Generator, generatorArgument } from "../random/generator.ts";
import { seededRandom } from "../util.ts";
import { hostIndexList } from "./indices.ts";
import { Dataset } from "./dataset.ts";

function checkDataset(op: string, dataset: unknown): asserts dataset is Dataset<unknown> {
  if (
    dataset === null || typeof dataset !== "object" ||
    typeof (dataset as Dataset<unknown>).get !== "function"
  ) {
    throw new TypeError(`${op}: dataset must have a length and a get(index) method`);
  }
  const n = (dataset as Dataset<unknown>).length;
  if (!Number.isInteger(n) || n < 0) {
    throw new RangeError(`${op}: dataset length must be a non-negative integer, got ${n}`);
  }
}

/**
 * The samples of `dataset` at `indices`, in that order, as
 * `torch.utils.data.Subset`: `get(i)` is `dataset.get(indices[i])`.
 */
export class Subset<T> extends Dataset<T> {
  /** The whole dataset. */
  readonly dataset: Dataset<T>;
  /** Which of its samples this subset holds, in order (negative ones count from the end). */
  readonly indices: readonly number[];

  /** A view of `dataset` through `indices` (integers in [-length, length)). */
  constructor(dataset: Dataset<T>, indices: ArrayLike<number> | Iterable<number>) {
    super();
    checkDataset("Subset", dataset);
    const list = hostIndexList("Subset", indices);
    const n = dataset.length;
    list.forEach((index, i) => {
      if (!Number.isInteger(index) || index < -n || index >= n) {
        throw new RangeError(
          `Subset: indices[${i}] = ${index} is not an index of a dataset of ${n} samples`,
        );
      }
    });
    this.dataset = dataset;
    this.indices = Object.freeze(list);
  }

  /** Number of samples in the subset. */
  get length(): number {
    return this.indices.length;
  }

  /** Sample `index` of the subset (negative counts from the end). */
  get(index: number): T {
    const n = this.indices.length;
    const i = index < 0 ? index + n : index;
    if (!Number.isInteger(i) || i < 0 || i >= n) {
      throw new RangeError(`Subset.get: index ${index} is out of range for ${n} samples`);
    }
    return this.dataset.get(this.indices[i]);
  }
}

/** Options of {@link randomSplit}. */
export interface RandomSplitOptions {
  /**
   * Seed of the permutation: the same seed gives the same split. Without it
   * the seed is drawn from the global stream (`manualSeed`).
   */
  seed?: number;
  /**
   * Draw the permutation from this generator, as PyTorch's `generator`: the
   * same split `torch.utils.data.random_split` gives for a
   * `torch.Generator` in the same state.
   */
  generator?: Generator;
}

/**
 * `lengths` as sample counts: counts as given (they must sum to the
 * dataset's length), or fractions summing to 1, turned into counts as
 * PyTorch does (each `floor(n · fraction)`, then the remainder handed out
 * one by one from the first split on).
 */
function splitSizes(n: number, lengths: readonly number[]): number[] {
  const total = lengths.reduce((a, b) => a + b, 0);
  let sizes: number[];
  // Python's math.isclose(total, 1) with its default rel_tol=1e-9.
  if (Math.abs(total - 1) <= 1e-9 * Math.max(Math.abs(total), 1) && total <= 1) {
    sizes = lengths.map((fraction, i) => {
      if (!(fraction >= 0 && fraction <= 1)) {
        throw new RangeError(`randomSplit: fraction at index ${i} is not between 0 and 1`);
      }
      return Math.floor(n * fraction);
    });
    const remainder = n - sizes.reduce((a, b) => a + b, 0);
    for (let i = 0; i < remainder; i++) sizes[i % sizes.length] += 1;
  } else {
    lengths.forEach((count, i) => {
      if (!Number.isInteger(count) || count < 0) {
        throw new RangeError(
          `randomSplit: lengths[${i}] = ${count} is neither a non-negative count nor part of fractions summing to 1`,
        );
      }
    });
    sizes = [...lengths];
  }
  const sum = sizes.reduce((a, b) => a + b, 0);
  if (sum !== n) {
    throw new RangeError(
      `randomSplit: sum of input lengths (${sum}) does not equal the length of the input dataset (${n})`,
    );
  }
  return sizes;
}

/**
 * Splits `dataset` into non-overlapping random subsets of the given
 * `lengths`, as `torch.utils.data.random_split`: counts (`[800, 200]`) or
 * fractions (`[0.8, 0.2]`). A {@link Generator} (as the options or their
 * `generator`) gives PyTorch's split for it exactly.
 *
 * @example
 * ```ts
 * const [train, test] = data.randomSplit(dataset, [0.8, 0.2], { seed: 42 });
 * ```
 */
export function randomSplit<T>(
  dataset: Dataset<T>,
  lengths: readonly number[],
  options: RandomSplitOptions | Generator = {},
): Subset<T>[] {
  checkDataset("randomSplit", dataset);
  if (options instanceof Generator) options = { generator: options };
  if (!Array.isArray(lengths) || lengths.length === 0) {
    throw new TypeError("randomSplit: lengths must be a non-empty array of counts or fractions");
  }
  if (options.seed !== undefined && !Number.isFinite(options.seed)) {
    throw new RangeError(`randomSplit: seed must be a finite number, got ${options.seed}`);
  }
  const sizes = splitSizes(dataset.length, lengths);
  const g = generatorArgument("randomSplit", options.generator);
  if (g) {
    if (options.seed !== undefined) {
      throw new TypeError("randomSplit: pass seed or generator, not both");
    }
    const order = Array.from(g.permutation(dataset.length));
    let at = 0;
    return sizes.map((size) => new Subset(dataset, order.slice(at, at += size)));
  }
  const random = seededRandom(options.seed === undefined ? nextSeed() : Math.trunc(options.seed));
  // Fisher–Yates over all indices, then consecutive runs of it.
  const order = Array.from({ length: dataset.length }, (_, i) => i);
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  let offset = 0;
  return sizes.map((size) => new Subset(dataset, order.slice(offset, offset += size)));
}
