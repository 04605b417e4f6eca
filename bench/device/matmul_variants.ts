/**
 * The tiled and register-blocked matmul kernels on Deno's WebGPU and on
 * Dawn, timed round-robin in one run (8 products then one read, 4 at 4096;
 * the median of 3 rounds after one warm-up):
 * `SIZES=1024,2048,4096 deno run -A bench/device/matmul_variants.ts`.
 * @module
 */
import { randn, registerBackend, requestDevices, webgpuBackend } from "../../mod.ts";
import { dawnBackend } from "../../src/backends/dawn/mod.ts";
const variants = ["tiled", "register"] as const;
for (const v of variants) {
  registerBackend(`deno-${v}`, () => webgpuBackend({ name: `deno-${v}`, matmul: { variant: v } }), {
    priority: 0,
  });
  registerBackend(`dawn-${v}`, () => dawnBackend({ name: `dawn-${v}`, matmul: { variant: v } }), {
    priority: 0,
  });
}
const names = variants.flatMap((v) => [`deno-${v}`, `dawn-${v}`]);
const devices = new Map<string, Awaited<ReturnType<typeof requestDevices>>[0]>();
for (const n of names) devices.set(n, (await requestDevices({ backend: n, count: 1 }))[0]);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
for (const size of (Deno.env.get("SIZES") ?? "1024,2048,4096").split(",").map(Number)) {
  const reps = size === 4096 ? 4 : 8;
  const times = new Map<string, number[]>(names.map((n) => [n, []]));
  const ops = new Map(names.map((n) => {
    const d = devices.get(n)!;
    return [n, [randn([size, size], { device: d }), randn([size, size], { device: d })]];
  }));
  for (let round = 0; round < 4; round++) {
    for (const n of names) {
      const [a, b] = ops.get(n)!;
      const t0 = performance.now();
      let acc = a.matmul(b);
      for (let i = 1; i < reps; i++) acc = a.matmul(b);
      await acc.sum().data();
      if (round > 0) times.get(n)!.push(performance.now() - t0);
    }
  }
  for (const n of names) {
    const ms = median(times.get(n)!);
    console.log(
      `${size} ${n.padEnd(14)} ${ms.toFixed(1)} ms for ${reps} products + read: ${
        ((2 * size ** 3 * reps) / ms / 1e6).toFixed(0)
      } GFLOP/s`,
    );
  }
}
