/**
 * data: DataLoader with `numWorkers`, review cases: the global generator's
 * shuffle order as without workers, a superseded iterator of a persistent
 * loader, and a stream's error naming the worker's own batch.
 */

import assert from "node:assert/strict";
import { arange, data, manualSeed, rand, setDefaultDtype, type Tensor } from "../mod.ts";
import { Busy, FailingShards } from "./data_workers/review_datasets.ts";

/** Deno.test with the sanitizers off where Workers start (their ops outlive the test's view). */
function workerTest(name: string, fn: () => Promise<void>): void {
  Deno.test({ name, sanitizeOps: false, sanitizeResources: false, fn });
}

async function values(loader: AsyncIterable<unknown>): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const batch of loader) {
    out.push(Array.isArray(batch) ? await (batch[0] as Tensor).toArray() : batch);
  }
  return out;
}

workerTest(
  "shuffle from the global generator (manualSeed, no seed option): the same order as numWorkers 0",
  async () => {
    const ds = new data.TensorDataset(arange(0, 10, 1));
    const orders: unknown[][] = [];
    for (const numWorkers of [0, 1, 2]) {
      manualSeed(3);
      const loader = new data.DataLoader(ds, { batchSize: 3, shuffle: true, numWorkers });
      // The global stream goes on as without workers: the next epoch, and the next draw.
      orders.push([
        ...(await values(loader)),
        ...(await values(loader)),
        await rand([2]).toArray(),
      ]);
    }
    assert.deepEqual(orders[1], orders[0]);
    assert.deepEqual(orders[2], orders[0]);
  },
);

workerTest(
  "persistent workers: resuming a superseded iterator fails it, not the epoch that replaced it",
  async () => {
    const loader = new data.DataLoader(new Busy(8, 1), {
      batchSize: 1,
      numWorkers: 2,
      persistentWorkers: true,
      collate: (s) => s[0],
    });
    try {
      const old = loader[Symbol.asyncIterator]();
      assert.equal((await old.next()).value, 0);
      const current = loader[Symbol.asyncIterator]();
      const got = [(await current.next()).value];
      await assert.rejects(old.next(), /another epoch of this loader started/);
      for (let step = await current.next(); !step.done; step = await current.next()) {
        got.push(step.value);
      }
      assert.deepEqual(got, [0, 1, 2, 3, 4, 5, 6, 7]);
    } finally {
      loader.shutdown();
    }
  },
);

workerTest(
  "IterableDataset: a worker's stream error names the loader's batch and the worker's own batch",
  async () => {
    // Worker 1 streams 1, 3, 5, 7, ...: its batches of 2 are [1, 3], then [5, 7] breaks at 7.
    const loader = new data.DataLoader(new FailingShards(0, 12, 1, 7), {
      batchSize: 2,
      numWorkers: 2,
    });
    const got: unknown[] = [];
    await assert.rejects(
      (async () => {
        for await (const batch of loader) got.push(await (batch as Tensor).toArray());
      })(),
      /Caught Error in DataLoader worker 1 \(batch 3, batch 1 of its own stream\): stream broke at 7/,
    );
    assert.deepEqual(got, [[0, 2], [1, 3], [4, 6]]);
  },
);

Deno.test("defaultConvert: typed arrays become tensors, the rest is kept, as default_convert", async () => {
  const t = arange(0, 3, 1);
  const bytes = new Uint8Array([1, 2]);
  const sample = {
    f: new Float32Array([1.5, -2]),
    d: [new Float64Array([0.1]), "s", 3, true, null],
    i: new Int32Array([7]),
    t,
    bytes,
  };
  const out = data.defaultConvert(sample);
  assert.deepEqual([out.f.dtype, out.f.shape, await out.f.toArray()], ["float32", [2], [1.5, -2]]);
  const d0 = out.d[0] as Tensor;
  assert.deepEqual([d0.dtype, await d0.toArray()], ["float64", [0.1]]);
  assert.deepEqual(out.d.slice(1), ["s", 3, true, null]);
  assert.deepEqual([out.i.dtype, await out.i.toArray()], ["int32", [7]]);
  // Tensors and typed arrays of no tensor dtype are kept as they are; containers are new.
  assert.equal(out.t, t);
  assert.equal(out.bytes, bytes);
  assert.notEqual(out.d, sample.d);
  assert.equal(data.defaultConvert(2.5), 2.5);
  // As the collate of a loader that hands out samples one by one.
  const loader = new data.DataLoader(
    { length: 2, get: (i: number) => new Int32Array([i, i]) } as data.Dataset<Int32Array>,
    { collate: (s) => data.defaultConvert(s[0]) },
  );
  assert.deepEqual(await Promise.all([...loader].map((b) => b.toArray())), [[0, 0], [1, 1]]);
});

workerTest(
  "workers make their floats in the main thread's default dtype, as forked workers",
  async () => {
    const { Squares } = await import("./data_workers/datasets.ts");
    const dtypes: string[] = [];
    setDefaultDtype("float64");
    try {
      for (const numWorkers of [0, 2]) {
        const loader = new data.DataLoader(new Squares({ n: 4 }), { batchSize: 2, numWorkers });
        for await (const batch of loader) dtypes.push((batch as { x: Tensor }).x.dtype);
      }
    } finally {
      setDefaultDtype("float32");
    }
    assert.deepEqual(dtypes, ["float64", "float64", "float64", "float64"]);
  },
);
