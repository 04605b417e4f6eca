/**
 * The `"tcp"` group's large all-reduces (ring / two-rank segments), queued
 * without awaiting as DDP's buckets are, interleaved with the main thread's
 * other collectives, the blocking all-gather (its own Worker stream) and a
 * sub-group's: they must keep the order of every collective, every dtype
 * and op, and a mismatch must be the same error on every rank.
 * @module
 */

import assert from "node:assert/strict";
import { tcpRun } from "./tcprun.ts";
import type { Order } from "./tcp_overlap_ranks.ts";

const RANKS = new URL("./tcp_overlap_ranks.ts", import.meta.url);
// The ranks are processes; the test's own ops are the launcher's pipes.
const opts = { sanitizeOps: false, sanitizeResources: false };

interface Failure {
  message: string;
  ranks: number[];
  ms: number;
}

Deno.test({
  name:
    "tcp overlap: queued large all-reduces, broadcasts, int32 ops, float64 avg, blocking all-gathers and a sub-group's keep their order and values",
  ...opts,
  fn: async () => {
    for (const n of [2, 3]) {
      const run = await tcpRun<Order>(RANKS, n, "order", {});
      assert.equal(run.code, 0, run.output);
      run.results.forEach((r, rank) => {
        assert.ok(r, `rank ${rank} of ${n} wrote no result: ${run.output}`);
        assert.deepEqual(r.sums, [0, 0, 0, 0, 0, 0], `float32 sums of ${n} ranks`);
        assert.deepEqual(r.ints, [0, 0, 0, 0, 0, 0], "int32 max, min, product, band, bor, bxor");
        assert.equal(r.avg, 0, "float64 avg");
        assert.equal(r.bits, 0, "float32 fractions, added in the ring's order");
        // Broadcast i comes from rank i % n: [10 src + i, -src].
        assert.deepEqual(
          r.broadcasts,
          // 0 - x: a source rank 0's -0 comes back from JSON as 0.
          Array.from({ length: 6 }, (_, i) => [(i % n) * 10 + i, 0 - (i % n)]),
        );
        assert.deepEqual(r.gathers, [true, true, true]);
        assert.equal(r.sub, n === 3 && rank > 0 ? 0 : -1, "the sub-group [1, 2]'s sum");
      });
    }
  },
});

Deno.test({
  name: "tcp overlap: a sub-group's large all-reduce while the whole group's is in flight",
  ...opts,
  fn: async () => {
    const run = await tcpRun<{ sub: number; world: number }>(RANKS, 3, "subOnly", {});
    assert.equal(run.code, 0, run.output);
    run.results.forEach((r, rank) => {
      assert.ok(r, `rank ${rank} wrote no result: ${run.output}`);
      assert.deepEqual(r, { sub: rank === 1 ? -1 : 0, world: 0 });
    });
  },
});

Deno.test({
  name: "tcp overlap: a large all-reduce's different op is the same error on every rank",
  ...opts,
  fn: async () => {
    for (const n of [2, 3]) {
      const op = await tcpRun<Failure>(RANKS, n, "mismatch", {});
      assert.equal(op.code, 0, op.output);
      op.results.forEach((r, rank) => {
        assert.ok(r, `rank ${rank} of ${n}: ${op.output}`);
        assert.match(
          r.message,
          /^collective mismatch: .*ranks? 0(, 2)? called allReduce #0 \(sum\) of float32 \[262147\]; rank 1 called allReduce #0 \(max\) of float32 \[262147\]/,
        );
        assert.deepEqual(r.ranks, [1]);
      });
    }
  },
});
