/**
 * `memory`: 1,000 MLP training steps (each in `tidy`, loss read every step)
 * and `device.memory().bytesInUse` at step 10 and at the end: with tidy
 * releasing every temporary, the two should agree (target: within 10%). Also
 * the bytes held after the model is disposed, and the JS heap for leaks of
 * host objects (graph nodes kept alive).
 * @module
 */

import type { Device } from "../../mod.ts";
import {
  type BenchResult,
  formatBytes,
  settle,
  type Suite,
  type SuiteContext,
  Table,
} from "./_common.ts";
import { createMlp, describeMlp, MLP_CONFIG, type MlpConfig, runStep } from "./mlp.ts";

/** Steps of a full run. */
export const MEMORY_STEPS = 1000;
/** Steps of a `--quick` run. */
export const MEMORY_STEPS_QUICK = 50;
/** The step whose memory is the reference. */
export const MEMORY_REFERENCE_STEP = 10;
/** The smaller MLP the cpu backend trains 1,000 steps of (and every backend with `--quick`). */
export const MEMORY_CONFIG_SMALL: MlpConfig = { layers: [784, 128, 10], batch: 64 };

/** The MLP each backend trains (cpu: smaller, to keep a full run short). */
export function memoryConfig(backend: string, quick: boolean): MlpConfig {
  return backend === "cpu" || quick ? MEMORY_CONFIG_SMALL : MLP_CONFIG;
}

/** bytesInUse, bytesReserved and the JS heap at one step. */
export interface MemorySample {
  /** The step after which it was taken (0: before the model existed). */
  readonly step: number;
  /** `device.memory().bytesInUse`. */
  readonly inUse: number;
  /** `device.memory().bytesReserved` (pool entries included). */
  readonly reserved: number;
  /** `Deno.memoryUsage().heapUsed`. */
  readonly heap: number;
}

function sample(device: Device, step: number): MemorySample {
  const m = device.memory();
  return {
    step,
    inUse: m.bytesInUse,
    reserved: m.bytesReserved,
    heap: Deno.memoryUsage().heapUsed,
  };
}

/** Trains `steps` steps and samples memory along the way. */
export async function benchMemory(
  device: Device,
  config: MlpConfig,
  steps: number,
): Promise<
  { samples: MemorySample[]; before: MemorySample; after: MemorySample; msPerStep: number }
> {
  await settle();
  const before = sample(device, 0);
  const s = createMlp(device, config);
  const samples: MemorySample[] = [];
  const marks = new Set([MEMORY_REFERENCE_STEP, 100, Math.floor(steps / 2), steps]);
  let t0 = 0;
  try {
    for (let step = 1; step <= steps; step++) {
      if (step === MEMORY_REFERENCE_STEP + 1) t0 = performance.now();
      await runStep(s);
      if (marks.has(step)) samples.push(sample(device, step));
    }
  } finally {
    s.dispose();
  }
  const msPerStep = (performance.now() - t0) / (steps - MEMORY_REFERENCE_STEP);
  await settle();
  const after = sample(device, steps);
  return { samples, before, after, msPerStep };
}

/** The memory suite. */
export const memorySuite: Suite = {
  name: "memory",
  description: "1,000 MLP steps in tidy: bytesInUse at step 10 vs the end (flat = within 10%)",
  async run(ctx: SuiteContext): Promise<BenchResult[]> {
    const steps = ctx.quick ? MEMORY_STEPS_QUICK : MEMORY_STEPS;
    const table = new Table(
      `memory: ${steps} SGD steps in tidy, device.memory().bytesInUse at step ${MEMORY_REFERENCE_STEP}` +
        " and later (target: end within 10% of step 10)",
      [
        { title: "backend", width: 7, right: false },
        { title: "model", width: 19, right: false },
        { title: "step", width: 5 },
        { title: "bytesInUse", width: 10 },
        { title: "vs step 10", width: 10 },
        { title: "reserved", width: 10 },
        { title: "JS heap", width: 10 },
      ],
      ctx.log,
    );
    const results: BenchResult[] = [];
    for (const backend of ctx.backends) {
      const [device] = await ctx.devices(backend, 1);
      const config = memoryConfig(backend, ctx.quick);
      const { samples, before, after, msPerStep } = await benchMemory(device, config, steps);
      const ref = samples.find((x) => x.step === MEMORY_REFERENCE_STEP)!;
      const end = samples.at(-1)!;
      const label = describeMlp(config);
      const row = (what: string | number, x: MemorySample) =>
        table.row([
          backend,
          label,
          what,
          formatBytes(x.inUse),
          typeof what === "number" && ref.inUse > 0 ? `${(x.inUse / ref.inUse).toFixed(3)}x` : "",
          formatBytes(x.reserved),
          formatBytes(x.heap),
        ]);
      row("start", before);
      for (const x of samples) row(x.step, x);
      row("freed", after);
      const ratio = ref.inUse > 0 ? end.inUse / ref.inUse : NaN;
      results.push({
        suite: "memory",
        backend,
        case: "bytesInUse end/step10",
        value: ratio,
        unit: "x",
        extra: {
          config: label,
          steps,
          msPerStep,
          bytesInUseBefore: before.inUse,
          bytesInUseStep10: ref.inUse,
          bytesInUseEnd: end.inUse,
          bytesInUseAfterDispose: after.inUse,
          bytesReservedStep10: ref.reserved,
          bytesReservedEnd: end.reserved,
          heapStep10: ref.heap,
          heapEnd: end.heap,
          flat: Math.abs(ratio - 1) <= 0.1,
        },
      });
      table.note(
        `${backend}: end/step 10 = ${ratio.toFixed(3)}x (${
          Math.abs(ratio - 1) <= 0.1 ? "flat" : "NOT flat"
        }), ${msPerStep.toFixed(1)} ms/step; ` +
          `after dispose ${formatBytes(after.inUse - before.inUse)} more than before the model`,
      );
      await settle();
    }
    return results;
  },
};
