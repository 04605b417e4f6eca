/**
 * `dataloader`: `DataLoader` with `numWorkers` 0 vs 2 over a dataset whose
 * `get` burns about 1 ms of CPU (a fixed amount of arithmetic, calibrated
 * once: a stand-in for decoding and augmenting a sample), 256 samples in
 * batches of 16. Cases run interleaved, so the load of other processes
 * hits each alike: the main thread alone; two persistent workers (the
 * steady state, start-up excluded); two workers started afresh each epoch
 * (start-up included, as a plain loop pays it); and two persistent workers
 * whose samples are collated in the main thread (`collate: defaultCollate`)
 * instead of in the worker. The headline is the ratio of epoch times,
 * main thread / workers. Not a backend benchmark: measured once, on the
 * cpu.
 * @module
 */

import { data, type Tensor, tensor } from "../../mod.ts";
import {
  type BenchResult,
  measureInterleaved,
  type Suite,
  type SuiteContext,
  Table,
} from "./_common.ts";

/** Arithmetic that takes about `n` steps of work and cannot be optimized away. */
function burn(n: number, seed: number): number {
  let x = seed;
  for (let i = 0; i < n; i++) x = (x * 1.000001 + Math.sqrt(i + x)) % 1000;
  return x;
}

/** A sample of 64 floats that costs `steps` of arithmetic to make. */
export class BurnDataset extends data.Dataset<Tensor> {
  constructor(readonly n: number, readonly steps: number) {
    super();
  }
  get length(): number {
    return this.n;
  }
  get(i: number): Tensor {
    const v = burn(this.steps, i);
    return tensor(Array.from({ length: 64 }, (_, k) => v + k));
  }
  workerSource(): data.WorkerSource {
    return { module: import.meta.url, export: "makeBurnDataset", args: [this.n, this.steps] };
  }
}

/** Rebuilds {@link BurnDataset} in a worker. */
export function makeBurnDataset([n, steps]: [number, number]): BurnDataset {
  return new BurnDataset(n, steps);
}

/** Steps of {@link burn} that take about `ms` on this machine (median of 5 tries). */
function calibrate(ms: number): number {
  let steps = 10_000;
  for (let tries = 0; tries < 20; tries++) {
    const t0 = performance.now();
    burn(steps, 1);
    const took = performance.now() - t0;
    if (took > 20) break;
    steps *= 2;
  }
  const times: number[] = [];
  for (let k = 0; k < 5; k++) {
    const t0 = performance.now();
    burn(steps, k);
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return Math.max(1, Math.round((steps * ms) / times[2]));
}

async function drain(loader: AsyncIterable<Tensor>): Promise<void> {
  let last: Tensor | null = null;
  for await (const batch of loader) last = batch;
  await last!.data();
}

/** The DataLoader workers suite. */
export const dataWorkersSuite: Suite = {
  name: "dataloader",
  description:
    "DataLoader numWorkers 0 vs 2, 256 samples of ~1 ms CPU each, batch 16 -> epoch ms and ratio",
  async run(ctx: SuiteContext): Promise<BenchResult[]> {
    const samples = ctx.quick ? 64 : 256;
    const steps = calibrate(1);
    const ds = new BurnDataset(samples, steps);
    const options = { batchSize: 16 };
    const main = new data.DataLoader(ds, options);
    const persistent = new data.DataLoader(ds, {
      ...options,
      numWorkers: 2,
      persistentWorkers: true,
    });
    const fresh = new data.DataLoader(ds, { ...options, numWorkers: 2 });
    const mainCollate = new data.DataLoader(ds, {
      ...options,
      numWorkers: 2,
      persistentWorkers: true,
      collate: (s: Tensor[]) => data.defaultCollate(s),
    });
    const cases: [string, AsyncIterable<Tensor>][] = [
      ["numWorkers 0", main],
      ["numWorkers 2, persistent", persistent],
      ["numWorkers 2, started each epoch", fresh],
      ["numWorkers 2, persistent, collate in main", mainCollate],
    ];
    const table = new Table(
      `dataloader: one epoch of ${samples} samples (~1 ms CPU each, ${steps} steps), batch 16, ms (interleaved runs; ${navigator.hardwareConcurrency} CPUs)`,
      [
        { title: "case", width: 42, right: false },
        { title: "runs", width: 4 },
        { title: "median ms", width: 9 },
        { title: "min ms", width: 8 },
        { title: "vs 0 workers", width: 12 },
      ],
      ctx.log,
    );
    let timings;
    try {
      timings = await measureInterleaved(cases.map(([, loader]) => () => drain(loader)), {
        budgetS: ctx.budgetS,
        minRuns: 5,
        warmup: 1,
      });
    } finally {
      persistent.shutdown();
      mainCollate.shutdown();
    }
    const base = timings[0].medianMs;
    return cases.map(([name], i) => {
      const t = timings[i];
      const ratio = base / t.medianMs;
      table.row([name, t.runs, t.medianMs.toFixed(1), t.minMs.toFixed(1), `${ratio.toFixed(2)}x`]);
      return {
        suite: "dataloader",
        backend: "cpu",
        case: name,
        value: ratio,
        unit: "x",
        runs: t.runs,
        medianMs: t.medianMs,
        extra: { minMs: t.minMs, samples, burnSteps: steps },
      };
    });
  },
};
