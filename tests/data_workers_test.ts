/**
 * data: DataLoader with `numWorkers` (Web Workers). The same batches, in
 * the same order, as in the main thread; seeding, `getWorkerInfo`,
 * iterable datasets against PyTorch's order (fixture), persistent workers,
 * `workerInitFn`, and every failure ending in bounded time with the
 * workers gone.
 */

import assert from "node:assert/strict";
import { arange, data, manualSeed, rand, type Tensor, tensor } from "../mod.ts";
import { backendTest } from "./harness.ts";
import { Later, Local, Probe, Range, Squares } from "./data_workers/datasets.ts";

const FIXTURE = JSON.parse(
  await Deno.readTextFile(new URL("./fixtures/torch_data_workers.json", import.meta.url)),
) as { cases: Record<string, unknown> };

/** Deno.test with the sanitizers off where Workers start (their ops outlive the test's view). */
function workerTest(name: string, fn: () => Promise<void>): void {
  Deno.test({ name, sanitizeOps: false, sanitizeResources: false, fn });
}

/** Every batch of one epoch as plain values (tensors as nested arrays). */
async function epoch(loader: AsyncIterable<unknown>): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const batch of loader) out.push(await plain(batch));
  return out;
}

async function plain(value: unknown): Promise<unknown> {
  if (value !== null && typeof value === "object" && "toArray" in value) {
    const t = value as Tensor;
    return { shape: t.shape, dtype: t.dtype, values: await t.toArray() };
  }
  if (Array.isArray(value)) return Promise.all(value.map(plain));
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = await plain(v);
    return out;
  }
  return value;
}

/** `promise`, or a failure naming `what` after `ms` (every error case must end). */
async function bounded<T>(what: string, promise: Promise<T>, ms = 60_000): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const guard = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not end within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, guard]);
  } finally {
    clearTimeout(timer);
  }
}

/** How PyTorch's fixture script spells a boolean in its keys. */
function py(b: boolean): string {
  return b ? "True" : "False";
}

function rows(n: number): data.TensorDataset {
  const x = tensor(Array.from({ length: n }, (_, i) => [i, 10 * i]));
  return new data.TensorDataset(
    x,
    arange(0, n, 1),
    tensor(Array.from({ length: n }, (_, i) => i / 4), { dtype: "float64" }),
  );
}

workerTest("numWorkers 0, 1, 2, 3 give the same batches in the same order", async () => {
  const tensors = rows(11);
  const settings: [string, () => data.Dataset<unknown>, Record<string, unknown>][] = [
    ["TensorDataset, batch 3", () => tensors, { batchSize: 3 }],
    ["TensorDataset, batch 4, dropLast", () => tensors, { batchSize: 4, dropLast: true }],
    ["TensorDataset, shuffle, seed 7", () => tensors, { batchSize: 2, shuffle: true, seed: 7 }],
    [
      "Subset of ConcatDataset, sampler",
      () => new data.Subset(new data.ConcatDataset([tensors, rows(4)]), [14, 0, 3, 12, 7, 7]),
      {
        batchSize: 4,
        sampler: [5, 4, 3, 2, 1, 0],
      },
    ],
    // Its module (which imports mod.ts) loads before the copied tensors are made.
    [
      "ConcatDataset of a TensorDataset and Squares, batch 1",
      () => new data.ConcatDataset<unknown>([rows(3), new Squares({ n: 3 })]),
      { batchSize: 1 },
    ],
    ["Squares (workerSource), batchSampler", () => new Squares({ n: 9 }), {
      batchSampler: [[8, 0], [1], [4, 4, 5], [2, 3, 6, 7]],
    }],
    ["Squares, batch 4, custom collate", () => new Squares({ n: 9 }), {
      batchSize: 4,
      collate: (samples: { x: Tensor; i: number }[]) => ({
        count: samples.length,
        is: samples.map((s) => s.i),
        xs: data.defaultCollate(samples.map((s) => s.x)),
        onCpu: samples.every((s) => s.x.device.backend === "cpu"),
      }),
    }],
  ];
  for (const [name, make, options] of settings) {
    const expected = await epoch(new data.DataLoader(make(), options));
    assert.ok(expected.length > 0, name);
    for (const numWorkers of [1, 2, 3]) {
      const got = await epoch(new data.DataLoader(make(), { ...options, numWorkers }));
      assert.deepEqual(got, expected, `${name}, numWorkers ${numWorkers}`);
    }
  }
});

