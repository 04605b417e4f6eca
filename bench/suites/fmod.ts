/**
 * `fmod`: the exact float32 `fmod` kernel against `add` of the same 1M-element vectors, timed
 * round-robin in one run. The WebGPU kernel reduces the significands 8 bits per integer `%`, so
 * its cost grows with log2|x/y|: one case with quotients near 100 (one step), one near 1e42
 * (18 steps, about the most a float32 pair needs).
 * @module
 */

import { add, type Device, fmod, randn, type Tensor, tidy } from "../../mod.ts";
import {
  type BenchResult,
  measureInterleaved,
  type Suite,
  type SuiteContext,
  Table,
} from "./_common.ts";

/** Queues `reps` ops, then reads one element of the last so the device has finished. */
async function queued(op: () => Tensor, reps: number): Promise<void> {
  const probe = tidy(() => {
    let last = op();
    for (let r = 1; r < reps; r++) last = op();
    return last.narrow(0, 0, 1);
  });
  await probe.data();
  probe.dispose();
}

/** Median ms per op of add and the two fmod cases on `device`. */
export async function benchFmod(device: Device, numel: number, reps: number, budgetS: number) {
  const x = randn([numel], { device }).mul(100);
  const y = randn([numel], { device });
  const big = randn([numel], { device }).mul(1e30);
  const tiny = randn([numel], { device }).mul(1e-12);
  const cases: [string, () => Tensor][] = [
    ["add", () => add(x, y)],
    ["fmod |x/y|~1e2", () => fmod(x, y)],
    ["fmod |x/y|~1e42", () => fmod(big, tiny)],
  ];
  try {
    const timings = await measureInterleaved(cases.map(([, op]) => () => queued(op, reps)), {
      warmup: 1,
      minRuns: 5,
      budgetS,
    });
    return cases.map(([name], i) => ({
      name,
      ms: timings[i].medianMs / reps,
      runs: timings[i].runs,
    }));
  } finally {
    for (const t of [x, y, big, tiny]) t.dispose();
  }
}

/** The fmod suite. */
export const fmodSuite: Suite = {
  name: "fmod",
  description: "exact float32 fmod vs add, 1M elements, interleaved -> ms/op and x add",
  async run(ctx: SuiteContext): Promise<BenchResult[]> {
    const numel = ctx.quick ? 64 * 1024 : 1024 * 1024;
    const reps = ctx.quick ? 2 : 10;
    const table = new Table(
      `fmod: ${numel} float32 elements, ${reps} ops per run, cases interleaved; x add = ms / add's ms`,
      [
        { title: "backend", width: 7, right: false },
        { title: "case", width: 15, right: false },
        { title: "runs", width: 4 },
        { title: "ms/op", width: 8 },
        { title: "x add", width: 6 },
      ],
      ctx.log,
    );
    const results: BenchResult[] = [];
    for (const backend of ctx.backends) {
      const [device] = await ctx.devices(backend, 1);
      const rows = await benchFmod(device, numel, reps, ctx.budgetS);
      for (const r of rows) {
        const ratio = r.ms / rows[0].ms;
        table.row([backend, r.name, r.runs, r.ms, ratio]);
        results.push({
          suite: "fmod",
          backend,
          case: r.name,
          value: r.ms,
          unit: "ms/op",
          runs: r.runs,
          medianMs: r.ms * reps,
          extra: { numel, reps, xAdd: ratio },
        });
      }
    }
    return results;
  },
};
