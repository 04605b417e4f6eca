/**
 * The forward shared by `dataParallel` and `DataParallel` (internal: not
 * exported from `parallel`).
 * @module
 */

import type { Device } from "../device.ts";
import type { Module } from "../nn/module.ts";
import { forwardScope } from "../storage.ts";
import { checkModuleOn } from "./devices.ts";
import { parallelApply } from "./parallel_apply.ts";
import { replicate } from "./replicate.ts";
import { gather, scatter } from "./scatter_gather.ts";

/**
 * Scatters `args` along `dim` over `devices`, runs replicas of `module` and
 * gathers the outputs on `outputDevice`; `op` names the caller in errors.
 */
export function runDataParallel(
  module: Module,
  args: unknown[],
  devices: Device[],
  outputDevice: Device,
  dim: number,
  op: string,
): unknown {
  checkModuleOn(module, devices[0], op);
  // Replicas and scattered inputs go with the graph at backward, not with the GC.
  return forwardScope(() => runOnDevices(module, args, devices, outputDevice, dim));
}

function runOnDevices(
  module: Module,
  args: unknown[],
  devices: Device[],
  outputDevice: Device,
  dim: number,
): unknown {
  if (args.length === 0) return module.forward();
  const perDevice = scatter(args, devices, { dim }) as unknown[][];
  if (devices.length === 1 || perDevice.length === 1) {
    const out = module.forward(...perDevice[0]);
    return devices.length === 1 ? out : gather([out], outputDevice, { dim });
  }
  const used = devices.slice(0, perDevice.length);
  const replicas = replicate(module, used);
  const outputs = parallelApply(replicas, perDevice, { devices: used });
  return gather(outputs, outputDevice, { dim });
}
