/**
 * `distributed.nn.functional`: each collective's outputs and input
 * gradients on 2 and 3 cpu ranks, in a sub-group, and on 2 webgpu ranks,
 * against the values computed here from every rank's inputs and loss
 * weights (PyTorch 1.13's backward, quirks included); against PyTorch 1.13
 * itself (gloo fixture); inputs left as they were; float64 central
 * differences of the loss summed over the ranks; bad input as the same clear
 * error on every rank, or on one rank its error and the others' naming it.
 * @module
 */

import assert from "node:assert/strict";
import { distributed } from "../mod.ts";
import { BACKENDS } from "./harness.ts";
import { MPICH_MPIEXEC, mpiRun } from "./mpiexec.ts";
import {
  type Fn,
  FUNCTIONS,
  inputParts,
  type Outcome,
  P,
  part,
  root,
  type UnevenOutcome,
  unevenRows,
  unevenValue,
  unevenWeight,
  weight,
} from "./distributed_nn_ranks.ts";

const RANKS = new URL("./distributed_nn_ranks.ts", import.meta.url);
// Workers and shared memory outlive a test's own ops by design (terminated at its end).
const opts = { sanitizeOps: false, sanitizeResources: false };

const zeros = () => Array.from({ length: P }, () => 0);
const range = (n: number) => Array.from({ length: n }, (_, q) => q);
/** Elementwise combination of parts. */
const combine = (parts: number[][], f: (values: number[]) => number) =>
  range(P).map((i) => f(parts.map((p) => p[i])));
const sum = (parts: number[][]) => combine(parts, (v) => v.reduce((a, b) => a + b, 0));

/** Rank r's outputs and input gradients under 1.13's forward and backward, from every rank's data. */
function expected(fn: Fn, r: number, n: number): { out: number[][]; grad: number[][] } {
  const x = (q: number, k: number) => part(fn, q, k);
  const w = (q: number, k: number) => weight(fn, q, k);
  const s = root(fn, n);
  const all = (f: (q: number) => number[]) => range(n).map(f);
  switch (fn) {
    case "broadcast":
      // Only the source gets the summed gradient; the others' is zeroed.
      return { out: [x(s, 0)], grad: [r === s ? sum(all((q) => w(q, 0))) : zeros()] };
    case "gather":
      return { out: r === s ? all((q) => x(q, 0)) : all(zeros), grad: [w(s, r)] };
    case "scatter":
      return { out: [x(s, r)], grad: r === s ? all((j) => w(j, 0)) : all(zeros) };
    case "reduce":
      // Every rank gets the destination's gradient; its own use of its output adds nothing.
      return { out: [r === s ? sum(all((q) => x(q, 0))) : x(r, 0)], grad: [w(s, 0)] };
    case "reduceScatter":
      return { out: [sum(all((q) => x(q, r)))], grad: all((j) => w(j, 0)) };
    case "allGather":
      return { out: all((q) => x(q, 0)), grad: [sum(all((q) => w(q, r)))] };
    case "allToAll":
    case "allToAllSingle":
      return { out: all((q) => x(q, r)), grad: all((j) => w(j, r)) };
    case "allReduce":
      return { out: [sum(all((q) => x(q, 0)))], grad: [sum(all((q) => w(q, 0)))] };
    case "allReduceAvg":
      return {
        out: [sum(all((q) => x(q, 0))).map((v) => v / n)],
        grad: [sum(all((q) => w(q, 0))).map((v) => v / n)],
      };
    case "allReduceMax":
      // 1.13's backward: the all-reduce (max) of the gradients, not the derivative.
      return {
        out: [combine(all((q) => x(q, 0)), (v) => Math.max(...v))],
        grad: [combine(all((q) => w(q, 0)), (v) => Math.max(...v))],
      };
  }
}

function close(got: number[][], want: number[][], what: string): void {
  assert.equal(got.length, want.length, `${what}: ${got.length} parts, expected ${want.length}`);
  got.forEach((p, k) =>
    p.forEach((v, i) =>
      assert.ok(
        Math.abs(v - want[k][i]) <= 1e-6,
        `${what}: part ${k} element ${i} is ${v}, expected ${want[k][i]}`,
      )
    )
  );
}

