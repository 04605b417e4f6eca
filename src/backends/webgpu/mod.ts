/**
 * The webgpu backend: multigrad kernels as WGSL compute shaders on any
 * WebGPU implementation: Deno's `navigator.gpu` (the default), a browser's,
 * or Dawn's Node bindings (see `src/backends/dawn/mod.ts`).
 *
 * ```ts
 * import { webgpuBackend } from "./mod.ts";
 * const backend = await webgpuBackend();
 * const device = await backend.createDevice(0);
 * ```
 *
 * Design, in brief (details in `runtime.ts` and `kernels/`):
 * - Kernels are recorded, not run: dispatches share one compute pass and
 *   are submitted when a `read` or `write` needs them, every 256 dispatches,
 *   or at the end of the current task (a microtask).
 * - Shapes travel in a 256-byte slot of one shared read-only storage buffer
 *   (dynamic offsets), so a pipeline is compiled once per shape class, not
 *   per shape (storage, not uniform: see `wgsl.ts`).
 * - Buffers come from a pool of size classes (four per power of two) and go
 *   back to it on `free`; queue order makes immediate reuse safe.
 * - Each batch runs inside validation and out-of-memory error scopes; the
 *   next `read` rejects with the failing kernel's name. After device loss
 *   every method throws `DeviceLostError` and pending reads reject.
 * @module
 */

import { type Backend, type BackendDevice, wrapDevice } from "../backend.ts";
import { WebGPUDevice } from "./device.ts";
import { earlyMapsSupported } from "./early_map.ts";

import { DEFAULT_MATMUL_TUNING, type MatmulTuning } from "./kernels/matmul.ts";

export type { MatmulTuning, MatmulVariant } from "./kernels/matmul.ts";

/** Options of {@link webgpuBackend}. */
export interface WebGPUBackendOptions {
  /**
   * The WebGPU entry point to take adapters from: `navigator.gpu` by default;
   * a browser's, or Dawn's `create([...])` from `npm:webgpu`.
   */
  readonly gpu?: GPU;
  /**
   * What devices are called in errors and `Device.info` (`<name>:<index>`);
   * use the name the backend is registered under. Default `"webgpu"`.
   */
  readonly name?: string;
  /**
   * The adapter requests tried, in order; distinct adapters found take
   * device indices in turn. Default: high-performance, low-power, then a
   * plain request.
   */
  readonly adapterRequests?: readonly (GPURequestAdapterOptions | undefined)[];
  /**
   * The devices' matmul tuning (for tests and benchmarks); default: chosen
   * per adapter, register-blocked on Deno's own WebGPU (see below).
   */
  readonly matmul?: Partial<MatmulTuning>;
  /**
   * Start the read of a loss when `backward()` is called on it, so that the
   * read's latency overlaps the backward and the optimizer step (values
   * read are the same; see `read_ahead.ts`). Default true.
   */
  readonly readAhead?: boolean;
  /**
   * Take a read's mapping as soon as the device has made it, not when
   * `mapAsync` resolves: Deno's own WebGPU sleeps 10 ms before it resolves
   * every map (see `early_map.ts`). Default: on for Deno's `navigator.gpu`
   * in the versions whose source was checked (2.2 to 2.9), off elsewhere;
   * `true` forces it, which is safe only on a runtime that behaves the same
   * (read its ext/webgpu `buffer.rs` first).
   */
  readonly earlyMaps?: boolean;
}

/** One adapter devices can be started on. */
export interface AdapterEntry {
  /** The adapter first returned for {@link request}. */
  readonly adapter: GPUAdapter;
  /** Where it came from: asked again when an adapter object refuses a second device. */
  readonly gpu: GPU;
  /** The request that returned it. */
  readonly request: GPURequestAdapterOptions | undefined;
  /** Its name for `Device.info`. */
  readonly description: string;
  /** A CPU implementation (llvmpipe, SwiftShader, WARP): picks kernel variants. */
  readonly isCpu: boolean;
}

/** Limits worth raising to the adapter's maximum for large tensors. */
const RAISED_LIMITS = [
  "maxStorageBufferBindingSize",
  "maxBufferSize",
  "maxComputeWorkgroupStorageSize",
  "maxComputeInvocationsPerWorkgroup",
  "maxComputeWorkgroupSizeX",
  "maxComputeWorkgroupSizeY",
  "maxStorageBuffersPerShaderStage",
] as const;

/** Software rasterizers, whatever field of the adapter info names them. */
const CPU_ADAPTER = /llvmpipe|lavapipe|softpipe|swiftshader|\bwarp\b|microsoft basic render/i;

function adapterKey(info: GPUAdapterInfo): string {
  return `${info.vendor}|${info.architecture}|${info.device}|${info.description}`;
}

/**
 * Describes an adapter returned for `request` by `gpu`. A CPU adapter is
 * recognized in any field of its info: Dawn's GL backend reports llvmpipe as
 * `device: "llvmpipe-llvm-15-0-6-256-bits-"` under the description "OpenGL
 * version OpenGL ES 3.2 Mesa", where Deno's says "llvmpipe (LLVM 15.0.6)".
 */
export function adapterEntry(
  gpu: GPU,
  adapter: GPUAdapter,
  request: GPURequestAdapterOptions | undefined,
): AdapterEntry {
  const info = adapter.info;
  const fields = [info.description, info.device, info.vendor, info.architecture];
  const description = [...new Set(fields.filter((f) => f))].join(", ") || "webgpu adapter";
  const fallback = (info as { isFallbackAdapter?: boolean }).isFallbackAdapter ??
    (adapter as { isFallbackAdapter?: boolean }).isFallbackAdapter ?? false;
  return {
    adapter,
    gpu,
    request,
    description,
    isCpu: fallback || fields.some((f) => CPU_ADAPTER.test(f)),
  };
}

