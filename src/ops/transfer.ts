/**
 * Copies between devices. Devices share no memory, so data goes through the
 * host: the source stream reads it when it gets there (without waiting for
 * the destination), and the destination stream holds later work until the
 * data has been written. Neither side blocks the caller.
 * @module
 */

import { record } from "../autograd.ts";
import type { Device } from "../device.ts";
import type { Tensor } from "../tensor.ts";
import { empty, launch } from "./util.ts";

/**
 * Schedules `dst ← src` for every destination (same shape and dtype, on
 * devices other than the source's) with ONE read of the source: on this
 * runtime a read costs about 11 ms whatever its size, so a broadcast to
 * several devices shares it.
 */
export function copyAcross(src: Tensor, ...destinations: Tensor[]): void {
  const n = src.numel();
  if (n === 0 || destinations.length === 0) return;
  const from = src.device;
  const sb = src.storage.buffer("to");
  const dtype = src.dtype;
  const host = from.stream.read(() => from.backendDevice.read(sb, 0, n, dtype));
  for (const dst of destinations) {
    const to = dst.device;
    const db = dst.storage.buffer();
    to.stream.waitFor(host.then((values) => () => to.backendDevice.write(db, 0, values)));
  }
}

/** Copies of `x` on each of `targets` (other devices than x's), sharing one read; no graph. */
export function copyToMany(x: Tensor, targets: readonly Device[]): Tensor[] {
  const outs = targets.map((d) => empty(x.shape, x.dtype, d));
  copyAcross(x, ...outs);
  return outs;
}

/** `x` on `target` (the same tensor when already there); differentiable. */
export function toDevice(x: Tensor, target: Device): Tensor {
  if (x.device === target) return x;
  const [out] = copyToMany(x, [target]);
  return record("to", [x], out, ([g]) => [toDevice(g!, x.device)]);
}

/**
 * Overwrites `target`'s values with `value`'s (same shape and dtype, checked
 * by the caller), on the same device or across devices, keeping `target`'s
 * storage: `Tensor._assign`, for optimizers, gradient accumulation and
 * buffer updates. No graph.
 */
export function copyInto(value: Tensor, target: Tensor): void {
  if (value.device !== target.device) {
    copyAcross(value, target);
    return;
  }
  const n = target.numel();
  if (n === 0 || value.storage === target.storage) return;
  launch(target.device, "copy", {
    x: value.storage.buffer("assign"),
    out: target.storage.buffer("assign"),
    shape: [n],
    xStrides: [1],
    xOffset: 0,
    outStrides: [1],
    outOffset: 0,
    dtype: target.dtype,
  });
}
