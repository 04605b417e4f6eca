/**
 * The `"local"` process group: ranks are Web Workers of one process (started
 * by `distributed.spawn`) and collectives go through SharedArrayBuffers.
 *
 * Every collective is a sequence of rounds. In round k each rank writes its
 * header and data into its own slot of buffer k % 2, publishes k as its
 * phase, and waits (`Atomics.waitAsync`, so the Worker's event loop keeps
 * running and no core spins) until every rank's phase is at least k. Data of
 * round k is only read between that barrier and the rank's arrival at round
 * k + 1, so two buffers per rank suffice. An all-reduce of a few ranks takes
 * one round per chunk, each rank combining every slot in rank order (so every
 * rank gets bit-identical results); with more ranks it takes two: every rank
 * reduces its own share of the chunk into its slot of the next round, then
 * everyone copies the shares.
 * @module
 */

import type { DType, TypedArray } from "../dtype.ts";
import { chunkSizes } from "../shape.ts";
import { Mailbox } from "./mailbox.ts";
import {
  type AllReduceFill,
  type AllReduceTake,
  allReduceViaHost,
  checkHeaders,
  checkPair,
  type CollectiveCall,
  describeHeader,
  describeProgress,
  DistributedError,
  HEADER_WORDS,
  type ProcessGroupBackend,
  reduceInto,
  type ReduceOp,
  SYNC_WORDS,
} from "./backend.ts";
import { sharedMemory, type WasmReducer, wasmReducer } from "./wasm_reduce.ts";

/** A rank's state as the others see it: running, left the group, or failed. */
export const RankStatus = { Running: 0, Left: 1, Failed: 2 } as const;
/** One of {@link RankStatus}'s values. */
export type RankStatus = (typeof RankStatus)[keyof typeof RankStatus];

const MESSAGE_BYTES = 1024;
/**
 * Up to this many ranks, every rank reduces whole chunks itself (one round,
 * (N - 1) adds per element); beyond, each reduces its share and the shares
 * are exchanged (two rounds, (N - 1) / N adds per element).
 */
const DIRECT_REDUCE_RANKS = 4;
const MIB = 1 << 20;

/** The memory the ranks of one local group share (structured-cloned to each Worker). */
export interface LocalShared {
  /** Number of ranks. */
  readonly worldSize: number;
  /** Bytes of one slot: the most one rank moves per round. */
  readonly chunkBytes: number;
  /** Phases, statuses, headers, failure messages. */
  readonly control: SharedArrayBuffer;
  /** Two slots per rank: `memory`'s buffer where WebAssembly has shared memory. */
  readonly data: SharedArrayBuffer;
  /** The WebAssembly memory `data` is, for the SIMD sums; null without WebAssembly. */
  readonly memory: WebAssembly.Memory | null;
  /** `allGatherSync`'s own phases and two slots per rank (header and data words each). */
  readonly sync: SharedArrayBuffer;
}

const SYNC_SLOT = HEADER_WORDS + SYNC_WORDS;
const syncSlotAt = (n: number, rank: number, parity: number) => n + (2 * rank + parity) * SYNC_SLOT;
/** Longest blocking wait between looks at the other ranks' statuses. */
const SYNC_LOOK_MS = 50;

// Int32 word offsets in `control`.
const phaseAt = (rank: number) => rank;
const statusAt = (n: number, rank: number) => n + rank;
const headerAt = (n: number, rank: number, parity: number) =>
  2 * n + (2 * rank + parity) * HEADER_WORDS;
const messageLengthAt = (n: number, rank: number) => 2 * n + 2 * n * HEADER_WORDS + rank;
/** The round whose share of a two-rank all-reduce this rank has summed (see `allReduceVia`). */
const shareDoneAt = (n: number, rank: number) => 3 * n + 2 * n * HEADER_WORDS + rank;
/** Whether a rank at round `seen` has reached `round` (int32 rounds that wrap after 2^31). */
const reached = (seen: number, round: number) => ((seen - round) | 0) >= 0;
const controlWords = (n: number) => 4 * n + 2 * n * HEADER_WORDS;
const messageOffset = (n: number, rank: number) =>
  Math.ceil((controlWords(n) * 4) / 8) * 8 + rank * MESSAGE_BYTES;

/**
 * Shared memory for `worldSize` ranks. Slots default to 4 MiB for a few
 * ranks, less for many (16 MiB over all ranks, at least 512 KiB each):
 * larger collectives go through in chunks.
 */
