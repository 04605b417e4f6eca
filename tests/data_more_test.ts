/**
 * data: the samplers (Sequential, Random, SubsetRandom, WeightedRandom,
 * Batch), ConcatDataset, IterableDataset and ChainDataset, and DataLoader's
 * `batchSampler` option and iterable-dataset batching. Deterministic
 * results and error conditions against PyTorch 1.13
 * (tests/fixtures/torch_data_more.json); random samplers by their
 * invariants and statistics at fixed seeds (torch's generator is not ours).
 */

import assert from "node:assert/strict";
import { data, type Device, manualSeed, type Tensor, tensor } from "../mod.ts";
import { backendTest } from "./harness.ts";
import fixtures from "./fixtures/torch_data_more.json" with { type: "json" };

/** Sample i is [tag, i], as the fixture's `Tagged`. */
class Tagged extends data.Dataset<number[]> {
  constructor(readonly tag: number, readonly n: number) {
    super();
  }
  get length(): number {
    return this.n;
  }
  get(i: number): number[] {
    if (!(i >= 0 && i < this.n)) throw new RangeError(`Tagged: index ${i}`);
    return [this.tag, i];
  }
}

/** Sample i is i², as the fixture's `Squares`. */
class Squares extends data.Dataset<number> {
  get length(): number {
    return 8;
  }
  get(i: number): number {
    return i * i;
  }
}

/** The integers start .. end - 1 as a stream, with a length. */
class Span extends data.IterableDataset<number> {
  constructor(readonly start: number, readonly end: number) {
    super();
  }
  get length(): number {
    return this.end - this.start;
  }
  *[Symbol.iterator](): Iterator<number> {
    for (let i = this.start; i < this.end; i++) yield i;
  }
}

/** A stream without a length. */
class Unsized extends data.IterableDataset<number> {
  *[Symbol.iterator](): Iterator<number> {
    yield* [0, 1, 2];
  }
}

async function batchesOf(loader: Iterable<Tensor>, device?: Device): Promise<number[][]> {
  const out: number[][] = [];
  for (const b of loader) {
    if (device) assert.equal(b.device, device);
    out.push(Array.from(await b.data()));
    b.dispose();
  }
  return out;
}

const range = (n: number) => ({
  length: n,
  *[Symbol.iterator]() {
    for (let i = 0; i < n; i++) yield i;
  },
});

// ---------------------------------------------------------------- fixtures

Deno.test("BatchSampler: PyTorch's batches and lengths", () => {
  for (const c of fixtures.batch_sampler) {
    const source = "indices" in c && c.indices
      ? c.indices
      : new data.SequentialSampler(range(c.n as number));
    const s = new data.BatchSampler(source, c.batch_size, c.drop_last);
    const label = JSON.stringify({ ...c, batches: undefined });
    assert.deepEqual([...s], c.batches, label);
    assert.equal(s.length, c.length, label);
    // A second epoch gives the same batches (the sampler is re-iterated).
    assert.deepEqual([...s], c.batches, label);
  }
});

Deno.test("ConcatDataset: cumulative sizes, index mapping (negative, empty parts), errors", () => {
  for (const c of fixtures.concat) {
    const ds = new data.ConcatDataset(c.sizes.map((n, k) => new Tagged(k, n)));
    assert.deepEqual(ds.cumulativeSizes, c.cumulative_sizes, `sizes ${c.sizes}`);
    assert.equal(ds.length, c.length);
    for (const [i, sample] of Object.entries(c.mapping)) {
      assert.deepEqual(ds.get(Number(i)), sample, `sizes ${c.sizes}, index ${i}`);
    }
    // PyTorch: IndexError past the end, ValueError before the start; both name index and length here.
    for (const [i, err] of Object.entries(c.errors)) {
      assert.ok(err !== null, `torch refuses index ${i}`);
      assert.throws(
        () => ds.get(Number(i)),
        (e: Error) =>
          e instanceof RangeError &&
          e.message.includes(`index ${i} is out of range for a dataset of length ${c.length}`),
      );
    }
  }
  // Through a DataLoader (the per-sample path), in order.
  const ds = new data.ConcatDataset([new Tagged(0, 2), new Tagged(1, 0), new Tagged(2, 3)]);
  const loader = new data.DataLoader(ds, { batchSize: 4, collate: (s) => s });
  assert.deepEqual([...loader], [[[0, 0], [0, 1], [2, 0], [2, 1]], [[2, 2]]]);
  assert.deepEqual(ds.locate(-1), { dataset: 2, index: 2 });
  assert.throws(() => ds.get(1.5), /index 1.5 is out of range/);
});

