/**
 * The `"tcp"` group's ring all-reduce for large arrays: a reduce-scatter
 * then an all-gather around the ring of ranks (rank r sends to r + 1 and
 * receives from r - 1), each rank sending 2 (n - 1) / n of the array in
 * all, whatever the number of ranks (a direct exchange sends n - 1 times
 * the array). Every element is combined once, by one rank, and then
 * copied to the others: every rank ends with the same bits. With three or
 * more ranks a float sum is added up in ring order, not rank order (two
 * ranks: a + b = b + a exactly), as gloo's ring does.
 * @module
 */

import type { TypedArray } from "../dtype.ts";
import { reduceInto, type ReduceOp } from "./backend.ts";

/** How the ring moves one chunk: to the next rank, and from the previous one. */
export interface RingLinks {
  /** Sends `chunk` (a view of the array) to the next rank. */
  sendNext(chunk: TypedArray): Promise<void>;
  /** The next chunk the previous rank sent, as bytes. */
  receivePrevious(): Promise<Uint8Array>;
}

/** Element boundaries of the `n` chunks of `length` elements. */
export function ringChunks(length: number, n: number): number[] {
  return Array.from({ length: n + 1 }, (_, i) => Math.floor((length * i) / n));
}

/** The elements of `bytes` (a received copy) as an array of `like`'s type. */
function viewAs(like: TypedArray, bytes: Uint8Array): TypedArray {
  const Type = like.constructor as Float32ArrayConstructor;
  if (bytes.byteOffset % Type.BYTES_PER_ELEMENT !== 0) bytes = bytes.slice();
  return new Type(bytes.buffer, bytes.byteOffset, bytes.byteLength / Type.BYTES_PER_ELEMENT);
}

/**
 * Replaces `data` (rank `rank` of `n`) by the elementwise `op` over the
 * ranks, around the ring. `"avg"` sums, then the chunk's owner divides
 * once before the all-gather.
 */
export async function ringAllReduce(
  data: TypedArray,
  rank: number,
  n: number,
  op: ReduceOp,
  links: RingLinks,
): Promise<void> {
  const bounds = ringChunks(data.length, n);
  const chunk = (c: number) => data.subarray(bounds[c], bounds[c + 1]);
  const mod = (c: number) => ((c % n) + n) % n;
  const step = op === "avg" ? "sum" : op;
  // Reduce-scatter: after step s, this rank holds s + 2 ranks' values of chunk rank - s - 1.
  for (let s = 0; s < n - 1; s++) {
    const [, got] = await Promise.all([
      links.sendNext(chunk(mod(rank - s))),
      links.receivePrevious(),
    ]);
    const into = chunk(mod(rank - s - 1));
    reduceInto(into, [into, viewAs(data, got)], 0, into.length, step);
  }
  // This rank now holds the whole result of chunk rank + 1.
  const own = chunk(mod(rank + 1));
  if (op === "avg") { for (let i = 0; i < own.length; i++) own[i] /= n; }
  for (let s = 0; s < n - 1; s++) {
    const [, got] = await Promise.all([
      links.sendNext(chunk(mod(rank + 1 - s))),
      links.receivePrevious(),
    ]);
    chunk(mod(rank - s)).set(viewAs(data, got));
  }
}