workerTest("shuffle with a seed: the same order as numWorkers 0, epoch after epoch", async () => {
  const ds = rows(10);
  const main = new data.DataLoader(ds, { batchSize: 3, shuffle: true, seed: 11 });
  const workers = new data.DataLoader(ds, { batchSize: 3, shuffle: true, seed: 11, numWorkers: 2 });
  const first = await epoch(main);
  assert.deepEqual(await epoch(workers), first);
  const second = await epoch(main);
  assert.notDeepEqual(second, first);
  assert.deepEqual(await epoch(workers), second);
});

workerTest(
  "each worker is seeded baseSeed + id: its own numbers, the same on every run",
  async () => {
    const runs: Record<string, unknown>[][] = [];
    for (let run = 0; run < 2; run++) {
      const loader = new data.DataLoader(new Probe(4), {
        batchSize: 1,
        numWorkers: 2,
        seed: 5,
        collate: (s) => s,
      });
      const samples: Record<string, unknown>[] = [];
      for await (const [s] of loader) samples.push(await plain(s) as Record<string, unknown>);
      runs.push(samples);
    }
    assert.deepEqual(runs[0], runs[1]);
    const [a, b] = runs[0];
    assert.deepEqual([a.id, b.id], [0, 1]);
    assert.equal(b.seed, (a.seed as number) + 1);
    assert.notDeepEqual(a.r, b.r);
    // The worker's generator is exactly the main thread's after manualSeed(seed).
    for (const s of runs[0].slice(0, 2)) {
      manualSeed(s.seed as number);
      assert.deepEqual((s.r as { values: unknown }).values, await rand([3]).toArray());
    }
    // A new epoch draws a new base seed (as PyTorch's new iterator).
    const loader = new data.DataLoader(new Probe(2), {
      batchSize: 1,
      numWorkers: 1,
      seed: 5,
      collate: (s) => s,
    });
    const seeds: unknown[] = [];
    for (let e = 0; e < 2; e++) {
      for await (const [s] of loader) {
        seeds.push((s as { seed: number }).seed);
      }
    }
    assert.notEqual(seeds[0], seeds[2]);
  },
);

workerTest(
  "getWorkerInfo: null in the main thread; id, numWorkers, seed and its own dataset copy in a worker",
  async () => {
    assert.equal(data.getWorkerInfo(), null);
    const loader = new data.DataLoader(new Probe(7), {
      batchSize: 1,
      numWorkers: 3,
      collate: (s) => s[0],
    });
    const got: Record<string, unknown>[] = [];
    for await (const s of loader) got.push(s as Record<string, unknown>);
    assert.deepEqual(got.map((s) => s.id), [0, 1, 2, 0, 1, 2, 0]);
    assert.ok(got.every((s) => s.numWorkers === 3 && s.copyLength === 7 && s.sameCopy === true));
    assert.equal(data.getWorkerInfo(), null);
    const main = [] as Record<string, unknown>[];
    for (const s of new data.DataLoader(new Probe(1), { collate: (s) => s[0] })) {
      main.push(s as Record<string, unknown>);
    }
    assert.deepEqual([main[0].id, main[0].seed], [-1, -1]);
  },
);

workerTest("round-robin over workers and in-order batches, as PyTorch (fixture)", async () => {
  class WhichWorker extends Probe {}
  for (const numWorkers of [1, 2, 3]) {
    for (const batchSize of [1, 2]) {
      const loader = new data.DataLoader(new Probe(7), {
        batchSize,
        numWorkers,
        collate: (samples) => [samples.map((s) => s.i), samples.map((s) => s.id)],
      });
      assert.deepEqual(
        await epoch(loader),
        FIXTURE.cases[`which workers=${numWorkers} batch=${batchSize}`],
        `numWorkers ${numWorkers}, batch ${batchSize}`,
      );
    }
  }
  assert.ok(WhichWorker);
});

