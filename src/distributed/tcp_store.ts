/**
 * `torch.distributed.TCPStore`: one rank (the master) serves a store over
 * TCP (`Deno.listen`) and every user, the master included, is a client of
 * it (`Deno.connect`), across Workers, processes and machines. Requests
 * and answers are length-prefixed frames carrying an id; waits run on the
 * server with the request's timeout, so every request gets one answer.
 * @module
 */

import { Store } from "./store.ts";
import {
  checkAmount,
  checkKey,
  checkKeys,
  checkTimeout,
  counterValue,
  KeyTable,
  type StoreValue,
  valueBytes,
} from "./store_core.ts";
import { StoreTimeoutError } from "./store_error.ts";

const enum Cmd {
  Set = 1,
  Get,
  Add,
  CompareSet,
  Wait,
  Delete,
  NumKeys,
  Join,
}
const OK = 0;
const FAILED = 1;
const TIMED_OUT = 2;
/** How long after a wait's own timeout a client gives up on the server's answer. */
const ANSWER_GRACE_MS = 5000;
/** How often a client that finds no server yet tries again. */
const CONNECT_RETRY_MS = 50;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The kinds of error a server's failure keeps on the client (a bad counter: TypeError, RangeError). */
const ERRORS: Record<string, ErrorConstructor> = { TypeError, RangeError };

function errorName(error: unknown): string {
  return error instanceof Error ? error.name : "Error";
}

/** Writes fields (strings and byte arrays, each with its length) into one frame. */
function frame(id: number, code: number, fields: readonly (string | Uint8Array)[]): Uint8Array {
  const bytes = fields.map((f) => typeof f === "string" ? encoder.encode(f) : f);
  const size = 4 + 4 + 1 + bytes.reduce((n, b) => n + 4 + b.length, 0);
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  view.setUint32(0, size - 4, true);
  view.setUint32(4, id, true);
  out[8] = code;
  let at = 9;
  for (const b of bytes) {
    view.setUint32(at, b.length, true);
    out.set(b, at + 4);
    at += 4 + b.length;
  }
  return out;
}

/** A frame's id, code and fields. */
function parse(body: Uint8Array): { id: number; code: number; fields: Uint8Array[] } {
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const fields: Uint8Array[] = [];
  let at = 5;
  while (at + 4 <= body.length) {
    const n = view.getUint32(at, true);
    fields.push(body.slice(at + 4, at + 4 + n));
    at += 4 + n;
  }
  return { id: view.getUint32(0, true), code: body[4], fields };
}

/**
 * Calls `onFrame` with each frame's body read from `conn`, until it closes.
 * A body is a view of the read buffer, valid only during the call. The
 * buffer grows by doubling and unread bytes move to its front once per
 * read, so a big frame costs linear time (joining every chunk to the rest
 * took seconds for a few megabytes).
 */
async function readFrames(conn: Deno.Conn, onFrame: (body: Uint8Array) => void): Promise<void> {
  const chunk = new Uint8Array(256 * 1024);
  let buffer = new Uint8Array(chunk.length);
  let length = 0;
  for (;;) {
    // Into a small chunk: a read into a big buffer's free part costs that part's size.
    const n = await conn.read(chunk);
    if (n === null) return;
    if (length + n > buffer.length) {
      const grown = new Uint8Array(Math.max(buffer.length * 2, length + n));
      grown.set(buffer.subarray(0, length));
      buffer = grown;
    }
    buffer.set(chunk.subarray(0, n), length);
    length += n;
    const view = new DataView(buffer.buffer);
    let at = 0;
    while (at + 4 <= length) {
      const size = view.getUint32(at, true);
      if (at + 4 + size > length) break;
      onFrame(buffer.subarray(at + 4, at + 4 + size));
      at += 4 + size;
    }
    if (at > 0) {
      buffer.copyWithin(0, at, length);
      length -= at;
    }
  }
}

/** Writes `bytes` in pieces (a write of a big array's rest costs that rest's size, however little it sends). */
async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  let written = 0;
  while (written < bytes.length) {
    written += await conn.write(bytes.subarray(written, written + 256 * 1024));
  }
}

/** The master's server: a key table and its connections. */
class Server {
  readonly table = new KeyTable();
  readonly #joins = new KeyTable();
  readonly #conns = new Set<Deno.Conn>();
  readonly #listener: Deno.Listener;
  readonly #accepting: Promise<void>;

  constructor(listener: Deno.Listener) {
    this.#listener = listener;
    this.#accepting = this.#accept();
  }

