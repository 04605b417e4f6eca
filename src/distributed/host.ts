/**
 * Moving tensors between a device and the host for collectives, in stream
 * order: reads are queued behind the work that produces the values, writes
 * hold the device's later work until the values have landed (see
 * `src/stream.ts`). Internal to the distributed layer.
 * @module
 */

import { noGrad } from "../autograd.ts";
import type { TypedArray } from "../dtype.ts";
import { borrowHost, giveBackHost } from "./host_pool.ts";
import { cat } from "../ops/view.ts";
import type { Device } from "../device.ts";
import type { Tensor } from "../tensor.ts";
import type { CollectiveCall } from "./backend.ts";
import type { ProcessGroup } from "./state.ts";

export { borrowHost, giveBackHost };

/**
 * The values of `tensors` (one device, one dtype) concatenated on the host,
 * in a reused array. See {@link readFlatInto}.
 */
export function readFlat(tensors: readonly Tensor[], op: string): Promise<TypedArray> {
  const backend = tensors[0].device.backendDevice;
  if (!backend.readInto) return readJoined(tensors, op, null, 0);
  const total = tensors.reduce((n, t) => n + t.numel(), 0);
  const out = borrowHost(tensors[0].dtype, total);
  return readFlatInto(tensors, out, 0, op).then(() => out);
}

/**
 * `tensors` joined on the device and read in one round trip: into `out`
 * from element `at` on when given (the backend has `readInto`), else into a
 * new host array.
 */
function readJoined(
  tensors: readonly Tensor[],
  op: string,
  out: TypedArray | null,
  at: number,
): Promise<TypedArray> {
  const { device, dtype } = tensors[0];
  const flat = tensors.length === 1
    ? tensors[0]
    : noGrad(() => cat(tensors.map((t) => t.reshape([-1])), 0));
  const n = flat.numel();
  const buffer = flat.storage.buffer(op);
  const backend = device.backendDevice;
  const values = out && backend.readInto
    ? device.stream.read(() =>
      backend.readInto!(buffer, 0, n, dtype, out.subarray(at, at + n)).then(() => out)
    )
    : device.stream.read(() => backend.read(buffer, 0, n, dtype));
  // The joined copy is only needed until the read has been queued.
  if (flat !== tensors[0]) flat.dispose();
  return values;
}

/**
 * Reads the values of `tensors` (one device, one dtype), concatenated, into
 * `out` from element `at` on. A backend whose memory is host memory
 * (`readSync`: cpu) fills it tensor by tensor; otherwise several tensors
 * are joined on the device first, so they cross to the host in one round
 * trip, straight into `out` where the backend reads into a given array.
 */
export function readFlatInto(
  tensors: readonly Tensor[],
  out: TypedArray,
  at: number,
  op: string,
): Promise<void> {
  const { device, dtype } = tensors[0];
  const backend = device.backendDevice;
  if (backend.readSync && backend.readInto) {
    const readInto = backend.readInto.bind(backend);
    const buffers = tensors.map((t) => t.storage.buffer(op));
    return device.stream.read(() => {
      let from = at;
      const reads = tensors.map((t, i) => {
        const n = t.numel();
        const piece = out.subarray(from, from + n);
        from += n;
        return readInto(buffers[i], 0, n, dtype, piece);
      });
      return Promise.all(reads).then(() => {});
    });
  }
  if (backend.readInto) return readJoined(tensors, op, out, at).then(() => {});
  return readJoined(tensors, op, null, 0).then((host) => out.set(host, at));
}

/**
 * Writes consecutive pieces of the host array `values` resolves with into
 * `tensors` (all on one device; tensor i from element `at[i]`, by default
 * right after the one before), holding the device's later work until then,
 * and gives the array back to the pool. A rejection is raised by the
 * device's next read.
 */
export function writeFlat(
  tensors: readonly Tensor[],
  values: Promise<TypedArray>,
  at?: readonly number[],
): void {
  if (tensors.length === 0) {
    values.then(giveBackHost, () => {});
    return;
  }
  const device = tensors[0].device;
  const buffers = tensors.map((t) => t.storage.buffer("collective"));
  for (const t of tensors) t.storage.markModified();
  device.stream.waitFor(values.then((host) => () => {
    let from = 0;
    tensors.forEach((t, i) => {
      const n = t.numel();
      if (at) from = at[i];
      device.backendDevice.write(buffers[i], 0, host.subarray(from, from + n));
      from += n;
    });
    giveBackHost(host);
  }));
}

/**
 * Holds `device`'s later work until `done` settles, on a rank whose tensor a
 * collective leaves as it is (broadcast's source, the ranks reduce and
 * gather do not write to). Every rank's stream then waits at the same
 * collective, so no rank's reads run ahead of one that the others still
 * wait on: a rank that ran ahead into DistributedDataParallel's blocking
 * exchange left the others waiting for its part of the earlier collective
 * until the timeout. A failure is raised by the device's next read.
 */
export function orderAfter(device: Device, done: Promise<unknown>): void {
  device.stream.waitFor(done.then(() => () => {}));
}

