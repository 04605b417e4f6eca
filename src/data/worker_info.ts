/**
 * `getWorkerInfo`, as `torch.utils.data.get_worker_info`: inside a
 * `DataLoader` worker, which worker this is.
 * @module
 */

import type { Dataset } from "./dataset.ts";
import type { IterableDataset } from "./iterable.ts";
import { currentWorker } from "./worker_state.ts";

/**
 * What {@link getWorkerInfo} returns inside a `DataLoader` worker, as
 * PyTorch's `WorkerInfo`.
 */
export interface WorkerInfo {
  /** This worker, in [0, numWorkers). */
  readonly id: number;
  /** The loader's `numWorkers`. */
  readonly numWorkers: number;
  /**
   * The seed this worker's generator started from (`manualSeed`): the
   * epoch's base seed plus `id`, so each worker draws its own numbers.
   */
  readonly seed: number;
  /** This worker's own copy of the dataset. */
  readonly dataset: Dataset<unknown> | IterableDataset<unknown>;
}

/**
 * Inside a `DataLoader` worker (`numWorkers > 0`), which worker this is
 * and its copy of the dataset; null anywhere else (the main thread, or a
 * loader with `numWorkers: 0`), as `torch.utils.data.get_worker_info`.
 * An `IterableDataset` uses it to give each worker its own share of the
 * stream (every worker iterates its own copy, so without it each sample
 * comes `numWorkers` times).
 *
 * @example
 * ```ts
 * class Range extends data.IterableDataset<number> {
 *   constructor(readonly start: number, readonly end: number) { super(); }
 *   *[Symbol.iterator]() {
 *     const info = data.getWorkerInfo();
 *     const step = info ? info.numWorkers : 1;
 *     for (let i = this.start + (info?.id ?? 0); i < this.end; i += step) yield i;
 *   }
 * }
 * ```
 */
export function getWorkerInfo(): WorkerInfo | null {
  return currentWorker() as WorkerInfo | null;
}
