/**
 * Helpers every op uses: allocating outputs, checking devices and dtypes,
 * turning numbers into tensors, submitting kernels on the device's stream.
 * @module
 */

import type { BackendDevice } from "../backends/backend.ts";
import type { Device } from "../device.ts";
import { type DType, isFloat } from "../dtype.ts";
import { formatShape, numelOf, type Shape } from "../shape.ts";
import { Storage } from "../storage.ts";
import { Tensor } from "../tensor.ts";

/** A tensor, or a number broadcast as a 0-dimensional tensor. */
export type TensorLike = Tensor | number;

/** A new tensor with uninitialised storage. */
export function empty(shape: Shape, dtype: DType, device: Device): Tensor {
  return new Tensor(Storage.allocate(device, numelOf(shape), dtype), shape);
}

/** Queues a kernel on `device` behind its pending work. */
export function launch(device: Device, kernel: (k: BackendDevice) => void): void {
  const kernels = device.kernels;
  device.stream.submit(() => kernel(kernels));
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

const scalarCache = new Map<string, Tensor>();
const SCALAR_CACHE_LIMIT = 512;

/**
 * A 0-dimensional tensor holding `value`, cached per device, dtype and value:
 * constants such as `x.mul(2)` then cost no upload after the first use.
 */
export function scalar(value: number, dtype: DType, device: Device): Tensor {
  const key = `${device}|${dtype}|${Object.is(value, -0) ? "-0" : value}`;
  const hit = scalarCache.get(key);
  if (hit && !hit.storage.disposed && hit.device === device) return hit;
  const storage = Storage.allocate(device, 1, dtype);
  storage.persistent = true;
  const t = new Tensor(storage, []);
  const host = dtype === "int32"
    ? Int32Array.of(value)
    : dtype === "float64"
    ? Float64Array.of(value)
    : Float32Array.of(value);
  const buffer = storage.buffer();
  launch(device, (k) => k.write(buffer, host));
  if (scalarCache.size >= SCALAR_CACHE_LIMIT) {
    const oldest = scalarCache.keys().next().value!;
    scalarCache.delete(oldest);
  }
  scalarCache.set(key, t);
  return t;
}

/** The dtype a number takes next to a tensor of `dtype` (PyTorch's rule). */
export function numberDType(value: number, dtype: DType): DType {
  if (dtype === "int32" && !Number.isInteger(value)) return "float32";
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
