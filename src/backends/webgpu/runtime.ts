/**
 * The machinery under every kernel: pipeline and layout caches, the shared
 * parameter buffer, command batching, buffer pools, error scopes and device
 * loss.
 * @module
 */

import { DeviceLostError } from "../../errors.ts";
import { BufferPool } from "./pool.ts";

/** Bytes of parameters one dispatch may use (the dynamic-offset stride). */
export const PARAM_SLOT_BYTES = 256;
/** Words (u32) of parameters one dispatch may use. */
export const PARAM_SLOT_WORDS = PARAM_SLOT_BYTES / 4;
/** Dispatches recorded before the batch is submitted. */
const MAX_BATCH = 256;
/** Cached bind groups kept before the cache is cleared. */
const MAX_BIND_GROUPS = 4096;

const scratchF32 = new Float32Array(1);
const scratchU32 = new Uint32Array(scratchF32.buffer);

/** The u32 bit pattern of `x` rounded to float32 (for float parameters). */
export function f32Bits(x: number): number {
  scratchF32[0] = x;
  return scratchU32[0];
}

/** The u32 bit pattern of an int32 value. */
export function i32Bits(x: number): number {
  return x >>> 0;
}

/**
 * How a kernel reads each storage binding, in binding order (bindings 1..n;
 * binding 0 is always the parameter block): `r` read-only, `w` read-write.
 */
export type BindingSignature = string;

/** One compute dispatch, as a kernel describes it. */
export interface DispatchSpec {
  /** Kernel (op) name, used in labels and error messages. */
  readonly name: string;
  /** A short key identifying the generated WGSL. */
  readonly key: string;
  /** Generates the WGSL; only called when `key` is not cached yet. */
  readonly wgsl: () => string;
  /** Access of each storage binding, see {@link BindingSignature}. */
  readonly signature: BindingSignature;
  /** Storage buffers for bindings 1..n. */
  readonly buffers: readonly GPUBuffer[];
  /** Parameter words (u32 bit patterns), at most {@link PARAM_SLOT_WORDS}. */
  readonly params: readonly number[];
  /** Workgroup counts. */
  readonly groups: readonly [number, number, number];
}

/** Calls held back by {@link Runtime.defer} so that the next compatible ones join them. */
interface Deferred {
  readonly key: string;
  readonly items: unknown[];
  readonly max: number;
  readonly emit: (items: unknown[]) => void;
}

/** Error scopes of one batch or device call, in submission order. */
interface Tracked {
  readonly seq: number;
  /** The first error's message, or null. */
  readonly done: Promise<string | null>;
}

/** Largest workgroup count per dimension WebGPU guarantees. */
export const MAX_GROUPS = 65535;

/**
 * The most loop steps one invocation takes in one dispatch; a longer walk
 * takes several dispatches that carry its running state. llvmpipe (Mesa's
 * gallivm, our CI's adapter on GL and Vulkan) silently ends a shader loop
 * after 65,535 iterations, those of every loop the invocation has run so
 * far counted together (nested or one after another, each loop's exit check
 * one more), and the invocation returns what it has so far; a quarter of
 * that leaves room for a kernel's inner loops and its other walks.
 */
export const LOOP_STEPS = 16384;

/**
 * Splits `n` workgroups over x and y so neither exceeds the per-dimension
 * limit; shaders recover the linear id from `num_workgroups`.
 */
export function groups2d(n: number): [number, number, number] {
  if (n <= MAX_GROUPS) return [Math.max(n, 1), 1, 1];
  const y = Math.ceil(n / MAX_GROUPS);
  const x = Math.ceil(n / y);
  return [x, y, 1];
}

/** The runtime of one GPUDevice. */
export class Runtime {
  /** The WebGPU device. */
  readonly device: GPUDevice;
  /** The name used in errors, `<backend>:<index>` (e.g. `webgpu:0`). */
  readonly name: string;
  /** Pool of storage buffers for tensors and temporaries. */
  readonly storage: BufferPool;
  /** Pool of MAP_READ staging buffers. */
  readonly staging: BufferPool;
  /** The largest byte size one storage binding may cover. */
  readonly maxBinding: number;
  /** Whether the adapter is a CPU implementation (llvmpipe, fallback). */
  readonly isCpuAdapter: boolean;

