/**
 * The `"tcp"` process group's transport: one TCP connection between every
 * two ranks (a full mesh), carrying framed messages on named channels. A
 * message is a call header (the 16 words every rank compares) and bytes.
 *
 * Every connection is read by its own loop, which files each message under
 * its channel; a receiver takes the next message of a channel from one
 * rank, in the order sent. A receiver may name where the data goes (a
 * large collective's own memory): a message that arrives while it waits is
 * read there, through the loop's one buffer, with no array per message. A connection that closes, or a peer's failure
 * message, fails every receive from that rank at once, naming it.
 *
 * The connections are `unref()`ed: they never keep the process alive by
 * themselves. A receive that waits holds a timer (its deadline), which
 * keeps the process alive while a collective is in flight and no longer.
 * @module
 */

import { DistributedError, HEADER_WORDS } from "./backend.ts";

/** Frame types. */
const DATA = 1;
/** The peer's program failed: the bytes are its error's text. */
const FAILURE = 2;
/** The peer left the process group (`destroyProcessGroup`). */
const BYE = 3;

/** type, key length, data length (u32 each, little-endian), then the key, the header, the data. */
const PREFIX_BYTES = 12;
const HEADER_BYTES = HEADER_WORDS * 4;
/** Messages up to this size are written in one `write` (prefix, header and data copied together). */
const COALESCE_BYTES = 64 * 1024;
/**
 * The most bytes asked of one `read`: Deno's read costs time in proportion
 * to the buffer it is handed, not to the bytes it returns (a 4 MiB buffer
 * filled 64 KiB at a time made a 4 MiB all-reduce 15x slower).
 */
const READ_CHUNK = 256 * 1024;

/** Messages of at least this many bytes go into recycled arrays (see `Mesh.recycle`). */
const RECYCLE_BYTES = 64 * 1024;
/** The most arrays kept for recycling. */
const MAX_SPARES = 16;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** One received message. */
export interface Message {
  /** The sender's call header. */
  readonly header: Int32Array;
  /**
   * The sender's bytes: the receive's `into` when it was given, of the
   * message's length, and the message came after the receive asked for it;
   * else an array of the mesh's (the caller's to keep).
   */
  readonly data: Uint8Array;
}

/** Why a rank can no longer be heard from. */
interface Gone {
  readonly rank: number;
  readonly why: "failed" | "left" | "lost";
  readonly text: string;
}

interface Waiter {
  /** Where the data goes when it is of this length (see {@link Message.data}). */
  readonly into: Uint8Array | null;
  /** Whether reads may go straight into `into` (see {@link Mesh.receive}). */
  readonly direct: boolean;
  resolve(message: Message): void;
  reject(error: Error): void;
}

/**
 * A message whose data is being read into a waiting receive's `into`.
 * When that receive fails first (its deadline, or `cancel`), the bytes go
 * on into an array of the mesh's, and the message is filed as one that
 * nobody waited for: the failed call's memory is not written after it
 * failed (the reads are copied in from the mesh's own buffer, so no read
 * still under way can land there).
 */
interface Filling {
  readonly slot: string;
  readonly waiter: Waiter;
  /** Where the bytes go: `waiter.into`, or the mesh's array once the receive failed. */
  data: Uint8Array;
  /** Bytes of it written so far. */
  got: number;
  failed: boolean;
}

/** Writes every byte of `bytes`. */
export async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  let written = 0;
  // In pieces of at most READ_CHUNK, for the reason reads are (see READ_CHUNK).
  while (written < bytes.length) {
    written += await conn.write(
      bytes.subarray(written, Math.min(bytes.length, written + READ_CHUNK)),
    );
  }
}

/** Reads exactly `into.length` bytes; false at a clean end of the stream before any. */
export async function readFull(conn: Deno.Conn, into: Uint8Array): Promise<boolean> {
  let got = 0;
  while (got < into.length) {
    const n = await conn.read(into.subarray(got, Math.min(into.length, got + READ_CHUNK)));
    if (n === null) {
      if (got === 0) return false;
      throw new Error(`the connection closed inside a message (${got} of ${into.length} bytes)`);
    }
    got += n;
  }
  return true;
}

/** A rank's connections to every other rank of the whole group. */
export class Mesh {
  /** This process's rank in the whole group. */
  readonly rank: number;
  /** The whole group's size. */
  readonly worldSize: number;
  readonly #conns: (Deno.TcpConn | null)[];
  /** The last write queued on each connection (they go out one after another). */
  readonly #writes: (Promise<void> | null)[];
  /** Messages that arrived before they were asked for, by `rank` and channel. */
  readonly #inbox = new Map<string, Message[]>();
  /** Receives waiting for a message, by `rank` and channel. */
  readonly #waiting = new Map<string, Waiter[]>();
  /** The message being read into a receive's `into`, by rank. */
  readonly #filling: (Filling | null)[];
  readonly #gone: (Gone | null)[];
  /** Arrays given back by {@link Mesh.recycle}, for messages nobody waits for yet. */
  readonly #spares: Uint8Array[] = [];
  #closed = false;

