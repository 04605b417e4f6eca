/**
 * The distributed layer: process groups, collectives, spawn, failures in
 * bounded time, DistributedDataParallel's equivalence with one process on
 * the whole batch (cpu ranks, webgpu ranks, noSync, mpiexec), and the
 * DistributedSampler.
 * @module
 */

import assert from "node:assert/strict";
import { distributed, nn, optim, seededRandom, type Tensor, tensor, tidy } from "../mod.ts";
import { BACKENDS } from "./harness.ts";
import { keepLoaded } from "../src/distributed/mpi.ts";
import { MPICH_MPIEXEC, type MpiRun, mpiRun as runUnderMpiexec } from "./mpiexec.ts";
import { freePort, LAUNCHER, tcpRun as runUnderLauncher } from "./tcprun.ts";
import { parseRunArgs, rankEnv } from "../src/distributed/run.ts";
import { pairAllReduce, ringAllReduce } from "../src/distributed/tcp_ring.ts";
import { reduceInto } from "../src/distributed/backend.ts";
import { ReduceArea, RingArea } from "../src/distributed/wasm_reduce.ts";
import {
  type InPlace,
  makeData,
  makeModel,
  parameterValues,
  type Sums,
  type TrainOptions,
  unevenRows,
} from "./distributed_ranks.ts";

const RANKS = new URL("./distributed_ranks.ts", import.meta.url);
// Workers and shared memory outlive a test's own ops by design (terminated at its end).
const opts = { sanitizeOps: false, sanitizeResources: false };

interface Collected {
  sum: number[];
  doubled: number[];
  avg: number[];
  max: number[];
  min: number[];
  ints: number[];
  broadcast: number[][];
  gathered: number[][];
  scattered: Record<string, number[] | number[][]>;
  scatteredBigErrors: number;
  bigErrors: number;
  completed: boolean;
  rank: number;
  worldSize: number;
  backend: string;
}

for (const backend of ["cpu", ...(BACKENDS.has("webgpu") ? ["webgpu"] : [])]) {
  Deno.test({
    name:
      `collectives: allReduce (sum, avg, max, min, int32, chunked), broadcast, allGather, barrier [${backend}]`,
    ...opts,
    fn: async () => {
      const results = await distributed.spawn<Collected>(RANKS, {
        nprocs: 3,
        args: ["collectives", { backend }],
      });
      results.forEach((r, rank) => {
        assert.equal(r.rank, rank);
        assert.equal(r.worldSize, 3);
        assert.equal(r.backend, "local");
        assert.deepEqual(r.sum, [6, 12, 18]);
        assert.deepEqual(r.doubled, [12, 24, 36]);
        assert.deepEqual(r.avg, [1, 2]);
        assert.ok(Number.isNaN(r.max[2]), "max propagates NaN");
        assert.deepEqual(r.max.slice(0, 2), [2, 5]);
        assert.deepEqual(r.min, [0, 3]);
        assert.deepEqual(r.ints, [6, 21]);
        assert.deepEqual(r.broadcast, [[2, 2], [2, 2]]);
        assert.deepEqual(r.gathered, [[0, 0], [1, 10], [2, 20]]);
        checkScattered(r);
        assert.equal(r.bigErrors, 0);
        assert.equal(r.completed, true);
      });
    },
  });
}

/** reduceScatter's values on rank `r.rank` of `r.worldSize` (see the collectives scenario). */
function checkScattered(r: Collected): void {
  const n = r.worldSize;
  const rows = (f: (i: number) => number) =>
    [0, 1].map((row) => [0, 1, 2].map((c) => f(r.rank * 6 + row * 3 + c)));
  // Rank q's input holds (i + 1) * (q + 1): summed over q, (i + 1) * n(n + 1) / 2.
  assert.deepEqual(r.scattered.sum, rows((i) => ((i + 1) * n * (n + 1)) / 2));
  assert.deepEqual(r.scattered.avg, rows((i) => ((i + 1) * (n + 1)) / 2));
  assert.deepEqual(r.scattered.max, rows((i) => (i + 1) * n));
  assert.deepEqual(r.scattered.min, rows((i) => i + 1));
  // Stacked int32 input [n, 2]: rank q holds i + q at flat index i.
  const ints = [0, 1].map((c) => {
    const i = r.rank * 2 + c;
    return n * i + (n * (n - 1)) / 2;
  });
  assert.deepEqual(r.scattered.ints, ints);
  const [nan] = r.scattered.nan as (number | null)[];
  assert.ok(nan === null || Number.isNaN(nan), "NaN (null in JSON) wins the max");
  assert.equal(r.scatteredBigErrors, 0);
}

/** What the `rooted` scenario returns (see tests/distributed_ranks.ts). */
interface Rooted {
  rank: number;
  reduced: number[];
  averaged: number[];
  maxed: (number | null)[];
  ints: number[];
  gathered: number[][] | null;
  scattered: number[];
  allToAll: number[][];
  allToAllSingle: number[][];
  uneven: number[];
  bigErrors: number;
}

/** reduce, gather, scatter and the all-to-alls on every rank of `results` (`n` ranks). */
function checkRooted(results: readonly (Rooted | undefined)[]): void {
  const n = results.length;
  const last = n - 1;
  results.forEach((r, rank) => {
    assert.ok(r, `rank ${rank} returned nothing`);
    assert.equal(r.rank, rank);
    // Only dst gets the combination; the others keep their values.
    const sum = (n * (n + 1)) / 2;
    assert.deepEqual(r.reduced, rank === last ? [sum, 10 * sum] : [rank + 1, 10 * (rank + 1)]);
    assert.deepEqual(r.averaged, [rank === 0 ? (n - 1) / 2 : rank]);
    if (rank === 0) {
      assert.deepEqual(r.maxed[0], n - 1);
      assert.ok(r.maxed[1] === null || Number.isNaN(r.maxed[1]), "NaN (null in JSON) wins");
      assert.deepEqual(r.ints, [1]);
    } else assert.deepEqual(r.ints, [rank + 1]);
    assert.deepEqual(
      r.gathered,
      rank === 1 ? Array.from({ length: n }, (_, q) => [q, q * q]) : null,
    );
    assert.deepEqual(r.scattered, [10 * rank, 10 * rank + 1]);
    // Rank q sent [10q + r + 1, -(10q + r + 1)] to rank r (never -0, which JSON loses).
    assert.deepEqual(
      r.allToAll,
      Array.from({ length: n }, (_, q) => [10 * q + rank + 1, -(10 * q + rank + 1)]),
    );
    assert.deepEqual(
      r.allToAllSingle,
      Array.from({ length: n }, (_, q) => [100 * q + 2 * rank, 100 * q + 2 * rank + 1]),
    );
    // Rank q's values for this rank start after those it sends to the ranks before.
    const before = (q: number) => Array.from({ length: rank }, (_, p) => unevenRows(q, p));
    const from = (q: number) =>
      Array.from(
        { length: unevenRows(q, rank) },
        (_, i) => 1000 * q + before(q).reduce((a, b) => a + b, 0) + i,
      );
    assert.deepEqual(r.uneven, Array.from({ length: n }, (_, q) => from(q)).flat());
    assert.equal(r.bigErrors, 0);
  });
}

for (const backend of ["cpu", ...(BACKENDS.has("webgpu") ? ["webgpu"] : [])]) {
  Deno.test({
    name:
      `collectives: reduce, gather, scatter, allToAll, allToAllSingle (also chunked) [${backend}]`,
    ...opts,
    fn: async () => {
      checkRooted(
        await distributed.spawn<Rooted>(RANKS, { nprocs: 3, args: ["rooted", { backend }] }),
      );
    },
  });
}

/** What the `p2p` scenario returns (see tests/distributed_ranks.ts). */
interface PointToPoint {
  ring: number[];
  ringCompleted: boolean;
  doubled: number[];
  batch: number[];
  seven?: number[];
  five?: number[];
  inOrder?: number[][];
  fromGroup?: number[];
  largeErrors?: number;
  tag: { message: string };
}

function checkP2P(results: readonly (PointToPoint | undefined)[]): void {
  const n = results.length;
  results.forEach((r, rank) => {
    assert.ok(r, `rank ${rank} returned nothing`);
    const prev = (rank + n - 1) % n;
    assert.deepEqual(r.ring, [prev, 10 * prev]);
    assert.equal(r.ringCompleted, true);
    assert.deepEqual(r.doubled, [2 * prev, 20 * prev]);
    assert.deepEqual(r.batch, [prev + 100]);
    assert.match(r.tag.message, /send: tag must be an integer in \[0, 32767\], got -1/);
    if (rank === n - 1) {
      assert.deepEqual(r.seven, [7, 7], "matched by tag, not by order");
      assert.deepEqual(r.five, [5]);
      assert.deepEqual(r.inOrder, [[1], [2], [3]], "one tag's messages in the order sent");
      assert.deepEqual(r.fromGroup, [-1], "a sub-group's tag 0 is its own");
      assert.equal(r.largeErrors, 0);
    }
  });
}

for (const backend of ["cpu", ...(BACKENDS.has("webgpu") ? ["webgpu"] : [])]) {
  Deno.test({
    name: `point-to-point: send/recv ring, tags, order, batchIsendIrecv, sub-group [${backend}]`,
    ...opts,
    fn: async () => {
      checkP2P(
        await distributed.spawn<PointToPoint>(RANKS, { nprocs: 3, args: ["p2p", { backend }] }),
      );
    },
  });
}

