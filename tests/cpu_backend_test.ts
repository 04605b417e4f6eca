/**
 * The cpu backend's own machinery: erf/erfc accuracy, the float32 GELU path
 * against float64, the host array pool's accounting, matmul worker threads.
 */

import assert from "node:assert/strict";
import { erf, erfc, erfcFloat32 } from "../src/backends/cpu/kernels/erf.ts";
import { gelu } from "../src/backends/cpu/kernels/gelu.ts";
import { geluDerivative } from "../src/backends/cpu/kernels/gelu_derivative.ts";
import { geluInWasm } from "../src/backends/cpu/wasm/gelu.ts";
import { cpuBackend } from "../src/backends/cpu/mod.ts";
import { HostPool } from "../src/backends/cpu/pool.ts";
import { loadBlas } from "../src/backends/cpu/blas.ts";
import { KernelHeap } from "../src/backends/cpu/wasm/heap.ts";
import {
  kBlock,
  kernelFloats,
  matmul,
  matmulBias,
  matmulKernel,
  releaseKernelFloats,
  startMatmulThreads,
  threadedMatmuls,
} from "../src/backends/cpu/kernels/matmul.ts";
import { seededRandom } from "../mod.ts";
import type { BackendDevice, DeviceImpl } from "../src/backends/backend.ts";
import type { TypedArray } from "../src/dtype.ts";

Deno.test("cpu erf/erfc: float64 values to 1e-15 relative, tails without cancellation", () => {
  // Reference values: Python's math.erf / math.erfc (glibc, within 1 ulp).
  const cases: [number, number, number][] = [
    [0.1, 0.1124629160182849, 0.8875370839817152],
    [0.46875, 0.49261347321793797, 0.507386526782062],
    [0.5, 0.5204998778130465, 0.4795001221869535],
    [1, 0.8427007929497149, 0.15729920705028513],
    [2, 0.9953222650189527, 0.004677734981047265],
    [3.5, 0.9999992569016276, 7.430983723414128e-7],
    [4, 0.9999999845827421, 1.541725790028002e-8],
    [5, 0.9999999999984626, 1.5374597944280351e-12],
    [10, 1, 2.088487583762545e-45],
  ];
  for (const [x, e, c] of cases) {
    assert.ok(Math.abs(erf(x) - e) <= 2e-16 + 1e-15 * e, `erf(${x}) = ${erf(x)}, want ${e}`);
    assert.ok(Math.abs(erf(-x) + e) <= 2e-16 + 1e-15 * e, `erf(${-x})`);
    assert.ok(Math.abs(erfc(x) - c) <= 1e-14 * c, `erfc(${x}) = ${erfc(x)}, want ${c}`);
    assert.ok(Math.abs(erfc(-x) - (2 - c)) <= 1e-15 * 2, `erfc(${-x})`);
  }
  assert.equal(erf(0), 0);
  assert.equal(erf(Infinity), 1);
  assert.equal(erfc(Infinity), 0);
  assert.ok(Number.isNaN(erf(NaN)) && Number.isNaN(erfc(NaN)));
});