backendTest(
  "DataLoader over an IterableDataset / ChainDataset: PyTorch's batches",
  async (device) => {
    for (const c of fixtures.iterable.cases) {
      const ds = c.kind === "span"
        ? new Span(c.start!, c.end!)
        : new data.ChainDataset(c.spans!.map(([a, b]) => new Span(a, b)));
      const loader = new data.DataLoader(ds, {
        batchSize: c.batch_size,
        dropLast: c.drop_last,
        device,
      });
      const label = JSON.stringify({ ...c, batches: undefined });
      assert.deepEqual(await batchesOf(loader, device), c.batches, label);
      assert.equal(loader.length, c.length, label);
      // Each iteration is a new pass over the stream.
      assert.deepEqual(await batchesOf(loader), c.batches, label);
    }
    const chain = new data.ChainDataset(
      [[0, 3], [10, 15], [20, 20], [30, 32]].map(([a, b]) => new Span(a, b)),
    );
    assert.deepEqual([...chain], fixtures.iterable.chain_items);
    assert.equal(chain.length, fixtures.iterable.chain_length);
    // A custom collate sees the streamed samples; leaving early is fine.
    const firsts: number[][] = [];
    for (const b of new data.DataLoader(chain, { batchSize: 3, collate: (s) => s })) {
      firsts.push(b);
      if (firsts.length === 2) break;
    }
    assert.deepEqual(firsts, [[0, 1, 2], [10, 11, 12]]);
  },
);

backendTest(
  "DataLoader batchSampler and sampler: PyTorch's batches and lengths",
  async (device) => {
    const ds = new Squares();
    const f = fixtures.sampler_loader;
    const seq = new data.SequentialSampler(ds);
    let loader = new data.DataLoader(ds, {
      batchSampler: new data.BatchSampler(seq, 3, false),
      device,
    });
    assert.deepEqual(await batchesOf(loader, device), f.batch_sampler_sequential.batches);
    assert.equal(loader.length, f.batch_sampler_sequential.length);
    loader = new data.DataLoader(ds, { batchSampler: new data.BatchSampler(seq, 3, true), device });
    assert.deepEqual(await batchesOf(loader, device), f.batch_sampler_drop.batches);
    assert.equal(loader.length, f.batch_sampler_drop.length);
    loader = new data.DataLoader(ds, { batchSampler: f.batch_sampler_lists.batch_sampler, device });
    assert.deepEqual(await batchesOf(loader, device), f.batch_sampler_lists.batches);
    assert.equal(loader.length, f.batch_sampler_lists.length);
    // batchSize 1 is the default, so naming it is allowed.
    loader = new data.DataLoader(ds, {
      batchSize: 1,
      batchSampler: f.batch_sampler_lists.batch_sampler,
    });
    assert.deepEqual(await batchesOf(loader), f.batch_sampler_batch_size_1.batches);
    loader = new data.DataLoader(ds, { sampler: seq, batchSize: 3, dropLast: true, device });
    assert.deepEqual(await batchesOf(loader, device), f.sequential_sampler.batches);
    assert.equal(loader.length, f.sequential_sampler.length);

    // A batch sampler over a TensorDataset goes through the gather path.
    const x = tensor([[0, 0], [1, 10], [2, 20], [3, 30], [4, 40]], { device });
    const rows = new data.DataLoader(new data.TensorDataset(x), { batchSampler: [[4, 0], [2]] });
    const got: number[][] = [];
    for (const [b] of rows) got.push(Array.from(await b.data()));
    assert.deepEqual(got, [[4, 40, 0, 0], [2, 20]]);
  },
);

Deno.test("sampler lengths as PyTorch's", () => {
  const ds = new Squares();
  const want = fixtures.sampler_loader.lengths;
  assert.equal(new data.RandomSampler(ds).length, want.random_default);
  assert.equal(new data.RandomSampler(ds, { numSamples: 20 }).length, want.random_num_samples_20);
  assert.equal(
    new data.RandomSampler(ds, { replacement: true, numSamples: 5 }).length,
    want.random_replacement_5,
  );
  assert.equal(new data.SubsetRandomSampler([4, 1, 7]).length, want.subset_random);
  assert.equal(new data.WeightedRandomSampler([1, 2], 6).length, want.weighted_6);
  assert.equal(new data.SequentialSampler(ds).length, want.sequential);
  assert.deepEqual([...new data.SequentialSampler(ds)], [0, 1, 2, 3, 4, 5, 6, 7]);
  assert.deepEqual([...new data.SequentialSampler({ length: 0 })], []);
});

