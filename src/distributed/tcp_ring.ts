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
import { bytesOf, viewAs } from "./bytes.ts";
import { reduceInto, type ReduceOp } from "./backend.ts";

/** How the ring moves one chunk: to the next rank, and from the previous one. */
export interface RingLinks {
  /** Sends `chunk` (a view of the array) to the next rank. */
  sendNext(chunk: TypedArray): Promise<void>;
  /**
   * The next chunk the previous rank sent, as bytes: `into` (of the
   * chunk's length) filled, or bytes of their own.
   */
  receivePrevious(into: Uint8Array): Promise<Uint8Array>;
  /** Takes back bytes that `receivePrevious` returned instead of `into`, once used. */
  release?(bytes: Uint8Array): void;
}

/** Element boundaries of the `n` chunks of `length` elements. */
export function ringChunks(length: number, n: number): number[] {
  return Array.from({ length: n + 1 }, (_, i) => Math.floor((length * i) / n));
}

/** The bytes of the largest of `n` chunks of `length` elements of `like`'s type. */
export function ringScratchBytes(like: TypedArray, n: number): number {
  return Math.ceil(like.length / n) * like.BYTES_PER_ELEMENT;
}

/**
 * Adds the previous rank's values of one chunk into this rank's (`into`,
 * a piece of the array), in place; on the last step of the reduce-scatter
 * (`last`) an average also divides by the number of ranks.
 */
export type RingCombine = (into: TypedArray, theirs: TypedArray, last: boolean) => void;

/**
 * Replaces `data` (rank `rank` of `n`) by the elementwise `op` over the
 * ranks, around the ring. `"avg"` sums, then the chunk's owner divides
 * once before the all-gather. The reduce-scatter receives into `scratch`
 * (at least {@link ringScratchBytes}; the caller may keep it for the next
 * call), the all-gather into `data` itself. With `combine` (a float32 sum
 * or average in WebAssembly memory), it adds each received chunk instead
 * of `op`'s loop here, with the same bits.
 */
export async function ringAllReduce(
  data: TypedArray,
  rank: number,
  n: number,
  op: ReduceOp,
  links: RingLinks,
  scratch: Uint8Array = new Uint8Array(ringScratchBytes(data, n)),
  combine?: RingCombine,
): Promise<void> {
  const bounds = ringChunks(data.length, n);
  const chunk = (c: number) => data.subarray(bounds[c], bounds[c + 1]);
  const mod = (c: number) => ((c % n) + n) % n;
  const step = op === "avg" ? "sum" : op;
  // Reduce-scatter: after step s, this rank holds s + 2 ranks' values of chunk rank - s - 1.
  for (let s = 0; s < n - 1; s++) {
    const into = chunk(mod(rank - s - 1));
    const [, got] = await Promise.all([
      links.sendNext(chunk(mod(rank - s))),
      links.receivePrevious(scratch.subarray(0, into.byteLength)),
    ]);
    if (combine) combine(into, viewAs(data, got), s === n - 2);
    else reduceInto(into, [into, viewAs(data, got)], 0, into.length, step);
  }
  // This rank now holds the whole result of chunk rank + 1.
  const own = chunk(mod(rank + 1));
  if (op === "avg" && !combine) { for (let i = 0; i < own.length; i++) own[i] /= n; }
  for (let s = 0; s < n - 1; s++) {
    const into = bytesOf(chunk(mod(rank - s)));
    const [, got] = await Promise.all([
      links.sendNext(chunk(mod(rank + 1 - s))),
      links.receivePrevious(into),
    ]);
    if (got !== into) into.set(got);
  }
}

/**
 * Two ranks' all-reduce of large arrays: each sends its whole array to the
 * other, in segments of `segment` elements, and combines each segment as
 * soon as it arrives while the next ones are still on the wire. Both ranks
 * combine in rank order (this rank's and the other's values, or the other
 * way round), so both get the same bits; the ring would send as much (the
 * whole array each way) in two dependent rounds. Receives into `scratch`
 * (at least `data`'s bytes). With `combine`, `data` is left as it was and
 * `combine(from, to)` is called once elements [from, to) of the other
 * rank's values are in `scratch`, to combine them wherever the caller
 * keeps its result.
 */
export async function pairAllReduce(
  data: TypedArray,
  rank: number,
  op: ReduceOp,
  links: RingLinks,
  segment: number,
  scratch: Uint8Array = new Uint8Array(data.byteLength),
  combine?: (from: number, to: number) => void,
): Promise<void> {
  const starts: number[] = [];
  for (let i = 0; i < data.length; i += segment) starts.push(i);
  const piece = (a: TypedArray, k: number) => a.subarray(starts[k], starts[k + 1] ?? a.length);
  const spare = viewAs(data, scratch.subarray(0, data.byteLength));
  // Every receive is asked for at once, so that every segment lands in `scratch`.
  const sent = starts.map((_, k) => links.sendNext(piece(data, k)));
  const intos = starts.map((_, k) => bytesOf(piece(spare, k)));
  const received = intos.map((into) => links.receivePrevious(into));
  // Awaited in order below; a later one's failure must not go unhandled meanwhile.
  for (const p of [...sent, ...received]) p.catch(() => {});
  for (let k = 0; k < starts.length; k++) {
    const mine = piece(data, k);
    // A segment is combined in place only once it has been written to the other rank.
    const [, bytes] = await Promise.all([sent[k], received[k]]);
    // The bytes are this call's to overwrite either way.
    const theirs = bytes === intos[k] ? piece(spare, k) : viewAs(data, bytes);
    if (combine) {
      if (bytes !== intos[k]) piece(spare, k).set(theirs);
      combine(starts[k], starts[k + 1] ?? data.length);
    } else if (rank === 0) reduceInto(mine, [mine, theirs], 0, mine.length, op);
    else combineAfter(mine, theirs, op);
    if (bytes !== intos[k]) links.release?.(bytes);
  }
}

/** `mine` = `op`(`theirs`, `mine`), in that order (the other rank's values first). */
function combineAfter(mine: TypedArray, theirs: TypedArray, op: ReduceOp): void {
  if (mine instanceof Float32Array && (op === "sum" || op === "avg")) {
    // Gradients' case in one pass, rounding as reduceInto does (a copy less).
    const a = theirs as Float32Array;
    if (op === "avg") {
      for (let i = 0; i < mine.length; i++) mine[i] = Math.fround(a[i] + mine[i]) / 2;
    } else for (let i = 0; i < mine.length; i++) mine[i] = a[i] + mine[i];
    return;
  }
  // Into the other rank's values: reduceInto sets its output to the first source first.
  reduceInto(theirs, [theirs, mine], 0, mine.length, op);
  mine.set(theirs);
}
