/**
 * `DistributedDataParallel.join` and `distributed.algorithms.Join` (uneven
 * inputs): ranks with different batch counts over 2 and 3 spawned ranks and
 * under mpiexec end without hanging, with every rank's final parameters
 * equal and equal to PyTorch 1.13's (gloo DDP, both divide modes:
 * tests/fixtures/torch_ddp_join.json from torch_ddp_join.py); a loop that
 * never awaits; ZeroRedundancyOptimizer in the join; buffers; enable false;
 * throwOnEarlyTermination; the errors.
 * @module
 */

import assert from "node:assert/strict";
import { distributed } from "../mod.ts";
import type { JoinTrained, JoinTrainOptions } from "./ddp_join_ranks.ts";
import { MPICH_MPIEXEC, mpiRun } from "./mpiexec.ts";
import { BACKENDS } from "./harness.ts";

const RANKS = new URL("./ddp_join_ranks.ts", import.meta.url);
// Workers and shared memory outlive a test's own ops by design (terminated at its end).
const opts = { sanitizeOps: false, sanitizeResources: false };

interface JoinCase {
  name: string;
  batches: number[];
  divideByInitialWorldSize: boolean;
  data: JoinTrainOptions["data"];
  final: Record<string, number[]>;
}
const FIXTURE = JSON.parse(
  await Deno.readTextFile(new URL("./fixtures/torch_ddp_join.json", import.meta.url)),
) as { init: Record<string, number[]>; shapes: Record<string, number[]>; cases: JoinCase[] };

/** Trains every rank on its data; no rank may fail unless `failing`. */
async function train(
  c: { data: JoinTrainOptions["data"] },
  extra: Partial<JoinTrainOptions> = {},
  failing = false,
): Promise<JoinTrained[]> {
  const o: JoinTrainOptions = {
    init: FIXTURE.init,
    shapes: FIXTURE.shapes,
    data: c.data,
    ...extra,
  };
  const ranks = await distributed.spawn<JoinTrained>(RANKS, {
    nprocs: c.data.length,
    args: ["train", o],
    timeoutMs: 30_000,
  });
  if (!failing) {
    ranks.forEach((r, q) => assert.equal(r.error, undefined, `rank ${q} failed`));
  }
  return ranks;
}

/** Every rank's state is bit-identical to rank 0's. */
function assertRanksEqual(ranks: readonly JoinTrained[], what: string): void {
  ranks.forEach((r, q) => assert.deepEqual(r.state, ranks[0].state, `${what}: rank ${q} differs`));
}

/** The largest difference from `expected`; fails above float32 tolerance. */
function assertNearState(
  got: Record<string, number[]>,
  expected: Record<string, number[]>,
  what: string,
): number {
  let worst = 0;
  assert.deepEqual(Object.keys(got).sort(), Object.keys(expected).sort(), what);
  for (const [k, values] of Object.entries(expected)) {
    assert.equal(got[k].length, values.length, `${what}: ${k}`);
    values.forEach((v, i) => {
      const d = Math.abs(got[k][i] - v);
      worst = Math.max(worst, d);
      assert.ok(d <= 1e-5 + 1e-5 * Math.abs(v), `${what}: ${k}[${i}] = ${got[k][i]}, PyTorch ${v}`);
    });
  }
  return worst;
}

Deno.test({
  name: "ddp.join: uneven inputs over 2 and 3 ranks end equal on every rank and equal PyTorch 1.13",
  ...opts,
  fn: async () => {
    assert.equal(FIXTURE.cases.length, 6);
    let worst = 0;
    for (const c of FIXTURE.cases) {
      const what = `${c.name}, divideByInitialWorldSize ${c.divideByInitialWorldSize}`;
      const ranks = await train(c, { divideByInitialWorldSize: c.divideByInitialWorldSize });
      assert.deepEqual(ranks.map((r) => r.steps), c.batches, what);
      ranks.forEach((r) => assert.equal(r.error, undefined, what));
      assertRanksEqual(ranks, what);
      worst = Math.max(worst, assertNearState(ranks[0].state, c.final, what));
    }
    // The two divide modes differ (the test can tell them apart).
    const [a, b] = FIXTURE.cases;
    assert.notDeepEqual(a.final, b.final);
    assert.ok(worst < 1e-5, `worst ${worst}`);
  },
});

Deno.test({
  name: "without a join, uneven inputs fail the rank with more batches (what join is for)",
  ...opts,
  fn: async () => {
    const c = FIXTURE.cases.find((k) => k.batches.join() === "3,5")!;
    const ranks = await train(c, { mode: "none" }, true);
    assert.equal(ranks[0].error, undefined);
    assert.match(ranks[1].error ?? "", /rank 0 left the process group/);
  },
});

Deno.test({
  name: "ddp.join: a loop that never awaits gives the same result (3 ranks)",
  ...opts,
  fn: async () => {
    const c = FIXTURE.cases.find((k) =>
      k.batches.join() === "2,4,3" && !k.divideByInitialWorldSize
    )!;
    const ranks = await train(c, { divideByInitialWorldSize: false, awaitLoss: false });
    assertRanksEqual(ranks, "no await");
    assertNearState(ranks[0].state, c.final, "no await");
  },
});

Deno.test({
  name: "ddp.join on webgpu ranks (own GPUDevice each) equals PyTorch (3 ranks, both modes)",
  ignore: !BACKENDS.has("webgpu"),
  ...opts,
  fn: async () => {
    for (const c of FIXTURE.cases.filter((k) => k.batches.join() === "2,4,3")) {
      const what = `webgpu, divideByInitialWorldSize ${c.divideByInitialWorldSize}`;
      const ranks = await train(c, {
        backend: "webgpu",
        divideByInitialWorldSize: c.divideByInitialWorldSize,
      });
      ranks.forEach((r) => assert.equal(r.error, undefined, what));
      assertRanksEqual(ranks, what);
      assertNearState(ranks[0].state, c.final, what);
    }
  },
});

