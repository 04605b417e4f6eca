/**
 * The cpu backend: the reference every other backend is tested against, in
 * TypeScript (float32 matmul in WebAssembly SIMD where the engine has it, see
 * `kernels/matmul.ts`; float32 and float64 products through the platform's
 * BLAS where Deno may load one, see `blas.ts`). Any number of logical
 * devices share the host; a buffer is a plain typed array.
 * @module
 */

import {
  type Backend,
  type DeviceImpl,
  type KernelTable,
  type MemoryInfo,
  wrapDevice,
} from "../backend.ts";
import { allocHost, type DType, dtypeSize, type TypedArray } from "../../dtype.ts";
import { batchNorm } from "./kernels/batch_norm.ts";
import { batchNormBackward } from "./kernels/batch_norm_backward.ts";
import { binary } from "./kernels/binary.ts";
import { cast } from "./kernels/cast.ts";
import { copy } from "./kernels/copy.ts";
import { ctcAlpha, ctcAlphaBackward } from "./kernels/ctc_alpha.ts";
import { crossEntropy } from "./kernels/cross_entropy.ts";
import { crossEntropyBackward } from "./kernels/cross_entropy_backward.ts";
import { crossEntropyReduced } from "./kernels/cross_entropy_reduced.ts";
import { crossEntropyReducedBackward } from "./kernels/cross_entropy_reduced_backward.ts";
import { fill } from "./kernels/fill.ts";
import { gather } from "./kernels/gather.ts";
import { im2col } from "./kernels/im2col.ts";
import { col2im } from "./kernels/col2im.ts";
import { adam } from "./kernels/adam.ts";
import { gelu } from "./kernels/gelu.ts";
import { geluDerivative } from "./kernels/gelu_derivative.ts";
import { indexSelect } from "./kernels/index_select.ts";
import { maxPool2d } from "./kernels/max_pool2d.ts";
import {
  kernelFloats,
  kernelInts,
  matmul,
  type MatmulKernel,
  matmulKernel,
  MAX_THREADS,
  releaseKernelFloats,
} from "./kernels/matmul.ts";
import { addmm } from "./kernels/addmm.ts";
import { type Blas, loadBlas } from "./blas.ts";
import { geluBackward } from "./kernels/gelu_backward.ts";

export type { MatmulKernel };
import { random } from "./kernels/random.ts";
import { reduce } from "./kernels/reduce.ts";
import { scatterAdd } from "./kernels/scatter_add.ts";
import { scatterReduce } from "./kernels/scatter_reduce.ts";
import { segmentReduce } from "./kernels/segment_reduce.ts";
import { sgd } from "./kernels/sgd.ts";
import { softmax } from "./kernels/softmax.ts";
import { sort } from "./kernels/sort.ts";
import { eigh, qr, svd } from "./kernels/linalg.ts";
import { unary } from "./kernels/unary.ts";
import { where } from "./kernels/where.ts";
import { HostPool } from "./pool.ts";

/**
 * Bytes of freed arrays a device keeps for reuse: a training step frees and
 * allocates the same sizes every step, and a fresh typed array costs a
 * zero-fill plus garbage collection later.
 */
const POOL_BYTES = 256 << 20;

/**
 * Every kernel of the contract, fused ones included, but matmul and addmm
 * (which take the thread count).
 */
const KERNELS: Omit<KernelTable<TypedArray>, "matmul" | "addmm"> = {
  fill,
  cast,
  unary,
  binary,
  reduce,
  copy,
  indexSelect,
  random,
  where,
  gather,
  scatterAdd,
  im2col,
  col2im,
  softmax,
  gelu,
  geluDerivative,
  geluBackward,
  adam,
  sgd,
  crossEntropy,
  crossEntropyBackward,
  batchNorm,
  batchNormBackward,
  maxPool2d,
  crossEntropyReduced,
  crossEntropyReducedBackward,
  sort,
  segmentReduce,
  ctcAlpha,
  ctcAlphaBackward,
  scatterReduce,
};

