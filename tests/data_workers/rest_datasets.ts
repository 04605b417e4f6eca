/**
 * For `tests/data_rest_test.ts`: a dataset of plain numbers a worker
 * rebuilds, and collate / convert functions given to a `DataLoader` as
 * module references, so that they run inside its workers.
 * @module
 */

import { data, type Tensor, tensor } from "../../mod.ts";

/** Sample i is the number i (PyTorch's `list(range(n))`). */
export class Numbers extends data.Dataset<number> {
  constructor(readonly n: number) {
    super();
  }
  get length(): number {
    return this.n;
  }
  get(i: number): number {
    return i;
  }
  workerSource(): data.WorkerSource {
    return { module: import.meta.url, export: "makeNumbers", args: this.n };
  }
}

/** Rebuilds {@link Numbers}. */
export function makeNumbers(n: number): Numbers {
  return new Numbers(n);
}

/** A collate: the batch's sum and the worker that made it (-1: the main thread). */
export function sumCollate(samples: number[]): { sum: number; worker: number } {
  return {
    sum: samples.reduce((a, b) => a + b, 0),
    worker: data.getWorkerInfo()?.id ?? -1,
  };
}

/** A collate making a tensor: the samples times `scale`, and where it was made. */
export function scaledCollate(samples: number[], scale: number): [Tensor, number] {
  return [tensor(samples).mul(scale), data.getWorkerInfo()?.id ?? -1];
}

/** A convert (batchSize: null): the sample times ten, and where it was converted. */
export function tenfold(sample: number): { value: number; worker: number } {
  return { value: sample * 10, worker: data.getWorkerInfo()?.id ?? -1 };
}

/**
 * A collate returning its tensors inside a Map, a Set and nested objects,
 * beside values that are not tensors (review R4: a Map's tensors came back
 * as plain objects).
 */
export function mappedCollate(samples: number[]): {
  byName: Map<string, Tensor>;
  set: Set<Tensor>;
  nested: { deep: Tensor[] };
  label: string;
  when: Date;
} {
  return {
    byName: new Map([["x", tensor(samples)]]),
    set: new Set([tensor(samples).mul(2)]),
    nested: { deep: [tensor(samples).add(1)] },
    label: samples.join(","),
    when: new Date(samples[0]),
  };
}

/** A collate that throws on the batch holding sample 3. */
export function failingCollate(samples: number[]): number {
  if (samples.includes(3)) throw new RangeError(`no batch with sample 3 (got ${samples})`);
  return samples[0];
}

/** Sample i is i, given `ms` milliseconds late (a Promise: only workers await it). */
export class Late extends data.Dataset<number> {
  constructor(readonly n: number, readonly ms: number) {
    super();
  }
  get length(): number {
    return this.n;
  }
  get(i: number): number {
    return new Promise((resolve) => setTimeout(() => resolve(i), this.ms)) as unknown as number;
  }
  workerSource(): data.WorkerSource {
    return { module: import.meta.url, export: "makeLate", args: [this.n, this.ms] };
  }
}

/** Rebuilds {@link Late}. */
export function makeLate([n, ms]: [number, number]): Late {
  return new Late(n, ms);
}

/** A collate that answers asynchronously (refused: batches are made synchronously). */
export function asyncCollate(samples: number[]): Promise<number[]> {
  return Promise.resolve(samples);
}
