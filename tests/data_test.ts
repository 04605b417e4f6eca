/**
 * data: Dataset, TensorDataset and DataLoader (batch sizes, shuffling,
 * seeds, collation of nested samples, device prefetch, memory ownership).
 */

import assert from "node:assert/strict";
import {
  arange,
  data,
  type Device,
  manualSeed,
  randn,
  type Tensor,
  tensor,
  tidy,
  zeros,
} from "../mod.ts";
import { assertTensor, backendTest } from "./harness.ts";

/** Rows 0..n-1 as [n, 2] (row i is [i, 10 i]) and labels i as int32. */
function rows(n: number, device: Device): data.TensorDataset {
  const x = tensor(Array.from({ length: n }, (_, i) => [i, 10 * i]), { device });
  const y = arange(0, n, 1, { device });
  return new data.TensorDataset(x, y);
}

async function labelsOf(loader: Iterable<Tensor[]>): Promise<number[][]> {
  const out: number[][] = [];
  for (const [, y] of loader) out.push(Array.from(await y.data()));
  return out;
}

backendTest("TensorDataset: rows, length, errors", async (device) => {
  const ds = rows(5, device);
  assert.equal(ds.length, 5);
  const [x, y] = ds.get(3);
  await assertTensor(x, [3, 30], { shape: [2] });
  await assertTensor(y, [3], { shape: [] });
  await assertTensor(ds.get(-1)[1], [4]);
  assert.throws(() => ds.get(5), /index 5 is out of range for 5 rows/);
  assert.throws(
    () => new data.TensorDataset(zeros([3, 2]), zeros([4])),
    /tensor 0 has shape \[3, 2\] but tensor 1 has shape \[4\]/,
  );
  assert.throws(() => new data.TensorDataset(), /at least one tensor/);
  assert.equal([...ds].length, 5);
});

backendTest(
  "DataLoader: 100 rows in batches of 30 give 30, 30, 30, 10; dropLast gives 3",
  async (device) => {
    const ds = new data.TensorDataset(randn([100, 5], { device }), arange(0, 100, 1, { device }));
    const loader = new data.DataLoader(ds, { batchSize: 30 });
    assert.equal(loader.length, 4);
    const sizes = [...loader].map(([x, y]) => [x.shape[0], x.shape[1], y.shape[0]]);
    assert.deepEqual(sizes, [[30, 5, 30], [30, 5, 30], [30, 5, 30], [10, 5, 10]]);
    const drop = new data.DataLoader(ds, { batchSize: 30, dropLast: true });
    assert.equal(drop.length, 3);
    assert.deepEqual([...drop].map(([x]) => x.shape[0]), [30, 30, 30]);
    // In order without shuffling, in the dataset's values.
    assert.deepEqual((await labelsOf(loader)).flat(), Array.from({ length: 100 }, (_, i) => i));
    const [first] = [...new data.DataLoader(rows(4, device), { batchSize: 3 })];
    await assertTensor(first[0], [0, 0, 1, 10, 2, 20], { shape: [3, 2] });
    assert.equal(new data.DataLoader(ds, { batchSize: 200, dropLast: true }).length, 0);
    assert.deepEqual([...new data.DataLoader(ds, { batchSize: 200, dropLast: true })], []);
    assert.throws(
      () => new data.DataLoader(ds, { batchSize: 0 }),
      /batchSize must be a positive integer, got 0/,
    );
  },
);

backendTest("shuffle: every row once per epoch, a new order each epoch", async (device) => {
  const loader = new data.DataLoader(rows(50, device), { batchSize: 8, shuffle: true, seed: 7 });
  const epochs: number[][] = [];
  for (let e = 0; e < 3; e++) {
    const batches = await labelsOf(loader);
    assert.deepEqual(batches.map((b) => b.length), [8, 8, 8, 8, 8, 8, 2]);
    const order = batches.flat();
    assert.deepEqual([...order].sort((a, b) => a - b), Array.from({ length: 50 }, (_, i) => i));
    epochs.push(order);
  }
  assert.notDeepEqual(epochs[0], epochs[1]);
  assert.notDeepEqual(epochs[1], epochs[2]);
  assert.notDeepEqual(epochs[0], Array.from({ length: 50 }, (_, i) => i));
  // Rows stay together: x's first column equals the label.
  for (const [x, y] of loader) {
    const xs = await x.data();
    const ys = await y.data();
    ys.forEach((label, i) => assert.equal(xs[2 * i], label));
  }
});