function check(results: Partial<Record<Fn, Outcome>>[], n: number): void {
  assert.equal(results.length, n);
  results.forEach((result, r) => {
    for (const fn of FUNCTIONS) {
      const got = result[fn]!;
      const want = expected(fn, r, n);
      close(got.out, want.out, `${fn} on rank ${r} of ${n}: output`);
      close(got.grad, want.grad, `${fn} on rank ${r} of ${n}: gradient`);
      const inputs = range(inputParts(fn, n)).map((k) => part(fn, r, k));
      // + 0: results that came as JSON (from mpiexec's ranks) have 0 for -0.
      const plus0 = (parts: number[][]) => parts.map((p) => p.map((v) => v + 0));
      assert.deepEqual(
        plus0(got.after),
        plus0(inputs),
        `${fn} on rank ${r} of ${n} changed its input`,
      );
    }
  });
}

for (const n of [2, 3]) {
  Deno.test({
    name:
      `distributed.nn.functional: outputs and 1.13's gradients of every collective [${n} cpu ranks]`,
    ...opts,
    fn: async () => {
      const results = await distributed.spawn<Partial<Record<Fn, Outcome>>>(RANKS, {
        nprocs: n,
        args: ["gradients", { backend: "cpu" }],
      });
      check(results, n);
    },
  });
}

Deno.test({
  name:
    "distributed.nn.functional: every collective within a sub-group (ranks [0, 2] of 3; src and dst whole-group ranks)",
  ...opts,
  fn: async () => {
    const members = [0, 2];
    const results = await distributed.spawn<Partial<Record<Fn, Outcome>> | null>(RANKS, {
      nprocs: 3,
      args: ["group", { members }],
    });
    assert.equal(results[1], null);
    // Group rank g is whole-group rank members[g]: the 2-rank values, by group rank.
    check(members.map((q) => results[q]!), 2);
  },
});

Deno.test({
  name:
    "distributed.nn.functional: outputs and 1.13's gradients of every collective [2 webgpu ranks]",
  ignore: !BACKENDS.has("webgpu"),
  ...opts,
  fn: async () => {
    const results = await distributed.spawn<Partial<Record<Fn, Outcome>>>(RANKS, {
      nprocs: 2,
      args: ["gradients", { backend: "webgpu" }],
    });
    check(results, 2);
    for (const r of results) {
      for (const fn of FUNCTIONS) assert.match(r[fn]!.device, /^webgpu/);
    }
  },
});

/**
 * Spawns 2 cpu ranks running `scenario` and asserts each function's worst difference on every
 * rank below 1e-6: every function but allReduce with max, whose 1.13 backward is not its
 * derivative.
 */
async function assertWorstBelow(scenario: string, what: string): Promise<void> {
  const results = await distributed.spawn<Partial<Record<Fn, number>>>(RANKS, {
    nprocs: 2,
    args: [scenario, {}],
  });
  results.forEach((worst, r) => {
    assert.equal(Object.keys(worst).length, FUNCTIONS.length - 1);
    for (const [fn, error] of Object.entries(worst)) {
      assert.ok(error < 1e-6, `${fn} on rank ${r}: ${what} off by ${error}`);
    }
  });
}

Deno.test({
  name: "distributed.nn.functional: float64 central differences of the summed loss [2 cpu ranks]",
  ...opts,
  fn: () => assertWorstBelow("finiteDifferences", "gradient (against its central difference)"),
});

Deno.test({
  name:
    "distributed.nn.functional: double backward (Hessian-vector products) equals float64 central differences of the summed directional gradient [2 cpu ranks]",
  ...opts,
  fn: () => assertWorstBelow("secondOrder", "Hessian-vector product"),
});

/** One case of tests/fixtures/torch_distributed_nn.json: a rank's inputs, weights, and 1.13's results. */
interface TorchCase {
  x: number[][];
  w: number[][];
  out: number[][];
  grad: number[][];
}

const TORCH = JSON.parse(
  await Deno.readTextFile(new URL("./fixtures/torch_distributed_nn.json", import.meta.url)),
) as { P: number; cases: number } & Record<string, Record<string, TorchCase[]>[]>;

