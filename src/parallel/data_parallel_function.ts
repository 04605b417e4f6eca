/**
 * `dataParallel`: one data-parallel forward without a wrapping module, as
 * `torch.nn.parallel.data_parallel`.
 * @module
 */

import { device as resolveDevice } from "../device.ts";
import type { Module } from "../nn/module.ts";
import type { DataParallelOptions } from "./data_parallel.ts";
import { type DeviceLike, resolveDevices } from "./devices.ts";
import { runDataParallel } from "./run_data_parallel.ts";

/**
 * Evaluates `module` on `inputs` (one argument, or an array of arguments)
 * split over `devices`, as `torch.nn.parallel.data_parallel`. With no devices
 * the module runs directly.
 */
export function dataParallel(
  module: Module,
  inputs: unknown,
  devices: readonly DeviceLike[],
  options: DataParallelOptions = {},
): unknown {
  const args = Array.isArray(inputs) ? inputs : [inputs];
  if (!devices || devices.length === 0) return module.forward(...args);
  const list = resolveDevices(devices, "dataParallel");
  const out = options.outputDevice === undefined ? list[0] : resolveDevice(options.outputDevice);
  return runDataParallel(module, args, list, out, options.dim ?? 0, "dataParallel");
}
