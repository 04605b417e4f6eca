/**
 * Stress for the cpu matmul's worker-thread coordination (`threads.ts`):
 * products of every size class back to back (threaded, batched, alone),
 * the shared memory growing under warm workers, both kernels' thread pools,
 * the "run alone after workers were late" back-off switching on and off,
 * all while busy Workers keep the cores oversubscribed. Every product must
 * equal the single-thread result bitwise, and none may stall (a lost
 * wake-up would hang a product until the 60 s stall error).
 *
 * Bounded in time: MULTIGRAD_STRESS_SECONDS (default 6) of products; run it
 * longer by hand, e.g. `MULTIGRAD_STRESS_SECONDS=600 deno test -A tests/matmul_threads_stress_test.ts`.
 */

import assert from "node:assert/strict";
import {
  kernelFloats,
  matmul,
  matmulBias,
  releaseKernelFloats,
  startMatmulThreads,
  threadedMatmuls,
} from "../src/backends/cpu/kernels/matmul.ts";
import type { MatmulKernel } from "../src/backends/cpu/kernels/matmul.ts";
import { KernelThreads } from "../src/backends/cpu/threads.ts";
import type { PanelFn, PanelJob } from "../src/backends/cpu/threads.ts";
import { seededRandom } from "../mod.ts";

const SECONDS = Number(Deno.env.get("MULTIGRAD_STRESS_SECONDS") ?? "6");
/** Spinning Workers that keep every core busy (the machine busier than its cores). */
const BUSY_WORKERS = 3;

type Shape = [batch: number, m: number, n: number, k: number];

/** A product of some size class: large (split in units), batched small, or below the threshold. */
function pickShape(random: () => number): Shape {
  const int = (lo: number, hi: number) => lo + Math.floor(random() * (hi - lo + 1));
  switch (int(0, 4)) {
    case 0: // large: many units, packing phase by every thread
      return [1, int(64, 640), int(64, 640), int(32, 700)];
    case 1: // a batch of small products: one job spans the entries
      return [int(8, 80), int(4, 40), int(8, 200), int(8, 160)];
    case 2: // too small for the threads: runs alone between threaded ones
      return [1, int(1, 40), int(1, 60), int(1, 60)];
    case 3: // one row panel, many column panels; k in blocks
      return [1, int(1, 8), int(1000, 4000), int(200, 600)];
    default: // batched, each large enough for a job of its own
      return [int(2, 4), int(100, 300), int(100, 300), int(100, 300)];
  }
}

function startBusyWorkers(count: number): Worker[] {
  const url = URL.createObjectURL(
    new Blob(["let x = 0; for (;;) x = (x * 31 + 7) | 0;"], { type: "text/javascript" }),
  );
  const workers = Array.from({ length: count }, () => new Worker(url, { type: "module" }));
  URL.revokeObjectURL(url);
  return workers;
}

Deno.test({
  name: "cpu matmul threads under stress: bitwise the single-thread result, never a stall",
  sanitizeResources: false,
  fn: async () => {
    const threads = await startMatmulThreads(3);
    if (threads === 1) {
      console.warn("  no worker threads here (no shared WebAssembly memory): nothing to stress");
      return;
    }
    // The named kernels have their own memory and thread pool each: start both.
    const kernels: MatmulKernel[] = ["relaxed-simd", "simd"];
    const busy = startBusyWorkers(BUSY_WORKERS);
    const random = seededRandom(29);
    const before = threadedMatmuls();
    const resident: Float32Array[] = [];
    let products = 0;
    let slowest = 0;
    try {
      const end = performance.now() + SECONDS * 1000;
      while (performance.now() < end) {
        // Stretches without yielding to the event loop (as in a training
        // step), then a yield; sometimes the back-off is forgotten first.
        if (random() < 0.3) await startMatmulThreads(threads);
        else await new Promise((resolve) => setTimeout(resolve, 0));
        const stretch = 1 + Math.floor(random() * 12);
        for (let s = 0; s < stretch; s++) {
          const [batch, m, n, k] = pickShape(random);
          const kernel = kernels[Math.floor(random() * kernels.length)];
          const transA = random() < 0.5, transB = random() < 0.5;
          const broadcastA = batch > 1 && random() < 0.3;
          const aLength = (broadcastA ? 1 : batch) * m * k;
          // Operands in the kernel's memory now and then: the memory grows
          // under warm workers, and the next job reads what lies past its old end.
          const inMemory = random() < 0.3 ? kernelFloats(aLength, kernel) : undefined;
          if (inMemory !== undefined) resident.push(inMemory);
          const a = inMemory ?? new Float32Array(aLength);
          for (let i = 0; i < a.length; i++) a[i] = random() - 0.5;
          const b = Float32Array.from({ length: batch * k * n }, () => random() - 0.5);
          const bias = random() < 0.3
            ? Float32Array.from({ length: n }, () => random() - 0.5)
            : undefined;
          const layout = {
            batch,
            m,
            n,
            k,
            aBatchStride: broadcastA ? 0 : m * k,
            bBatchStride: k * n,
            transA,
            transB,
            dtype: "float32" as const,
          };
          const want = new Float32Array(batch * m * n);
          matmulBias({ ...layout, a, b, out: want }, bias, 1, kernel);
          const got = new Float32Array(batch * m * n).fill(NaN);
          const began = performance.now();
          if (bias === undefined) matmul({ ...layout, a, b, out: got }, threads, kernel);
          else matmulBias({ ...layout, a, b, out: got }, bias, threads, kernel);
          slowest = Math.max(slowest, performance.now() - began);
          const at = got.findIndex((v, i) => !Object.is(v, want[i]));
          assert.equal(
            at,
            -1,
            `${kernel} ${batch}x${m}x${n}x${k} transA=${transA} transB=${transB} broadcastA=${broadcastA} bias=${
              bias !== undefined
            }: element ${at} is ${got[at]}, alone ${want[at]}`,
          );
          products++;
        }
        // Give resident operands back now and then (their regions are reused).
        if (resident.length > 8) { for (const r of resident.splice(0)) releaseKernelFloats(r); }
      }
    } finally {
      for (const r of resident) releaseKernelFloats(r);
      for (const w of busy) w.terminate();
    }
    const threaded = threadedMatmuls() - before;
    console.log(
      `  ${products} products in ${SECONDS} s, ${threaded} on the default kernel's threads, slowest ${
        slowest.toFixed(0)
      } ms`,
    );
    assert.ok(products > 0);
  },
});

