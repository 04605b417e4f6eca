/**
 * data: the rest of PyTorch's DataLoader: `batchSize: null` (no automatic
 * batching) in the main thread and in workers, a collate (or convert) given
 * as a module reference running in the workers as PyTorch's `collate_fn`,
 * iterators left by `break`, `return()`, `await using` or dropped (the
 * program must end by itself), `generator`, and `pinMemory`; against
 * PyTorch 1.13 (fixtures/torch_data_rest.json).
 */

import assert from "node:assert/strict";
import { data, seededRandom, type Tensor, tensor } from "../mod.ts";
import { Probe, Range } from "./data_workers/datasets.ts";
import { Numbers } from "./data_workers/rest_datasets.ts";

const FIXTURE = JSON.parse(
  await Deno.readTextFile(new URL("./fixtures/torch_data_rest.json", import.meta.url)),
) as Record<string, unknown> & {
  tensor_rows: { length: number; samples: unknown[] };
  errors: Record<string, string>;
};

const HERE = new URL("./data_workers/rest_datasets.ts", import.meta.url);

/** Deno.test with the sanitizers off where Workers start (their ops outlive the test's view). */
function workerTest(name: string, fn: () => Promise<void>): void {
  Deno.test({ name, sanitizeOps: false, sanitizeResources: false, fn });
}

/** A value as the fixture writes it: tensors as { shape, values }. */
async function plain(value: unknown): Promise<unknown> {
  if (value !== null && typeof value === "object" && "toArray" in value) {
    const t = value as Tensor;
    return { shape: t.shape, values: await t.toArray() };
  }
  if (Array.isArray(value)) return Promise.all(value.map(plain));
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = await plain(v);
    return out;
  }
  return value;
}

async function epoch(loader: AsyncIterable<unknown>): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const batch of loader) out.push(await plain(batch));
  return out;
}

/** A dataset over an array (PyTorch's list dataset). */
class List<T> extends data.Dataset<T> {
  constructor(readonly items: readonly T[]) {
    super();
  }
  get length(): number {
    return this.items.length;
  }
  get(i: number): T {
    return this.items[i];
  }
}

/** PyTorch's `TensorDataset(arange(8.).reshape(4, 2), tensor([5, 6, 7, 8]))`. */
function tensorRows(): data.TensorDataset {
  return new data.TensorDataset(
    tensor([[0, 1], [2, 3], [4, 5], [6, 7]]),
    tensor([5, 6, 7, 8], { dtype: "int32" }),
  );
}

Deno.test("batchSize null: each sample alone, through defaultConvert, as PyTorch's batch_size=None", async () => {
  const loader = new data.DataLoader(tensorRows(), { batchSize: null });
  assert.equal(loader.batchSize, null);
  assert.equal(loader.length, FIXTURE.tensor_rows.length);
  const got: unknown[] = [];
  for (const sample of loader) got.push(await plain(sample));
  assert.deepEqual(got, FIXTURE.tensor_rows.samples);
  const mixed = [[1, 2], { a: 3.5, b: "s" }, 7, "text"];
  assert.deepEqual([...new data.DataLoader(new List(mixed), { batchSize: null })], FIXTURE.mixed);
  const sampled = new data.DataLoader(tensorRows(), { batchSize: null, sampler: [3, 1] });
  assert.equal(sampled.length, 2);
  assert.deepEqual(await epoch(sampled), FIXTURE.sampler);
  // PyTorch's collate_fn there, under its own name: called with one sample.
  const numbers = new List([1, 2, 3]);
  const tenfold = new data.DataLoader(numbers, { batchSize: null, convert: (s: number) => s * 10 });
  assert.deepEqual([...tenfold], FIXTURE.convert_fn);
  // Typed arrays become tensors of their dtype (PyTorch: NumPy arrays), as defaultConvert.
  const arrays = [new Float32Array([1, 2]), new Int32Array([3])];
  const converted = [
    ...new data.DataLoader(new List(arrays), { batchSize: null }),
  ] as unknown as Tensor[];
  assert.deepEqual(converted.map((t) => [t.dtype, t.shape]), [["float32", [2]], ["int32", [1]]]);
  assert.deepEqual(await converted[0].toArray(), [1, 2]);
});

