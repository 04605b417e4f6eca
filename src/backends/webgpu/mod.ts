/**
 * The webgpu backend: multigrad kernels as WGSL compute shaders on
 * `navigator.gpu` (Deno's native WebGPU).
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
 * - Shapes travel in a 256-byte slot of one shared uniform buffer (dynamic
 *   offsets), so a pipeline is compiled once per shape class, not per shape.
 * - Buffers come from a pool of size classes (four per power of two) and go
 *   back to it on `free`; queue order makes immediate reuse safe.
 * - Each batch runs inside validation and out-of-memory error scopes; the
 *   next `read` rejects with the failing kernel's name. After device loss
 *   every method throws `DeviceLostError` and pending reads reject.
 * @module
 */

import type { Backend, BackendDevice, BackendFactory } from "../backend.ts";
import { WebGPUDevice } from "./device.ts";

export { matmulOptions, type MatmulVariant } from "./kernels/matmul.ts";

interface AdapterEntry {
  readonly adapter: GPUAdapter;
  readonly options: GPURequestAdapterOptions | undefined;
  readonly description: string;
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

function adapterKey(info: GPUAdapterInfo): string {
  return `${info.vendor}|${info.architecture}|${info.device}|${info.description}`;
}

/**
 * Finds the distinct adapters (high-performance, low-power and default
 * requests often return the same one) and starts devices on them in turn.
 * Throws when `navigator.gpu` is missing or no adapter is found.
 */
export const webgpuBackend: BackendFactory = async (): Promise<Backend> => {
  const gpu = (globalThis.navigator as { gpu?: GPU } | undefined)?.gpu;
  if (!gpu) {
    throw new Error(
      "webgpu backend unavailable: navigator.gpu is missing in this runtime",
    );
  }
  const requests: (GPURequestAdapterOptions | undefined)[] = [
    { powerPreference: "high-performance" },
    { powerPreference: "low-power" },
    undefined,
  ];
  const adapters: AdapterEntry[] = [];
  const seen = new Set<string>();
  for (const options of requests) {
    let adapter: GPUAdapter | null = null;
    try {
      adapter = await gpu.requestAdapter(options);
    } catch {
      adapter = null;
    }
    if (!adapter) continue;
    const info = adapter.info;
    const key = adapterKey(info);
    if (seen.has(key)) continue;
    seen.add(key);
    const description = info.description || info.vendor || "webgpu adapter";
    const fallback = (info as { isFallbackAdapter?: boolean })
      .isFallbackAdapter ??
      (adapter as { isFallbackAdapter?: boolean }).isFallbackAdapter ?? false;
    adapters.push({
      adapter,
      options,
      description,
      isCpu: fallback || /llvmpipe|swiftshader|lavapipe|warp/i.test(
        description,
      ),
    });
  }
  if (adapters.length === 0) {
    throw new Error("webgpu backend unavailable: no WebGPU adapter was found");
  }
  return {
    async createDevice(index: number): Promise<BackendDevice> {
      const entry = adapters[index % adapters.length];
      const device = await requestDevice(gpu, entry);
      return new WebGPUDevice(device, index, entry.description, entry.isCpu);
    },
  };
};

async function requestDevice(
  gpu: GPU,
  entry: AdapterEntry,
): Promise<GPUDevice> {
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
    const fresh = await gpu.requestAdapter(entry.options);
    if (!fresh || adapterKey(fresh.info) !== adapterKey(entry.adapter.info)) {
      throw first;
    }
    return await fresh.requestDevice(descriptor(fresh));
  }
}
