/**
 * The process-group backend contract: what a backend of collectives (the
 * shared-memory `"local"` one, `"mpi"`, or a plugin) implements, and the
 * call header every rank compares before it moves any data.
 *
 * A backend moves host arrays between ranks and knows nothing of tensors,
 * devices or modules: the tensor layer reads a tensor to the host, hands the
 * array to the backend, and writes the result back in stream order. The
 * backend is called one collective at a time, in the order the program
 * called them.
 * @module
 */

import type { DType, TypedArray } from "../dtype.ts";
import { borrowHost, giveBackHost } from "./host_pool.ts";
import type { Store } from "./store.ts";

/**
 * How `allReduceVia`'s caller fills the exchange memory: writes elements
 * `[start, start + into.length)` of this rank's values into `into`.
 */
export type AllReduceFill = (into: TypedArray, start: number) => Promise<void>;
/** How `allReduceVia`'s caller is handed elements `[start, start + from.length)` of the result. */
export type AllReduceTake = (from: TypedArray, start: number) => void;

/**
 * How `allReduce` (and the other reducing collectives) combine the ranks'
 * values. `"avg"` is for float dtypes; `"band"`, `"bor"` and `"bxor"`
 * (bitwise and, or, xor) for int32.
 */
export type ReduceOp = "sum" | "avg" | "max" | "min" | "product" | "band" | "bor" | "bxor";

/**
 * `torch.distributed.ReduceOp`'s members by their PyTorch names, as the
 * string ops every collective takes: `allReduce(t, { op: ReduceOp.PRODUCT })`
 * is `allReduce(t, { op: "product" })`. (`PREMUL_SUM`, NCCL's, is absent.)
 */
export const ReduceOp = {
  /** Elementwise sum (the default). */
  SUM: "sum",
  /** Elementwise mean over the ranks (float dtypes). */
  AVG: "avg",
  /** Elementwise product. */
  PRODUCT: "product",
  /** Elementwise minimum (NaN wins). */
  MIN: "min",
  /** Elementwise maximum (NaN wins). */
  MAX: "max",
  /** Bitwise and (int32). */
  BAND: "band",
  /** Bitwise or (int32). */
  BOR: "bor",
  /** Bitwise exclusive or (int32). */
  BXOR: "bxor",
} as const satisfies Record<string, ReduceOp>;

/** Every {@link ReduceOp}, in the order headers number them. */
export const REDUCE_OPS: readonly ReduceOp[] = [
  "sum",
  "avg",
  "max",
  "min",
  "product",
  "band",
  "bor",
  "bxor",
];

/** Whether `op` combines only integers (the bitwise ops). */
export function isBitwiseOp(op: ReduceOp): boolean {
  return op === "band" || op === "bor" || op === "bxor";
}

/** The collectives a backend implements. */
export type CollectiveKind =
  | "allReduce"
  | "broadcast"
  | "allGather"
  | "barrier"
  | "reduceScatter"
  | "allToAll"
  | "gather"
  | "scatter"
  | "reduce"
  | "send"
  | "recv";

/** Int32 words in a packed {@link CollectiveCall.header}. */
export const HEADER_WORDS = 16;

/** The most int32 words one rank passes to {@link ProcessGroupBackend.allGatherSync}. */
export const SYNC_WORDS = 4096;

/**
 * One collective as the calling rank sees it. Every rank must make the same
 * calls in the same order; backends compare the packed `header` of every
 * rank (cheaply, with the data of the call's first exchange) and reject a
 * mismatch on every rank with {@link checkHeaders}.
 */
export interface CollectiveCall {
  /** Which collective. */
  readonly kind: CollectiveKind;
  /** Position of this call among the group's collectives (0, 1, ...). */
  readonly seq: number;
  /** The element type moved, or null for a barrier. */
  readonly dtype: DType | null;
  /** How `allReduce` and `reduceScatter` combine. */
  readonly op?: ReduceOp;
  /** `broadcast`'s and `scatter`'s source rank; `recv`'s sender. */
  readonly src?: number;
  /** `gather`'s and `reduce`'s destination rank; `send`'s receiver. */
  readonly dst?: number;
  /** `send`'s and `recv`'s tag. */
  readonly tag?: number;
  /** The call packed into {@link HEADER_WORDS} int32 words, to exchange and compare. */
  readonly header: Int32Array;
}

/**
 * A started process group: this rank's end of the collectives. Arrays are
 * host arrays of the call's dtype, the same length on every rank.
 */
