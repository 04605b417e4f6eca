/**
 * One `mapAsync` round trip on Deno's WebGPU: the synchronous part of the
 * call, the time until its promise resolves, whether the mapping can be
 * taken before that (see src/backends/webgpu/early_map.ts), and
 * `onSubmittedWorkDone`; in this thread, then in 1, 2 and 4 Workers at once.
 *
 *   deno run -A bench/device/map_round_trips.ts [LABEL]
 * @module
 */

const ROUNDS = 15;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

async function roundTrips(label: string): Promise<string> {
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) return `${label}: no adapter`;
  const device = await adapter.requestDevice();
  const source = device.createBuffer({
    size: 4096,
    usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
  });
  const staging = device.createBuffer({
    size: 4096,
    usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
  });
  const sync: number[] = [], resolved: number[] = [], workDone: number[] = [];
  let early = 0;
  for (let i = 0; i < ROUNDS; i++) {
    device.queue.writeBuffer(source, 0, new Float32Array([i]));
    const encoder = device.createCommandEncoder();
    encoder.copyBufferToBuffer(source, 0, staging, 0, 4096);
    device.queue.submit([encoder.finish()]);
    const t0 = performance.now();
    const mapped = staging.mapAsync(GPUMapMode.READ);
    const t1 = performance.now();
    // Only once a map of this buffer has resolved (early_map.ts says why).
    if (i > 0) {
      try {
        if (new Float32Array(staging.getMappedRange())[0] === i) early++;
      } catch {
        // not mapped yet
      }
    }
    await mapped;
    resolved.push(performance.now() - t0);
    sync.push(t1 - t0);
    staging.unmap();
    const t2 = performance.now();
    const copy = device.createCommandEncoder();
    copy.copyBufferToBuffer(source, 0, source, 2048, 1024);
    device.queue.submit([copy.finish()]);
    await device.queue.onSubmittedWorkDone();
    workDone.push(performance.now() - t2);
  }
  device.destroy();
  const ms = (xs: number[]) => `${median(xs).toFixed(2)} ms`;
  return `${label}: mapAsync sync part ${ms(sync)}, until resolved ${ms(resolved)}, ` +
    `early ok ${early}/${ROUNDS - 1}, onSubmittedWorkDone ${ms(workDone)}`;
}

interface WorkerSelf {
  onmessage: ((event: MessageEvent<string>) => void) | null;
  postMessage(message: string): void;
}

if ("WorkerGlobalScope" in globalThis) {
  const scope = globalThis as unknown as WorkerSelf;
  scope.onmessage = async (event) => scope.postMessage(await roundTrips(event.data));
} else if (import.meta.main) {
  console.log(await roundTrips(Deno.args[0] ?? "main thread"));
  if (Deno.args[0] === undefined) {
    for (const n of [1, 2, 4]) {
      const workers = Array.from(
        { length: n },
        () => new Worker(import.meta.url, { type: "module" }),
      );
      const t0 = performance.now();
      const lines = await Promise.all(workers.map((worker, i) =>
        new Promise<string>((resolve) => {
          worker.onmessage = (event) => resolve(event.data);
          worker.postMessage(`${n} workers, #${i}`);
        })
      ));
      for (const line of lines) console.log(line);
      console.log(`  ${n} workers: wall ${(performance.now() - t0).toFixed(0)} ms`);
      // Exits without terminating them: a Worker with a GPUDevice terminated
      // from outside crashed the process on NVIDIA (src/distributed/worker.ts).
    }
    Deno.exit(0);
  }
}