  readonly #pipelines = new Map<string, GPUComputePipeline>();
  readonly #pipelinesByCode = new Map<string, GPUComputePipeline>();
  readonly #layouts = new Map<string, GPUPipelineLayout>();
  readonly #bindLayouts = new Map<string, GPUBindGroupLayout>();
  readonly #paramsHost = new Uint32Array(MAX_BATCH * PARAM_SLOT_WORDS);
  readonly #paramsGpu: GPUBuffer;
  #encoder: GPUCommandEncoder | null = null;
  #pass: GPUComputePassEncoder | null = null;
  #slots = 0;
  #batchOps: string[] = [];
  #flushScheduled = false;
  #toDestroy: GPUBuffer[] = [];
  #deferred: Deferred | null = null;
  readonly #bindGroups = new Map<string, GPUBindGroup>();
  readonly #bufferIds = new WeakMap<GPUBuffer, number>();
  #nextBufferId = 0;
  #tracked: Tracked[] = [];
  #seq = 0;
  #uncaptured: string[] = [];
  #lostReason: string | null = null;
  #destroyed = false;
  #watched: GPUBuffer | null = null;
  #watchedWritten = false;
  readonly #lostWaiters = new Set<(e: Error) => void>();

  /** Wraps `device`; `isCpuAdapter` picks kernel variants. */
  constructor(device: GPUDevice, name: string, isCpuAdapter: boolean) {
    this.device = device;
    this.name = name;
    this.isCpuAdapter = isCpuAdapter;
    this.maxBinding = device.limits.maxStorageBufferBindingSize;
    const pool = (usage: GPUBufferUsageFlags, label: string, max: number) =>
      new BufferPool(
        (size) => this.scoped("allocate", () => device.createBuffer({ size, usage, label })),
        max,
      );
    this.storage = pool(
      GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC |
        GPUBufferUsage.COPY_DST,
      "multigrad",
      2 ** 30,
    );
    this.staging = pool(
      GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
      "multigrad-read",
      2 ** 28,
    );
    this.#paramsGpu = device.createBuffer({
      size: this.#paramsHost.byteLength,
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST,
      label: "multigrad-params",
    });
    // Errors outside every scope (none are expected) still reach a read.
    const target = device as unknown as Partial<EventTarget>;
    target.addEventListener?.("uncapturederror", (ev) => {
      const error = (ev as Event & { error?: GPUError }).error;
      this.#uncaptured.push(`${this.name} error: ${error?.message ?? "unknown"}`);
    });
    device.lost.then((info) => {
      if (this.#lostReason !== null) return;
      this.#lostReason = info.message || info.reason || "unknown reason";
      const err = new DeviceLostError(this.name, this.#lostReason);
      for (const reject of this.#lostWaiters) reject(err);
      this.#lostWaiters.clear();
    });
  }

  /** Throws {@link DeviceLostError} once the device is lost or destroyed. */
  checkLost(): void {
    if (this.#lostReason !== null) {
      throw new DeviceLostError(this.name, this.#lostReason);
    }
    if (this.#destroyed) throw new DeviceLostError(this.name, "destroyed");
  }

  #bindLayout(signature: BindingSignature): GPUBindGroupLayout {
    let layout = this.#bindLayouts.get(signature);
    if (!layout) {
      const entries: GPUBindGroupLayoutEntry[] = [{
        binding: 0,
        visibility: GPUShaderStage.COMPUTE,
        buffer: {
          // Storage, not uniform: see PARAMS_WGSL.
          type: "read-only-storage",
          hasDynamicOffset: true,
          minBindingSize: PARAM_SLOT_BYTES,
        },
      }];
      for (let i = 0; i < signature.length; i++) {
        entries.push({
          binding: i + 1,
          visibility: GPUShaderStage.COMPUTE,
          buffer: {
            type: signature[i] === "w" ? "storage" : "read-only-storage",
          },
        });
      }
      layout = this.device.createBindGroupLayout({
        entries,
        label: `multigrad-${signature}`,
      });
      this.#bindLayouts.set(signature, layout);
    }
    return layout;
  }

  #pipeline(spec: DispatchSpec): GPUComputePipeline {
    const cacheKey = `${spec.signature}|${spec.key}`;
    let pipeline = this.#pipelines.get(cacheKey);
    if (pipeline) return pipeline;
    const code = spec.wgsl();
    pipeline = this.#pipelinesByCode.get(code);
    if (!pipeline) {
      let layout = this.#layouts.get(spec.signature);
      if (!layout) {
        layout = this.device.createPipelineLayout({
          bindGroupLayouts: [this.#bindLayout(spec.signature)],
        });
        this.#layouts.set(spec.signature, layout);
      }
      const module = this.device.createShaderModule({
        code,
        label: spec.name,
      });
      pipeline = this.device.createComputePipeline({
        layout,
        compute: { module, entryPoint: "main" },
        label: spec.name,
      });
      this.#pipelinesByCode.set(code, pipeline);
    }
    this.#pipelines.set(cacheKey, pipeline);
    return pipeline;
  }

  /** Number of distinct compiled pipelines (for tests and tuning). */
  get pipelineCount(): number {
    return this.#pipelinesByCode.size;
  }

  #ensureEncoder(): GPUCommandEncoder {
    if (!this.#encoder) {
      // Scopes open before any pipeline or bind group of the batch is made,
      // so that creation errors are caught along with encoding errors.
      this.device.pushErrorScope("out-of-memory");
      this.device.pushErrorScope("validation");
      this.#encoder = this.device.createCommandEncoder();
    }
    return this.#encoder;
  }

  /**
   * Holds a kernel call (`item`) so that the calls right after it with the
   * same `key` join it, up to `max` items, as one dispatch: `emit(items)`
   * records them before any other dispatch, copy or submit, so call order
   * is kept. How consecutive optimizer updates of a step become one
   * multi-tensor dispatch (PyTorch's foreach/fused optimizers) without the
   * core knowing.
   */
  defer<T>(key: string, item: T, max: number, emit: (items: T[]) => void): void {
    const held = this.#deferred;
    if (held && held.key === key && held.items.length < held.max) {
      held.items.push(item);
      return;
    }
    this.#emitDeferred();
    this.#deferred = { key, items: [item], max, emit: emit as (items: unknown[]) => void };
    this.#scheduleFlush();
  }

  /**
   * Takes the held call of `key` if `accept` agrees, WITHOUT recording it:
   * the caller records it fused into its own dispatch (how `gelu` joins the
   * `addmm` before it). Null (the call stays held) otherwise.
   */
  claimDeferred<T>(key: string, accept: (item: T) => boolean): T | null {
    const held = this.#deferred;
    if (!held || held.key !== key || held.items.length !== 1) return null;
    const item = held.items[0] as T;
    if (!accept(item)) return null;
    this.#deferred = null;
    return item;
  }

  #emitDeferred(): void {
    const held = this.#deferred;
    if (!held) return;
    this.#deferred = null;
    held.emit(held.items);
  }

  /**
   * Follows what is recorded into `buffer` from now on ({@link watchedIntact}):
   * how a copy started early (`read_ahead.ts`) knows whether it still holds
   * the buffer's values. One buffer at a time; null stops.
   */
  watch(buffer: GPUBuffer | null): void {
    this.#watched = buffer;
    this.#watchedWritten = false;
  }

  /** Whether nothing was recorded into the watched buffer since {@link watch}. */
  get watchedIntact(): boolean {
    return this.#watched !== null && !this.#watchedWritten;
  }

  /** Notes that `buffer` is written (or handed back to the pool) by the next command. */
  noteWrite(buffer: GPUBuffer): void {
    if (buffer === this.#watched) this.#watchedWritten = true;
  }

  /**
   * The open command encoder, with no compute pass open (for copies).
   * `written`: the storage buffer the caller's commands write (a staging
   * buffer for reads); every buffer may be when it is left out.
   */
  encoder(written?: GPUBuffer): GPUCommandEncoder {
    if (written === undefined) this.#watchedWritten = true;
    else this.noteWrite(written);
    this.#emitDeferred();
    const encoder = this.#ensureEncoder();
    if (this.#pass) {
      this.#pass.end();
      this.#pass = null;
    }
    return encoder;
  }

  /** Records one dispatch into the current batch. */
  dispatch(spec: DispatchSpec): void {
    this.#emitDeferred();
    if (spec.params.length > PARAM_SLOT_WORDS) {
      throw new Error(
        `${this.name} ${spec.name}: ${spec.params.length} parameter words exceed ${PARAM_SLOT_WORDS}`,
      );
    }
    for (const b of spec.buffers) {
      if (b.size > this.maxBinding && spec.signature.length > 0) {
        // A binding may cover only maxBinding bytes; bigger tensors would
        // need chunked kernels.
        throw new Error(
          `${this.name} ${spec.name}: a buffer of ${b.size} bytes exceeds the ` +
            `adapter's storage binding limit of ${this.maxBinding} bytes`,
        );
      }
    }
    if (this.#watched !== null) {
      for (let i = 0; i < spec.signature.length; i++) {
        if (spec.signature[i] === "w") this.noteWrite(spec.buffers[i]);
      }
    }
    const encoder = this.#ensureEncoder();
    const pipeline = this.#pipeline(spec);
    if (!this.#pass) this.#pass = encoder.beginComputePass();
    const pass = this.#pass;
    const slot = this.#slots++;
    this.#paramsHost.set(spec.params, slot * PARAM_SLOT_WORDS);
    const bindGroup = this.#bindGroup(spec);
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bindGroup, [slot * PARAM_SLOT_BYTES]);
    pass.dispatchWorkgroups(spec.groups[0], spec.groups[1], spec.groups[2]);
    this.#batchOps.push(spec.name);
    if (this.#slots >= MAX_BATCH) this.flush();
    else this.#scheduleFlush();
  }

  #scheduleFlush(): void {
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    queueMicrotask(() => {
      this.#flushScheduled = false;
      if (this.#lostReason === null && !this.#destroyed) this.flush();
    });
  }

  /**
   * The bind group of `spec`'s buffers, cached: pooled buffers recur in every
   * step of a loop, and creating a bind group costs about as much as
   * recording the dispatch itself. All share the parameter buffer, whose
   * slot is a dynamic offset.
   */
  #bindGroup(spec: DispatchSpec): GPUBindGroup {
    let key = `${spec.name}|${spec.signature}`;
    for (const b of spec.buffers) key += `|${this.#bufferId(b)}`;
    let group = this.#bindGroups.get(key);
    if (group) return group;
    const entries: GPUBindGroupEntry[] = [{
      binding: 0,
      resource: {
        buffer: this.#paramsGpu,
        offset: 0,
        size: PARAM_SLOT_BYTES,
      },
    }];
    for (let i = 0; i < spec.buffers.length; i++) {
      entries.push({ binding: i + 1, resource: { buffer: spec.buffers[i] } });
    }
    group = this.device.createBindGroup({
      layout: this.#bindLayout(spec.signature),
      entries,
      // The label names the kernel in validation messages.
      label: spec.name,
    });
    if (this.#bindGroups.size >= MAX_BIND_GROUPS) this.#bindGroups.clear();
    this.#bindGroups.set(key, group);
    return group;
  }

  #bufferId(buffer: GPUBuffer): number {
    let id = this.#bufferIds.get(buffer);
    if (id === undefined) {
      id = this.#nextBufferId++;
      this.#bufferIds.set(buffer, id);
    }
    return id;
  }

  /** Destroys `buffer` after the work queued so far has been submitted. */
  destroyLater(buffer: GPUBuffer): void {
    this.noteWrite(buffer);
    // A held call may use it: recorded first, it keeps the buffer until submit.
    this.#emitDeferred();
    // Cached bind groups may hold it; dropping them all is simplest, and
    // buffers are only destroyed when the pool overflows.
    this.#bindGroups.clear();
    if (this.#encoder) this.#toDestroy.push(buffer);
    else buffer.destroy();
  }

  /**
   * Returns a storage buffer to the pool. Kernels recorded later run after
   * every earlier reader in queue order, so reuse is safe at once.
   */
  release(buffer: GPUBuffer): void {
    this.noteWrite(buffer);
    const evicted = this.storage.release(buffer);
    if (evicted) this.destroyLater(evicted);
  }

  /** Submits the current batch, if any. */
  flush(): void {
    this.#emitDeferred();
    if (!this.#encoder) return;
    if (this.#pass) {
      this.#pass.end();
      this.#pass = null;
    }
    const encoder = this.#encoder;
    this.#encoder = null;
    if (this.#slots > 0) {
      this.device.queue.writeBuffer(
        this.#paramsGpu,
        0,
        this.#paramsHost,
        0,
        this.#slots * PARAM_SLOT_WORDS,
      );
    }
    this.#slots = 0;
    const ops = this.#batchOps;
    this.#batchOps = [];
    this.device.queue.submit([encoder.finish()]);
    this.#popScopes(ops);
    for (const b of this.#toDestroy) b.destroy();
    this.#toDestroy = [];
  }

  /** Pops the validation and out-of-memory scopes and tracks their result. */
  #popScopes(ops: readonly string[]): void {
    const validation = this.device.popErrorScope();
    const oom = this.device.popErrorScope();
    const describe = (kind: string) => (e: GPUError | null) =>
      e ? describeError(kind, e, ops) : null;
    const none = () => null;
    const done = Promise.all([
      validation.then(describe("validation"), none),
      oom.then(describe("out of memory"), none),
    ]).then(([v, o]) => v ?? o);
    this.#tracked.push({ seq: this.#seq++, done });
  }

  /**
   * Runs a device call (buffer creation, queue write) inside its own error
   * scopes, so that its failure is reported by a read under `name`.
   */
  scoped<T>(name: string, fn: () => T): T {
    this.device.pushErrorScope("out-of-memory");
    this.device.pushErrorScope("validation");
    try {
      return fn();
    } finally {
      this.#popScopes([name]);
    }
  }

  /** Marks the work so far; {@link takeError} with it ignores later work. */
  errorMark(): number {
    return this.#seq;
  }

  /**
   * Waits for the error scopes of the work before `mark` and returns its first
   * error (or an uncaptured one), or null. Each error is returned once.
   */
  async takeError(mark: number): Promise<Error | null> {
    const mine = this.#tracked.filter((t) => t.seq < mark);
    this.#tracked = this.#tracked.filter((t) => t.seq >= mark);
    const messages = await Promise.all(mine.map((t) => t.done));
    const first = messages.find((m) => m !== null) ?? this.#uncaptured.shift();
    return first === undefined ? null : new Error(first);
  }

  /**
   * The DeviceLostError to raise when the device is lost: `device.lost`
   * resolves a macrotask after the loss, so a failure seen first waits one
   * turn for it. Null if the device is not lost.
   */
  async lostError(): Promise<DeviceLostError | null> {
    if (this.#lostReason === null && !this.#destroyed) {
      await Promise.race([this.device.lost, new Promise((r) => setTimeout(r, 0))]);
    }
    if (this.#lostReason !== null) return new DeviceLostError(this.name, this.#lostReason);
    return this.#destroyed ? new DeviceLostError(this.name, "destroyed") : null;
  }

  /** Resolves with `promise`, or rejects with DeviceLostError on loss. */
  raceLost<T>(promise: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.#lostReason !== null) {
        reject(new DeviceLostError(this.name, this.#lostReason));
        return;
      }
      const onLost = (e: Error) => reject(e);
      this.#lostWaiters.add(onLost);
      promise.then(
        (v) => {
          this.#lostWaiters.delete(onLost);
          resolve(v);
        },
        (e) => {
          this.#lostWaiters.delete(onLost);
          reject(e);
        },
      );
    });
  }

  /** Destroys the device; every later call throws DeviceLostError. */
  destroy(): void {
    if (this.#destroyed) return;
    this.#destroyed = true;
    this.#deferred = null;
    const err = new DeviceLostError(this.name, "destroyed");
    for (const reject of this.#lostWaiters) reject(err);
    this.#lostWaiters.clear();
    if (this.#pass) this.#pass.end();
    this.#pass = null;
    if (this.#encoder) {
      // Balance the scopes pushed for the abandoned batch.
      this.device.popErrorScope().catch(() => {});
      this.device.popErrorScope().catch(() => {});
    }
    this.#encoder = null;
    this.storage.clear();
    this.staging.clear();
    this.device.destroy();
  }
}

function describeError(
  kind: string,
  e: GPUError,
  ops: readonly string[],
): string {
  const msg = e.message;
  // Pipelines and bind groups are labelled with the kernel name, so the
  // message usually names the failing kernel itself.
  const named = ops.find((op) => msg.includes(`"${op}"`) || msg.includes(`'${op}'`));
  const unique = [...new Set(ops)];
  const who = named !== undefined
    ? `kernel "${named}"`
    : unique.length === 1
    ? `kernel "${unique[0]}"`
    : `one of the kernels [${unique.join(", ")}]`;
  return `webgpu ${kind} error in ${who}: ${msg}`;
}
