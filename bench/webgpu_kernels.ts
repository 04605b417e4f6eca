/**
 * Throughput of the webgpu backend's matmul (GFLOP/s) and elementwise add
 * (GB/s). Every timed iteration ends with a one-element `read`, which waits
 * for the queued kernels to finish. Reports the median of several iterations
 * after a warm-up.
 *
 * deno run -A bench/webgpu_kernels.ts [--variant=register|tiled] [--rows=8] [--cols=8]
 *   [--wg=8x8] [--min-workgroups=N] [--sizes=256,512,1024,2048]
 * @module
 */

import type { BackendDevice, DeviceBuffer } from "../src/backends/backend.ts";
import {
  type MatmulTuning,
  type MatmulVariant,
  webgpuBackend,
} from "../src/backends/webgpu/mod.ts";
import { median } from "./suites/_common.ts";

function arg(name: string): string | undefined {
  const prefix = `--${name}=`;
  return Deno.args.find((a) => a.startsWith(prefix))?.slice(prefix.length);
}

/**
 * CPU seconds this process has used (all threads, llvmpipe's workers
 * included), or NaN off Linux. Work per CPU-second is a throughput measure
 * that other processes competing for the cores do not distort.
 */
function cpuSeconds(): number {
  try {
    const fields = Deno.readTextFileSync("/proc/self/stat").split(") ")[1]
      .split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return NaN;
  }
}

/**
 * Median and best seconds of `iters` runs of `body` (after `warmup` runs),
 * and CPU seconds per run.
 */
async function time(
  d: BackendDevice,
  sync: DeviceBuffer,
  warmup: number,
  iters: number,
  body: () => void,
): Promise<{ median: number; best: number; cpu: number }> {
  for (let i = 0; i < warmup; i++) {
    body();
    await d.read(sync, 0, 1, "float32");
  }
  const times: number[] = [];
  const cpu0 = cpuSeconds();
  for (let i = 0; i < iters; i++) {
    const t0 = performance.now();
    body();
    await d.read(sync, 0, 1, "float32");
    times.push((performance.now() - t0) / 1000);
  }
  const cpu = (cpuSeconds() - cpu0) / iters;
  return { median: median(times), best: Math.min(...times), cpu };
}

function randomFill(d: BackendDevice, b: DeviceBuffer, n: number, seed: number) {
  d.kernels.random({ out: b, numel: n, kind: "uniform", seed, a: -1, b: 1, dtype: "float32" });
}

const variant = arg("variant") as MatmulVariant | undefined;
const rows = arg("rows");
const cols = arg("cols");
const wg = arg("wg")?.split("x").map(Number);
const matmulOptions: MatmulTuning = {
  variant: variant ?? "auto",
  rows: rows ? Number(rows) : 0,
  cols: cols ? Number(cols) : 0,
  wgX: wg?.[0] ?? 8,
  wgY: wg?.[1] ?? 4,
  minWorkgroups: Number(arg("min-workgroups") ?? 0),
};
const backend = await webgpuBackend({ matmul: matmulOptions });
const device = await backend.createDevice(0);
const sizes = (arg("sizes") ?? "256,512,1024,2048").split(",").map(Number);
// "a", "b" or "ab": which operands are stored transposed.
const trans = arg("trans") ?? "";
console.log(`adapter: ${device.info}`);
console.log(
  `matmul variant: ${matmulOptions.variant}, block: ${matmulOptions.rows || "auto"}x${
    matmulOptions.cols || "auto"
  }, ` +
    `workgroup: ${matmulOptions.wgX}x${matmulOptions.wgY}`,
);

for (const n of sizes) {
  const a = device.allocate(n * n, "float32");
  const b = device.allocate(n * n, "float32");
  const out = device.allocate(n * n, "float32");
  randomFill(device, a, n * n, 1);
  randomFill(device, b, n * n, 2);
  const layout = {
    batch: 1,
    m: n,
    n,
    k: n,
    aBatchStride: 0,
    bBatchStride: 0,
    transA: trans.includes("a"),
    transB: trans.includes("b"),
    dtype: "float32" as const,
  };
  const flops = 2 * n * n * n;
  // Enough back-to-back products per iteration (~2 GFLOP) that the latency of
  // the synchronising read is noise.
  const reps = Math.max(1, Math.round(2e9 / flops));
  const iters = n >= 2048 ? 3 : 7;
  const t = await time(device, out, 1, iters, () => {
    for (let r = 0; r < reps; r++) device.kernels.matmul({ a, b, out, ...layout });
  });
  const rate = (s: number) => (flops * reps / s / 1e9).toFixed(2);
  console.log(
    `matmul ${n}x${n}x${n}${trans ? ` (trans ${trans})` : ""}: ${rate(t.median)} GFLOP/s median, ` +
      `${rate(t.best)} best, ${rate(t.cpu)} per CPU-second ` +
      `(${(t.median / reps * 1000).toFixed(2)} ms each, ${iters} runs)`,
  );
  for (const buf of [a, b, out]) device.free(buf);
}

for (const n of [1 << 20, 1 << 24]) {
  const a = device.allocate(n, "float32");
  const b = device.allocate(n, "float32");
  const out = device.allocate(n, "float32");
  randomFill(device, a, n, 3);
  randomFill(device, b, n, 4);
  const layout = {
    shape: [n],
    aStrides: [1],
    bStrides: [1],
    dtype: "float32" as const,
  };
  // ~1 GB of traffic per iteration so the read latency (~12 ms) is noise.
  const reps = Math.max(10, Math.round(1e9 / (12 * n)));
  const t = await time(device, out, 1, 7, () => {
    for (let r = 0; r < reps; r++) device.kernels.binary({ op: "add", a, b, out, ...layout });
  });
  const bytes = 3 * 4 * n * reps;
  const rate = (s: number) => (bytes / s / 1e9).toFixed(2);
  console.log(
    `add ${n} float32: ${rate(t.median)} GB/s median, ${rate(t.best)} best, ` +
      `${rate(t.cpu)} per CPU-second ` +
      `(${(t.median / reps * 1000).toFixed(3)} ms each)`,
  );
  for (const buf of [a, b, out]) device.free(buf);
}
device.destroy();
