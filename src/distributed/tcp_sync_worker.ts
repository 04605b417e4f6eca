/**
 * The Worker behind the `"tcp"` group's blocking `allGatherSync` (see
 * `tcp_sync.ts`): a thread with its own event loop and its own full mesh
 * of connections to the other ranks' Workers, so it can exchange while the
 * rank's main thread is blocked in `Atomics.wait`. It writes every rank's
 * header and words, or what went wrong, into the shared memory, then wakes
 * the main thread.
 *
 * {@link syncWorker} is started from its source text (`toString()`), not
 * from this file: a Worker that loads a local module needs `--allow-read`,
 * and the `"tcp"` group needs only `--allow-net` (and `--allow-env`). So it
 * refers to nothing outside its own body (its few types are erased). Its
 * messages are small (at most 4096 words): a simpler transport than the
 * main connections' `tcp_mesh.ts`, with the same frames.
 * @module
 */

import type { SyncAnswer, SyncPort, SyncRequest } from "./tcp_sync_layout.ts";

/**
 * @internal The Worker's program: answers `port`'s requests (see
 * {@link SyncRequest}). Self-contained (run from its source text).
 */
export function syncWorker(port: SyncPort): void {
  // Frames: type, key length, data length (u32 each), the key, the 16-word header, the data.
  const DATA = 1;
  const FAILURE = 2;
  const BYE = 3;
  const PREFIX = 12;
  /** A call header's words (HEADER_WORDS of backend.ts). */
  const HEADER_WORDS = 16;
  const HEADER_BYTES = HEADER_WORDS * 4;
  /** The first 4 bytes a connecting Worker sends ("mgts"), then its rank and the world size. */
  const HELLO_MAGIC = 0x73746d67;
  // The shared memory's layout: see SyncCtl and syncSlot in tcp_sync_layout.ts.
  const DONE = 0;
  const STATUS = 1;
  const TEXT_BYTES = 3;
  const SLOTS = 32;
  const TEXT_ROOM = 2048 * 4;
  const OK = 1;
  const FAILED = 2;

  type Message = { header: Int32Array; data: Uint8Array };
  type Why = "failed" | "left" | "lost";
  type Waiter = { resolve(m: Message): void; reject(e: unknown): void };
  /** A call's failure as the main thread words it. */
  type Failure =
    | { kind: "late"; ranks: number[] }
    | { kind: "gone"; rank: number; why: Why; text: string };

  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  let conns: (Deno.TcpConn | null)[] = [];
  let gone: ({ why: Why; text: string } | null)[] = [];
  let writes: Promise<void>[] = [];
  const inbox = new Map<string, Message[]>();
  const waiting = new Map<string, Waiter[]>();
  let memory: Int32Array | null = null;
  let closed = false;

  const answer = (m: SyncAnswer) => port.postMessage(m);

  async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
    for (let at = 0; at < bytes.length;) at += await conn.write(bytes.subarray(at));
  }

  async function readExact(conn: Deno.Conn, into: Uint8Array): Promise<boolean> {
    for (let got = 0; got < into.length;) {
      const n = await conn.read(into.subarray(got));
      if (n === null) return false;
      got += n;
    }
    return true;
  }

  function send(q: number, type: number, key: string, header: Int32Array, data: Uint8Array) {
    const conn = conns[q];
    if (!conn || closed) return Promise.resolve();
    const keyBytes = encoder.encode(key);
    const frame = new Uint8Array(PREFIX + keyBytes.length + HEADER_BYTES + data.length);
    const view = new DataView(frame.buffer);
    view.setUint32(0, type, true);
    view.setUint32(4, keyBytes.length, true);
    view.setUint32(8, data.length, true);
    frame.set(keyBytes, PREFIX);
    frame.set(
      new Uint8Array(header.buffer, header.byteOffset, HEADER_BYTES),
      PREFIX + keyBytes.length,
    );
    frame.set(data, PREFIX + keyBytes.length + HEADER_BYTES);
    const written = (writes[q] ?? Promise.resolve()).then(() => writeAll(conn, frame));
    writes[q] = written.catch(() => {});
    return written;
  }

  /** Rank `q` can no longer be heard from: every receive from it fails. */
  function lose(q: number, why: Why, text: string): void {
    if (gone[q] && (gone[q]!.why !== "lost" || why === "lost")) return;
    gone[q] = { why, text };
    for (const [slot, waiters] of [...waiting]) {
      if (!slot.startsWith(`${q}|`)) continue;
      waiting.delete(slot);
      for (const w of waiters) w.reject({ kind: "gone", rank: q, why, text });
    }
  }

  async function read(q: number, conn: Deno.Conn): Promise<void> {
    let buffer = new Uint8Array(64 * 1024);
    let start = 0;
    let end = 0;
    for (;;) {
      while (end - start >= PREFIX) {
        const view = new DataView(buffer.buffer, start, PREFIX);
        const type = view.getUint32(0, true);
        const keyBytes = view.getUint32(4, true);
        const total = PREFIX + keyBytes + HEADER_BYTES + view.getUint32(8, true);
        if (end - start < total) {
          if (total > buffer.length - start) {
            const bigger = new Uint8Array(Math.max(total, buffer.length * 2));
            bigger.set(buffer.subarray(start, end));
            buffer = bigger;
            end -= start;
            start = 0;
          }
          break;
        }
        const at = start + PREFIX + keyBytes;
        const key = decoder.decode(buffer.subarray(start + PREFIX, at));
        const header = new Int32Array(buffer.slice(at, at + HEADER_BYTES).buffer);
        const data = buffer.slice(at + HEADER_BYTES, start + total);
        start += total;
        if (type === FAILURE) lose(q, "failed", decoder.decode(data));
        else if (type === BYE) lose(q, "left", "");
        else {
          const slot = `${q}|${key}`;
          const waiters = waiting.get(slot);
          const waiter = waiters?.shift();
          if (waiters?.length === 0) waiting.delete(slot);
          if (waiter) waiter.resolve({ header, data });
          else inbox.set(slot, [...(inbox.get(slot) ?? []), { header, data }]);
        }
      }
      buffer.copyWithin(0, start, end);
      end -= start;
      start = 0;
      const n = await conn.read(buffer.subarray(end));
      if (n === null) return;
      end += n;
    }
  }

  function receive(q: number, key: string, deadline: number): Promise<Message> {
    const slot = `${q}|${key}`;
    const box = inbox.get(slot);
    if (box && box.length > 0) {
      const message = box.shift()!;
      if (box.length === 0) inbox.delete(slot);
      return Promise.resolve(message);
    }
    const lost = gone[q];
    if (lost) return Promise.reject({ kind: "gone", rank: q, ...lost });
    return new Promise<Message>((resolve, reject) => {
      const timer = setTimeout(() => {
        const waiters = waiting.get(slot);
        const i = waiters?.indexOf(waiter) ?? -1;
        if (i >= 0) waiters!.splice(i, 1);
        if (waiters?.length === 0) waiting.delete(slot);
        reject({ kind: "late", ranks: [] });
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
      waiting.set(slot, [...(waiting.get(slot) ?? []), waiter]);
    });
  }

  /** Fails the receives still waiting on `key` (a failed call's, which must not take later messages). */
  function cancel(key: string): void {
    for (const [slot, waiters] of [...waiting]) {
      if (slot.slice(slot.indexOf("|") + 1) !== key) continue;
      waiting.delete(slot);
      for (const w of waiters) w.reject({ kind: "late", ranks: [] });
    }
  }

  function start(conn: Deno.TcpConn, q: number): void {
    conn.setNoDelay(true);
    read(q, conn).then(
      () => lose(q, "lost", "its connection closed (the process exited or was killed)"),
      (error) =>
        lose(q, "lost", `its connection closed (the process exited or was killed: ${error})`),
    );
  }

  /** Listens, reports the port, then connects to the lower ranks and accepts the higher. */
  async function connect(request: Extract<SyncRequest, { type: "init" }>): Promise<void> {
    const { rank, worldSize, timeoutMs } = request;
    memory = new Int32Array(request.shared);
    conns = Array.from({ length: worldSize }, () => null);
    gone = conns.map(() => null);
    writes = conns.map(() => Promise.resolve());
    let listener: Deno.TcpListener | null = null;
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      listener = Deno.listen({ hostname: request.listenHost, port: 0 });
      const addresses = new Promise<readonly string[]>((resolve) => peersGiven = resolve);
      answer({ type: "listening", port: (listener.addr as Deno.NetAddr).port });
      const hello = (q: number) => {
        const bytes = new Uint8Array(12);
        const view = new DataView(bytes.buffer);
        view.setUint32(0, HELLO_MAGIC, true);
        view.setInt32(4, q, true);
        view.setInt32(8, worldSize, true);
        return bytes;
      };
      const accepting = (async () => {
        for (let accepted = 0; accepted < worldSize - 1 - rank;) {
          const conn = await listener!.accept();
          const bytes = new Uint8Array(12);
          const view = new DataView(bytes.buffer);
          if (!(await readExact(conn, bytes)) || view.getUint32(0, true) !== HELLO_MAGIC) {
            conn.close();
            continue;
          }
          const q = view.getInt32(4, true);
          const size = view.getInt32(8, true);
          if (size !== worldSize || q <= rank || q >= worldSize || conns[q]) {
            conn.close();
            throw new Error(`a process connected as rank ${q} of ${size}`);
          }
          conns[q] = conn;
          accepted++;
        }
      })();
      const connecting = (async () => {
        const peers = await addresses;
        for (let q = 0; q < rank; q++) {
          const at = peers[q].lastIndexOf(":");
          const conn = await Deno.connect({
            hostname: peers[q].slice(0, at).replace(/^\[|\]$/g, ""),
            port: Number(peers[q].slice(at + 1)),
          });
          await writeAll(conn, hello(rank));
          conns[q] = conn;
        }
      })();
      await Promise.race([
        Promise.all([accepting, connecting]),
        new Promise((_, reject) => {
          timer = setTimeout(() => {
            const missing = conns.flatMap((c, q) => c || q === rank ? [] : [q]);
            reject(
              new Error(
                `${missing.length === 1 ? "rank" : "ranks"} ${
                  missing.join(", ")
                } did not connect within ${timeoutMs} ms`,
              ),
            );
          }, timeoutMs);
        }),
      ]);
      conns.forEach((conn, q) => conn && start(conn, q));
      answer({ type: "ready" });
    } catch (error) {
      for (const c of conns) c?.close();
      conns = [];
      answer({ type: "failed", message: String((error as Error)?.message ?? error) });
    } finally {
      clearTimeout(timer);
      listener?.close();
    }
  }

  /**
   * Writes `failure` as JSON where the main thread reads it, its text cut
   * until the whole JSON fits the room (a cut JSON would not parse: a
   * peer's long non-ASCII error took 3 bytes a character).
   */
  function fail(shared: Int32Array, failure: Failure): void {
    const room = new Uint8Array(shared.buffer, shared.byteOffset + SLOTS * 4, TEXT_ROOM);
    for (let f = failure;;) {
      const json = JSON.stringify(f);
      const { read, written } = encoder.encodeInto(json, room);
      if (read === json.length || f.kind !== "gone" || f.text.length === 0) {
        shared[TEXT_BYTES] = written;
        break;
      }
      f = { ...f, text: f.text.slice(0, (f.text.length * 3) >> 2) };
    }
    shared[STATUS] = FAILED;
  }

  /** One blocking all-gather: its result, or its failure, into the shared memory. */
  async function gather(request: Extract<SyncRequest, { type: "gather" }>): Promise<void> {
    if (request.shared) memory = new Int32Array(request.shared);
    const shared = memory!;
    const { members, me, key, header, data, timeoutMs } = request;
    const channel = `${key}s`;
    const slotOf = (q: number) => SLOTS + q * (HEADER_WORDS + 1 + data.length);
    const got: (Int32Array | null)[] = members.map(() => null);
    const deadline = performance.now() + timeoutMs;
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    const peers = members.flatMap((_, q) => q === me ? [] : [q]);
    try {
      await Promise.all([
        ...peers.map((q) =>
          send(members[q], DATA, channel, header, bytes).catch((error) => {
            throw { kind: "gone", rank: members[q], why: "lost", text: `cannot send: ${error}` };
          })
        ),
        ...peers.map(async (q) => {
          const message = await receive(members[q], channel, deadline);
          const words = message.data;
          got[q] = new Int32Array(words.buffer, words.byteOffset, words.length >> 2);
          shared.set(message.header, slotOf(q));
        }),
      ]);
      got[me] = data;
      shared.set(header, slotOf(me));
      for (let q = 0; q < members.length; q++) {
        const at = slotOf(q);
        shared[at + HEADER_WORDS] = got[q]!.length;
        // A longer array than this rank's means the headers differ: the main thread says so.
        shared.set(got[q]!.subarray(0, data.length), at + HEADER_WORDS + 1);
      }
      shared[STATUS] = OK;
    } catch (error) {
      cancel(channel);
      const failure = error as Failure;
      if (failure?.kind === "late") {
        fail(shared, { kind: "late", ranks: peers.filter((q) => got[q] === null) });
      } else if (failure?.kind === "gone") {
        // The whole group's rank, told as this group's by the main thread.
        fail(shared, { ...failure, text: failure.text.slice(0, 4000) });
      } else {
        fail(shared, { kind: "gone", rank: -1, why: "lost", text: String(error) });
      }
    }
    Atomics.store(shared, DONE, request.id);
    Atomics.notify(shared, DONE);
  }

  let peersGiven: (addresses: readonly string[]) => void = () => {};
  // One request at a time: the main thread blocks on each gather.
  let queue: Promise<void> = Promise.resolve();
  port.on("message", (request: SyncRequest) => {
    switch (request.type) {
      case "init":
        queue = queue.then(() => connect(request));
        break;
      case "peers":
        peersGiven(request.addresses);
        break;
      case "gather":
        queue = queue.then(() => gather(request));
        break;
      case "fail":
        queue = queue.then(async () => {
          const text = encoder.encode(request.text.slice(0, 4000));
          let timer: ReturnType<typeof setTimeout> | undefined;
          await Promise.race([
            Promise.all(
              conns.map((c, q) => c && send(q, FAILURE, "", new Int32Array(HEADER_WORDS), text)),
            ),
            new Promise((resolve) => timer = setTimeout(resolve, request.graceMs)),
          ]).catch(() => {});
          clearTimeout(timer);
          answer({ type: "announced" });
        });
        break;
      case "close":
        queue = queue.then(async () => {
          const byes = conns.map((c, q) =>
            c && !gone[q] ? send(q, BYE, "", new Int32Array(HEADER_WORDS), new Uint8Array(0)) : null
          );
          let timer: ReturnType<typeof setTimeout> | undefined;
          await Promise.race([
            Promise.all(byes),
            new Promise((resolve) => timer = setTimeout(resolve, request.graceMs)),
          ]).catch(() => {});
          clearTimeout(timer);
          closed = true;
          for (const c of conns) {
            try {
              c?.close();
            } catch {
              // Already closed by the peer.
            }
          }
          answer({ type: "closed" });
        });
        break;
    }
  });
}
