/**
 * Review of the Join leftovers: a ZeroRedundancyOptimizer stepped after a
 * `noSync` forward of its DistributedDataParallel while a rank has joined
 * (joined ranks' optimizers do not step for it) fails every rank with an
 * error naming the ranks, not a bare collective mismatch; before any rank
 * has joined it trains. Over spawned Workers and the tcp launcher.
 * @module
 */

import assert from "node:assert/strict";
import { distributed } from "../mod.ts";
import { tcpRun } from "./tcprun.ts";

const RANKS = new URL("./fsdp_join_rest_review_ranks.ts", import.meta.url);
// Workers and shared memory outlive a test's own ops by design (terminated at its end).
const opts = { sanitizeOps: false, sanitizeResources: false };

async function ranksOf(launcher: "spawn" | "tcp", batches: number[]): Promise<string[][]> {
  if (launcher === "spawn") {
    return await distributed.spawn<string[]>(RANKS, {
      nprocs: batches.length,
      args: ["stepAfterNoSync", { batches }],
      timeoutMs: 30_000,
    });
  }
  const run = await tcpRun<string[]>(RANKS, batches.length, "stepAfterNoSync", { batches });
  return run.results.map((r, q) => {
    assert.ok(r, `tcp: rank ${q} wrote no result (exit code ${run.code}): ${run.output}`);
    return r;
  });
}

Deno.test({
  name:
    "Join.run([ddp, zero]): a step after a noSync backward while a rank has joined fails every rank naming the ranks",
  ...opts,
  fn: async () => {
    for (const launcher of ["spawn", "tcp"] as const) {
      // [1, 3]: rank 0 joins after batch 0, rank 1 steps after its noSync batch 1.
      for (const batches of [[1, 3], [2, 4]]) {
        const ranks = await ranksOf(launcher, batches);
        for (const [q, [error]] of ranks.entries()) {
          assert.match(
            error,
            /Join: rank\(s\) 1 stepped a ZeroRedundancyOptimizer after a DistributedDataParallel forward under noSync or noGrad \(no synchronised backward\) while rank\(s\) 0 had joined/,
            `${launcher}, batches ${batches}, rank ${q}`,
          );
        }
      }
      // Nobody has joined when the ranks step after noSync: it trains.
      const ranks = await ranksOf(launcher, [3, 2]);
      assert.deepEqual(ranks, [["ok"], ["ok"]], launcher);
      // Three ranks: one or two joined, the others stepped (every rank names them alike; on a
      // rank that stepped, the ZeRO step's broadcasts fail with it).
      const three: [number[], string, string][] = [[[1, 3, 1], "1", "0, 2"], [
        [1, 3, 3],
        "1, 2",
        "0",
      ]];
      for (const [batches, stepped, joined] of three) {
        for (const [q, [error]] of (await ranksOf(launcher, batches)).entries()) {
          assert.match(
            error,
            new RegExp(
              `Join: rank\\(s\\) ${stepped} stepped a ZeroRedundancyOptimizer .* while rank\\(s\\) ${joined} had joined:`,
            ),
            `${launcher}, batches ${batches}, rank ${q}`,
          );
        }
      }
    }
  },
});

Deno.test({
  name:
    "ddp.joinHook() asked for without a Join, even with { enable: true }, leaves the buffers' source at rank 0 (PyTorch's join_hook sets no join config)",
  ...opts,
  fn: async () => {
    const ranks = await distributed.spawn<string[]>(RANKS, {
      nprocs: 2,
      args: ["hookWithoutJoin", {}],
      timeoutMs: 30_000,
    });
    assert.notEqual(ranks[0][0], ranks[1][0], "the ranks' buffers differ after the first forward");
    for (const [q, [, second]] of ranks.entries()) assert.equal(second, ranks[0][0], `rank ${q}`);
  },
});