export interface ProcessGroupBackend {
  /** This process's rank, 0 ≤ rank < worldSize. */
  readonly rank: number;
  /** Number of ranks. */
  readonly worldSize: number;
  /** Replaces `data` on every rank by the elementwise `call.op` over the ranks. */
  allReduce(call: CollectiveCall, data: TypedArray): Promise<void>;
  /**
   * Optional: `allReduce` of `numel` elements that pass through no array of
   * the caller's: `fill(into, start)` writes elements `[start, start +
   * into.length)` of this rank's values into the backend's own exchange
   * memory, and `take(from, start)` is handed the same elements of the
   * result there, both while the collective runs (chunk by chunk where the
   * backend moves chunks). `DistributedDataParallel` on cpu ranks reads the
   * gradients in and writes the averages out this way, two copies of the
   * whole gradient fewer per step. Without it, a host array in between.
   */
  allReduceVia?(
    call: CollectiveCall,
    numel: number,
    fill: AllReduceFill,
    take: AllReduceTake,
  ): Promise<void>;
  /** Replaces `data` on every rank by rank `call.src`'s. */
  broadcast(call: CollectiveCall, data: TypedArray): Promise<void>;
  /** Every rank's `data`, in rank order. */
  allGather(call: CollectiveCall, data: TypedArray): Promise<TypedArray[]>;
  /**
   * Optional: every rank's `data`, in rank order, written straight into
   * `out` (`worldSize * data.length` elements: rank q's from `q *
   * data.length` on). `data` may be `out`'s own part (the caller read its
   * values there); otherwise it is copied in. Without it, the caller
   * copies `allGather`'s arrays into `out`.
   */
  allGatherInto?(call: CollectiveCall, data: TypedArray, out: TypedArray): Promise<void>;
  /** Resolves once every rank has called it. */
  barrier(call: CollectiveCall): Promise<void>;
  /**
   * Optional: combines every rank's `data` (`worldSize` equal parts)
   * elementwise with `call.op` and returns part `rank` of the result, as
   * `torch.distributed.reduce_scatter_tensor`. Without it, `reduceScatter`
   * all-reduces the whole array and keeps this rank's part.
   */
  reduceScatter?(call: CollectiveCall, data: TypedArray): Promise<TypedArray>;
  /**
   * Optional: `reduceScatter` that writes this rank's part into `out`
   * (`data.length / worldSize` elements, not part of `data`), so the
   * caller can lend it a reused array.
   */
  reduceScatterInto?(call: CollectiveCall, data: TypedArray, out: TypedArray): Promise<void>;
  /**
   * Optional: every rank's small int32 `data` (at most {@link SYNC_WORDS}
   * words), in rank order, BLOCKING this thread until all ranks have called
   * it (or the timeout). It runs apart from the other collectives, so it
   * may be called while earlier ones are still in flight, in the same
   * program order on every rank. `DistributedDataParallel` needs it to
   * learn, before `backward()` returns, which parameters no rank used.
   */
  allGatherSync?(call: CollectiveCall, data: Int32Array): Int32Array[];
  /**
   * Optional: `data` holds `worldSize` equal parts, part q for rank q;
   * returns the parts every rank sent this one, in rank order, concatenated
   * (`torch.distributed.all_to_all_single` with equal splits). Without it,
   * `allToAll` gathers every rank's whole array and keeps its parts.
   */
  allToAll?(call: CollectiveCall, data: TypedArray): Promise<TypedArray>;
  /**
   * Optional: every rank's `data` in rank order on rank `call.dst`, null on
   * the others. Without it, `gather` is an `allGather`.
   */
  gather?(call: CollectiveCall, data: TypedArray): Promise<TypedArray[] | null>;
  /**
   * Optional: rank `call.src`'s `data` holds `worldSize` equal parts (the
   * other ranks pass an empty array); part q lands in rank q's `out`.
   * Without it, `scatter` broadcasts every part.
   */
  scatter?(call: CollectiveCall, data: TypedArray, out: TypedArray): Promise<void>;
  /**
   * Optional: replaces `data` on rank `call.dst` by the elementwise
   * `call.op` over the ranks (in rank order); the others' `data` is left
   * as it was. Without it, `reduce` is an `allReduce`.
   */
  reduce?(call: CollectiveCall, data: TypedArray): Promise<void>;
  /**
   * Optional (needed by `send`/`recv`): sends `data` to rank `call.dst`,
   * resolving once that rank's matching `recv` (same `call.tag`) has taken
   * it, or rejecting with the receiver's error (see {@link checkPair}).
   * Point-to-point calls are NOT run one at a time with the collectives:
   * they may be called while others are in flight, and must not wait for
   * the receiver before they resolve.
   */
  send?(call: CollectiveCall, data: TypedArray): Promise<void>;
  /**
   * Optional (with `send`): fills `data` with the next message rank
   * `call.src` sent this one with `call.tag`, in the order sent, after
   * checking its header against `call`'s (both ranks then fail alike).
   */
  recv?(call: CollectiveCall, data: TypedArray): Promise<void>;
  /**
   * Optional (needed by `newGroup`): called by every rank of this group in
   * the same order with the same sorted, distinct `ranks` (this group's
   * ranks) and a counter `index` (0, 1, ... per group), it returns this
   * rank's end of a group of just those ranks (its rank = its position in
   * `ranks`), or null on a rank not in `ranks`.
   */
  newGroup?(ranks: readonly number[], index: number): Promise<ProcessGroupBackend | null>;
  /** Leaves the group; collectives after it are refused. */
  destroy(): void | Promise<void>;
}