Deno.test("cpu gelu float32: WebAssembly within 8 ulp of float64, TypeScript within 2", () => {
  const n = 4001;
  const x32 = Float32Array.from({ length: n }, (_, i) => -20 + (40 * i) / (n - 1));
  x32.set([0, -0, 1e-30, -1e-30, 3, -0.75, 1e-6]);
  assert.ok(geluInWasm(), "WebAssembly SIMD is available in Deno");
  for (const grad of [false, true]) {
    const ref = new Float64Array(n);
    const fused = grad ? geluDerivative : gelu;
    fused({ x: Float64Array.from(x32), out: ref, numel: n, dtype: "float64" });
    // The TypeScript float32 path (where WebAssembly SIMD is missing), value by value.
    const typescript = (v: number) =>
      grad
        ? 0.5 * erfcFloat32(-v * Math.SQRT1_2) + v * Math.exp(-0.5 * v * v) / Math.sqrt(2 * Math.PI)
        : 0.5 * v * erfcFloat32(-v * Math.SQRT1_2);
    const wasm = new Float32Array(n);
    fused({ x: x32, out: wasm, numel: n, dtype: "float32" });
    const ts = Float32Array.from(x32, typescript);
    for (const [path, ulps, out] of [["wasm", 8, wasm], ["typescript", 2, ts]] as const) {
      for (let i = 0; i < n; i++) {
        // `ulps` ulp of the result, or for the derivative Φ(x) + xφ(x) of
        // its larger term (they cancel near x = -0.75); results below
        // 2^-120 may flush toward 0 in WebAssembly (its exp does not make
        // denormals), and are denormal-exact in TypeScript.
        const v = x32[i];
        const scale = grad
          ? 0.5 * erfc(-v * Math.SQRT1_2) +
            Math.abs(v) * Math.exp(-0.5 * v * v) / Math.sqrt(2 * Math.PI)
          : Math.abs(ref[i]);
        const floor = path === "wasm" ? 2 ** -120 : 2 * 2 ** -149;
        const tol = ulps * 2 ** -23 * scale + floor;
        assert.ok(
          Math.abs(out[i] - ref[i]) <= tol,
          `${path} ${grad ? "geluDerivative" : "gelu"}(${v}) = ${out[i]}, float64 gives ${ref[i]}`,
        );
      }
    }
  }
  // Infinities and NaN as the float64 path and PyTorch: gelu(inf) = inf, gelu(-inf) = NaN.
  const special = Float32Array.from([Infinity, -Infinity, NaN, 0]);
  const out = new Float32Array(4);
  gelu({ x: special, out, numel: 4, dtype: "float32" });
  assert.deepEqual([...out], [Infinity, NaN, NaN, 0]);
});

Deno.test("cpu memory: freed arrays are pooled; bytesInUse exact, bytesReserved includes the pool", () => {
  const d = cpuBackend().createDevice(0) as BackendDevice;
  const a = d.allocate(1000, "float32");
  const b = d.allocate(10, "int32");
  assert.deepEqual(d.memory(), { bytesInUse: 4040, bytesReserved: 4040 });
  d.write(a, 0, new Float32Array(1000).fill(7));
  d.free(a);
  assert.deepEqual(d.memory(), { bytesInUse: 40, bytesReserved: 4040 });
  const again = d.allocate(1000, "float32");
  assert.deepEqual(d.memory(), { bytesInUse: 4040, bytesReserved: 4040 });
  d.free(again);
  d.free(b);
  // The second 1000-element array reused the first: 4000 + 40 bytes pooled.
  assert.deepEqual(d.memory(), { bytesInUse: 0, bytesReserved: 4040 });
});

/**
 * `found`, or null after a note that the test is skipped: not allowed where
 * `MULTIGRAD_REQUIRE_BLAS` is set (CI installs OpenBLAS and sets it, so the
 * BLAS paths are always checked there).
 */
function requireBlas<T>(found: T | null, what: string, instead: string): T | null {
  if (found !== null) return found;
  assert.ok(
    !Deno.env.get("MULTIGRAD_REQUIRE_BLAS"),
    `MULTIGRAD_REQUIRE_BLAS is set but the ${what} did not load`,
  );
  console.warn(`  no BLAS library here: ${instead}`);
  return null;
}

