/**
 * The `"tcp"` process group (PyTorch's `gloo` over TCP): ranks are
 * processes on one machine or many, started by any launcher (multigrad's
 * `run.ts`, torchrun-style; Slurm; by hand) with `init_method="env://"`'s
 * variables (`MASTER_ADDR`, `MASTER_PORT`, `RANK`, `WORLD_SIZE`), or with
 * `initMethod: "tcp://host:port"`, or a `store` of the caller's.
 *
 * Rendezvous: rank 0 hosts a {@link TCPStore} at the master address (when
 * no store is given); every rank listens on a port the system picks,
 * publishes `host:port` in the store, and connects to every lower rank
 * (a full mesh, `tcp_mesh.ts`); it waits `timeoutMs` for them, but at
 * least 10 s. No MPI, no FFI: only `--allow-net` (and
 * `--allow-env` for `env://`).
 *
 * Collectives: every rank sends its call header, with its data, to every
 * other rank, and compares all the headers before it uses any data (a
 * mismatch is the same error on every rank, naming each rank's call). An
 * all-reduce of at least {@link RING_BYTES} among 3+ ranks first exchanges
 * only headers, then runs a ring reduce-scatter and all-gather
 * (`tcp_ring.ts`); between 2 ranks each sends its array to the other in
 * segments, combined as they arrive (the first carries the header; DDP's
 * float32 buckets land in a WebAssembly area and are summed with SIMD);
 * smaller ones combine every rank's array in rank order, on every rank.
 * Large receives land in memory the call holds (no buffer per message). A rank
 * whose program throws tells the others before it exits; a rank that dies
 * closes its connections; either fails the others' next receive from it at
 * once, naming it. A rank that hangs fails the others at `timeoutMs`.
 *
 * The blocking `allGatherSync` (`DistributedDataParallel`'s
 * `findUnusedParameters`, FSDP's shape check) runs on a Worker per rank
 * with connections of its own, while the main thread waits in
 * `Atomics.wait` (`tcp_sync.ts`): a socket cannot be waited on
 * synchronously in Deno.
 *
 * Deliberate difference from the `"mpi"` backend: a failed collective does
 * not end the process (the launcher ends the job when a rank exits with an
 * error).
 * @module
 */

import type { TypedArray } from "../dtype.ts";
import { bytesOf, viewAs } from "./bytes.ts";
import {
  type AllReduceFill,
  type AllReduceTake,
  allReduceViaHost,
  checkHeaders,
  checkPair,
  type CollectiveCall,
  describeHeader,
  DistributedError,
  HEADER_WORDS,
  type ProcessGroupBackend,
  type ProcessGroupInit,
  reduceInto,
  SYNC_WORDS,
} from "./backend.ts";
import type { Store } from "./store.ts";
import { TCPStore } from "./tcp_store.ts";
import { Mesh, type Message, readFull, writeAll } from "./tcp_mesh.ts";
import { pairAllReduce, ringAllReduce, type RingCombine, ringScratchBytes } from "./tcp_ring.ts";
import { SyncLink } from "./tcp_sync.ts";
import { ReduceArea, ReduceAreas, RingArea } from "./wasm_reduce.ts";

/**
 * All-reduces of at least this many bytes go around the ring (3+ ranks),
 * or in segments both ways at once (2 ranks).
 */
export const RING_BYTES = 256 * 1024;
/**
 * The segment of a two-rank all-reduce. Each message costs far more than
 * combining overlaps: on loopback a 2.7 MB float32 all-reduce took 3.6 ms
 * in 512 KiB segments, 2.5 ms as one (a 26 MB one, 24.8 and 22.9 ms in
 * 512 KiB and 4 MiB segments); the segments still bound how much lands
 * before combining starts.
 */
const PAIR_SEGMENT_BYTES = 4 * 1024 * 1024;
/** How many lengths of reduce areas are kept (DDP's buckets: a few). */
const KEPT_AREAS = 4;
/** How long a failing rank waits for its last message to the others to be written. */
const FAILURE_GRACE_MS = 500;
/** The shortest wait of the rendezvous for the other ranks (see `tcpBackend`). */
const RENDEZVOUS_MIN_MS = 10_000;
/** How long `destroy` waits for its goodbyes to be written. */
const BYE_GRACE_MS = 1000;
/** The first 4 bytes a connecting rank sends ("mgtc"), then its rank and the world size. */
const HELLO_MAGIC = 0x6374676d;