workerTest(
  "IterableDataset: each worker reads its own copy; sharded with getWorkerInfo (fixture)",
  async () => {
    for (const shard of [false, true]) {
      for (const numWorkers of [2, 3]) {
        for (const [batchSize, dropLast] of [[2, false], [3, false], [3, true]] as const) {
          const key = `range0_10 shard=${py(shard)} workers=${numWorkers} batch=${batchSize} drop=${
            py(dropLast)
          }`;
          const loader = new data.DataLoader(new Range(0, 10, shard), {
            batchSize,
            dropLast,
            numWorkers,
          });
          const got = (await epoch(loader)).map((b) => (b as { values: number[] }).values);
          assert.deepEqual(got, FIXTURE.cases[key], key);
        }
      }
    }
    // Unsharded, every sample comes once per worker: PyTorch's documented pitfall.
    const dup = new data.DataLoader(new Range(0, 4, false), { batchSize: 4, numWorkers: 2 });
    assert.equal((await epoch(dup)).length, 2);
  },
);

workerTest(
  "persistentWorkers: the same workers (and dataset copies) across epochs, until shutdown()",
  async () => {
    const options = {
      batchSize: 2,
      numWorkers: 2,
      collate: (s: Record<string, unknown>[]) => s.map((x) => x.calls),
    };
    const persistent = new data.DataLoader(new Probe(4), { ...options, persistentWorkers: true });
    assert.deepEqual(await epoch(persistent), [[1, 2], [1, 2]]);
    assert.deepEqual(await epoch(persistent), [[3, 4], [3, 4]]);
    // Leaving a loop early keeps them too; the next epoch starts from the beginning.
    for await (const _ of persistent) break;
    assert.deepEqual((await epoch(persistent)).length, 2);
    persistent.shutdown();
    assert.deepEqual(await epoch(persistent), [[1, 2], [1, 2]]);
    persistent.shutdown();
    const fresh = new data.DataLoader(new Probe(4), options);
    assert.deepEqual(await epoch(fresh), [[1, 2], [1, 2]]);
    assert.deepEqual(await epoch(fresh), [[1, 2], [1, 2]]);
  },
);

workerTest(
  "workerInitFn runs in each worker as a module export; a promise-returning get is awaited",
  async () => {
    const loader = new data.DataLoader(new Probe(3), {
      batchSize: 1,
      numWorkers: 2,
      collate: (s) => s[0].mark,
      workerInitFn: {
        module: new URL("./data_workers/datasets.ts", import.meta.url),
        export: "markWorker",
        args: "w",
      },
    });
    assert.deepEqual(await epoch(loader), ["w0", "w1", "w0"]);
    const later = await epoch(new data.DataLoader(new Later(), { batchSize: 3, numWorkers: 2 }));
    assert.deepEqual(later.map((b) => (b as { values: number[] }).values), [[0, 1, 2], [3, 4, 5], [
      6,
    ]]);
  },
);

workerTest(
  "a get that throws: re-thrown in the main thread naming worker, batch, sample, message and stack",
  async () => {
    const loader = new data.DataLoader(new Squares({ n: 10, at: 5 }, "faulty"), {
      batchSize: 2,
      numWorkers: 2,
    });
    const seen: number[] = [];
    const error = await bounded(
      "faulty epoch",
      (async () => {
        try {
          for await (const b of loader) {
            seen.push(...Array.from(await (b as { i: Tensor }).i.data()));
          }
        } catch (e) {
          return e as Error;
        }
        return null;
      })(),
    );
    assert.ok(error instanceof RangeError, String(error));
    assert.match(
      error.message,
      /Caught RangeError in DataLoader worker 0 \(batch 2, sample index 5\): sample 5 is corrupt/,
    );
    assert.match(error.message, /misbehave/);
    assert.equal((error.cause as Error).message, "sample 5 is corrupt");
    // The batches before it came first, in order.
    assert.deepEqual(seen, [0, 1, 2, 3]);
  },
);