Deno.test("cpu BLAS: vector sums and scales have the bits of float32 arithmetic, edge values too", () => {
  const vector = requireBlas(
    loadBlas()?.vector ?? null,
    "BLAS vector operations",
    "MPI's shared-memory sums use MPI_Reduce_local",
  );
  if (vector === null) return;
  const random = seededRandom(43);
  const edges = [-0, 0, 1e-40, -3e-45, 3.4e38, Infinity, -Infinity, NaN, 1.5e-45];
  // Long enough for the library's SIMD body and an odd tail.
  const length = 1003;
  const x = new Float32Array(length);
  const y = new Float32Array(length);
  for (let i = 0; i < length; i++) {
    x[i] = i < 81 ? edges[i % 9] : (random() - 0.5) * 1e3;
    y[i] = i < 81 ? edges[Math.floor(i / 9)] : (random() - 0.5) * 1e-3;
  }
  const sum = y.map((v, i) => Math.fround(v + x[i]));
  vector.addInto(x, y);
  for (let i = 0; i < length; i++) {
    assert.ok(Object.is(y[i], sum[i]), `addInto [${i}]: ${y[i]} for ${sum[i]}`);
  }
  const half = y.map((v) => Math.fround(v * 0.5));
  vector.scale(y, 0.5);
  for (let i = 0; i < length; i++) {
    assert.ok(Object.is(y[i], half[i]), `scale [${i}]: ${y[i]} for ${half[i]}`);
  }
  vector.addInto(new Float32Array(0), new Float32Array(0));
  assert.throws(
    () => vector.addInto(new Float32Array(3), new Float32Array(4)),
    /addInto: lengths 3 and 4 differ/,
  );
});

Deno.test("cpu BLAS: products equal the WebAssembly kernel's to float32 rounding in every layout", () => {
  const blas = requireBlas(loadBlas(), "BLAS", "the WebAssembly kernel runs every product");
  if (blas === null) return;
  const random = seededRandom(41);
  for (
    const [batch, m, n, k, broadcast] of [
      [1, 37, 29, 53, ""],
      [3, 8, 5, 7, ""],
      [3, 8, 5, 7, "a"],
      [3, 8, 5, 7, "b"],
      [2, 4, 6, 0, ""],
      [1, 0, 6, 3, ""],
      // m ≥ 256: B transposed is copied untransposed before BLAS runs it.
      [3, 300, 6, 20, ""],
      [3, 300, 6, 20, "b"],
      [2, 256, 5, 0, ""],
    ] as const
  ) {
    for (const transA of [false, true]) {
      for (const transB of [false, true]) {
        for (const dtype of ["float32", "float64"] as const) {
          const Ctor = dtype === "float32" ? Float32Array : Float64Array;
          const values = (length: number) => {
            const x = new Ctor(length);
            for (let e = 0; e < length; e++) x[e] = random() - 0.5;
            return x;
          };
          const a = values((broadcast === "a" ? 1 : batch) * m * k);
          const b = values((broadcast === "b" ? 1 : batch) * k * n);
          const bias = values(n);
          const layout = {
            batch,
            m,
            n,
            k,
            aBatchStride: broadcast === "a" ? 0 : m * k,
            bBatchStride: broadcast === "b" ? 0 : k * n,
            transA,
            transB,
            dtype,
          };
          const want = new Ctor(batch * m * n);
          matmulBias({ ...layout, a, b, out: want }, bias, 1);
          const got = new Ctor(batch * m * n).fill(NaN);
          blas.matmul({ ...layout, a, b, out: got }, 2, bias);
          const tolerance = dtype === "float32" ? 1e-5 : 1e-13;
          got.forEach((v, i) =>
            assert.ok(
              Math.abs(v - want[i]) <= tolerance,
              `${dtype} ${batch}x${m}x${n}x${k} ${broadcast} transA=${transA} transB=${transB}: element ${i} is ${v}, want ${
                want[i]
              }`,
            )
          );
        }
      }
    }
  }
  // A NaN or inf operand spreads as IEEE arithmetic says (BLAS must not skip zeros).
  const a = new Float32Array([NaN, 1, Infinity, 0]);
  const out = new Float32Array(4);
  blas.matmul({
    a,
    b: new Float32Array([0, 0, 0, 0]),
    out,
    batch: 1,
    m: 2,
    n: 2,
    k: 2,
    aBatchStride: 4,
    bBatchStride: 4,
    transA: false,
    transB: false,
    dtype: "float32",
  }, 1);
  assert.deepEqual([...out], [NaN, NaN, NaN, NaN]);
});

