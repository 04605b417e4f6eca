/**
 * The platform's BLAS (OpenBLAS; Apple's Accelerate) for float32 and float64
 * products, called through Deno's FFI where the program may load libraries
 * (`--allow-ffi`) and one is installed; the cpu backend falls back to its
 * WebAssembly and TypeScript kernels everywhere else (browsers, no
 * permission, no library). This is what PyTorch and NumPy do on a CPU: the
 * hand-written WebAssembly kernel reaches about half of what a native sgemm
 * does with AVX2/AVX-512 on the same cores.
 * @module
 */

import type { MatmulArgs } from "../backend.ts";
import type { TypedArray } from "../../dtype.ts";
import { addBiasRows } from "./kernels/matmul.ts";

/** CBLAS's enumerations (the same values in every CBLAS). */
const ROW_MAJOR = 101;
const NO_TRANS = 111;
const TRANS = 112;

/** A gemm's symbol: order, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc. */
function gemmSymbol<S extends "f32" | "f64">(scalar: S) {
  const int = "i32";
  return {
    parameters: [
      int,
      int,
      int,
      int,
      int,
      int,
      scalar,
      "buffer",
      int,
      "buffer",
      int,
      scalar,
      "buffer",
      int,
    ],
    result: "void",
  } as const;
}

const SYMBOLS = {
  cblas_sgemm: gemmSymbol("f32"),
  cblas_dgemm: gemmSymbol("f64"),
  cblas_saxpy: {
    parameters: ["i32", "f32", "buffer", "i32", "buffer", "i32"],
    result: "void",
    optional: true,
  },
  cblas_sscal: { parameters: ["i32", "f32", "buffer", "i32"], result: "void", optional: true },
  openblas_set_num_threads: { parameters: ["i32"], result: "void", optional: true },
  openblas_get_num_threads: { parameters: [], result: "i32", optional: true },
  openblas_get_corename: { parameters: [], result: "pointer", optional: true },
} as const;

type GemmFn = (...args: (number | ArrayBufferView)[]) => void;

/** A loaded BLAS: float32 and float64 general matrix products. */
export interface Blas {
  /** The library's file name, and OpenBLAS's core name where it tells. */
  readonly name: string;
  /**
   * Computes `args`' product (row-major operands as the contract stores
   * them) and adds `bias` to every row afterwards (rounded as the composed
   * add rounds it). Runs on the calling thread, with up to `threads`
   * threads of the library's own (one for products of at most 2^19
   * multiply-adds; OpenBLAS: its process-wide count is set first when it
   * differs, so a Worker rank's 1 and the main thread's every core each
   * hold for their own products; should both compute at once, OpenBLAS
   * serialises its multi-threaded calls).
   */
  matmul(args: MatmulArgs<TypedArray>, threads: number, bias?: TypedArray): void;
  /**
   * Float32 vector operations on the calling thread alone (memory-bound:
   * more threads would only take cores from other ranks), or null where
   * the library lacks `cblas_saxpy` / `cblas_sscal`. The process groups
   * sum gradients with them in memory WebAssembly cannot reach (an MPI
   * shared window): several times faster than a loop there.
   */
  readonly vector: BlasVector | null;
}

/** Float32 vector operations of a BLAS (see {@link Blas.vector}). */
export interface BlasVector {
  /**
   * `y[i] += x[i]` (saxpy with alpha 1: one rounding per element, the same
   * bits as `y[i] + x[i]` rounded to float32). `x` and `y` have one length.
   */
  addInto(x: Float32Array, y: Float32Array): void;
  /** `x[i] *= alpha`, alpha rounded to float32 first. */
  scale(x: Float32Array, alpha: number): void;
}

/** Library file names tried in order, per OS (a full path in `MULTIGRAD_BLAS` comes first). */
const CANDIDATES: Record<string, readonly string[]> = {
  linux: ["libopenblas.so.0", "libopenblas.so"],
  darwin: [
    "/System/Library/Frameworks/Accelerate.framework/Accelerate",
    "/opt/homebrew/opt/openblas/lib/libopenblas.dylib",
  ],
  windows: ["libopenblas.dll", "openblas.dll"],
};

let loaded: Blas | null | undefined;

/**
 * The platform's BLAS, loaded once per thread (each Worker loads its own
 * handle to the same library), or null: outside Deno, without the `ffi`
 * permission (never prompted for), with `MULTIGRAD_BLAS=off`, or when no
 * library loads. `MULTIGRAD_BLAS` may also name the library's path; one
 * that does not load is an error naming it (the cpu backend then fails to
 * start with that reason), not a silent fallback.
 */
export function loadBlas(): Blas | null {
  if (loaded === undefined) loaded = open();
  return loaded;
}