/**
 * `allReduce` of `tensors` (one device, one dtype) in place, as ONE
 * collective, in stream order. On a device whose memory is host memory (cpu)
 * and a backend with `allReduceVia`, the values go from the tensors straight
 * into the backend's exchange memory once the stream reaches the call, and
 * the result straight back (a 4 MiB float32 all-reduce of 2 spawned cpu
 * ranks: 2.5 -> 1.3 ms, two copies fewer); otherwise through a host array.
 * Later work on the device waits for the result either way. A failed call
 * may have written part of the result (the chunks done): the device's next
 * read raises its error.
 */
export function allReduceInPlace(
  group: ProcessGroup,
  call: CollectiveCall,
  tensors: readonly Tensor[],
  op: string,
): Promise<void> {
  const device = tensors[0].device;
  const memory = device.backendDevice;
  const collectives = group.backend;
  const buffers = tensors.map((t) => t.storage.buffer(op));
  // A storage passed twice (a tensor and its reshaped view) would be read
  // after a chunk of its result was written: such calls use a host array.
  const aliased = new Set(buffers).size < buffers.length;
  if (!collectives.allReduceVia || !memory.readSync || !memory.readInto || aliased) {
    const result = runOnHost(group, call, readFlat(tensors, op), async (host) => {
      await collectives.allReduce(call, host);
      return host;
    });
    writeFlat(tensors, result);
    return result.then(() => {});
  }
  const readInto = memory.readInto.bind(memory);
  const starts: number[] = [];
  let numel = 0;
  for (const t of tensors) {
    starts.push(numel);
    numel += t.numel();
  }
  // Every kernel before the call has run once this settles; the waitFor
  // below holds every later one until the result is written.
  const reached = device.stream.read(() => Promise.resolve());
  reached.catch(() => {}); // raised by the collective, which waits for it
  for (const t of tensors) t.storage.markModified();
  /** Calls `f(i, lo, hi)` for every tensor i overlapping elements [start, end), in its own indices. */
  const overlap = (start: number, end: number, f: (i: number, lo: number, hi: number) => void) => {
    tensors.forEach((t, i) => {
      const lo = Math.max(start, starts[i]);
      const hi = Math.min(end, starts[i] + t.numel());
      if (lo < hi) f(i, lo - starts[i], hi - starts[i]);
    });
  };
  const fill = (into: TypedArray, start: number) => {
    const reads: Promise<void>[] = [];
    overlap(start, start + into.length, (i, lo, hi) => {
      const piece = into.subarray(starts[i] + lo - start, starts[i] + hi - start);
      reads.push(readInto(buffers[i], lo, hi - lo, call.dtype!, piece));
    });
    return Promise.all(reads).then(() => {});
  };
  const take = (from: TypedArray, start: number) => {
    overlap(start, start + from.length, (i, lo, hi) => {
      memory.write(buffers[i], lo, from.subarray(starts[i] + lo - start, starts[i] + hi - start));
    });
  };
  const done = group.run(call, async () => {
    await reached;
    await collectives.allReduceVia!(call, numel, fill, take);
  });
  device.stream.waitFor(done.then(() => () => {}));
  return done;
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

/**
 * Every rank's values of `tensors` (one device, one dtype, the same shapes
 * on every rank), concatenated in rank order in one borrowed host array:
 * this rank's are read straight into its own part, and a backend with
 * `allGatherInto` writes the others' straight into theirs. Give it to
 * {@link writeFlat}, which returns it to the pool.
 */
export function allGatherOnHost(
  group: ProcessGroup,
  call: CollectiveCall,
  tensors: readonly Tensor[],
  op: string,
): Promise<TypedArray> {
  const m = tensors.reduce((n, t) => n + t.numel(), 0);
  const rank = group.rank;
  const all = borrowHost(tensors[0].dtype, m * group.worldSize);
  const own = all.subarray(rank * m, (rank + 1) * m);
  const values = readFlatInto(tensors, all, rank * m, op).then(() => own);
  const backend = group.backend;
  return runOnHost(group, call, values, async (host) => {
    if (backend.allGatherInto) await backend.allGatherInto(call, host, all);
    else {
      const parts = await backend.allGather(call, host);
      parts.forEach((part, q) => {
        if (q !== rank) all.set(part, q * m);
      });
    }
    return all;
  }).catch((error) => {
    giveBackHost(all);
    throw error;
  });
}

/**
 * Broadcasts `tensors` (one device, one dtype) from rank `src` in one
 * collective through the host, in stream order: `src` reads them back and
 * sends, every other rank receives into a borrowed array and writes them;
 * every rank must pass tensors of the same shapes. `op` names the caller in
 * errors.
 */
export function broadcastFlat(
  group: ProcessGroup,
  tensors: readonly Tensor[],
  src: number,
  op: string,
): void {
  const dtype = tensors[0].dtype;
  const call = group.call({ kind: "broadcast", dtype, shapes: tensors.map((t) => t.shape), src });
  if (group.rank === src) {
    const sent = runOnHost(group, call, readFlat(tensors, op), async (host) => {
      await group.backend.broadcast(call, host);
      giveBackHost(host);
    });
    orderAfter(tensors[0].device, sent);
    return;
  }
  const numel = tensors.reduce((n, t) => n + t.numel(), 0);
  const received = runOnHost(
    group,
    call,
    Promise.resolve(borrowHost(dtype, numel)),
    async (host) => {
      await group.backend.broadcast(call, host);
      return host;
    },
  );
  writeFlat(tensors, received);
}