  async #accept(): Promise<void> {
    try {
      for await (const conn of this.#listener) this.#serve(conn);
    } catch {
      // The listener was closed.
    }
  }

  #serve(conn: Deno.Conn): void {
    this.#conns.add(conn);
    let tail = Promise.resolve();
    const answer = (bytes: Uint8Array) => {
      tail = tail.then(() => writeAll(conn, bytes)).catch(() => {});
    };
    readFrames(conn, (body) => {
      const { id, code, fields } = parse(body);
      this.#handle(code, fields).then(
        (out) => answer(frame(id, OK, out)),
        (error) =>
          answer(
            error instanceof StoreTimeoutError
              ? frame(id, TIMED_OUT, error.keys)
              : frame(id, FAILED, [String((error as Error).message ?? error), errorName(error)]),
          ),
      );
    }).catch(() => {}).finally(() => {
      this.#conns.delete(conn);
      try {
        conn.close();
      } catch {
        // Already closed.
      }
    });
  }

  async #handle(code: number, f: Uint8Array[]): Promise<(string | Uint8Array)[]> {
    const text = (i: number) => decoder.decode(f[i]);
    const t = this.table;
    switch (code) {
      case Cmd.Set:
        t.put(text(0), f[1]);
        return [];
      case Cmd.Get:
        await t.wait("get", [text(0)], Number(text(1)));
        return [t.peek(text(0))!];
      case Cmd.Add:
        return [String(t.add("TCPStore.add", text(0), Number(text(1))))];
      case Cmd.CompareSet:
        return [t.compareSet(text(0), f[1], f[2])];
      case Cmd.Wait:
        await t.wait("wait", f.slice(1).map((b) => decoder.decode(b)), Number(text(0)));
        return [];
      case Cmd.Delete:
        return [t.remove(text(0)) ? "1" : "0"];
      case Cmd.NumKeys:
        return [String(t.size)];
      case Cmd.Join: {
        // Joins are counted apart from the users' keys (numKeys does not see them).
        const count = this.#joins.add("join", "joined", 1);
        this.#joins.put(`joined ${count}`, new Uint8Array(0));
        const worldSize = Number(text(0));
        const timeoutMs = Number(text(1));
        if (worldSize > 0) {
          await this.#joins.wait("join", [`joined ${worldSize}`], timeoutMs).catch(() => {
            const joined = counterValue("join", "joined", this.#joins.peek("joined"));
            throw new Error(
              `only ${joined} of the ${worldSize} users (worldSize, the master included) connected within ${timeoutMs} ms`,
            );
          });
        }
        return [String(count)];
      }
      default:
        throw new Error(`unknown request ${code}`);
    }
  }

  async close(): Promise<void> {
    const closing = new Error("the TCPStore server was closed");
    this.table.cancelWaits(closing);
    this.#joins.cancelWaits(closing);
    try {
      this.#listener.close();
    } catch {
      // Already closed.
    }
    for (const conn of this.#conns) {
      try {
        conn.close();
      } catch {
        // Already closed.
      }
    }
    await this.#accepting;
  }
}

/** A request awaiting its answer. */
interface Pending {
  resolve: (fields: Uint8Array[]) => void;
  reject: (error: Error) => void;
  op: string;
  waitMs: number;
  timer: ReturnType<typeof setTimeout>;
}

/** Options of {@link TCPStore.create}. */
export interface TCPStoreOptions {
  /** Whether this user starts the server (exactly one user does; default false). */
  isMaster?: boolean;
  /**
   * Number of users (the master included). Given, with `waitForWorkers`
   * (default true), the master's `create` resolves only once that many
   * have connected (or fails after the timeout, saying how many did).
   */
  worldSize?: number;
  /** How long `get`, `wait`, connecting and the master's wait for the others last (default 300 000 ms). */
  timeoutMs?: number;
  /** See `worldSize` (default true). */
  waitForWorkers?: boolean;
}

/**
 * A store served over TCP by the master user (`torch.distributed.TCPStore`).
 * Made with `await TCPStore.create(hostName, port, { isMaster, worldSize })`
 * (connecting is async); a client that starts before the master retries
 * until the timeout. Port 0 on the master picks a free port
 * ({@link TCPStore.port} tells which). `close()` every store (the master's
 * last: it ends the server). Unlike PyTorch's, `numKeys` counts only the
 * users' keys (PyTorch's counts an internal one too).
 *
 * @example
 * ```ts
 * const store = await distributed.TCPStore.create("127.0.0.1", 29500, {
 *   isMaster: rank === 0,
 *   worldSize: 2,
 * });
 * await store.set(`rank ${rank}`, "ready");
 * await store.wait(["rank 0", "rank 1"]);
 * store.close();
 * ```
 */
