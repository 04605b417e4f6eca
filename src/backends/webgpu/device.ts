/**
 * {@link WebGPUDevice}: the webgpu backend's device, memory plus its kernel
 * table over raw `GPUBuffer`s (the contract's `wrapDevice` turns it into
 * what the core uses).
 * @module
 */

import type { DType, TypedArray } from "../../dtype.ts";
import type {
  BatchNormArgs,
  BatchNormBackwardArgs,
  DeviceImpl,
  KernelTable,
  MemoryInfo,
} from "../backend.ts";
import { binary } from "./kernels/binary.ts";
import { cast } from "./kernels/cast.ts";
import { copy } from "./kernels/copy.ts";
import { fill } from "./kernels/fill.ts";
import { gather } from "./kernels/gather.ts";
import { im2col } from "./kernels/im2col.ts";
import { col2im } from "./kernels/col2im.ts";
import { gelu } from "./kernels/gelu.ts";
import { geluDerivative } from "./kernels/gelu_derivative.ts";
import { geluBackward } from "./kernels/gelu_backward.ts";
import { adam } from "./kernels/adam.ts";
import { batchNorm } from "./kernels/batch_norm.ts";
import { BATCH_NORM_BACKWARD_BINDINGS, batchNormBackward } from "./kernels/batch_norm_backward.ts";
import { maxPool2d } from "./kernels/max_pool2d.ts";
import { sgd } from "./kernels/sgd.ts";
import { crossEntropy } from "./kernels/cross_entropy.ts";
import { crossEntropyBackward } from "./kernels/cross_entropy_backward.ts";
import { crossEntropyReduced } from "./kernels/cross_entropy_reduced.ts";
import { crossEntropyReducedBackward } from "./kernels/cross_entropy_reduced_backward.ts";
import { indexSelect } from "./kernels/index_select.ts";
import { addmm, DEFAULT_MATMUL_TUNING, matmul, type MatmulTuning } from "./kernels/matmul.ts";
import { random } from "./kernels/random.ts";
import { reduce } from "./kernels/reduce.ts";
import { scatterAdd } from "./kernels/scatter_add.ts";
import { segmentReduce } from "./kernels/segment_reduce.ts";
import { softmax } from "./kernels/softmax.ts";
import { sort } from "./kernels/sort.ts";
import { unary } from "./kernels/unary.ts";
import { where } from "./kernels/where.ts";
import { sizeClass } from "./pool.ts";
import { ReadAhead } from "./read_ahead.ts";
import { EarlyMaps } from "./early_map.ts";
import { Runtime } from "./runtime.ts";
import { wgslType } from "./wgsl.ts";

/** One GPUDevice running multigrad kernels. */
export class WebGPUDevice implements DeviceImpl<GPUBuffer> {
  /** The adapter description. */
  readonly info: string;
  /** float64 has no WGSL type. */
  readonly dtypes: readonly DType[] = ["float32", "int32"];
  /** The kernel runtime (caches, batching, pools); exposed for tests. */
  readonly runtime: Runtime;
  /** Every kernel of the contract, fused ones included, recorded on {@link runtime}. */
  readonly kernels: KernelTable<GPUBuffer>;
  /** Reads started early on the core's hint (`readSoon`); null when turned off. */
  readonly readAhead: ReadAhead | null;
  /** Mappings taken as soon as the device has made them (see `early_map.ts`). */
  readonly earlyMaps: EarlyMaps;

  /** Wraps `device`, called `name` (e.g. `webgpu:0`) in errors. */
  constructor(
    device: GPUDevice,
    name: string,
    info: string,
    isCpuAdapter: boolean,
    tuning: MatmulTuning = DEFAULT_MATMUL_TUNING,
    readAhead = true,
    earlyMaps = false,
  ) {
    this.info = info;
    const rt = new Runtime(device, name, isCpuAdapter);
    this.runtime = rt;
    this.readAhead = readAhead ? new ReadAhead(rt) : null;
    this.earlyMaps = new EarlyMaps(earlyMaps);
    // nn fuses batch norm only with both kernels; the backward binds more
    // storage buffers than WebGPU's default limit of 8.
    const fitsBatchNorm =
      device.limits.maxStorageBuffersPerShaderStage >= BATCH_NORM_BACKWARD_BINDINGS;
    this.kernels = {
      fill: (args) => fill(rt, args),
      cast: (args) => cast(rt, args),
      unary: (args) => unary(rt, args),
      binary: (args) => binary(rt, args),
      reduce: (args) => reduce(rt, args),
      matmul: (args) => matmul(rt, args, tuning),
      copy: (args) => copy(rt, args),
      indexSelect: (args) => indexSelect(rt, args),
      random: (args) => random(rt, args),
      where: (args) => where(rt, args),
      gather: (args) => gather(rt, args),
      scatterAdd: (args) => scatterAdd(rt, args),
      im2col: (args) => im2col(rt, args),
      col2im: (args) => col2im(rt, args),
      softmax: (args) => softmax(rt, args),
      gelu: (args) => gelu(rt, args),
      geluDerivative: (args) => geluDerivative(rt, args),
      geluBackward: (args) => geluBackward(rt, args),
      addmm: (args) => addmm(rt, args, tuning),
      adam: (args) => adam(rt, args),
      sgd: (args) => sgd(rt, args),
      crossEntropy: (args) => crossEntropy(rt, args),
      crossEntropyBackward: (args) => crossEntropyBackward(rt, args),
      crossEntropyReduced: (args) => crossEntropyReduced(rt, args),
      crossEntropyReducedBackward: (args) => crossEntropyReducedBackward(rt, args),
      maxPool2d: (args) => maxPool2d(rt, args),
      sort: (args) => sort(rt, args),
      segmentReduce: (args) => segmentReduce(rt, args),
      ...(fitsBatchNorm
        ? {
          batchNorm: (args: BatchNormArgs<GPUBuffer>) => batchNorm(rt, args),
          batchNormBackward: (args: BatchNormBackwardArgs<GPUBuffer>) =>
            batchNormBackward(rt, args),
        }
        : {}),
    };
  }