Deno.test({
  name: "ddp.join: the default divides by the initial world size (PyTorch's default)",
  ...opts,
  fn: async () => {
    const c = FIXTURE.cases.find((k) => k.batches.join() === "3,5" && k.divideByInitialWorldSize)!;
    const ranks = await train(c);
    assertNearState(ranks[0].state, c.final, "default options");
  },
});

Deno.test({
  name: "ddp.join: even inputs give what no join gives; enable false is the loop without a join",
  ...opts,
  fn: async () => {
    const c = FIXTURE.cases.find((k) => k.batches.join() === "2,4,3")!;
    const even = { data: c.data.map((d) => d.slice(0, 2)) };
    const plain = await train(even, { mode: "none" });
    const joined = await train(even, { divideByInitialWorldSize: false });
    const disabled = await train(even, { enable: false });
    assertRanksEqual(plain, "no join");
    assert.deepEqual(disabled[0].state, plain[0].state, "enable false");
    assertNearState(joined[0].state, plain[0].state, "join, even inputs");
    // Uneven inputs change the result (the join trains on the extra batches).
    const uneven = await train(c);
    assert.notDeepEqual(uneven[0].state, plain[0].state);
  },
});

Deno.test({
  name:
    "Join.run([ddp, ZeroRedundancyOptimizer]): uneven inputs, every shard stepped with the average",
  ...opts,
  fn: async () => {
    for (const batches of ["3,5", "2,4,3"]) {
      const c = FIXTURE.cases.find((k) =>
        k.batches.join() === batches && k.divideByInitialWorldSize
      )!;
      const ranks = await train(c, { mode: "zero" });
      ranks.forEach((r) => assert.equal(r.error, undefined));
      assertRanksEqual(ranks, `zero ${batches}`);
      // ZeRO(SGD) over averaged gradients is SGD over them: PyTorch's plain DDP numbers.
      assertNearState(ranks[0].state, c.final, `zero ${batches}`);
    }
  },
});

Deno.test({
  name: "ddp.join: BatchNorm buffers follow an active rank and end equal on every rank",
  ...opts,
  fn: async () => {
    const c = FIXTURE.cases.find((k) => k.batches.join() === "4,1,4")!;
    const ranks = await train(c, { batchNorm: true });
    assert.ok("1.running_mean" in ranks[0].state);
    assertRanksEqual(ranks, "batch norm");
    // The running statistics moved in every one of the 4 iterations, not only rank 1's one.
    const solo = await train({ data: [c.data[0]] }, { batchNorm: true });
    assert.notDeepEqual(ranks[0].state["1.running_mean"], solo[0].state["1.running_mean"]);
  },
});

Deno.test({
  name: "ddp.join throwOnEarlyTermination: every rank raises once one is out, naming it",
  ...opts,
  fn: async () => {
    const c = FIXTURE.cases.find((k) => k.batches.join() === "2,4,3")!;
    const ranks = await train(c, { throwOnEarlyTermination: true }, true);
    assert.equal(ranks[0].error, "Rank 0 exhausted all inputs.");
    for (const q of [1, 2]) {
      assert.match(ranks[q].error ?? "", /exhausted inputs \(rank 0\)\. Throwing across all ranks/);
    }
    // Every rank ran the two steps all had data for, and stays usable and equal.
    assert.deepEqual(ranks.map((r) => r.steps), [2, 2, 2]);
    assertRanksEqual(ranks, "after the early termination");
    const two = await train({ data: c.data.map((d) => d.slice(0, 2)) }, { mode: "none" });
    assertNearState(ranks[0].state, two[0].state, "two steps");
  },
});

Deno.test({
  name: "ddp.join: the errors (findUnusedParameters, no joinables, a joinable in two joins)",
  ...opts,
  fn: async () => {
    const ranks = await distributed.spawn<string[]>(RANKS, { nprocs: 2, args: ["errors"] });
    for (const messages of ranks) {
      assert.match(messages[0], /findUnusedParameters is not supported in a join/);
      assert.match(messages[1], /requires at least one joinable/);
      assert.match(messages[2], /already in a running join/);
    }
  },
});

// ---- under mpiexec ----

if (!MPICH_MPIEXEC) {
  console.warn(
    "MPICH's mpiexec not found: the mpiexec test of DDP join is SKIPPED (install it with `apt-get install mpich`)",
  );
}

Deno.test({
  name: "mpi: ddp.join under mpiexec -n 2 with 3 and 5 batches equals PyTorch",
  ignore: !MPICH_MPIEXEC,
  ...opts,
  fn: async () => {
    const c = FIXTURE.cases.find((k) => k.batches.join() === "3,5" && !k.divideByInitialWorldSize)!;
    const o: JoinTrainOptions = {
      init: FIXTURE.init,
      shapes: FIXTURE.shapes,
      data: c.data,
      divideByInitialWorldSize: false,
    };
    const run = await mpiRun<JoinTrained>(
      RANKS,
      2,
      "train",
      o as unknown as Record<string, unknown>,
    );
    assert.equal(run.code, 0, run.output);
    const ranks = run.results as JoinTrained[];
    ranks.forEach((r, rank) => assert.ok(r, `rank ${rank} wrote no result: ${run.output}`));
    assertRanksEqual(ranks, "mpiexec");
    assertNearState(ranks[0].state, c.final, "mpiexec");
  },
});
