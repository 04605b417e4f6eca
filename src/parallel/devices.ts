/**
 * Device lists as the parallel layer takes them: devices or their names.
 * @module
 */

import { type Device, device as resolveDevice } from "../device.ts";

/** A started device or its name (`"webgpu:1"`). */
export type DeviceLike = Device | string;

/** Resolves a non-empty list of distinct devices, or an error naming `op`. */
export function resolveDevices(devices: readonly DeviceLike[], op: string): Device[] {
  if (!Array.isArray(devices) || devices.length === 0) {
    throw new RangeError(`${op}: expected a non-empty array of devices, got ${String(devices)}`);
  }
  const list = devices.map((d) => resolveDevice(d));
  const names = list.map(String);
  const repeated = names.find((n, i) => names.indexOf(n) !== i);
  if (repeated) {
    throw new RangeError(`${op}: device ${repeated} appears twice in [${names.join(", ")}]`);
  }
  return list;
}