const live = new Set<Mesh>();
/** The blocking all-gather's Workers of the live groups (told of a failure too). */
const liveLinks = new Set<SyncLink>();
let listening = false;

function envVar(name: string): string | undefined {
  try {
    return Deno.env.get(name);
  } catch {
    return undefined;
  }
}

function onUncaught(event: ErrorEvent | PromiseRejectionEvent): void {
  if (live.size === 0) return;
  const error = "error" in event ? event.error : (event as PromiseRejectionEvent).reason;
  const text = error instanceof Error ? (error.stack ?? error.message) : String(error);
  const meshes = [...live];
  const links = [...liveLinks];
  console.error(`multigrad tcp rank ${meshes[0].rank}: uncaught ${text}`);
  // Tell the others before exiting, so they name this rank and its error.
  event.preventDefault();
  live.clear();
  liveLinks.clear();
  // A rank failing because another did leaves last, so that a launcher
  // (which names the first rank to exit with an error) names the cause.
  const after = error instanceof DistributedError ? FAILURE_GRACE_MS : 0;
  Promise.all([
    ...meshes.map((m) => m.announceFailure(text, FAILURE_GRACE_MS)),
    ...links.map((l) => l.announceFailure(text, FAILURE_GRACE_MS)),
  ])
    .then(() => new Promise((resolve) => setTimeout(resolve, after)))
    .finally(() => Deno.exit(1));
}

function listenForFailures(): void {
  if (listening) return;
  listening = true;
  globalThis.addEventListener("error", onUncaught);
  globalThis.addEventListener("unhandledrejection", onUncaught);
}

function makeLike(like: TypedArray, length = like.length): TypedArray {
  return new (like.constructor as Float32ArrayConstructor)(length);
}

const NOTHING = new Uint8Array(0);

