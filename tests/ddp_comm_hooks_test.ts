/**
 * DDP communication hooks: `registerCommHook` with allreduceHook (the
 * default's result), a custom hook (buckets, GradBucket's values, noSync,
 * setBuffer), PowerSGD against a single-process reference with the same
 * initial Qs, training with PowerSGD, the errors; 2 cpu ranks (spawned, and
 * once under mpiexec).
 * @module
 */

import assert from "node:assert/strict";
import { distributed, manualSeed, randn, seededRandom } from "../mod.ts";
import { MPICH_MPIEXEC, mpiRun } from "./mpiexec.ts";
import type { PowerOptions, Seen, TorchCase } from "./ddp_comm_hooks_ranks.ts";

const RANKS = new URL("./ddp_comm_hooks_ranks.ts", import.meta.url);
// Workers and shared memory outlive a test's own ops by design (terminated at its end).
const opts = { sanitizeOps: false, sanitizeResources: false };

interface Hooks {
  defaultVsHook: { plain: number[][]; hooked: number[][] }[];
  seen: Seen[];
  scaled: number[][];
  calls: number;
  callsAfterNoSync: number;
  localAccumulated: number[][];
  afterNoSync: number[][];
  setOk: boolean;
  setGrads: number[][];
  plainSetGrads: number[][];
  parameterOrder: string[];
}

// Mixed's parameters: a.weight [16, 6], a.bias [16] (float32), b.weight [3, 16], b.bias [3] (float64).
// Buckets in reverse order, one per dtype: 0 = [b.bias, b.weight], 1 = [a.bias, a.weight].
const BUCKET_PARAMS = [[3, 2], [1, 0]];

/** The per-parameter gradients (model order) from the buckets' flat values. */
function unbucket(flat: number[][], sizes: number[]): number[][] {
  const out: number[][] = [];
  BUCKET_PARAMS.forEach((params, b) => {
    let at = 0;
    for (const p of params) {
      out[p] = flat[b].slice(at, at + sizes[p]);
      at += sizes[p];
    }
  });
  return out;
}

Deno.test({
  name:
    "DDP comm hooks: allreduceHook is the default; a custom hook sees each bucket (reverse order), noSync skips it, setBuffer",
  ...opts,
  fn: async () => {
    const ranks = await distributed.spawn<Hooks>(RANKS, { nprocs: 2, args: ["hooks"] });
    for (const r of ranks) {
      for (const { plain, hooked } of r.defaultVsHook) {
        assert.deepEqual(hooked, plain, "allreduceHook gives DDP's default gradients, bit for bit");
      }
      assert.deepEqual(r.parameterOrder, ["a.weight", "a.bias", "b.weight", "b.bias"]);
      assert.deepEqual(
        r.seen.map((s) => [s.index, s.isLast, s.dtype, s.parameters, s.gradientShapes]),
        [0, 1, 0, 1].map((i) =>
          i === 0
            ? [0, false, "float64", ["b.bias", "b.weight"], [[3], [3, 16]]]
            : [1, true, "float32", ["a.bias", "a.weight"], [[16], [16, 6]]]
        ),
      );
      for (const s of r.seen) {
        assert.deepEqual(s.gradients.flat(), s.buffer, "gradients() are the buffer's pieces");
        assert.ok(s.buffer.some((v) => v !== 0));
      }
      assert.equal(r.callsAfterNoSync, 2, "the hook is not called inside noSync");
      assert.equal(r.calls, 4);
      assert.ok(r.setOk, "buffer() is what setBuffer set");
      assert.deepEqual(r.setGrads, r.plainSetGrads.map((g) => g.map((v) => 2 * v)));
    }
    const sizes = [96, 16, 48, 3];
    const [r0, r1] = ranks;
    // sum over ranks of float64(buffer) * 3, back in the bucket's dtype (float32: fround).
    const expected = (first: number) =>
      unbucket(
        [0, 1].map((b) =>
          r0.seen[first + b].buffer.map((v, j) => {
            const sum = v * 3 + r1.seen[first + b].buffer[j] * 3;
            return b === 1 ? Math.fround(sum) : sum;
          })
        ),
        sizes,
      );
    assert.deepEqual(r0.scaled, expected(0));
    assert.deepEqual(r1.scaled, expected(0));
    assert.deepEqual(r0.afterNoSync, expected(2), "the sum accumulated under noSync is reduced");
    assert.deepEqual(r1.afterNoSync, expected(2));
    // The pass after noSync reduced the local sum of two backward passes.
    assert.notDeepEqual(r0.seen[3].buffer.slice(16), r0.localAccumulated[0]);
    assert.deepEqual(r0.seen[2].buffer.length, 51);
  },
});