/** The calls of the fixture's error cases, in multigrad spelling. */
function errorCalls(): Record<
  string,
  { call: () => unknown; names: RegExp; kind: ErrorConstructor }
> {
  const ds = new Squares();
  const it = new Span(0, 5);
  const seq = new data.SequentialSampler(ds);
  const bs = new data.BatchSampler(seq, 2, false);
  const loaderExclusive =
    /batchSampler option is mutually exclusive with batchSize, shuffle, sampler, and dropLast/;
  const bad = (v: unknown) => v as never;
  return {
    loader_batch_sampler_batch_size: {
      call: () => new data.DataLoader(ds, { batchSize: 2, batchSampler: bs }),
      names: new RegExp(`${loaderExclusive.source} \\(got batchSize=2\\)`),
      kind: RangeError,
    },
    loader_batch_sampler_shuffle: {
      call: () => new data.DataLoader(ds, { shuffle: true, batchSampler: bs }),
      names: new RegExp(`${loaderExclusive.source} \\(got shuffle=true\\)`),
      kind: RangeError,
    },
    loader_batch_sampler_sampler: {
      call: () => new data.DataLoader(ds, { sampler: seq, batchSampler: bs }),
      names: new RegExp(`${loaderExclusive.source} \\(got a sampler\\)`),
      kind: RangeError,
    },
    loader_batch_sampler_drop_last: {
      call: () => new data.DataLoader(ds, { dropLast: true, batchSampler: bs }),
      names: new RegExp(`${loaderExclusive.source} \\(got dropLast=true\\)`),
      kind: RangeError,
    },
    loader_sampler_shuffle: {
      call: () => new data.DataLoader(ds, { sampler: seq, shuffle: true }),
      names: /sampler and shuffle are mutually exclusive/,
      kind: RangeError,
    },
    loader_iterable_shuffle: {
      call: () => new data.DataLoader(it, { shuffle: true }),
      names:
        /DataLoader with IterableDataset: expected unspecified shuffle option, but got shuffle=true/,
      kind: RangeError,
    },
    loader_iterable_sampler: {
      call: () => new data.DataLoader(it, { sampler: seq }),
      names: /expected unspecified sampler option, but got sampler=SequentialSampler/,
      kind: RangeError,
    },
    loader_iterable_batch_sampler: {
      call: () => new data.DataLoader(it, { batchSampler: bs }),
      names: /expected unspecified batchSampler option, but got batchSampler=BatchSampler/,
      kind: RangeError,
    },
    batch_sampler_size_0: {
      call: () => new data.BatchSampler(seq, 0, false),
      names: /batchSize should be a positive integer value, but got batchSize=0/,
      kind: RangeError,
    },
    batch_sampler_size_negative: {
      call: () => new data.BatchSampler(seq, -1, false),
      names: /but got batchSize=-1/,
      kind: RangeError,
    },
    batch_sampler_size_fraction: {
      call: () => new data.BatchSampler(seq, 2.5, false),
      names: /but got batchSize=2.5/,
      kind: RangeError,
    },
    batch_sampler_size_bool: {
      call: () => new data.BatchSampler(seq, bad(true), false),
      names: /but got batchSize=true/,
      kind: RangeError,
    },
    batch_sampler_drop_last_int: {
      call: () => new data.BatchSampler(seq, 2, bad(1)),
      names: /dropLast should be a boolean value, but got dropLast=1/,
      kind: RangeError,
    },
    random_replacement_int: {
      call: () => new data.RandomSampler(ds, { replacement: bad(1) }),
      names: /replacement should be a boolean value, but got replacement=1/,
      kind: TypeError,
    },
    random_num_samples_0: {
      call: () => new data.RandomSampler(ds, { numSamples: 0 }),
      names: /numSamples should be a positive integer value, but got numSamples=0/,
      kind: RangeError,
    },
    random_num_samples_negative: {
      call: () => new data.RandomSampler(ds, { numSamples: -3 }),
      names: /but got numSamples=-3/,
      kind: RangeError,
    },
    random_empty_dataset: {
      call: () => new data.RandomSampler({ length: 0 }),
      names: /but got numSamples=0/,
      kind: RangeError,
    },
    weighted_num_samples_0: {
      call: () => new data.WeightedRandomSampler([1], 0),
      names: /numSamples should be a positive integer value, but got numSamples=0/,
      kind: RangeError,
    },
    weighted_replacement_int: {
      call: () => new data.WeightedRandomSampler([1], 1, { replacement: bad(0) }),
      names: /replacement should be a boolean value, but got replacement=0/,
      kind: RangeError,
    },
    weighted_2d: {
      call: () => new data.WeightedRandomSampler(bad([[1, 2]]), 1),
      names: /1-d sequence of numbers, but weights\[0\] is an array/,
      kind: RangeError,
    },
    weighted_negative: {
      call: () => new data.WeightedRandomSampler([1, -0.5, 2], 3),
      names: /weights\[1\] = -0.5; weights must be >= 0/,
      kind: RangeError,
    },
    weighted_nan: {
      call: () => new data.WeightedRandomSampler([1, NaN], 3),
      names: /weights\[1\] = NaN; weights must be finite/,
      kind: RangeError,
    },
    weighted_inf: {
      call: () => new data.WeightedRandomSampler([1, Infinity], 3),
      names: /weights\[1\] = Infinity; weights must be finite/,
      kind: RangeError,
    },
    weighted_all_zero: {
      call: () => new data.WeightedRandomSampler([0, 0, 0], 3),
      names: /the 3 weights sum to 0; at least one must be positive/,
      kind: RangeError,
    },
    weighted_too_many: {
      call: () => new data.WeightedRandomSampler([1, 2], 3, { replacement: false }),
      names: /cannot draw numSamples=3 indices without replacement from 2 weights/,
      kind: RangeError,
    },
    concat_empty: {
      call: () => new data.ConcatDataset([]),
      names: /datasets should not be empty/,
      kind: RangeError,
    },
    concat_iterable: {
      call: () => new data.ConcatDataset([ds, bad(it)]),
      names: /does not support IterableDataset \(datasets\[1\] is Span/,
      kind: TypeError,
    },
    chain_map_style: {
      call: () => new data.ChainDataset([it, bad(ds)]),
      names: /only supports IterableDataset, but datasets\[1\] is Squares/,
      kind: TypeError,
    },
    loader_batch_sampler_empty_batch: {
      call: () => [
        ...new data.DataLoader(new data.TensorDataset(tensor([0, 1, 2, 3])), {
          batchSampler: [[0, 1], []],
        }),
      ],
      names: /the batchSampler gave an empty batch \(batch 1\)/,
      kind: RangeError,
    },
    len_iterable_unsized: {
      call: () => new data.DataLoader(new Unsized()).length,
      names: /the IterableDataset Unsized has no length/,
      kind: TypeError,
    },
    len_chain_unsized: {
      call: () => new data.ChainDataset([it, new Unsized()]).length,
      names: /datasets\[1\] \(Unsized\) has no length/,
      kind: TypeError,
    },
  };
}

Deno.test("errors where PyTorch raises, naming the bad value", () => {
  const calls = errorCalls();
  const errors = fixtures.errors as Record<string, { type: string; message: string } | null>;
  for (const [name, { call, names, kind }] of Object.entries(calls)) {
    const torch = errors[name];
    assert.ok(torch, `${name}: torch raises`);
    assert.throws(call, (e: Error) => {
      assert.ok(e instanceof kind, `${name}: ${e.constructor.name} (${e.message})`);
      assert.match(e.message, names, name);
      return true;
    });
  }
  // Every torch error case is covered.
  for (const [name, err] of Object.entries(errors)) {
    if (err !== null) assert.ok(name in calls, `fixture case ${name} is tested`);
  }
  // Where torch accepts: shuffle false with a stream.
  assert.equal(errors.loader_iterable_shuffle_false, null);
  assert.equal(new data.DataLoader(new Span(0, 3), { shuffle: false }).length, 3);
  // A bad index from a batch sampler names the batch and position.
  const loader = new data.DataLoader(new Squares(), { batchSampler: [[0, 1], [2, 8]] });
  assert.throws(
    () => [...loader],
    /gave index 8 \(position 1 of batch 1\), outside the dataset's 8/,
  );
});

// ---------------------------------------------------------------- random samplers

Deno.test("RandomSampler: each index once per epoch; chains permutations past the length", () => {
  const s = new data.RandomSampler({ length: 50 }, { seed: 3 });
  const epochs = [[...s], [...s], [...s]];
  for (const e of epochs) {
    assert.equal(e.length, 50);
    assert.deepEqual([...e].sort((a, b) => a - b), Array.from({ length: 50 }, (_, i) => i));
  }
  // A new order every epoch, not the identity.
  assert.notDeepEqual(epochs[0], epochs[1]);
  assert.notDeepEqual(epochs[0], [...new data.SequentialSampler({ length: 50 })]);
  // numSamples above the length: whole permutations, then part of one, as PyTorch 1.13.
  const chained = [...new data.RandomSampler({ length: 5 }, { numSamples: 12, seed: 1 })];
  const f = fixtures.sampler_loader;
  assert.equal(chained.length, 12);
  assert.deepEqual([...chained.slice(0, 5)].sort(), f.random_chained_first_five_sorted);
  assert.deepEqual([...chained.slice(5, 10)].sort(), f.random_chained_next_five_sorted);
  const counts = [0, 1, 2, 3, 4].map((i) => chained.filter((v) => v === i).length);
  assert.deepEqual([...counts].sort(), [...f.random_chained_counts].sort());
  // Fewer than the length: distinct indices.
  const few = [...new data.RandomSampler({ length: 9 }, { numSamples: 4, seed: 2 })];
  assert.equal(new Set(few).size, 4);
});

Deno.test("RandomSampler: reproducible by seed, by manualSeed, or by a shared generator", () => {
  const draw = (options: data.RandomSamplerOptions) => {
    const s = new data.RandomSampler({ length: 20 }, options);
    return [[...s], [...s]];
  };
  assert.deepEqual(draw({ seed: 7 }), draw({ seed: 7 }));
  assert.notDeepEqual(draw({ seed: 7 }), draw({ seed: 8 }));
  manualSeed(11);
  const a = draw({});
  manualSeed(11);
  assert.deepEqual(draw({}), a);
  assert.notDeepEqual(a[0], a[1]);
  let state = 0;
  const generator = () => (state = (state * 9301 + 49297) % 233280) / 233280;
  const g1 = draw({ generator });
  state = 0;
  assert.deepEqual(draw({ generator }), g1);
  assert.deepEqual(draw({ replacement: true, seed: 4 }), draw({ replacement: true, seed: 4 }));
  // Every index reached in range, with repeats, when drawing with replacement.
  const many = [
    ...new data.RandomSampler({ length: 6 }, { replacement: true, numSamples: 600, seed: 5 }),
  ];
  assert.equal(many.length, 600);
  assert.ok(many.every((i) => Number.isInteger(i) && i >= 0 && i < 6));
  assert.equal(new Set(many).size, 6);
  assert.ok(chiSquare(countsOf(many, 6), [1, 1, 1, 1, 1, 1]) < 20.5, "uniform draws");
  assert.throws(
    () => new data.RandomSampler({ length: 3 }, { seed: 1, generator }),
    /pass seed or generator, not both/,
  );
  assert.throws(
    () => new data.RandomSampler({ length: 3 }, { seed: NaN }),
    /seed must be a finite number, got NaN/,
  );
  assert.throws(
    () => new data.RandomSampler(bad({ length: -1 })),
    /non-negative integer length, got -1/,
  );
});

function bad(v: unknown): never {
  return v as never;
}

function countsOf(draws: number[], n: number): number[] {
  const counts = new Array(n).fill(0);
  for (const d of draws) counts[d]++;
  return counts;
}

/** Pearson's statistic of `counts` against the distribution `weights`. */
function chiSquare(counts: number[], weights: number[]): number {
  const total = counts.reduce((a, b) => a + b, 0);
  const sum = weights.reduce((a, b) => a + b, 0);
  let x = 0;
  counts.forEach((c, i) => {
    const expected = total * weights[i] / sum;
    if (expected > 0) x += (c - expected) ** 2 / expected;
    else assert.equal(c, 0, `index ${i} has weight 0 but was drawn ${c} times`);
  });
  return x;
}

Deno.test("SubsetRandomSampler: the given indices once each, a new order per epoch", () => {
  const indices = [12, 3, 40, 7, 7, 25, 0, 31];
  const s = new data.SubsetRandomSampler(indices, { seed: 9 });
  const e1 = [...s];
  const e2 = [...s];
  const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
  assert.deepEqual(sorted(e1), sorted(indices));
  assert.deepEqual(sorted(e2), sorted(indices));
  assert.notDeepEqual(e1, e2);
  assert.deepEqual([...new data.SubsetRandomSampler(indices, { seed: 9 })], e1);
  assert.deepEqual([...new data.SubsetRandomSampler([])], []);
  assert.throws(
    () => new data.SubsetRandomSampler([1, 2.5]),
    /indices\[1\] = 2.5 is not an integer/,
  );
  // As a DataLoader sampler: only the subset's rows.
  const loader = new data.DataLoader(new Squares(), {
    sampler: new data.SubsetRandomSampler([1, 3, 5], { seed: 0 }),
    batchSize: 3,
    collate: (b) => b,
  });
  assert.deepEqual([...[...loader][0]].sort((a, b) => a - b), [1, 9, 25]);
});

Deno.test("WeightedRandomSampler: counts follow the weights (chi-square), zero weights never drawn", () => {
  const weights = [0.1, 0.9, 0.4, 0.7, 3.0, 0.6, 0];
  const s = new data.WeightedRandomSampler(weights, 20000, { seed: 123 });
  const draws = [...s];
  assert.equal(draws.length, 20000);
  // 5 degrees of freedom (the zero weight is checked separately): the 99.9% point is 20.52.
  const x = chiSquare(countsOf(draws, weights.length), weights);
  assert.ok(x < 20.52, `chi-square ${x}`);
  // A stub drawing uniformly is far off.
  const uniform = countsOf(Array.from({ length: 20000 }, (_, i) => i % 6), 7);
  assert.ok(chiSquare(uniform, weights) > 1000);
  // Reproducible, and a new draw per epoch.
  assert.deepEqual([...new data.WeightedRandomSampler(weights, 50, { seed: 1 })], [
    ...new data.WeightedRandomSampler(weights, 50, { seed: 1 }),
  ]);
  const twice = new data.WeightedRandomSampler(weights, 50, { seed: 1 });
  assert.notDeepEqual([...twice], [...twice]);
  manualSeed(5);
  const a = [...new data.WeightedRandomSampler(weights, 30)];
  manualSeed(5);
  assert.deepEqual([...new data.WeightedRandomSampler(weights, 30)], a);
  // Typed arrays are accepted; the weights are kept as float64.
  const typed = new data.WeightedRandomSampler(new Float32Array([1, 3]), 4);
  assert.ok(typed.weights instanceof Float64Array);
  assert.deepEqual(Array.from(typed.weights), [1, 3]);
});

Deno.test("WeightedRandomSampler without replacement: distinct, first draw by weight, zeros last", () => {
  const weights = [1, 2, 3, 4];
  const firsts = [0, 0, 0, 0];
  const s = new data.WeightedRandomSampler(weights, 4, { replacement: false, seed: 42 });
  for (let e = 0; e < 8000; e++) {
    const epoch = [...s];
    assert.equal(new Set(epoch).size, 4);
    firsts[epoch[0]]++;
  }
  // The first draw of an epoch is one weighted draw: 3 degrees of freedom, 99.9% point 16.27.
  const x = chiSquare(firsts, weights);
  assert.ok(x < 16.27, `chi-square ${x} (${firsts})`);
  // Second draw given the first: P(second = 3 | first = 0) = 4 / 9.
  let after0 = 0;
  let then3 = 0;
  const t = new data.WeightedRandomSampler(weights, 2, { replacement: false, seed: 7 });
  for (let e = 0; e < 20000; e++) {
    const [a, b] = [...t];
    if (a === 0) {
      after0++;
      if (b === 3) then3++;
    }
  }
  const p = then3 / after0;
  const sd = Math.sqrt((4 / 9) * (5 / 9) / after0);
  assert.ok(Math.abs(p - 4 / 9) < 4 * sd, `P(3 | 0) = ${p} over ${after0}`);
  // Zero weights come after every positive one (as PyTorch; the fixture's case).
  const zeros = [
    ...new data.WeightedRandomSampler([0, 1, 0, 1], 4, { replacement: false, seed: 3 }),
  ];
  const want = fixtures.sampler_loader.weighted_zero_last;
  assert.deepEqual([zeros.slice(0, 2).sort(), zeros.slice(2).sort()], want);
  assert.equal(fixtures.errors.weighted_too_few_nonzero, null);
});

backendTest(
  "DataLoader with RandomSampler / WeightedRandomSampler / BatchSampler of them",
  async (device) => {
    const x = tensor(Array.from({ length: 10 }, (_, i) => [i, 10 * i]), { device });
    const ds = new data.TensorDataset(x);
    const sampler = new data.RandomSampler(ds, { seed: 1 });
    const loader = new data.DataLoader(ds, { sampler, batchSize: 4 });
    assert.equal(loader.length, 3);
    const seen: number[] = [];
    for (const [b] of loader) {
      const v = Array.from(await b.data());
      for (let i = 0; i < v.length; i += 2) {
        assert.equal(v[i + 1], 10 * v[i]);
        seen.push(v[i]);
      }
    }
    assert.deepEqual(seen.sort((a, b) => a - b), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    const weighted = new data.WeightedRandomSampler([0, 0, 1, 0, 0, 0, 0, 0, 0, 1], 6, { seed: 2 });
    const byBatch = new data.DataLoader(ds, {
      batchSampler: new data.BatchSampler(weighted, 4, false),
    });
    assert.equal(byBatch.length, 2);
    const rows: number[] = [];
    for (const [b] of byBatch) {
      rows.push(
        ...Array.from(await b.data()).filter((_, i) => i % 2 === 0),
      );
    }
    assert.equal(rows.length, 6);
    assert.ok(rows.every((r) => r === 2 || r === 9), `${rows}`);
  },
);

Deno.test("existing DataLoader paths keep their behaviour with the new options unset", () => {
  // A one-shot batch sampler has no length, as a one-shot sampler.
  const oneShot = (function* () {
    yield [0, 1];
  })();
  const loader = new data.DataLoader(new Squares(), { batchSampler: oneShot, collate: (b) => b });
  assert.throws(() => loader.length, /batchSampler is a one-shot iterator without a length/);
  assert.deepEqual([...loader], [[0, 1]]);
  assert.throws(
    () => new data.BatchSampler(bad(5), 2, false),
    /sampler must be an iterable of indices, got number/,
  );
  assert.throws(
    () => new data.BatchSampler(new Unsized(), 2, false).length,
    /the sampler has no length/,
  );
});

// ---------------------------------------------------------------- review regressions

/** The integers from 0 up, forever, logging each read and the close (`finally`). */
class Logged extends data.IterableDataset<number> {
  readonly log: (number | string)[] = [];
  *[Symbol.iterator](): Iterator<number> {
    try {
      for (let i = 0;; i++) {
        this.log.push(i);
        yield i;
      }
    } finally {
      this.log.push("closed");
    }
  }
}

backendTest(
  "DataLoader reads a stream one batch per step and closes it when the loop leaves early",
  async (device) => {
    // As PyTorch 1.13 (its generator closes when the loop drops it): 2 batches read, then closed.
    const want = fixtures.iterable.stream_steps;
    const plain = new Logged();
    const got: number[][] = [];
    const reads: number[] = [];
    for (const b of new data.DataLoader(plain, { batchSize: want.batch_size })) {
      got.push(Array.from(await b.data()));
      b.dispose();
      reads.push(plain.log.length);
      if (got.length === 2) break;
    }
    assert.deepEqual(got, [[0, 1, 2], [3, 4, 5]]);
    assert.deepEqual(reads, want.reads_after_each_batch, `read ahead: ${plain.log}`);
    assert.deepEqual(plain.log, want.log_after_break);
    // Prefetching to a device reads one batch ahead (that is its point), and still closes.
    const ahead = new Logged();
    const base = device.memory().bytesInUse;
    let n = 0;
    for (const b of new data.DataLoader(ahead, { batchSize: 2, device })) {
      b.dispose();
      if (++n === 2) break;
    }
    assert.deepEqual(ahead.log, [0, 1, 2, 3, 4, 5, "closed"]);
    // The prefetched third batch was released.
    assert.equal(device.memory().bytesInUse, base);
    // A user error in the loop closes it too.
    const thrown = new Logged();
    assert.throws(() => {
      for (const _ of new data.DataLoader(thrown, { batchSize: 2, collate: (s) => s })) {
        throw new Error("user");
      }
    }, /user/);
    assert.deepEqual(thrown.log, [0, 1, "closed"]);
    // A batch sampler is asked for one batch per step as well.
    const asked: number[] = [];
    const batches = {
      *[Symbol.iterator]() {
        for (let b = 0; b < 4; b++) {
          asked.push(b);
          yield [b];
        }
      },
    };
    for (
      const _ of new data.DataLoader(new Squares(), {
        batchSampler: batches,
        collate: (s) => s,
      })
    ) {
      assert.equal(asked.length, 1);
      break;
    }
  },
);

Deno.test("SubsetRandomSampler and Subset refuse a Tensor of indices (it read as no indices)", () => {
  const idx = tensor([3, 1, 2], { dtype: "int32" });
  assert.throws(
    () => new data.SubsetRandomSampler(bad(idx)),
    (e: Error) =>
      e instanceof TypeError &&
      /got Tensor; for a Tensor pass \(await t\.toArray\(\)\)/.test(e.message),
  );
  assert.throws(
    () => new data.Subset(new Squares(), bad(idx)),
    (e: Error) => e instanceof TypeError && /Subset: indices must be .* got Tensor/.test(e.message),
  );
  assert.throws(() => new data.SubsetRandomSampler(bad({})), /got Object/);
  // Iterables and array-likes still work.
  assert.equal(new data.SubsetRandomSampler(new Set([4, 2])).length, 2);
  assert.equal(new data.Subset(new Squares(), new Int32Array([1, 0])).length, 2);
});

Deno.test("DataLoader: async streams and empty batches are refused by name", () => {
  class AsyncOnly {
    async *[Symbol.asyncIterator]() {
      yield 1;
    }
  }
  Object.setPrototypeOf(AsyncOnly.prototype, data.IterableDataset.prototype);
  assert.throws(
    () => new data.DataLoader(bad(new AsyncOnly())),
    (e: Error) =>
      e instanceof TypeError &&
      /IterableDataset AsyncOnly has no \[Symbol.iterator\]\(\) \(an async iterable\?\)/.test(
        e.message,
      ),
  );
  class Promises extends data.IterableDataset<Promise<number>> {
    *[Symbol.iterator]() {
      yield Promise.resolve(1);
    }
  }
  assert.throws(
    () => [...new data.DataLoader(new Promises(), { collate: (s) => s })],
    /Promises\.\[Symbol.iterator\]\(\) yielded a Promise/,
  );
  // PyTorch's default_collate raises on an empty batch; the gather path made an empty one.
  const ds = new data.TensorDataset(tensor([0, 1, 2, 3]));
  for (const d of [ds, new Squares()] as data.Dataset<unknown>[]) {
    assert.throws(
      () => [...new data.DataLoader(d, { batchSampler: [[0, 1], []] })],
      (e: Error) => e instanceof RangeError && /gave an empty batch \(batch 1\)/.test(e.message),
    );
  }
  // A custom collate gets it, as PyTorch's.
  const custom = [
    ...new data.DataLoader(ds, { batchSampler: [[1], []], collate: (s) => s.length }),
  ];
  assert.deepEqual(custom, [1, 0]);
});

Deno.test("WeightedRandomSampler: weights near the float64 limits draw by their ratios", () => {
  // The sum of 1e308s overflowed to Infinity, so every draw went to the last index (the weight 1).
  const huge = countsOf(
    [...new data.WeightedRandomSampler([1e308, 1e308, 1], 4000, { seed: 1 })],
    3,
  );
  assert.equal(huge[2], 0, `${huge}`);
  assert.ok(chiSquare(huge.slice(0, 2), [1, 1]) < 10.83, `${huge}`);
  // Denormal weights rounded the draws (a 1 : 3 split of equal weights).
  const tiny = countsOf(
    [...new data.WeightedRandomSampler([5e-324, 5e-324], 4000, { seed: 2 })],
    2,
  );
  assert.ok(chiSquare(tiny, [1, 1]) < 10.83, `${tiny}`);
  // Without replacement their keys overflowed to Infinity, so the order was the index order.
  const s = new data.WeightedRandomSampler([5e-324, 5e-324, 0], 3, { replacement: false, seed: 3 });
  const firsts = [0, 0, 0];
  for (let e = 0; e < 2000; e++) {
    const epoch = [...s];
    assert.equal(epoch[2], 2);
    firsts[epoch[0]]++;
  }
  assert.ok(chiSquare(firsts, [1, 1, 0]) < 10.83, `${firsts}`);
});

backendTest(
  "DataLoader with device prefetch hands out every good batch before a failing one",
  async (device) => {
    // Prefetching made batch i + 1 before handing out batch i, and its error lost batch i.
    class Breaks extends data.IterableDataset<number> {
      *[Symbol.iterator]() {
        yield 1;
        yield 2;
        throw new Error("the stream broke");
      }
    }
    for (const target of [undefined, device]) {
      const got: number[][] = [];
      assert.throws(() => {
        for (
          const b of new data.DataLoader(new Squares(), {
            batchSampler: [[1], [2], [99]],
            device: target,
          })
        ) {
          got.push([b.shape[0]]);
          b.dispose();
        }
      }, /gave index 99 \(position 0 of batch 2\)/);
      assert.equal(got.length, 2, `device ${target}`);
      const streamed: Tensor[] = [];
      assert.throws(() => {
        for (const b of new data.DataLoader(new Breaks(), { device: target })) streamed.push(b);
      }, /the stream broke/);
      assert.deepEqual(await batchesOf(streamed), [[1], [2]], `device ${target}`);
    }
  },
);