Deno.test("cpuBackend: BLAS named in info where it loads; blas: false and a named kernel turn it off", () => {
  const info = (options: Parameters<typeof cpuBackend>[0]) =>
    (cpuBackend(options).createDevice(0) as BackendDevice).info;
  if (loadBlas() !== null) assert.match(info({}), /libopenblas|Accelerate/);
  assert.match(info({ blas: false }), /(relaxed-simd|simd|typescript) matmul/);
  assert.match(info({ matmulKernel: "simd" }), /simd matmul/);
});

Deno.test("MULTIGRAD_BLAS naming a library that does not load is an error naming it", async () => {
  const child = await new Deno.Command(Deno.execPath(), {
    args: [
      "eval",
      `import { cpuBackend } from ${
        JSON.stringify(new URL("../src/backends/cpu/mod.ts", import.meta.url).href)
      }; cpuBackend();`,
    ],
    env: { MULTIGRAD_BLAS: "/nonexistent/libnoblas.so" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.notEqual(child.code, 0);
  assert.match(
    new TextDecoder().decode(child.stderr),
    /MULTIGRAD_BLAS=\/nonexistent\/libnoblas\.so: cannot load it as a CBLAS library/,
  );
});

Deno.test("cpu host pool: a full pool lets the arrays freed longest ago go, to where they came from", () => {
  const evicted: TypedArray[] = [];
  const pool = new HostPool(4000, (a) => evicted.push(a));
  const old = new Float32Array(500);
  const mid = new Int32Array(400);
  assert.ok(pool.give(old) && pool.give(mid));
  assert.equal(pool.bytes, 3600);
  // 3600 + 1600 > 4000: the oldest (old) goes, mid stays.
  const next = new Float32Array(400);
  assert.ok(pool.give(next));
  assert.deepEqual(evicted, [old]);
  assert.equal(pool.bytes, 3200);
  assert.equal(pool.take("float32", 500), undefined);
  assert.equal(pool.take("int32", 400), mid);
  assert.equal(pool.take("float32", 400), next);
  assert.equal(pool.bytes, 0);
  // Larger than the whole pool, or empty: refused, nothing evicted.
  assert.ok(!pool.give(new Float32Array(1001)) && !pool.give(new Float32Array(0)));
  assert.deepEqual(evicted, [old]);
});

Deno.test("cpu kernel heap: freed regions merge and serve any later size; the top comes down", () => {
  const memory = new WebAssembly.Memory({ initial: 1, maximum: 4 });
  const heap = new KernelHeap(memory, 4 * 65536);
  const a = heap.alloc(1000)!; // 1024 bytes
  const b = heap.alloc(3000)!; // 3008
  const c = heap.alloc(64)!;
  assert.deepEqual([a, b, c], [64, 64 + 1024, 64 + 1024 + 3008]);
  heap.release(a, 1000);
  heap.release(b, 3000);
  // a and b merged: 4032 bytes at 64 serve a size neither had alone.
  assert.equal(heap.alloc(4000), 64);
  heap.release(64, 4000);
  // Best fit: a 1024-byte hole is cut from the merged block's start.
  assert.equal(heap.alloc(1024), 64);
  heap.release(64, 1024);
  heap.release(c, 64);
  assert.equal(heap.top, 64, "everything freed: the top is back at the start");
  // Up to the cap, then undefined (the caller keeps the array in host memory).
  const big = heap.alloc(3 * 65536)!;
  assert.equal(heap.alloc(65536), undefined);
  heap.release(big, 3 * 65536);
  assert.equal(heap.alloc(65536), 64, "the freed top serves the next request");
  const above = heap.alloc(64)!;
  heap.release(64, 65536);
  assert.throws(() => heap.release(64, 65536), /released twice/);
  heap.release(above, 64);
  assert.equal(heap.top, 64);
});

Deno.test("cpu matmul on worker threads: bitwise the single-thread result, every shape class", async () => {
  const threads = await startMatmulThreads(3);
  if (threads === 1) {
    console.warn("  no worker threads here (no shared WebAssembly memory): nothing to compare");
    return;
  }
  const random = seededRandom(3);
  const before = threadedMatmuls();
  const cases: [number, number, number, number, boolean, boolean][] = [
    // [batch, m, n, k, transA, transB]
    [1, 1024, 1024, 300, false, false],
    [1, 256, 512, 784, false, true],
    [1, 512, 784, 256, true, false],
    [1, 1000, 10, 600, false, true], // too few column panels for every thread
    [3, 301, 203, 257, true, true], // edges everywhere, batched
    [1, 7, 9000, 100, false, false], // one row panel, many column panels
    [1, 1, 3000, 700, false, true], // one row, k in three blocks
    [2, 64, 300, 513, true, false], // k in three blocks, the last one shorter
    [64, 32, 196, 144, false, false], // many small products: units span the batch
    [50, 13, 37, 61, true, true], // odd sizes, both transposed
  ];
  for (const [batch, m, n, k, transA, transB] of cases) {
    const a = Float32Array.from({ length: batch * m * k }, () => random() - 0.5);
    const b = Float32Array.from({ length: batch * k * n }, () => random() - 0.5);
    const layout = {
      batch,
      m,
      n,
      k,
      aBatchStride: m * k,
      bBatchStride: k * n,
      transA,
      transB,
      dtype: "float32" as const,
    };
    const one = new Float32Array(batch * m * n);
    const many = new Float32Array(batch * m * n).fill(NaN);
    matmul({ a, b, out: one, ...layout }, 1);
    matmul({ a, b, out: many, ...layout }, threads);
    assert.deepEqual(many, one, `${batch}x${m}x${n}x${k} transA=${transA} transB=${transB}`);
  }
  assert.ok(threadedMatmuls() > before, "some products ran on the worker threads");
});

Deno.test("cpu matmul: batches of small products span the threads, bitwise each product alone", async () => {
  const threads = await startMatmulThreads(3);
  const random = seededRandom(17);
  const cases: [number, number, number, number, boolean, boolean, "a" | "b" | ""][] = [
    // [batch, m, n, k, transA, transB, broadcast operand]
    [64, 16, 784, 9, false, false, "a"], // the CNN's first convolution
    [64, 32, 196, 144, false, false, "a"], // its second convolution
    [64, 32, 144, 196, false, true, ""], // the second's weight gradient (summed afterwards)
    [64, 144, 196, 32, true, false, "a"], // the second's input gradient (before col2im)
    [37, 13, 61, 29, true, true, "b"], // odd sizes, both transposed, B broadcast
    [200, 5, 7, 3, false, false, ""], // many tiny products: several groups
    [9, 7, 300, 513, true, false, "b"], // blocks of k, a partial A panel
    [3, 1, 1, 1, false, true, "a"],
  ];
  for (const kernel of ["relaxed-simd", "simd", "typescript"] as const) {
    for (const [batch, m, n, k, transA, transB, broadcast] of cases) {
      const a = Float32Array.from(
        { length: (broadcast === "a" ? 1 : batch) * m * k },
        () => random() - 0.5,
      );
      const b = Float32Array.from(
        { length: (broadcast === "b" ? 1 : batch) * k * n },
        () => random() - 0.5,
      );
      const layout = {
        m,
        n,
        k,
        aBatchStride: broadcast === "a" ? 0 : m * k,
        bBatchStride: broadcast === "b" ? 0 : k * n,
        transA,
        transB,
        dtype: "float32" as const,
      };
      // Each product on its own (one job per product), then the batch on 1 and on every thread.
      const want = new Float32Array(batch * m * n);
      for (let e = 0; e < batch; e++) {
        matmul(
          {
            ...layout,
            a: a.subarray(e * layout.aBatchStride),
            b: b.subarray(e * layout.bBatchStride),
            out: want.subarray(e * m * n, (e + 1) * m * n),
            batch: 1,
          },
          1,
          kernel,
        );
      }
      for (const t of [1, threads]) {
        const got = new Float32Array(batch * m * n).fill(NaN);
        // Forget that workers were late before (on a loaded machine products then run alone).
        if (t > 1) await startMatmulThreads(threads);
        const before = threadedMatmuls();
        matmul({ ...layout, a, b, out: got, batch }, t, kernel);
        // (Counted for the default kernel's threads; a kernel asked for by name has its own.)
        if (t > 1 && kernel === matmulKernel() && batch * m * n * k >= 1 << 21) {
          assert.ok(threadedMatmuls() > before, `${batch}x${m}x${n}x${k} ran on the threads`);
        }
        // The first difference only: a diff of the whole arrays takes minutes to print.
        const at = got.findIndex((v, i) => !Object.is(v, want[i]));
        assert.equal(
          at,
          -1,
          `${kernel} ${batch}x${m}x${n}x${k} transA=${transA} transB=${transB} broadcast ${
            broadcast || "none"
          }, ${t} threads: element ${at} is ${got[at]}, alone ${want[at]}`,
        );
      }
    }
  }
});

Deno.test("cpuBackend({ threads }): validated, shown in info; 1 inside a Worker by default", async () => {
  assert.throws(() => cpuBackend({ threads: 0 }), /threads must be a positive integer, got 0/);
  const one = cpuBackend({ threads: 1 }).createDevice(0) as BackendDevice;
  assert.match(one.info, /matmul on 1 thread\)/);
  const source = `
    import { cpuBackend } from ${
    JSON.stringify(new URL("../src/backends/cpu/mod.ts", import.meta.url).href)
  };
    postMessage(cpuBackend().createDevice(0).info);
  `;
  const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
  const worker = new Worker(url, { type: "module" });
  try {
    const info = await new Promise<string>((resolve, reject) => {
      worker.onmessage = (e) => resolve(e.data);
      worker.onerror = (e) => reject(e.message);
    });
    assert.match(info, /matmul on 1 thread\)/);
  } finally {
    worker.terminate();
    URL.revokeObjectURL(url);
  }
});

Deno.test("cpu matmul threads never keep a finished program alive", async () => {
  const script = `
    import { matmul, startMatmulThreads } from ${
    JSON.stringify(new URL("../src/backends/cpu/kernels/matmul.ts", import.meta.url).href)
  };
    const threads = await startMatmulThreads(2);
    const a = new Float32Array(512 * 512).fill(1);
    const out = new Float32Array(512 * 512);
    matmul({ a, b: a, out, batch: 1, m: 512, n: 512, k: 512, aBatchStride: 0, bBatchStride: 0,
      transA: false, transB: false, dtype: "float32" }, threads);
    console.log(threads, out[0]);
  `;
  const file = await Deno.makeTempFile({ suffix: ".ts" });
  try {
    await Deno.writeTextFile(file, script);
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", file],
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    const out = await child.output();
    clearTimeout(timer);
    assert.equal(out.signal, null, "killed after 60 s: the process did not exit");
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    assert.match(new TextDecoder().decode(out.stdout), /^\d+ 512\n$/);
  } finally {
    await Deno.remove(file);
  }
});

Deno.test("cpu matmul: WebAssembly packing and kernels (both) match the TypeScript kernel on every layout", () => {
  const random = seededRandom(11);
  const cases: [number, number, number, number, boolean, boolean, boolean][] = [
    // [batch, m, n, k, transA, transB, broadcast B]
    [1, 1, 1, 1, false, false, false],
    [1, 6, 8, 4, false, false, false], // exactly one tile
    [1, 7, 9, 5, false, false, false], // a partial panel on both sides
    [1, 13, 17, 19, true, false, false],
    [1, 13, 17, 19, false, true, false],
    [1, 13, 17, 19, true, true, false],
    [2, 37, 61, 29, false, true, true], // batched, B broadcast
    [1, 256, 10, 512, false, true, false],
    [1, 10, 256, 512, true, false, false],
    [1, 130, 70, 3, false, false, false], // columns past the last block of four
    [1, 9, 11, 257, false, false, false], // k in two blocks of unequal length
    [1, 19, 13, 600, true, true, false], // three blocks of k, both transposed
    [1, 1, 10, 300, false, true, false], // one row, ten columns, two blocks of k
    [2, 14, 26, 700, true, false, true], // batched and broadcast, blocks of k
  ];
  for (const kernel of ["relaxed-simd", "simd"] as const) {
    for (const [batch, m, n, k, transA, transB, broadcastB] of cases) {
      const a = Float32Array.from({ length: batch * m * k }, () => random() - 0.5);
      const b = Float32Array.from(
        { length: (broadcastB ? 1 : batch) * k * n },
        () => random() - 0.5,
      );
      const args = (out: Float32Array) => ({
        a,
        b,
        out,
        batch,
        m,
        n,
        k,
        aBatchStride: m * k,
        bBatchStride: broadcastB ? 0 : k * n,
        transA,
        transB,
        dtype: "float32" as const,
      });
      const got = new Float32Array(batch * m * n).fill(NaN);
      const want = new Float32Array(batch * m * n);
      matmul(args(got), 1, kernel);
      matmul(args(want), 1, "typescript");
      for (let i = 0; i < got.length; i++) {
        assert.ok(
          Math.abs(got[i] - want[i]) <= 1e-5 * (1 + Math.abs(want[i])) * Math.sqrt(k),
          `${kernel} ${batch}x${m}x${n}x${k} transA=${transA} transB=${transB}: element ${i} is ${
            got[i]
          }, want ${want[i]}`,
        );
      }
    }
  }
});

Deno.test("cpu matmul: blocks of k are at most 256 long, nearly equal, multiples of 4", () => {
  for (const [k, want] of [[1, 4], [256, 256], [257, 132], [512, 256], [784, 196], [1000, 252]]) {
    assert.equal(kBlock(k), want, `k = ${k}`);
  }
});

Deno.test("cpu addmm: the kernel's bias is bitwise the product plus the bias added afterwards", async () => {
  const threads = await startMatmulThreads(2);
  const random = seededRandom(5);
  const cases: [number, number, number, number, boolean, boolean][] = [
    // [batch, m, n, k, transA, transB]
    [1, 1, 1, 1, false, true],
    [1, 256, 10, 512, false, true], // the MLP's last layer
    [1, 1, 13, 300, false, true], // one row, odd columns, two blocks of k
    [2, 7, 9, 5, true, false],
    [1, 256, 512, 784, false, true], // the MLP's first layer (threaded where threads exist)
  ];
  for (const kernel of ["relaxed-simd", "simd", "typescript"] as const) {
    for (const [batch, m, n, k, transA, transB] of cases) {
      const a = Float32Array.from({ length: batch * m * k }, () => random() - 0.5);
      const b = Float32Array.from({ length: batch * k * n }, () => random() - 0.5);
      const bias = Float32Array.from({ length: n }, () => random() * 4 - 2);
      const layout = (out: Float32Array) => ({
        a,
        b,
        out,
        batch,
        m,
        n,
        k,
        aBatchStride: m * k,
        bBatchStride: k * n,
        transA,
        transB,
        dtype: "float32" as const,
      });
      const want = new Float32Array(batch * m * n);
      matmul(layout(want), 1, kernel);
      for (let i = 0; i < want.length; i++) want[i] += bias[i % n];
      for (const t of [1, threads]) {
        const got = new Float32Array(batch * m * n).fill(NaN);
        matmulBias(layout(got), bias, t, kernel);
        assert.deepEqual(got, want, `${kernel} ${batch}x${m}x${n}x${k} on ${t} threads`);
      }
    }
  }
});

Deno.test("cpu matmul: operands and outputs in the kernel's memory are used in place, bitwise the copied result", async () => {
  const threads = await startMatmulThreads(2);
  const probe = kernelFloats(16);
  if (probe === undefined) {
    console.warn("  no shared kernel memory here: nothing to compare");
    return;
  }
  assert.equal(releaseKernelFloats(probe), true);
  assert.equal(
    releaseKernelFloats(new Float32Array(16)),
    false,
    "a host array is not the kernel's",
  );
  const random = seededRandom(21);
  const cases: [number, number, number, number, boolean, boolean][] = [
    // [batch, m, n, k, transA, transB]
    [1, 256, 512, 784, false, true], // the MLP's first layer
    [1, 512, 784, 256, true, false], // its weight gradient
    [3, 37, 61, 300, false, false], // batched: operands at offsets, blocks of k
    [1, 1, 10, 513, true, true], // one row, ten columns
    [64, 32, 196, 144, false, true], // a batch of small products (one job spans them)
  ];
  for (const [batch, m, n, k, transA, transB] of cases) {
    const hostA = Float32Array.from({ length: batch * m * k }, () => random() - 0.5);
    const hostB = Float32Array.from({ length: batch * k * n }, () => random() - 0.5);
    // A sits 5 values into a larger region: a view at an offset, as a narrowed tensor's would be.
    const regionA = kernelFloats(hostA.length + 5)!;
    const a = regionA.subarray(5);
    a.set(hostA);
    const b = kernelFloats(hostB.length)!;
    b.set(hostB);
    const layout = {
      batch,
      m,
      n,
      k,
      aBatchStride: m * k,
      bBatchStride: k * n,
      transA,
      transB,
      dtype: "float32" as const,
    };
    const want = new Float32Array(batch * m * n);
    matmul({ a: hostA, b: hostB, out: want, ...layout }, 1);
    for (const t of [1, threads]) {
      const got = new Float32Array(batch * m * n).fill(NaN);
      matmul({ a, b, out: got, ...layout }, t);
      assert.deepEqual(
        got,
        want,
        `${batch}x${m}x${n}x${k} transA=${transA} transB=${transB}, ${t} threads`,
      );
      // The output in the memory too, at an offset: C is copied out within it.
      const regionOut = kernelFloats(batch * m * n + 3)!.fill(NaN);
      matmul({ a, b, out: regionOut.subarray(3), ...layout }, t);
      assert.deepEqual(regionOut.subarray(3), want, `resident out, ${t} threads`);
      assert.ok(Number.isNaN(regionOut[2]), "nothing written before the output");
      assert.equal(releaseKernelFloats(regionOut), true);
    }
    assert.deepEqual(a, hostA, "the operands are left as they were");
    assert.equal(releaseKernelFloats(regionA), true);
    assert.equal(releaseKernelFloats(b), true);
  }
});

Deno.test("cpu device: large float32 arrays live in the kernel's memory, on one thread too", async () => {
  const threads = await startMatmulThreads(2);
  // The device's own arrays (under the wrapper that hands out handles).
  type Impl = { impl: Pick<DeviceImpl<TypedArray>, "allocate" | "free" | "memory"> };
  const d = (cpuBackend({ threads: 2 }).createDevice(0) as unknown as Impl).impl;
  const big = d.allocate(1 << 14, "float32");
  const small = d.allocate(100, "float32");
  const shared = kernelFloats(1) !== undefined;
  if (threads > 1 && shared) {
    assert.ok(big.buffer instanceof SharedArrayBuffer, "large: in the kernel's memory");
  }
  assert.ok(!(small.buffer instanceof SharedArrayBuffer), "small arrays stay host arrays");
  assert.deepEqual(d.memory(), { bytesInUse: (1 << 16) + 400, bytesReserved: (1 << 16) + 400 });
  d.free(big);
  d.free(small);
  assert.deepEqual(d.memory(), { bytesInUse: 0, bytesReserved: (1 << 16) + 400 });
  const again = d.allocate(1 << 14, "float32");
  assert.equal(again, big, "reused from the pool");
  d.free(again);
  const single = (cpuBackend({ threads: 1 }).createDevice(0) as unknown as Impl).impl;
  const resident = single.allocate(1 << 14, "float32");
  if (shared) {
    assert.ok(
      resident.buffer instanceof SharedArrayBuffer,
      "one thread: in the kernel's memory too",
    );
  }
  single.free(resident);
});