function open(): Blas | null {
  const deno = (globalThis as { Deno?: typeof Deno }).Deno;
  if (deno?.dlopen === undefined) return null;
  let wanted: string | undefined;
  try {
    if (deno.permissions.querySync({ name: "ffi" }).state !== "granted") return null;
    wanted = deno.permissions.querySync({ name: "env", variable: "MULTIGRAD_BLAS" }).state ===
        "granted"
      ? deno.env.get("MULTIGRAD_BLAS")
      : undefined;
  } catch {
    return null;
  }
  if (wanted !== undefined && /^(off|0|false|none)$/i.test(wanted)) return null;
  const candidates = wanted ? [wanted] : CANDIDATES[deno.build.os] ?? [];
  for (const path of candidates) {
    let lib;
    try {
      lib = deno.dlopen(path, SYMBOLS);
    } catch (error) {
      // A library the user named must load: falling back would hide the mistake.
      if (wanted) {
        throw new Error(
          `MULTIGRAD_BLAS=${wanted}: cannot load it as a CBLAS library (cblas_sgemm, cblas_dgemm): ${
            (error as Error).message
          }; set MULTIGRAD_BLAS=off for the WebAssembly kernel`,
          { cause: error },
        );
      }
      continue;
    }
    const symbols = lib.symbols as unknown as Record<string, unknown>;
    const core = symbols.openblas_get_corename as (() => Deno.PointerValue) | null;
    const corePointer = core?.();
    const coreName = corePointer ? ` (${Deno.UnsafePointerView.getCString(corePointer)})` : "";
    const set = symbols.openblas_set_num_threads as ((n: number) => void) | null;
    const get = symbols.openblas_get_num_threads as (() => number) | null;
    const sgemm = symbols.cblas_sgemm as GemmFn;
    const dgemm = symbols.cblas_dgemm as GemmFn;
    type Axpy = (
      n: number,
      alpha: number,
      x: Float32Array,
      incX: number,
      y: Float32Array,
      incY: number,
    ) => void;
    type Scal = (n: number, alpha: number, x: Float32Array, incX: number) => void;
    const axpy = symbols.cblas_saxpy as Axpy | null;
    const scal = symbols.cblas_sscal as Scal | null;
    const oneThread = () => {
      if (set && get && get() !== 1) set(1);
    };
    return {
      name: `${path.split("/").pop()}${coreName}`,
      vector: axpy && scal
        ? {
          addInto: (x, y) => {
            if (x.length !== y.length) {
              throw new RangeError(`blas addInto: lengths ${x.length} and ${y.length} differ`);
            }
            oneThread();
            if (x.length > 0) axpy(x.length, 1, x, 1, y, 1);
          },
          scale: (x, alpha) => {
            oneThread();
            if (x.length > 0) scal(x.length, alpha, x, 1);
          },
        }
        : null,
      matmul: (args, maxThreads, bias) => {
        const threads = args.m * args.n * args.k <= ONE_THREAD_MAX ? 1 : maxThreads;
        if (set && get && get() !== threads) set(threads);
        gemm(args.dtype === "float64" ? dgemm : sgemm, args, bias);
      },
    };
  }
  return null;
}

/**
 * A product with B transposed runs with B copied into its untransposed
 * layout first (see {@link untransposeB}) when B is small (n·k ≤
 * `UNTRANSPOSE_MAX_B` elements) next to many rows (m ≥ `UNTRANSPOSE_MIN_M`,
 * so the copy is at most 1/256 of the product's multiply-adds) and the
 * product is small (m·n·k ≤ `UNTRANSPOSE_MAX`): OpenBLAS 0.3.21
 * (Cooperlake) ran those up to 1.5x faster untransposed, on one thread and
 * on two (32 × 432·32·64 on 2 threads: 1.07 / 0.82, 0.93 / 0.71). Timed on
 * one thread on a shared 2-core machine (load 1.6-2.5), batch × m·n·k,
 * medians ms per batched call, as given / copied first (copy included), two
 * runs:
 *
 * - in the rule: 32 × 432·32·64 (convTranspose3d's weight gradient) 0.85 /
 *   0.80 and 0.94 / 0.72, 32 × 432·16·64 0.37 / 0.32 and 0.40 / 0.34, 16 ×
 *   1024·32·16 0.24 / 0.19 and 0.26 / 0.20, 8 × 1000·30·32 0.29 / 0.19 and
 *   0.28 / 0.20, 32 × 2048·8·8 0.31 / 0.20 and 0.32 / 0.21, 32 × 288·16·64
 *   0.26 / 0.29 and 0.28 / 0.25, 32 × 256·16·16 0.082 / 0.081;
 * - a bigger B lost: 32 × 300·48·64 0.92 / 1.39 and 1.04 / 1.27, 16 ×
 *   320·56·56 0.42 / 0.66, 32 × 256·60·64 0.93 / 1.40; so did fewer rows
 *   (32 × 16·81·256, conv3d's weight gradient: 0.35 / 0.87 on 2 threads)
 *   and products on 2 threads (8 × 2048·16·32: 0.47 / 0.59; 32 ×
 *   64·576·784, conv2d's weight gradient: 24.4 / 37.3);
 * - A transposed (Linear's weight gradient, conv's input gradient) ran as
 *   fast as untransposed: copying it first lost everywhere tried (32 ×
 *   64·576·16 0.42 / 0.71; 8 × 64·576·16 with A shared 0.095 / 0.099).
 */
