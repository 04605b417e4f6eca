/**
 * data: review R4 of DataLoader's `batchSize: null`, collate module
 * references run in the workers, and abandoned iterators: tensors a
 * worker's collate returns inside Maps and Sets, errors naming the collate's
 * module, worker and batch, Workers never accumulating over many epochs
 * left early, and a dropped iterator kept alive only by a pending `next()`.
 */

import assert from "node:assert/strict";
import { data, seededRandom, type Tensor } from "../mod.ts";
import { Probe } from "./data_workers/datasets.ts";
import { Numbers } from "./data_workers/rest_datasets.ts";

const HERE = new URL("./data_workers/rest_datasets.ts", import.meta.url);

/** Deno.test with the sanitizers off where Workers start (their ops outlive the test's view). */
function workerTest(name: string, fn: () => Promise<void>): void {
  Deno.test({ name, sanitizeOps: false, sanitizeResources: false, fn });
}

type Mapped = {
  byName: Map<string, Tensor>;
  set: Set<Tensor>;
  nested: { deep: Tensor[] };
  label: string;
  when: Date;
};

async function mappedEpoch(numWorkers: number): Promise<unknown[]> {
  const loader = new data.DataLoader<number, Mapped>(new Numbers(4), {
    batchSize: 2,
    numWorkers,
    collate: { module: HERE, export: "mappedCollate" },
  });
  const out: unknown[] = [];
  for await (const b of loader) {
    const x = b.byName.get("x")!;
    const [s] = [...b.set];
    assert.ok(b.byName instanceof Map && b.set instanceof Set && b.when instanceof Date);
    out.push([
      await x.toArray(),
      await s.toArray(),
      await b.nested.deep[0].toArray(),
      b.label,
      b.when.getTime(),
    ]);
  }
  return out;
}

workerTest("a worker's collate returns tensors inside Maps and Sets as tensors", async () => {
  const expected = [[[0, 1], [0, 2], [1, 2], "0,1", 0], [[2, 3], [4, 6], [3, 4], "2,3", 2]];
  assert.deepEqual(await mappedEpoch(0), expected);
  assert.deepEqual(await mappedEpoch(2), expected);
});

workerTest(
  "a collate's errors name the collate, its module, the worker and the batch",
  async () => {
    const missing = "file:///nonexistent/review_r4_collate.ts";
    for (const numWorkers of [0, 1]) {
      const loader = new data.DataLoader(new Numbers(4), {
        batchSize: 2,
        numWorkers,
        collate: { module: missing, export: "f" },
      });
      await assert.rejects(async () => {
        for await (const _ of loader) { /* never reached */ }
      }, (e: Error) => {
        assert.match(
          e.message,
          /collate: could not import file:\/\/\/nonexistent\/review_r4_collate\.ts/,
        );
        return true;
      });
      const unbatched = new data.DataLoader(new Numbers(4), {
        batchSize: null,
        numWorkers,
        convert: { module: missing, export: "f" },
      });
      await assert.rejects(async () => {
        for await (const _ of unbatched) { /* never reached */ }
      }, /convert: could not import/);
    }
    for (const numWorkers of [0, 1]) {
      const later = new data.DataLoader(new Numbers(4), {
        batchSize: 2,
        numWorkers,
        collate: { module: HERE, export: "asyncCollate" },
      });
      await assert.rejects(async () => {
        for await (const _ of later) { /* never reached */ }
      }, /collate: asyncCollate of .*rest_datasets\.ts returned a Promise/);
    }
    const failing = new data.DataLoader(new Numbers(6), {
      batchSize: 2,
      numWorkers: 2,
      collate: { module: HERE, export: "failingCollate" },
    });
    const got: unknown[] = [];
    await assert.rejects(async () => {
      for await (const b of failing) got.push(b);
    }, (e: Error) => {
      assert.ok(e instanceof RangeError);
      assert.match(
        e.message,
        /^Caught RangeError in DataLoader worker 1 \(batch 1\): no batch with sample 3/,
      );
      return true;
    });
    assert.deepEqual(got, [0]);
  },
);

async function runScript(mode: string): Promise<unknown> {
  const script = new URL("./data_workers/leak_script.ts", import.meta.url);
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--v8-flags=--expose-gc", script.pathname, mode],
    stdout: "piped",
    stderr: "piped",
    // Ends a program that a live Worker keeps running (the defect this checks for).
    signal: AbortSignal.timeout(240_000),
  }).output();
  const out = new TextDecoder().decode(stdout);
  assert.equal(code, 0, `${out}\n${new TextDecoder().decode(stderr)}`);
  return JSON.parse(out.trim().split("\n").at(-1)!);
}

Deno.test("20 epochs with 2 workers, half left by break: never more than 2 live Workers, and the program ends", async () => {
  // 20 epochs start 40 Workers: one that outlived its epoch would show after the first two.
  const got = await runScript("epochs") as { most: number; after: number[]; batches: number };
  assert.equal(got.most, 2);
  assert.deepEqual(got.after, new Array(20).fill(0));
  assert.equal(got.batches, 10 * 4 + 10);
});

Deno.test("an iterator kept only by its pending next() is not finalized: the batch comes", async () => {
  const got = await runScript("pending");
  assert.deepEqual(got, { most: 2, alive: 2, batch: [0, 1], done: false });
});

workerTest(
  "generator: one draw per epoch for the base seed, before the shuffle, with or without workers (PyTorch)",
  async () => {
    // PyTorch's iterator draws its base seed from `generator` when it is made, with or without
    // workers, and the sampler draws after: the orders never depend on numWorkers.
    const orders = async (numWorkers: number) => {
      const loader = new data.DataLoader(new Numbers(10), {
        batchSize: null,
        shuffle: true,
        numWorkers,
        generator: seededRandom(7),
      });
      const epochs: unknown[] = [];
      for (let e = 0; e < 3; e++) {
        const order: unknown[] = [];
        for await (const i of loader) order.push(i);
        epochs.push(order);
      }
      return epochs;
    };
    const main = await orders(0);
    assert.deepEqual(await orders(2), main);
    // The first epoch's order is the shuffle of the generator after one draw.
    const g = seededRandom(7);
    g();
    const expected = Array.from({ length: 10 }, (_, i) => i);
    for (let i = 9; i > 0; i--) {
      const j = Math.floor(g() * (i + 1));
      [expected[i], expected[j]] = [expected[j], expected[i]];
    }
    assert.deepEqual(main[0], expected);
    // And that draw is the workers' base seed (worker i gets base + i).
    const probe = new data.DataLoader<Record<string, unknown>, { id: number; seed: number }>(
      new Probe(2),
      {
        batchSize: null,
        shuffle: true,
        numWorkers: 2,
        generator: seededRandom(9),
      },
    );
    const seeds: number[] = [];
    for await (const s of probe) seeds[s.id] = s.seed;
    const base = Math.floor(seededRandom(9)() * 4294967296);
    assert.deepEqual(seeds, [base, base + 1]);
  },
);