/** This rank's end of a `"tcp"` group (the whole group, or a `newGroup` of it over the same mesh). */
class TcpBackend implements ProcessGroupBackend {
  readonly rank: number;
  readonly worldSize: number;
  readonly #mesh: Mesh;
  /** The blocking all-gather's Worker (null for one rank). */
  readonly #link: SyncLink | null;
  /** The whole group's rank of each of this group's ranks. */
  readonly members: readonly number[];
  /** Channel names' prefix: this group's, apart from its parent's and siblings'. */
  readonly #key: string;
  readonly #timeoutMs: number;
  /** Whether this group is the whole one (its `destroy` closes the mesh). */
  readonly #world: boolean;
  /** Runs at the whole group's destroy (closing a store it made). */
  readonly #onDestroy: () => Promise<void>;
  readonly #children: TcpBackend[] = [];
  /**
   * The ring's receive buffer, kept between all-reduces (a fresh one per
   * call cost more than the copy into it: new memory is zeroed and
   * faulted in); null while a call holds it.
   */
  #scratch: Uint8Array | null = new Uint8Array(0);
  /** WebAssembly areas of two ranks' float32 all-reduces (see {@link allReduceVia}). */
  readonly #pairAreas = new ReduceAreas((length) => ReduceArea.create(2, length), KEPT_AREAS);
  /** The same for rings of 3+ ranks. */
  readonly #ringAreas = new ReduceAreas(
    (length) => RingArea.create(length, this.worldSize),
    KEPT_AREAS,
  );
  #closed = false;

  constructor(
    mesh: Mesh,
    link: SyncLink | null,
    members: readonly number[],
    key: string,
    timeoutMs: number,
    onDestroy: (() => Promise<void>) | null,
  ) {
    this.#mesh = mesh;
    this.#link = link;
    this.members = members;
    this.rank = members.indexOf(mesh.rank);
    this.worldSize = members.length;
    this.#key = key;
    this.#timeoutMs = timeoutMs;
    this.#world = onDestroy !== null;
    this.#onDestroy = onDestroy ?? (() => Promise.resolve());
  }

  #checkOpen(call: CollectiveCall): void {
    if (this.#closed || this.#mesh.closed) {
      throw new DistributedError(
        `${describeHeader(call.header)}: this rank (${this.rank}) already left the process group`,
        [this.rank],
      );
    }
  }

  /** The error of a call whose `late` ranks (of this group) did not arrive in time. */
  #lateError(call: CollectiveCall, late: readonly number[]): DistributedError {
    return new DistributedError(
      `${describeHeader(call.header)} on rank ${this.rank}: ${
        late.length === 1 ? "rank" : "ranks"
      } ${
        late.join(", ")
      } did not join within ${this.#timeoutMs} ms: a rank hung, died, or skipped this collective`,
      late,
    );
  }

  /** A receive's failure, said from this call and group's point of view. */
  #explain(call: CollectiveCall, q: number, error: unknown): unknown {
    if (!(error instanceof DistributedError) || !this.#mesh.isGone(this.members[q])) return error;
    const inner = this.#mesh.goneError(this.members[q]).message
      .replace(
        /^rank \d+/,
        `rank ${q}${this.#world ? "" : ` (rank ${this.members[q]} of the whole group)`}`,
      );
    return new DistributedError(`${describeHeader(call.header)} on rank ${this.rank}: ${inner}`, [
      q,
    ]);
  }

  /** Sends `data` to rank q with `call`'s header; a failed write is said as a failed receive is. */
  #send(call: CollectiveCall, q: number, channel: string, data: Uint8Array): Promise<void> {
    return this.#mesh.send(this.members[q], `${this.#key}${channel}`, call.header, data)
      .catch((error) => {
        throw this.#explain(call, q, error);
      });
  }

  #receive(
    call: CollectiveCall,
    q: number,
    channel: string,
    deadline: number,
    late: () => Error,
    into: Uint8Array | null = null,
    direct = false,
  ): Promise<Message> {
    return this.#mesh.receive(
      this.members[q],
      `${this.#key}${channel}`,
      deadline,
      late,
      into,
      direct,
    )
      .catch((error) => {
        throw this.#explain(call, q, error);
      });
  }

  /**
   * One meeting: sends the header and `payload(q)` to every other rank q,
   * receives each one's header and data, and checks all the headers (the
   * same error on every rank) before any data is used. Returns the
   * received data by rank (this rank's: empty).
   */
  async #meet(
    call: CollectiveCall,
    payload: (q: number) => Uint8Array,
    deadline = performance.now() + this.#timeoutMs,
  ): Promise<Uint8Array[]> {
    this.#checkOpen(call);
    const n = this.worldSize;
    const got: (Message | null)[] = Array.from({ length: n }, () => null);
    if (n === 1) return [NOTHING];
    const peers: number[] = [];
    for (let q = 0; q < n; q++) if (q !== this.rank) peers.push(q);
    const late = () => this.#lateError(call, peers.filter((q) => got[q] === null));
    await this.#settled(
      "c",
      Promise.all([
        ...peers.map((q) => this.#send(call, q, "c", payload(q))),
        ...peers.map(async (q) => {
          got[q] = await this.#receive(call, q, "c", deadline, late);
        }),
      ]),
    );
    checkHeaders(got.map((m, q) => q === this.rank ? call.header : m!.header));
    return got.map((m) => m?.data ?? NOTHING);
  }

  /** `work`, after whose failure the receives still waiting on `channel` are cancelled. */
  async #settled<T>(channel: string, work: Promise<T>): Promise<T> {
    try {
      return await work;
    } catch (error) {
      this.#mesh.cancel(`${this.#key}${channel}`, error as Error);
      throw error;
    }
  }

  /** Checks that rank q's `bytes` hold `expected` bytes (headers agree, so only a bug could differ). */
  #sized(call: CollectiveCall, q: number, bytes: Uint8Array, expected: number): Uint8Array {
    if (bytes.length !== expected) {
      throw new DistributedError(
        `${
          describeHeader(call.header)
        } on rank ${this.rank}: rank ${q} sent ${bytes.length} bytes, ${expected} expected`,
        [q],
      );
    }
    return bytes;
  }

  async allReduce(call: CollectiveCall, data: TypedArray): Promise<void> {
    const n = this.worldSize;
    if (n === 1) return;
    const op = call.op ?? "sum";
    const area = data instanceof Float32Array ? this.#simdArea(call, data.length) : null;
    if (area) {
      // Two copies of the array cost less than the scalar loop the SIMD sum replaces.
      const fill = (into: TypedArray) => Promise.resolve(into.set(data));
      return this.#reduceInArea(call, area, fill, (from) => data.set(from));
    }
    if (data.byteLength >= RING_BYTES) {
      const need = n === 2 ? data.byteLength : ringScratchBytes(data, n);
      let scratch = this.#scratch;
      this.#scratch = null;
      if (!scratch || scratch.length < need) scratch = new Uint8Array(need);
      try {
        await this.#largeAllReduce(call, data, scratch);
        this.#scratch = scratch;
      } catch (error) {
        // A read under way may still land in it (see `Mesh.receive`'s `direct`).
        this.#scratch = new Uint8Array(0);
        throw error;
      }
      return;
    }
    const got = await this.#meet(call, () => bytesOf(data));
    const parts = got.map((bytes, q) =>
      q === this.rank ? data.slice() : viewAs(data, this.#sized(call, q, bytes, data.byteLength))
    );
    reduceInto(data, parts, 0, data.length, op);
  }

  /**
   * An all-reduce of at least {@link RING_BYTES}: around the ring (3+
   * ranks), or both ways at once in segments (2 ranks). Receives into
   * `scratch`. With `combine`, the sums of a WebAssembly area (see
   * `pairAllReduce` and `ringAllReduce`).
   */
  async #largeAllReduce(
    call: CollectiveCall,
    data: TypedArray,
    scratch: Uint8Array,
    combine?: { pair?: (from: number, to: number) => void; ring?: RingCombine },
  ): Promise<void> {
    const n = this.worldSize;
    const deadline = performance.now() + this.#timeoutMs;
    // Two ranks are each other's only neighbour: the first ring message
    // carries the header every rank checks (one message less).
    let checked = n > 2;
    if (checked) await this.#meet(call, () => NOTHING, deadline);
    else this.#checkOpen(call);
    const next = (this.rank + 1) % n;
    const previous = (this.rank + n - 1) % n;
    const late = () =>
      checked
        ? new DistributedError(
          `${
            describeHeader(call.header)
          } on rank ${this.rank}: every rank joined, but rank ${previous} did not send its part of the ring within ${this.#timeoutMs} ms: a rank died or hung`,
          [previous],
        )
        : this.#lateError(call, [previous]);
    const links = {
      sendNext: (chunk: TypedArray) => this.#send(call, next, "c", bytesOf(chunk)),
      receivePrevious: async (into: Uint8Array) => {
        // The caller drops the scratch after a failure: the mesh may read straight into it.
        const direct = into.buffer === scratch.buffer;
        const message = await this.#receive(call, previous, "c", deadline, late, into, direct);
        if (!checked) {
          checkHeaders(
            this.rank === 0 ? [call.header, message.header] : [message.header, call.header],
          );
          checked = true;
        }
        return this.#sized(call, previous, message.data, into.length);
      },
      release: (bytes: Uint8Array) => this.#mesh.recycle(bytes),
    };
    const op = call.op ?? "sum";
    await this.#settled(
      "c",
      n === 2
        ? pairAllReduce(
          data,
          this.rank,
          op,
          links,
          Math.max(1, Math.floor(PAIR_SEGMENT_BYTES / data.BYTES_PER_ELEMENT)),
          scratch,
          combine?.pair,
        )
        : ringAllReduce(data, this.rank, n, op, links, scratch, combine?.ring),
    );
  }

  /**
   * A float32 sum or average of at least {@link RING_BYTES} (DDP's
   * buckets) meets in a WebAssembly area: `fill` writes this rank's values
   * there, the other ranks' arrive straight into it, and each piece is
   * summed with SIMD as it lands (two ranks: both add in rank order, the
   * same bits; a ring: each chunk is summed by one rank and copied to the
   * others). `take` reads the result there. Otherwise through a host array.
   */
  allReduceVia(
    call: CollectiveCall,
    numel: number,
    fill: AllReduceFill,
    take: AllReduceTake,
  ): Promise<void> {
    const area = this.#simdArea(call, numel);
    if (!area) return allReduceViaHost(this, call, numel, fill, take);
    return this.#reduceInArea(call, area, fill, take);
  }

  /**
   * An area for `call` when it is a float32 sum or average of at least
   * {@link RING_BYTES} and WebAssembly SIMD is there (it fits one memory).
   */
  #simdArea(call: CollectiveCall, numel: number): ReduceArea | RingArea | null {
    const op = call.op ?? "sum";
    if (
      this.worldSize < 2 || call.dtype !== "float32" || (op !== "sum" && op !== "avg") ||
      numel * 4 < RING_BYTES
    ) return null;
    return this.worldSize === 2 ? this.#pairAreas.take(numel) : this.#ringAreas.take(numel);
  }

  async #reduceInArea(
    call: CollectiveCall,
    area: ReduceArea | RingArea,
    fill: AllReduceFill,
    take: AllReduceTake,
  ): Promise<void> {
    const op = call.op ?? "sum";
    // After a failure the area is not reused: a read under way may still land in it.
    if (area instanceof ReduceArea) {
      const own = area.part(this.rank);
      await fill(own, 0);
      await this.#largeAllReduce(call, own, bytesOf(area.part(1 - this.rank)), {
        pair: (from, to) => area.reduceRange(op, from, to),
      });
      take(area.result(), 0);
      this.#pairAreas.giveBack(area);
      return;
    }
    await fill(area.data, 0);
    const n = this.worldSize;
    await this.#largeAllReduce(call, area.data, bytesOf(area.scratch), {
      ring: (into, theirs, last) =>
        area.accumulate(into as Float32Array, theirs as Float32Array, op === "avg" && last ? n : 1),
    });
    take(area.data, 0);
    this.#ringAreas.giveBack(area);
  }

  async broadcast(call: CollectiveCall, data: TypedArray): Promise<void> {
    const src = call.src ?? 0;
    const got = await this.#meet(call, () => this.rank === src ? bytesOf(data) : NOTHING);
    if (this.rank !== src) bytesOf(data).set(this.#sized(call, src, got[src], data.byteLength));
  }

  async allGather(call: CollectiveCall, data: TypedArray): Promise<TypedArray[]> {
    const got = await this.#meet(call, () => bytesOf(data));
    return got.map((bytes, q) =>
      q === this.rank ? data.slice() : viewAs(data, this.#sized(call, q, bytes, data.byteLength))
    );
  }

  async barrier(call: CollectiveCall): Promise<void> {
    await this.#meet(call, () => NOTHING);
  }

  /**
   * Exchanged by this rank's sync Worker over its own connections (see
   * `tcp_sync.ts`) while this thread blocks; the headers are compared here,
   * so a mismatch is the same error on every rank.
   */
  allGatherSync(call: CollectiveCall, data: Int32Array): Int32Array[] {
    this.#checkOpen(call);
    if (data.length > SYNC_WORDS) {
      throw new RangeError(
        `${describeHeader(call.header)}: at most ${SYNC_WORDS} words, got ${data.length}`,
      );
    }
    if (this.worldSize === 1) return [data.slice()];
    const got = this.#link!.gather(
      this.members,
      this.rank,
      this.#key,
      call.header,
      data,
      this.#timeoutMs,
    );
    checkHeaders(got.headers);
    got.sizes.forEach((size, q) => {
      if (size !== data.length) {
        throw new DistributedError(
          `${
            describeHeader(call.header)
          } on rank ${this.rank}: rank ${q} sent ${size} words, ${data.length} expected`,
          [q],
        );
      }
    });
    return got.parts;
  }

  async reduceScatter(call: CollectiveCall, data: TypedArray): Promise<TypedArray> {
    const n = this.worldSize;
    const part = data.length / n;
    const piece = (a: TypedArray, q: number) => a.subarray(q * part, (q + 1) * part);
    const got = await this.#meet(call, (q) => bytesOf(piece(data, q)));
    const parts = got.map((bytes, q) =>
      q === this.rank
        ? piece(data, q)
        : viewAs(data, this.#sized(call, q, bytes, part * data.BYTES_PER_ELEMENT))
    );
    const out = makeLike(data, part);
    reduceInto(out, parts, 0, part, call.op ?? "sum");
    return out;
  }

  async allToAll(call: CollectiveCall, data: TypedArray): Promise<TypedArray> {
    const n = this.worldSize;
    const part = data.length / n;
    const piece = (a: TypedArray, q: number) => a.subarray(q * part, (q + 1) * part);
    const got = await this.#meet(call, (q) => bytesOf(piece(data, q)));
    const out = makeLike(data);
    for (let q = 0; q < n; q++) {
      if (q === this.rank) piece(out, q).set(piece(data, q));
      else {
        bytesOf(piece(out, q)).set(this.#sized(call, q, got[q], part * data.BYTES_PER_ELEMENT));
      }
    }
    return out;
  }

  async gather(call: CollectiveCall, data: TypedArray): Promise<TypedArray[] | null> {
    const dst = call.dst ?? 0;
    const got = await this.#meet(call, (q) => q === dst ? bytesOf(data) : NOTHING);
    if (this.rank !== dst) return null;
    return got.map((bytes, q) =>
      q === this.rank ? data.slice() : viewAs(data, this.#sized(call, q, bytes, data.byteLength))
    );
  }

  async scatter(call: CollectiveCall, data: TypedArray, out: TypedArray): Promise<void> {
    const src = call.src ?? 0;
    const part = out.length;
    const mine = this.rank === src;
    const piece = (q: number) => bytesOf(data.subarray(q * part, (q + 1) * part));
    const got = await this.#meet(call, (q) => mine ? piece(q) : NOTHING);
    if (mine) out.set(data.subarray(src * part, (src + 1) * part));
    else bytesOf(out).set(this.#sized(call, src, got[src], out.byteLength));
  }

  async reduce(call: CollectiveCall, data: TypedArray): Promise<void> {
    const parts = await this.gather(call, data);
    if (parts) reduceInto(data, parts, 0, data.length, call.op ?? "sum");
  }

  /**
   * Sends the header and the data to `call.dst` on the tag's channel and
   * waits for the receiver's acknowledgement (its header, and whether it
   * took the message).
   */
  async send(call: CollectiveCall, data: TypedArray): Promise<void> {
    this.#checkOpen(call);
    const dst = call.dst!;
    const tag = call.tag ?? 0;
    const deadline = performance.now() + this.#timeoutMs;
    await this.#send(call, dst, `m${tag}`, bytesOf(data));
    const ack = await this.#receive(
      call,
      dst,
      `a${tag}`,
      deadline,
      () => this.#lateError(call, [dst]),
    );
    checkPair(call.header, ack.header, this.rank, dst);
  }

  /** Takes the next message from `call.src` on the tag's channel, checks it, and acknowledges. */
  async recv(call: CollectiveCall, data: TypedArray): Promise<void> {
    this.#checkOpen(call);
    const src = call.src!;
    const tag = call.tag ?? 0;
    const deadline = performance.now() + this.#timeoutMs;
    const message = await this.#receive(
      call,
      src,
      `m${tag}`,
      deadline,
      () => this.#lateError(call, [src]),
    );
    // The sender checks the same pair of headers with the acknowledgement.
    await this.#send(call, src, `a${tag}`, NOTHING);
    checkPair(message.header, call.header, src, this.rank);
    bytesOf(data).set(this.#sized(call, src, message.data, data.byteLength));
  }

  /** A group of `ranks` over the same connections, on channels of its own. */
  newGroup(ranks: readonly number[], index: number): Promise<ProcessGroupBackend | null> {
    if (!ranks.includes(this.rank)) return Promise.resolve(null);
    const child = new TcpBackend(
      this.#mesh,
      this.#link,
      ranks.map((r) => this.members[r]),
      `${this.#key}${index}.`,
      this.#timeoutMs,
      null,
    );
    this.#children.push(child);
    return Promise.resolve(child);
  }

  async destroy(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (!this.#world) return;
    live.delete(this.#mesh);
    if (this.#link) liveLinks.delete(this.#link);
    await Promise.all([this.#mesh.close(BYE_GRACE_MS), this.#link?.close(BYE_GRACE_MS)]);
    await this.#onDestroy();
  }
}

/** `host:port` of `text`, as `tcp://host:port` (IPv6 hosts in brackets). */
function parseAddress(text: string, what: string): { host: string; port: number } {
  const match = /^(?:tcp:\/\/)?(\[[^\]]+\]|[^:/]+):(\d+)\/?$/.exec(text);
  const port = Number(match?.[2]);
  if (!match || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`initProcessGroup (tcp): ${what} must be host:port, got "${text}"`);
  }
  return { host: match[1].replace(/^\[|\]$/g, ""), port };
}

function isLoopback(host: string): boolean {
  return host === "localhost" || host.startsWith("127.") || host === "::1";
}

/**
 * The address other ranks reach this one at: `MULTIGRAD_TCP_HOST` when
 * set; 127.0.0.1 when the master is on this machine's loopback; else this
 * machine's first non-internal IPv4 address (or its host name).
 */
function ownHost(master: string): string {
  const chosen = envVar("MULTIGRAD_TCP_HOST");
  if (chosen) return chosen;
  if (isLoopback(master)) return "127.0.0.1";
  try {
    const found = Deno.networkInterfaces().find((i) =>
      i.family === "IPv4" && !i.address.startsWith("127.")
    );
    if (found) return found.address;
  } catch {
    // No --allow-sys: fall back to the host name.
  }
  return Deno.hostname();
}

/** `RANK`/`WORLD_SIZE` from the environment, or `given`; an error naming what is missing. */
function fromEnv(given: number | undefined, name: string): number {
  if (given !== undefined) return given;
  const text = envVar(name);
  const value = Number(text);
  if (text === undefined || !Number.isInteger(value) || value < 0) {
    throw new Error(
      `initProcessGroup (tcp): ${name === "RANK" ? "rank" : "worldSize"} not given and ${name} ${
        text === undefined ? "is not set" : `is not an integer: "${text}"`
      }: start the ranks with multigrad's run.ts (\`deno run -A jsr:@multigrad/core/run --nproc-per-node N train.ts\`), or set ${name}, or pass it to initProcessGroup`,
    );
  }
  return value;
}

/** Races `work` against `timeoutMs`, failing with `message()`. */
async function within<T>(work: Promise<T>, timeoutMs: number, message: () => string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new DistributedError(message(), [])), timeoutMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** What {@link tcpBackend} reads besides {@link ProcessGroupInit}. */
export interface TcpInit extends ProcessGroupInit {
  /** `"env://"` (default) or `"tcp://host:port"`. */
  readonly initMethod?: string;
  /** A store every rank shares (`init_process_group(store=...)`); the rendezvous then uses it. */
  readonly store?: Store;
}

/**
 * @internal The "tcp" factory: rendezvous through a store, then a full
 * mesh of connections.
 */
export async function tcpBackend(init: TcpInit): Promise<ProcessGroupBackend> {
  const rank = fromEnv(init.rank, "RANK");
  const worldSize = fromEnv(init.worldSize, "WORLD_SIZE");
  if (worldSize < 1 || rank >= worldSize) {
    throw new RangeError(
      `initProcessGroup (tcp): rank ${rank} is not in [0, ${worldSize}) (RANK, WORLD_SIZE)`,
    );
  }
  const timeoutMs = init.timeoutMs;
  // Processes start at different times (a Deno start took over 0.5 s on a
  // loaded machine): the rendezvous waits at least RENDEZVOUS_MIN_MS.
  const meetMs = Math.max(timeoutMs, RENDEZVOUS_MIN_MS);
  let store: Store;
  let master = "127.0.0.1";
  let ownStore: TCPStore | null = null;
  if (init.store) {
    store = init.store;
    const method = init.initMethod;
    if (method !== undefined) {
      throw new Error(
        `initProcessGroup (tcp): give either store or initMethod, not both (initMethod "${method}")`,
      );
    }
  } else {
    const method = init.initMethod ?? "env://";
    let address: { host: string; port: number };
    if (method === "env://") {
      const host = envVar("MASTER_ADDR");
      const port = envVar("MASTER_PORT");
      if (host === undefined || port === undefined) {
        throw new Error(
          `initProcessGroup (tcp): init method env:// needs MASTER_ADDR and MASTER_PORT (${
            host === undefined ? "MASTER_ADDR" : "MASTER_PORT"
          } is not set): start the ranks with multigrad's run.ts, or set them, or pass initMethod: "tcp://host:port" or a store`,
        );
      }
      address = parseAddress(`${host}:${port}`, "MASTER_ADDR:MASTER_PORT");
    } else if (method.startsWith("tcp://")) {
      address = parseAddress(method, "initMethod");
    } else {
      throw new Error(
        `initProcessGroup (tcp): initMethod must be "env://" or "tcp://host:port", got "${method}"`,
      );
    }
    master = address.host;
    try {
      ownStore = await TCPStore.create(address.host, address.port, {
        isMaster: rank === 0,
        worldSize,
        timeoutMs: meetMs,
      });
    } catch (error) {
      throw new DistributedError(
        `initProcessGroup (tcp) on rank ${rank}: rendezvous at ${address.host}:${address.port} failed: ${
          (error as Error).message
        }`,
        [],
        { cause: error },
      );
    }
    store = ownStore;
  }
  let link: SyncLink | null = null;
  try {
    const host = ownHost(master);
    // The blocking all-gather's Worker connects beside the main connections.
    const [meshed, linked] = await Promise.allSettled([
      connectMesh(store, rank, worldSize, host, meetMs),
      worldSize === 1
        ? null
        : SyncLink.start(store, rank, worldSize, host, listenHostOf(host), meetMs),
    ]);
    link = linked.status === "fulfilled" ? linked.value : null;
    if (meshed.status === "rejected" || linked.status === "rejected") {
      if (meshed.status === "fulfilled") await meshed.value.close(0);
      throw meshed.status === "rejected" ? meshed.reason : (linked as PromiseRejectedResult).reason;
    }
    const mesh = meshed.value;
    live.add(mesh);
    if (link) liveLinks.add(link);
    listenForFailures();
    const backend = new TcpBackend(
      mesh,
      link,
      Array.from({ length: worldSize }, (_, q) => q),
      "",
      timeoutMs,
      () => Promise.resolve(),
    );
    // Every rank has read every address: the store made here can go. (On
    // channels of its own, with the rendezvous' patience.)
    const meeting = new TcpBackend(mesh, link, backend.members, "r.", meetMs, null);
    await meeting.barrier(rendezvousCall(worldSize));
    await ownStore?.close();
    return backend;
  } catch (error) {
    await link?.close(0);
    await ownStore?.close();
    throw error;
  }
}

/** Where a rank listens: its own loopback address, or every interface. */
function listenHostOf(host: string): string {
  return isLoopback(host) ? host : "0.0.0.0";
}

/** The barrier that ends the rendezvous (seq -1: before every numbered call). */
function rendezvousCall(_worldSize: number): CollectiveCall {
  const header = new Int32Array(HEADER_WORDS);
  header[0] = 4; // barrier
  header[1] = -1;
  return { kind: "barrier", seq: -1, dtype: null, header };
}

/** Rendezvous counter: a process may make several groups over one store. */
let rounds = 0;

/** Listens, publishes this rank's address, connects to the lower ranks and accepts the higher. */
async function connectMesh(
  store: Store,
  rank: number,
  worldSize: number,
  host: string,
  timeoutMs: number,
): Promise<Mesh> {
  const conns: (Deno.TcpConn | null)[] = Array.from({ length: worldSize }, () => null);
  if (worldSize === 1) return new Mesh(rank, conns);
  const round = rounds++;
  const listener = Deno.listen({ hostname: listenHostOf(host), port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  const prefix = `multigrad/tcp/${round}/`;
  const expected = worldSize - 1 - rank;
  const accepting = (async () => {
    for (let accepted = 0; accepted < expected; accepted++) {
      const conn = await listener.accept();
      const hello = new Uint8Array(12);
      if (!(await readFull(conn, hello))) throw new Error("a peer connected and closed at once");
      const view = new DataView(hello.buffer);
      const q = view.getInt32(4, true);
      const size = view.getInt32(8, true);
      if (view.getUint32(0, true) !== HELLO_MAGIC) {
        conn.close();
        accepted--;
        continue;
      }
      if (size !== worldSize || q <= rank || q >= worldSize || conns[q]) {
        throw new DistributedError(
          `initProcessGroup (tcp) on rank ${rank}: a process connected as rank ${q} of ${size}, but this group has ${worldSize} ranks${
            conns[q] ? ` and rank ${q} is already connected (two processes with RANK=${q}?)` : ""
          }`,
          [q],
        );
      }
      conns[q] = conn;
    }
  })();
  const connecting = (async () => {
    await store.set(`${prefix}${rank}`, `${host}:${port}`);
    for (let q = 0; q < rank; q++) {
      const address = new TextDecoder().decode(await store.get(`${prefix}${q}`));
      const { host: peerHost, port: peerPort } = parseAddress(address, `rank ${q}'s address`);
      const conn = await Deno.connect({ hostname: peerHost, port: peerPort });
      const hello = new Uint8Array(12);
      const view = new DataView(hello.buffer);
      view.setUint32(0, HELLO_MAGIC, true);
      view.setInt32(4, rank, true);
      view.setInt32(8, worldSize, true);
      await writeAll(conn, hello);
      conns[q] = conn;
    }
  })();
  try {
    await within(
      Promise.all([accepting, connecting]),
      timeoutMs,
      () => {
        const missing = conns.flatMap((c, q) => c || q === rank ? [] : [q]);
        return `initProcessGroup (tcp) on rank ${rank}: ${
          missing.length === 1 ? "rank" : "ranks"
        } ${
          missing.join(", ")
        } did not connect within ${timeoutMs} ms (a rank hung, died or does not call initProcessGroup)`;
      },
    );
  } catch (error) {
    for (const c of conns) c?.close();
    throw error;
  } finally {
    listener.close();
  }
  return new Mesh(rank, conns);
}
