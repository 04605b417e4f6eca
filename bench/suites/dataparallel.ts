/**
 * `dataparallel`: the mlp suite's training step through `nn.DataParallel` on
 * 1, 2 and 4 devices of each backend (webgpu: separate GPUDevices on the one
 * adapter; cpu: logical devices sharing the host). With one adapter there is
 * no extra compute to gain, so the ratio to 1 device is the cost of the layer
 * itself: scatter, replicate (broadcast), parallel apply, gather and the
 * reduce-add of the gradients. An estimate for separate GPUs is printed too.
 * @module
 */

import { type Device, nn } from "../../mod.ts";
import {
  type BenchResult,
  fmt,
  measureInterleaved,
  settle,
  type Suite,
  type SuiteContext,
  Table,
  type Timing,
} from "./_common.ts";
import {
  createMlp,
  describeMlp,
  MLP_CONFIG,
  type MlpConfig,
  type MlpSetup,
  profileStep,
  runStep,
  summarizeGpu,
  summarizeKernels,
  withoutReadAhead,
} from "./mlp.ts";

/** Device counts of a full run. */
export const DP_COUNTS: readonly number[] = [1, 2, 4];
/** The smaller MLP of a `--quick` run. */
export const DP_CONFIG_QUICK: MlpConfig = { layers: [784, 128, 10], batch: 64 };

/**
 * The separate-GPU model: compute splits N ways, the layer's measured
 * overhead stays serial. `t1`, `tn`: ms/step on 1 and N devices of one adapter.
 */
export function estimateSeparate(t1: number, tn: number, n: number): number {
  return t1 / n + Math.max(0, tn - t1);
}

/**
 * Measures the DataParallel step on each device set, round-robin (so the
 * ratios to one device are not skewed by other work on the machine).
 */
export async function benchDataParallel(
  deviceSets: readonly (readonly Device[])[],
  config: MlpConfig,
  budgetS: number,
  quick: boolean,
): Promise<{ timings: Timing[]; losses: number[] }> {
  const setups: MlpSetup[] = [];
  try {
    for (const devices of deviceSets) {
      setups.push(createMlp(devices[0], config, (m) => new nn.DataParallel(m, { devices })));
    }
    const losses = setups.map(() => NaN);
    const timings = await withoutReadAhead(deviceSets.flat(), () =>
      measureInterleaved(
        setups.map((s, i) => async () => {
          losses[i] = (await runStep(s)).loss;
        }),
        { warmup: 2, minRuns: quick ? 1 : 3, budgetS },
      ));
    return { timings, losses };
  } finally {
    for (const s of setups) s.dispose();
  }
}

/** The dataparallel suite. */
export const dataParallelSuite: Suite = {
  name: "dataparallel",
  description: "the MLP step through nn.DataParallel on 1, 2, 4 devices -> ms/step, ratio",
  async run(ctx: SuiteContext): Promise<BenchResult[]> {
    const config = ctx.quick ? DP_CONFIG_QUICK : MLP_CONFIG;
    const counts = ctx.quick ? [1, 2] : DP_COUNTS;
    const table = new Table(
      `dataparallel: nn.DataParallel(${describeMlp(config)}) SGD step, batch split over N devices` +
        " (webgpu: N GPUDevices on one adapter; cpu: N logical devices on one host)",
      [
        { title: "backend", width: 7, right: false },
        { title: "N", width: 2 },
        { title: "runs", width: 4 },
        { title: "ms/step", width: 8 },
        { title: "vs N=1", width: 6 },
        { title: "overhead ms", width: 11 },
        { title: "est. ms, N GPUs", width: 15 },
        { title: "est. speedup", width: 12 },
      ],
      ctx.log,
    );
    const results: BenchResult[] = [];
    const profiles: string[] = [];
    for (const backend of ctx.backends) {
      let deviceSets: Device[][];
      try {
        deviceSets = await Promise.all(counts.map((n) => ctx.devices(backend, n)));
      } catch (error) {
        ctx.log(`  dataparallel ${backend}: skipped, ${(error as Error).message}`);
        continue;
      }
      const { timings, losses } = await benchDataParallel(
        deviceSets,
        config,
        ctx.budgetS,
        ctx.quick,
      );
      const t1 = timings[0].medianMs;
      counts.forEach((n, i) => {
        const timing = timings[i];
        const ratio = timing.medianMs / t1;
        const overhead = timing.medianMs - t1;
        const est = estimateSeparate(t1, timing.medianMs, n);
        const speedup = t1 / est;
        table.row([
          backend,
          n,
          timing.runs,
          timing.medianMs,
          `${fmt(ratio)}x`,
          n === 1 ? "" : overhead,
          n === 1 ? "" : est,
          n === 1 ? "" : `${fmt(speedup)}x`,
        ]);
        results.push({
          suite: "dataparallel",
          backend,
          case: `${n} device${n === 1 ? "" : "s"}`,
          value: timing.medianMs,
          unit: "ms/step",
          runs: timing.runs,
          medianMs: timing.medianMs,
          extra: {
            devices: n,
            config: describeMlp(config),
            ratioVs1: ratio,
            overheadMs: overhead,
            estSeparateMs: est,
            estSpeedup: speedup,
            minMs: timing.minMs,
            maxMs: timing.maxMs,
            lastLoss: losses[i],
          },
        });
      });
      const two = counts.indexOf(2);
      if (two >= 0) {
        const devices = deviceSets[two];
        const s = createMlp(devices[0], config, (m) => new nn.DataParallel(m, { devices }));
        try {
          await runStep(s);
          const p = await profileStep(s, devices);
          profiles.push(`${backend} N=2, one step: ${summarizeKernels(p.kernels, 10)}`);
          if (backend === "webgpu") {
            profiles.push(`${backend} N=2, one step: ${summarizeGpu(p.gpu)}`);
          }
        } finally {
          s.dispose();
        }
      }
      await settle();
    }
    table.note(
      "est. (separate GPUs) = t1/N + (tN - t1): the compute splits N ways; the measured overhead of the" +
        " layer (scatter, broadcast, gather, reduce-add, extra launches) stays serial",
    );
    for (const line of profiles) table.note(line);
    return results;
  },
};
