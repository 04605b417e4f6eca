/**
 * `DataParallel`, the module that splits each batch over devices, runs a
 * replica of the wrapped module on each and concatenates the outputs, as
 * PyTorch's `DataParallel`.
 * @module
 */

import { type Device, device as resolveDevice } from "../device.ts";
import { Module } from "../nn/module.ts";
import { type DeviceLike, resolveDevices } from "./devices.ts";
import { runDataParallel } from "./run_data_parallel.ts";

/** Options of `dataParallel` and {@link DataParallel}. */
export interface DataParallelOptions {
  /** Where the gathered output goes (default: the first device). */
  outputDevice?: DeviceLike;
  /** The batch dim (default 0). */
  dim?: number;
}

/** Options of the {@link DataParallel} constructor. */
export interface DataParallelModuleOptions extends DataParallelOptions {
  /** The devices to split over; the module must be on the first. */
  devices: readonly DeviceLike[];
}

/**
 * Wraps a module so each forward splits its arguments' tensors along `dim`
 * over `devices`, runs replicas, and gathers the outputs on `outputDevice`.
 * Parameter gradients land on the original module's parameters. The wrapped
 * module is the child `module` (state dict keys `module.fc.weight`, as in
 * PyTorch).
 *
 * @example
 * ```ts
 * const devices = await requestDevices({ count: 2 });
 * const model = new nn.DataParallel(new nn.Linear(5, 2).to(devices[0]), { devices });
 * const out = model.forward(randn([30, 5], { device: devices[0] })); // [30, 2]
 * ```
 */
export class DataParallel<M extends Module = Module> extends Module {
  /** The wrapped module (replica 0). */
  readonly module: M;
  /** The devices batches are split over. */
  readonly devices: readonly Device[];
  /** Where outputs are gathered. */
  readonly outputDevice: Device;
  /** The batch dim. */
  readonly dim: number;

  /** Wraps `module`, which must be on `devices[0]`. */
  constructor(module: M, options: DataParallelModuleOptions) {
    super();
    if (!(module instanceof Module)) {
      throw new TypeError("DataParallel: the first argument must be an nn.Module");
    }
    const devices = resolveDevices(options?.devices ?? [], "DataParallel");
    this.module = module;
    this.devices = devices;
    this.outputDevice = options.outputDevice === undefined
      ? devices[0]
      : resolveDevice(options.outputDevice);
    this.dim = options.dim ?? 0;
  }

  /**
   * Splits the arguments over the devices and gathers the outputs: the
   * wrapped module's signature, with the whole batch in and out.
   */
  override forward(...args: Parameters<M["forward"]>): ReturnType<M["forward"]> {
    return runDataParallel(
      this.module,
      args,
      [...this.devices],
      this.outputDevice,
      this.dim,
      "DataParallel",
    ) as ReturnType<M["forward"]>;
  }
}
