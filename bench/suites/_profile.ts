/**
 * Counters for "where does the time go": kernel calls per kind on any
 * backend (with host time, which on the cpu backend is the kernel's own
 * time), and WebGPU API calls (dispatches, submits, buffer writes, bind
 * groups, maps). Both patch methods for the duration of one callback only.
 * @module
 */

import type { Device } from "../../mod.ts";

/** Calls and host milliseconds per kernel kind (`matmul`, `binary:add`, ...). */
export type KernelCounts = Record<string, { calls: number; ms: number }>;

const MEMORY = ["allocate", "free", "write", "read"] as const;

type Method = (...args: unknown[]) => unknown;

/** Replaces `target[name]` with a counting wrapper; returns how to undo it. */
function patch(
  target: Record<string, Method>,
  name: string,
  key: (args: unknown[]) => string,
  counts: KernelCounts,
): () => void {
  const original = target[name];
  const hadOwn = Object.hasOwn(target, name);
  target[name] = function (this: unknown, ...args: unknown[]): unknown {
    const t0 = performance.now();
    try {
      return original.apply(this, args);
    } finally {
      const entry = counts[key(args)] ??= { calls: 0, ms: 0 };
      entry.calls++;
      entry.ms += performance.now() - t0;
    }
  };
  return () => {
    if (hadOwn) target[name] = original;
    else delete target[name];
  };
}

/**
 * Runs `fn` with the memory calls and every kernel of `devices`' kernel
 * tables wrapped to count calls and host time; kernels with an `op` argument
 * are keyed `kernel:op`.
 */
export async function countKernels(
  devices: readonly Device[],
  fn: () => Promise<void>,
): Promise<KernelCounts> {
  const counts: KernelCounts = {};
  const restore: (() => void)[] = [];
  for (const device of devices) {
    const memory = device.backendDevice as unknown as Record<string, Method>;
    for (const name of MEMORY) restore.push(patch(memory, name, () => name, counts));
    const kernels = device.backendDevice.kernels as unknown as Record<string, Method>;
    for (const name of Object.keys(kernels)) {
      const key = (args: unknown[]) => {
        const op = (args[0] as { op?: unknown }).op;
        return typeof op === "string" ? `${name}:${op}` : name;
      };
      restore.push(patch(kernels, name, key, counts));
    }
  }
  try {
    await fn();
  } finally {
    for (const r of restore) r();
  }
  return counts;
}

/** WebGPU API calls seen while a callback ran. */
export interface GpuCounts {
  /** `dispatchWorkgroups` calls (compute kernels run). */
  dispatches: number;
  /** `queue.submit` calls (command buffers handed to the driver). */
  submits: number;
  /** `queue.writeBuffer` calls (host-to-device uploads, parameter blocks included). */
  writeBuffers: number;
  /** `copyBufferToBuffer` calls (device copies, readback staging). */
  copies: number;
  /** `createBindGroup` calls. */
  bindGroups: number;
  /** `createBuffer` calls (pool misses). */
  buffersCreated: number;
  /** `mapAsync` calls (readbacks). */
  maps: number;
  /** `beginComputePass` calls. */
  passes: number;
  /** `queue.onSubmittedWorkDone` calls (each waits a device round trip, as a map does). */
  workDone: number;
  /** `popErrorScope` calls (their promises settle without a device round trip in Deno). */
  errorScopes: number;
  /** Host ms spent inside `queue.submit` (on GL adapters the work runs in the call). */
  submitMs: number;
  /** Ms from each `mapAsync` call until it resolved, summed (map floor + queued work). */
  mapMs: number;
  /** Ms from each `onSubmittedWorkDone` call until it resolved, summed. */
  workDoneMs: number;
}

/** The {@link GpuCounts} counters that count calls (not milliseconds). */
type CallCounter = Exclude<keyof GpuCounts, "submitMs" | "mapMs" | "workDoneMs">;

interface Patch {
  readonly proto: Record<string, Method> | undefined;
  readonly method: string;
  readonly counter: CallCounter;
  /** Adds the host ms inside the call (sync) or until its promise settles (async). */
  readonly timer?: "submitMs" | "mapMs" | "workDoneMs";
}

/** Whether this runtime exposes the WebGPU classes that {@link countGpuCalls} patches. */
export function hasWebGpuClasses(): boolean {
  return typeof (globalThis as Record<string, unknown>).GPUQueue === "function";
}

/** Runs `fn` counting WebGPU API calls (all devices); zeros where WebGPU is absent. */
export async function countGpuCalls(fn: () => Promise<void>): Promise<GpuCounts> {
  const counts: GpuCounts = {
    dispatches: 0,
    submits: 0,
    writeBuffers: 0,
    copies: 0,
    bindGroups: 0,
    buffersCreated: 0,
    maps: 0,
    passes: 0,
    workDone: 0,
    errorScopes: 0,
    submitMs: 0,
    mapMs: 0,
    workDoneMs: 0,
  };
  if (!hasWebGpuClasses()) {
    await fn();
    return counts;
  }
  const g = globalThis as unknown as Record<string, { prototype: Record<string, Method> }>;
  const patches: Patch[] = [
    {
      proto: g.GPUComputePassEncoder?.prototype,
      method: "dispatchWorkgroups",
      counter: "dispatches",
    },
    { proto: g.GPUQueue?.prototype, method: "submit", counter: "submits", timer: "submitMs" },
    { proto: g.GPUQueue?.prototype, method: "writeBuffer", counter: "writeBuffers" },
    { proto: g.GPUCommandEncoder?.prototype, method: "copyBufferToBuffer", counter: "copies" },
    { proto: g.GPUCommandEncoder?.prototype, method: "beginComputePass", counter: "passes" },
    { proto: g.GPUDevice?.prototype, method: "createBindGroup", counter: "bindGroups" },
    { proto: g.GPUDevice?.prototype, method: "createBuffer", counter: "buffersCreated" },
    { proto: g.GPUBuffer?.prototype, method: "mapAsync", counter: "maps", timer: "mapMs" },
    {
      proto: g.GPUQueue?.prototype,
      method: "onSubmittedWorkDone",
      counter: "workDone",
      timer: "workDoneMs",
    },
    { proto: g.GPUDevice?.prototype, method: "popErrorScope", counter: "errorScopes" },
  ];
  const restore: (() => void)[] = [];
  for (const { proto, method, counter, timer } of patches) {
    if (!proto) continue;
    const descriptor = Object.getOwnPropertyDescriptor(proto, method);
    const original = descriptor?.value as Method | undefined;
    if (typeof original !== "function" || !descriptor?.writable) continue;
    proto[method] = function (this: unknown, ...args: unknown[]): unknown {
      counts[counter]++;
      if (!timer) return original.apply(this, args);
      const t0 = performance.now();
      const result = original.apply(this, args);
      const add = () => void (counts[timer] += performance.now() - t0);
      if (result instanceof Promise) result.then(add, add);
      else add();
      return result;
    };
    restore.push(() => Object.defineProperty(proto, method, descriptor));
  }
  try {
    await fn();
  } finally {
    for (const r of restore) r();
  }
  return counts;
}