backendTest(
  "seed: the same seed gives the same epochs, another seed others; manualSeed without seed",
  async (device) => {
    const ds = rows(40, device);
    const epochsOf = async (
      loader: data.DataLoader<Tensor[]>,
    ) => [await labelsOf(loader), await labelsOf(loader)];
    const a = await epochsOf(new data.DataLoader(ds, { batchSize: 16, shuffle: true, seed: 123 }));
    const b = await epochsOf(new data.DataLoader(ds, { batchSize: 16, shuffle: true, seed: 123 }));
    const c = await epochsOf(new data.DataLoader(ds, { batchSize: 16, shuffle: true, seed: 124 }));
    assert.deepEqual(a, b);
    assert.notDeepEqual(a, c);
    manualSeed(9);
    const d = await epochsOf(new data.DataLoader(ds, { batchSize: 16, shuffle: true }));
    manualSeed(9);
    const e = await epochsOf(new data.DataLoader(ds, { batchSize: 16, shuffle: true }));
    assert.deepEqual(d, e);
    assert.notDeepEqual(d[0], d[1]);
  },
);

backendTest(
  "the TensorDataset fast path equals stacking rows with the default collate",
  async (device) => {
    const ds = new data.TensorDataset(randn([23, 3, 2], { device }), arange(0, 23, 1, { device }));
    // A plain Dataset over the same rows takes the generic path (get + stack).
    class Rows extends data.Dataset<Tensor[]> {
      get length() {
        return ds.length;
      }
      get(i: number) {
        return ds.get(i);
      }
    }
    for (const shuffle of [false, true]) {
      const fast = [...new data.DataLoader(ds, { batchSize: 5, shuffle, seed: 3 })];
      const slow = [...new data.DataLoader(new Rows(), { batchSize: 5, shuffle, seed: 3 })];
      assert.equal(fast.length, slow.length);
      for (let i = 0; i < fast.length; i++) {
        assert.deepEqual([...fast[i][0].shape], [...slow[i][0].shape]);
        assert.deepEqual(await fast[i][0].data(), await slow[i][0].data());
        assert.deepEqual(await fast[i][1].data(), await slow[i][1].data());
      }
    }
  },
);

backendTest("default collate of nested samples; custom collate", async (device) => {
  interface Sample {
    image: Tensor;
    label: number;
    weight: number;
    pair: [Tensor, boolean];
    name: string;
  }
  class Samples extends data.Dataset<Sample> {
    get length() {
      return 5;
    }
    get(i: number): Sample {
      return {
        image: tensor([[i, i + 0.5]], { device }),
        label: i,
        weight: i / 2,
        pair: [tensor([i], { device }), i % 2 === 0],
        name: `s${i}`,
      };
    }
  }
  const [batch] = new data.DataLoader(new Samples(), { batchSize: 3 });
  assert.deepEqual(Object.keys(batch), ["image", "label", "weight", "pair", "name"]);
  await assertTensor(batch.image, [0, 0.5, 1, 1.5, 2, 2.5], { shape: [3, 1, 2] });
  assert.equal(batch.label.dtype, "int32");
  await assertTensor(batch.label, [0, 1, 2]);
  assert.equal(batch.weight.dtype, "float32");
  await assertTensor(batch.weight, [0, 0.5, 1]);
  await assertTensor(batch.pair[0], [0, 1, 2], { shape: [3, 1] });
  await assertTensor(batch.pair[1], [1, 0, 1]);
  assert.deepEqual(batch.name, ["s0", "s1", "s2"]);

  const custom = new data.DataLoader(new Samples(), {
    batchSize: 2,
    collate: (samples) => samples.map((s) => s.name).join("+"),
  });
  assert.deepEqual([...custom], ["s0+s1", "s2+s3", "s4"]);

  assert.throws(
    () => data.defaultCollate([zeros([2]), zeros([3])]),
    /sample 0 has shape \[2\] but sample 1 has shape \[3\]/,
  );
  assert.throws(
    () => data.defaultCollate([[zeros([1])], [zeros([1]), 1]]),
    /array of length 1 but sample 1 is array of length 2/,
  );
  assert.throws(
    () => data.defaultCollate([{ a: 1 }, { b: 1 }]),
    /sample 1 does not have the keys of sample 0 \(a\)/,
  );
  assert.throws(() => data.defaultCollate([new Map()]), /samples must hold tensors.*got Map/);
  assert.throws(() => data.defaultCollate([]), /non-empty/);
});

