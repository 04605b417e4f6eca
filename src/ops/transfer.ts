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
import { empty } from "./util.ts";

/** Schedules `dst ← src` across devices (same shape and dtype). */
export function copyAcross(src: Tensor, dst: Tensor): void {
  const n = src.numel();
  if (n === 0) return;
  const from = src.device;
  const to = dst.device;
  const sb = src.storage.buffer("to");
  const db = dst.storage.buffer();
  const dtype = src.dtype;
  const host = from.stream.read(() => from.kernels.read(sb, n, dtype));
  to.stream.waitFor(host.then((values) => () => to.kernels.write(db, values)));
}

/** `x` on `target` (the same tensor when already there); differentiable. */
export function toDevice(x: Tensor, target: Device): Tensor {
  if (x.device === target) return x;
  const out = empty(x.shape, x.dtype, target);
  copyAcross(x, out);
  return record("to", [x], out, ([g]) => [toDevice(g!, x.device)]);
}