/**
 * A group of some of the ranks, from `newGroup`: pass it as `{ group }` to
 * a collective to run it among those ranks only.
 */
export class DistributedGroup {
  /** The ranks (of the whole group) in this group, ascending; rank i here is `ranks[i]`. */
  readonly ranks: readonly number[];
  /** This rank's rank in the group, or -1 when it is not a member. */
  readonly rank: number;

  /** Made by `newGroup` (a handle made otherwise runs no collective). */
  constructor(ranks: readonly number[], rank: number) {
    this.ranks = ranks;
    this.rank = rank;
  }

  /** Number of ranks in the group. */
  get size(): number {
    return this.ranks.length;
  }
}

/** What `initProcessGroup` hands a backend factory. */
export interface ProcessGroupInit {
  /** The rank asked for, when the caller gave one (launchers may supply their own). */
  readonly rank?: number;
  /** The world size asked for, when given. */
  readonly worldSize?: number;
  /** How long a collective may wait for the other ranks before it fails. */
  readonly timeoutMs: number;
  /** `initProcessGroup`'s `initMethod`, for backends that meet over the network (`"tcp"`). */
  readonly initMethod?: string;
  /** `initProcessGroup`'s `store`, for backends that meet through one (`"tcp"`). */
  readonly store?: Store;
}

/** Starts this rank's end of a process group; may be async and may throw. */
export type ProcessGroupFactory = (
  init: ProcessGroupInit,
) => ProcessGroupBackend | Promise<ProcessGroupBackend>;

/**
 * A collective that cannot complete: ranks that disagree about a call, a
 * rank that failed, left, or did not arrive in time. `ranks` are the ranks
 * it names.
 */
export class DistributedError extends Error {
  /** The ranks the error is about. */
  readonly ranks: readonly number[];

  /** An error about `ranks`. */
  constructor(message: string, ranks: readonly number[], options?: ErrorOptions) {
    super(message, options);
    this.name = "DistributedError";
    this.ranks = ranks;
  }
}

const KINDS: readonly CollectiveKind[] = [
  "allReduce",
  "broadcast",
  "allGather",
  "barrier",
  "reduceScatter",
  "allToAll",
  "gather",
  "scatter",
  "reduce",
  "send",
  "recv",
];
const DTYPE_CODES: readonly (DType | null)[] = [null, "float32", "int32", "float64"];
const MAX_DIMS = 8;

/** FNV-1a over the dims of several shapes, for headers of coalesced calls. */
function shapesHash(shapes: readonly (readonly number[])[]): number {
  let h = 0x811c9dc5;
  const mix = (v: number) => {
    h = Math.imul(h ^ (v & 0xffff), 0x01000193);
    h = Math.imul(h ^ (v >>> 16), 0x01000193);
  };
  for (const shape of shapes) {
    mix(shape.length);
    for (const d of shape) mix(d);
  }
  return h | 0;
}

/** What a collective carries, for {@link packHeader}. */
export interface CallShape {
  /** Which collective. */
  readonly kind: CollectiveKind;
  /** Its position among the group's collectives. */
  readonly seq: number;
  /** Element type, null for a barrier. */
  readonly dtype: DType | null;
  /** The shapes of the tensors moved together (one for a plain call). */
  readonly shapes: readonly (readonly number[])[];
  /** `allReduce`'s and `reduceScatter`'s op. */
  readonly op?: ReduceOp;
  /** `broadcast`'s and `scatter`'s source, `recv`'s sender. */
  readonly src?: number;
  /** `gather`'s and `reduce`'s destination, `send`'s receiver. */
  readonly dst?: number;
  /** `send`'s and `recv`'s tag. */
  readonly tag?: number;
}

