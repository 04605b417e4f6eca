/**
 * `sort`: sorting along a dim and the ops built on it (`median`, `topk`,
 * and `scatterReduce` amax / prod where a backend lacks the `scatterReduce` kernel: n sources
 * into m targets), float32 random normal input, milliseconds per op (median of runs, each
 * ending with a 1-element read so the device finished). Sizes are smaller on
 * webgpu and in `--quick` runs. A case whose first run takes over a second
 * is timed once more only (the bitonic-network fallback takes seconds).
 * @module
 */

import {
  type Device,
  median,
  randint,
  randn,
  scatterReduce,
  type Tensor,
  tidy,
  zeros,
} from "../../mod.ts";
import { measure, type Suite, type SuiteContext, Table } from "./_common.ts";
import type { BenchResult } from "./_common.ts";

/** One case: a name, the input shape and the op. */
interface SortCase {
  readonly name: string;
  readonly shape: readonly number[];
  /** A scatter's targets: the op gets an int32 index in [0, targets) of the input's shape. */
  readonly targets?: number;
  readonly op: (x: Tensor, index: Tensor | null) => Tensor;
}

/** `x` scatter-reduced by `reduce` into `m` zeros at `index`. */
function scatterCase(reduce: "amax" | "prod", n: number, m: number): SortCase {
  return {
    name: `scatterReduce ${reduce} [${n}]->${m}`,
    shape: [n],
    targets: m,
    op: (x, index) => scatterReduce(zeros([m], { device: x.device }), 0, index!, x, reduce),
  };
}

/** The cases at `n` elements per row (1e6 on cpu), `m` rows of `m` (1000 on cpu), topk rows of `t`. */
export function sortCases(n: number, m: number, t: number): SortCase[] {
  return [
    { name: `sort [${n}]`, shape: [n], op: (x) => x.sort().values },
    { name: `sort [${m},${m}] dim 0`, shape: [m, m], op: (x) => x.sort(0).values },
    { name: `sort [${m},${m}] dim 1`, shape: [m, m], op: (x) => x.sort(1).values },
    { name: `median [${n}]`, shape: [n], op: (x) => median(x) },
    { name: `topk 10 [256,${t}]`, shape: [256, t], op: (x) => x.topk(10, 1).values },
    scatterCase("amax", n, m),
    scatterCase("prod", n, m),
  ];
}

async function once(x: Tensor, op: (x: Tensor) => Tensor): Promise<void> {
  const probe = tidy(() => op(x).reshape([-1]).narrow(0, 0, 1));
  await probe.data();
  probe.dispose();
}

/** Times every case on one device. */
export async function benchSort(
  device: Device,
  cases: readonly SortCase[],
  budgetS: number,
): Promise<BenchResult[]> {
  const results: BenchResult[] = [];
  for (const c of cases) {
    const x = randn([...c.shape], { device });
    const index = c.targets
      ? randint(0, c.targets, [...c.shape], { device, dtype: "int32" })
      : null;
    const op = (t: Tensor) => c.op(t, index);
    try {
      const t0 = performance.now();
      await once(x, op);
      const first = performance.now() - t0;
      const slow = first > 1000;
      const timing = await measure(() => once(x, op), {
        warmup: 0,
        minRuns: slow ? 1 : 3,
        maxRuns: slow ? 1 : 30,
        budgetS,
      });
      results.push({
        suite: "sort",
        backend: device.backend,
        case: c.name,
        value: timing.medianMs,
        unit: "ms",
        runs: timing.runs,
        medianMs: timing.medianMs,
        extra: { firstMs: first, minMs: timing.minMs, maxMs: timing.maxMs },
      });
    } finally {
      x.dispose();
      index?.dispose();
    }
  }
  return results;
}

/** The sort suite. */
export const sortSuite: Suite = {
  name: "sort",
  description:
    "sort [1e6], sort [1000,1000] dim 0/1, median [1e6], topk 10 of [256,10000], scatterReduce amax/prod [1e6]->1000 -> ms",
  async run(ctx: SuiteContext): Promise<BenchResult[]> {
    const table = new Table(
      "sort: float32 randn, ms per op (median of runs; run = op + a 1-element read)",
      [
        { title: "backend", width: 7, right: false },
        { title: "case", width: 34, right: false },
        { title: "runs", width: 4 },
        { title: "median ms", width: 9 },
        { title: "min ms", width: 8 },
      ],
      ctx.log,
    );
    const results: BenchResult[] = [];
    for (const backend of ctx.backends) {
      const [device] = await ctx.devices(backend, 1);
      const small = ctx.quick || backend !== "cpu";
      const cases = small ? sortCases(2 ** 16, 256, 1000) : sortCases(1e6, 1000, 10000);
      for (const r of await benchSort(device, cases, ctx.budgetS)) {
        results.push(r);
        table.row([backend, r.case, r.runs!, r.value, r.extra!.minMs as number]);
      }
    }
    return results;
  },
};
