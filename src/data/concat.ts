/**
 * `ConcatDataset`, as `torch.utils.data.ConcatDataset`: several map-style
 * datasets read as one.
 * @module
 */

import { Dataset } from "./dataset.ts";
import { IterableDataset } from "./iterable.ts";

/**
 * The samples of several datasets one after the other, as
 * `torch.utils.data.ConcatDataset`: index i reads the dataset whose
 * `cumulativeSizes` range holds it (empty datasets are skipped), and a
 * negative index counts from the end. The sizes are read once, when it is
 * made.
 *
 * @example
 * ```ts
 * const all = new data.ConcatDataset([train, extra]);
 * all.cumulativeSizes; // [train.length, train.length + extra.length]
 * ```
 */
export class ConcatDataset<T = unknown> extends Dataset<T> {
  /** The datasets, in order. */
  readonly datasets: readonly Dataset<T>[];
  /** Running totals of the datasets' lengths: the last one is the length. */
  readonly cumulativeSizes: readonly number[];

  /** A dataset of the samples of `datasets` (map-style, at least one). */
  constructor(datasets: Iterable<Dataset<T>>) {
    super();
    if (
      datasets === null || typeof datasets !== "object" ||
      typeof (datasets as Iterable<unknown>)[Symbol.iterator] !== "function"
    ) {
      throw new TypeError(
        `ConcatDataset: datasets must be an iterable of datasets, got ${typeof datasets}`,
      );
    }
    const list = [...datasets];
    if (list.length === 0) throw new RangeError("ConcatDataset: datasets should not be empty");
    const sizes: number[] = [];
    let total = 0;
    list.forEach((d, i) => {
      if ((d as unknown) instanceof IterableDataset) {
        throw new TypeError(
          `ConcatDataset: does not support IterableDataset (datasets[${i}] is ${d.constructor.name}; use ChainDataset)`,
        );
      }
      if (d === null || typeof d !== "object" || typeof (d as Dataset<T>).get !== "function") {
        throw new TypeError(
          `ConcatDataset: datasets[${i}] must have a length and a get(index) method`,
        );
      }
      const n = d.length;
      if (!Number.isInteger(n) || n < 0) {
        throw new RangeError(
          `ConcatDataset: datasets[${i}] has length ${n}; lengths must be non-negative integers`,
        );
      }
      sizes.push(total += n);
    });
    this.datasets = Object.freeze(list);
    this.cumulativeSizes = Object.freeze(sizes);
  }

  /** Total samples. */
  get length(): number {
    return this.cumulativeSizes[this.cumulativeSizes.length - 1];
  }

  /**
   * Which dataset holds sample `index` and its index there (negative
   * `index` counts from the end).
   */
  locate(index: number): { dataset: number; index: number } {
    const n = this.length;
    if (!Number.isInteger(index) || index < -n || index >= n) {
      throw new RangeError(
        `ConcatDataset: index ${index} is out of range for a dataset of length ${n}`,
      );
    }
    const i = index < 0 ? index + n : index;
    // bisect_right: the first running total above i, which skips empty datasets.
    const sizes = this.cumulativeSizes;
    let lo = 0;
    let hi = sizes.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (sizes[mid] > i) hi = mid;
      else lo = mid + 1;
    }
    return { dataset: lo, index: lo === 0 ? i : i - sizes[lo - 1] };
  }

  /** Sample `index` (negative counts from the end). */
  get(index: number): T {
    const at = this.locate(index);
    return this.datasets[at.dataset].get(at.index);
  }
}