Deno.test({
  name:
    "point-to-point: mismatch on both ranks; a wrong tag, a hung or departed sender in bounded time",
  ...opts,
  fn: async () => {
    const shape = await failure("p2pShape");
    for (const r of shape) {
      assert.match(
        r.message,
        /send\/recv mismatch: rank 0 called send #0 to rank 1 \(tag 0\) of float32 \[3\], but rank 1 called recv #0 from rank 0 \(tag 0\) of float32 \[4\]/,
      );
      assert.deepEqual(r.ranks, [0, 1]);
    }
    const started = performance.now();
    const [sender, receiver] = await failure("p2pTag", 5000);
    assert.match(
      sender.message,
      // It times out too, or first sees the receiver leave after the receiver's timeout.
      /send #0 to rank 1 \(tag 1\) .*on rank 0: rank 1 (did not receive it within 5000 ms|left the process group .*before receiving it)/,
    );
    assert.match(
      receiver.message,
      /recv #0 from rank 0 \(tag 2\) .*on rank 1: nothing came from rank 0 with tag 2 within 5000 ms \(unreceived from it: send #0 to rank 1 \(tag 1\) of float32 \[1\]\)/,
    );
    const hung = await rejection("p2pHang", 300);
    assert.match(
      hung.message,
      /rank 0 of 2 failed: recv #0 from rank 1 \(tag 0\) of float32 \[1\] on rank 0: nothing came from rank 1 with tag 0 within 300 ms/,
    );
    const [left] = await failure("p2pLeave");
    assert.match(
      left.message,
      /recv #0 from rank 1 .*on rank 0: rank 1 left the process group .*without sending it/,
    );
    // Three 2-rank spawns on a loaded machine take seconds; a hang would take the 20 s timeout each.
    assert.ok(performance.now() - started < 45_000, "bounded time");
  },
});

/** What the `groups` scenario returns (see tests/distributed_ranks.ts). */
interface Grouped {
  pairRanks: number[];
  pairRank: number;
  soloRank: number;
  pairSum?: number[];
  pairBroadcast?: number[];
  pairGathered?: number[][];
  pairScatter?: number[];
  pairMismatch?: { message: string; ranks?: number[] };
  soloValue?: number[];
  nonMember?: { message: string; ranks?: number[] };
  world: number[];
  mismatch: { message: string; ranks?: number[] };
}

/** newGroup's sub-groups of ranks [0, last] and [1], on every rank of `results`. */
function checkGroups(results: readonly (Grouped | undefined)[]): void {
  const n = results.length;
  const last = n - 1;
  results.forEach((r, rank) => {
    assert.ok(r, `rank ${rank} returned nothing`);
    assert.deepEqual(r.pairRanks, [0, last]);
    assert.equal(r.pairRank, rank === 0 ? 0 : rank === last ? 1 : -1);
    assert.equal(r.soloRank, rank === 1 ? 0 : -1);
    if (r.pairRank >= 0) {
      assert.deepEqual(r.pairSum, [1 + n, 20]);
      assert.deepEqual(r.pairBroadcast, [last]);
      assert.deepEqual(r.pairGathered, [[0], [last]]);
      assert.deepEqual(r.pairScatter, [(r.pairRank + 1) * (1 + n)]);
      assert.match(
        r.pairMismatch!.message,
        new RegExp(
          `in the group of ranks \\[0, ${last}\\].*collective mismatch.*rank 0 called allReduce #\\d+ \\(sum\\) of float32 \\[1\\]; rank 1 called allReduce #\\d+ \\(sum\\) of float32 \\[2\\]`,
        ),
      );
      assert.deepEqual(r.pairMismatch!.ranks, [last], "the whole group's rank");
    }
    if (rank === 1) assert.deepEqual(r.soloValue, [5]);
    else {
      assert.match(
        r.nonMember!.message,
        new RegExp(`allReduce: rank ${rank} is not a member of the group of ranks \\[1\\]`),
      );
    }
    assert.deepEqual(r.world, [n]);
    assert.match(
      r.mismatch.message,
      /newGroup: every rank must pass the same ranks, but rank 0 passed \[0\]; rank 1 passed \[1\]/,
    );
  });
}

Deno.test({
  name: "newGroup: collectives among some ranks; a non-member or a different list is an error",
  ...opts,
  fn: async () => {
    checkGroups(
      await distributed.spawn<Grouped>(RANKS, { nprocs: 3, args: ["failure", { kind: "groups" }] }),
    );
  },
});

Deno.test({
  name: "newGroup: a local group makes many sub-groups (memory made on demand)",
  ...opts,
  fn: async () => {
    const sums = await distributed.spawn<number[]>(RANKS, {
      nprocs: 3,
      args: ["failure", { kind: "manyGroups" }],
    });
    const lists = [[0, 1], [1, 2], [0, 2], [0, 1, 2]];
    sums.forEach((got, rank) => {
      const expected: number[] = [];
      for (let i = 0; i < 12; i++) {
        const list = lists[i % 4];
        if (list.includes(rank)) expected.push(list.reduce((a, q) => a + q + 10 * i, 0));
      }
      assert.deepEqual(got, expected, `rank ${rank}`);
    });
  },
});

