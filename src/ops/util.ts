/**
 * Helpers every op uses: allocating outputs, checking devices and dtypes,
 * turning numbers into tensors, submitting kernels on the device's stream.
 * @module
 */

import type {
  DeviceBuffer,
  Kernel,
  KernelArgs,
  KernelName,
  OptionalKernelName,
} from "../backends/backend.ts";
import type { Device } from "../device.ts";
import { type DType, getDefaultDtype, isFloat, toHost, type TypedArray } from "../dtype.ts";
import { formatShape, numelOf, type Shape } from "../shape.ts";
import { Storage } from "../storage.ts";
import { Tensor } from "../tensor.ts";

/** A tensor, or a number broadcast as a 0-dimensional tensor. */
export type TensorLike = Tensor | number;

/** A new tensor with uninitialised storage. */
export function empty(shape: Shape, dtype: DType, device: Device): Tensor {
  return new Tensor(Storage.allocate(device, numelOf(shape), dtype), shape);
}

/** Queues kernel `name` with `args` on `device` behind its pending work. */
export function launch<K extends KernelName>(device: Device, name: K, args: KernelArgs[K]): void {
  const run = device.backendDevice.kernels[name] as Kernel<K> | undefined;
  if (run === undefined) {
    throw new Error(`${device}: the ${device.backend} backend has no ${name} kernel`);
  }
  device.stream.submit(() => run(args));
}

/** Whether `device`'s backend fuses `name` (else the ops compose it from primitives). */
export function hasKernel(device: Device, name: OptionalKernelName): boolean {
  return device.backendDevice.kernels[name] !== undefined;
}

/** Queues a host-to-device write of `values` into `buffer` from element `offset`. */
export function writeLater(
  device: Device,
  buffer: DeviceBuffer,
  values: TypedArray,
  offset = 0,
): void {
  device.stream.submit(() => device.backendDevice.write(buffer, offset, values));
}

/** The common device of `tensors`, or an error naming each one's device and shape. */
export function commonDevice(op: string, ...tensors: Tensor[]): Device {
  const d = tensors[0].device;
  if (tensors.every((t) => t.device === d)) return d;
  const list = tensors.map((t) => `${t.device} (shape ${formatShape(t.shape)})`).join(", ");
  throw new Error(
    `${op}: expected all tensors on the same device, got ${list}; move them with .to(device)`,
  );
}

/** Throws unless `t` is a float tensor. */
export function requireFloat(op: string, t: Tensor): void {
  if (!isFloat(t.dtype)) {
    throw new TypeError(
      `${op}: expected a floating-point tensor, got ${t.dtype} (shape ${
        formatShape(t.shape)
      }); convert with .to("float32")`,
    );
  }
}

/**
 * A constant kept under `key` in `cache` (the key names the device): made by
 * `make` on first use and reused while its memory lives, so a constant an op
 * needs every step costs one upload. Its memory is persistent; past `limit`
 * entries the oldest is forgotten (not freed: a graph may still hold it).
 */
export function cachedConstant(
  cache: Map<string, Tensor>,
  limit: number,
  key: string,
  device: Device,
  make: () => Tensor,
): Tensor {
  const hit = cache.get(key);
  if (hit && !hit.storage.disposed && hit.device === device) return hit;
  const t = make();
  t.storage.persistent = true;
  if (cache.size >= limit) cache.delete(cache.keys().next().value!);
  cache.set(key, t);
  return t;
}

const scalarCache = new Map<string, Tensor>();

/**
 * A 0-dimensional tensor holding `value`, cached per device, dtype and value:
 * constants such as `x.mul(2)` then cost no upload after the first use.
 */
export function scalar(value: number, dtype: DType, device: Device): Tensor {
  const key = `${device}|${dtype}|${Object.is(value, -0) ? "-0" : value}`;
  return cachedConstant(scalarCache, 512, key, device, () => {
    const t = empty([], dtype, device);
    const buffer = t.storage.buffer();
    const host = toHost(dtype, [value], "a number operand");
    writeLater(device, buffer, host);
    return t;
  });
}

/** The dtype a number takes next to a tensor of `dtype` (PyTorch's rule). */
export function numberDType(value: number, dtype: DType): DType {
  if (dtype === "int32" && !Number.isInteger(value)) return getDefaultDtype();
  return dtype;
}

/** `x` as a tensor next to `like`: numbers become cached scalars. */
export function asTensor(x: TensorLike, like: Tensor, op: string): Tensor {
  if (x instanceof Tensor) return x;
  if (typeof x !== "number") {
    throw new TypeError(`${op}: expected a Tensor or a number, got ${typeof x}`);
  }
  return scalar(x, numberDType(x, like.dtype), like.device);
}