/**
 * A module with the kernel's import and signature whose `panel` traps
 * (`unreachable`) or does nothing: what the workers run in the tests below.
 */
function panelModule(traps: boolean): WebAssembly.Module {
  const body = traps ? [0x00, 0x00, 0x0b] : [0x00, 0x0b];
  return new WebAssembly.Module(
    new Uint8Array([
      ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00],
      // type: (i32 x 8) -> ()
      ...[0x01, 0x0c, 0x01, 0x60, 0x08, ...new Array(8).fill(0x7f), 0x00],
      // import env.memory: shared, 1 to 16384 pages
      ...[0x02, 0x12, 0x01, 0x03, 0x65, 0x6e, 0x76, 0x06, 0x6d, 0x65, 0x6d, 0x6f, 0x72, 0x79],
      ...[0x02, 0x03, 0x01, 0x80, 0x80, 0x01],
      ...[0x03, 0x02, 0x01, 0x00], // one function of type 0
      ...[0x07, 0x09, 0x01, 0x05, 0x70, 0x61, 0x6e, 0x65, 0x6c, 0x00, 0x00], // export "panel"
      ...[0x0a, body.length + 2, 0x01, body.length, ...body],
    ]),
  );
}

/** A job of 40 x 4 tiles (no packing phase) for the modules above. */
const TILE_JOB: PanelJob = {
  aAt: 0,
  bAt: 0,
  cAt: 0,
  iPanels: 40,
  jPanels: 4,
  slice: 1,
  k: 4,
  ldc: 64,
  mr: 4,
  kc: 4,
  biasAt: -1,
};

// (Deno prints the worker's "Uncaught RuntimeError: unreachable": the worker
// ends with it, by design, so that the reason shows.)
Deno.test({
  name: "cpu matmul threads: a worker whose share throws costs no stall and no missing tile",
  sanitizeResources: false,
  fn: async () => {
    if (typeof SharedArrayBuffer !== "function") return;
    const memory = new WebAssembly.Memory({ initial: 1, maximum: 16384, shared: true });
    // This thread's kernel records the tiles it computes and sleeps a little
    // in each, so that the worker surely takes some units.
    const computed = new Set<number>();
    const nap = new Int32Array(new SharedArrayBuffer(4));
    const panel: PanelFn = (_a, _b, c) => {
      computed.add(c);
      Atomics.wait(nap, 0, 0, 2);
    };
    const pool = new KernelThreads(
      panelModule(true),
      null,
      memory,
      { panel, packRows: null, packCols: null },
      1,
    );
    assert.equal(await pool.started, 2);
    const job = TILE_JOB;
    // Every tile's C offset: panel i's rows, B panel j's 8 columns.
    const tiles = new Set<number>();
    for (let i = 0; i < job.iPanels; i++) {
      for (let j = 0; j < job.jPanels; j++) tiles.add(i * job.mr * job.ldc + j * 32);
    }
    // Until the worker has taken a unit (it falls back to one thread then).
    for (let tries = 0; pool.available > 1 && tries < 50; tries++) {
      computed.clear();
      const began = performance.now();
      pool.run(job, 2);
      assert.ok(performance.now() - began < 30_000, "the job waited for a dead worker");
      assert.deepEqual(computed, tiles, "every tile computed, the worker's share included");
    }
    assert.equal(pool.available, 1, "products run on one thread once a worker faulted");
  },
});

