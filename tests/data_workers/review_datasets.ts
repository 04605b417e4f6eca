/**
 * Datasets for `tests/data_workers_review_test.ts`, rebuilt in each
 * `DataLoader` worker from this module (`workerSource()`).
 * @module
 */

import { data } from "../../mod.ts";

/**
 * A stream of [start, end) sharded over the workers by `getWorkerInfo`;
 * worker `failWorker` throws when it reaches `failAt`.
 */
export class FailingShards extends data.IterableDataset<number> {
  constructor(
    readonly start: number,
    readonly end: number,
    readonly failWorker: number,
    readonly failAt: number,
  ) {
    super();
  }
  *[Symbol.iterator](): Iterator<number> {
    const info = data.getWorkerInfo();
    const id = info?.id ?? 0;
    const step = info?.numWorkers ?? 1;
    for (let i = this.start + id; i < this.end; i += step) {
      if (id === this.failWorker && i === this.failAt) throw new Error(`stream broke at ${i}`);
      yield i;
    }
  }
  workerSource(): data.WorkerSource {
    return {
      module: import.meta.url,
      export: "makeFailingShards",
      args: [this.start, this.end, this.failWorker, this.failAt],
    };
  }
}

/** Rebuilds {@link FailingShards}. */
export function makeFailingShards(
  [start, end, failWorker, failAt]: [number, number, number, number],
): FailingShards {
  return new FailingShards(start, end, failWorker, failAt);
}

/** Sample i is i, after `ms` of busy work (so batches are still in flight when asked). */
export class Busy extends data.Dataset<number> {
  constructor(readonly n: number, readonly ms: number) {
    super();
  }
  get length(): number {
    return this.n;
  }
  get(i: number): number {
    const until = Date.now() + this.ms;
    while (Date.now() < until) { /* decoding */ }
    return i;
  }
  workerSource(): data.WorkerSource {
    return { module: import.meta.url, export: "makeBusy", args: [this.n, this.ms] };
  }
}

/** Rebuilds {@link Busy}. */
export function makeBusy([n, ms]: [number, number]): Busy {
  return new Busy(n, ms);
}
