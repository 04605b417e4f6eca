/**
 * `stepshapes`: the cpu backend's float32 matmul kernel at the shapes and
 * transposes of one MLP 784-512-512-10 b256 SGD step (forward `x @ Wᵀ`,
 * input gradients `dy @ W`, weight gradients `dyᵀ @ x`), GFLOP/s on one
 * thread and on every thread, timed round-robin (one product of each thread
 * count per round) so both see the same load. Calls the kernel directly on
 * host arrays (copy in, packing, product, copy out; no autograd, no
 * allocation), so it shows where the step's matmul time goes per shape.
 * @module
 */

import { matmul, MAX_THREADS, startMatmulThreads } from "../../src/backends/cpu/kernels/matmul.ts";
import {
  type BenchResult,
  measureInterleaved,
  type Suite,
  type SuiteContext,
  Table,
} from "./_common.ts";

/** One product of the step: [what, m, k, n, transA, transB]. */
type StepShape = readonly [string, number, number, number, boolean, boolean];

/** The step's products (the first layer needs no input gradient). */
export const STEP_SHAPES: readonly StepShape[] = [
  ["fwd 1: x @ W1ᵀ", 256, 784, 512, false, true],
  ["fwd 2: h @ W2ᵀ", 256, 512, 512, false, true],
  ["fwd 3: h @ W3ᵀ", 256, 512, 10, false, true],
  ["dx 3: dy @ W3", 256, 10, 512, false, false],
  ["dW 3: dyᵀ @ h", 10, 256, 512, true, false],
  ["dx 2: dy @ W2", 256, 512, 512, false, false],
  ["dW 2: dyᵀ @ h", 512, 256, 512, true, false],
  ["dW 1: dyᵀ @ x", 512, 256, 784, true, false],
];

/** Products per timed run: enough for ~2 ms of work at 50 GFLOP/s. */
function productsPerRun(m: number, k: number, n: number): number {
  return Math.max(1, Math.round(5e7 / (m * k * n)));
}

/** The stepshapes suite (cpu only). */
export const stepShapesSuite: Suite = {
  name: "stepshapes",
  description: "cpu f32 matmul at the MLP step's shapes/transposes, 1 vs all threads -> GFLOP/s",
  async run(ctx: SuiteContext): Promise<BenchResult[]> {
    if (!ctx.backends.includes("cpu")) return [];
    const threads = await startMatmulThreads(MAX_THREADS);
    const table = new Table(
      `stepshapes: cpu f32 matmul [m,k] @ [k,n] at the MLP step's shapes, GFLOP/s, 1 vs ${threads} threads (round-robin)`,
      [
        { title: "product", width: 15, right: false },
        { title: "m x k x n", width: 13, right: false },
        { title: "tA", width: 2 },
        { title: "tB", width: 2 },
        { title: "1 thread", width: 8 },
        { title: `${threads} threads`, width: 9 },
        { title: "scaling", width: 7 },
      ],
      ctx.log,
    );
    const results: BenchResult[] = [];
    let seed = 1;
    const random = () => ((seed = (seed * 16807) % 2147483647) / 2147483647) - 0.5;
    for (const [what, m, k, n, transA, transB] of STEP_SHAPES) {
      const a = Float32Array.from({ length: m * k }, random);
      const b = Float32Array.from({ length: k * n }, random);
      const out = new Float32Array(m * n);
      const layout = {
        a,
        b,
        out,
        batch: 1,
        m,
        n,
        k,
        aBatchStride: 0,
        bBatchStride: 0,
        transA,
        transB,
        dtype: "float32" as const,
      };
      const reps = productsPerRun(m, k, n);
      const counts = threads > 1 ? [1, threads] : [1];
      const timings = await measureInterleaved(
        counts.map((t) => () => {
          for (let r = 0; r < reps; r++) matmul(layout, t);
          return Promise.resolve();
        }),
        { warmup: 3, minRuns: ctx.quick ? 3 : 15, budgetS: ctx.quick ? 0.1 : 0.5 },
      );
      const gflops = timings.map((t) => 2 * m * k * n * reps / (t.medianMs * 1e6));
      counts.forEach((t, i) =>
        results.push({
          suite: "stepshapes",
          backend: "cpu",
          case: `${m}x${k}x${n}${transA ? " tA" : ""}${transB ? " tB" : ""} ${t}t`,
          value: gflops[i],
          unit: "GFLOP/s",
          runs: timings[i].runs,
          extra: { what, m, k, n, transA, transB, threads: t, reps, medianMs: timings[i].medianMs },
        })
      );
      table.row([
        what,
        `${m}x${k}x${n}`,
        transA ? "y" : "",
        transB ? "y" : "",
        gflops[0],
        gflops[1] ?? NaN,
        (gflops[1] ?? NaN) / gflops[0],
      ]);
    }
    return results;
  },
};