Deno.test("process group: one rank without a launcher; clear errors before init and on bad input", async () => {
  assert.equal(distributed.isInitialized(), false);
  assert.throws(() => distributed.getRank(), /no process group in this thread/);
  assert.throws(() => distributed.allReduce(tensor([1])), /initProcessGroup/);
  await assert.rejects(
    () => distributed.initProcessGroup({ worldSize: 2 }),
    /no backend given and no launcher found: start the ranks with distributed\.spawn.*mpiexec/,
  );
  await assert.rejects(
    () => distributed.initProcessGroup({ backend: "local", worldSize: 2 }),
    /Workers started by distributed\.spawn/,
  );
  await assert.rejects(
    () => distributed.initProcessGroup({ backend: "nccl" }),
    /no process-group backend "nccl" \(registered: local, mpi/,
  );
  await assert.rejects(() => distributed.initProcessGroup({ timeoutMs: -1 }), /timeoutMs/);
  await distributed.initProcessGroup({ backend: "local", worldSize: 1 });
  try {
    assert.equal(distributed.getWorldSize(), 1);
    assert.equal(distributed.getBackend(), "local");
    await assert.rejects(() => distributed.initProcessGroup({ backend: "local" }), /already/);
    const t = tensor([1, 2]);
    await distributed.allReduce(t, { op: "avg" });
    assert.deepEqual(await t.toArray(), [1, 2]);
    assert.throws(() => distributed.allReduce(t, { op: "prod" as "sum" }), /op must be one of/);
    assert.throws(
      () => distributed.allReduce(tensor([1], { dtype: "int32" }), { op: "avg" }),
      /"avg" needs a floating-point tensor, got int32/,
    );
    assert.throws(() => distributed.broadcast(t, { src: 1 }), /src must be a rank in \[0, 1\)/);
    const out = tensor([0, 0]);
    await distributed.reduceScatter(out, tensor([3, 4]), { op: "max" });
    assert.deepEqual(await out.toArray(), [3, 4]);
    assert.throws(
      () => distributed.reduceScatter(tensor([0, 0]), tensor([1, 2, 3])),
      /input must hold worldSize \(1\) parts of output's shape along dim 0 \(output \[2\]: .*got input \[3\]/,
    );
    assert.throws(
      () => distributed.reduceScatter(tensor([0], { dtype: "int32" }), tensor([1])),
      /one dtype and one device, got output int32 .* input float32/,
    );
    assert.throws(
      () => distributed.reduceScatter(tensor([0]), tensor([1]), { op: "prod" as "sum" }),
      /reduceScatter: op must be one of/,
    );
    const t2 = tensor([1, 2]);
    assert.throws(
      () => distributed.reduce(t2, { dst: 1 }),
      /reduce: dst must be a rank in \[0, 1\), got 1/,
    );
    assert.throws(
      () => distributed.gather(t2, null, { dst: 0 }),
      /gather: gatherList must hold one tensor per rank of the group \(1\), got null/,
    );
    assert.throws(
      () => distributed.gather(t2, [tensor([[1, 2]])]),
      /gather: every tensor of gatherList must be float32 \[2\] on cpu:0 \(as the first\), but gatherList\[0\] is float32 \[1, 2\] on cpu:0/,
    );
    assert.throws(
      () => distributed.scatter(t2, [tensor([1, 2]), tensor([3, 4])]),
      /scatter: scatterList must hold one tensor per rank of the group \(1\), got 2/,
    );
    assert.throws(
      () => distributed.allToAll([tensor([0])], [tensor([1], { dtype: "int32" })]),
      /allToAll: every tensor of outputs must be int32 on cpu:0 \(as inputs\[0\]\), but outputs\[0\] is float32 \[1\]/,
    );
    assert.throws(
      () => distributed.allToAllSingle(tensor(1), tensor(2)),
      /allToAllSingle: input's dim 0 must split into worldSize \(1\) equal parts, got input \[\]/,
    );
    assert.throws(
      () => distributed.allToAllSingle(tensor([0, 0]), tensor([1, 2]), { inputSplitSizes: [1, 1] }),
      /allToAllSingle: inputSplitSizes \[1, 1\] must be 1 whole numbers \(one per rank\) that sum to input's dim 0, but input is \[2\]/,
    );
    assert.throws(
      () => distributed.allToAllSingle(tensor([0, 0]), tensor([1, 2]), { outputSplitSizes: [1.5] }),
      /allToAllSingle: outputSplitSizes \[1.5\] must be 1 whole numbers/,
    );
    const unevenOut = tensor([0, 0, 0]);
    await distributed.allToAllSingle(unevenOut, tensor([1, 2, 3]), { inputSplitSizes: [3] });
    assert.deepEqual(await unevenOut.toArray(), [1, 2, 3]);
    assert.throws(
      () => distributed.send(t2, 0),
      /send: dst 0 is this rank: a rank cannot send to itself \(as in PyTorch\)/,
    );
    assert.throws(() => distributed.recv(t2, 2), /recv: src must be a rank in \[0, 1\), got 2/);
    const single = tensor([[1, 2]]);
    const singleOut = tensor([[0, 0]]);
    await distributed.allToAllSingle(singleOut, single);
    assert.deepEqual(await singleOut.toArray(), [[1, 2]]);
    await distributed.barrier();
  } finally {
    await distributed.destroyProcessGroup();
  }
  assert.equal(distributed.isInitialized(), false);
});

Deno.test("process group: a registered plugin backend is used by initProcessGroup", async () => {
  const calls: string[] = [];
  distributed.registerProcessGroupBackend("recording", (init) => ({
    rank: init.rank ?? 0,
    worldSize: init.worldSize ?? 1,
    allReduce: (call, data) => {
      calls.push(distributed.describeHeader(call.header));
      data.fill(7);
      return Promise.resolve();
    },
    broadcast: () => Promise.resolve(),
    allGather: (_call, data) => Promise.resolve([data]),
    barrier: () => Promise.resolve(),
    destroy: () => {
      calls.push("destroy");
    },
  }));
  await distributed.initProcessGroup({ backend: "recording" });
  const t = tensor([[1, 2, 3]]);
  distributed.allReduce(t, { op: "max" });
  assert.deepEqual(await t.toArray(), [[7, 7, 7]]);
  // A plugin without reduceScatter: the whole array is all-reduced, this rank's part kept.
  const part = tensor([0, 0, 0]);
  distributed.reduceScatter(part, tensor([[1, 2, 3]]));
  assert.deepEqual(await part.toArray(), [7, 7, 7]);
  // reduce, gather, scatter and the all-to-alls compose the basic collectives.
  const reduced = tensor([1, 2]);
  distributed.reduce(reduced, { dst: 0, op: "min" });
  assert.deepEqual(await reduced.toArray(), [7, 7]);
  const gathered = [tensor([0, 0])];
  await distributed.gather(tensor([3, 4]), gathered);
  assert.deepEqual(await gathered[0].toArray(), [3, 4]);
  const scattered = tensor([0, 0]);
  distributed.scatter(scattered, [tensor([5, 6])]);
  assert.deepEqual(await scattered.toArray(), [5, 6]);
  const outputs = [tensor([0])];
  distributed.allToAll(outputs, [tensor([8])]);
  assert.deepEqual(await outputs[0].toArray(), [8]);
  await distributed.destroyProcessGroup();
  assert.deepEqual(calls, [
    "allReduce #0 (max) of float32 [1, 3]",
    "reduceScatter #1 (sum) of float32 [1, 3]",
    "reduce #2 (min, to rank 0) of float32 [2]",
    "destroy",
  ]);
  assert.throws(
    () => distributed.registerProcessGroupBackend("Bad Name", () => ({}) as never),
    /lower-case/,
  );
});

// ---- failures: every case ends in bounded time, naming the ranks ----

function failure(kind: string, timeoutMs = 20_000) {
  return distributed.spawn<{ message: string; ranks?: number[] }>(RANKS, {
    nprocs: 2,
    args: ["failure", { kind }],
    timeoutMs,
  });
}

Deno.test({
  name:
    "spawn: a rank that reported closes its own Worker; only ranks still running are terminated",
  ...opts,
  fn: async () => {
    // A Worker holding a GPUDevice that is terminated from outside crashed
    // or hung the process at exit on NVIDIA's Vulkan driver (worker.ts).
    const terminate = Worker.prototype.terminate;
    let terminated = 0;
    Worker.prototype.terminate = function (this: Worker) {
      terminated++;
      terminate.call(this);
    };
    try {
      const shapes = await failure("shape");
      assert.equal(shapes.length, 2);
      assert.equal(terminated, 0, "ranks that returned are left to close themselves");
      await assert.rejects(failure("throw"), /rank 1 of 2 failed: boom from rank 1/);
      // Rank 1 reported its error and closed; rank 0, inside allReduce, is
      // terminated unless its own report of rank 1's failure came first.
      assert.ok(terminated <= 1, `terminated ${terminated} Workers, at most rank 0's expected`);
    } finally {
      Worker.prototype.terminate = terminate;
    }
  },
});

Deno.test({
  name: "failures: shape and kind mismatches are the same clear error on every rank",
  ...opts,
  fn: async () => {
    const shape = await failure("shape");
    for (const r of shape) {
      assert.match(
        r.message,
        /collective mismatch.*rank 0 called allReduce #0 \(sum\) of float32 \[3\]; rank 1 called allReduce #0 \(sum\) of float32 \[4\]/,
      );
      assert.deepEqual(r.ranks, [1]);
    }
    assert.equal(shape[0].message, shape[1].message);
    const late = await distributed.spawn<{ message: string }>(RANKS, {
      nprocs: 3,
      args: ["failure", { kind: "mismatchLate" }],
      timeoutMs: 20_000,
    });
    for (const r of late) {
      assert.match(
        r.message,
        /ranks 0, 2 called barrier #0; rank 1 called broadcast #0 \(from rank 1\) of float32 \[4\]/,
      );
    }
    for (const r of await failure("reinit")) {
      assert.match(r.message, /already had its "local" group and destroyed it.*newGroup/);
    }
    const kind = await failure("kind");
    for (const r of kind) {
      assert.match(
        r.message,
        /rank 0 called allReduce #0 \(sum\) of float32 \[1\]; rank 1 called barrier #0/,
      );
    }
    const scatter = await failure("reduceScatterShape");
    for (const r of scatter) {
      assert.match(
        r.message,
        /rank 0 called reduceScatter #0 \(sum\) of float32 \[2\]; rank 1 called reduceScatter #0 \(sum\) of float32 \[4\]/,
      );
    }
    const gatherShape = await failure("gatherShape");
    for (const r of gatherShape) {
      assert.match(
        r.message,
        /rank 0 called gather #0 \(to rank 0\) of float32 \[3\]; rank 1 called gather #0 \(to rank 0\) of float32 \[4\]/,
      );
    }
    const reduceDst = await failure("reduceDst");
    for (const r of reduceDst) {
      assert.match(
        r.message,
        /rank 0 called reduce #0 \(sum, to rank 0\) of float32 \[1\]; rank 1 called reduce #0 \(sum, to rank 1\)/,
      );
    }
    const allToAllShape = await failure("allToAllShape");
    for (const r of allToAllShape) {
      assert.match(
        r.message,
        /allToAll: the parts do not match across ranks .*: rank 0 sends 2 elements to rank 1, which expects 3/,
      );
    }
    const after = await failure("after");
    for (const r of after) {
      assert.match(
        r.message,
        /barrier #1: the process group failed at an earlier collective.*mismatch/,
      );
    }
    const stream = await failure("stream");
    for (const r of stream) assert.match(r.message, /float32 \[2\].*float32 \[1, 2\]/);
    const models = await failure("models");
    for (const r of models) {
      assert.match(
        r.message,
        /rank 0 called broadcast #0 \(from rank 0\) of 4 float32 tensors.*rank 1 called broadcast #0 \(from rank 0\) of 2 float32 tensors/,
      );
    }
  },
});

async function rejection(kind: string, timeoutMs: number): Promise<Error> {
  const started = performance.now();
  const error = await failure(kind, timeoutMs).then(
    () => assert.fail(`${kind}: spawn resolved`),
    (e: Error) => e,
  );
  assert.ok(performance.now() - started < 15_000, `${kind} took too long`);
  return error;
}

Deno.test({
  name: "failures: a rank that throws, exits, closes, hangs or leaves makes spawn reject naming it",
  ...opts,
  fn: async () => {
    const thrown = await rejection("throw", 20_000);
    assert.match(thrown.message, /^spawn: rank 1 of 2 failed: boom from rank 1/);
    assert.ok(thrown instanceof distributed.DistributedError);
    assert.deepEqual((thrown as distributed.DistributedError).ranks, [1]);
    assert.match((thrown.cause as Error).message, /boom from rank 1/);
    const exited = await rejection("exit", 20_000);
    assert.match(exited.message, /rank 1 of 2 failed: the rank called Deno\.exit\(3\)/);
    const closed = await rejection("close", 20_000);
    assert.match(closed.message, /rank 1 of 2 failed: the rank closed its Worker/);
    // A rank that never arrives: the other times out naming it and where it is.
    const hung = await rejection("hang", 300);
    assert.match(
      hung.message,
      /rank 0 of 2 failed: allReduce #0 \(sum\) of float32 \[1\] on rank 0: rank 1 did not join within 300 ms \(rank 1 is at no collective yet\)/,
    );
    const left = await failure("leave");
    assert.match(left[0].message, /rank 1 left the process group/);
    // The same in DDP's blocking exchange of which parameters were used (findUnusedParameters).
    const leftSync = await failure("unusedLeave");
    assert.match(leftSync[0].message, /allGather #\d+ of int32 \[1\] on rank 0: rank 1 left/);
    const hungSync = await rejection("unusedHang", 300);
    assert.match(
      hungSync.message,
      /rank 0 of 2 failed: allGather #\d+ of int32 \[1\] on rank 0: rank 1 did not join within 300 ms/,
    );
    await assert.rejects(
      () => distributed.spawn(new URL("./harness.ts", import.meta.url), { nprocs: 1 }),
      /rank 0 of 1 failed: spawn: .*harness\.ts exports no function main/,
    );
    await assert.rejects(
      () => distributed.spawn(RANKS, { nprocs: 0 }),
      /nprocs must be an integer >= 1/,
    );
  },
});

// ---- DistributedDataParallel ----

/** One process training on every rank's rows at once (the reference). */
async function reference(worldSize: number, o: TrainOptions): Promise<number[][]> {
  // The first rank's initial weights (see train in distributed_ranks.ts).
  const model = makeModel(1 + (o.group?.[0] ?? 0) * 100);
  const opt = new optim.SGD(model.parameters(), { lr: 0.5 });
  const lossFn = new nn.CrossEntropyLoss();
  const rows = worldSize * o.batch;
  const all = makeData(o.steps * rows);
  for (let s = 0; s < o.steps; s++) {
    const x = tensor(all.x.slice(s * rows, (s + 1) * rows));
    const y = tensor(all.y.slice(s * rows, (s + 1) * rows), { dtype: "int32" });
    tidy(() => {
      opt.zeroGrad();
      lossFn.forward(model.forward(x) as Tensor, y).backward();
      opt.step();
    });
  }
  return await parameterValues(model);
}

interface Trained {
  params: number[][];
  losses: number[];
  state: string[];
  memory: number[];
}

async function checkEquivalence(worldSize: number, o: TrainOptions): Promise<void> {
  const ranks = await distributed.spawn<Trained | null>(RANKS, {
    nprocs: worldSize,
    args: ["train", o],
  });
  const members = o.group ?? ranks.map((_, r) => r);
  ranks.forEach((r, q) => assert.equal(r === null, !members.includes(q), `rank ${q}`));
  const expected = await reference(members.length, o);
  checkTrained(ranks.filter((r) => r !== null), expected);
}

function checkTrained(ranks: Trained[], expected: number[][]): void {
  for (const r of ranks.slice(1)) {
    assert.deepEqual(r.params, ranks[0].params, "all ranks hold bit-identical parameters");
  }
  assert.deepEqual(ranks[0].state, ["0.weight", "0.bias", "2.weight", "2.bias"]);
  for (const r of ranks) {
    assert.equal(r.memory.at(-1), r.memory[1], `memory flat from step 2 on: ${r.memory}`);
  }
  ranks[0].params.forEach((values, i) =>
    values.forEach((v, j) => {
      const e = expected[i][j];
      assert.ok(
        Math.abs(v - e) <= 1e-5 + 1e-4 * Math.abs(e),
        `parameter ${i}[${j}]: DDP ${v}, one process ${e}`,
      );
    })
  );
}

Deno.test({
  name: "DDP: 2 cpu ranks with batch b end each step like one process on 2b rows",
  ...opts,
  fn: () => checkEquivalence(2, { backend: "cpu", steps: 3, batch: 8 }),
});

Deno.test({
  name: "DDP: 3 cpu ranks, several buckets, noSync gradient accumulation",
  ...opts,
  fn: () =>
    checkEquivalence(3, {
      backend: "cpu",
      steps: 2,
      batch: 8,
      accumulate: true,
      bucketCapMB: 1e-4,
    }),
});

Deno.test({
  name:
    "DDP processGroup: ranks [1, 2] of 3 train like one process on their rows, from rank 1's weights",
  ...opts,
  fn: () => checkEquivalence(3, { backend: "cpu", steps: 2, batch: 4, group: [1, 2] }),
});

if (BACKENDS.has("webgpu")) {
  Deno.test({
    name: "DDP: 2 webgpu ranks (own GPUDevice each) end each step like one process",
    ...opts,
    fn: () => checkEquivalence(2, { backend: "webgpu", steps: 3, batch: 8, bucketCapMB: 1e-4 }),
  });
}

Deno.test({
  name:
    "DDP: unused parameters are an error naming them; with findUnusedParameters those no rank used keep a null grad and the optimizer skips them",
  ...opts,
  fn: async () => {
    const results = await failure("unused");
    for (const r of results) {
      assert.match(
        r.message,
        /extra\.weight \[2, 2\], extra\.bias \[2\] got no gradient.*findUnusedParameters/,
      );
    }
    checkUnusedAllowed(
      await distributed.spawn<UnusedAllowed>(RANKS, {
        nprocs: 2,
        args: ["failure", { kind: "unusedAllowed" }],
      }),
    );
  },
});

if (BACKENDS.has("webgpu")) {
  Deno.test({
    name: "p2p: sends to one rank arrive in program order when their devices answer out of order",
    ...opts,
    fn: async () => {
      const [, got] = await distributed.spawn<number[][] | null>(RANKS, {
        nprocs: 2,
        args: ["failure", { kind: "p2pOrder" }],
      });
      assert.deepEqual(got, [[1, 2, 3], [4, 5, 6]]);
    },
  });
}

Deno.test({
  name:
    "DDP: only a backward after its forward synchronises: one through the plain module is local, as in PyTorch",
  ...opts,
  fn: async () => {
    const [r0, r1] = await distributed.spawn<{
      synced: number[][];
      local: number[][] | null;
      want: number[][];
      again: number[][];
    }>(RANKS, { nprocs: 2, args: ["failure", { kind: "localBackward" }] });
    // Inputs x and 2x: the synced gradient is 1.5x the plain one on both ranks.
    const scaled = r0.want.map((row) => row.map((v) => Math.fround(1.5 * v)));
    assert.deepEqual(r0.synced, r1.synced);
    assert.deepEqual(r0.synced, scaled);
    assert.deepEqual(r0.local, r0.want, "rank 0's backward through the module is its own");
    assert.equal(r1.local, null);
    assert.deepEqual(r0.again, r1.again, "the second wrapper averages");
    assert.deepEqual(r0.again, scaled);
  },
});

Deno.test({
  name:
    "DDP: findUnusedParameters with a rank that never yields to its event loop fails naming the cause",
  ...opts,
  fn: async () => {
    const [r0, r1] = await failure("unusedAsymmetric", 1500);
    assert.match(
      r1.message,
      /on rank 1: rank 0 (left|did not join).*blocked rank 1 here with \d+ earlier collectives? of its own still queued.*await at the same points/,
    );
    // Whichever times out first leaves; the other sees that.
    assert.match(
      r0.message,
      /on rank 0: rank 1 (did not join within 1500 ms|left the process group)/,
    );
  },
});

/** What the `unusedAllowed` scenario returns (see tests/distributed_ranks.ts). */
interface UnusedAllowed {
  extraWeightGrad: number[][];
  modelBiasGrad: number[];
  neverGradAfterBackward: (null | undefined)[];
  extraHadGrad: boolean;
  neverBefore: number[][];
  neverAfterStep: number[][];
  extraMoved: boolean;
  extraAfterStep: number[][];
}

function checkUnusedAllowed(results: readonly (UnusedAllowed | undefined)[]): void {
  for (const r of results) {
    assert.ok(r);
    // Only rank 1 used `extra`: d(sum)/dW = [[1, 1], [1, 1]], averaged with rank 0's zeros,
    // on rank 0 too (where it had no gradient).
    assert.equal(r.extraHadGrad, true);
    assert.deepEqual(r.extraWeightGrad, [[0.5, 0.5], [0.5, 0.5]]);
    assert.deepEqual(r.modelBiasGrad, [1, 1, 1]);
    // No rank used `never`: its gradients stay null when backward() returns, and the
    // optimizer (weight decay, momentum) skips it.
    assert.deepEqual(r.neverGradAfterBackward, [null, null]);
    assert.deepEqual(r.neverAfterStep, r.neverBefore);
    assert.equal(r.extraMoved, true);
  }
  assert.deepEqual(results[0]!.extraAfterStep, results[1]!.extraAfterStep, "ranks identical");
}

Deno.test({
  name: "DDP: broadcastBuffers gives every rank rank 0's running statistics before each forward",
  ...opts,
  fn: async () => {
    const [r0, r1] = await distributed.spawn<{ on: number[]; off: number[] }>(RANKS, {
      nprocs: 2,
      args: ["failure", { kind: "buffers" }],
    });
    assert.deepEqual(r1.on, r0.on, "the same statistics once rank 0's were broadcast");
    assert.notDeepEqual(r1.off, r0.off, "without the broadcast each rank keeps its own");
    assert.deepEqual(r0.off, r0.on, "rank 0 is unaffected");
  },
});

Deno.test({
  name:
    "DDP: evaluation reads between steps with BatchNorm and findUnusedParameters (rank 0 no longer runs ahead of its buffer broadcast)",
  ...opts,
  fn: async () => {
    // Before, rank 0's read did not wait for the broadcast it sent, so it ran on into the
    // blocking exchange of the next backward while rank 1 still waited for its broadcast: both
    // stalled until the timeout.
    const [r0, r1] = await distributed.spawn<number[]>(RANKS, {
      nprocs: 2,
      args: ["failure", { kind: "evalBetweenSteps" }],
      timeoutMs: 15_000,
    });
    assert.equal(r0.length, 3);
    assert.deepEqual(r1, r0, "the ranks evaluate the same model");
  },
});

Deno.test({
  name:
    "DDP: buffers are broadcast before the first forward after a training one, so ranks may run different numbers of noGrad evaluation forwards",
  ...opts,
  fn: async () => {
    const [r0, r1] = await distributed.spawn<{ evaluated: number; stats: number[] }>(RANKS, {
      nprocs: 2,
      args: ["failure", { kind: "unevenEval" }],
      timeoutMs: 15_000,
    });
    assert.equal(r0.evaluated, r1.evaluated);
    assert.ok(Number.isFinite(r0.evaluated));
    assert.deepEqual(r1.stats, r0.stats, "the training forward after evaluation broadcast them");
  },
});

Deno.test("DDP: needs a process group, the module on one device, a valid bucketCapMB", async () => {
  assert.throws(
    () => new distributed.DistributedDataParallel(new nn.Linear(2, 2)),
    /initProcessGroup/,
  );
  await distributed.initProcessGroup({ backend: "local" });
  try {
    assert.throws(
      () => new distributed.DistributedDataParallel(new nn.Linear(2, 2), { bucketCapMB: 0 }),
      /bucketCapMB must be a positive number/,
    );
    assert.throws(
      () => new distributed.DistributedDataParallel({} as nn.Module),
      /must be an nn\.Module/,
    );
    const ddp = new distributed.DistributedDataParallel(makeModel(1));
    assert.equal(
      distributed.DistributedDataParallel,
      (await import("../mod.ts")).parallel.DistributedDataParallel,
    );
    const out = ddp.forward(tensor([[1, 2, 3, 4, 5, 6]])) as Tensor;
    assert.deepEqual(out.shape, [1, 3]);
  } finally {
    await distributed.destroyProcessGroup();
  }
});

Deno.test({
  name: "spawn: float32 sums and averages have the rank-order bits (2 and 3 ranks)",
  ...opts,
  fn: async () => {
    for (const nprocs of [2, 3]) {
      const results = await distributed.spawn<Sums>(RANKS, {
        nprocs,
        args: ["sums", { backend: "cpu" }],
      });
      for (const r of results) {
        assert.equal(r.calls, 40, `${nprocs} ranks`);
        assert.equal(r.mismatches, 0, `${nprocs} ranks`);
      }
    }
  },
});

Deno.test({
  name:
    "spawn: allReduceCoalesced in place across chunk edges, in stream order, a storage passed twice (2 and 3 cpu ranks, 2 webgpu)",
  ...opts,
  fn: async () => {
    const runs: [number, string][] = [[2, "cpu"], [3, "cpu"]];
    if (BACKENDS.has("webgpu")) runs.push([2, "webgpu"]);
    for (const [nprocs, backend] of runs) {
      const results = await distributed.spawn<InPlace>(RANKS, {
        nprocs,
        args: ["inPlace", { backend }],
      });
      for (const r of results) {
        assert.deepEqual(
          r,
          { coalesced: 0, before: 0, after: 0, aliased: 0 },
          `${nprocs} ${backend}`,
        );
      }
    }
  },
});

// ---- the "mpi" backend, under mpiexec ----

const MPIEXEC = MPICH_MPIEXEC ? "mpiexec" : null;
if (!MPIEXEC) {
  console.warn(
    'MPICH\'s mpiexec not found: the mpiexec tests of the "mpi" backend are SKIPPED (install it with `apt-get install mpich`)',
  );
}

/** Runs the ranks script under `mpiexec -n ranks`; returns each rank's result and the job's output. */
function mpiRun<T>(
  ranks: number,
  scenario: string,
  options: Record<string, unknown>,
  env: Record<string, string> = {},
): Promise<MpiRun<T>> {
  return runUnderMpiexec<T>(RANKS, ranks, scenario, options, env);
}

Deno.test({
  name: "mpi: collectives and DDP equivalence under mpiexec -n 2",
  ignore: !MPIEXEC,
  ...opts,
  fn: async () => {
    const c = await mpiRun<Collected>(2, "collectives", { backend: "cpu" });
    assert.equal(c.code, 0, c.output);
    c.results.forEach((r, rank) => {
      assert.ok(r, `rank ${rank} wrote no result: ${c.output}`);
      assert.equal(r.backend, "mpi");
      assert.equal(r.rank, rank);
      assert.deepEqual(r.sum, [3, 6, 9]);
      assert.deepEqual(r.avg, [0.5, 1]);
      assert.deepEqual(r.max, [1, 5, null], "NaN (null in JSON) wins on every rank");
      assert.deepEqual(r.min, [0, 4]);
      assert.deepEqual(r.ints, [3, 14]);
      assert.deepEqual(r.broadcast, [[1, 1], [1, 1]]);
      assert.deepEqual(r.gathered, [[0, 0], [1, 10]]);
      checkScattered(r);
      assert.equal(r.bigErrors, 0);
    });
    const rootedRun = await mpiRun<Rooted>(2, "rooted", { backend: "cpu" });
    assert.equal(rootedRun.code, 0, rootedRun.output);
    checkRooted(rootedRun.results);
    const p2pRun = await mpiRun<PointToPoint>(2, "p2p", { backend: "cpu" });
    assert.equal(p2pRun.code, 0, p2pRun.output);
    checkP2P(p2pRun.results);
    const grouped = await mpiRun<Grouped>(2, "failure", { kind: "groups" });
    assert.equal(grouped.code, 0, grouped.output);
    checkGroups(grouped.results);
    const unused = await mpiRun<UnusedAllowed>(2, "failure", { kind: "unusedAllowed" });
    assert.equal(unused.code, 0, unused.output);
    checkUnusedAllowed(unused.results);
    for (const backend of ["cpu", ...(BACKENDS.has("webgpu") ? ["webgpu"] : [])]) {
      const o: TrainOptions = { backend, steps: 3, batch: 8, accumulate: true, bucketCapMB: 1e-4 };
      const t = await mpiRun<Trained>(2, "train", o as unknown as Record<string, unknown>);
      assert.equal(t.code, 0, t.output);
      checkTrained(t.results as Trained[], await reference(2, o));
    }
    // DDP over newGroup([1, 2]) of 3 processes: rank 1's weights, averaged over 2.
    const o: TrainOptions = { backend: "cpu", steps: 2, batch: 4, group: [1, 2] };
    const g = await mpiRun<Trained | null>(3, "train", o as unknown as Record<string, unknown>);
    assert.equal(g.code, 0, g.output);
    assert.equal(g.results[0], null);
    checkTrained(g.results.slice(1) as Trained[], await reference(2, o));
  },
});

Deno.test({
  name:
    "mpi: 5 ranks (past the direct exchange of up to 4: a header meeting, then MPI's own collectives): collectives, float sums equal on every rank, DDP equivalence",
  ignore: !MPIEXEC,
  ...opts,
  fn: async () => {
    const n = 5;
    const c = await mpiRun<Collected>(n, "collectives", { backend: "cpu" });
    assert.equal(c.code, 0, c.output);
    c.results.forEach((r, rank) => {
      assert.ok(r, `rank ${rank} wrote no result: ${c.output}`);
      assert.equal(r.backend, "mpi");
      assert.equal(r.rank, rank);
      assert.equal(r.worldSize, n);
      assert.deepEqual(r.sum, [1, 2, 3].map((v) => (v * n * (n + 1)) / 2));
      assert.deepEqual(r.avg, [(n - 1) / 2, n - 1]);
      assert.deepEqual(r.max, [n - 1, 5, null], "NaN (null in JSON) wins on every rank");
      assert.deepEqual(r.min, [0, 5 - (n - 1)]);
      assert.deepEqual(r.ints, [(n * (n + 1)) / 2, 7 * n]);
      assert.deepEqual(r.broadcast, [[n - 1, n - 1], [n - 1, n - 1]]);
      assert.deepEqual(r.gathered, Array.from({ length: n }, (_, q) => [q, 10 * q]));
      checkScattered(r);
      assert.equal(r.bigErrors, 0);
    });
    // MPI's own all-reduce adds in its own order, not rank order: the same bits on every rank.
    const sums = await mpiRun<Sums>(n, "sums", { backend: "cpu" });
    assert.equal(sums.code, 0, sums.output);
    for (const r of sums.results) {
      assert.ok(r, `a rank wrote no result: ${sums.output}`);
      assert.equal(r.calls, 40);
      assert.equal(r.far, 0);
      assert.equal(r.bits, sums.results[0]!.bits, "every rank holds the same bits");
    }
    const o: TrainOptions = { backend: "cpu", steps: 2, batch: 4, bucketCapMB: 1e-4 };
    const t = await mpiRun<Trained>(n, "train", o as unknown as Record<string, unknown>);
    assert.equal(t.code, 0, t.output);
    checkTrained(t.results as Trained[], await reference(n, o));
  },
});

Deno.test({
  name:
    "mpi: float32 sums and averages have the rank-order bits, in shared memory (2 and 3 ranks) and in messages",
  ignore: !MPIEXEC,
  ...opts,
  fn: async () => {
    const runs: [number, Record<string, string>][] = [
      // "1": the shared window must be used (an error where the ranks cannot share one).
      [2, { MULTIGRAD_MPI_SHARED_MEMORY: "1" }],
      [3, { MULTIGRAD_MPI_SHARED_MEMORY: "1" }],
      [2, { MULTIGRAD_MPI_SHARED_MEMORY: "0" }],
    ];
    for (const [ranks, env] of runs) {
      const run = await mpiRun<Sums>(ranks, "sums", { backend: "cpu" }, env);
      const label = `${ranks} ranks, ${JSON.stringify(env)}`;
      assert.equal(run.code, 0, `${label}: ${run.output}`);
      for (const r of run.results) {
        assert.ok(r, `${label}: a rank wrote no result: ${run.output}`);
        assert.equal(r.calls, 40, label);
        assert.equal(r.mismatches, 0, label);
      }
    }
  },
});

Deno.test({
  name:
    "mpi: a mismatch is an error on both ranks; a rank that throws or hangs ends the job naming it",
  ignore: !MPIEXEC,
  ...opts,
  fn: async () => {
    const shape = await mpiRun<{ message: string }>(2, "failure", { kind: "shape" });
    assert.equal(shape.code, 0, shape.output);
    for (const r of shape.results) {
      assert.match(
        r!.message,
        /rank 0 called allReduce #0 \(sum\) of float32 \[3\]; rank 1 called allReduce #0 \(sum\) of float32 \[4\]/,
      );
    }
    const late = await mpiRun<{ message: string }>(3, "failure", { kind: "mismatchLate" });
    assert.equal(late.code, 0, late.output);
    for (const r of late.results) {
      assert.match(
        r!.message,
        /ranks 0, 2 called barrier #0; rank 1 called broadcast #0 \(from rank 1\) of float32 \[4\]/,
      );
    }
    const p2pShape = await mpiRun<{ message: string }>(2, "failure", { kind: "p2pShape" });
    assert.equal(p2pShape.code, 0, p2pShape.output);
    for (const r of p2pShape.results) {
      assert.match(
        r!.message,
        /send\/recv mismatch: rank 0 called send #0 .*float32 \[3\], but rank 1 called recv #0 .*float32 \[4\]/,
      );
    }
    for (const kind of ["gatherShape", "reduceDst"]) {
      const run = await mpiRun<{ message: string }>(2, "failure", { kind });
      assert.equal(run.code, 0, run.output);
      for (const r of run.results) {
        assert.match(
          r!.message,
          /collective mismatch: .*rank 0 called (gather|reduce) #0.*rank 1 called/,
        );
      }
    }
    // Each job must end well before the 60 s default timeout that a hang would hit. The bound is
    // per job: under a loaded machine (the parallel suite) each two-rank job's MPI start and end
    // alone took 6-15 s here, so a bound on the three together failed without any hang.
    const bounded = async (kind: string, options: Record<string, unknown>) => {
      const started = performance.now();
      const run = await mpiRun(2, "failure", { kind, ...options });
      const seconds = (performance.now() - started) / 1000;
      assert.ok(
        seconds < 45,
        `the ${kind} job took ${seconds.toFixed(1)} s (a hang would take 60)`,
      );
      return run;
    };
    const thrown = await bounded("throw", {});
    assert.notEqual(thrown.code, 0);
    // The failing rank names itself and ends the job (MPI_Abort); the other
    // usually reports it too, unless the launcher ended it first.
    assert.match(thrown.output, /multigrad mpi rank 1: uncaught Error: boom from rank 1/);
    const peer = thrown.output.match(/multigrad mpi rank 0: uncaught (.*)/)?.[1];
    if (peer) assert.match(peer, /on rank 0: rank 1 failed: Error: boom from rank 1/);
    const p2pHung = await bounded("p2pHang", { timeoutMs: 500 });
    assert.notEqual(p2pHung.code, 0);
    assert.match(
      p2pHung.output,
      /recv #0 from rank 1 \(tag 0\) of float32 \[1\] on rank 0: rank 1 did not join within 500 ms/,
    );
    // A rank that never reaches initProcessGroup: the others do not hang in
    // MPI's blocking communicator calls, they fail at the timeout (at least
    // 10 s for MPI_Init, however short the collectives' timeout).
    const lateInit = await bounded("leave", { timeoutMs: 500, lateInitMs: 60_000 });
    assert.notEqual(lateInit.code, 0);
    assert.match(
      lateInit.output,
      /initProcessGroup \(mpi\) on rank 0: MPI_Init did not return within 10000 ms: not every rank of the job has started/,
    );
    const hung = await bounded("hang", { timeoutMs: 500 });
    assert.notEqual(hung.code, 0);
    assert.match(hung.output, /on rank 0: rank 1 did not join within 500 ms/);
  },
});

Deno.test("mpi: a missing MPI library is a clear error naming the package to install", async () => {
  const previous = Deno.env.get("MULTIGRAD_MPI_LIB");
  Deno.env.set("MULTIGRAD_MPI_LIB", "/nonexistent/libmpich.so.12");
  try {
    await assert.rejects(
      () => distributed.initProcessGroup({ backend: "mpi" }),
      /needs MPICH's library .*apt-get install mpich.*MULTIGRAD_MPI_LIB.*\/nonexistent\/libmpich\.so\.12/,
    );
    assert.equal(distributed.isInitialized(), false);
  } finally {
    if (previous === undefined) Deno.env.delete("MULTIGRAD_MPI_LIB");
    else Deno.env.set("MULTIGRAD_MPI_LIB", previous);
  }
});

Deno.test({
  name:
    "mpi: MPI's library stays mapped after Deno closes it (a helper thread may still be in MPI)",
  ignore: !MPIEXEC || Deno.build.os !== "linux",
  fn: () => {
    const lib = Deno.dlopen("libmpich.so.12", {
      MPI_Initialized: { parameters: ["buffer"], result: "i32" },
    });
    keepLoaded("libmpich.so.12");
    // What the runtime's shutdown does to every library it opened.
    lib.close();
    assert.match(Deno.readTextFileSync("/proc/self/maps"), /libmpich\.so\.12/);
  },
});

Deno.test("host staging arrays are reused: a returned array is lent again", async () => {
  const { borrowHost, giveBackHost } = await import("../src/distributed/host.ts");
  const a = borrowHost("float32", 1000);
  giveBackHost(a);
  assert.equal(borrowHost("float32", 1000), a, "the pool gives the same array back");
  assert.notEqual(borrowHost("float32", 1000), a, "while lent it is not lent twice");
  giveBackHost(new Float32Array(1000)); // not lent: ignored
  assert.ok(borrowHost("int32", 1000) instanceof Int32Array);
});

// ---- the "tcp" backend, under multigrad's launcher (src/distributed/run.ts) ----

/** Runs the ranks script as `ranks` processes of the launcher; each rank's result and the output. */
function tcpRun<T>(
  ranks: number,
  scenario: string,
  options: Record<string, unknown>,
): Promise<MpiRun<T>> {
  return runUnderLauncher<T>(RANKS, ranks, scenario, options);
}

Deno.test({
  name: "tcp: collectives, p2p, sub-groups and DDP equivalence with 2 and 3 processes",
  ...opts,
  fn: async () => {
    for (const n of [2, 3]) {
      const c = await tcpRun<Collected>(n, "collectives", { backend: "cpu" });
      assert.equal(c.code, 0, c.output);
      c.results.forEach((r, rank) => {
        assert.ok(r, `rank ${rank} of ${n} wrote no result: ${c.output}`);
        assert.equal(r.backend, "tcp");
        assert.equal(r.rank, rank);
        assert.equal(r.worldSize, n);
        assert.deepEqual(r.sum, [1, 2, 3].map((v) => (v * n * (n + 1)) / 2));
        assert.deepEqual(r.avg, n === 2 ? [0.5, 1] : [1, 2]);
        assert.ok(r.max[2] === null || Number.isNaN(r.max[2]), "NaN (null in JSON) wins");
        assert.deepEqual(r.max.slice(0, 2), n === 2 ? [1, 5] : [2, 5]);
        assert.deepEqual(r.min, n === 2 ? [0, 4] : [0, 3]);
        assert.deepEqual(r.ints, n === 2 ? [3, 14] : [6, 21]);
        assert.deepEqual(r.broadcast, n === 2 ? [[1, 1], [1, 1]] : [[2, 2], [2, 2]]);
        assert.deepEqual(r.gathered, Array.from({ length: n }, (_, q) => [q, 10 * q]));
        checkScattered(r);
        assert.equal(r.bigErrors, 0, "the ring all-reduce of a large array");
      });
    }
    const rootedRun = await tcpRun<Rooted>(2, "rooted", { backend: "cpu" });
    assert.equal(rootedRun.code, 0, rootedRun.output);
    checkRooted(rootedRun.results);
    const p2pRun = await tcpRun<PointToPoint>(2, "p2p", { backend: "cpu" });
    assert.equal(p2pRun.code, 0, p2pRun.output);
    checkP2P(p2pRun.results);
    const grouped = await tcpRun<Grouped>(2, "failure", { kind: "groups" });
    assert.equal(grouped.code, 0, grouped.output);
    checkGroups(grouped.results);
    // findUnusedParameters through the sync Worker's blocking exchange: as under mpi.
    const unused = await tcpRun<UnusedAllowed>(2, "failure", { kind: "unusedAllowed" });
    assert.equal(unused.code, 0, unused.output);
    checkUnusedAllowed(unused.results);
    for (const backend of ["cpu", ...(BACKENDS.has("webgpu") ? ["webgpu"] : [])]) {
      const o: TrainOptions = { backend, steps: 3, batch: 8, accumulate: true, bucketCapMB: 1e-4 };
      const t = await tcpRun<Trained>(2, "train", o as unknown as Record<string, unknown>);
      assert.equal(t.code, 0, t.output);
      checkTrained(t.results as Trained[], await reference(2, o));
    }
    const three: TrainOptions = { backend: "cpu", steps: 3, batch: 4, bucketCapMB: 1e-4 };
    const t3 = await tcpRun<Trained>(3, "train", three as unknown as Record<string, unknown>);
    assert.equal(t3.code, 0, t3.output);
    checkTrained(t3.results as Trained[], await reference(3, three));
    // DDP over newGroup([1, 2]) of 3 processes: rank 1's weights, averaged over 2.
    const o: TrainOptions = { backend: "cpu", steps: 2, batch: 4, group: [1, 2] };
    const g = await tcpRun<Trained | null>(3, "train", o as unknown as Record<string, unknown>);
    assert.equal(g.code, 0, g.output);
    assert.equal(g.results[0], null);
    checkTrained(g.results.slice(1) as Trained[], await reference(2, o));
  },
});

Deno.test({
  name:
    "tcp: float32 sums and averages of 2 ranks have the rank-order bits (direct and segmented); of 3, the same bits on every rank (ring); allReduceCoalesced in place",
  ...opts,
  fn: async () => {
    const run = await tcpRun<Sums>(2, "sums", { backend: "cpu" });
    assert.equal(run.code, 0, run.output);
    for (const r of run.results) {
      assert.ok(r, `a rank wrote no result: ${run.output}`);
      assert.equal(r.calls, 40);
      assert.equal(r.mismatches, 0);
    }
    const inPlace = await tcpRun<InPlace>(2, "inPlace", { backend: "cpu" });
    assert.equal(inPlace.code, 0, inPlace.output);
    for (const r of inPlace.results) {
      assert.deepEqual(r, { coalesced: 0, before: 0, after: 0, aliased: 0 }, inPlace.output);
    }
    // Around the ring (SIMD in a WebAssembly area past RING_BYTES) a chunk is added in ring
    // order by one rank and copied to the others.
    const ring = await tcpRun<Sums>(3, "sums", { backend: "cpu" });
    assert.equal(ring.code, 0, ring.output);
    for (const r of ring.results) {
      assert.ok(r, `a rank wrote no result: ${ring.output}`);
      assert.equal(r.calls, 40);
      assert.equal(r.far, 0);
      assert.equal(r.bits, ring.results[0]!.bits, "every rank holds the same bits");
    }
  },
});

Deno.test({
  name:
    "tcp: a mismatch is an error on every rank; a rank that throws, hangs, leaves or exits fails the others naming it",
  ...opts,
  fn: async () => {
    const shape = await tcpRun<{ message: string }>(2, "failure", { kind: "shape" });
    assert.equal(shape.code, 0, shape.output);
    for (const r of shape.results) {
      assert.match(
        r!.message,
        /rank 0 called allReduce #0 \(sum\) of float32 \[3\]; rank 1 called allReduce #0 \(sum\) of float32 \[4\]/,
      );
    }
    const late = await tcpRun<{ message: string }>(3, "failure", { kind: "mismatchLate" });
    assert.equal(late.code, 0, late.output);
    for (const r of late.results) {
      assert.match(
        r!.message,
        /ranks 0, 2 called barrier #0; rank 1 called broadcast #0 \(from rank 1\) of float32 \[4\]/,
      );
    }
    const p2pShape = await tcpRun<{ message: string }>(2, "failure", { kind: "p2pShape" });
    assert.equal(p2pShape.code, 0, p2pShape.output);
    for (const r of p2pShape.results) {
      assert.match(
        r!.message,
        /send\/recv mismatch: rank 0 called send #0 .*float32 \[3\], but rank 1 called recv #0 .*float32 \[4\]/,
      );
    }
    for (const kind of ["gatherShape", "reduceDst"]) {
      const run = await tcpRun<{ message: string }>(2, "failure", { kind });
      assert.equal(run.code, 0, run.output);
      for (const r of run.results) {
        assert.match(r!.message, /collective mismatch: .*rank 0 called (gather|reduce) #0.*rank 1/);
      }
    }
    // Bounded: a hang would take the 60 s default timeout.
    const bounded = async (kind: string, options: Record<string, unknown>) => {
      const started = performance.now();
      const run = await tcpRun<{ message: string; ranks: number[] }>(2, "failure", {
        kind,
        ...options,
      });
      const seconds = (performance.now() - started) / 1000;
      assert.ok(seconds < 45, `the ${kind} job took ${seconds.toFixed(1)} s (a hang takes 60)`);
      return run;
    };
    const thrown = await bounded("throw", {});
    assert.equal(thrown.code, 1);
    assert.match(thrown.output, /multigrad tcp rank 1: uncaught Error: boom from rank 1/);
    assert.match(thrown.output, /run: rank 1 \(local rank 1, pid \d+\) exited with code 1/);
    const peer = thrown.output.match(/multigrad tcp rank 0: uncaught (.*)/)?.[1];
    // Rank 0 reports it unless the launcher stopped it first.
    if (peer) assert.match(peer, /on rank 0: rank 1 failed: Error: boom from rank 1/);
    const left = await bounded("leave", {});
    assert.equal(left.code, 0, left.output);
    assert.equal(left.results[1] as unknown, "left");
    assert.match(left.results[0]!.message, /on rank 0: rank 1 left the process group/);
    assert.deepEqual(left.results[0]!.ranks, [1]);
    const hung = await bounded("hang", { timeoutMs: 500 });
    assert.equal(hung.code, 1);
    assert.match(hung.output, /on rank 0: rank 1 did not join within 500 ms/);
    const p2pHung = await bounded("p2pHang", { timeoutMs: 500 });
    assert.match(
      p2pHung.output,
      /recv #0 from rank 1 \(tag 0\) of float32 \[1\] on rank 0: rank 1 did not join within 500 ms/,
    );
    const lateInit = await bounded("leave", { timeoutMs: 500, lateInitMs: 60_000 });
    assert.equal(lateInit.code, 1);
    // The rendezvous waits at least 10 s, whatever the collectives' timeout.
    assert.match(lateInit.output, /only 1 of the 2 users .* connected within 10000 ms/);
  },
});

Deno.test({
  name: "tcp: a rank that exits without a launcher makes the other fail at once naming it",
  ...opts,
  fn: async () => {
    // No launcher to stop the survivor: the closed connection must.
    const dir = await Deno.makeTempDir({ prefix: "multigrad_tcp_" });
    try {
      const port = String(freePort());
      const started = performance.now();
      const ranks = [0, 1].map((rank) =>
        new Deno.Command(Deno.execPath(), {
          args: ["run", "-A", RANKS.pathname, `${dir}/r`, "failure", '{"kind":"exit"}'],
          env: { MASTER_ADDR: "127.0.0.1", MASTER_PORT: port, RANK: `${rank}`, WORLD_SIZE: "2" },
          stdout: "piped",
          stderr: "piped",
        }).output()
      );
      const [zero, one] = await Promise.all(ranks);
      const seconds = (performance.now() - started) / 1000;
      assert.equal(one.code, 3);
      assert.equal(zero.code, 1);
      assert.ok(seconds < 45, `took ${seconds.toFixed(1)} s (the timeout is 60)`);
      assert.match(
        new TextDecoder().decode(zero.stderr),
        /allReduce #0 \(sum\) of float32 \[1\] on rank 0: rank 1 is gone: its connection closed/,
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("tcp: initProcessGroup's rendezvous options and errors", async () => {
  await assert.rejects(
    () => distributed.initProcessGroup({ backend: "tcp", worldSize: 2 }),
    /initProcessGroup \(tcp\): rank not given and RANK is not set: start the ranks with multigrad's run\.ts/,
  );
  await assert.rejects(
    () => distributed.initProcessGroup({ initMethod: "file:///tmp/x", rank: 0, worldSize: 1 }),
    /initMethod must be "env:\/\/" or "tcp:\/\/host:port", got "file:\/\/\/tmp\/x"/,
  );
  // One rank over each rendezvous: a store of the caller's, and tcp://.
  for (
    const how of [
      { store: new distributed.HashStore() },
      { initMethod: `tcp://127.0.0.1:${freePort()}` },
    ]
  ) {
    await distributed.initProcessGroup({ ...how, rank: 0, worldSize: 1, timeoutMs: 5000 });
    assert.equal(distributed.getBackend(), "tcp");
    const t = tensor([1, 2]);
    distributed.allReduce(t);
    assert.deepEqual(await t.toArray(), [1, 2]);
    await distributed.destroyProcessGroup();
  }
});

Deno.test("run.ts: torchrun's flags, each rank's environment, and a failing rank stops the others", async () => {
  const o = parseRunArgs([
    "--nproc_per_node=3",
    "--nnodes",
    "2",
    "--node-rank",
    "1",
    "--master-addr",
    "10.0.0.1",
    "train.ts",
    "--lr",
    "0.1",
  ]);
  assert.deepEqual([o.nprocPerNode, o.nnodes, o.nodeRank, o.masterPort], [3, 2, 1, 29500]);
  assert.deepEqual([o.script, ...o.args], ["train.ts", "--lr", "0.1"]);
  assert.deepEqual(rankEnv(o, 2), {
    RANK: "5",
    WORLD_SIZE: "6",
    LOCAL_RANK: "2",
    LOCAL_WORLD_SIZE: "3",
    GROUP_RANK: "1",
    MASTER_ADDR: "10.0.0.1",
    MASTER_PORT: "29500",
  });
  assert.throws(() => parseRunArgs(["--node-rank", "2", "--nnodes", "2", "x.ts"]), /--node-rank 2/);
  assert.throws(() => parseRunArgs(["--nproc-per-node", "0", "x.ts"]), /integer >= 1, got "0"/);
  assert.throws(
    () => parseRunArgs(["--rdzv-backend", "c10d", "x.ts"]),
    /unknown flag --rdzv-backend/,
  );
  assert.throws(() => parseRunArgs(["--nnodes", "1"]), /no script given/);
  // Rank 1 fails; rank 0 would sleep a minute: the launcher stops it and names rank 1.
  const dir = await Deno.makeTempDir({ prefix: "multigrad_run_" });
  try {
    const script = `${dir}/job.ts`;
    await Deno.writeTextFile(
      script,
      `console.log("rank " + Deno.env.get("RANK") + " of " + Deno.env.get("WORLD_SIZE") + ", local " + Deno.env.get("LOCAL_RANK") + " of " + Deno.env.get("LOCAL_WORLD_SIZE"));
// Rank 1 fails only once rank 0 has printed: the launcher stops rank 0 at once, maybe before it printed.
const ready = ${JSON.stringify(`${dir}/rank0_printed`)};
if (Deno.env.get("RANK") === "0") await Deno.writeTextFile(ready, "");
else {
  for (let i = 0; i < 400; i++) {
    try { await Deno.stat(ready); break; } catch { await new Promise((resolve) => setTimeout(resolve, 50)); }
  }
  Deno.exit(7);
}
await new Promise((resolve) => setTimeout(resolve, 60_000));`,
    );
    const started = performance.now();
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", LAUNCHER.pathname, "--nproc-per-node", "2", script],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const seconds = (performance.now() - started) / 1000;
    const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 1, text);
    assert.ok(seconds < 30, `took ${seconds.toFixed(1)} s: rank 0 was not stopped`);
    assert.match(text, /rank 0 of 2, local 0 of 2/);
    assert.match(text, /rank 1 of 2, local 1 of 2/);
    assert.match(
      text,
      /run: rank 1 \(local rank 1, pid \d+\) exited with code 7; the other ranks were stopped/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("tcp ring all-reduce: every op and rank count, the same bits on every rank", async () => {
  const random = seededRandom(7);
  for (const n of [2, 3, 4]) {
    for (const op of ["sum", "avg", "max", "min", "product", "band", "bor", "bxor"] as const) {
      const ints = op.startsWith("b");
      const length = 1003;
      const inputs = Array.from(
        { length: n },
        () =>
          ints
            ? Int32Array.from({ length }, () => Math.floor(random() * 2 ** 31))
            : Float32Array.from({ length }, (_, i) => i === 5 ? NaN : random() * 2 - 1),
      );
      const expected = ints ? new Int32Array(length) : new Float32Array(length);
      reduceInto(expected, inputs, 0, length, op);
      // Each rank's inbox from its previous rank, as the mesh delivers them (copies, in order).
      const inboxes = Array.from({ length: n }, () => [] as Uint8Array[]);
      const waiting = Array.from({ length: n }, () => [] as ((b: Uint8Array) => void)[]);
      const links = (r: number) => ({
        sendNext: (chunk: Int32Array | Float32Array) => {
          const to = (r + 1) % n;
          const copy = new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength).slice();
          const w = waiting[to].shift();
          if (w) w(copy);
          else inboxes[to].push(copy);
          return Promise.resolve();
        },
        receivePrevious: () =>
          inboxes[r].length > 0
            ? Promise.resolve(inboxes[r].shift()!)
            : new Promise<Uint8Array>((resolve) => waiting[r].push(resolve)),
      });
      const data = inputs.map((a) => a.slice());
      await Promise.all(data.map((d, r) => ringAllReduce(d, r, n, op, links(r))));
      for (let r = 1; r < n; r++) {
        assert.deepEqual(
          new Uint8Array(data[r].buffer),
          new Uint8Array(data[0].buffer),
          `${n} ranks, ${op}: rank ${r}'s bits are rank 0's`,
        );
      }
      data[0].forEach((v, i) => {
        const e = expected[i];
        if (ints || op === "max" || op === "min" || n === 2) {
          assert.ok(Object.is(v, e), `${op} [${i}]`);
        } else {assert.ok(
            Number.isNaN(e) ? Number.isNaN(v) : Math.abs(v - e) <= 1e-6,
            `${op} [${i}]: ${v} vs ${e}`,
          );}
      });
    }
  }
});

Deno.test("tcp ring all-reduce in WebAssembly areas: float32 sum and avg with SIMD have the bits of the scalar ring", async () => {
  const random = seededRandom(17);
  for (const n of [3, 4]) {
    for (const op of ["sum", "avg"] as const) {
      for (const length of [1003, 5, 64]) {
        const areas = Array.from({ length: n }, () => RingArea.create(length, n));
        if (areas.some((a) => !a)) return; // No WebAssembly SIMD here: tcp takes the host path.
        const inputs = Array.from(
          { length: n },
          () => Float32Array.from({ length }, (_, i) => i === 5 ? NaN : random() * 2 - 1),
        );
        // As the mesh delivers: into the receive's buffer when it waits, else bytes of their own.
        const ring = () => {
          const inboxes = Array.from({ length: n }, () => [] as Uint8Array[]);
          const waiting = Array.from(
            { length: n },
            () => [] as { into: Uint8Array; resolve: (b: Uint8Array) => void }[],
          );
          return (r: number) => ({
            sendNext: (chunk: Int32Array | Float32Array) => {
              const to = (r + 1) % n;
              const bytes = new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
              const w = waiting[to].shift();
              if (w) {
                w.into.set(bytes);
                w.resolve(w.into);
              } else inboxes[to].push(bytes.slice());
              return Promise.resolve();
            },
            receivePrevious: (into: Uint8Array) =>
              inboxes[r].length > 0
                ? Promise.resolve(inboxes[r].shift()!)
                : new Promise<Uint8Array>((resolve) => waiting[r].push({ into, resolve })),
          });
        };
        const scalar = inputs.map((a) => a.slice());
        const scalarLinks = ring();
        await Promise.all(scalar.map((d, r) => ringAllReduce(d, r, n, op, scalarLinks(r))));
        const simdLinks = ring();
        await Promise.all(areas.map((area, r) => {
          area!.data.set(inputs[r]);
          const scratch = area!.scratch;
          return ringAllReduce(
            area!.data,
            r,
            n,
            op,
            simdLinks(r),
            new Uint8Array(scratch.buffer, scratch.byteOffset, scratch.byteLength),
            (into, theirs, last) =>
              area!.accumulate(
                into as Float32Array,
                theirs as Float32Array,
                op === "avg" && last ? n : 1,
              ),
          );
        }));
        const bitsOf = (a: Float32Array) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
        areas.forEach((area, r) =>
          assert.deepEqual(
            bitsOf(area!.data),
            bitsOf(scalar[0]),
            `${n} ranks, ${op}, ${length} elements: rank ${r}`,
          )
        );
      }
    }
  }
  assert.throws(
    () => RingArea.create(10, 3)!.accumulate(new Float32Array(4), new Float32Array(4), 1),
    /RingArea: cannot add 4 elements into 4 \(scratch 4\)/,
  );
});

/**
 * Two ranks' links as the mesh delivers: into the receive's buffer when it
 * waits, else a copy. `links(r)` is rank r's end.
 */
function pairLinks() {
  const inboxes = [[], []] as Uint8Array[][];
  const waiting = [[], []] as { into: Uint8Array; resolve: (b: Uint8Array) => void }[][];
  return (r: number) => ({
    sendNext: (chunk: Int32Array | Float32Array) => {
      const bytes = new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      const w = waiting[1 - r].shift();
      if (w) {
        w.into.set(bytes);
        w.resolve(w.into);
      } else inboxes[1 - r].push(bytes.slice());
      return Promise.resolve();
    },
    receivePrevious: (into: Uint8Array) =>
      inboxes[r].length > 0
        ? Promise.resolve(inboxes[r].shift()!)
        : new Promise<Uint8Array>((resolve) => waiting[r].push({ into, resolve })),
  });
}

Deno.test("tcp two-rank segmented all-reduce: every op and segmenting, the rank-order bits on both ranks", async () => {
  const random = seededRandom(11);
  for (const op of ["sum", "avg", "max", "min", "product", "band", "bor", "bxor"] as const) {
    const ints = op.startsWith("b");
    for (const [length, segment] of [[1003, 100], [1003, 1003], [1003, 5000], [64, 7]]) {
      const inputs = Array.from(
        { length: 2 },
        () =>
          ints
            ? Int32Array.from({ length }, () => Math.floor(random() * 2 ** 31))
            : Float32Array.from({ length }, (_, i) => i === 5 ? NaN : random() * 2 - 1),
      );
      // What the small all-reduce computes: rank 0's values, then rank 1's.
      const expected = ints ? new Int32Array(length) : new Float32Array(length);
      reduceInto(expected, inputs, 0, length, op);
      const links = pairLinks();
      const data = inputs.map((a) => a.slice());
      await Promise.all(data.map((d, r) => pairAllReduce(d, r, op, links(r), segment)));
      const label = `${op}, ${length} elements in segments of ${segment}`;
      assert.deepEqual(new Uint8Array(data[1].buffer), new Uint8Array(data[0].buffer), label);
      assert.deepEqual(new Uint8Array(data[0].buffer), new Uint8Array(expected.buffer), label);
    }
  }
});

Deno.test("tcp two-rank segmented all-reduce into reduce areas: float32 sum and avg with SIMD, the rank-order bits on both ranks, each rank's values kept", async () => {
  const random = seededRandom(13);
  for (const op of ["sum", "avg"] as const) {
    for (const [length, segment] of [[1003, 100], [1003, 1003], [1003, 5000], [64, 7]]) {
      const areas = [0, 1].map(() => ReduceArea.create(2, length));
      if (!areas[0] || !areas[1]) return; // No WebAssembly SIMD here: tcp takes the host path.
      const inputs = [0, 1].map(() => Float32Array.from({ length }, () => random() * 2 - 1));
      const expected = new Float32Array(length);
      reduceInto(expected, inputs, 0, length, op);
      const links = pairLinks();
      await Promise.all(areas.map((area, r) => {
        const own = area!.part(r);
        own.set(inputs[r]);
        const other = area!.part(1 - r);
        return pairAllReduce(
          own,
          r,
          op,
          links(r),
          segment,
          new Uint8Array(other.buffer, other.byteOffset, other.byteLength),
          (from, to) => area!.reduceRange(op, from, to),
        );
      }));
      const label = `${op}, ${length} elements in segments of ${segment}`;
      const bitsOf = (a: Float32Array) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
      assert.deepEqual(bitsOf(areas[1]!.result()), bitsOf(areas[0]!.result()), label);
      assert.deepEqual(bitsOf(areas[0]!.result()), bitsOf(expected), label);
      areas.forEach((area, r) =>
        assert.deepEqual(area!.part(r), inputs[r], `${label}: rank ${r}'s values`)
      );
    }
  }
});

Deno.test("run.ts ranks: a cpu rank's matmul takes one thread when LOCAL_WORLD_SIZE > 1", async () => {
  // As under mpiexec (MPI_LOCALNRANKS): N ranks of one machine must not each take every core.
  const script = `import { requestDevices } from "${new URL("../mod.ts", import.meta.url).href}";
const [d] = await requestDevices({ backend: "cpu" });
console.log(d.info);`;
  const info = async (env: Record<string, string>) => {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["eval", script],
      env,
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    return new TextDecoder().decode(out.stdout);
  };
  assert.match(await info({ LOCAL_WORLD_SIZE: "2" }), /matmul on 1 thread\)/);
  if (navigator.hardwareConcurrency > 1) {
    assert.match(await info({ LOCAL_WORLD_SIZE: "1" }), /matmul on [2-9]\d* threads\)/);
  }
});
