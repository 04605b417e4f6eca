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
   * threads of the library's own (OpenBLAS: its process-wide count is set
   * to `threads` first when it differs, so a Worker rank's 1 and the main
   * thread's every core each hold for their own products; should both
   * compute at once, OpenBLAS serialises its multi-threaded calls).
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
      matmul: (args, threads, bias) => {
        if (set && get && get() !== threads) set(threads);
        gemm(args.dtype === "float64" ? dgemm : sgemm, args, bias);
      },
    };
  }
  return null;
}

/** One product per batch entry (CBLAS has no batched call); then the bias. */
function gemm(fn: GemmFn, args: MatmulArgs<TypedArray>, bias?: TypedArray): void {
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
  if (bias !== undefined) addBiasRows(out, bias, batch * m, n);
}
