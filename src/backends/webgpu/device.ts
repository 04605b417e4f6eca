/**
 * {@link WebGPUDevice}: the {@link BackendDevice} of the webgpu backend.
 * @module
 */

import type { DType, TypedArray } from "../../dtype.ts";
import type {
  AxisLayout,
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
import { binary } from "./kernels/binary.ts";
import { cast } from "./kernels/cast.ts";
import { copy } from "./kernels/copy.ts";
import { fill } from "./kernels/fill.ts";
import { indexSelect } from "./kernels/index_select.ts";
import { matmul } from "./kernels/matmul.ts";
import { random } from "./kernels/random.ts";
import { reduce } from "./kernels/reduce.ts";
import { softmax } from "./kernels/softmax.ts";
import { unary } from "./kernels/unary.ts";
import { where } from "./kernels/where.ts";
import { gather } from "./kernels/gather.ts";
import { scatterAdd } from "./kernels/scatter_add.ts";
import { im2col } from "./kernels/im2col.ts";
import { col2im } from "./kernels/col2im.ts";
import { sizeClass } from "./pool.ts";
import { Runtime } from "./runtime.ts";
import { wgslType } from "./wgsl.ts";

/** A tensor's memory on a {@link WebGPUDevice}. */
class GpuBuffer {
  /** The pooled GPU buffer (its size is a size class, not the request). */
  readonly buffer: GPUBuffer;
  readonly numel: number;
  readonly dtype: DType;
  freed = false;

  constructor(buffer: GPUBuffer, numel: number, dtype: DType) {
    this.buffer = buffer;
    this.numel = numel;
    this.dtype = dtype;
  }
}

/** One GPUDevice running multigrad kernels. */
export class WebGPUDevice implements BackendDevice {
  /** The adapter description. */
  readonly info: string;
  /** float64 has no WGSL type. */
  readonly dtypes: readonly DType[] = ["float32", "int32"];
  /** The kernel runtime (caches, batching, pools); exposed for tests. */
  readonly runtime: Runtime;

  /** Wraps `device`, called `name` (e.g. `webgpu:0`) in errors. */
  constructor(
    device: GPUDevice,
    name: string,
    info: string,
    isCpuAdapter: boolean,
  ) {
    this.info = info;
    this.runtime = new Runtime(device, name, isCpuAdapter);
  }

  #buf(b: DeviceBuffer): GPUBuffer {
    if (!(b instanceof GpuBuffer)) {
      throw new TypeError(`${this.runtime.name}: buffer was not allocated by this backend`);
    }
    if (b.freed) throw new Error(`${this.runtime.name}: buffer used after free`);
    return b.buffer;
  }

  allocate(numel: number, dtype: DType): DeviceBuffer {
    this.runtime.checkLost();
    wgslType(dtype);
    // Zero-size buffers still get a real (minimal) buffer so bindings and
    // copies need no special cases.
    const bytes = Math.max(numel, 1) * 4;
    const limit = this.runtime.device.limits.maxBufferSize;
    if (sizeClass(bytes) > limit) {
      throw new RangeError(
        `${this.runtime.name}: a buffer of ${numel} ${dtype} elements exceeds the ` +
          `adapter's maximum buffer size of ${limit} bytes`,
      );
    }
    const buffer = this.runtime.storage.acquire(bytes);
    return new GpuBuffer(buffer, numel, dtype);
  }

  free(buffer: DeviceBuffer): void {
    this.runtime.checkLost();
    if (!(buffer instanceof GpuBuffer) || buffer.freed) return;
    buffer.freed = true;
    this.runtime.release(buffer.buffer);
  }

  write(buffer: DeviceBuffer, data: TypedArray, offset = 0): void {
    this.runtime.checkLost();
    const gpu = this.#buf(buffer);
    if (data.length === 0) return;
    const dtype = (buffer as GpuBuffer).dtype;
    let host: Float32Array | Int32Array;
    if (dtype === "float32") {
      host = data instanceof Float32Array ? data : Float32Array.from(data);
    } else {
      host = data instanceof Int32Array ? data : Int32Array.from(data);
    }
    // queue.writeBuffer runs before any command not yet submitted, so the
    // kernels recorded so far must be submitted first to keep call order.
    this.runtime.flush();
    this.runtime.scoped("write", () =>
      this.runtime.device.queue.writeBuffer(
        gpu,
        offset * 4,
        host.buffer as ArrayBuffer,
        host.byteOffset,
        host.byteLength,
      ));
  }

  async read(
    buffer: DeviceBuffer,
    numel: number,
    dtype: DType,
  ): Promise<TypedArray> {
    const rt = this.runtime;
    rt.checkLost();
    const gpu = this.#buf(buffer);
    const bytes = numel * 4;
    let staging: GPUBuffer | null = null;
    if (numel > 0) {
      staging = rt.staging.acquire(bytes);
      rt.encoder().copyBufferToBuffer(gpu, 0, staging, 0, bytes);
    }
    rt.flush();
    const mark = rt.errorMark();
    let result: TypedArray;
    try {
      if (staging) {
        await rt.raceLost(staging.mapAsync(GPUMapMode.READ, 0, bytes));
        const mapped = staging.getMappedRange(0, bytes);
        result = dtype === "int32"
          ? new Int32Array(mapped.slice(0))
          : new Float32Array(mapped.slice(0));
        staging.unmap();
        const evicted = rt.staging.release(staging);
        if (evicted) evicted.destroy();
      } else {
        result = dtype === "int32" ? new Int32Array(0) : new Float32Array(0);
      }
    } catch (e) {
      // A failed kernel explains a failed map better than the map does.
      const kernelError = await rt.takeError(mark).catch(() => null);
      throw kernelError ?? e;
    }
    const error = await rt.raceLost(rt.takeError(mark));
    if (error) throw error;
    return result;
  }

  fill(out: DeviceBuffer, value: number, numel: number, dtype: DType): void {
    this.runtime.checkLost();
    fill(this.runtime, this.#buf(out), value, numel, dtype);
  }

  cast(
    x: DeviceBuffer,
    out: DeviceBuffer,
    numel: number,
    from: DType,
    to: DType,
  ): void {
    this.runtime.checkLost();
    cast(this.runtime, this.#buf(x), this.#buf(out), numel, from, to);
  }

  unary(
    op: UnaryOp,
    x: DeviceBuffer,
    out: DeviceBuffer,
    numel: number,
    dtype: DType,
  ): void {
    this.runtime.checkLost();
    unary(this.runtime, op, this.#buf(x), this.#buf(out), numel, dtype);
  }

  binary(
    op: BinaryOp,
    a: DeviceBuffer,
    b: DeviceBuffer,
    out: DeviceBuffer,
    layout: BinaryLayout,
  ): void {
    this.runtime.checkLost();
    binary(
      this.runtime,
      op,
      this.#buf(a),
      this.#buf(b),
      this.#buf(out),
      layout,
    );
  }

  reduce(
    op: ReduceOp,
    x: DeviceBuffer,
    out: DeviceBuffer,
    layout: AxisLayout,
  ): void {
    this.runtime.checkLost();
    reduce(this.runtime, op, this.#buf(x), this.#buf(out), layout);
  }

  matmul(
    a: DeviceBuffer,
    b: DeviceBuffer,
    out: DeviceBuffer,
    layout: MatmulLayout,
  ): void {
    this.runtime.checkLost();
    matmul(this.runtime, this.#buf(a), this.#buf(b), this.#buf(out), layout);
  }

  copy(src: DeviceBuffer, dst: DeviceBuffer, layout: CopyLayout): void {
    this.runtime.checkLost();
    copy(this.runtime, this.#buf(src), this.#buf(dst), layout);
  }

  indexSelect(
    x: DeviceBuffer,
    indices: DeviceBuffer,
    out: DeviceBuffer,
    layout: AxisLayout & { readonly count: number },
  ): void {
    this.runtime.checkLost();
    indexSelect(
      this.runtime,
      this.#buf(x),
      this.#buf(indices),
      this.#buf(out),
      layout,
    );
  }

  where(
    cond: DeviceBuffer,
    a: DeviceBuffer,
    b: DeviceBuffer,
    out: DeviceBuffer,
    layout: WhereLayout,
  ): void {
    this.runtime.checkLost();
    where(this.runtime, this.#buf(cond), this.#buf(a), this.#buf(b), this.#buf(out), layout);
  }

  gather(x: DeviceBuffer, index: DeviceBuffer, out: DeviceBuffer, layout: GatherLayout): void {
    this.runtime.checkLost();
    gather(this.runtime, this.#buf(x), this.#buf(index), this.#buf(out), layout);
  }

  scatterAdd(
    src: DeviceBuffer,
    index: DeviceBuffer,
    out: DeviceBuffer,
    layout: GatherLayout,
  ): void {
    this.runtime.checkLost();
    scatterAdd(this.runtime, this.#buf(src), this.#buf(index), this.#buf(out), layout);
  }

  im2col(
    x: DeviceBuffer,
    cols: DeviceBuffer,
    layout: WindowLayout & { readonly padValue: number },
  ): void {
    this.runtime.checkLost();
    im2col(this.runtime, this.#buf(x), this.#buf(cols), layout);
  }

  col2im(cols: DeviceBuffer, out: DeviceBuffer, layout: WindowLayout): void {
    this.runtime.checkLost();
    col2im(this.runtime, this.#buf(cols), this.#buf(out), layout);
  }

  softmax(
    x: DeviceBuffer,
    out: DeviceBuffer,
    layout: AxisLayout & { readonly log: boolean },
  ): void {
    this.runtime.checkLost();
    softmax(this.runtime, this.#buf(x), this.#buf(out), layout);
  }

  random(out: DeviceBuffer, layout: RandomLayout): void {
    this.runtime.checkLost();
    random(this.runtime, this.#buf(out), layout);
  }

  memory(): MemoryInfo {
    this.runtime.checkLost();
    const s = this.runtime.storage;
    return {
      bytesInUse: s.inUseBytes,
      bytesReserved: s.inUseBytes + s.freeBytes,
    };
  }

  destroy(): void {
    this.runtime.destroy();
  }
}
