/**
 * Where the example CNN's training step spends its time on the cpu backend:
 * kernel calls and milliseconds per kind, per step, for the step as it runs
 * (the fused batch-norm and max-pool kernels) and, interleaved step by step
 * in the same process, with those kernels taken out of a second device's
 * table so that nn composes them from primitives (as before they existed).
 * With a backend named (`webgpu`), on its devices; there the kernels are
 * only recorded by the host, so their milliseconds are recording time and
 * the step's median wall time (one read per step) is what to compare.
 *
 *   deno run -A bench/profile_cnn.ts [steps] [backend]
 * @module
 */

import { requestDevices } from "../mod.ts";
import { countKernels, type KernelCounts } from "./suites/_profile.ts";
import { CNN_FUSED as FUSED, cnnStep } from "./suites/conv.ts";

/** One training step of the CNN on `device` (batch 64), loss read back. */
const stepper = (device: Parameters<typeof cnnStep>[0]) => cnnStep(device, 64);

const steps = Number(Deno.args[0] ?? 20);
const backend = Deno.args[1] ?? "cpu";
const [fused, composed] = await requestDevices({ backend, count: 2 });
const table = composed.backendDevice.kernels as unknown as Record<string, unknown>;
for (const name of FUSED) delete table[name];
const runs = [stepper(fused), stepper(composed)];
for (let i = 0; i < 3; i++) for (const run of runs) await run();
const counts: KernelCounts[] = [{}, {}];
const wall = [0, 0];
const samples: number[][] = [[], []];
for (let i = 0; i < steps; i++) {
  for (let j = 0; j < 2; j++) {
    const t0 = performance.now();
    const c = await countKernels([[fused, composed][j]], runs[j]);
    wall[j] += performance.now() - t0;
    samples[j].push(performance.now() - t0);
    for (const [k, v] of Object.entries(c)) {
      const e = counts[j][k] ??= { calls: 0, ms: 0 };
      e.calls += v.calls;
      e.ms += v.ms;
    }
  }
}
const load = Deno.loadavg().map((l) => l.toFixed(1)).join(", ");
console.log(`CNN step on ${backend}, ${steps} interleaved steps each, load average ${load}`);
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
for (
  const [j, name] of ["as it runs (fused kernels)", "composed (fused kernels removed)"].entries()
) {
  const rows = Object.entries(counts[j]).sort((a, b) => b[1].ms - a[1].ms);
  const step = wall[j] / steps;
  console.log(
    `\n${name}: ${step.toFixed(1)} ms per step (instrumented), median ${
      median(samples[j]).toFixed(1)
    }`,
  );
  console.log("kernel                     calls      ms   share");
  for (const [k, v] of rows) {
    if (v.ms / steps < 0.05) continue;
    const ms = v.ms / steps;
    console.log(
      `${k.padEnd(24)} ${(v.calls / steps).toFixed(0).padStart(6)} ${ms.toFixed(2).padStart(7)} ${
        (100 * ms / step).toFixed(1).padStart(6)
      }%`,
    );
  }
}
Deno.exit(0);