backendTest(
  "device: batches arrive on the device, the next one copied ahead",
  async (device, devices) => {
    const target = devices[1];
    const ds = new data.TensorDataset(randn([10, 4], { device }), arange(0, 10, 1, { device }));
    await ds.tensors[0].data();
    const loader = new data.DataLoader(ds, { batchSize: 4, device: target });
    const batchBytes = 4 * 4 * 4 + 4 * 4;
    const it = loader[Symbol.iterator]();
    const start = target.memory().bytesInUse;
    const first = it.next().value as Tensor[];
    assert.ok(first.every((t) => t.device === target));
    // Batch 0 handed out and batch 1 already made on the target: two batches there.
    assert.ok(target.memory().bytesInUse - start >= 2 * batchBytes, "the next batch is prefetched");
    await assertTensor(first[1], [0, 1, 2, 3]);
    const rest = [...{ [Symbol.iterator]: () => it }] as Tensor[][];
    assert.deepEqual(rest.map(([x]) => x.shape[0]), [4, 2]);
    assert.deepEqual(
      Array.from(await rest[1][0].data()),
      Array.from(await ds.tensors[0].narrow(0, 8, 2).data()),
    );
    // Leaving early releases the prefetched batch nobody received.
    const it2 = loader[Symbol.iterator]();
    it2.next();
    const probe = zeros([1], { device: target });
    const held = target.memory().bytesInUse;
    it2.return!(undefined);
    await probe.data();
    assert.ok(target.memory().bytesInUse <= held - batchBytes, "prefetched batch released");
  },
);

backendTest(
  "a prefetched batch survives the tidy scope it was made in, and belongs to the next",
  async (device, devices) => {
    const target = devices[1];
    const ds = new data.TensorDataset(randn([9, 2], { device }));
    const loader = new data.DataLoader(ds, { batchSize: 3, device: target });
    const it = loader[Symbol.iterator]();
    const handed: Tensor[] = [];
    for (let i = 0; i < 3; i++) {
      tidy(() => {
        const [x] = it.next().value as Tensor[];
        handed.push(x);
        x.sum(); // used inside the scope
      });
      // The batch of this scope is released with it; the prefetched one is not.
      assert.ok(handed[i].storage.disposed, `batch ${i} released with its scope`);
    }
    assert.ok(it.next().done);
    // Without device: batches are made lazily, in the scope of the caller.
    const plain = new data.DataLoader(ds, { batchSize: 3 });
    const kept = tidy(() => [...plain]);
    assert.equal(kept.length, 3);
    await assertTensor(kept[2][0], Array.from(await ds.tensors[0].narrow(0, 6, 3).data()));
  },
);

backendTest("DataLoader over a custom Dataset of numbers", async (_device) => {
  class Squares extends data.Dataset<[number, number]> {
    get length() {
      return 7;
    }
    get(i: number): [number, number] {
      return [i, i * i];
    }
  }
  const batches = [...new data.DataLoader(new Squares(), { batchSize: 4 })];
  assert.equal(batches.length, 2);
  await assertTensor(batches[0][1], [0, 1, 4, 9]);
  await assertTensor(batches[1][0], [4, 5, 6]);
  assert.throws(
    () => new data.DataLoader({} as data.Dataset<number>),
    /length and a get\(index\) method/,
  );
});

Deno.test("DataLoader asks a TensorDataset or Subset subclass that overrides get() for each row", async () => {
  class Scaled extends data.TensorDataset {
    override get(i: number): Tensor[] {
      const [x, y] = super.get(i);
      return [x.mul(100), y];
    }
  }
  const ds = new Scaled(tensor([[1, 2], [3, 4], [5, 6]]), tensor([0, 1, 2], { dtype: "int32" }));
  const [x] = [...new data.DataLoader(ds, { batchSize: 3 })][0] as Tensor[];
  assert.deepEqual(await x.toArray(), [[100, 200], [300, 400], [500, 600]]);
  const [sub] = [
    ...new data.DataLoader(new data.Subset(ds, [2, 0]), { batchSize: 2 }),
  ][0] as Tensor[];
  assert.deepEqual(await sub.toArray(), [[500, 600], [100, 200]]);
  class Flipped extends data.Subset<Tensor[]> {
    override get(i: number): Tensor[] {
      return super.get(i).map((t) => t.neg());
    }
  }
  const plain = new data.TensorDataset(tensor([[1, 2], [3, 4]]));
  const [flipped] = [...new data.DataLoader(new Flipped(plain, [1, 0]), { batchSize: 2 })][0];
  assert.deepEqual(await flipped.toArray(), [[-3, -4], [-1, -2]]);
});

Deno.test("DataLoader names a dataset whose get() is async", () => {
  const ds = { length: 2, get: (i: number) => Promise.resolve(tensor([i])) };
  assert.throws(
    () => [...new data.DataLoader(ds as unknown as data.Dataset<Tensor>, { batchSize: 2 })],
    /DataLoader: Object.get\(0\) returned a Promise; the loader reads samples synchronously/,
  );
});
