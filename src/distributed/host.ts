/**
 * Moving tensors between a device and the host for collectives, in stream
 * order: reads are queued behind the work that produces the values, writes
 * hold the device's later work until the values have landed (see
 * `src/stream.ts`). Internal to the distributed layer.
 * @module
 */

import { noGrad } from "../autograd.ts";
import type { TypedArray } from "../dtype.ts";
import { cat } from "../ops/view.ts";
import type { Tensor } from "../tensor.ts";
import type { CollectiveCall } from "./backend.ts";
import type { ProcessGroup } from "./state.ts";

/**
 * The values of `tensors` (one device, one dtype) concatenated on the host,
 * with one read: several tensors are joined on the device first, so the
 * whole bucket crosses to the host in one round trip.
 */
export function readFlat(tensors: readonly Tensor[], op: string): Promise<TypedArray> {
  const flat = tensors.length === 1
    ? tensors[0]
    : noGrad(() => cat(tensors.map((t) => t.reshape([-1])), 0));
  const { device, dtype } = flat;
  const n = flat.numel();
  const buffer = flat.storage.buffer(op);
  const values = device.stream.read(() => device.backendDevice.read(buffer, 0, n, dtype));
  // The joined copy is only needed until the read has been queued.
  if (flat !== tensors[0]) flat.dispose();
  return values;
}

/**
 * Writes consecutive pieces of the host array `values` resolves with into
 * `tensors` (all on one device), holding the device's later work until then.
 * A rejection is raised by the device's next read.
 */
export function writeFlat(tensors: readonly Tensor[], values: Promise<TypedArray>): void {
  if (tensors.length === 0) return;
  const device = tensors[0].device;
  const buffers = tensors.map((t) => t.storage.buffer("collective"));
  device.stream.waitFor(values.then((host) => () => {
    let at = 0;
    tensors.forEach((t, i) => {
      const n = t.numel();
      device.backendDevice.write(buffers[i], 0, host.subarray(at, at + n));
      at += n;
    });
  }));
}

/** Runs a backend call on host values once they are read, in the group's call order. */
export function runOnHost<T>(
  group: ProcessGroup,
  call: CollectiveCall,
  values: Promise<TypedArray>,
  body: (host: TypedArray) => Promise<T>,
): Promise<T> {
  // A failed read must not go unhandled while earlier collectives run.
  values.catch(() => {});
  return group.run(call, async () => body(await values));
}