const UNTRANSPOSE_MIN_M = 256;
const UNTRANSPOSE_MAX_B = 2048;
const UNTRANSPOSE_MAX = 1 << 20;

/**
 * Products of at most this many multiply-adds (per batch entry) run on one
 * BLAS thread: OpenBLAS splits products over 2^18 over its threads, and
 * inside a training step on a busy machine the second thread's start cost
 * more than it saved (a transposed B made it worse: OpenBLAS runs small
 * untransposed products in a single-threaded direct kernel instead, so for
 * 32 × 16·81·256 with B transposed a call took 9.5 ms on 2 threads, 0.60 on
 * 1, 0.23 untransposed, at load 3.4). Each step timed interleaved with the
 * same code on 2 threads (2 cores, load 2.4-3.3, medians ms): conv3d 3 ->
 * 16 32³ k 3 s 2 (its three products 32 × 331,776 multiply-adds) 5.11 ->
 * 4.82 and 4.79 -> 4.40, conv2d [4, 16, 14, 14] k 3 0.91 -> 0.85, MLP
 * 2-64-64-3 b128 0.42 -> 0.37; bigger products unchanged (bench/NOTES.md,
 * 2026-11-27 12:00-13:00). Not measured on an idle machine with more
 * cores, where 2^19 multiply-adds (~50 µs on one core) may still gain from
 * a second thread: hence a bound 2x OpenBLAS's own, not more.
 */
const ONE_THREAD_MAX = 1 << 19;

/** One product per batch entry (CBLAS has no batched call); then the bias. */
function gemm(fn: GemmFn, args: MatmulArgs<TypedArray>, bias?: TypedArray): void {
  const { transB, m, n, k } = args;
  const copyB = transB && m >= UNTRANSPOSE_MIN_M && n * k <= UNTRANSPOSE_MAX_B &&
    m * n * k <= UNTRANSPOSE_MAX;
  gemmAsGiven(fn, copyB ? untransposeB(args) : args);
  if (bias !== undefined) addBiasRows(args.out, bias, args.batch * args.m, args.n);
}

/**
 * `args` with B (stored [n, k] per entry) copied into its untransposed
 * [k, n] layout, once where it is broadcast (batch stride 0): the same sums
 * of the same products.
 */
function untransposeB(args: MatmulArgs<TypedArray>): MatmulArgs<TypedArray> {
  const { b, batch, n, k, bBatchStride, dtype } = args;
  const count = bBatchStride === 0 ? 1 : batch;
  const copy = dtype === "float64"
    ? new Float64Array(count * k * n)
    : new Float32Array(count * k * n);
  for (let i = 0; i < count; i++) transposeInto(b, i * bBatchStride, n, k, copy, i * k * n);
  return { ...args, b: copy, bBatchStride: count === 1 ? 0 : k * n, transB: false };
}

/**
 * `x`'s [rows, cols] matrix at `offset` into `out` at `outOffset` as
 * [cols, rows], in 32 × 32 tiles (both sides stay in cache).
 */
function transposeInto(
  x: TypedArray,
  offset: number,
  rows: number,
  cols: number,
  out: TypedArray,
  outOffset: number,
): void {
  const tile = 32;
  for (let i0 = 0; i0 < rows; i0 += tile) {
    const i1 = Math.min(rows, i0 + tile);
    for (let j0 = 0; j0 < cols; j0 += tile) {
      const j1 = Math.min(cols, j0 + tile);
      for (let i = i0; i < i1; i++) {
        const from = offset + i * cols;
        for (let j = j0; j < j1; j++) out[outOffset + j * rows + i] = x[from + j];
      }
    }
  }
}

/** The products as `args` lays them out, one BLAS call per batch entry. */
function gemmAsGiven(fn: GemmFn, args: MatmulArgs<TypedArray>): void {
  const { a, b, out, batch, m, n, k, aBatchStride, bBatchStride, transA, transB } = args;
  const lda = transA ? m : k;
  const ldb = transB ? k : n;
  for (let i = 0; i < batch; i++) {
    const c = out.subarray(i * m * n, (i + 1) * m * n);
    if (k === 0) {
      // BLAS leaves C alone when k is 0 with beta 0 on some libraries; the contract wants zeros.
      c.fill(0);
      continue;
    }
    fn(
      ROW_MAJOR,
      transA ? TRANS : NO_TRANS,
      transB ? TRANS : NO_TRANS,
      m,
      n,
      k,
      1,
      a.subarray(i * aBatchStride, i * aBatchStride + m * k),
      lda,
      b.subarray(i * bBatchStride, i * bBatchStride + k * n),
      ldb,
      0,
      c,
      n,
    );
  }
}