// ---- PowerSGD: a single-process reference on the ranks' recorded buffers ----

type Matrix = number[][];

function matrix(flat: number[], n: number, m: number): Matrix {
  return Array.from({ length: n }, (_, i) => flat.slice(i * m, (i + 1) * m));
}

function matmul(a: Matrix, b: Matrix): Matrix {
  return a.map((row) => b[0].map((_, j) => row.reduce((s, v, k) => s + v * b[k][j], 0)));
}

function transpose(a: Matrix): Matrix {
  return a[0].map((_, j) => a.map((row) => row[j]));
}

/** Gram-Schmidt; PyTorch's QR for r > 2 ignores eps (its Q differs at most in column signs). */
function gramSchmidt(a: Matrix, epsilon: number): Matrix {
  const out = a.map((row) => [...row]);
  const r = out[0].length;
  const eps = r > 2 ? 0 : epsilon;
  for (let i = 0; i < r; i++) {
    const norm = Math.sqrt(out.reduce((s, row) => s + row[i] ** 2, 0)) + eps;
    for (const row of out) row[i] /= norm;
    for (let j = i + 1; j < r; j++) {
      const dot = out.reduce((s, row) => s + row[i] * row[j], 0);
      for (const row of out) row[j] -= dot * row[i];
    }
  }
  return out;
}

/** The PowerSGD run of `o` over two ranks' recorded bucket inputs: each step's bucket outputs. */
async function referencePowerSGD(o: PowerOptions, inputs: number[][][][]): Promise<number[][][]> {
  const hidden = o.hidden ?? 16;
  const shapes = [[[3], [3, hidden]], [[hidden], [hidden, 6]]];
  const dtypes = ["float64", "float32"] as const;
  const rng = seededRandom(5);
  const errors = new Map<string, number[]>();
  const qMemory = new Map<number, Matrix[]>();
  let iter = 0;
  const outputs: number[][][] = [];
  for (let s = 0; s < o.steps; s++) {
    outputs.push([]);
    for (let b = 0; b < 2; b++) {
      const locals = [0, 1].map((rank) => inputs[rank][b][s]);
      const last = b === 1;
      if (iter < o.start) {
        outputs[s][b] = locals[0].map((v, j) => v / 2 + locals[1][j] / 2);
        if (last) iter++;
        continue;
      }
      const withError = locals.map((l, rank) => {
        const e = o.errorFeedback ? errors.get(`${rank},${b}`) : undefined;
        return e ? l.map((v, j) => v + e[j]) : l;
      });
      const plan = shapes[b].map((shape) => {
        const n = shape[0];
        const m = shape.length === 1 ? 1 : shape[1];
        const r = Math.min(n, m, o.rank);
        return { n, m, r, compress: (n + m) * r < n * m };
      });
      const compressed = plan.filter((p) => p.compress);
      let qs: Matrix[];
      if (o.warmStart && qMemory.has(b)) {
        qs = qMemory.get(b)!.map((q) => gramSchmidt(q, o.epsilon ?? 0));
      } else {
        manualSeed(Math.floor(rng() * 1e9));
        qs = [];
        for (const p of compressed) {
          const q = [...await randn([p.m, p.r], { dtype: dtypes[b] }).data()];
          qs.push(gramSchmidt(matrix(q, p.m, p.r), o.epsilon ?? 0));
        }
      }
      const out: number[] = [];
      const newQs: Matrix[] = [];
      let at = 0;
      let c = 0;
      for (const p of plan) {
        const pieces = withError.map((w) => w.slice(at, at + p.n * p.m));
        at += p.n * p.m;
        if (!p.compress) {
          out.push(...pieces[0].map((v, j) => (v + pieces[1][j]) / 2));
          continue;
        }
        const ms = pieces.map((piece) => matrix(piece, p.n, p.m));
        const ps = ms.map((m) => matmul(m, qs[c]));
        const pSum = gramSchmidt(ps[0].map((row, i) => row.map((v, j) => v + ps[1][i][j])), 0);
        const qParts = ms.map((m) => matmul(transpose(m), pSum));
        const q = qParts[0].map((row, i) => row.map((v, j) => (v + qParts[1][i][j]) / 2));
        newQs.push(q);
        out.push(...matmul(pSum, transpose(q)).flat());
        c++;
      }
      if (o.warmStart) qMemory.set(b, newQs);
      if (o.errorFeedback) {
        withError.forEach((w, rank) => errors.set(`${rank},${b}`, w.map((v, j) => v - out[j])));
      }
      outputs[s][b] = out;
      if (last) iter++;
    }
  }
  return outputs;
}

