/**
 * Join and launcher leftovers: the order of the joinables (ZeRO before DDP
 * is refused naming both, as PyTorch 1.13 aborts in gloo), `noSync`
 * accumulation with ZeroRedundancyOptimizer in a join (trains as DDP with
 * a plain optimizer, where PyTorch 1.13 hangs once a rank has joined), DDP
 * staticGraph's changed graph failing every rank (not only the one that
 * produced the gradient), over spawned
 * Workers, mpiexec and the tcp launcher; `launch()`'s option checks;
 * `tensor()` of a BigInt64Array.
 * @module
 */

import assert from "node:assert/strict";
import { distributed, tensor } from "../mod.ts";
import { launch, type RunOptions } from "../src/distributed/run.ts";
import { MPICH_MPIEXEC, mpiRun } from "./mpiexec.ts";
import { tcpRun } from "./tcprun.ts";

const RANKS = new URL("./ddp_join_leftovers_ranks.ts", import.meta.url);
// Workers and shared memory outlive a test's own ops by design (terminated at its end).
const opts = { sanitizeOps: false, sanitizeResources: false };

type Launcher = "spawn" | "mpi" | "tcp";
const LAUNCHERS: Launcher[] = MPICH_MPIEXEC ? ["spawn", "mpi", "tcp"] : ["spawn", "tcp"];
if (!MPICH_MPIEXEC) {
  console.warn(
    "MPICH's mpiexec not found: the mpiexec runs of the join leftovers tests are SKIPPED (install it with `apt-get install mpich`)",
  );
}

/** Every rank's messages, the ranks run by `launcher`. */
async function ranksOf(
  launcher: Launcher,
  scenario: string,
  options: Record<string, unknown> = {},
): Promise<string[][]> {
  if (launcher === "spawn") {
    return await distributed.spawn<string[]>(RANKS, {
      nprocs: 2,
      args: [scenario, options],
      timeoutMs: 30_000,
    });
  }
  const run = await (launcher === "mpi" ? mpiRun : tcpRun)<string[]>(RANKS, 2, scenario, options);
  return run.results.map((r, q) => {
    assert.ok(r, `${launcher}: rank ${q} wrote no result (exit code ${run.code}): ${run.output}`);
    return r;
  });
}

Deno.test({
  name:
    "Join: ZeroRedundancyOptimizer before DistributedDataParallel is refused naming both; [ddp, zero] with a user's joinable anywhere else trains",
  ...opts,
  fn: async () => {
    for (const launcher of LAUNCHERS) {
      const ranks = await ranksOf(launcher, "order");
      for (const [q, out] of ranks.entries()) {
        const what = `${launcher} rank ${q}`;
        const refused =
          /Join: joinable (\d) \(ZeroRedundancyOptimizer\) is listed before joinable (\d) \(DistributedDataParallel\); list the DistributedDataParallel first/;
        assert.match(out[0], refused, what);
        assert.deepEqual(out[0].match(refused)!.slice(1), ["0", "1"], what);
        assert.deepEqual(out[1].match(refused)!.slice(1), ["1", "2"], what);
        assert.equal(out[2], "ok", what);
        assert.equal(out[3], "ok", what);
        assert.equal(out[4], `steps ${2 + 2 * q}`, what);
        assert.equal(out[6], `steps ${3 - 2 * q}`, what);
      }
      assert.equal(ranks[0][5], ranks[1][5], `${launcher}: the ranks end equal`);
      assert.equal(ranks[0][7], ranks[1][7], `${launcher}: the ranks end equal (user's first)`);
    }
  },
});

Deno.test({
  name:
    "Join.run([ddp, zero]) with noSync accumulation trains as Join.run([ddp]) with SGD, before and after a rank has joined",
  ...opts,
  fn: async () => {
    for (const launcher of LAUNCHERS) {
      // [1, 3]: rank 0 has joined when rank 1 accumulates; [3, 2]: rank 1's last batch accumulates.
      for (const batches of [[1, 3], [3, 2], [4, 4]]) {
        const ranks = await ranksOf(launcher, "accumulate", { batches });
        const what = `${launcher}, batches ${batches}`;
        for (const [q, [status, zero, sgd]] of ranks.entries()) {
          assert.equal(status, "ok", `${what}, rank ${q}`);
          assert.equal(zero, ranks[0][1], `${what}: rank ${q} ends unlike rank 0`);
          const [a, b] = [JSON.parse(zero) as number[], JSON.parse(sgd) as number[]];
          a.forEach((v, i) =>
            assert.ok(Math.abs(v - b[i]) <= 1e-6, `${what}, rank ${q}: [${i}] ${v} vs SGD ${b[i]}`)
          );
        }
      }
    }
  },
});