/** Header word 3: what else besides the shapes a call's ranks must agree on. */
function detailWord(call: CallShape): number {
  const op = REDUCE_OPS.indexOf(call.op ?? "sum") + 1;
  switch (call.kind) {
    case "allReduce":
    case "reduceScatter":
      return op;
    case "reduce":
      return op | ((call.dst ?? 0) << 4);
    case "broadcast":
    case "scatter":
      return call.src ?? 0;
    case "gather":
      return call.dst ?? 0;
    case "send":
    case "recv":
      return call.tag ?? 0;
    default:
      return 0;
  }
}

/** Packs a call into the header ranks compare. */
export function packHeader(call: CallShape): Int32Array {
  const h = new Int32Array(HEADER_WORDS);
  h[0] = KINDS.indexOf(call.kind) + 1;
  h[1] = call.seq | 0;
  h[2] = DTYPE_CODES.indexOf(call.dtype);
  h[3] = detailWord(call);
  h[4] = call.shapes.length;
  h[5] = call.shapes.reduce((n, s) => n + s.reduce((a, b) => a * b, 1), 0);
  const single = call.shapes.length === 1 && call.shapes[0].length <= MAX_DIMS;
  // Word 15 is not compared: a send's receiver, a recv's sender, for messages.
  if (call.kind === "send") h[15] = call.dst ?? -1;
  if (call.kind === "recv") h[15] = call.src ?? -1;
  if (single) {
    const shape = call.shapes[0];
    h[6] = shape.length;
    shape.forEach((d, i) => (h[7 + i] = d));
  } else {
    h[6] = -1;
    h[7] = shapesHash(call.shapes);
  }
  return h;
}

/** `allReduce #3 (sum) of float32 [4, 3]`, from a packed header. */
export function describeHeader(h: Int32Array): string {
  const kind = KINDS[h[0] - 1];
  if (!kind) return `an unknown call (header word 0 = ${h[0]})`;
  const op = () => REDUCE_OPS[(h[3] & 15) - 1] ?? "?";
  const detail = kind === "allReduce" || kind === "reduceScatter"
    ? ` (${op()})`
    : kind === "reduce"
    ? ` (${op()}, to rank ${h[3] >> 4})`
    : kind === "broadcast" || kind === "scatter"
    ? ` (from rank ${h[3]})`
    : kind === "gather"
    ? ` (to rank ${h[3]})`
    : kind === "send"
    ? ` to rank ${h[15]} (tag ${h[3]})`
    : kind === "recv"
    ? ` from rank ${h[15]} (tag ${h[3]})`
    : "";
  if (kind === "barrier") return `barrier #${h[1]}`;
  const dtype = DTYPE_CODES[h[2]] ?? "?";
  const what = h[6] >= 0
    ? `${dtype} [${Array.from(h.subarray(7, 7 + h[6])).join(", ")}]`
    : `${h[4]} ${dtype} tensor${h[4] === 1 ? "" : "s"} of ${h[5]} elements (shapes hash ${
      (h[7] >>> 0).toString(16)
    })`;
  return `${kind} #${h[1]}${detail} of ${what}`;
}