workerTest(
  "a worker that hangs past timeout, dies, closes itself, or cannot start is an error naming it",
  async () => {
    const cases: [string, AsyncIterable<unknown>, RegExp][] = [
      [
        "hang",
        new data.DataLoader(new Squares({ n: 6, at: 3 }, "hang"), {
          batchSize: 1,
          numWorkers: 2,
          timeout: 10_000,
        }),
        /timed out after 10000 ms waiting for batch 3 from worker 1/,
      ],
      [
        "die",
        new data.DataLoader(new Squares({ n: 6, at: 2 }, "die"), { batchSize: 1, numWorkers: 2 }),
        /DataLoader worker 0 died: .*worker crashed at 2/,
      ],
      [
        "close",
        new data.DataLoader(new Squares({ n: 6, at: 1 }, "close"), { batchSize: 1, numWorkers: 2 }),
        /DataLoader worker 1 exited unexpectedly: it called close\(\)/,
      ],
      [
        "missing export",
        new data.DataLoader(new BadSource(), { numWorkers: 1 }),
        /DataLoader worker 0 while it started: workerSource: .* has no exported function "nope"/,
      ],
    ];
    for (const [name, loader, pattern] of cases) {
      await bounded(name, assert.rejects(epoch(loader), pattern), 60_000);
    }
  },
);

class BadSource extends data.Dataset<number> {
  get length(): number {
    return 2;
  }
  get(i: number): number {
    return i;
  }
  workerSource(): data.WorkerSource {
    return { module: new URL("./data_workers/datasets.ts", import.meta.url), export: "nope" };
  }
}

Deno.test("numWorkers: refusals name what to do", async () => {
  assert.throws(
    () => new data.DataLoader(rows(3), { numWorkers: -1 }),
    /numWorkers option should be a non-negative integer, got -1/,
  );
  assert.throws(
    () => new data.DataLoader(rows(3), { prefetchFactor: 3 }),
    /prefetchFactor option could only be specified with numWorkers > 0/,
  );
  assert.throws(
    () => new data.DataLoader(rows(3), { persistentWorkers: true }),
    /persistentWorkers option needs numWorkers > 0/,
  );
  assert.throws(
    () => new data.DataLoader(rows(3), { numWorkers: 1, timeout: -1 }),
    /timeout option should be non-negative/,
  );
  assert.throws(
    // @ts-expect-error: a function is what a PyTorch user would pass.
    () => new data.DataLoader(rows(3), { numWorkers: 1, workerInitFn: () => {} }),
    /a function cannot be sent to one/,
  );
  assert.throws(
    () =>
      new data.DataLoader(rows(3), {
        numWorkers: 1,
        workerInitFn: { module: "./x.ts", export: "f" },
      }),
    /workerInitFn.module must be an absolute URL/,
  );
  const loader = new data.DataLoader(rows(3), { numWorkers: 1 });
  assert.throws(() => [...loader], /iterate with for await/);
  await assert.rejects(
    epoch(new data.DataLoader(new Local(), { numWorkers: 2 })),
    /numWorkers=2 needs a copy of the dataset in each Worker, but the dataset \(Local\) cannot be sent to one.*Add workerSource\(\) to Local, or use numWorkers: 0/s,
  );
  await assert.rejects(
    epoch(new data.DataLoader(new data.Subset(new Local(), [0]), { numWorkers: 1 })),
    /but the dataset.dataset \(Local\) cannot be sent/,
  );
  // Without workers, for await hands out the synchronous batches.
  assert.equal((await epoch(new data.DataLoader(rows(5), { batchSize: 2 }))).length, 3);
});

for (const mode of ["end", "break", "error", "persistent"]) {
  Deno.test(`the program ends by itself after a worker loader's ${mode}`, async () => {
    const script = new URL("./data_workers/exit_script.ts", import.meta.url);
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", script.pathname, mode],
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(90_000),
    }).output();
    const { code, stdout, stderr } = await child;
    const out = new TextDecoder().decode(stdout);
    assert.equal(code, 0, `${out}\n${new TextDecoder().decode(stderr)}`);
    const expected = {
      end: /batches: 6/,
      break: /batches: 2/,
      error: /caught: Caught RangeError.*batches: 2/s,
      persistent: /batches: 12/,
    }[mode]!;
    assert.match(out, expected);
  });
}

