/**
 * `elementwise`: a bandwidth-bound op, `add` of two float32 vectors of 4M
 * elements, in GB/s counting 3 x 4 bytes per element (two reads, one
 * write). A timed run queues `reps` adds and then reads ONE element of the
 * last result (a 1-element `narrow`), so the device finished but the number
 * is not diluted by a 16 MB readback; the readback itself is the second case.
 * @module
 */

import { add, type Device, randn, type Tensor, tidy } from "../../mod.ts";
import {
  type BenchResult,
  measure,
  repsFor,
  settle,
  type Suite,
  type SuiteContext,
  Table,
} from "./_common.ts";

/** Elements per vector in a full run. */
export const ELEMENTWISE_NUMEL = 4 * 1024 * 1024;
/** Elements per vector in a `--quick` run. */
export const ELEMENTWISE_NUMEL_QUICK = 256 * 1024;

async function addsThenSync(x: Tensor, y: Tensor, reps: number): Promise<void> {
  const probe = tidy(() => {
    let last = add(x, y);
    for (let r = 1; r < reps; r++) last = add(x, y);
    return last.narrow(0, 0, 1);
  });
  await probe.data();
  probe.dispose();
}

/** Measures add and a full readback on one device. */
export async function benchElementwise(
  device: Device,
  numel: number,
  budgetS: number,
  targetMs: number,
): Promise<BenchResult[]> {
  const x = randn([numel], { device });
  const y = randn([numel], { device });
  try {
    // Compile, then calibrate on 4 adds: on the cpu backend one add alone
    // hides the allocation and garbage-collection cost that steady state pays.
    await addsThenSync(x, y, 1);
    const t0 = performance.now();
    await addsThenSync(x, y, 4);
    const single = (performance.now() - t0) / 4;
    const reps = repsFor(single, targetMs, 32);
    const timing = await measure(() => addsThenSync(x, y, reps), {
      warmup: 0,
      minRuns: 3,
      budgetS,
    });
    const bytes = 3 * 4 * numel * reps;
    const read = await measure(async () => {
      await x.data();
    }, { warmup: 1, minRuns: 3, maxRuns: 10, budgetS: budgetS / 2 });
    return [
      {
        suite: "elementwise",
        backend: device.backend,
        case: "add",
        value: bytes / (timing.medianMs * 1e6),
        unit: "GB/s",
        runs: timing.runs,
        medianMs: timing.medianMs,
        extra: {
          numel,
          reps,
          singleMs: single,
          minMs: timing.minMs,
          maxMs: timing.maxMs,
          bestGBs: bytes / (timing.minMs * 1e6),
        },
      },
      {
        suite: "elementwise",
        backend: device.backend,
        case: "read",
        value: (4 * numel) / (read.medianMs * 1e6),
        unit: "GB/s",
        runs: read.runs,
        medianMs: read.medianMs,
        extra: { numel, reps: 1, minMs: read.minMs, maxMs: read.maxMs },
        note: "await t.data() of one float32 vector (device to host)",
      },
    ];
  } finally {
    x.dispose();
    y.dispose();
  }
}

/** The elementwise suite. */
export const elementwiseSuite: Suite = {
  name: "elementwise",
  description: "add of two 4M-element f32 vectors -> GB/s (3 x 4 bytes/element); readback GB/s",
  async run(ctx: SuiteContext): Promise<BenchResult[]> {
    const numel = ctx.quick ? ELEMENTWISE_NUMEL_QUICK : ELEMENTWISE_NUMEL;
    const table = new Table(
      `elementwise: add of two f32 vectors of ${numel} elements, GB/s = 12 B·numel·reps / median run` +
        " (run = reps adds + a 1-element read); read = await data() of one vector",
      [
        { title: "backend", width: 7, right: false },
        { title: "case", width: 4, right: false },
        { title: "reps", width: 4 },
        { title: "runs", width: 4 },
        { title: "median ms", width: 9 },
        { title: "GB/s", width: 6 },
        { title: "best GB/s", width: 9 },
      ],
      ctx.log,
    );
    const results: BenchResult[] = [];
    for (const backend of ctx.backends) {
      const [device] = await ctx.devices(backend, 1);
      const rs = await benchElementwise(
        device,
        numel,
        ctx.budgetS,
        ctx.quick ? 20 : 200,
      );
      for (const r of rs) {
        results.push(r);
        const best = (r.extra?.bestGBs as number | undefined) ??
          (4 * numel) / ((r.extra!.minMs as number) * 1e6);
        table.row([backend, r.case, r.extra!.reps as number, r.runs!, r.medianMs!, r.value, best]);
      }
      await settle();
    }
    return results;
  },
};
