/**
 * data.Subset and data.randomSplit: split sizes from counts and from
 * fractions equal to PyTorch 1.13's (tests/fixtures/torch_toolkit.json
 * `random_split`), a partition of the indices, seeding, batching a subset,
 * errors.
 */

import assert from "node:assert/strict";
import { arange, data, manualSeed, tensor } from "../mod.ts";
import { assertTensor, backendTest } from "./harness.ts";
import fixtures from "./fixtures/torch_toolkit.json" with { type: "json" };

/** A dataset of the numbers 0..n-1. */
class Range extends data.Dataset<number> {
  constructor(readonly n: number) {
    super();
  }
  get length(): number {
    return this.n;
  }
  get(i: number): number {
    if (i < 0 || i >= this.n) throw new RangeError(`index ${i}`);
    return i;
  }
}

for (const c of fixtures.random_split) {
  Deno.test(`randomSplit(${c.n}, [${c.lengths}]) gives PyTorch's sizes [${c.sizes}]`, () => {
    const parts = data.randomSplit(new Range(c.n), c.lengths, { seed: 0 });
    assert.deepEqual(parts.map((p) => p.length), c.sizes);
    // A partition: every sample once.
    const seen = parts.flatMap((p) => [...p]).sort((a, b) => a - b);
    assert.deepEqual(seen, Array.from({ length: c.n }, (_, i) => i));
  });
}

Deno.test("randomSplit: seeded, or drawn from manualSeed's stream; not the identity", () => {
  const a = data.randomSplit(new Range(50), [30, 20], { seed: 7 });
  const b = data.randomSplit(new Range(50), [30, 20], { seed: 7 });
  assert.deepEqual(a.map((s) => s.indices), b.map((s) => s.indices));
  const c = data.randomSplit(new Range(50), [30, 20], { seed: 8 });
  assert.notDeepEqual(a[0].indices, c[0].indices);
  assert.notDeepEqual([...a[0].indices], Array.from({ length: 30 }, (_, i) => i));
  manualSeed(3);
  const d = data.randomSplit(new Range(50), [0.5, 0.5]);
  manualSeed(3);
  const e = data.randomSplit(new Range(50), [0.5, 0.5]);
  assert.deepEqual(d[1].indices, e[1].indices);
});

backendTest(
  "Subset of a TensorDataset: get, negative indices, DataLoader batches",
  async (device) => {
    const x = tensor(Array.from({ length: 6 }, (_, i) => [i, 10 * i]), { device });
    const y = arange(0, 6, 1, { device });
    const subset = new data.Subset(new data.TensorDataset(x, y), [4, 0, -1]);
    assert.equal(subset.length, 3);
    await assertTensor(subset.get(0)[0], [4, 40]);
    await assertTensor(subset.get(-1)[1], [5]);
    const batches = [...new data.DataLoader(subset, { batchSize: 2 })];
    assert.equal(batches.length, 2);
    await assertTensor(batches[0][0], [4, 40, 0, 0], { shape: [2, 2] });
    await assertTensor(batches[1][1], [5], { shape: [1] });
    // Subsets of subsets, as randomSplit of a split.
    const [inner] = data.randomSplit(subset, [1, 2], { seed: 1 });
    assert.ok(inner.dataset === subset && inner.length === 1);
  },
);

Deno.test("Subset and randomSplit errors name the index, the sizes and the lengths", () => {
  assert.throws(
    () => new data.Subset(new Range(3), [0, 3]),
    /indices\[1\] = 3 is not an index of a dataset of 3 samples/,
  );
  assert.throws(() => new data.Subset(new Range(3), [1.5]), /indices\[0\] = 1.5/);
  assert.throws(
    () => new data.Subset(new Range(3), [0]).get(1),
    /index 1 is out of range for 1 samples/,
  );
  assert.throws(
    () => data.randomSplit(new Range(10), [3, 6]),
    /sum of input lengths \(9\) does not equal the length of the input dataset \(10\)/,
  );
  assert.throws(
    () => data.randomSplit(new Range(10), [0.5, 0.4]),
    /lengths\[0\] = 0.5 is neither a non-negative count nor part of fractions summing to 1/,
  );
  assert.throws(
    () => data.randomSplit(new Range(10), [1.5, -0.5]),
    /fraction at index 0 is not between 0 and 1/,
  );
  assert.throws(() => data.randomSplit(new Range(10), []), /lengths must be a non-empty array/);
  assert.throws(
    () => data.randomSplit({} as data.Dataset<number>, [1]),
    /dataset must have a length and a get\(index\) method/,
  );
});

backendTest(
  "DataLoader over splits of splits: every row once, batched by index",
  async (device) => {
    const n = 40;
    const x = tensor(Array.from({ length: n }, (_, i) => [i, -i]), { device });
    const y = arange(0, n, 1, { device });
    const [train, rest] = data.randomSplit(new data.TensorDataset(x, y), [0.75, 0.25], { seed: 4 });
    const [inner] = data.randomSplit(train, [20, 10], { seed: 5 });
    const expected = inner.indices.map((i) => train.indices[i]).sort((a, b) => a - b);
    const seen: number[] = [];
    for (const [xb, yb] of new data.DataLoader(inner, { batchSize: 6, shuffle: true, seed: 2 })) {
      const labels = Array.from(await yb.data());
      // Rows stay whole: column 1 is minus column 0.
      const rows = Array.from(await xb.data());
      labels.forEach((label, r) => {
        assert.equal(rows[2 * r], label);
        assert.equal(rows[2 * r + 1], -label);
      });
      seen.push(...labels);
    }
    assert.deepEqual(seen.sort((a, b) => a - b), expected);
    assert.equal(rest.length, 10);
  },
);