/** Options of {@link backendOverAdapters}. */
export interface AdapterBackendOptions {
  /** Names devices in errors (`<name>:<index>`). */
  readonly name: string;
  /**
   * At most this many devices per adapter (device `i` runs on adapter
   * `i mod adapters`); unlimited by default.
   */
  readonly devicesPerAdapter?: number;
  /** Device `index`'s `info`; default the adapter's description. */
  readonly info?: (entry: AdapterEntry, index: number) => string;
  /** The devices' matmul tuning; default: chosen per adapter. */
  readonly matmul?: Partial<MatmulTuning>;
  /** See {@link WebGPUBackendOptions.readAhead}; default true. */
  readonly readAhead?: boolean;
  /** See {@link WebGPUBackendOptions.earlyMaps}; default false. */
  readonly earlyMaps?: boolean;
}

/**
 * A backend starting device `i` on `adapters[i mod adapters.length]`, so
 * that consecutive devices land on distinct adapters first.
 */
export function backendOverAdapters(
  adapters: readonly AdapterEntry[],
  options: AdapterBackendOptions,
): Backend {
  if (adapters.length === 0) {
    throw new Error(`${options.name} backend unavailable: no WebGPU adapter was found`);
  }
  const limit = options.devicesPerAdapter ?? Infinity;
  return {
    async createDevice(index: number): Promise<BackendDevice> {
      if (index >= adapters.length * limit) {
        throw new RangeError(
          `${options.name}:${index} cannot start: ${adapters.length} adapter(s) x ` +
            `${limit} device(s) per adapter give ${adapters.length * limit} devices ` +
            `(adapters: ${adapters.map((a) => a.description).join("; ")})`,
        );
      }
      const entry = adapters[index % adapters.length];
      const device = await requestDevice(entry);
      const info = options.info?.(entry, index) ?? entry.description;
      const name = `${options.name}:${index}`;
      const tuning = { ...DEFAULT_MATMUL_TUNING, ...options.matmul };
      const impl = new WebGPUDevice(
        device,
        name,
        info,
        entry.isCpu,
        tuning,
        options.readAhead,
        options.earlyMaps,
      );
      return wrapDevice(name, impl);
    },
  };
}

/**
 * The webgpu backend over `options.gpu` (default `navigator.gpu`): finds the
 * distinct adapters (high-performance, low-power and default requests often
 * return the same one) and starts devices on them in turn. Rejects when
 * there is no WebGPU or no adapter. Register it under another name to use
 * another WebGPU implementation beside the built-in one:
 *
 * ```ts
 * import { registerBackend, webgpuBackend } from "@multigrad/core";
 * const gpu = navigator.gpu; // or dawn's create([...]), a worker's, ...
 * registerBackend("gpu2", () => webgpuBackend({ gpu, name: "gpu2" }), { priority: 3 });
 * ```
 */
export async function webgpuBackend(options: WebGPUBackendOptions = {}): Promise<Backend> {
  const name = options.name ?? "webgpu";
  const gpu = options.gpu ?? (globalThis.navigator as { gpu?: GPU } | undefined)?.gpu;
  if (!gpu) {
    throw new Error(
      `${name} backend unavailable: navigator.gpu is missing in this runtime (pass options.gpu)`,
    );
  }
  const requests = options.adapterRequests ?? [
    { powerPreference: "high-performance" },
    { powerPreference: "low-power" },
    undefined,
  ];
  const adapters: AdapterEntry[] = [];
  const seen = new Set<string>();
  for (const request of requests) {
    let adapter: GPUAdapter | null = null;
    try {
      adapter = await gpu.requestAdapter(request);
    } catch {
      adapter = null;
    }
    if (!adapter) continue;
    const key = adapterKey(adapter.info);
    if (seen.has(key)) continue;
    seen.add(key);
    adapters.push(adapterEntry(gpu, adapter, request));
  }
  const denoOwn = gpu === (globalThis.navigator as { gpu?: GPU } | undefined)?.gpu &&
    "Deno" in globalThis;
  return backendOverAdapters(adapters, {
    name,
    // Deno's own WebGPU (wgpu, shaders through naga) ran the tiled matmul at
    // 0.39 TFLOP/s on an H200 and the register-blocked one at 11.9 (4096^3;
    // Dawn on the same GPU: 17.8 and 13.3), so it gets register-blocked
    // kernels on every adapter; other runtimes choose per adapter.
    matmul: denoOwn ? { variant: "register", ...options.matmul } : options.matmul,
    readAhead: options.readAhead,
    earlyMaps: options.earlyMaps ?? earlyMapsSupported(gpu),
  });
}

async function requestDevice(entry: AdapterEntry): Promise<GPUDevice> {
  const descriptor = (adapter: GPUAdapter): GPUDeviceDescriptor => {
    const requiredLimits: Record<string, number> = {};
    for (const name of RAISED_LIMITS) {
      const value = adapter.limits[name];
      if (typeof value === "number") requiredLimits[name] = value;
    }
    return { requiredLimits, label: "multigrad" };
  };
  try {
    return await entry.adapter.requestDevice(descriptor(entry.adapter));
  } catch (first) {
    // Browsers allow one device per adapter object; ask for the adapter
    // again for the second and later devices.
    const fresh = await entry.gpu.requestAdapter(entry.request);
    if (!fresh || adapterKey(fresh.info) !== adapterKey(entry.adapter.info)) {
      throw first;
    }
    return await fresh.requestDevice(descriptor(fresh));
  }
}
