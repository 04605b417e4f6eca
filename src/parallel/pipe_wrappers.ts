/**
 * `NoChunk` and `WithDevice`, the wrappers PyTorch 1.13's
 * `torch.distributed.pipeline.sync` gives `Pipe`'s inputs and layers.
 * @module
 */

import { type Device, device as resolveDevice } from "../device.ts";
import { Module } from "../nn/module.ts";
import { Tensor } from "../tensor.ts";
import type { DeviceLike } from "./devices.ts";

/** What `x` is, for an error: a number or string as written, else its kind. */
function kindOf(x: unknown): string {
  if (Array.isArray(x)) return `an array of ${x.length}`;
  if (x === null || typeof x !== "object") return typeof x === "string" ? `"${x}"` : String(x);
  return x.constructor?.name ?? "an object";
}

/**
 * An input tensor of `Pipe.forward` that is not split into
 * micro-batches: every micro-batch gets the whole tensor (PyTorch's
 * `NoChunk`), for inputs without a batch dimension (a shared weight, a
 * mask). Its gradient is the sum over the micro-batches, as PyTorch's. It
 * must be on the first partition's device like the split inputs, and it is
 * not counted as a tensor to split: an input holding only NoChunk tensors is
 * an error, as in PyTorch.
 *
 * @example
 * ```ts
 * const out = pipe.forward(x, new parallel.NoChunk(weights));
 * ```
 */
export class NoChunk {
  /** The wrapped tensor, passed whole to every micro-batch. */
  readonly tensor: Tensor;

  /** Wraps `input`, which must be a Tensor. */
  constructor(input: Tensor) {
    if (!(input instanceof Tensor)) {
      throw new TypeError(`NoChunk only supported for tensors, found: ${kindOf(input)}`);
    }
    this.tensor = input;
  }
}

/**
 * A layer of the Sequential given to `Pipe` with the device it runs
 * on (PyTorch's `WithDevice`): the Pipe moves the wrapped module there with
 * `.to(device)` (its parameters in place) and places it in that device's
 * partition, which is how a layer without parameters (a ReLU, a Dropout) is
 * put on a device other than the previous layer's. The partitions hold the
 * wrapped module itself, not this wrapper. Outside a Pipe it only forwards
 * to the module, which it does not move. The device is resolved when the
 * wrapper is made: a name that does not parse, or a device not started, is
 * an error then (PyTorch's `torch.device` parses it then too).
 *
 * @example
 * ```ts
 * const model = new nn.Sequential(
 *   new nn.Linear(16, 8).to(d0), new nn.Linear(8, 4).to(d1),
 *   new parallel.WithDevice(new nn.Dropout(), d1), // runs on d1, not on d0
 * );
 * const pipe = new parallel.Pipe(model, { chunks: 8 });
 * ```
 */
export class WithDevice<M extends Module = Module> extends Module {
  // PyTorch's attribute names, so the state dict's keys are `_module.weight` as there.
  private readonly _module: M;
  private readonly _device: Device;

  /** Wraps `module` to run on `device` (a started device or its name, `"webgpu:1"`). */
  constructor(module: M, device: DeviceLike) {
    super();
    if (!(module instanceof Module)) {
      throw new TypeError(`WithDevice: module must be an nn.Module, got ${kindOf(module)}`);
    }
    let resolved: Device;
    try {
      resolved = resolveDevice(device);
    } catch (error) {
      const E = error instanceof TypeError ? TypeError : Error;
      throw new E(`WithDevice: ${(error as Error).message}`, { cause: error });
    }
    this._module = module;
    this._device = resolved;
  }

  /** The wrapped module. */
  get module(): M {
    return this._module;
  }

  /** The device the module runs on in a `Pipe`. */
  get device(): Device {
    return this._device;
  }

  /** The wrapped module's forward. */
  override forward(...args: Parameters<M["forward"]>): ReturnType<M["forward"]> {
    const forward = this._module.forward as (...a: unknown[]) => ReturnType<M["forward"]>;
    return forward.apply(this._module, args);
  }
}
