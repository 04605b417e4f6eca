/**
 * Datasets for `tests/data_workers_test.ts` that a `DataLoader` worker
 * rebuilds from this module (`workerSource()`), each showing one thing a
 * worker does: samples made in JavaScript, per-worker seeding and
 * identity, a stream sharded with `getWorkerInfo`, and failures (a throwing
 * `get`, a hang, a worker that dies or closes itself).
 * @module
 */

import { data, rand, type Tensor, tensor } from "../../mod.ts";

/** What each test dataset is made from. */
export interface Spec {
  readonly n: number;
  /** `get` of this index throws (faulty), hangs (hang), or kills its worker (die, close). */
  readonly at?: number;
}

/** Sample i is `{ x: [i, i²] (float32), i }`; `faulty` throws at `spec.at`. */
export class Squares extends data.Dataset<{ x: Tensor; i: number }> {
  constructor(readonly spec: Spec, readonly kind = "plain") {
    super();
  }
  get length(): number {
    return this.spec.n;
  }
  get(i: number): { x: Tensor; i: number } {
    if (i === this.spec.at) misbehave(this.kind, i);
    return { x: tensor([i, i * i]), i };
  }
  workerSource(): data.WorkerSource {
    return { module: import.meta.url, export: "makeSquares", args: [this.spec, this.kind] };
  }
}

/** Named so that the test can find it in the worker's stack. */
function misbehave(kind: string, i: number): void {
  if (kind === "faulty") throw new RangeError(`sample ${i} is corrupt`);
  if (kind === "hang") { while (true) { /* a decoder that never returns */ } }
  if (kind === "die") {
    setTimeout(() => {
      throw new Error(`worker crashed at ${i}`);
    });
  }
  if (kind === "close") (globalThis as unknown as { close(): void }).close();
}

/** Rebuilds {@link Squares} in a worker. */
export function makeSquares([spec, kind]: [Spec, string]): Squares {
  return new Squares(spec, kind);
}

/** Gets counted in this worker (for persistence), `initFn`'s mark (for workerInitFn). */
let calls = 0;
let initMark = "";

/** `workerInitFn`: marks this worker. */
export function markWorker(id: number, prefix: string): void {
  initMark = `${prefix}${id}`;
}

/**
 * Sample i: which worker made it, its seed, three `rand` numbers drawn
 * there, how many samples this worker's copy has given, and the init mark.
 */
export class Probe extends data.Dataset<Record<string, unknown>> {
  constructor(readonly n: number) {
    super();
  }
  get length(): number {
    return this.n;
  }
  get(i: number): Record<string, unknown> {
    const info = data.getWorkerInfo();
    return {
      i,
      id: info?.id ?? -1,
      numWorkers: info?.numWorkers ?? 0,
      seed: info?.seed ?? -1,
      copyLength: (info?.dataset as Probe | undefined)?.length ?? -1,
      sameCopy: info?.dataset === this,
      r: rand([3]),
      calls: ++calls,
      mark: initMark,
    };
  }
  workerSource(): data.WorkerSource {
    return { module: new URL(import.meta.url), export: "makeProbe", args: this.n };
  }
}

/** Rebuilds {@link Probe}, asynchronously (a source may be async). */
export async function makeProbe(n: number): Promise<Probe> {
  await Promise.resolve();
  return new Probe(n);
}

/** Sample i is i, given as a Promise (a worker awaits it; the main thread refuses it). */
export class Later extends data.Dataset<Promise<number>> {
  get length(): number {
    return 7;
  }
  get(i: number): Promise<number> {
    return new Promise((resolve) => setTimeout(() => resolve(i), 1));
  }
  workerSource(): data.WorkerSource {
    return { module: import.meta.url, export: "makeLater" };
  }
}

/** Rebuilds {@link Later}. */
export function makeLater(): Later {
  return new Later();
}

/**
 * The integers [start, end); with `shard`, each worker takes every
 * numWorkers-th one from its id (PyTorch's documented sharding), else every
 * worker gives all of them.
 */
export class Range extends data.IterableDataset<number> {
  constructor(readonly start: number, readonly end: number, readonly shard: boolean) {
    super();
  }
  *[Symbol.iterator](): Iterator<number> {
    const info = this.shard ? data.getWorkerInfo() : null;
    const step = info ? info.numWorkers : 1;
    for (let i = this.start + (info ? info.id : 0); i < this.end; i += step) yield i;
  }
  workerSource(): data.WorkerSource {
    return {
      module: import.meta.url,
      export: "makeRange",
      args: [this.start, this.end, this.shard],
    };
  }
}

/** Rebuilds {@link Range}. */
export function makeRange([start, end, shard]: [number, number, boolean]): Range {
  return new Range(start, end, shard);
}

/** A dataset with no `workerSource()`: refused with numWorkers > 0. */
export class Local extends data.Dataset<number> {
  get length(): number {
    return 3;
  }
  get(i: number): number {
    return i;
  }
}
