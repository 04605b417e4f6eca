/**
 * Runs each replica on its input. Kernels are queued on each device's own
 * stream, so replicas on different devices compute at the same time although
 * their forward calls are made one after the other.
 * @module
 */

import type { Device } from "../device.ts";
import type { Module } from "../nn/module.ts";
import { Tensor } from "../tensor.ts";
import { type DeviceLike, resolveDevices } from "./devices.ts";

/** Options of {@link parallelApply}. */
export interface ParallelApplyOptions {
  /** The device of each replica, used in error messages. */
  devices?: readonly DeviceLike[];
}

function deviceOf(module: Module, input: unknown): string {
  const p = module.parameters()[0];
  if (p) return String(p.device);
  const args = Array.isArray(input) ? input : [input];
  const t = args.find((a) => a instanceof Tensor) as Tensor | undefined;
  return t ? String(t.device) : "an unknown device";
}

/**
 * `modules[i].forward(...inputs[i])` for every i (an input that is not an
 * array is the single argument). Every replica is started; then the first
 * error, if any, is rethrown naming the replica and its device, with the
 * original error as `cause`.
 */
export function parallelApply(
  modules: readonly Module[],
  inputs: readonly unknown[],
  options: ParallelApplyOptions = {},
): unknown[] {
  const devices: Device[] | null = options.devices
    ? resolveDevices(options.devices, "parallelApply")
    : null;
  if (modules.length !== inputs.length || (devices && devices.length !== modules.length)) {
    throw new RangeError(
      `parallelApply: got ${modules.length} modules, ${inputs.length} inputs${
        devices ? ` and ${devices.length} devices` : ""
      }; they must agree`,
    );
  }
  const outputs: unknown[] = [];
  const failures: { index: number; error: unknown }[] = [];
  modules.forEach((module, i) => {
    const input = inputs[i];
    try {
      outputs.push(module.forward(...(Array.isArray(input) ? input : [input])));
    } catch (error) {
      outputs.push(undefined);
      failures.push({ index: i, error });
    }
  });
  if (failures.length > 0) {
    const { index, error } = failures[0];
    const where = devices ? String(devices[index]) : deviceOf(modules[index], inputs[index]);
    let message = error instanceof Error ? error.message : String(error);
    if (index > 0 && /private member/.test(message)) {
      message +=
        " (replicas copy a module's own fields, and JavaScript cannot copy #private fields:" +
        " keep a module's state in ordinary fields to use it with DataParallel)";
    }
    throw new Error(`parallelApply: replica ${index} on device ${where} failed: ${message}`, {
      cause: error,
    });
  }
  return outputs;
}
