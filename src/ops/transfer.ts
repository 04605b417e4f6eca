/**
 * Copies between devices. Devices share no memory, so data goes through the
 * host: the source stream reads it when it gets there (without waiting for
 * the destination), and the destination stream holds later work until the
 * data has been written. Neither side blocks the caller.
 * @module
 */

import { record } from "../autograd.ts";
import type { Device } from "../device.ts";
import { allocHost, type DType, type TypedArray } from "../dtype.ts";
import type { DeviceBuffer } from "../backends/backend.ts";
import type { Tensor } from "../tensor.ts";
import { empty, launch } from "./util.ts";

/** One destination of {@link copyRegions}: `numel` elements of the source from `from` go to `to` at `at`. */
export interface Region {
  /** First source element. */
  readonly from: number;
  /** Elements. */
  readonly numel: number;
  /** The destination (on another device than the source). */
  readonly to: Tensor;
  /** First destination element. */
  readonly at: number;
}

/**
 * Schedules every region's copy out of `src` with ONE read of the source
 * range the regions cover (a read with an offset, so no device copy cuts
 * the regions out first): on webgpu every read waits for its device to
 * drain (and, where Deno's mapping cannot be taken early, 10 ms more), so a
 * scatter or a broadcast to several devices shares one. Each
 * destination stream waits for the read, then writes its regions.
 */
export function copyRegions(src: Tensor, regions: readonly Region[]): void {
  const used = regions.filter((r) => r.numel > 0);
  if (used.length === 0) return;
  const lo = Math.min(...used.map((r) => r.from));
  const hi = Math.max(...used.map((r) => r.from + r.numel));
  const from = src.device;
  const sb = src.storage.buffer("to");
  const dtype = src.dtype;
  const now = readNow(from, sb, lo, hi - lo, dtype);
  writeRegions(
    used,
    now ?? from.stream.read(() => from.backendDevice.read(sb, lo, hi - lo, dtype)),
    lo,
  );
}

/**
 * Writes each region's part of `values` (which start at source element
 * `base`) into its destination: at once in stream order when `values` are
 * here, else once the destination's stream has them.
 */
function writeRegions(
  regions: readonly Region[],
  values: TypedArray | Promise<TypedArray>,
  base: number,
): void {
  const byDevice = new Map<Device, Region[]>();
  for (const r of regions) byDevice.set(r.to.device, [...(byDevice.get(r.to.device) ?? []), r]);
  for (const [to, list] of byDevice) {
    const writes = list.map((r) => ({ r, buffer: r.to.storage.buffer() }));
    const write = (host: TypedArray) => () => {
      for (const { r, buffer } of writes) {
        to.backendDevice.write(buffer, r.at, host.subarray(r.from - base, r.from - base + r.numel));
      }
    };
    if (values instanceof Promise) to.stream.waitFor(values.then(write));
    else to.stream.submit(write(values));
  }
}

/**
 * `numel` elements of `buffer` from `offset` at once, when `from`'s memory is
 * host memory (`readSync`) and nothing is queued ahead on its stream; else
 * null, and the copy goes through a read promise.
 */
function readNow(
  from: Device,
  buffer: DeviceBuffer,
  offset: number,
  numel: number,
  dtype: DType,
): TypedArray | null {
  const backend = from.backendDevice;
  if (backend.readSync === undefined || !from.stream.idle) return null;
  return backend.readSync(buffer, offset, numel, dtype);
}

/**
 * Schedules the elementwise sum of `sources` (same numel and dtype, on
 * devices other than the destinations') into the regions' destinations:
 * one read per source, the sum on the host (in the dtype's arithmetic, in
 * source order), one write per region. No kernel runs on the destination.
 */
export function sumRegions(sources: readonly Tensor[], regions: readonly Region[]): void {
  const { dtype } = sources[0];
  const n = sources[0].numel();
  const buffers = sources.map((src) => src.storage.buffer("reduceAdd"));
  const sumOf = (arrays: TypedArray[]) => {
    const sum = allocHost(dtype, n);
    // Each store rounds to the dtype (float32 adds, int32 wraps) as a kernel would.
    for (const values of arrays) for (let i = 0; i < n; i++) sum[i] += values[i];
    return sum;
  };
  const nows = sources.every((src) => src.device.backendDevice.readSync && src.device.stream.idle)
    ? sources.map((src, i) => readNow(src.device, buffers[i], 0, n, dtype)!)
    : null;
  const total = nows ? sumOf(nows) : Promise.all(sources.map((src, i) => {
    const from = src.device;
    return from.stream.read(() => from.backendDevice.read(buffers[i], 0, n, dtype));
  })).then(sumOf);
  writeRegions(regions, total, 0);
}

/** Schedules `dst ← src` for every destination (same shape and dtype, other devices), one read. */
export function copyAcross(src: Tensor, ...destinations: Tensor[]): void {
  const n = src.numel();
  copyRegions(src, destinations.map((to) => ({ from: 0, numel: n, to, at: 0 })));
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
