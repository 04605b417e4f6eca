/**
 * The cpu backend: the reference every other backend is tested against, in
 * TypeScript (float32 matmul in WebAssembly SIMD where the engine has it, see
 * `kernels/matmul.ts`). Any number of logical devices share the host.
 * @module
 */

import type {
  AxisLayout,
  Backend,
  BackendDevice,
  BinaryLayout,
  BinaryOp,
  CopyLayout,
  DeviceBuffer,
  GatherLayout,
  MatmulLayout,
  MemoryInfo,
  RandomLayout,
  ReduceOp,
  UnaryOp,
  WhereLayout,
  WindowLayout,
} from "../backend.ts";
import { allocHost, type DType, dtypeSize, type TypedArray } from "../../dtype.ts";
import { CpuBuffer } from "./kernels/buffer.ts";
import { binary, cast, unary } from "./kernels/elementwise.ts";
import { reduce } from "./kernels/reduce.ts";
import { matmul, MAX_THREADS } from "./kernels/matmul.ts";
import { copy, indexSelect } from "./kernels/copy.ts";
import { softmax } from "./kernels/softmax.ts";
import { random } from "./kernels/random.ts";
import { where } from "./kernels/where.ts";
import { gather } from "./kernels/gather.ts";
import { scatterAdd } from "./kernels/scatter_add.ts";
import { im2col } from "./kernels/im2col.ts";
import { col2im } from "./kernels/col2im.ts";
import { HostPool } from "./pool.ts";

/**
 * Bytes of freed arrays a device keeps for reuse: a training step frees and
 * allocates the same sizes every step, and a fresh typed array costs a
 * zero-fill plus garbage collection later.
 */
const POOL_BYTES = 256 << 20;

function data(buffer: DeviceBuffer): TypedArray {
  return (buffer as CpuBuffer).data;
}

/** One logical cpu device. */
class CpuDevice implements BackendDevice {
  readonly info: string;
  readonly dtypes: readonly DType[] = ["float32", "int32", "float64"];
  #bytes = 0;
  readonly #pool = new HostPool(POOL_BYTES);
  readonly #threads: number;

  constructor(index: number, threads: number) {
    this.#threads = threads;
    this.info = `host cpu (logical device ${index}, ${navigator.hardwareConcurrency} cores, ` +
      `matmul on ${threads} thread${threads === 1 ? "" : "s"})`;
  }

  allocate(numel: number, dtype: DType): DeviceBuffer {
    this.#bytes += numel * dtypeSize(dtype);
    return new CpuBuffer(this.#pool.take(dtype, numel) ?? allocHost(dtype, numel));
  }
  free(buffer: DeviceBuffer): void {
    const cpu = buffer as CpuBuffer;
    const d = cpu.data;
    this.#bytes -= d.byteLength;
    // An empty view, so that a use after free reads nothing rather than reused memory.
    cpu.data = d.subarray(0, 0);
    this.#pool.give(d);
  }
  write(buffer: DeviceBuffer, values: TypedArray, offset = 0): void {
    data(buffer).set(values, offset);
  }
  read(buffer: DeviceBuffer, numel: number): Promise<TypedArray> {
    return Promise.resolve(data(buffer).slice(0, numel));
  }
  fill(out: DeviceBuffer, value: number, numel: number): void {
    data(out).fill(value, 0, numel);
  }
  cast(
    x: DeviceBuffer,
    out: DeviceBuffer,
    numel: number,
    _from: DType,
    to: DType,
  ): void {
    cast(data(x), data(out), numel, to);
  }
  unary(op: UnaryOp, x: DeviceBuffer, out: DeviceBuffer, numel: number): void {
    unary(op, data(x), data(out), numel);
  }
  binary(
    op: BinaryOp,
    a: DeviceBuffer,
    b: DeviceBuffer,
    out: DeviceBuffer,
    layout: BinaryLayout,
  ): void {
    binary(op, data(a), data(b), data(out), layout);
  }
  reduce(
    op: ReduceOp,
    x: DeviceBuffer,
    out: DeviceBuffer,
    layout: AxisLayout,
  ): void {
    reduce(op, data(x), data(out), layout);
  }
  matmul(
    a: DeviceBuffer,
    b: DeviceBuffer,
    out: DeviceBuffer,
    layout: MatmulLayout,
  ): void {
    matmul(data(a), data(b), data(out), layout, this.#threads);
  }
  copy(src: DeviceBuffer, dst: DeviceBuffer, layout: CopyLayout): void {
    copy(data(src), data(dst), layout);
  }
  indexSelect(
    x: DeviceBuffer,
    indices: DeviceBuffer,
    out: DeviceBuffer,
    layout: AxisLayout & { readonly count: number },
  ): void {
    indexSelect(data(x), data(indices), data(out), layout);
  }
  where(
    cond: DeviceBuffer,
    a: DeviceBuffer,
    b: DeviceBuffer,
    out: DeviceBuffer,
    layout: WhereLayout,
  ): void {
    where(data(cond), data(a), data(b), data(out), layout);
  }
  gather(x: DeviceBuffer, index: DeviceBuffer, out: DeviceBuffer, layout: GatherLayout): void {
    gather(data(x), data(index), data(out), layout);
  }
  scatterAdd(
    src: DeviceBuffer,
    index: DeviceBuffer,
    out: DeviceBuffer,
    layout: GatherLayout,
  ): void {
    scatterAdd(data(src), data(index), data(out), layout);
  }
  im2col(
    x: DeviceBuffer,
    cols: DeviceBuffer,
    layout: WindowLayout & { readonly padValue: number },
  ): void {
    im2col(data(x), data(cols), layout);
  }
  col2im(cols: DeviceBuffer, out: DeviceBuffer, layout: WindowLayout): void {
    col2im(data(cols), data(out), layout);
  }
  softmax(
    x: DeviceBuffer,
    out: DeviceBuffer,
    layout: AxisLayout & { readonly log: boolean },
  ): void {
    softmax(data(x), data(out), layout);
  }
  random(out: DeviceBuffer, layout: RandomLayout): void {
    random(data(out), layout);
  }
  memory(): MemoryInfo {
    return { bytesInUse: this.#bytes, bytesReserved: this.#bytes + this.#pool.bytes };
  }
  destroy(): void {}
}

/** Options of {@link cpuBackend}. */
export interface CpuBackendOptions {
  /**
   * Threads a float32 matmul may use (this one and worker threads sharing
   * the kernel's WebAssembly memory), at most the machine's core count.
   * Default: every core on a program's main thread, 1 inside a Worker
   * (where distributed ranks run, one per core already). 1 never starts a
   * worker.
   */
  readonly threads?: number;
}

/** Whether this code runs inside a Worker (a distributed rank, typically). */
function inWorker(): boolean {
  const scope = (globalThis as { WorkerGlobalScope?: abstract new () => unknown })
    .WorkerGlobalScope;
  return typeof scope === "function" && globalThis instanceof scope;
}

/**
 * The cpu backend's factory (synchronous, never fails). Register it again to
 * change its options, e.g. a single-threaded matmul:
 * `registerBackend("cpu", () => cpuBackend({ threads: 1 }), { priority: 1 })`.
 */
export function cpuBackend(options: CpuBackendOptions = {}): Backend {
  const wanted = options.threads ?? (inWorker() ? 1 : MAX_THREADS);
  if (!Number.isInteger(wanted) || wanted < 1) {
    throw new RangeError(`cpuBackend: threads must be a positive integer, got ${wanted}`);
  }
  const threads = Math.min(wanted, MAX_THREADS);
  return { createDevice: (index: number) => new CpuDevice(index, threads) };
}
