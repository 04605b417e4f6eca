/**
 * The `"tcp"` process group's transport: one TCP connection between every
 * two ranks (a full mesh), carrying framed messages on named channels. A
 * message is a call header (the 16 words every rank compares) and bytes.
 *
 * Every connection is read by its own loop, which files each message under
 * its channel; a receiver takes the next message of a channel from one
 * rank, in the order sent. A connection that closes, or a peer's failure
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

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** One received message. */
export interface Message {
  /** The sender's call header. */
  readonly header: Int32Array;
  /** The sender's bytes. */
  readonly data: Uint8Array;
}

/** Why a rank can no longer be heard from. */
interface Gone {
  readonly rank: number;
  readonly why: "failed" | "left" | "lost";
  readonly text: string;
}

interface Waiter {
  resolve(message: Message): void;
  reject(error: Error): void;
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
  readonly #writes: Promise<void>[];
  /** Messages that arrived before they were asked for, by `rank` and channel. */
  readonly #inbox = new Map<string, Message[]>();
  /** Receives waiting for a message, by `rank` and channel. */
  readonly #waiting = new Map<string, Waiter[]>();
  readonly #gone: (Gone | null)[];
  #closed = false;

  /** Takes over `conns` (index = peer rank; null at this rank) and starts reading them. */
  constructor(rank: number, conns: (Deno.TcpConn | null)[]) {
    this.rank = rank;
    this.worldSize = conns.length;
    this.#conns = conns;
    this.#writes = conns.map(() => Promise.resolve());
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

  async #read(q: number, conn: Deno.Conn): Promise<void> {
    let buffer = new Uint8Array(READ_CHUNK);
    let start = 0;
    let end = 0;
    for (;;) {
      // Enough bytes for the prefix?
      while (end - start < PREFIX_BYTES) {
        if (start > 0) {
          buffer.copyWithin(0, start, end);
          end -= start;
          start = 0;
        }
        const n = await conn.read(buffer.subarray(end, Math.min(buffer.length, end + READ_CHUNK)));
        if (n === null) {
          if (end === start) return;
          throw new Error("the connection closed inside a message");
        }
        end += n;
      }
      const view = new DataView(buffer.buffer, start, PREFIX_BYTES);
      const type = view.getUint32(0, true);
      const keyBytes = view.getUint32(4, true);
      const dataBytes = view.getUint32(8, true);
      const total = PREFIX_BYTES + keyBytes + HEADER_BYTES + dataBytes;
      // The whole frame, in `buffer` when it fits, else in a buffer of its own.
      let frame: Uint8Array;
      if (total <= buffer.length) {
        if (start + total > buffer.length) {
          buffer.copyWithin(0, start, end);
          end -= start;
          start = 0;
        }
        while (end - start < total) {
          const n = await conn.read(
            buffer.subarray(end, Math.min(buffer.length, end + READ_CHUNK)),
          );
          if (n === null) throw new Error("the connection closed inside a message");
          end += n;
        }
        frame = buffer.subarray(start, start + total);
        start += total;
      } else {
        frame = new Uint8Array(total);
        frame.set(buffer.subarray(start, end));
        if (!(await readFull(conn, frame.subarray(end - start)))) {
          throw new Error("the connection closed inside a message");
        }
        start = end = 0;
        // A large message: the next ones are likely as large.
        if (buffer.length < 4 * 1024 * 1024) buffer = new Uint8Array(buffer.length * 2);
      }
      const key = decoder.decode(frame.subarray(PREFIX_BYTES, PREFIX_BYTES + keyBytes));
      const at = PREFIX_BYTES + keyBytes;
      const header = new Int32Array(frame.slice(at, at + HEADER_BYTES).buffer);
      const data = frame.slice(at + HEADER_BYTES);
      if (type === FAILURE) this.#lose(q, "failed", decoder.decode(data));
      else if (type === BYE) this.#lose(q, "left", "it left the process group");
      else this.#deliver(`${q}|${key}`, { header, data });
      if (start === end) start = end = 0;
    }
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
    const small = data.length <= COALESCE_BYTES;
    const first = new Uint8Array(head + (small ? data.length : 0));
    const view = new DataView(first.buffer);
    view.setUint32(0, type, true);
    view.setUint32(4, keyBytes.length, true);
    view.setUint32(8, data.length, true);
    first.set(keyBytes, PREFIX_BYTES);
    first.set(new Uint8Array(header.buffer, header.byteOffset, HEADER_BYTES), head - HEADER_BYTES);
    if (small) first.set(data, head);
    const write = this.#writes[q].then(async () => {
      await writeAll(conn, first);
      if (!small) await writeAll(conn, data);
    });
    // A failed write fails this send; the next ones on the connection still try.
    this.#writes[q] = write.catch(() => {});
    return write.catch((error) => {
      throw new DistributedError(`cannot send to rank ${q}: ${error}`, [q]);
    });
  }

  /**
   * The next message from rank `q` on channel `key`; fails when `q` is
   * gone, or at `deadline` (a `performance.now()` time) with `late()`'s error.
   */
  receive(q: number, key: string, deadline: number, late: () => Error): Promise<Message> {
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
        reject(late());
      }, Math.max(0, deadline - performance.now()));
      const waiter: Waiter = {
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
   * take a later call's message nor keep the process alive on their timers.
   */
  cancel(key: string, error: Error): void {
    for (const [slot, waiters] of [...this.#waiting]) {
      if (slot.slice(slot.indexOf("|") + 1) !== key) continue;
      this.#waiting.delete(slot);
      for (const w of waiters) w.reject(error);
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
