/**
 * Samplers: DistributedSampler's index lists (PyTorch's padding and
 * striding, dropLast, shuffling by seed and epoch) and DataLoader's
 * `sampler` option.
 * @module
 */

import assert from "node:assert/strict";
import { data, distributed, tensor } from "../mod.ts";

const TEN = { length: 10 };

function shares(options: data.DistributedSamplerOptions & { numReplicas: number }): number[][] {
  return Array.from(
    { length: options.numReplicas },
    (_, rank) => [...new data.DistributedSampler(TEN, { ...options, rank })],
  );
}

Deno.test("DistributedSampler: PyTorch's padding and striding, and dropLast", () => {
  assert.deepEqual(shares({ numReplicas: 3, shuffle: false }), [
    [0, 3, 6, 9],
    [1, 4, 7, 0],
    [2, 5, 8, 1],
  ]);
  assert.deepEqual(shares({ numReplicas: 3, shuffle: false, dropLast: true }), [
    [0, 3, 6],
    [1, 4, 7],
    [2, 5, 8],
  ]);
  assert.deepEqual(shares({ numReplicas: 2, shuffle: false }), [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]]);
  // More replicas than items: the list repeats as often as needed.
  const few = Array.from(
    { length: 4 },
    (
      _,
      rank,
    ) => [...new data.DistributedSampler({ length: 3 }, { numReplicas: 4, rank, shuffle: false })],
  );
  assert.deepEqual(few, [[0], [1], [2], [0]]);
  // ... and with dropLast nothing: a length of 0, not -0 (Math.ceil(-0.25)).
  const none = new data.DistributedSampler({ length: 3 }, {
    numReplicas: 4,
    rank: 3,
    dropLast: true,
  });
  assert.ok(Object.is(none.length, 0), `length ${Object.is(none.length, -0) ? "-0" : none.length}`);
  assert.deepEqual([...none], []);
  const s = new data.DistributedSampler(TEN, { numReplicas: 3, rank: 0 });
  assert.equal(s.length, 4);
  assert.equal(
    new data.DistributedSampler(TEN, { numReplicas: 3, rank: 0, dropLast: true }).length,
    3,
  );
  assert.deepEqual(
    [...new data.DistributedSampler({ length: 0 }, { numReplicas: 2, rank: 1 })],
    [],
  );
});

Deno.test("DistributedSampler: the shuffle depends on seed and epoch only; shares do not overlap", () => {
  const epoch0 = shares({ numReplicas: 3, seed: 5 });
  assert.deepEqual(
    shares({ numReplicas: 3, seed: 5 }),
    epoch0,
    "the same on every call (and rank)",
  );
  // Every item once, plus the two padding items that repeat the permutation's start.
  const flat = epoch0.flat();
  assert.equal(flat.length, 12);
  assert.deepEqual([...new Set(flat)].sort((a, b) => a - b), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  assert.notDeepEqual(flat.slice(0, 10), [0, 3, 6, 9, 1, 4, 7, 0, 2, 5], "shuffled");
  const samplers = Array.from(
    { length: 3 },
    (_, rank) => new data.DistributedSampler(TEN, { numReplicas: 3, rank, seed: 5 }),
  );
  for (const s of samplers) s.setEpoch(1);
  const epoch1 = samplers.map((s) => [...s]);
  assert.notDeepEqual(epoch1, epoch0, "a new epoch, a new order");
  assert.equal(samplers[0].epoch, 1);
  assert.deepEqual(
    shares({ numReplicas: 3, seed: 6 }),
    epoch1,
    "seed + epoch: seed 6 epoch 0 = seed 5 epoch 1",
  );
  assert.throws(() => samplers[0].setEpoch(-1), /setEpoch: expected an integer >= 0/);
});

Deno.test("DistributedSampler: defaults from the process group; clear errors", async () => {
  assert.throws(
    () => new data.DistributedSampler(TEN),
    /this thread has none: call distributed\.initProcessGroup/,
  );
  await distributed.initProcessGroup({ backend: "local" });
  try {
    const s = new data.DistributedSampler(TEN, { shuffle: false });
    assert.equal(s.numReplicas, 1);
    assert.equal(s.rank, 0);
    assert.deepEqual([...s], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  } finally {
    await distributed.destroyProcessGroup();
  }
  assert.throws(
    () => new data.DistributedSampler(TEN, { numReplicas: 2, rank: 2 }),
    /rank must be an integer in \[0, 2\), got 2/,
  );
  assert.throws(
    () => new data.DistributedSampler(TEN, { numReplicas: 0, rank: 0 }),
    /numReplicas must be an integer >= 1/,
  );
  assert.throws(
    () => new data.DistributedSampler({} as { length: number }, { numReplicas: 1, rank: 0 }),
    /non-negative integer length/,
  );
});

Deno.test("DataLoader: batches follow the sampler; sampler and shuffle exclude each other", async () => {
  const ds = new data.TensorDataset(tensor([[0], [1], [2], [3], [4], [5], [6], [7], [8], [9]]));
  const sampler = new data.DistributedSampler(ds, { numReplicas: 3, rank: 1, shuffle: false });
  const loader = new data.DataLoader(ds, { sampler, batchSize: 3 });
  assert.equal(loader.length, 2);
  const batches = [];
  for (const [x] of loader) batches.push(await x.toArray());
  assert.deepEqual(batches, [[[1], [4], [7]], [[0]]]);
  const dropped = new data.DataLoader(ds, { sampler, batchSize: 3, dropLast: true });
  assert.equal(dropped.length, 1);
  assert.equal([...dropped].length, 1);
  // Any iterable of indices is a sampler.
  const plain = new data.DataLoader(ds, { sampler: [9, 0, 9], batchSize: 2 });
  assert.equal(plain.length, 2);
  const rows = [];
  for (const [x] of plain) rows.push(...((await x.toArray()) as number[][]).map((r) => r[0]));
  assert.deepEqual(rows, [9, 0, 9]);
  // A generator: no length to report (counting it would use it up), but it still loads.
  const oneShot = new data.DataLoader(ds, { sampler: [2, 5, 7].values(), batchSize: 2 });
  assert.throws(() => oneShot.length, /one-shot iterator without a length/);
  assert.equal([...oneShot].length, 2);
  assert.throws(
    () => new data.DataLoader(ds, { sampler, shuffle: true }),
    /sampler and shuffle are mutually exclusive/,
  );
  assert.throws(
    () => [...new data.DataLoader(ds, { sampler: [3, 10] })],
    /sampler gave index 10 \(position 1\), outside the dataset's 10 samples/,
  );
});
