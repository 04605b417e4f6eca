/**
 * `pipe`: the SGD step of a 4-layer MLP through `parallel.Pipe` over 2
 * devices (layers 1-2 on the first, 3-4 on the second) with chunks 1 and 4
 * (checkpoint "except_last", the default, and "never" to show what the
 * recomputation costs), against the same Sequential on one device. On webgpu here both devices are
 * GPUDevices of one adapter, so there is no second processor to gain and the
 * ratio is the cost of the pipeline itself (micro-batching, the copies
 * between devices, more and smaller launches). An estimate for two separate
 * GPUs from the GPipe schedule is printed too.
 * @module
 */

import {
  type Device,
  manualSeed,
  nn,
  optim,
  parallel,
  randint,
  randn,
  type Tensor,
} from "../../mod.ts";
import {
  type BenchResult,
  fmt,
  measureInterleaved,
  settle,
  type Suite,
  type SuiteContext,
  Table,
} from "./_common.ts";
import { withoutReadAhead } from "./mlp.ts";

/** Widths of the MLP (4 Linear layers) and the batch. */
export interface PipeBenchConfig {
  /** Input, three hidden and output widths. */
  readonly widths: readonly [number, number, number, number, number];
  /** Mini-batch rows. */
  readonly batch: number;
}

/** A full run's MLP. */
export const PIPE_CONFIG: PipeBenchConfig = { widths: [512, 1024, 1024, 1024, 10], batch: 256 };
/** A `--quick` run's. */
export const PIPE_CONFIG_QUICK: PipeBenchConfig = { widths: [256, 256, 256, 256, 10], batch: 64 };

/**
 * Ideal GPipe step on `n` separate devices with `m` micro-batches: each
 * partition does 1/n of the work, and the schedule takes m + n - 1 clock
 * cycles of 1/m of it each; the overhead measured on one adapter stays
 * serial. `t1`: one device; `tPipe`: the pipe on one shared adapter.
 */
export function estimateGpipe(t1: number, tPipe: number, m: number, n: number): number {
  return (t1 / n) * ((m + n - 1) / m) + Math.max(0, tPipe - t1);
}

interface Case {
  readonly name: string;
  readonly chunks: number;
  step(): Promise<number>;
}

function makeCase(
  name: string,
  devices: readonly Device[],
  chunks: number | null,
  config: PipeBenchConfig,
  checkpoint: parallel.PipeCheckpoint = "except_last",
): Case {
  manualSeed(0);
  const [a, b, c, d, e] = config.widths;
  const [first, second] = [devices[0], devices[devices.length - 1]];
  const model = new nn.Sequential(
    new nn.Linear(a, b).to(first),
    new nn.ReLU(),
    new nn.Linear(b, c).to(first),
    new nn.ReLU(),
    new nn.Linear(c, d).to(second),
    new nn.ReLU(),
    new nn.Linear(d, e).to(second),
  );
  const net: nn.Module = chunks === null ? model : new parallel.Pipe(model, { chunks, checkpoint });
  const opt = new optim.SGD(net.parameters(), { lr: 0.01 });
  // The last tensor each device's step writes: the first and the last layer's bias.
  const firstBias = (model.at(0) as nn.Linear).bias!;
  const lastBias = (model.at(6) as nn.Linear).bias!;
  const x = randn([config.batch, a], { device: first });
  const y = randint(0, e, [config.batch], { device: second });
  return {
    name,
    chunks: chunks ?? 1,
    async step() {
      opt.zeroGrad();
      const out = (net.forward as (t: Tensor) => Tensor)(x);
      const loss = nn.functional.crossEntropy(out, y);
      loss.backward();
      opt.step();
      // Every device's queue is awaited: the loss lives on the last device only, so awaiting
      // it alone leaves the first device's backward and step running into the next timed case
      // (on the cases whose model lies on one device they are the same reads).
      const [value] = await Promise.all([loss.item(), firstBias.data(), lastBias.data()]);
      return value;
    },
  };
}

/** The pipe suite. */
export const pipeSuite: Suite = {
  name: "pipe",
  description: "a 4-layer MLP step through parallel.Pipe on 2 devices, chunks 1 and 4 -> ratio",
  async run(ctx: SuiteContext): Promise<BenchResult[]> {
    const config = ctx.quick ? PIPE_CONFIG_QUICK : PIPE_CONFIG;
    const describe = `MLP ${config.widths.join("-")}, batch ${config.batch}`;
    const table = new Table(
      `pipe: parallel.Pipe(${describe}) SGD step, 2 partitions` +
        " (webgpu: 2 GPUDevices on one adapter; cpu: 2 logical devices on one host)",
      [
        { title: "backend", width: 7, right: false },
        { title: "case", width: 16, right: false },
        { title: "runs", width: 4 },
        { title: "ms/step", width: 8 },
        { title: "vs 1 dev", width: 8 },
        { title: "est. ms, 2 GPUs", width: 15 },
        { title: "est. speedup", width: 12 },
      ],
      ctx.log,
    );
    const results: BenchResult[] = [];
    for (const backend of ctx.backends) {
      let devices: Device[];
      try {
        devices = await ctx.devices(backend, 2);
      } catch (error) {
        ctx.log(`  pipe ${backend}: skipped, ${(error as Error).message}`);
        continue;
      }
      const cases = [
        makeCase("1 device", [devices[0]], null, config),
        makeCase("Pipe, chunks 1", devices, 1, config),
        makeCase("Pipe, chunks 4", devices, 4, config),
        makeCase("chunks 4, never", devices, 4, config, "never"),
      ];
      const timings = await withoutReadAhead(devices, () =>
        measureInterleaved(
          cases.map((c) => async () => {
            await c.step();
          }),
          { warmup: 2, minRuns: ctx.quick ? 1 : 3, budgetS: ctx.budgetS },
        ));
      const t1 = timings[0].medianMs;
      cases.forEach((c, i) => {
        const t = timings[i];
        const ratio = t.medianMs / t1;
        const est = i === 0 ? t1 : estimateGpipe(t1, t.medianMs, c.chunks, 2);
        table.row([
          backend,
          c.name,
          t.runs,
          t.medianMs,
          `${fmt(ratio)}x`,
          i === 0 ? "" : est,
          i === 0 ? "" : `${fmt(t1 / est)}x`,
        ]);
        results.push({
          suite: "pipe",
          backend,
          case: c.name,
          value: t.medianMs,
          unit: "ms/step",
          runs: t.runs,
          medianMs: t.medianMs,
          extra: {
            chunks: c.chunks,
            config: describe,
            ratioVs1: ratio,
            estTwoGpusMs: est,
            estSpeedup: t1 / est,
            minMs: t.minMs,
            maxMs: t.maxMs,
          },
        });
      });
      await settle();
    }
    table.note(
      "est. (2 separate GPUs) = t1/2 * (m + 1)/m + (tPipe - t1): each partition does half the work," +
        " the GPipe schedule takes m + 1 cycles of 1/m of it (m micro-batches), the measured" +
        " overhead stays serial; chunks 1 gains nothing (one partition idles while the other runs)",
    );
    return results;
  },
};