/** Whether two headers describe the same call (word 15 is the backend's own). */
function sameCall(a: Int32Array, b: Int32Array): boolean {
  for (let i = 0; i < HEADER_WORDS - 1; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Throws the same {@link DistributedError} on every rank when the ranks'
 * headers (in rank order) do not all describe the same call, naming each
 * rank and what it called.
 */
export function checkHeaders(headers: readonly Int32Array[]): void {
  if (headers.every((h) => sameCall(h, headers[0]))) return;
  const groups = new Map<string, number[]>();
  headers.forEach((h, rank) => {
    const text = describeHeader(h);
    const ranks = groups.get(text) ?? [];
    ranks.push(rank);
    groups.set(text, ranks);
  });
  const parts = [...groups].map(([text, ranks]) =>
    `${ranks.length === 1 ? "rank" : "ranks"} ${ranks.join(", ")} called ${text}`
  );
  const odd = [...groups.values()].slice(1).flat();
  throw new DistributedError(
    `collective mismatch: every rank must call the same collectives in the same order with the same shapes and dtypes, but ${
      parts.join("; ")
    }`,
    odd,
  );
}

/**
 * Throws the same {@link DistributedError} on both ranks when the header a
 * `send` on rank `sender` packed and the one the matching `recv` on rank
 * `receiver` packed disagree about the dtype or shape (the tags agree, or
 * they would not have been matched), naming both ranks and both calls.
 */
export function checkPair(
  sent: Int32Array,
  expected: Int32Array,
  sender: number,
  receiver: number,
): void {
  // Word 1 too: the send's number among this pair's sends on the tag
  // must be the recv's, or two messages of one shape would swap silently.
  let same = true;
  for (let i = 1; i < HEADER_WORDS - 1; i++) if (sent[i] !== expected[i]) same = false;
  if (same) return;
  let onlyOrder = true;
  for (let i = 2; i < HEADER_WORDS - 1; i++) if (sent[i] !== expected[i]) onlyOrder = false;
  throw new DistributedError(
    `send/recv mismatch: rank ${sender} called ${
      describeHeader(sent)
    }, but rank ${receiver} called ${describeHeader(expected)}: ${
      onlyOrder
        ? "the messages of one pair and tag must be received in the order they were sent"
        : "a recv must get a tensor of the sent dtype and shape"
    }`,
    [sender, receiver],
  );
}

/** Words 0 and 1 of a header: which collective a rank is at, for timeouts. */
export function describeProgress(h: Int32Array): string {
  const kind = KINDS[h[0] - 1];
  return kind ? `${kind} #${h[1]}` : "no collective yet";
}

/**
 * `out[i] = op over q of sources[q][i]` for `start <= i < end`, combining the
 * ranks' values in rank order (so every rank computing it gets the same
 * bits); `"avg"` sums, then divides once; `"max"` and `"min"` propagate NaN
 * as `torch.maximum` does. The typed array rounds after every step.
 */
export function reduceInto(
  out: TypedArray,
  sources: readonly TypedArray[],
  start: number,
  end: number,
  op: ReduceOp,
): void {
  if (out instanceof Float32Array && sources.length === 2 && (op === "sum" || op === "avg")) {
    // The common case (two ranks, float32 gradients) in one pass, rounding
    // exactly as the separate passes below would.
    const a = sources[0] as Float32Array;
    const b = sources[1] as Float32Array;
    if (op === "avg") { for (let i = start; i < end; i++) out[i] = Math.fround(a[i] + b[i]) / 2; }
    else for (let i = start; i < end; i++) out[i] = a[i] + b[i];
    return;
  }
  out.set(sources[0].subarray(start, end), start);
  for (let q = 1; q < sources.length; q++) {
    const src = sources[q];
    if (op === "product") {
      // An int32 product wraps as C's (PyTorch's) does: a double product
      // past 2^53 would first lose the low bits that the wrap keeps.
      if (out instanceof Int32Array) {
        for (let i = start; i < end; i++) out[i] = Math.imul(out[i], src[i] as number);
      } else for (let i = start; i < end; i++) out[i] *= src[i];
    } else if (op === "band") {
      for (let i = start; i < end; i++) out[i] &= src[i];
    } else if (op === "bor") {
      for (let i = start; i < end; i++) out[i] |= src[i];
    } else if (op === "bxor") {
      for (let i = start; i < end; i++) out[i] ^= src[i];
    } else if (op === "sum" || op === "avg") {
      for (let i = start; i < end; i++) out[i] += src[i];
    } else if (op === "max") {
      // NaN wins, as torch.maximum.
      for (let i = start; i < end; i++) {
        const b = src[i];
        if (b > out[i] || b !== b) out[i] = b;
      }
    } else {
      for (let i = start; i < end; i++) {
        const b = src[i];
        if (b < out[i] || b !== b) out[i] = b;
      }
    }
  }
  if (op === "avg") {
    const n = sources.length;
    for (let i = start; i < end; i++) out[i] /= n;
  }
}

/**
 * `allReduceVia` through one host array, for backends (or cases) without
 * exchange memory of their own: `fill` writes the whole array, the backend's
 * `allReduce` runs on it, `take` gets the result (and must not keep it: the
 * array is reused by the next call of the same dtype and length).
 */
export async function allReduceViaHost(
  backend: ProcessGroupBackend,
  call: CollectiveCall,
  numel: number,
  fill: AllReduceFill,
  take: AllReduceTake,
): Promise<void> {
  const host = borrowHost(call.dtype!, numel);
  await fill(host, 0);
  await backend.allReduce(call, host);
  take(host, 0);
  // Only after a success: a failed call's reads or receives may still land in it.
  giveBackHost(host);
}