  /** Throws `DeviceLostError` once the GPUDevice is lost. */
  checkAlive(): void {
    this.runtime.checkLost();
  }

  allocate(numel: number, dtype: DType): GPUBuffer {
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
    return this.runtime.storage.acquire(bytes);
  }

  free(buffer: GPUBuffer): void {
    this.runtime.release(buffer);
  }

  write(buffer: GPUBuffer, offset: number, data: TypedArray): void {
    if (data.length === 0) return;
    this.runtime.noteWrite(buffer);
    // queue.writeBuffer runs before any command not yet submitted, so the
    // kernels recorded so far must be submitted first to keep call order.
    this.runtime.flush();
    this.runtime.scoped("write", () =>
      this.runtime.device.queue.writeBuffer(
        buffer,
        offset * 4,
        data.buffer as ArrayBuffer,
        data.byteOffset,
        data.byteLength,
      ));
  }

  read(buffer: GPUBuffer, offset: number, numel: number, dtype: DType): Promise<TypedArray> {
    return this.#readMapped(
      buffer,
      offset,
      numel,
      dtype,
      (mapped) =>
        dtype === "int32" ? new Int32Array(mapped.slice(0)) : new Float32Array(mapped.slice(0)),
    );
  }

  /**
   * As `read`, into `out` (the values are copied once, from the mapping,
   * into an array that collectives reuse: no fresh array to fault in).
   */
  readInto(
    buffer: GPUBuffer,
    offset: number,
    numel: number,
    dtype: DType,
    out: TypedArray,
  ): Promise<void> {
    return this.#readMapped(buffer, offset, numel, dtype, (mapped) => {
      out.set(dtype === "int32" ? new Int32Array(mapped) : new Float32Array(mapped));
    });
  }

  /** Copies the values to a staging buffer, maps it, and hands `take` the mapping. */
  async #readMapped<T>(
    buffer: GPUBuffer,
    offset: number,
    numel: number,
    dtype: DType,
    take: (mapped: ArrayBuffer) => T,
  ): Promise<T> {
    const rt = this.runtime;
    const bytes = numel * 4;
    const early = this.readAhead?.take(buffer, offset, numel, dtype) ?? null;
    let staging: GPUBuffer | null = early?.staging ?? null;
    if (!early && numel > 0) {
      staging = rt.staging.acquire(bytes);
      rt.encoder(staging).copyBufferToBuffer(buffer, offset * 4, staging, 0, bytes);
    }
    // Submitted, and its errors taken below, even when an early copy has the values.
    rt.flush();
    const mark = rt.errorMark();
    let result: T;
    try {
      if (staging) {
        const mapping = early?.mapped ?? staging.mapAsync(GPUMapMode.READ, 0, bytes);
        let range = this.earlyMaps.takeEarly(staging, bytes);
        if (range === null) {
          await rt.raceLost(mapping);
          range = this.earlyMaps.mapped(staging, bytes);
        } else {
          // Still pending; it resolves once Deno's sleep ends (see early_map.ts).
          mapping.catch(() => {});
        }
        try {
          result = take(range);
        } finally {
          staging.unmap();
          rt.staging.release(staging)?.destroy();
        }
      } else {
        result = take(new ArrayBuffer(0));
      }
    } catch (e) {
      // A lost device, then a failed kernel, explain a failed map better
      // than the map does.
      const kernelError = await rt.takeError(mark).catch(() => null);
      throw (await rt.lostError()) ?? kernelError ?? e;
    }
    const error = await rt.raceLost(rt.takeError(mark));
    if (error) throw error;
    return result;
  }

  /** Starts the read of these values now (see `read_ahead.ts`). */
  readSoon(buffer: GPUBuffer, offset: number, numel: number, dtype: DType): void {
    if (this.readAhead === null) return;
    try {
      this.runtime.checkLost();
    } catch {
      return; // a hint only: the next real call reports the loss
    }
    this.readAhead.start(buffer, offset, numel, dtype);
  }

  memory(): MemoryInfo {
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