export function createLocalShared(
  worldSize: number,
  chunkBytes?: number,
): LocalShared {
  const bytes = chunkBytes ??
    Math.min(4 * MIB, Math.max(MIB / 2, Math.floor(16 * MIB / worldSize)));
  const slot = Math.max(8, Math.floor(bytes / 8) * 8);
  const memory = sharedMemory(2 * worldSize * slot);
  return {
    worldSize,
    chunkBytes: slot,
    control: new SharedArrayBuffer(messageOffset(worldSize, worldSize)),
    data: (memory?.buffer as SharedArrayBuffer | undefined) ??
      new SharedArrayBuffer(2 * worldSize * slot),
    memory,
    sync: new SharedArrayBuffer(4 * (worldSize + 2 * worldSize * SYNC_SLOT)),
  };
}

/**
 * Publishes `rank`'s status (and why it failed) and wakes every rank
 * waiting for it. Callable from any thread holding `shared` (the launcher
 * marks a Worker that died).
 */
export function markRank(
  shared: LocalShared,
  rank: number,
  status: RankStatus,
  message = "",
): void {
  const n = shared.worldSize;
  const control = new Int32Array(shared.control);
  if (status === RankStatus.Failed && Atomics.load(control, statusAt(n, rank)) !== 0) return;
  if (message) {
    const bytes = new Uint8Array(shared.control, messageOffset(n, rank), MESSAGE_BYTES);
    const { written } = new TextEncoder().encodeInto(message, bytes);
    Atomics.store(control, messageLengthAt(n, rank), written);
  }
  Atomics.store(control, statusAt(n, rank), status);
  Atomics.notify(control, phaseAt(rank));
  Atomics.notify(control, shareDoneAt(n, rank));
  Atomics.notify(new Int32Array(shared.sync), rank);
}

/** `rank`'s published status. */
export function rankStatus(shared: LocalShared, rank: number): RankStatus {
  return Atomics.load(
    new Int32Array(shared.control),
    statusAt(shared.worldSize, rank),
  ) as RankStatus;
}

function failureMessage(shared: LocalShared, rank: number): string {
  const n = shared.worldSize;
  const control = new Int32Array(shared.control);
  const length = Atomics.load(control, messageLengthAt(n, rank));
  if (length === 0) return "no message";
  // TextDecoder refuses views of shared memory: copy first.
  const bytes = new Uint8Array(shared.control, messageOffset(n, rank), length).slice();
  return new TextDecoder().decode(bytes);
}

function view(buffer: SharedArrayBuffer, dtype: DType, byteOffset: number, bytes: number) {
  switch (dtype) {
    case "float32":
      return new Float32Array(buffer, byteOffset, bytes / 4);
    case "int32":
      return new Int32Array(buffer, byteOffset, bytes / 4);
    case "float64":
      return new Float64Array(buffer, byteOffset, bytes / 8);
  }
}

/** This rank's end of a local group. */
export class LocalBackend implements ProcessGroupBackend {
  readonly #shared: LocalShared;
  readonly #control: Int32Array;
  readonly #sync: Int32Array;
  readonly #timeoutMs: number;
  /** For a sub-group: the whole group's memory and the members' ranks there (for their statuses). */
  readonly #world: { readonly shared: LocalShared; readonly members: readonly number[] } | null;
  /** SIMD sums over the slots (float32 sum and avg), when WebAssembly has them. */
  readonly #reducer: WasmReducer | null;
  /** This Worker's channels to the others (null: a group of one, made without spawn). */
  readonly #mailbox: Mailbox | null;
  /** Which group's letters are this one's: 0 the whole group, i + 1 its sub-group i. */
  readonly #letters: number;
  #round = 0;
  #syncRound = 0;
  #left = false;

  /**
   * Joins the group in `shared` as `rank`; `world`: this is a sub-group of
   * the group in `world.shared`, whose rank `world.members[q]` is rank q
   * here; `mailbox`: this Worker's channels to the whole group's ranks, on
   * which this group's letters are those of number `letters`.
   */
  constructor(
    shared: LocalShared,
    readonly rank: number,
    timeoutMs: number,
    world: { readonly shared: LocalShared; readonly members: readonly number[] } | null = null,
    mailbox: Mailbox | null = null,
    letters = 0,
  ) {
    this.#shared = shared;
    this.#control = new Int32Array(shared.control);
    this.#sync = new Int32Array(shared.sync);
    this.#timeoutMs = timeoutMs;
    this.#world = world;
    this.#reducer = shared.memory ? wasmReducer(shared.memory) : null;
    this.#mailbox = mailbox;
    this.#letters = letters;
  }

