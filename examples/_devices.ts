/**
 * How the examples choose devices: `count` WebGPU devices when an adapter is
 * there, else logical cpu devices; `--backend` forces one.
 * @module
 */

import { type Device, requestDevices } from "../mod.ts";

/** Starts `count` devices of `backend`, or of the best backend that starts. */
export async function pickDevices(count: number, backend?: string): Promise<Device[]> {
  if (backend) return await requestDevices({ backend, count });
  try {
    return await requestDevices({ backend: "webgpu", count });
  } catch {
    return await requestDevices({ backend: "cpu", count });
  }
}

/** `[8, 10]`, the shape as the seeds print it (torch.Size without the name). */
export function size(shape: readonly number[]): string {
  return `[${shape.join(", ")}]`;
}