for (const n of [2, 3]) {
  Deno.test({
    name:
      `distributed.nn.functional: PyTorch 1.13's outputs and gradients (gloo fixture) [${n} cpu ranks]`,
    ...opts,
    fn: async () => {
      assert.equal(TORCH.P, P);
      const ranks = TORCH[String(n)];
      const got = await distributed.spawn<Record<string, Outcome[]>>(RANKS, {
        nprocs: n,
        args: ["torch", { ranks }],
      });
      let compared = 0;
      got.forEach((mine, r) => {
        for (const [fn, cases] of Object.entries(ranks[r])) {
          cases.forEach((c, i) => {
            const what = `${fn} case ${i} on rank ${r} of ${n}`;
            // gloo leaves partial sums in reduce's non-destination outputs; ours keep the input.
            if (!(fn === "reduce" && r !== n - 1)) close(mine[fn][i].out, c.out, `${what}: output`);
            close(mine[fn][i].grad, c.grad, `${what}: gradient`);
            assert.deepEqual(mine[fn][i].after, c.x, `${what} changed its input`);
            compared++;
          });
        }
      });
      assert.equal(compared, n * Object.keys(ranks[0]).length * TORCH.cases);
    },
  });
}

for (const kind of ["reduceScatter", "allGather"]) {
  Deno.test({
    name:
      `distributed.nn.functional: bad input is the same clear error on every rank (${kind} mismatch last)`,
    ...opts,
    fn: async () => {
      const n = 2;
      const results = await distributed.spawn<Record<string, { message: string }>>(RANKS, {
        nprocs: n,
        args: ["badInput", { kind }],
        timeoutMs: 20_000,
      });
      const patterns: Record<string, RegExp> = {
        srcRange: /^broadcast: src must be a rank in \[0, 2\), got 2/,
        dstRange: /^gather: dst must be a rank in \[0, 2\), got -1/,
        reduceDst: /^reduce: dst must be a rank in \[0, 2\), got 1\.5/,
        scatterLength: /^scatter: tensors must hold one tensor per rank of the group \(2\), got 3/,
        scatterShapes:
          /^scatter: every tensor of tensors must be float32 \[1\] on .* but tensors\[1\] is float32 \[2\]/,
        reduceScatterLength:
          /^reduceScatter: inputList must hold one tensor per rank of the group \(2\), got 1/,
        reduceScatterShape:
          /^reduceScatter: every tensor of inputList must be output's float32 \[1\] .*got float32 \[2\]/,
        allToAllLength:
          /^allToAll: inputTensorList must hold one tensor per rank of the group \(2\), got 1/,
        uneven:
          /^allToAllSingle: inputSplitSizes \[4, 1\] must be 2 whole numbers \(one per rank\) that sum to input's dim 0, but input is \[4\]/,
        op: /^allReduce: op must be one of .*got "mean"/,
        notTensor: /^allGather: tensor must be a Tensor, got object/,
        ok: /^1$/,
        mismatch: kind === "allGather"
          ? /collective mismatch.*rank 0 called allGather #\d+ of float32 \[1\]; rank 1 called allGather #\d+ of float32 \[2\]/
          : /collective mismatch.*rank 0 called reduceScatter #\d+ \(sum\) of float32 \[2, 1\]; rank 1 called reduceScatter #\d+ \(sum\) of float32 \[2, 2\]/,
      };
      for (const [r, got] of results.entries()) {
        assert.deepEqual(Object.keys(got).sort(), Object.keys(patterns).sort());
        for (const [key, pattern] of Object.entries(patterns)) {
          assert.match(got[key].message, pattern, `${key} on rank ${r}`);
        }
      }
      assert.equal(results[0].mismatch.message, results[1].mismatch.message);
    },
  });
}

