/**
 * The `"tcp"` group's large all-reduces (ring / two-rank segments), queued
 * without awaiting as DDP's buckets are, interleaved with the main thread's
 * other collectives, the blocking all-gather (its own Worker stream) and a
 * sub-group's: they must keep the order of every collective, every dtype
 * and op, and a mismatch must be the same error on every rank.
 * @module
 */

import assert from "node:assert/strict";
import { BACKENDS } from "./harness.ts";
import { freePort, tcpRun } from "./tcprun.ts";
import type { BigDdp, Order } from "./tcp_overlap_ranks.ts";

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

/**
 * Runs the `n` ranks of `scenario` as processes by hand (no launcher to stop the survivors),
 * with `env(rank)` over the defaults (the master on 127.0.0.1).
 */
async function byHand<R = Failure>(
  scenario: string,
  options: Record<string, number>,
  n: number,
  env: (rank: number) => Record<string, string> = () => ({}),
) {
  const dir = await Deno.makeTempDir({ prefix: "multigrad_tcp_overlap_" });
  try {
    const port = String(freePort());
    const outputs = await Promise.all(
      Array.from({ length: n }, (_, rank) =>
        new Deno.Command(Deno.execPath(), {
          args: ["run", "-A", RANKS.pathname, `${dir}/r`, scenario, JSON.stringify(options)],
          env: {
            MASTER_ADDR: "127.0.0.1",
            MASTER_PORT: port,
            RANK: `${rank}`,
            WORLD_SIZE: `${n}`,
            ...env(rank),
          },
          stdout: "piped",
          stderr: "piped",
          // A rank that never ends fails the test instead of hanging it.
          signal: AbortSignal.timeout(60_000),
        }).output()),
    );
    const decoder = new TextDecoder();
    const results = await Promise.all(
      outputs.map(async (_, rank) =>
        JSON.parse(await Deno.readTextFile(`${dir}/r.${rank}.json`).catch(() => "null")) as
          | R
          | null
      ),
    );
    return {
      codes: outputs.map((o) => o.code),
      signals: outputs.map((o) => o.signal),
      output: outputs.map((o) => decoder.decode(o.stdout) + decoder.decode(o.stderr)).join("\n"),
      results,
    };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test({
  name:
    "tcp overlap: a rank SIGKILLed during a 3-rank ring all-reduce fails both others naming it, the one that only sends to it too",
  ...opts,
  fn: async () => {
    // Rank 1 only writes to rank 2 in the ring (rank 0 reads from it): its failed write must
    // word the loss as the failed read does, naming rank 2.
    for (const delayMs of [0, 5]) {
      const killed = await byHand(
        "kill",
        { timeoutMs: 40_000, delayMs, elements: 4_000_000, victim: 2 },
        3,
      );
      assert.equal(killed.signals[2], "SIGKILL", killed.output);
      for (const rank of [0, 1]) {
        assert.equal(killed.codes[rank], 0, killed.output);
        const r = killed.results[rank];
        assert.ok(r && typeof r === "object", `rank ${rank}: ${killed.output}`);
        assert.match(
          r.message,
          new RegExp(
            `^allReduce #0 \\(sum\\) of float32 \\[4000000\\] on rank ${rank}: rank 2 is gone: its connection closed`,
          ),
          `rank ${rank}, delay ${delayMs} ms: ${r.message}`,
        );
        assert.deepEqual(r.ranks, [2], `rank ${rank}`);
        assert.ok(r.ms < 30_000, `rank ${rank} took ${r.ms} ms`);
      }
    }
  },
});

Deno.test({
  name:
    "tcp overlap: a large all-reduce of a longer array on one rank is the same error on every rank",
  ...opts,
  fn: async () => {
    for (const n of [2, 3]) {
      const longer = await tcpRun<Failure>(RANKS, n, "mismatch", { longer: 1 });
      assert.equal(longer.code, 0, longer.output);
      longer.results.forEach((r, rank) => {
        assert.ok(r, `rank ${rank} of ${n}: ${longer.output}`);
        assert.match(
          r.message,
          /^collective mismatch: .*ranks? 0(, 2)? called allReduce #0 \(sum\) of float32 \[262147\]; rank 1 called allReduce #0 \(sum\) of float32 \[262148\]/,
          `rank ${rank} of ${n}`,
        );
        assert.deepEqual(r.ranks, [1]);
      });
    }
    // Two ranks on either side of RING_BYTES: one takes the segmented (SIMD) path, one the small.
    const crossing = await tcpRun<Failure>(RANKS, 2, "mismatch", { longer: 1, crossing: 1 });
    assert.equal(crossing.code, 0, crossing.output);
    crossing.results.forEach((r, rank) => {
      assert.ok(r, `rank ${rank}: ${crossing.output}`);
      assert.match(
        r.message,
        /^collective mismatch: .*rank 0 called allReduce #0 \(sum\) of float32 \[65536\]; rank 1 called allReduce #0 \(sum\) of float32 \[65535\]/,
        `rank ${rank}`,
      );
    });
  },
});

Deno.test({
  name:
    "tcp overlap: DDP's large float32 buckets between 2 ranks (SIMD in a reduce area) train as one process, the same bits on both ranks",
  ...opts,
  fn: async () => {
    // One bucket of two layers; then 1 MiB first and one layer per bucket (two of one length).
    // (3 ranks' ring area is the path of the 3-process sums in distributed_test.ts.)
    const cases: Record<string, number>[] = [{}, { layers: 6, bucketCapMB: 0.26 }];
    if (BACKENDS.has("webgpu")) cases.push({ webgpu: 1 });
    for (const options of cases) {
      const run = await tcpRun<BigDdp>(RANKS, options.ranks ?? 2, "ddpBig", options);
      assert.equal(run.code, 0, run.output);
      const [r0, ...rest] = run.results;
      assert.ok(r0 && rest.every((r) => r), run.output);
      assert.ok(r0.numel * 4 > 2 * 256 * 1024, `${r0.numel} elements`);
      for (const r of rest) assert.equal(r!.bits, r0.bits, "every rank holds the same bits");
      for (const r of run.results) assert.ok(r!.maxDiff < 1e-5, `${r!.maxDiff} from one process`);
    }
  },
});

Deno.test({
  name:
    "tcp overlap: a rank SIGKILLed while DDP's large bucket is reduced fails the other naming it",
  ...opts,
  fn: async () => {
    // 64 layers: 17 MB of gradients, far from sent when the victim dies.
    for (const delayMs of [0, 2]) {
      const options = { timeoutMs: 40_000, delayMs, victim: 1, layers: 64 };
      const killed = await byHand("ddpKill", options, 2);
      assert.equal(killed.signals[1], "SIGKILL", killed.output);
      assert.equal(killed.codes[0], 0, killed.output);
      const r = killed.results[0];
      assert.ok(r && typeof r === "object", killed.output);
      assert.match(r.message, /on rank 0: rank 1 is gone: its connection closed/, r.message);
      assert.deepEqual(r.ranks, [1]);
      assert.ok(r.ms < 30_000, `took ${r.ms} ms`);
    }
  },
});

/** This machine's first non-internal IPv4 address, or null. */
function externalAddress(): string | null {
  return Deno.networkInterfaces().find((i) => i.family === "IPv4" && !i.address.startsWith("127."))
    ?.address ?? null;
}

Deno.test({
  name:
    "tcp: ranks at different addresses (the master on this machine's network address, one rank at MULTIGRAD_TCP_HOST=127.0.0.2): collectives and large all-reduces",
  ignore: externalAddress() === null,
  ...opts,
  fn: async () => {
    const master = externalAddress()!;
    // Ranks 0 and 2 find their address themselves (the network one: they listen on every
    // interface); rank 1 says it is at 127.0.0.2, listens only there, and is reached there.
    const run = await byHand<Order>("order", {}, 3, (rank) => ({
      MASTER_ADDR: master,
      ...(rank === 1 ? { MULTIGRAD_TCP_HOST: "127.0.0.2" } : {}),
    }));
    assert.deepEqual(run.codes, [0, 0, 0], run.output);
    run.results.forEach((r, rank) => {
      assert.ok(r, `rank ${rank} wrote no result: ${run.output}`);
      assert.deepEqual(r.sums, [0, 0, 0, 0, 0, 0]);
      assert.deepEqual(r.ints, [0, 0, 0, 0, 0, 0]);
      assert.equal(r.avg, 0);
      assert.equal(r.bits, 0);
      assert.deepEqual(r.gathers, [true, true, true]);
    });
  },
});