Deno.test({
  name:
    "DDP staticGraph: a gradient for a parameter learnt as unused fails every rank, naming it and the rank",
  ...opts,
  fn: async () => {
    for (const launcher of LAUNCHERS) {
      const [zero, one] = await ranksOf(launcher, "staticGraph");
      assert.match(
        zero[0],
        /staticGraph\): spare\.weight got a gradient on rank 1, but no rank used it in the first backward pass/,
        launcher,
      );
      assert.match(
        one[0],
        /rank 1, staticGraph\): spare\.weight, spare\.bias got a gradient, but no rank used it/,
        launcher,
      );
    }
  },
});

const GOOD: RunOptions = {
  nprocPerNode: 1,
  nnodes: 1,
  nodeRank: 0,
  masterAddr: "127.0.0.1",
  masterPort: 29500,
  denoFlags: [],
  script: new URL(import.meta.url).pathname,
  args: [],
};

Deno.test("launch: bad options are errors at the call naming the option and value", async () => {
  const bad = (o: unknown) => launch(o as RunOptions);
  const cases: [unknown, RegExp][] = [
    [{ ...GOOD, nprocPerNode: 0 }, /launch: nprocPerNode must be an integer >= 1, got 0/],
    [{ ...GOOD, nprocPerNode: 1.5 }, /nprocPerNode must be an integer >= 1, got 1\.5/],
    [{ ...GOOD, nprocPerNode: "2" }, /nprocPerNode must be an integer >= 1, got "2"/],
    [{ ...GOOD, nprocs: 2 }, /launch: unknown option nprocs \(the options: nprocPerNode,/],
    [{ ...GOOD, nnodes: 0 }, /nnodes must be an integer >= 1, got 0/],
    [{ ...GOOD, nodeRank: 1 }, /nodeRank must be an integer from 0 to 0, got 1/],
    [{ ...GOOD, masterPort: 70000 }, /masterPort must be an integer from 1 to 65535, got 70000/],
    [{ ...GOOD, masterAddr: 5 }, /masterAddr must be a non-empty string, got 5/],
    [{ ...GOOD, denoFlags: "--v8" }, /denoFlags must be an array of strings, got "--v8"/],
    [{ ...GOOD, args: [1] }, /args must be an array of strings, got an array/],
    [{ ...GOOD, maxRestarts: -1 }, /maxRestarts must be an integer >= 0, got -1/],
    [{ ...GOOD, monitorInterval: -1 }, /monitorInterval must be a number of seconds .*got -1/],
    [{ ...GOOD, standalone: "yes" }, /standalone must be a boolean, got "yes"/],
    [{ ...GOOD, runId: 5 }, /runId must be a string, got 5/],
    [{ ...GOOD, nnodes: 2, maxRestarts: 1 }, /maxRestarts 1 needs nnodes 1/],
    [{ ...GOOD, script: undefined }, /the option script is required/],
    [
      { ...GOOD, script: "/nonexistent/train.ts" },
      /script \/nonexistent\/train\.ts does not exist/,
    ],
    [null, /the options must be an object, got null/],
  ];
  for (const [o, expected] of cases) await assert.rejects(bad(o), expected, JSON.stringify(o));
});

Deno.test("tensor(BigInt64Array / BigUint64Array): int32 when every value fits, else an error", async () => {
  const t = tensor(new BigInt64Array([-(2n ** 31n), 0n, 7n, 2n ** 31n - 1n]));
  assert.equal(t.dtype, "int32");
  assert.deepEqual(await t.toArray(), [-(2 ** 31), 0, 7, 2 ** 31 - 1]);
  const u = tensor(new BigUint64Array([1n, 2n, 3n, 4n]), { shape: [2, 2], dtype: "float32" });
  assert.equal(u.dtype, "float32");
  assert.deepEqual(await u.toArray(), [[1, 2], [3, 4]]);
  assert.throws(
    () => tensor(new BigInt64Array([1n, 2n ** 31n])),
    /tensor: 2147483648 cannot be stored as int32/,
  );
  assert.throws(
    () => tensor(new BigUint64Array([2n ** 40n])),
    /tensor: 1099511627776 cannot be stored as int32/,
  );
});