  /** Takes over `conns` (index = peer rank; null at this rank) and starts reading them. */
  constructor(rank: number, conns: (Deno.TcpConn | null)[]) {
    this.rank = rank;
    this.worldSize = conns.length;
    this.#conns = conns;
    this.#writes = conns.map(() => null);
    this.#filling = conns.map(() => null);
    this.#gone = conns.map(() => null);
    conns.forEach((conn, q) => {
      if (!conn) return;
      conn.setNoDelay(true);
      conn.unref();
      this.#read(q, conn).then(
        () => this.#lose(q, "lost", "its connection closed (the process exited or was killed)"),
        (error) =>
          this.#lose(
            q,
            "lost",
            `its connection closed (the process exited or was killed: ${error})`,
          ),
      );
    });
  }

  /** Whether `close` ran. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Reads rank `q`'s frames. Frame heads, and data bound for a receive's
   * `into`, pass through one buffer of READ_CHUNK bytes (a read may take in
   * the next frames' heads with them); data nobody waits for yet is read
   * straight into an array of its own. No frame is copied whole.
   */
  async #read(q: number, conn: Deno.Conn): Promise<void> {
    const buffer = new Uint8Array(READ_CHUNK);
    let start = 0;
    let end = 0;
    /** Makes `need` bytes (at most READ_CHUNK) available from `start`; false at a clean end. */
    const have = async (need: number): Promise<boolean> => {
      if (start + need > buffer.length) {
        buffer.copyWithin(0, start, end);
        end -= start;
        start = 0;
      }
      while (end - start < need) {
        const n = await conn.read(buffer.subarray(end));
        if (n === null) {
          if (end === start) return false;
          throw new Error("the connection closed inside a message");
        }
        end += n;
      }
      return true;
    };
    for (;;) {
      if (start === end) start = end = 0;
      if (!(await have(PREFIX_BYTES))) return;
      const view = new DataView(buffer.buffer, start, PREFIX_BYTES);
      const type = view.getUint32(0, true);
      const keyBytes = view.getUint32(4, true);
      const dataBytes = view.getUint32(8, true);
      const head = PREFIX_BYTES + keyBytes + HEADER_BYTES;
      if (head > buffer.length) throw new Error(`a frame's channel name is ${keyBytes} bytes`);
      if (!(await have(head))) throw new Error("the connection closed inside a message");
      const key = decoder.decode(
        buffer.subarray(start + PREFIX_BYTES, start + head - HEADER_BYTES),
      );
      const header = new Int32Array(buffer.slice(start + head - HEADER_BYTES, start + head).buffer);
      start += head;
      const slot = `${q}|${key}`;
      // The first receive waiting on the channel takes the data into its `into`.
      const waiters = type === DATA ? this.#waiting.get(slot) : undefined;
      const waiter = waiters?.[0];
      let filling: Filling | null = null;
      let data: Uint8Array;
      if (waiter?.into && waiter.into.length === dataBytes) {
        waiters!.shift();
        if (waiters!.length === 0) this.#waiting.delete(slot);
        filling = { slot, waiter, data: waiter.into, got: 0, failed: false };
        this.#filling[q] = filling;
        data = waiter.into;
      } else {
        const i = dataBytes >= RECYCLE_BYTES
          ? this.#spares.findIndex((a) => a.length === dataBytes)
          : -1;
        data = i >= 0 ? this.#spares.splice(i, 1)[0] : new Uint8Array(dataBytes);
      }
      let got = Math.min(end - start, dataBytes);
      data.set(buffer.subarray(start, start + got));
      start += got;
      if (filling) filling.got = got;
      while (got < dataBytes) {
        start = end = 0;
        if (filling && !filling.failed && !filling.waiter.direct) {
          const n = await conn.read(buffer);
          if (n === null) throw new Error("the connection closed inside a message");
          end = n;
          // The receive may have failed while the read waited: then its bytes go to `filling.data`.
          const take = Math.min(n, dataBytes - got);
          filling.data.set(buffer.subarray(0, take), got);
          start = take;
          got += take;
          filling.got = got;
        } else {
          const target = filling ? filling.data : data;
          const n = await conn.read(target.subarray(got, Math.min(dataBytes, got + READ_CHUNK)));
          if (n === null) throw new Error("the connection closed inside a message");
          // The receive failed while the read waited: its bytes move to the mesh's array.
          if (filling && filling.data !== target) {
            filling.data.set(target.subarray(got, got + n), got);
          }
          got += n;
          if (filling) filling.got = got;
        }
      }
      if (filling) {
        this.#filling[q] = null;
        if (!filling.failed) {
          filling.waiter.resolve({ header, data: filling.data });
          continue;
        }
        data = filling.data;
      }
      if (type === FAILURE) this.#lose(q, "failed", decoder.decode(data));
      else if (type === BYE) this.#lose(q, "left", "it left the process group");
      else this.#deliver(slot, { header, data });
    }
  }

  /**
   * Gives back a message's `data` that the mesh allocated (not a receive's
   * `into`) once the caller is done with it: the next message of its size
   * that arrives before it is asked for is read into it (new memory costs
   * more than the copy: it is zeroed and faulted in).
   */
  recycle(data: Uint8Array): void {
    if (data.length < RECYCLE_BYTES || data.byteOffset !== 0) return;
    if (data.byteLength !== data.buffer.byteLength || this.#spares.length >= MAX_SPARES) return;
    this.#spares.push(data);
  }

  /** The receive `waiter` failed while its message was being read: the rest goes elsewhere. */
  #abandon(filling: Filling): void {
    if (filling.failed) return;
    filling.failed = true;
    const data = new Uint8Array(filling.data.length);
    data.set(filling.data.subarray(0, filling.got));
    filling.data = data;
  }

  #deliver(slot: string, message: Message): void {
    const waiters = this.#waiting.get(slot);
    const waiter = waiters?.shift();
    if (waiter) {
      if (waiters!.length === 0) this.#waiting.delete(slot);
      waiter.resolve(message);
      return;
    }
    const box = this.#inbox.get(slot);
    if (box) box.push(message);
    else this.#inbox.set(slot, [message]);
  }

  /** Rank `q` can no longer be heard from: every receive from it fails. */
  #lose(q: number, why: Gone["why"], text: string): void {
    if (this.#gone[q] && this.#gone[q]!.why !== "lost") return;
    if (this.#gone[q] && why === "lost") return;
    this.#gone[q] = { rank: q, why, text };
    for (const [slot, waiters] of [...this.#waiting]) {
      if (!slot.startsWith(`${q}|`)) continue;
      this.#waiting.delete(slot);
      for (const w of waiters) w.reject(this.goneError(q));
    }
    const filling = this.#filling[q];
    if (filling && !filling.failed) {
      this.#abandon(filling);
      filling.waiter.reject(this.goneError(q));
    }
  }

  /** The error of a receive from rank `q` after it failed, left or was lost (its world rank). */
  goneError(q: number): DistributedError {
    const gone = this.#gone[q]!;
    const text = gone.why === "failed"
      ? `rank ${q} failed: ${gone.text}`
      : gone.why === "left"
      ? `rank ${q} left the process group (destroyProcessGroup) before this call`
      : `rank ${q} is gone: ${gone.text}`;
    return new DistributedError(text, [q]);
  }

  /** Whether rank `q` failed, left or was lost. */
  isGone(q: number): boolean {
    return this.#gone[q] !== null;
  }

  /** Queues a message for rank `q` on channel `key`; resolves once it is written. */
  send(q: number, key: string, header: Int32Array, data: Uint8Array, type = DATA): Promise<void> {
    const conn = this.#conns[q];
    if (!conn || this.#closed) return Promise.resolve();
    if (this.#gone[q]?.why === "lost") return Promise.reject(this.goneError(q));
    const keyBytes = encoder.encode(key);
    const head = PREFIX_BYTES + keyBytes.length + HEADER_BYTES;
    // Small data goes in the head's write; large data is written from where it lies.
    const small = data.length <= COALESCE_BYTES;
    const first = new Uint8Array(head + (small ? data.length : 0));
    const view = new DataView(first.buffer);
    view.setUint32(0, type, true);
    view.setUint32(4, keyBytes.length, true);
    view.setUint32(8, data.length, true);
    first.set(keyBytes, PREFIX_BYTES);
    first.set(new Uint8Array(header.buffer, header.byteOffset, HEADER_BYTES), head - HEADER_BYTES);
    if (small) first.set(data, head);
    const write = async (previous: Promise<void> | null) => {
      if (previous) await previous;
      await writeAll(conn, first);
      if (!small) await writeAll(conn, data);
    };
    const written = write(this.#writes[q]);
    // A failed write fails this send; the next ones on the connection still try.
    const settled = written.catch(() => {});
    this.#writes[q] = settled;
    // The queue forgets a write once it is the last and done.
    settled.then(() => {
      if (this.#writes[q] === settled) this.#writes[q] = null;
    });
    return written.catch((error) => {
      if (this.#closed) throw new DistributedError(`cannot send to rank ${q}: ${error}`, [q]);
      // A write fails when the peer's end is gone (EPIPE, ECONNRESET): said as its reader says
      // it (or as the reader already learnt it), whichever of the two notices first.
      this.#lose(q, "lost", `its connection closed (the process exited or was killed: ${error})`);
      throw this.goneError(q);
    });
  }

  /**
   * The next message from rank `q` on channel `key`; fails when `q` is
   * gone, or at `deadline` (a `performance.now()` time) with `late()`'s
   * error. A message that arrives after this call, with `into.length`
   * bytes, goes into `into` (see {@link Message.data}): copied from the
   * mesh's buffer, so nothing lands there once the receive failed; or with
   * `direct`, read straight into it (a copy less), for an `into` that the
   * caller drops when the receive fails (a read under way may still fill
   * it).
   */
  receive(
    q: number,
    key: string,
    deadline: number,
    late: () => Error,
    into: Uint8Array | null = null,
    direct = false,
  ): Promise<Message> {
    const slot = `${q}|${key}`;
    const box = this.#inbox.get(slot);
    if (box && box.length > 0) {
      const message = box.shift()!;
      if (box.length === 0) this.#inbox.delete(slot);
      return Promise.resolve(message);
    }
    if (this.#gone[q]) return Promise.reject(this.goneError(q));
    return new Promise<Message>((resolve, reject) => {
      // The timer keeps the process alive while the receive waits (the connections do not).
      const timer = setTimeout(() => {
        const waiters = this.#waiting.get(slot);
        const i = waiters?.indexOf(waiter) ?? -1;
        if (i >= 0) waiters!.splice(i, 1);
        if (waiters?.length === 0) this.#waiting.delete(slot);
        const filling = this.#filling[q];
        if (filling?.waiter === waiter) this.#abandon(filling);
        reject(late());
      }, Math.max(0, deadline - performance.now()));
      const waiter: Waiter = {
        into,
        direct,
        resolve: (m) => {
          clearTimeout(timer);
          resolve(m);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      };
      const waiters = this.#waiting.get(slot);
      if (waiters) waiters.push(waiter);
      else this.#waiting.set(slot, [waiter]);
    });
  }

  /**
   * Fails every receive still waiting on channel `key` (from any rank)
   * with `error`: after a call failed, its other receives must neither
   * take a later call's message nor keep the process alive on their timers
   * (nor write into the call's memory).
   */
  cancel(key: string, error: Error): void {
    const ofKey = (slot: string) => slot.slice(slot.indexOf("|") + 1) === key;
    for (const [slot, waiters] of [...this.#waiting]) {
      if (!ofKey(slot)) continue;
      this.#waiting.delete(slot);
      for (const w of waiters) w.reject(error);
    }
    for (const filling of this.#filling) {
      if (!filling || filling.failed || !ofKey(filling.slot)) continue;
      this.#abandon(filling);
      filling.waiter.reject(error);
    }
  }

  /**
   * Tells every other rank that this one fails (`text`), waiting at most
   * `graceMs` for the messages to be written.
   */
  async announceFailure(text: string, graceMs: number): Promise<void> {
    if (this.#closed) return;
    const data = encoder.encode(text.slice(0, 4000));
    const header = new Int32Array(HEADER_WORDS);
    const sends = this.#conns.map((conn, q) =>
      conn ? this.send(q, "", header, data, FAILURE).catch(() => {}) : null
    );
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      Promise.all(sends),
      new Promise((resolve) => (timer = setTimeout(resolve, graceMs))),
    ]);
    clearTimeout(timer);
  }

  /** Says goodbye to every other rank and closes the connections. */
  async close(graceMs: number): Promise<void> {
    if (this.#closed) return;
    const header = new Int32Array(HEADER_WORDS);
    const byes = this.#conns.map((conn, q) =>
      conn && !this.#gone[q]
        ? this.send(q, "", header, new Uint8Array(0), BYE).catch(() => {})
        : null
    );
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      Promise.all(byes),
      new Promise((resolve) => (timer = setTimeout(resolve, graceMs))),
    ]);
    clearTimeout(timer);
    this.#closed = true;
    for (const conn of this.#conns) {
      try {
        conn?.close();
      } catch {
        // Already closed by the peer.
      }
    }
  }
}