Deno.test("batchSize null: shuffle visits every sample once; an IterableDataset gives its samples", () => {
  const loader = new data.DataLoader(new Numbers(9), { batchSize: null, shuffle: true, seed: 3 });
  const order = [...loader] as unknown as number[];
  assert.equal(order.length, 9);
  assert.deepEqual([...order].sort((a, b) => a - b), [0, 1, 2, 3, 4, 5, 6, 7, 8]);
  assert.notDeepEqual(order, [0, 1, 2, 3, 4, 5, 6, 7, 8]);
  const stream = new data.DataLoader(new Range(2, 6, false), { batchSize: null });
  assert.deepEqual([...stream], [2, 3, 4, 5]);
});

Deno.test("batchSize null and collate/convert: PyTorch's errors, and ours", () => {
  const pyMessage = (key: string) => FIXTURE.errors[key].replace(/^ValueError: /, "");
  assert.throws(
    () => new data.DataLoader(tensorRows(), { batchSize: null, dropLast: true }),
    {
      message: `DataLoader: ${pyMessage("drop_last").replace("drop_last", "dropLast")}`.replace(
        "batch_size=None",
        "batchSize=null",
      ),
    },
  );
  assert.throws(
    () => new data.DataLoader(tensorRows(), { batchSize: null, batchSampler: [[0, 1]] }),
    /batchSampler option is mutually exclusive with batchSize, shuffle, sampler, and dropLast \(got batchSize=null\)/,
  );
  assert.throws(
    () => new data.DataLoader(tensorRows(), { batchSize: null, collate: (s) => s }),
    /with batchSize=null each sample goes through convert, not collate/,
  );
  assert.throws(
    () => new data.DataLoader(tensorRows(), { batchSize: 2, convert: (s) => s }),
    /convert only applies with batchSize=null/,
  );
  assert.throws(
    () => new data.DataLoader(tensorRows(), { batchSize: 0 }),
    /batchSize must be a positive integer, got 0 \(or null: no batching\)/,
  );
  assert.throws(
    () => new data.DataLoader(tensorRows(), { collate: 3 as never }),
    /collate must be a function or a module reference/,
  );
  assert.throws(
    () => new data.DataLoader(tensorRows(), { collate: { module: "./x.ts", export: "f" } }),
    /collate.module must be an absolute URL/,
  );
});

workerTest(
  "batchSize null with workers: the samples of the main thread, in its order",
  async () => {
    const main = await epoch(new data.DataLoader(tensorRows(), { batchSize: null }));
    const workers = new data.DataLoader(tensorRows(), { batchSize: null, numWorkers: 2 });
    assert.equal(workers.length, 4);
    assert.deepEqual(await epoch(workers), main);
    // Each worker reads its own copy of the stream, one sample per request (PyTorch's order).
    const stream = new data.DataLoader(new Range(0, 3, false), { batchSize: null, numWorkers: 2 });
    assert.deepEqual(await epoch(stream), FIXTURE.stream_workers);
    // A convert function runs in the main thread on the samples the workers send.
    const fn = new data.DataLoader(new Numbers(3), {
      batchSize: null,
      numWorkers: 2,
      convert: (s: number) => ({ value: s * 10, worker: data.getWorkerInfo()?.id ?? -1 }),
    });
    assert.deepEqual(await epoch(fn), [0, 1, 2].map((i) => ({ value: i * 10, worker: -1 })));
    // A module reference runs in the worker that loaded the sample (round-robin).
    const ref = new data.DataLoader(new Numbers(3), {
      batchSize: null,
      numWorkers: 2,
      convert: { module: HERE, export: "tenfold" },
    });
    assert.deepEqual(await epoch(ref), [0, 1, 2].map((i) => ({ value: i * 10, worker: i % 2 })));
  },
);