/**
 * float32 arrays of at least this many values are allocated in the matmul
 * kernel's shared memory (when products use worker threads): copying an
 * operand in cost 4-7% of a large product, all of it on the calling thread.
 */
const KERNEL_MEMORY_MIN = 1 << 14;

/** Gives an array that lives in the matmul kernel's memory back to it (host arrays: nothing). */
function releaseToKernel(array: TypedArray): void {
  if (!(array instanceof Float64Array)) releaseKernelFloats(array);
}

/** One logical cpu device. */
class CpuDevice implements DeviceImpl<TypedArray> {
  readonly info: string;
  readonly dtypes: readonly DType[] = ["float32", "int32", "float64"];
  readonly kernels: KernelTable<TypedArray>;
  #bytes = 0;
  readonly #pool = new HostPool(POOL_BYTES, releaseToKernel);

  readonly #kernel: MatmulKernel | "auto";

  constructor(index: number, threads: number, kernel: MatmulKernel | "auto", blas: Blas | null) {
    this.#kernel = kernel;
    const plural = threads === 1 ? "" : "s";
    this.info = `host cpu (logical device ${index}, ${navigator.hardwareConcurrency} cores, ` +
      (blas
        ? `${blas.name} matmul on ${threads} thread${plural})`
        : `${matmulKernel(kernel)} matmul on ${threads} thread${plural})`);
    const kernels: KernelTable<TypedArray> = blas
      ? {
        ...KERNELS,
        matmul: (args) =>
          args.dtype === "int32" ? matmul(args, 1, kernel) : blas.matmul(args, threads),
        addmm: (args) =>
          args.dtype === "int32" ? addmm(args, 1, kernel) : blas.matmul(args, threads, args.bias),
      }
      : {
        ...KERNELS,
        matmul: (args) => matmul(args, threads, kernel),
        addmm: (args) => addmm(args, threads, kernel),
      };
    // The decompositions' block products go through this device's own matmul (BLAS or not).
    const product = kernels.matmul;
    this.kernels = {
      ...kernels,
      eigh: (args) => eigh(args, product),
      svd: (args) => svd(args, product),
      qr: (args) => qr(args, product),
    };
  }