export class TCPStore extends Store {
  /** The server's host name. */
  readonly host: string;
  /** The server's port (the one picked, when the master was given 0). */
  readonly port: number;
  /** Whether this user runs the server. */
  readonly isMaster: boolean;
  readonly #conn: Deno.Conn;
  readonly #server: Server | null;
  /** Requests awaiting their answer, by id; `waitMs`: how long the server may wait (timeouts name it). */
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #writes: Promise<void> = Promise.resolve();
  #closed = false;
  #broken: Error | null = null;

  private constructor(
    host: string,
    port: number,
    conn: Deno.Conn,
    server: Server | null,
    timeoutMs: number | undefined,
  ) {
    super(timeoutMs);
    this.host = host;
    this.port = port;
    this.isMaster = server !== null;
    this.#conn = conn;
    this.#server = server;
    readFrames(conn, (body) => this.#answered(body)).catch((error) => error).then((error) => {
      this.#break(
        new Error(
          `TCPStore: the connection to the server at ${this.#where()} closed${
            this.#closed ? " (this store was closed)" : error ? `: ${error}` : ""
          }`,
        ),
      );
    });
  }

  /**
   * Connects to (and, with `isMaster`, first starts) the store at
   * `hostName:port`.
   */
  static async create(
    hostName: string,
    port: number,
    options: TCPStoreOptions = {},
  ): Promise<TCPStore> {
    const op = "TCPStore.create";
    if (typeof hostName !== "string" || hostName === "") {
      throw new TypeError(`${op}: hostName must be a non-empty string, got ${String(hostName)}`);
    }
    if (!Number.isInteger(port) || port < 0 || port > 65535) {
      throw new RangeError(`${op}: port must be an integer in [0, 65535], got ${port}`);
    }
    const worldSize = options.worldSize;
    if (worldSize !== undefined && (!Number.isInteger(worldSize) || worldSize < 1)) {
      throw new RangeError(`${op}: worldSize must be an integer >= 1, got ${worldSize}`);
    }
    const timeoutMs = checkTimeout(op, options.timeoutMs ?? 300_000);
    let server: Server | null = null;
    let actualPort = port;
    if (options.isMaster) {
      let listener: Deno.Listener;
      try {
        listener = Deno.listen({ hostname: hostName, port, transport: "tcp" });
      } catch (error) {
        throw new Error(`${op}: the master cannot listen on ${hostName}:${port}: ${error}`, {
          cause: error,
        });
      }
      actualPort = (listener.addr as Deno.NetAddr).port;
      server = new Server(listener);
    } else if (port === 0) {
      throw new RangeError(`${op}: a client needs the master's port, got 0`);
    }
    const deadline = performance.now() + timeoutMs;
    let conn: Deno.Conn | null = null;
    let last: unknown = null;
    while (!conn) {
      try {
        conn = await Deno.connect({ hostname: hostName, port: actualPort, transport: "tcp" });
      } catch (error) {
        last = error;
        if (performance.now() >= deadline) {
          await server?.close();
          throw new Error(
            `${op}: no TCPStore server answered at ${hostName}:${actualPort} within ${timeoutMs} ms (is the master started, with isMaster: true?): ${last}`,
            { cause: last },
          );
        }
        await new Promise((resolve) => setTimeout(resolve, CONNECT_RETRY_MS));
      }
    }
    const store = new TCPStore(hostName, actualPort, conn, server, timeoutMs);
    if (worldSize !== undefined && (options.waitForWorkers ?? true)) {
      // Every user joins; the master waits until all have.
      const waitFor = options.isMaster ? worldSize : 0;
      try {
        await store.#request(op, Cmd.Join, [String(waitFor), String(timeoutMs)], timeoutMs);
      } catch (error) {
        await store.close();
        throw error;
      }
    }
    return store;
  }

  #where(): string {
    return `${this.host}:${this.port}`;
  }

  #break(error: Error): void {
    this.#broken ??= error;
    for (const [, p] of this.#pending) {
      clearTimeout(p.timer);
      p.reject(new Error(`${p.op}: ${error.message}`, { cause: error }));
    }
    this.#pending.clear();
  }

  #answered(body: Uint8Array): void {
    const { id, code, fields } = parse(body);
    const p = this.#pending.get(id);
    if (!p) return;
    this.#pending.delete(id);
    clearTimeout(p.timer);
    if (code === OK) p.resolve(fields);
    else if (code === TIMED_OUT) {
      p.reject(
        new StoreTimeoutError(p.op, fields.map((f) => decoder.decode(f)), p.waitMs),
      );
    } else {
      // The server's message may already name the op (a failed add does).
      const message = decoder.decode(fields[0]);
      const Kind = ERRORS[decoder.decode(fields[1] ?? new Uint8Array())] ?? Error;
      p.reject(new Kind(message.startsWith(`${p.op}: `) ? message : `${p.op}: ${message}`));
    }
  }

  /** Sends a request; resolves with the answer's fields. `waitMs`: how long the server may wait. */
  #request(
    op: string,
    code: Cmd,
    fields: readonly (string | Uint8Array)[],
    waitMs = 0,
  ): Promise<Uint8Array[]> {
    if (this.#closed) return Promise.reject(new Error(`${op}: the TCPStore is closed`));
    if (this.#broken) return Promise.reject(new Error(`${op}: ${this.#broken.message}`));
    const id = this.#nextId++;
    const bytes = frame(id, code, fields);
    return new Promise((resolve, reject) => {
      const fail = (message: string) => () => {
        this.#pending.delete(id);
        reject(new Error(`${op}: ${message}`));
      };
      // Sending (behind earlier requests) is bounded by the store's timeout;
      // the answer, once sent, by the server's wait and a grace: a big value
      // on a slow link is no server that does not answer.
      const sending = this.timeoutMs;
      const pending: Pending = {
        resolve,
        reject,
        op,
        waitMs,
        timer: setTimeout(
          fail(`could not send the request to ${this.#where()} within ${sending} ms`),
          sending,
        ),
      };
      this.#pending.set(id, pending);
      this.#writes = this.#writes.then(() => writeAll(this.#conn, bytes)).then(() => {
        if (this.#pending.get(id) !== pending) return;
        clearTimeout(pending.timer);
        const limit = waitMs + ANSWER_GRACE_MS;
        pending.timer = setTimeout(
          fail(`the server at ${this.#where()} did not answer within ${limit} ms`),
          limit,
        );
      }).catch((error) => {
        this.#break(new Error(`cannot write to the server at ${this.#where()}: ${error}`));
      });
    });
  }

  /** Sets `key` to `value`. */
  async set(key: string, value: StoreValue): Promise<void> {
    const op = "TCPStore.set";
    await this.#request(op, Cmd.Set, [checkKey(op, key), valueBytes(op, value)]);
  }

  /** `key`'s value, waiting up to the timeout for it. */
  async get(key: string): Promise<Uint8Array> {
    const op = "TCPStore.get";
    const t = this.timeoutMs;
    return (await this.#request(op, Cmd.Get, [checkKey(op, key), String(t)], t))[0];
  }

  /** Adds `amount` to counter `key`, atomically on the server; returns the sum. */
  async add(key: string, amount: number): Promise<number> {
    const op = "TCPStore.add";
    const f = [checkKey(op, key), String(checkAmount(op, amount))];
    return Number(decoder.decode((await this.#request(op, Cmd.Add, f))[0]));
  }

  /** PyTorch's compare-and-set, atomically on the server. */
  async compareSet(key: string, expected: StoreValue, desired: StoreValue): Promise<Uint8Array> {
    const op = "TCPStore.compareSet";
    const f = [checkKey(op, key), valueBytes(op, expected), valueBytes(op, desired)];
    return (await this.#request(op, Cmd.CompareSet, f))[0];
  }

  /** Waits for every key of `keys`. */
  async wait(keys: readonly string[], timeoutMs?: number): Promise<void> {
    const op = "TCPStore.wait";
    checkKeys(op, keys);
    const t = checkTimeout(op, timeoutMs ?? this.timeoutMs);
    await this.#request(op, Cmd.Wait, [String(t), ...keys], t);
  }

  /** Removes `key`; whether it was set. */
  async deleteKey(key: string): Promise<boolean> {
    const op = "TCPStore.deleteKey";
    return decoder.decode((await this.#request(op, Cmd.Delete, [checkKey(op, key)]))[0]) === "1";
  }

  /** How many keys are set (the users' keys only). */
  async numKeys(): Promise<number> {
    return Number(decoder.decode((await this.#request("TCPStore.numKeys", Cmd.NumKeys, []))[0]));
  }

  /** Closes the connection; on the master also the server (the other users' stores then fail). */
  override async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    try {
      this.#conn.close();
    } catch {
      // Already closed.
    }
    await this.#server?.close();
  }
}