backendTest(
  "numWorkers with device: batches come on the device, the same values",
  async (device) => {
    // float64 stays out: webgpu has none.
    const ds = new data.TensorDataset(...rows(7).tensors.slice(0, 2));
    const expected = await epoch(new data.DataLoader(ds, { batchSize: 3 }));
    const loader = new data.DataLoader(ds, { batchSize: 3, numWorkers: 2, device });
    const got: unknown[] = [];
    for await (const batch of loader) {
      assert.ok((batch as Tensor[]).every((t) => t.device === device));
      got.push(await plain(batch));
    }
    assert.deepEqual(got, expected);
  },
);

workerTest(
  "two epochs side by side each have their own workers; a persistent loader's new epoch supersedes the old",
  async () => {
    const ds = rows(6);
    const loader = new data.DataLoader(ds, { batchSize: 2, numWorkers: 2 });
    const a = loader[Symbol.asyncIterator]();
    const b = loader[Symbol.asyncIterator]();
    const pairs: unknown[] = [];
    for (let k = 0; k < 3; k++) {
      const [x, y] = await Promise.all([a.next(), b.next()]);
      pairs.push([await plain(x.value), await plain(y.value)]);
    }
    assert.ok((await a.next()).done && (await b.next()).done);
    const expected = await epoch(new data.DataLoader(ds, { batchSize: 2 }));
    assert.deepEqual(pairs, expected.map((e) => [e, e]));
    const persistent = new data.DataLoader(ds, {
      batchSize: 1,
      numWorkers: 2,
      persistentWorkers: true,
    });
    try {
      const old = persistent[Symbol.asyncIterator]();
      await old.next();
      assert.equal((await epoch(persistent)).length, 6);
      await assert.rejects(old.next(), /another epoch of this loader started/);
    } finally {
      persistent.shutdown();
    }
  },
);

workerTest(
  "numWorkers: the sampler is read as batches are queued (an endless sampler works; a bad index fails its own batch)",
  async () => {
    const squares = new Squares({ n: 10 });
    let drawn = 0;
    /** Cycles 0..9 forever, counting what the loader took. */
    const endless = {
      *[Symbol.iterator]() {
        for (let i = 0;; i++) {
          drawn++;
          yield i % 10;
        }
      },
    };
    const loader = new data.DataLoader(squares, {
      batchSize: 4,
      sampler: endless,
      numWorkers: 2,
      prefetchFactor: 2,
    });
    const seen: number[][] = [];
    await bounded(
      "an epoch over an endless sampler",
      (async () => {
        for await (const batch of loader) {
          seen.push([...await (batch as { i: Tensor }).i.data()]);
          if (seen.length === 5) break;
        }
      })(),
    );
    assert.deepEqual(seen, [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1], [2, 3, 4, 5], [6, 7, 8, 9]]);
    // 5 batches taken and at most prefetchFactor x numWorkers queued ahead of them.
    assert.ok(drawn <= (5 + 4) * 4, `the loader drew ${drawn} indices`);
    // Index 12 comes 7th (batch 1): batch 0 arrives, batch 1 is the error.
    const bad = new data.DataLoader(squares, {
      batchSize: 3,
      sampler: [0, 1, 2, 3, 4, 5, 12, 7],
      numWorkers: 2,
    });
    const got: number[][] = [];
    await assert.rejects(
      bounded(
        "an epoch with a bad index",
        (async () => {
          for await (const batch of bad) got.push([...await (batch as { i: Tensor }).i.data()]);
        })(),
      ),
      /DataLoader: the sampler gave index 12 \(position 6\), outside the dataset's 10 samples/,
    );
    assert.deepEqual(got, [[0, 1, 2], [3, 4, 5]]);
  },
);