  allocate(numel: number, dtype: DType): TypedArray {
    this.#bytes += numel * dtypeSize(dtype);
    const pooled = this.#pool.take(dtype, numel);
    if (pooled !== undefined) return pooled;
    // Large float32 arrays (matmul operands) live in the matmul kernel's
    // shared memory where it has one, so products need not copy them in,
    // and WebAssembly loops run on them (and on int32 positions) in place.
    // Also on one thread (a distributed rank): there the TypeScript loops
    // that host arrays take ran 3-4x slower once V8's Maglev had compiled
    // their callers with the loops inlined (after ~400 calls; TurboFan
    // takes over only after 3000), so a one-thread MLP step went from 6.4
    // to 9-11 ms after a few hundred steps (bench/NOTES.md).
    const inKernel = numel < KERNEL_MEMORY_MIN
      ? undefined
      : dtype === "float32"
      ? kernelFloats(numel, this.#kernel)
      : dtype === "int32"
      ? kernelInts(numel, this.#kernel)
      : undefined;
    return inKernel ?? allocHost(dtype, numel);
  }
  free(buffer: TypedArray): void {
    this.#bytes -= buffer.byteLength;
    if (!this.#pool.give(buffer)) releaseToKernel(buffer);
  }
  write(buffer: TypedArray, offset: number, data: TypedArray): void {
    buffer.set(data, offset);
  }
  read(buffer: TypedArray, offset: number, numel: number): Promise<TypedArray> {
    return Promise.resolve(this.readSync(buffer, offset, numel));
  }
  readSync(buffer: TypedArray, offset: number, numel: number): TypedArray {
    return buffer.slice(offset, offset + numel);
  }
  readInto(
    buffer: TypedArray,
    offset: number,
    numel: number,
    _dtype: DType,
    out: TypedArray,
  ): Promise<void> {
    out.set(buffer.subarray(offset, offset + numel));
    return Promise.resolve();
  }
  memory(): MemoryInfo {
    return { bytesInUse: this.#bytes, bytesReserved: this.#bytes + this.#pool.bytes };
  }
  destroy(): void {}
}

/** Options of {@link cpuBackend}. */
export interface CpuBackendOptions {
  /**
   * Threads a matmul may use (this one and worker threads sharing the
   * kernel's WebAssembly memory, or BLAS's own threads), at most the
   * machine's core count.
   * Default: every core on a program's main thread, 1 inside a Worker
   * (where distributed ranks run, one per core already) and in a process
   * that an MPI launcher started next to other ranks on the same machine
   * (`MPI_LOCALNRANKS`, `OMPI_COMM_WORLD_LOCAL_SIZE` above 1), or
   * multigrad's `run.ts` or torchrun did (`LOCAL_WORLD_SIZE` above 1). 1 never
   * starts a worker.
   */
  readonly threads?: number;
  /**
   * The float32 matmul kernel: `"auto"` (default) takes WebAssembly relaxed
   * SIMD, else SIMD, else TypeScript; the others force one (a WebAssembly
   * kind the engine lacks falls back as `"auto"` would). For benchmarks and
   * tests.
   */
  readonly matmulKernel?: MatmulKernel | "auto";
  /**
   * float32 and float64 products through the platform's BLAS (OpenBLAS,
   * Accelerate) where Deno may load it (`--allow-ffi`) and one is installed
   * (`MULTIGRAD_BLAS` names another library, or `off`): default true, as
   * PyTorch and NumPy do; about twice the WebAssembly kernel's speed on
   * AVX2/AVX-512 cores. Without permission or library, or false: the
   * WebAssembly kernel (`matmulKernel`). A `matmulKernel` other than
   * `"auto"` also turns BLAS off, so the kernel asked for is the one that runs.
   */
  readonly blas?: boolean;
}

/** Whether this code runs inside a Worker (a distributed rank, typically). */
function inWorker(): boolean {
  const scope = (globalThis as { WorkerGlobalScope?: abstract new () => unknown })
    .WorkerGlobalScope;
  return typeof scope === "function" && globalThis instanceof scope;
}

/** Ranks an MPI launcher (or `run.ts`) started on this machine (1 when none did, or env access is refused). */
function localRanks(): number {
  try {
    const env = globalThis.Deno?.env;
    return Number(
      env?.get("MPI_LOCALNRANKS") ?? env?.get("OMPI_COMM_WORLD_LOCAL_SIZE") ??
        env?.get("LOCAL_WORLD_SIZE") ?? 1,
    ) || 1;
  } catch {
    return 1;
  }
}

/**
 * The cpu backend's factory (synchronous, never fails). Register it again to
 * change its options, e.g. a single-threaded matmul:
 * `registerBackend("cpu", () => cpuBackend({ threads: 1 }), { priority: 1 })`.
 */
export function cpuBackend(options: CpuBackendOptions = {}): Backend {
  const wanted = options.threads ?? (inWorker() || localRanks() > 1 ? 1 : MAX_THREADS);
  if (!Number.isInteger(wanted) || wanted < 1) {
    throw new RangeError(`cpuBackend: threads must be a positive integer, got ${wanted}`);
  }
  const threads = Math.min(wanted, MAX_THREADS);
  const kernel = options.matmulKernel ?? "auto";
  if (!["auto", "relaxed-simd", "simd", "typescript"].includes(kernel)) {
    throw new RangeError(
      `cpuBackend: matmulKernel must be "auto", "relaxed-simd", "simd" or "typescript", got ${kernel}`,
    );
  }
  const blas = (options.blas ?? true) && kernel === "auto" ? loadBlas() : null;
  return {
    createDevice: (index: number) =>
      wrapDevice(`cpu:${index}`, new CpuDevice(index, threads, kernel, blas)),
  };
}
