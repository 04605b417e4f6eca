/**
 * The `"tcp"` process group's blocking all-gather (`allGatherSync`, run by
 * a Worker per rank over connections of its own): every rank's words, the
 * mismatch errors, a dead or hung peer named within the timeout, and what
 * it gives `DistributedDataParallel({ findUnusedParameters: true })` and
 * FSDP's shape check, as under the `"mpi"` backend and spawned ranks.
 * @module
 */

import assert from "node:assert/strict";
import { packHeader } from "../src/distributed/backend.ts";
import { tcpBackend } from "../src/distributed/tcp.ts";
import { freePort, tcpRun } from "./tcprun.ts";
import type { Words } from "./distributed_tcp_sync_ranks.ts";

const RANKS = new URL("./distributed_tcp_sync_ranks.ts", import.meta.url);
const DDP_RANKS = new URL("./distributed_ranks.ts", import.meta.url);
// The ranks are processes; the test's own ops are the launcher's pipes.
const opts = { sanitizeOps: false, sanitizeResources: false };

interface Failure {
  message: string;
  ranks: number[];
  ms: number;
}

Deno.test({
  name: "tcp allGatherSync: every rank's words with 2 and 3 ranks, beside queued collectives",
  ...opts,
  fn: async () => {
    for (const n of [2, 3]) {
      const run = await tcpRun<Words>(RANKS, n, "words", {});
      assert.equal(run.code, 0, run.output);
      run.results.forEach((r, rank) => {
        assert.ok(r, `rank ${rank} of ${n} wrote no result: ${run.output}`);
        assert.deepEqual(r.equal, Array(8).fill(true));
        // [1, 2] + [2, 2] (+ [3, 2]): the all-reduce queued before the blocking calls.
        assert.deepEqual(r.inFlight, n === 2 ? [3, 4] : [6, 6]);
        assert.deepEqual(r.sub, n === 3 && rank > 0 ? [[1, -1], [2, -2]] : null);
      });
    }
  },
});

Deno.test({
  name: "tcp allGatherSync: a different length or collective is the same error on every rank",
  ...opts,
  fn: async () => {
    const length = await tcpRun<Failure>(RANKS, 2, "length", {});
    assert.equal(length.code, 0, length.output);
    for (const r of length.results) {
      assert.ok(r, length.output);
      assert.match(
        r.message,
        /^collective mismatch: .*rank 0 called allGather #0 of int32 \[2\]; rank 1 called allGather #0 of int32 \[3\]/,
      );
      assert.deepEqual(r.ranks, [1]);
    }
    const kind = await tcpRun<Failure>(RANKS, 2, "kind", {});
    assert.equal(kind.code, 0, kind.output);
    for (const r of kind.results) {
      assert.ok(r, kind.output);
      assert.match(
        r.message,
        /rank 0 called allGather #0 of int32 \[2\]; rank 1 called allGather #1 of int32 \[2\]/,
      );
    }
  },
});

/** Runs the two ranks of `scenario` by hand (no launcher to stop the survivor). */
async function byHand(scenario: string, options: Record<string, number>) {
  const dir = await Deno.makeTempDir({ prefix: "multigrad_tcp_sync_" });
  try {
    const port = String(freePort());
    const outputs = await Promise.all([0, 1].map((rank) =>
      new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", RANKS.pathname, `${dir}/r`, scenario, JSON.stringify(options)],
        env: { MASTER_ADDR: "127.0.0.1", MASTER_PORT: port, RANK: `${rank}`, WORLD_SIZE: "2" },
        stdout: "piped",
        stderr: "piped",
        // A rank that never ends fails the test instead of hanging it.
        signal: AbortSignal.timeout(40_000),
      }).output()
    ));
    const text = (o: Deno.CommandOutput) =>
      new TextDecoder().decode(o.stdout) + new TextDecoder().decode(o.stderr);
    const zero = JSON.parse(await Deno.readTextFile(`${dir}/r.0.json`).catch(() => "null")) as
      | Failure
      | null;
    return { codes: outputs.map((o) => o.code), output: outputs.map(text).join("\n"), zero };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test({
  name:
    "tcp allGatherSync: a peer that exits, throws or leaves is named at once; a hung one at timeoutMs",
  ...opts,
  fn: async () => {
    // A 30 s timeout: the closed connections must fail it, not the clock.
    const exited = await byHand("exit", { timeoutMs: 30_000 });
    assert.deepEqual(exited.codes, [0, 3], exited.output);
    assert.ok(exited.zero, exited.output);
    assert.match(
      exited.zero.message,
      /^allGather #0 of int32 \[4\] on rank 0: rank 1 is gone: its connection closed/,
    );
    assert.deepEqual(exited.zero.ranks, [1]);
    assert.ok(exited.zero.ms < 20_000, `took ${exited.zero.ms} ms`);
    const thrown = await byHand("throw", { timeoutMs: 30_000 });
    assert.deepEqual(thrown.codes, [0, 1], thrown.output);
    assert.ok(thrown.zero, thrown.output);
    assert.match(
      thrown.zero.message,
      /^allGather #0 of int32 \[4\] on rank 0: rank 1 failed: Error: boom from rank 1/,
    );
    assert.deepEqual(thrown.zero.ranks, [1]);
    const left = await byHand("leave", { timeoutMs: 30_000 });
    assert.deepEqual(left.codes, [0, 0], left.output);
    assert.ok(left.zero, left.output);
    assert.match(
      left.zero.message,
      /^allGather #0 of int32 \[4\] on rank 0: rank 1 left the process group \(destroyProcessGroup\) before this call/,
    );
    assert.deepEqual(left.zero.ranks, [1]);
    const hung = await byHand("hang", { timeoutMs: 700, hangMs: 4000 });
    assert.deepEqual(hung.codes, [0, 0], hung.output);
    assert.ok(hung.zero, hung.output);
    assert.match(
      hung.zero.message,
      /^allGather #0 of int32 \[4\] on rank 0: rank 1 did not join within 700 ms: a rank hung, died, or skipped this collective/,
    );
    assert.deepEqual(hung.zero.ranks, [1]);
    assert.ok(hung.zero.ms >= 650 && hung.zero.ms < 3000, `took ${hung.zero.ms} ms`);
  },
});