Deno.test({
  name: "cpu matmul threads: this thread's share throwing leaves no worker in the job",
  sanitizeResources: false,
  fn: async () => {
    if (typeof SharedArrayBuffer !== "function") return;
    const memory = new WebAssembly.Memory({ initial: 1, maximum: 16384, shared: true });
    let calls = 0;
    const panel: PanelFn = () => {
      if (++calls === 2) throw new Error("kernel fault on this thread");
    };
    const pool = new KernelThreads(
      panelModule(false),
      null,
      memory,
      { panel, packRows: null, packCols: null },
      1,
    );
    assert.equal(await pool.started, 2);
    // On a loaded machine the worker may take every unit before this thread
    // takes two (its panels do nothing): run until this thread's share throws.
    let threw = false;
    for (let tries = 0; !threw && tries < 200; tries++) {
      calls = 0;
      try {
        pool.run(TILE_JOB, 2);
      } catch (e) {
        assert.match((e as Error).message, /kernel fault on this thread/);
        threw = true;
      }
    }
    assert.ok(threw, "this thread took at least two units in one of 200 jobs");
    // (Before: the worker could still be in the job when the next one was posted.)
    assert.equal(pool.available, 1, "products run on one thread after a fault");
  },
});

/**
 * A fresh process's first products: the workers start while products run
 * alone, then join at once, while the scratch memory grows for the first
 * time (the stall was seen once, at load 15, on a process's first products).
 */
const FIRST_PRODUCTS = `
import { matmul, threadedMatmuls } from ${
  JSON.stringify(new URL("../src/backends/cpu/kernels/matmul.ts", import.meta.url).href)
};
const seed = Number(Deno.args[0]);
let state = seed;
const random = () => ((state = (state * 1103515245 + 12345) >>> 0) / 4294967296);
const end = performance.now() + 1500;
for (let i = 0; performance.now() < end; i++) {
  const m = 64 + Math.floor(random() * 400), n = 64 + Math.floor(random() * 400);
  const k = 32 + Math.floor(random() * 400), batch = random() < 0.3 ? 16 : 1;
  const a = Float32Array.from({ length: batch * m * k }, () => random() - 0.5);
  const b = Float32Array.from({ length: batch * k * n }, () => random() - 0.5);
  const layout = { batch, m, n, k, aBatchStride: m * k, bBatchStride: k * n,
    transA: random() < 0.5, transB: random() < 0.5, dtype: "float32" };
  const many = new Float32Array(batch * m * n), one = new Float32Array(batch * m * n);
  matmul({ ...layout, a, b, out: many }, 3);
  matmul({ ...layout, a, b, out: one }, 1);
  const at = many.findIndex((v, j) => !Object.is(v, one[j]));
  if (at >= 0) throw new Error("product " + i + " differs at " + at);
  // Yield now and then, as a training loop does (the workers start meanwhile).
  if (i % 3 === 0) await new Promise((resolve) => setTimeout(resolve, 0));
}
console.log(threadedMatmuls());
`;

Deno.test({
  name: "cpu matmul threads: fresh processes' first products, bitwise, never a stall",
  fn: async () => {
    const processes = Number(Deno.env.get("MULTIGRAD_STRESS_PROCESSES") ?? "2");
    const file = await Deno.makeTempFile({ suffix: ".ts" });
    const busy = startBusyWorkers(BUSY_WORKERS);
    try {
      await Deno.writeTextFile(file, FIRST_PRODUCTS);
      const threaded: number[] = [];
      for (let i = 0; i < processes; i++) {
        const child = new Deno.Command(Deno.execPath(), {
          args: ["run", "-A", file, String(i + 1)],
          stdout: "piped",
          stderr: "piped",
        }).spawn();
        // Far beyond what 1.5 s of products takes, even at load 20 (not a timing).
        const timer = setTimeout(() => child.kill("SIGKILL"), 120_000);
        const out = await child.output();
        clearTimeout(timer);
        assert.equal(out.signal, null, `process ${i + 1} killed after 120 s: it hung`);
        assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
        threaded.push(Number(new TextDecoder().decode(out.stdout)));
      }
      console.log(`  products on the threads, by process: ${threaded.join(", ")}`);
    } finally {
      for (const w of busy) w.terminate();
      await Deno.remove(file);
    }
  },
});