interface Power {
  steps: { grads: number[][] }[];
  inputs: number[][][];
  iter: number;
  stats: [number, number, number];
  params: number[][];
}

async function checkPowerSGD(o: PowerOptions, ranks: Power[]): Promise<void> {
  const [r0, r1] = ranks;
  assert.deepEqual(r1.steps, r0.steps, "all ranks hold bit-identical gradients");
  assert.deepEqual(r1.params, r0.params);
  assert.equal(r0.iter, o.steps);
  const hidden = o.hidden ?? 16;
  const sizes = [6 * hidden, hidden, 3 * hidden, 3];
  const expected = await referencePowerSGD(o, ranks.map((r) => r.inputs));
  let compared = 0;
  r0.steps.forEach(({ grads }, s) => {
    const want = unbucket(expected[s], sizes);
    grads.forEach((g, p) =>
      g.forEach((v, j) => {
        const e = want[p][j];
        const tol = p < 2 ? 2e-5 + 2e-4 * Math.abs(e) : 1e-10 + 1e-8 * Math.abs(e);
        assert.ok(
          Math.abs(v - e) <= tol,
          `${JSON.stringify(o)} step ${s} parameter ${p}[${j}]: PowerSGD ${v}, reference ${e}`,
        );
        compared++;
      })
    );
  });
  assert.ok(compared > 0);
  if (o.start < o.steps) assert.ok(r0.stats[0] > 1, `compression rate ${r0.stats}`);
}

const POWER_CASES: PowerOptions[] = [
  { rank: 1, errorFeedback: true, warmStart: true, start: 2, steps: 5 },
  { rank: 2, errorFeedback: true, warmStart: false, start: 2, steps: 4 },
  { rank: 1, errorFeedback: false, warmStart: true, start: 2, steps: 4 },
  { rank: 2, errorFeedback: false, warmStart: false, start: 0, steps: 3 },
  // Rank 3: b.weight [3, 16] no longer pays ((3 + 16) * 3 >= 48) and goes uncompressed.
  { rank: 3, errorFeedback: true, warmStart: true, start: 2, steps: 4, epsilon: 1e-8 },
];

Deno.test({
  name:
    "PowerSGD: plain averaging before startPowerSGDIter, then the single-process reference (rank 1-3, error feedback, warm start)",
  ...opts,
  fn: async () => {
    for (const o of POWER_CASES) {
      const ranks = await distributed.spawn<Power>(RANKS, { nprocs: 2, args: ["power", o] });
      await checkPowerSGD(o, ranks);
      if (o.start === 2) {
        // Steps 0 and 1 are exactly allreduceHook's average (divide, then sum).
        const inputs = ranks.map((r) => r.inputs);
        for (let s = 0; s < 2; s++) {
          const avg = [0, 1].map((b) =>
            inputs[0][b][s].map((v, j) => {
              const sum = v / 2 + inputs[1][b][s][j] / 2;
              return b === 1 ? Math.fround(sum) : sum;
            })
          );
          assert.deepEqual(ranks[0].steps[s].grads, unbucket(avg, [96, 16, 48, 3]));
        }
      }
    }
  },
});

Deno.test({
  name:
    "PowerSGD and allreduceHook replay PyTorch 1.13's numbers (same bucket inputs and initial Qs)",
  ...opts,
  fn: async () => {
    const fixture = JSON.parse(
      await Deno.readTextFile(new URL("./fixtures/torch_ddp_comm_hooks.json", import.meta.url)),
    ) as { cases: TorchCase[] };
    const ranks = await distributed.spawn<number[][][][]>(RANKS, {
      nprocs: 2,
      args: ["torch", { cases: fixture.cases }],
    });
    assert.deepEqual(ranks[1], ranks[0], "all ranks hold bit-identical results");
    fixture.cases.forEach((c, i) => {
      ranks.forEach((got, rank) =>
        got[i].forEach((step, s) =>
          step.forEach((values, b) =>
            values.forEach((v, j) => {
              const e = c.outputs[rank][s][b][j];
              const tol = c.dtypes[b] === "float32"
                ? 1e-5 + 1e-4 * Math.abs(e)
                : 1e-12 + 1e-9 * Math.abs(e);
              assert.ok(
                Math.abs(v - e) <= tol,
                `${c.hook} ${
                  JSON.stringify(c.options)
                } rank ${rank} step ${s} bucket ${b} [${j}]: ${v}, PyTorch ${e}`,
              );
            })
          )
        )
      );
    });
    // allreduceHook divides then sums, as PyTorch: the same bits.
    assert.deepEqual(ranks[0][0], fixture.cases[0].outputs[0]);
  },
});

