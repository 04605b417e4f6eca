/**
 * `matmul`: float32 square matrix products, GFLOP/s (2·n³ per product).
 * A timed run queues `reps` products of the same operands, then reads the
 * last result back (`await c.data()`), so the device really finished and the
 * readback is spread over several products.
 * @module
 */

import { type Device, randn, type Tensor, tidy } from "../../mod.ts";
import {
  type BenchResult,
  measure,
  repsFor,
  settle,
  type Suite,
  type SuiteContext,
  Table,
} from "./_common.ts";

/** Sizes of a full run. */
export const MATMUL_SIZES: readonly number[] = [256, 512, 1024, 2048];
/** Sizes of a `--quick` run. */
export const MATMUL_SIZES_QUICK: readonly number[] = [64, 256];

/** Runs `reps` products of `a` and `b`, then reads the last one back. */
async function productsThenRead(a: Tensor, b: Tensor, reps: number): Promise<void> {
  const c = tidy(() => {
    let last = a.matmul(b);
    for (let r = 1; r < reps; r++) last = a.matmul(b);
    return last;
  });
  await c.data();
  c.dispose();
}

/** Measures one size on one device. */
export async function benchMatmul(
  device: Device,
  n: number,
  budgetS: number,
  targetMs: number,
): Promise<BenchResult & { readonly medianMs: number }> {
  const a = randn([n, n], { device });
  const b = randn([n, n], { device });
  try {
    // The first product compiles the pipeline; the second gives the size of
    // one run (skipped when the first alone is longer than the target).
    let t0 = performance.now();
    await productsThenRead(a, b, 1);
    let single = performance.now() - t0;
    if (single < 3 * targetMs) {
      t0 = performance.now();
      await productsThenRead(a, b, 1);
      single = performance.now() - t0;
    }
    const reps = repsFor(single, targetMs, 16);
    const timing = await measure(() => productsThenRead(a, b, reps), {
      warmup: 0,
      minRuns: 3,
      budgetS,
    });
    const flop = 2 * n ** 3 * reps;
    return {
      suite: "matmul",
      backend: device.backend,
      case: String(n),
      value: flop / (timing.medianMs * 1e6),
      unit: "GFLOP/s",
      runs: timing.runs,
      medianMs: timing.medianMs,
      extra: {
        n,
        reps,
        singleMs: single,
        minMs: timing.minMs,
        maxMs: timing.maxMs,
        bestGflops: flop / (timing.minMs * 1e6),
      },
    };
  } finally {
    a.dispose();
    b.dispose();
  }
}

/** The matmul suite. */
export const matmulSuite: Suite = {
  name: "matmul",
  description: "f32 square matmul 256..2048 -> GFLOP/s (reps queued per read)",
  async run(ctx: SuiteContext): Promise<BenchResult[]> {
    const sizes = ctx.quick ? MATMUL_SIZES_QUICK : MATMUL_SIZES;
    const targetMs = ctx.quick ? 30 : 300;
    const table = new Table(
      "matmul: f32 [n,n] @ [n,n], GFLOP/s = 2n^3·reps / median run (run = reps products + one read)",
      [
        { title: "backend", width: 7, right: false },
        { title: "n", width: 5 },
        { title: "reps", width: 4 },
        { title: "runs", width: 4 },
        { title: "median ms", width: 9 },
        { title: "GFLOP/s", width: 8 },
        { title: "best GFLOP/s", width: 12 },
      ],
      ctx.log,
    );
    const results: BenchResult[] = [];
    for (const backend of ctx.backends) {
      const [device] = await ctx.devices(backend, 1);
      for (const n of sizes) {
        const r = await benchMatmul(device, n, ctx.budgetS, targetMs);
        results.push(r);
        table.row([
          backend,
          n,
          r.extra!.reps as number,
          r.runs!,
          r.medianMs,
          r.value,
          r.extra!.bestGflops as number,
        ]);
        await settle();
      }
    }
    return results;
  },
};
