/**
 * `smallstep`: one training step of the demo's model (MLP 2-64-64-3, GELU,
 * cross-entropy, Adam, batch 128), reading the loss every step. At this size
 * a step is per-op and per-read cost, not FLOPs, so next to ms/step the suite
 * times a bare read (the device round trip every step pays: ~0.5 ms on
 * llvmpipe with early maps, ~11 ms where Deno's map must be awaited)
 * interleaved with the steps, and counts
 * what one step does: kernel launches, and on webgpu dispatches, submits,
 * maps, `onSubmittedWorkDone` calls, buffer writes, copies, passes and bind
 * groups, with the host ms inside `submit` and from `mapAsync` to its
 * resolution.
 * @module
 */

import { type Tensor, tensor } from "../../mod.ts";
import {
  type BenchResult,
  fmt,
  measureInterleaved,
  median,
  settle,
  type Suite,
  type SuiteContext,
  Table,
} from "./_common.ts";
import {
  computeKernelCalls,
  createMlp,
  describeMlp,
  profileStep,
  runStep,
  SMALL_MLP_CONFIG,
  type StepTimes,
  summarizeGpu,
  summarizeKernels,
  summarizeKernelTime,
} from "./mlp.ts";

/** Reads one element nothing is writing: the cost of a read alone. */
async function bareRead(t: Tensor): Promise<void> {
  await t.item();
}

/** The smallstep suite. */
export const smallStepSuite: Suite = {
  name: "smallstep",
  description: "the demo's model (MLP 2-64-64-3 GELU, Adam, b128) step -> ms/step, read floor",
  async run(ctx: SuiteContext): Promise<BenchResult[]> {
    const config = SMALL_MLP_CONFIG;
    const table = new Table(
      `smallstep: ${describeMlp(config)}, cross-entropy, lr 0.01, in tidy, loss read every step;` +
        " read = one 1-element read alone, timed round-robin with the steps",
      [
        { title: "backend", width: 7, right: false },
        { title: "runs", width: 4 },
        { title: "ms/step", width: 7 },
        { title: "queue ms", width: 8 },
        { title: "wait ms", width: 7 },
        { title: "read ms", width: 7 },
        { title: "step - read", width: 11 },
      ],
      ctx.log,
    );
    const results: BenchResult[] = [];
    for (const backend of ctx.backends) {
      const [device] = await ctx.devices(backend, 1);
      const s = createMlp(device, config);
      const probe = tensor([1], { device });
      try {
        const times: StepTimes[] = [];
        const [step, read] = await measureInterleaved([
          async () => void times.push(await runStep(s)),
          () => bareRead(probe),
        ], {
          warmup: 3,
          minRuns: ctx.quick ? 1 : 10,
          maxRuns: ctx.quick ? 5 : 200,
          budgetS: ctx.budgetS,
        });
        const timed = times.slice(times.length - step.runs);
        const queueMs = median(timed.map((t) => t.queueMs));
        const waitMs = median(timed.map((t) => t.waitMs));
        const overRead = step.medianMs - read.medianMs;
        table.row([backend, step.runs, step.medianMs, queueMs, waitMs, read.medianMs, overRead]);
        await settle();
        const profile = await profileStep(s, [device]);
        const launches = computeKernelCalls(profile.kernels);
        results.push({
          suite: "smallstep",
          backend,
          case: "step",
          value: step.medianMs,
          unit: "ms/step",
          runs: step.runs,
          medianMs: step.medianMs,
          extra: {
            config: describeMlp(config),
            queueMs,
            waitMs,
            readMs: read.medianMs,
            stepOverReadMs: overRead,
            minMs: step.minMs,
            maxMs: step.maxMs,
            lastLoss: timed.at(-1)?.loss ?? NaN,
            launches,
            ...Object.fromEntries(
              Object.entries(profile.kernels).map(([k, v]) => [`calls.${k}`, v.calls]),
            ),
            ...Object.fromEntries(Object.entries(profile.gpu).map(([k, v]) => [`gpu.${k}`, v])),
          },
        });
        table.note(`${backend} one step: ${summarizeKernels(profile.kernels)}`);
        table.note(`${backend} one step: ${summarizeKernelTime(profile.kernels)}`);
        if (profile.gpu.submits + profile.gpu.maps > 0) {
          table.note(`${backend} one step: WebGPU calls: ${summarizeGpu(profile.gpu)}`);
          table.note(
            `${backend} one step: device work ~ ${
              fmt(profile.gpu.submitMs + profile.gpu.mapMs - read.medianMs)
            } ms (submit ms + map ms - read ms)`,
          );
        }
      } finally {
        probe.dispose();
        s.dispose();
      }
    }
    table.note(
      "queue ms: host time recording the step (JS, up to tidy's return); wait ms: then until the loss is read",
    );
    table.note(
      "webgpu: the loss's read starts at backward() (read-ahead), so queue ms includes waiting for the forward's device work",
    );
    return results;
  },
};