workerTest(
  "a collate given as a module reference runs in the workers, as PyTorch's collate_fn",
  async () => {
    const ref = { module: HERE, export: "sumCollate" };
    const workers = new data.DataLoader(new Numbers(6), {
      batchSize: 2,
      numWorkers: 2,
      collate: ref,
    });
    assert.deepEqual(await epoch(workers), FIXTURE.collate_in_worker);
    // Without workers it is imported in the main thread (for await only: an import is async).
    const main = new data.DataLoader(new Numbers(6), { batchSize: 2, collate: ref });
    assert.throws(
      () => [...main],
      /module reference is imported asynchronously: iterate with for await/,
    );
    assert.deepEqual(await epoch(main), FIXTURE.collate_main);
    // Deliberately unlike PyTorch: a function cannot reach a Worker, so it runs in the main thread.
    const fn = new data.DataLoader(new Numbers(6), {
      batchSize: 2,
      numWorkers: 2,
      collate: (s: number[]) => ({ sum: s[0] + s[1], worker: data.getWorkerInfo()?.id ?? -1 }),
    });
    assert.deepEqual(await epoch(fn), FIXTURE.collate_main);
    // Tensors it makes cross back (args reach it), batch after batch.
    const scaled = new data.DataLoader(new Numbers(5), {
      batchSize: 2,
      numWorkers: 2,
      collate: { module: HERE, export: "scaledCollate", args: 3 },
    });
    assert.deepEqual(await epoch(scaled), [
      [{ shape: [2], values: [0, 3] }, 0],
      [{ shape: [2], values: [6, 9] }, 1],
      [{ shape: [1], values: [12] }, 0],
    ]);
    const missing = new data.DataLoader(new Numbers(2), {
      batchSize: 2,
      numWorkers: 1,
      collate: { module: HERE, export: "nothing" },
    });
    await assert.rejects(
      epoch(missing),
      /collate: .*rest_datasets.ts has no exported function "nothing"/,
    );
  },
);

workerTest(
  "generator: the shuffle (and the workers' base seed) draw from it, as PyTorch's generator=",
  async () => {
    const order = (
      g: () => number,
    ) => [
      ...new data.DataLoader(new Numbers(10), { batchSize: null, shuffle: true, generator: g }),
    ];
    assert.deepEqual(order(seededRandom(4)), order(seededRandom(4)));
    assert.notDeepEqual(order(seededRandom(4)), order(seededRandom(5)));
    // One stream shared: the second epoch continues it.
    const shared = seededRandom(4);
    const a = order(shared);
    const b = order(shared);
    assert.notDeepEqual(a, b);
    assert.deepEqual([a, b], ((g) => [order(g), order(g)])(seededRandom(4)));
    const seeds = async (g: () => number) => {
      // Unbatched, so that the seeds stay numbers (collated, they would not fit int32).
      const loader = new data.DataLoader(new Probe(2), {
        batchSize: null,
        numWorkers: 2,
        generator: g,
      });
      return ((await epoch(loader)) as { seed: number }[]).map((sample) => sample.seed);
    };
    const first = await seeds(seededRandom(9));
    assert.deepEqual(await seeds(seededRandom(9)), first);
    assert.equal(first[1], first[0] + 1);
    assert.notDeepEqual(await seeds(seededRandom(10)), first);
    assert.throws(
      () => new data.DataLoader(new Numbers(2), { seed: 1, generator: seededRandom(1) }),
      /pass seed or generator, not both/,
    );
    assert.throws(
      () => new data.DataLoader(new Numbers(2), { generator: 1 as never }),
      /generator must be a function giving floats in \[0, 1\), got number/,
    );
  },
);

Deno.test("pinMemory is accepted (PyTorch code passes it) and changes nothing", async () => {
  const plainLoader = new data.DataLoader(tensorRows(), { batchSize: 3 });
  const pinned = new data.DataLoader(tensorRows(), { batchSize: 3, pinMemory: true });
  assert.equal(pinned.pinMemory, true);
  assert.equal(plainLoader.pinMemory, false);
  assert.deepEqual(await epoch(pinned), await epoch(plainLoader));
  assert.throws(
    () => new data.DataLoader(tensorRows(), { pinMemory: "yes" as never }),
    /pinMemory must be a boolean, got string/,
  );
});

for (const mode of ["break", "return", "dispose", "drop", "persistent-drop"]) {
  Deno.test(`the program ends by itself after a worker epoch is left by ${mode}`, async () => {
    const script = new URL("./data_workers/abandon_script.ts", import.meta.url);
    const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--v8-flags=--expose-gc", script.pathname, mode],
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(60_000),
    }).output();
    const out = new TextDecoder().decode(stdout);
    assert.equal(code, 0, `${out}\n${new TextDecoder().decode(stderr)}`);
    assert.match(out, /batches: 2/);
  });
}