Deno.test({
  name:
    "distributed.nn.functional: a list of the wrong length on one rank only: its error at once, the other's naming it",
  ...opts,
  fn: async () => {
    const started = performance.now();
    const [r0, r1] = await distributed.spawn<{ message: string; ranks?: number[] }>(RANKS, {
      nprocs: 2,
      args: ["oneRankBad", {}],
      timeoutMs: 20_000,
    });
    assert.match(
      r1.message,
      /^scatter: tensors must hold one tensor per rank of the group \(2\), got 3/,
    );
    assert.match(r0.message, /scatter #0 .* rank 1 left the process group/);
    assert.deepEqual(r0.ranks, [1]);
    // Well within the 20 s timeout: rank 1's leaving ends the wait.
    assert.ok(performance.now() - started < 15_000);
  },
});

Deno.test({
  name:
    "distributed.nn.functional: a rank that skips the backward fails the others' backward, naming it",
  ...opts,
  fn: async () => {
    const [r0] = await distributed.spawn<{ message: string; ranks?: number[] }>(RANKS, {
      nprocs: 2,
      args: ["skipBackward", {}],
      timeoutMs: 20_000,
    });
    assert.match(r0.message, /allReduce #1 .*rank 1 left the process group/);
    assert.deepEqual(r0.ranks, [1]);
  },
});

/** The uneven all-to-alls' outputs, gradients and mismatch error on every rank (see `uneven`). */
function checkUneven(results: readonly UnevenOutcome[]): void {
  const n = results.length;
  // Rank q's elements for rank r start after those it sends to ranks before r.
  const start = (q: number, r: number) => 2 * range(r).reduce((a, p) => a + unevenRows(q, p), 0);
  const sent = (q: number, r: number) =>
    range(2 * unevenRows(q, r)).map((k) => unevenValue(q, start(q, r) + k));
  // The weight rank r's output gives element k of the part from q: after the parts from ranks before q.
  const weightsFor = (q: number, r: number) =>
    range(2 * unevenRows(q, r)).map((k) => unevenWeight(r, start2(r, q) + k));
  const start2 = (r: number, q: number) => 2 * range(q).reduce((a, p) => a + unevenRows(p, r), 0);
  assert.ok(range(n).some((q) => range(n).some((r) => unevenRows(q, r) === 0)), "an empty part");
  for (const [r, got] of results.entries()) {
    const out = range(n).map((q) => sent(q, r));
    const grad = range(n).map((q) => weightsFor(r, q));
    assert.deepEqual(got.single.out, out.flat(), `single output on rank ${r}`);
    assert.deepEqual(got.single.grad, grad.flat(), `single gradient on rank ${r}`);
    assert.deepEqual(got.list.out, out, `list outputs on rank ${r}`);
    assert.deepEqual(got.list.outShapes, range(n).map((q) => [2 * unevenRows(q, r)]));
    assert.deepEqual(got.list.grad, grad, `list gradients on rank ${r}`);
    assert.match(
      got.mismatch.message,
      new RegExp(
        `allToAllSingle: the parts do not match across ranks .*rank ${n - 1} sends ${
          2 * unevenRows(n - 1, 0)
        } elements to rank 0, which expects ${2 * unevenRows(n - 1, 0) + 2}`,
      ),
    );
    assert.deepEqual(got.mismatch.ranks, [0, n - 1]);
  }
}

Deno.test({
  name:
    "distributed.nn.functional: uneven all-to-alls (split sizes, per-part shapes, empty parts) and their backward on 3 ranks; counts that disagree are one error on every rank",
  ...opts,
  fn: async () => {
    const results = await distributed.spawn<UnevenOutcome>(RANKS, {
      nprocs: 3,
      args: ["uneven", { backend: "cpu" }],
      timeoutMs: 30_000,
    });
    checkUneven(results);
  },
});

Deno.test({
  name:
    "distributed.nn.functional under mpiexec -n 2: every collective's outputs and gradients; uneven all-to-alls and their mismatch error",
  ignore: !MPICH_MPIEXEC,
  ...opts,
  fn: async () => {
    const run = await mpiRun<{ gradients: Partial<Record<Fn, Outcome>>; uneven: UnevenOutcome }>(
      RANKS,
      2,
      "mpi",
      {},
    );
    assert.equal(run.code, 0, run.output);
    const results = run.results.map((r, rank) => {
      assert.ok(r, `rank ${rank} wrote no result: ${run.output}`);
      return r;
    });
    check(results.map((r) => r.gradients), 2);
    checkUneven(results.map((r) => r.uneven));
  },
});