Deno.test({
  name: "PowerSGD: training with rank-1 compression still reduces the loss; ranks stay identical",
  ...opts,
  fn: async () => {
    const [r0, r1] = await distributed.spawn<
      { losses: number[]; memory: number[]; params: number[][] }
    >(RANKS, { nprocs: 2, args: ["powerTrain"] });
    assert.deepEqual(r1.params, r0.params);
    for (const r of [r0, r1]) {
      // From the first compressed step on, the state (errors, Ps, Qs) is allocated once: memory
      // never grows. (It may shrink: the float32 parameters `double()` replaced are freed
      // whenever the garbage collector runs, as PyTorch frees them when unreferenced.)
      assert.ok(
        r.memory.slice(3).every((m) => m <= r.memory[3]),
        `memory never grows from step 4 on: ${r.memory}`,
      );
    }
    const first = r0.losses.slice(0, 4).reduce((a, b) => a + b) / 4;
    const last = r0.losses.slice(-4).reduce((a, b) => a + b) / 4;
    assert.ok(last < 0.5 * first, `losses ${r0.losses.map((l) => l.toFixed(3))}`);
  },
});

Deno.test({
  name:
    "DDP comm hooks with findUnusedParameters: zeros for a rank's unused parameter, untouched where no rank used it",
  ...opts,
  fn: async () => {
    const ranks = await distributed.spawn<(number[] | null)[][]>(RANKS, {
      nprocs: 2,
      args: ["unused"],
    });
    for (const [plain, hooked] of ranks) {
      assert.deepEqual(hooked, plain);
      assert.equal(hooked[4], null, "never.weight: no rank used it");
      assert.equal(hooked[5], null);
      assert.ok(hooked[2]!.some((v) => v !== 0), "extra.weight: rank 0's half on both ranks");
    }
    assert.deepEqual(ranks[1][1], ranks[0][1]);
  },
});

Deno.test({
  name:
    "DDP comm hooks: errors name the bucket, shapes and dtypes; PowerSGDState checks its options",
  ...opts,
  fn: async () => {
    const [e] = await distributed.spawn<Record<string, string>>(RANKS, {
      nprocs: 2,
      args: ["errors"],
    });
    assert.match(e.twice, /^Error: .*can only be called once/);
    assert.match(e.notCallable, /^TypeError: .*communication hook must be callable, got string/);
    assert.match(e.late, /^Error: .*a backward pass already ran.*before training starts/);
    assert.match(
      e.shape,
      /^RangeError: .*bucket 0 needs a Tensor of \[51\] float64 on cpu.*got \[5\] float64/,
    );
    assert.match(
      e.dtype,
      /^RangeError: .*bucket 0 needs a Tensor of \[51\] float64.*got \[51\] float32/,
    );
    assert.match(e.promise, /^TypeError: .*bucket 0 .*got a Promise/);
    assert.match(
      e.setBuffer,
      /^RangeError: GradBucket\.setBuffer: bucket 0 .*got \[1, 51\] float64/,
    );
    assert.match(e.stateRank, /matrixApproximationRank must be a positive integer, got 0/);
    assert.match(e.stateStart, /startPowerSGDIter > 1 .*got 1/);
    assert.equal(e.stateNoFeedback, "no error");
  },
});

Deno.test({
  name: "DDP comm hooks under mpiexec -n 2: PowerSGD equals the reference, ranks identical",
  ignore: !MPICH_MPIEXEC,
  ...opts,
  fn: async () => {
    const o = POWER_CASES[0];
    const run = await mpiRun<Power>(RANKS, 2, "power", o as unknown as Record<string, unknown>);
    assert.equal(run.code, 0, run.output);
    await checkPowerSGD(o, run.results as Power[]);
  },
});
