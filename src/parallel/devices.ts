/**
 * Device lists as the parallel layer takes them (devices or their names),
 * and the check that a module is on the device it is replicated from.
 * @module
 */

import { type Device, device as resolveDevice } from "../device.ts";
import type { Module } from "../nn/module.ts";
import type { Tensor } from "../tensor.ts";

/** A started device or its name (`"webgpu:1"`). */
export type DeviceLike = Device | string;

/**
 * Resolves a non-empty list of devices, or an error naming `op`; distinct
 * ones unless `repeats` (a scatter may put several pieces on one device, as
 * Gather's backward does when two gathered tensors lived on one device).
 */
export function resolveDevices(
  devices: readonly DeviceLike[],
  op: string,
  repeats = false,
): Device[] {
  if (!Array.isArray(devices) || devices.length === 0) {
    throw new RangeError(`${op}: expected a non-empty array of devices, got ${String(devices)}`);
  }
  const list = devices.map((d) => resolveDevice(d));
  if (repeats) return list;
  const names = list.map(String);
  const repeated = names.find((n, i) => names.indexOf(n) !== i);
  if (repeated) {
    throw new RangeError(`${op}: device ${repeated} appears twice in [${names.join(", ")}]`);
  }
  return list;
}

/**
 * Throws unless every parameter and buffer of `module` is on `device`, naming
 * the device expected, the device found and the tensor.
 */
export function checkModuleOn(module: Module, device: Device, op: string): void {
  const named: [string, Tensor][] = [...module.namedParameters(), ...module.namedBuffers()];
  for (const [name, t] of named) {
    if (t.device !== device) {
      throw new Error(
        `${op}: module must have its parameters and buffers on device ${device} (devices[0]) but found ${name} on device ${t.device}`,
      );
    }
  }
}
