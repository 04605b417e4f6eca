/**
 * The parallel layer's autograd functions, as `torch.nn.parallel._functions`:
 * Scatter's backward is Gather, Gather's backward is Scatter with the
 * recorded sizes, Broadcast's backward is ReduceAddCoalesced and back.
 * @module
 */

import { Function, type FunctionCtx } from "../autograd/function.ts";
import type { Device } from "../device.ts";
import { normalizeDim } from "../shape.ts";
import type { Tensor } from "../tensor.ts";
import * as comm from "./comm.ts";

interface ScatterCtx extends FunctionCtx {
  dim: number;
  inputDevice: Device;
}

/**
 * Splits one tensor over devices (forward) and concatenates the chunk
 * gradients back on the source device (backward). Chunks that get no
 * gradient count as zeros.
 */
export class Scatter extends Function {
  /** `apply(targetDevices, chunkSizes | null, dim, input)` → chunks, one per used device. */
  static override forward(
    ctx: FunctionCtx,
    targetDevices: readonly Device[],
    chunkSizes: readonly number[] | null,
    dim: number,
    input: Tensor,
  ): Tensor[] {
    const c = ctx as ScatterCtx;
    const chunks = comm.scatter(input, targetDevices, { dim, chunkSizes: chunkSizes ?? undefined });
    // comm.scatter has checked `dim`; backward needs it non-negative.
    c.dim = normalizeDim(dim, input.ndim, "scatter");
    c.inputDevice = input.device;
    return chunks;
  }

  /** Gathers the chunk gradients on the input's device. */
  static override backward(ctx: FunctionCtx, ...grads: Tensor[]): (Tensor | null)[] {
    const c = ctx as ScatterCtx;
    return [null, null, null, Gather.apply(c.inputDevice, c.dim, ...grads)];
  }
}

interface GatherCtx extends FunctionCtx {
  dim: number;
  inputDevices: Device[];
  sizes: number[];
  scalars: boolean;
}

let warnedScalars = false;

/**
 * Concatenates tensors from several devices on one (forward) and scatters the
 * gradient back with the recorded sizes (backward), so uneven splits such as
 * [8, 7] round-trip exactly. 0-dimensional inputs with dim 0 are stacked into
 * a vector (PyTorch warns about this; so do we, once).
 */
export class Gather extends Function {
  /** `apply(targetDevice, dim, ...inputs)` → one tensor on the target device. */
  static override forward(
    ctx: FunctionCtx,
    targetDevice: Device,
    dim: number,
    ...inputs: Tensor[]
  ): Tensor {
    const c = ctx as GatherCtx;
    c.scalars = inputs.every((t) => t.ndim === 0);
    if (c.scalars && dim === 0) {
      if (!warnedScalars) {
        warnedScalars = true;
        console.warn(
          "gather: all outputs are 0-dimensional tensors; they are stacked into a vector (as PyTorch does, with the same warning)",
        );
      }
      inputs = inputs.map((t) => t.reshape([1]));
    }
    c.dim = normalizeDim(dim, inputs[0].ndim, "gather");
    c.inputDevices = inputs.map((t) => t.device);
    c.sizes = inputs.map((t) => t.shape[c.dim]);
    return comm.gather(inputs, { dim: c.dim, destination: targetDevice });
  }

  /** Scatters the gradient back to the inputs' devices with the recorded sizes. */
  static override backward(ctx: FunctionCtx, grad: Tensor): (Tensor | null)[] {
    const c = ctx as GatherCtx;
    let pieces = Scatter.apply(c.inputDevices, c.sizes, c.dim, grad);
    if (c.scalars) pieces = pieces.map((p) => p.reshape([]));
    return [null, null, ...pieces];
  }
}

interface BroadcastCtx extends FunctionCtx {
  sourceDevice: Device;
  inputCount: number;
}

/**
 * Copies every input to every target device. Outputs come device by device:
 * `[d0: in0, in1, ..., d1: in0, in1, ...]`. Backward sums each input's
 * gradients from every device onto the source device.
 */
export class Broadcast extends Function {
  /** `apply(targetDevices, ...inputs)` → `targetDevices.length * inputs.length` copies. */
  static override forward(
    ctx: FunctionCtx,
    targetDevices: readonly Device[],
    ...inputs: Tensor[]
  ): Tensor[] {
    const c = ctx as BroadcastCtx;
    if (inputs.length === 0) return [];
    c.sourceDevice = inputs[0].device;
    c.inputCount = inputs.length;
    return comm.broadcastCoalesced(inputs, targetDevices).flat();
  }

  /** Sums the copies' gradients onto the source device. */
  static override backward(ctx: FunctionCtx, ...grads: Tensor[]): (Tensor | null)[] {
    const c = ctx as BroadcastCtx;
    return [null, ...ReduceAddCoalesced.apply(c.sourceDevice, c.inputCount, ...grads)];
  }
}

interface ReduceCtx extends FunctionCtx {
  targetDevices: Device[];
}

/**
 * Sums groups of tensors onto one device: the inputs are `count`-long groups,
 * one per device (Broadcast's output layout); output j is the sum of every
 * group's j-th tensor. Backward broadcasts each gradient back.
 */
export class ReduceAddCoalesced extends Function {
  /** `apply(destination, count, ...grads)` → `count` sums on `destination`. */
  static override forward(
    ctx: FunctionCtx,
    destination: Device,
    count: number,
    ...grads: Tensor[]
  ): Tensor[] {
    const c = ctx as ReduceCtx;
    if (grads.length % count !== 0) {
      throw new RangeError(
        `ReduceAddCoalesced: ${grads.length} tensors do not split into groups of ${count}`,
      );
    }
    const grouped: Tensor[][] = [];
    for (let at = 0; at < grads.length; at += count) grouped.push(grads.slice(at, at + count));
    c.targetDevices = grouped.map((group) => group[0].device);
    return comm.reduceAddCoalesced(grouped, destination);
  }

  /** Broadcasts each sum's gradient back to every group's device. */
  static override backward(ctx: FunctionCtx, ...grads: Tensor[]): (Tensor | null)[] {
    const c = ctx as ReduceCtx;
    return [null, null, ...Broadcast.apply(c.targetDevices, ...grads)];
  }
}