  /** Rank q of this group's rank in the whole group (whose Workers the mailbox reaches). */
  #worldRank(q: number): number {
    return this.#world ? this.#world.members[q] : q;
  }

  /** Why the whole group's rank `w` cannot write any more (failed or left), or null. */
  #gone = (w: number): string | null => {
    const shared = this.#world?.shared ?? this.#shared;
    const status = rankStatus(shared, w);
    if (status === RankStatus.Failed) return `failed: ${failureMessage(shared, w)}`;
    if (status === RankStatus.Left) {
      return "left the process group (its main returned or it called destroyProcessGroup)";
    }
    return null;
  };

  /** The channels to the other ranks, or an error naming the call that needs them. */
  #channels(what: string): Mailbox {
    if (!this.#mailbox) {
      throw new Error(
        `${what}: this "local" group has no channels between its ranks (only ranks started by distributed.spawn have them)`,
      );
    }
    return this.#mailbox;
  }

  /**
   * Rank q's status: in a sub-group, also its status in the whole group
   * (where the launcher marks a Worker that died).
   */
  #status(q: number): RankStatus {
    const own = Atomics.load(this.#control, statusAt(this.worldSize, q)) as RankStatus;
    if (own !== RankStatus.Running || !this.#world) return own;
    return rankStatus(this.#world.shared, this.#world.members[q]);
  }

  /** Longest single wait: a sub-group is not woken by the whole group's status changes. */
  #waitCap(left: number): number {
    return this.#world ? Math.min(left, SYNC_LOOK_MS) : left;
  }

  /**
   * A sub-group with memory of its own: its first rank makes it and posts
   * it to the other members (Workers share memory posted to them), so
   * there is no limit on how many are made. Sub-groups of sub-groups: none.
   */
  async newGroup(ranks: readonly number[], index: number): Promise<ProcessGroupBackend | null> {
    if (this.#world) {
      throw new RangeError(`newGroup: a sub-group of a "local" group makes no sub-groups`);
    }
    const position = ranks.indexOf(this.rank);
    if (position < 0) return null;
    const size = ranks.length;
    const key = `group ${index}`;
    let shared: LocalShared;
    if (position === 0) {
      shared = createLocalShared(size, Math.max(64 * 1024, Math.min(MIB, (4 * MIB) / size)));
      for (const q of ranks.slice(1)) {
        this.#channels("newGroup").post(q, { key, payload: shared });
      }
    } else {
      const maker = ranks[0];
      const letter = await this.#channels("newGroup").take(
        maker,
        key,
        performance.now() + this.#timeoutMs,
        this.#gone,
        {
          gone: (why) =>
            new DistributedError(`newGroup [${ranks.join(", ")}]: rank ${maker} ${why}`, [maker]),
          late: () =>
            new DistributedError(
              `newGroup [${
                ranks.join(", ")
              }]: rank ${maker} did not post the group's memory within ${this.#timeoutMs} ms`,
              [maker],
            ),
        },
      );
      shared = letter.payload as LocalShared;
    }
    return new LocalBackend(
      shared,
      position,
      this.#timeoutMs,
      { shared: this.#shared, members: ranks },
      this.#mailbox,
      index + 1,
    );
  }

  /** Number of ranks. */
  get worldSize(): number {
    return this.#shared.worldSize;
  }

  #slot(rank: number, parity: number, dtype: DType): TypedArray {
    const bytes = this.#shared.chunkBytes;
    return view(this.#shared.data, dtype, (2 * rank + parity) * bytes, bytes);
  }

  /**
   * Combines elements [from, to) of every rank's slot of parity `p` with
   * `op`, in rank order, into the same places of this rank's slot of parity
   * p ^ 1 (free: every rank has arrived at this round, so all have finished
   * reading the round before, which used it), and returns that slot.
   */
  #combine(
    p: number,
    from: number,
    to: number,
    op: ReduceOp,
    dtype: DType,
    outParity = p ^ 1,
  ): TypedArray {
    const out = this.#slot(this.rank, outParity, dtype);
    const bytes = this.#shared.chunkBytes;
    const at = (q: number, parity: number) => (2 * q + parity) * bytes + from * 4;
    const sources = [];
    for (let q = 0; q < this.worldSize; q++) sources.push(at(q, p));
    const simd = dtype === "float32" &&
      this.#reducer?.reduce(at(this.rank, outParity), sources, to - from, op);
    if (!simd) {
      const slots = [];
      for (let q = 0; q < this.worldSize; q++) slots.push(this.#slot(q, p, dtype));
      reduceInto(out, slots, from, to, op);
    }
    return out;
  }

  #header(rank: number, parity: number): Int32Array {
    const at = headerAt(this.worldSize, rank, parity);
    return this.#control.subarray(at, at + HEADER_WORDS);
  }

  /**
   * The rounds of a collective over `data`: chunk by chunk, this rank's
   * piece of the chunk goes into its slot (when `send`), and `body` reads
   * the round's slots (parity `p`) before the next round.
   */
  async #eachChunk(
    call: CollectiveCall,
    data: TypedArray,
    deadline: number,
    body: (start: number, length: number, p: number) => unknown,
    send = true,
  ): Promise<void> {
    const per = this.#perRound(call.dtype);
    const chunks = Math.max(1, Math.ceil(data.length / per));
    for (let c = 0; c < chunks; c++) {
      const start = c * per;
      const length = Math.min(per, data.length - start);
      const fill = send
        ? (slot: TypedArray) => slot.set(data.subarray(start, start + length))
        : undefined;
      const p = await this.#exchange(call, c === 0, deadline, fill);
      await body(start, length, p);
    }
  }

  /** Elements of `dtype` one round moves per rank. */
  #perRound(dtype: DType | null): number {
    return Math.floor(this.#shared.chunkBytes / (dtype === "float64" ? 8 : 4));
  }

  /**
   * One round: writes the header and (through `fill`) this rank's slot,
   * arrives, and waits for every rank. Returns the round's parity. The
   * first round of a call compares every rank's header.
   */
  async #exchange(
    call: CollectiveCall,
    first: boolean,
    deadline: number,
    fill?: (slot: TypedArray) => void,
  ): Promise<number> {
    if (this.#left) {
      throw new DistributedError(
        `${describeHeader(call.header)}: this rank (${this.rank}) already left the process group`,
        [this.rank],
      );
    }
    // Rounds live in int32 words: they wrap, and are compared as differences.
    const round = this.#round = (this.#round + 1) | 0;
    const parity = round & 1;
    this.#header(this.rank, parity).set(call.header);
    if (fill && call.dtype) fill(this.#slot(this.rank, parity, call.dtype));
    Atomics.store(this.#control, phaseAt(this.rank), round);
    Atomics.notify(this.#control, phaseAt(this.rank));
    await this.#waitAll(call, round, deadline);
    if (first) {
      const headers = [];
      for (let q = 0; q < this.worldSize; q++) headers.push(this.#header(q, parity).slice());
      checkHeaders(headers);
    }
    return parity;
  }

  /** Waits until every other rank's word `wordAt(q)` (its phase by default) has reached `round`. */
  async #waitAll(
    call: CollectiveCall,
    round: number,
    deadline: number,
    wordAt: (q: number) => number = phaseAt,
  ): Promise<void> {
    const control = this.#control;
    for (let q = 0; q < this.worldSize; q++) {
      if (q === this.rank) continue;
      for (;;) {
        // The status first: a rank publishes its phase before it leaves, so
        // one that left after joining this round is seen as joined.
        const status = this.#status(q);
        const seen = Atomics.load(control, wordAt(q));
        if (reached(seen, round)) break;
        if (status !== RankStatus.Running) this.#checkPeer(call, q);
        const left = deadline - performance.now();
        if (left <= 0) {
          if (wordAt === phaseAt) throw this.#timeout(call, round);
          throw new DistributedError(
            `${
              describeHeader(call.header)
            } on rank ${this.rank}: rank ${q} joined but did not finish summing its half within ${this.#timeoutMs} ms: it hung or died`,
            [q],
          );
        }
        const wait = Atomics.waitAsync(control, wordAt(q), seen, this.#waitCap(left));
        if (wait.async) await wait.value;
      }
    }
  }

  #checkPeer(call: CollectiveCall, q: number): void {
    const status = this.#status(q);
    if (status === RankStatus.Failed) {
      const message = this.#world
        ? failureMessage(this.#world.shared, this.#world.members[q])
        : failureMessage(this.#shared, q);
      throw new DistributedError(
        `${describeHeader(call.header)} on rank ${this.rank}: rank ${q} failed: ${message}`,
        [q],
      );
    }
    if (status === RankStatus.Left) {
      throw new DistributedError(
        `${
          describeHeader(call.header)
        } on rank ${this.rank}: rank ${q} left the process group (its main returned or it called destroyProcessGroup) without joining this collective`,
        [q],
      );
    }
  }

  #timeout(call: CollectiveCall, round: number): DistributedError {
    const late: number[] = [];
    const where: string[] = [];
    for (let q = 0; q < this.worldSize; q++) {
      const phase = Atomics.load(this.#control, phaseAt(q));
      if (q === this.rank || reached(phase, round)) continue;
      late.push(q);
      where.push(
        `rank ${q} is at ${
          phase === 0 ? "no collective yet" : describeProgress(this.#header(q, phase & 1))
        }`,
      );
    }
    return new DistributedError(
      `${describeHeader(call.header)} on rank ${this.rank}: ${
        late.length === 1 ? "rank" : "ranks"
      } ${late.join(", ")} did not join within ${this.#timeoutMs} ms (${
        where.join("; ")
      }): a rank hung, died, or skipped this collective`,
      late,
    );
  }

  async allReduce(call: CollectiveCall, data: TypedArray): Promise<void> {
    const deadline = performance.now() + this.#timeoutMs;
    const n = this.worldSize;
    const dtype = call.dtype!;
    const op = call.op ?? "sum";
    await this.#eachChunk(call, data, deadline, async (start, length, a) => {
      if (n <= DIRECT_REDUCE_RANKS) {
        // Every rank combines the whole chunk itself, in rank order (the
        // same bits everywhere): one round instead of two.
        data.set(this.#combine(a, 0, length, op, dtype).subarray(0, length), start);
        return;
      }
      const shares = chunkSizes(length, n);
      const offsets = shares.map((_, q) => shares.slice(0, q).reduce((x, y) => x + y, 0));
      // This rank's share goes to its slot of the next round.
      const s = offsets[this.rank];
      this.#combine(a, s, s + shares[this.rank], op, dtype);
      const b = await this.#exchange(call, false, deadline);
      for (let q = 0; q < n; q++) {
        const from = offsets[q];
        data.set(this.#slot(q, b, dtype).subarray(from, from + shares[q]), start + from);
      }
    });
  }

  /**
   * Chunk by chunk as `allReduce` with a few ranks: `fill` writes straight
   * into this rank's slot and `take` reads the combined slot. Many ranks:
   * through a host array.
   */
  async allReduceVia(
    call: CollectiveCall,
    numel: number,
    fill: AllReduceFill,
    take: AllReduceTake,
  ): Promise<void> {
    const dtype = call.dtype!;
    if (this.worldSize > DIRECT_REDUCE_RANKS) {
      return allReduceViaHost(this, call, numel, fill, take);
    }
    const deadline = performance.now() + this.#timeoutMs;
    const per = this.#perRound(dtype);
    const chunks = Math.max(1, Math.ceil(numel / per));
    for (let c = 0; c < chunks; c++) {
      const start = c * per;
      const length = Math.min(per, numel - start);
      // The slot this round writes (its parity is the next round's) is free:
      // every rank has arrived at the round before, so all have finished
      // reading the one before that, which used it.
      await fill(this.#slot(this.rank, (this.#round + 1) & 1, dtype).subarray(0, length), start);
      const p = await this.#exchange(call, c === 0, deadline);
      const op = call.op ?? "sum";
      const simdSum = this.#reducer && dtype === "float32" && (op === "sum" || op === "avg");
      if (this.worldSize !== 2 || !simdSum) {
        take(this.#combine(p, 0, length, op, dtype).subarray(0, length), start);
        continue;
      }
      // Two ranks: each sums half, in place in its own slot of this round
      // (the other rank reads only the other half of it, and the next
      // round fills the other parity), says so, and takes the other half
      // from the other rank's slot once summed: half the sums and no
      // second round (a DDP step of 2 cpu ranks: 0.5-2.7% more samples/s).
      // In place is safe for two SIMD sources only (a third would be read
      // after the sum of the first two overwrote it; the scalar loop
      // copies rank 0's values over the output first).
      // Rank 0 sums the first ceil(length / 2) elements, rank 1 the rest.
      const middle = Math.ceil(length / 2);
      const [lo, hi] = this.rank === 0 ? [0, middle] : [middle, length];
      const own = this.#combine(p, lo, hi, op, dtype, p);
      Atomics.store(this.#control, shareDoneAt(2, this.rank), this.#round);
      Atomics.notify(this.#control, shareDoneAt(2, this.rank));
      take(own.subarray(lo, hi), start + lo);
      await this.#waitAll(call, this.#round, deadline, (q) => shareDoneAt(2, q));
      const other = this.rank === 0 ? [middle, length] : [0, middle];
      take(this.#slot(1 - this.rank, p, dtype).subarray(other[0], other[1]), start + other[0]);
    }
  }

  async broadcast(call: CollectiveCall, data: TypedArray): Promise<void> {
    const src = call.src ?? 0;
    await this.#eachChunk(
      call,
      data,
      performance.now() + this.#timeoutMs,
      (start, length, p) => {
        if (this.rank !== src) data.set(this.#slot(src, p, call.dtype!).subarray(0, length), start);
      },
      this.rank === src,
    );
  }

  /** One array of every rank's data ({@link allGatherInto}), returned as its parts. */
  async allGather(call: CollectiveCall, data: TypedArray): Promise<TypedArray[]> {
    const m = data.length;
    const all = new (data.constructor as Float32ArrayConstructor)(m * this.worldSize);
    await this.allGatherInto(call, data, all);
    return Array.from({ length: this.worldSize }, (_, q) => all.subarray(q * m, (q + 1) * m));
  }

  /**
   * Chunk by chunk: each rank writes its piece into its slot and copies the
   * others' straight into `out`, which needs no array of the call's own
   * (fresh arrays of the whole size per call made a gather of S bytes cost
   * 5-10x an all-reduce of S bytes: page faults).
   */
  async allGatherInto(call: CollectiveCall, data: TypedArray, out: TypedArray): Promise<void> {
    const m = data.length;
    const dtype = call.dtype!;
    await this.#eachChunk(call, data, performance.now() + this.#timeoutMs, (start, length, p) => {
      for (let q = 0; q < this.worldSize; q++) {
        if (q !== this.rank) out.set(this.#slot(q, p, dtype).subarray(0, length), q * m + start);
      }
    });
    const own = out.subarray(this.rank * m, (this.rank + 1) * m);
    if (own.buffer !== data.buffer || own.byteOffset !== data.byteOffset) own.set(data);
  }

  async barrier(call: CollectiveCall): Promise<void> {
    await this.#exchange(call, true, performance.now() + this.#timeoutMs);
  }

  /** {@link reduceScatterInto} a new array. */
  async reduceScatter(call: CollectiveCall, data: TypedArray): Promise<TypedArray> {
    const out = new (data.constructor as Float32ArrayConstructor)(data.length / this.worldSize);
    await this.reduceScatterInto(call, data, out);
    return out;
  }

  /**
   * Chunk by chunk of the whole array, as `allReduce`'s rounds; each rank
   * combines (in rank order) only the elements of its own part: float32
   * with SIMD into its free slot of the next round, then copied out.
   */
  async reduceScatterInto(call: CollectiveCall, data: TypedArray, out: TypedArray): Promise<void> {
    const deadline = performance.now() + this.#timeoutMs;
    const n = this.worldSize;
    const dtype = call.dtype!;
    const op = call.op ?? "sum";
    const part = data.length / n;
    const lo = this.rank * part;
    const hi = lo + part;
    await this.#eachChunk(call, data, deadline, (start, length, p) => {
      const from = Math.max(lo, start);
      const to = Math.min(hi, start + length);
      if (from >= to) return;
      if (dtype === "float32" && this.#reducer) {
        const combined = this.#combine(p, from - start, to - start, op, dtype);
        out.set(combined.subarray(from - start, to - start), from - lo);
        return;
      }
      const sources = [];
      for (let q = 0; q < n; q++) {
        sources.push(this.#slot(q, p, dtype).subarray(from - start, to - start));
      }
      reduceInto(out.subarray(from - lo, to - lo), sources, 0, to - from, op);
    });
  }

  /**
   * A round of its own phases (the same two-slot scheme as the others),
   * waited for with a blocking `Atomics.wait` (a Worker may block).
   */
  allGatherSync(call: CollectiveCall, data: Int32Array): Int32Array[] {
    if (this.#left) {
      throw new DistributedError(
        `${describeHeader(call.header)}: this rank (${this.rank}) already left the process group`,
        [this.rank],
      );
    }
    if (data.length > SYNC_WORDS) {
      throw new RangeError(
        `${describeHeader(call.header)}: at most ${SYNC_WORDS} words, got ${data.length}`,
      );
    }
    const n = this.worldSize;
    const sync = this.#sync;
    const deadline = performance.now() + this.#timeoutMs;
    const round = this.#syncRound = (this.#syncRound + 1) | 0;
    const parity = round & 1;
    const mine = syncSlotAt(n, this.rank, parity);
    sync.set(call.header, mine);
    sync.set(data, mine + HEADER_WORDS);
    Atomics.store(sync, this.rank, round);
    Atomics.notify(sync, this.rank);
    for (let q = 0; q < n; q++) {
      if (q === this.rank) continue;
      for (;;) {
        // The status first, as in #waitAll.
        const status = this.#status(q);
        const seen = Atomics.load(sync, q);
        if (reached(seen, round)) break;
        if (status !== RankStatus.Running) this.#checkPeer(call, q);
        const left = deadline - performance.now();
        if (left <= 0) {
          throw new DistributedError(
            `${
              describeHeader(call.header)
            } on rank ${this.rank}: rank ${q} did not join within ${this.#timeoutMs} ms (it is at ${
              seen === 0
                ? "no such call yet"
                : describeProgress(sync.subarray(syncSlotAt(n, q, seen & 1)))
            }): a rank hung, died, or skipped this collective`,
            [q],
          );
        }
        Atomics.wait(sync, q, seen, Math.min(left, SYNC_LOOK_MS));
      }
    }
    const headers: Int32Array[] = [];
    const parts: Int32Array[] = [];
    for (let q = 0; q < n; q++) {
      const at = syncSlotAt(n, q, parity);
      headers.push(sync.slice(at, at + HEADER_WORDS));
      parts.push(sync.slice(at + HEADER_WORDS, at + HEADER_WORDS + data.length));
    }
    checkHeaders(headers);
    return parts;
  }

  /**
   * Rounds over `total` elements (the same on every rank): in each, `fill`
   * (when given) puts this rank's piece of the chunk into its slot, and
   * `body` reads the round's slots (parity `p`) before the next round.
   */
  async #rounds(
    call: CollectiveCall,
    total: number,
    body: (start: number, length: number, p: number) => void,
    fill?: (slot: TypedArray, start: number, length: number) => void,
  ): Promise<void> {
    const deadline = performance.now() + this.#timeoutMs;
    const per = this.#perRound(call.dtype);
    const chunks = Math.max(1, Math.ceil(total / per));
    for (let c = 0; c < chunks; c++) {
      const start = c * per;
      const length = Math.min(per, total - start);
      const p = await this.#exchange(
        call,
        c === 0,
        deadline,
        fill && ((slot) => fill(slot, start, length)),
      );
      body(start, length, p);
    }
  }

  /** `data`'s chunk `[start, start + length)` into a slot. */
  static #send(data: TypedArray) {
    return (slot: TypedArray, start: number, length: number) =>
      slot.set(data.subarray(start, start + length));
  }

  /**
   * Copies what rank `q`'s slot holds of the elements `[lo, lo + size)` of
   * the round's chunk `[start, start + length)` into `out` from `at` on.
   */
  #copyPart(
    q: number,
    p: number,
    dtype: DType,
    range: { start: number; length: number; lo: number; size: number },
    out: TypedArray,
    at: number,
  ): void {
    const { start, length, lo, size } = range;
    const from = Math.max(lo, start);
    const to = Math.min(lo + size, start + length);
    if (from >= to) return;
    out.set(this.#slot(q, p, dtype).subarray(from - start, to - start), at + from - lo);
  }

  /** Every rank writes its whole array, chunk by chunk; each copies out the parts meant for it. */
  async allToAll(call: CollectiveCall, data: TypedArray): Promise<TypedArray> {
    const n = this.worldSize;
    const part = data.length / n;
    const out = new (data.constructor as Float32ArrayConstructor)(data.length);
    const lo = this.rank * part;
    await this.#rounds(call, data.length, (start, length, p) => {
      for (let q = 0; q < n; q++) {
        this.#copyPart(q, p, call.dtype!, { start, length, lo, size: part }, out, q * part);
      }
    }, LocalBackend.#send(data));
    return out;
  }

  async gather(call: CollectiveCall, data: TypedArray): Promise<TypedArray[] | null> {
    const n = this.worldSize;
    const mine = this.rank === call.dst;
    const parts = mine
      ? Array.from(
        { length: n },
        () => new (data.constructor as Float32ArrayConstructor)(data.length),
      )
      : null;
    await this.#rounds(call, data.length, (start, length, p) => {
      if (!parts) return;
      for (let q = 0; q < n; q++) {
        parts[q].set(this.#slot(q, p, call.dtype!).subarray(0, length), start);
      }
    }, LocalBackend.#send(data));
    return parts;
  }

  async scatter(call: CollectiveCall, data: TypedArray, out: TypedArray): Promise<void> {
    const src = call.src ?? 0;
    const range = (start: number, length: number) => ({
      start,
      length,
      lo: this.rank * out.length,
      size: out.length,
    });
    await this.#rounds(
      call,
      out.length * this.worldSize,
      (start, length, p) => this.#copyPart(src, p, call.dtype!, range(start, length), out, 0),
      this.rank === src ? LocalBackend.#send(data) : undefined,
    );
  }

  async reduce(call: CollectiveCall, data: TypedArray): Promise<void> {
    const n = this.worldSize;
    await this.#rounds(call, data.length, (start, length, p) => {
      if (this.rank !== call.dst) return;
      const sources = [];
      for (let q = 0; q < n; q++) sources.push(this.#slot(q, p, call.dtype!));
      reduceInto(data.subarray(start, start + length), sources, 0, length, call.op ?? "sum");
    }, LocalBackend.#send(data));
  }

  /**
   * Posts a copy of `data` to rank `call.dst` (so the sender never waits to
   * post: two ranks may both send first), then waits for the receiver's
   * acknowledgement, which carries its error when the two calls disagree.
   */
  async send(call: CollectiveCall, data: TypedArray): Promise<void> {
    const what = `${describeHeader(call.header)} on rank ${this.rank}`;
    this.#checkOpen(call);
    const mailbox = this.#channels(what);
    const dst = call.dst!;
    const peer = this.#worldRank(dst);
    const copy = data.slice();
    mailbox.post(peer, { key: this.#letterKey("message", call), header: call.header, data: copy }, [
      copy.buffer,
    ]);
    const ack = await mailbox.take(
      peer,
      this.#letterKey("ack", call),
      performance.now() + this.#timeoutMs,
      this.#gone,
      {
        gone: (why) =>
          new DistributedError(`${what}: rank ${dst} ${why} before receiving it`, [dst]),
        late: () =>
          new DistributedError(
            `${what}: rank ${dst} did not receive it within ${this.#timeoutMs} ms (no recv from rank ${this.rank} with tag ${
              call.tag ?? 0
            } there: it hung, received with another source or tag, or its recv waits in stream order behind one of its own that nothing sends)`,
            [dst],
          ),
      },
    );
    if (ack.error) throw new DistributedError(ack.error.message, ack.error.ranks);
  }

  /** Takes the next message of `call.tag` from rank `call.src`, checks it, and acknowledges it. */
  async recv(call: CollectiveCall, data: TypedArray): Promise<void> {
    const what = `${describeHeader(call.header)} on rank ${this.rank}`;
    this.#checkOpen(call);
    const mailbox = this.#channels(what);
    const src = call.src!;
    const peer = this.#worldRank(src);
    const letter = await mailbox.take(
      peer,
      this.#letterKey("message", call),
      performance.now() + this.#timeoutMs,
      this.#gone,
      {
        gone: (why) =>
          new DistributedError(`${what}: rank ${src} ${why} without sending it`, [src]),
        late: () => {
          const waiting = mailbox.pending(peer).flatMap((l) =>
            l.header ? [describeHeader(l.header)] : []
          );
          return new DistributedError(
            `${what}: nothing came from rank ${src} with tag ${
              call.tag ?? 0
            } within ${this.#timeoutMs} ms (${
              waiting.length > 0
                ? `unreceived from it: ${waiting.join("; ")}`
                : "nothing else from it waits either"
            }): it hung, sent with another tag, or its send waits in stream order behind a recv of its own`,
            [src],
          );
        },
      },
    );
    const ack = this.#letterKey("ack", call);
    try {
      checkPair(letter.header!, call.header, src, this.rank);
    } catch (error) {
      const ranks = error instanceof DistributedError ? [...error.ranks] : [];
      mailbox.post(peer, { key: ack, error: { message: (error as Error).message, ranks } });
      throw error;
    }
    data.set(letter.data!);
    mailbox.post(peer, { key: ack, error: null });
  }

  /** The key of this group's letters of `kind` for `call`'s tag. */
  #letterKey(kind: "message" | "ack", call: CollectiveCall): string {
    return `${kind} ${this.#letters} ${call.tag ?? 0}`;
  }

  #checkOpen(call: CollectiveCall): void {
    if (this.#left) {
      throw new DistributedError(
        `${describeHeader(call.header)}: this rank (${this.rank}) already left the process group`,
        [this.rank],
      );
    }
  }

  destroy(): void {
    if (this.#left) return;
    this.#left = true;
    markRank(this.#shared, this.rank, RankStatus.Left);
  }
}

/** What `spawn` handed a rank's Worker. */
export interface LocalLaunch {
  /** The group's shared memory. */
  readonly shared: LocalShared;
  /** This rank. */
  readonly rank: number;
  /** Channels to every other rank. */
  readonly mailbox: Mailbox;
  /** Whether a group was made on it (its shared words then hold that group's rounds). */
  used: boolean;
}

// What `spawn` handed this Worker, read by the "local" factory.
let launched: LocalLaunch | null = null;

/** @internal Called by the Worker bootstrap before `initProcessGroup`. */
export function setLocalLaunch(
  shared: LocalShared,
  rank: number,
  ports: readonly (MessagePort | null)[],
): void {
  launched = { shared, rank, mailbox: new Mailbox(ports), used: false };
}

/** @internal The launch of this Worker, or null outside a spawned rank. */
export function localLaunch(): LocalLaunch | null {
  return launched;
}
