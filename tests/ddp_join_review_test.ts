/**
 * Review of `DistributedDataParallel.join` / `distributed.algorithms.Join`
 * beyond tests/ddp_join_test.ts: a join in a sub-group, with a
 * communication hook, with evaluation forwards under `noGrad` (PyTorch
 * 1.13's gloo DDP aborts there: its joined rank shadows a gradient
 * all-reduce that never comes), a rank whose loop throws, and -0 in a
 * buffer broadcast during the join. The sub-group, hook and plain cases
 * were compared with PyTorch 1.13 gloo DDP by a throwaway script (worst
 * 3e-8); here they are checked against each other.
 * @module
 */

import assert from "node:assert/strict";
import { distributed } from "../mod.ts";
import type { ReviewTrained, ReviewTrainOptions } from "./ddp_join_review_ranks.ts";
import { BACKENDS } from "./harness.ts";

const RANKS = new URL("./ddp_join_review_ranks.ts", import.meta.url);

interface FixtureCase extends ReviewTrainOptions {
  divide: boolean;
  final: (Record<string, number[]> | null)[];
}
const FIXTURE = JSON.parse(
  await Deno.readTextFile(new URL("./fixtures/torch_ddp_join_review.json", import.meta.url)),
) as { cases: FixtureCase[] };
// Workers and shared memory outlive a test's own ops by design (terminated at its end).
const opts = { sanitizeOps: false, sanitizeResources: false };

function train(o: ReviewTrainOptions, nprocs = o.counts.length): Promise<ReviewTrained[]> {
  return distributed.spawn<ReviewTrained>(RANKS, {
    nprocs,
    args: ["train", o],
    timeoutMs: 20_000,
  });
}

function assertClose(
  got: Record<string, number[]> | undefined,
  expected: Record<string, number[]> | undefined,
  what: string,
  tolerance = 1e-6,
): void {
  assert.ok(got && expected, what);
  assert.deepEqual(Object.keys(got).sort(), Object.keys(expected).sort(), what);
  for (const [k, values] of Object.entries(expected)) {
    values.forEach((v, i) => {
      assert.ok(
        Math.abs(got[k][i] - v) <= tolerance * (1 + Math.abs(v)),
        `${what}: ${k}[${i}] = ${got[k][i]}, expected ${v}`,
      );
    });
  }
}

function noErrors(ranks: readonly ReviewTrained[], what: string): void {
  ranks.forEach((r, q) => assert.equal(r.error, undefined, `${what}: rank ${q}`));
}

Deno.test({
  name:
    "ddp.join equals PyTorch 1.13 gloo: sub-group, allreduceHook, noSync accumulation, BatchNorm",
  ...opts,
  fn: async () => {
    assert.equal(FIXTURE.cases.length, 5);
    for (const c of FIXTURE.cases) {
      const { final, ...o } = c;
      const what = JSON.stringify(o);
      const ranks = await train(o);
      noErrors(ranks, what);
      ranks.forEach((r, q) => {
        if (final[q] === null) assert.equal(r.state, undefined, what);
        else assertClose(r.state, final[q]!, `${what}, rank ${q}`, 1e-5);
      });
    }
  },
});

Deno.test({
  name: "ddp.join in a sub-group of 3 ranks trains as a 2-rank world on the same data",
  ...opts,
  fn: async () => {
    for (const divide of [true, false]) {
      const sub = await train({ counts: [2, 0, 4], group: [0, 2], divide });
      const world = await train({ counts: [2, 4], dataOf: [0, 2], divide });
      noErrors([...sub, ...world], `divide ${divide}`);
      assert.equal(sub[1].state, undefined);
      assert.deepEqual(sub[0].state, sub[2].state);
      assertClose(sub[0].state, world[0].state, `sub-group, divide ${divide}`);
    }
  },
});

Deno.test({
  name: "ddp.join with allreduceHook equals the default reduction (divided by the world size)",
  ...opts,
  fn: async () => {
    const plain = await train({ counts: [2, 4, 3] });
    const others = await train({ counts: [2, 4, 3], divide: false });
    noErrors([...plain, ...others], "no hook");
    // Both modes differ without a hook, so the comparison below can tell them apart.
    assert.notDeepEqual(plain[0].state, others[0].state);
    for (const divide of [true, false]) {
      // As PyTorch: a hook does its own division (allreduceHook: by the group's size).
      const hooked = await train({ counts: [2, 4, 3], hook: true, divide });
      noErrors(hooked, `hook, divide ${divide}`);
      hooked.forEach((r) => assert.deepEqual(r.state, hooked[0].state));
      assertClose(hooked[0].state, plain[0].state, `hook, divide ${divide}`);
    }
  },
});

Deno.test({
  name: "ddp.join: evaluation forwards under noGrad do not make joined ranks shadow a backward",
  ...opts,
  fn: async () => {
    const plain = await train({ counts: [1, 4, 2], divide: false });
    const evaluated = await train({ counts: [1, 4, 2], divide: false, evaluate: true });
    noErrors([...plain, ...evaluated], "evaluate");
    evaluated.forEach((r) => assert.deepEqual(r.state, plain[0].state));
  },
});

Deno.test({
  name: "ddp.join: a rank whose loop throws fails the others with an error naming it, no hang",
  ...opts,
  fn: async () => {
    const ranks = await train({ counts: [2, 4, 3], throwOn: 1 });
    assert.equal(ranks[1].error, "rank 1: bad batch");
    for (const q of [0, 2]) assert.match(ranks[q].error ?? "", /rank 1 left the process group/);
  },
});

Deno.test({
  name:
    "ddp.join: buffers broadcast from the active rank keep -0 (float32 on cpu and webgpu, float64)",
  ...opts,
  fn: async () => {
    for (const backend of BACKENDS.keys()) {
      for (const counts of [[1, 3], [3, 1, 2]]) {
        const ranks = await distributed.spawn<boolean[]>(RANKS, {
          nprocs: counts.length,
          args: ["negativeZero", { counts, backend }],
        });
        for (const signs of ranks) {
          const second = backend === "cpu" ? [true, false] : [false, false];
          assert.deepEqual(signs, [true, false, true, false, ...second], backend);
        }
      }
    }
  },
});

Deno.test({
  name:
    "Join: a joinable listed twice or setStaticGraph inside a join is a clear error; staticGraph's blocked exchange names staticGraph",
  ...opts,
  fn: async () => {
    const ranks = await distributed.spawn<string[]>(RANKS, {
      nprocs: 2,
      args: ["misuse"],
      timeoutMs: 5_000,
    });
    for (const messages of ranks) {
      assert.match(messages[0], /joinable 1 is joinable 0 again/);
    }
    assert.match(ranks[1][1], /setStaticGraph: not inside a running join/);
    assert.match(
      ranks[1][2],
      // Rank 0 has returned; on a loaded machine its exit may reach rank 1 only after the timeout.
      /rank 0 (left|did not join).*DistributedDataParallel \(staticGraph\) blocked rank 1/,
    );
  },
});

Deno.test({
  name: "ddp.join: a join runs with its own divide mode, whatever joins were built after it",
  ...opts,
  fn: async () => {
    for (const divide of [true, false]) {
      const alone = await train({ counts: [3, 1, 2], divide });
      const built = await train({ counts: [3, 1, 2], divide, secondJoin: true });
      noErrors([...alone, ...built], `divide ${divide}`);
      built.forEach((r) => assert.deepEqual(r.state, alone[0].state, `divide ${divide}`));
    }
  },
});