Deno.test({
  name: "tcp allGatherSync: ranks that never call destroyProcessGroup still exit",
  ...opts,
  fn: async () => {
    const run = await byHand("words", { keepGroup: 1 });
    assert.deepEqual(run.codes, [0, 0], run.output);
    assert.ok(run.zero, run.output);
    assert.deepEqual((run.zero as unknown as Words).equal, Array(8).fill(true));
  },
});

/** What the `unusedAllowed` scenario of tests/distributed_ranks.ts returns. */
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

Deno.test({
  name:
    "tcp DDP findUnusedParameters: a parameter no rank used keeps a null grad and its value; one rank's is averaged",
  ...opts,
  fn: async () => {
    const run = await tcpRun<UnusedAllowed>(DDP_RANKS, 2, "failure", { kind: "unusedAllowed" });
    assert.equal(run.code, 0, run.output);
    for (const r of run.results) {
      assert.ok(r, run.output);
      // Only rank 1 used `extra`: d(sum)/dW = 1, averaged with rank 0's zeros (PyTorch: 0.5).
      assert.equal(r.extraHadGrad, true);
      assert.deepEqual(r.extraWeightGrad, [[0.5, 0.5], [0.5, 0.5]]);
      assert.deepEqual(r.modelBiasGrad, [1, 1, 1]);
      assert.equal(r.extraMoved, true);
      // No rank used `never`: null gradients, and SGD's weight decay and momentum skip it.
      assert.deepEqual(r.neverGradAfterBackward, [null, null]);
      assert.deepEqual(r.neverAfterStep, r.neverBefore);
    }
    assert.deepEqual(run.results[0]!.extraAfterStep, run.results[1]!.extraAfterStep);
  },
});

Deno.test({
  name: "tcp FSDP: different parameter shapes across ranks are an error on every rank",
  ...opts,
  fn: async () => {
    const run = await tcpRun<Failure | string>(RANKS, 2, "fsdpShapes", {});
    assert.equal(run.code, 0, run.output);
    for (const r of run.results) {
      assert.ok(r && typeof r === "object", `${JSON.stringify(r)} ${run.output}`);
      assert.match(r.message, /every rank must wrap a module of the same parameter shapes/);
    }
  },
});

Deno.test("tcp allGatherSync: a peer that never calls fails at timeoutMs; destroy ends the Worker and its sockets", async () => {
  // Rank 0 in this process (the sanitizers, on here, see its Worker and sockets), rank 1 a
  // process that sleeps through the call.
  const dir = await Deno.makeTempDir({ prefix: "multigrad_tcp_sync_" });
  const port = freePort();
  const one = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", RANKS.pathname, `${dir}/r`, "hang", '{"hangMs":4000}'],
    env: { MASTER_ADDR: "127.0.0.1", MASTER_PORT: `${port}`, RANK: "1", WORLD_SIZE: "2" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  try {
    const zero = await tcpBackend({
      rank: 0,
      worldSize: 2,
      initMethod: `tcp://127.0.0.1:${port}`,
      timeoutMs: 300,
    });
    try {
      const header = packHeader({ kind: "allGather", seq: 0, dtype: "int32", shapes: [[2]] });
      const call = { kind: "allGather" as const, seq: 0, dtype: "int32" as const, header };
      const started = performance.now();
      assert.throws(
        () => zero.allGatherSync!(call, Int32Array.of(1, 2)),
        /allGather #0 of int32 \[2\] on rank 0: rank 1 did not join within 300 ms/,
      );
      const ms = performance.now() - started;
      assert.ok(ms >= 250 && ms < 3000, `took ${ms} ms`);
      assert.throws(
        () => zero.allGatherSync!(call, new Int32Array(4097)),
        /at most 4096 words, got 4097/,
      );
    } finally {
      await zero.destroy();
    }
    const out = await one;
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    assert.equal(JSON.parse(await Deno.readTextFile(`${dir}/r.1.json`)), "slept");
  } finally {
    await one.catch(() => {});
    await Deno.remove(dir, { recursive: true });
  }
});
