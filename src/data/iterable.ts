/**
 * Iterable-style datasets, as `torch.utils.data.IterableDataset` and
 * `ChainDataset`: streams of samples read in order, which `DataLoader`
 * batches as they come.
 * @module
 */

/**
 * A dataset read as a stream, as `torch.utils.data.IterableDataset`:
 * subclasses implement `[Symbol.iterator]()`, and may define a `length`
 * (then `DataLoader` has one). `DataLoader` batches the samples in the
 * order the iterator gives them; it takes no `sampler`, `batchSampler`
 * or `shuffle` for such a dataset.
 *
 * @example
 * ```ts
 * class Range extends data.IterableDataset<number> {
 *   constructor(readonly start: number, readonly end: number) { super(); }
 *   *[Symbol.iterator]() { for (let i = this.start; i < this.end; i++) yield i; }
 * }
 * for (const batch of new data.DataLoader(new Range(3, 10), { batchSize: 4 })) console.log(batch.shape);
 * ```
 */
export abstract class IterableDataset<T = unknown> implements Iterable<T> {
  /** One pass over the samples. */
  abstract [Symbol.iterator](): Iterator<T>;
}

function checkMember(op: string, d: unknown, i: number): asserts d is IterableDataset<unknown> {
  if (!(d instanceof IterableDataset)) {
    throw new TypeError(
      `${op}: only supports IterableDataset, but datasets[${i}] is ${
        d === null || typeof d !== "object" ? String(d) : d.constructor?.name ?? "an object"
      }`,
    );
  }
}

/**
 * Several iterable datasets read one after the other, as
 * `torch.utils.data.ChainDataset`; its `length` is the sum of theirs
 * (a TypeError when one has none).
 */
export class ChainDataset<T = unknown> extends IterableDataset<T> {
  /** The datasets chained, in order. */
  readonly datasets: readonly IterableDataset<T>[];

  /** A chain of `datasets` (each an `IterableDataset`). */
  constructor(datasets: Iterable<IterableDataset<T>>) {
    super();
    if (
      datasets === null || typeof datasets !== "object" ||
      typeof (datasets as Iterable<unknown>)[Symbol.iterator] !== "function"
    ) {
      throw new TypeError(
        `ChainDataset: datasets must be an iterable of IterableDataset, got ${typeof datasets}`,
      );
    }
    const list = [...datasets];
    // PyTorch checks on iteration; refusing early points at the bad argument.
    list.forEach((d, i) => checkMember("ChainDataset", d, i));
    this.datasets = Object.freeze(list);
  }

  /** Total samples of the datasets (each must have a `length`). */
  get length(): number {
    let total = 0;
    this.datasets.forEach((d, i) => {
      const n = (d as { length?: unknown }).length;
      if (typeof n !== "number") {
        throw new TypeError(
          `ChainDataset: datasets[${i}] (${d.constructor.name}) has no length, so the chain has none`,
        );
      }
      total += n;
    });
    return total;
  }

  /** The samples of every dataset, in order. */
  *[Symbol.iterator](): Iterator<T> {
    for (const d of this.datasets) yield* d;
  }
}
