/**
 * `torch.distributed.FileStore`: a store in a file that every Worker and
 * process naming the same path shares. The file is a log of records (set,
 * delete) appended under an exclusive `flock`; each user reads the records
 * it has not seen under a shared one, so every step (`add`, `compareSet`)
 * is atomic across users.
 * @module
 */

import { Store } from "./store.ts";
import {
  checkAmount,
  checkKey,
  checkKeys,
  checkTimeout,
  compareSetRule,
  counterSum,
  type StoreValue,
  valueBytes,
} from "./store_core.ts";
import { StoreTimeoutError } from "./store_error.ts";

const SET = 1;
const DELETE = 2;
const encoder = new TextEncoder();
const decoder = new TextDecoder();
/** Polling of a waiting `get`/`wait`: from 1 ms, doubling, up to this. */
const MAX_POLL_MS = 20;

/** Options of {@link FileStore}. */
export interface FileStoreOptions {
  /** How long `get` and `wait` wait for keys (default 300 000 ms). */
  timeoutMs?: number;
}

/**
 * A store in the file at `path` (made when missing), shared by every
 * Worker and process that opens the same path; `close()` when done.
 * Unlike PyTorch's, it takes no world size and never deletes the file
 * (delete it when every user is done); the file grows with every `set`.
 *
 * @example
 * ```ts
 * const store = new distributed.FileStore("/tmp/rendezvous");
 * await store.add("joined", 1); // in each of the ranks
 * await store.wait(["ready"]);
 * ```
 */
export class FileStore extends Store {
  /** The file's path. */
  readonly path: string;
  #file: Deno.FsFile | null = null;
  #closed = false;
  /** How much of the file this user has applied to {@link #map}. */
  #offset = 0;
  readonly #map = new Map<string, Uint8Array>();

  /** A store in the file at `path`. */
  constructor(path: string, options: FileStoreOptions = {}) {
    super(options.timeoutMs);
    if (typeof path !== "string" || path === "") {
      throw new TypeError(`FileStore: path must be a non-empty string, got ${String(path)}`);
    }
    this.path = path;
  }

  #open(op: string): Deno.FsFile {
    if (this.#closed) throw new Error(`${op}: the FileStore of ${this.path} is closed`);
    if (!this.#file) {
      try {
        this.#file = Deno.openSync(this.path, { read: true, write: true, create: true });
      } catch (error) {
        throw new Error(`${op}: cannot open the FileStore's file ${this.path}: ${error}`, {
          cause: error,
        });
      }
    }
    return this.#file;
  }

  /** Runs `body` holding the file's lock (shared to read, exclusive to write), after reading new records. */
  #locked<T>(op: string, exclusive: boolean, body: () => T): T {
    const file = this.#open(op);
    file.lockSync(exclusive);
    try {
      this.#refresh(file);
      return body();
    } finally {
      file.unlockSync();
    }
  }

  /** Applies the records other users appended since this one last read. */
  #refresh(file: Deno.FsFile): void {
    const size = file.statSync().size;
    if (size <= this.#offset) return;
    const bytes = new Uint8Array(size - this.#offset);
    file.seekSync(this.#offset, Deno.SeekMode.Start);
    let got = 0;
    while (got < bytes.length) {
      const n = file.readSync(bytes.subarray(got));
      if (n === null || n === 0) break;
      got += n;
    }
    const view = new DataView(bytes.buffer);
    let at = 0;
    while (at + 5 <= got) {
      const kind = bytes[at];
      const keyLength = view.getUint32(at + 1, true);
      const key = decoder.decode(bytes.subarray(at + 5, at + 5 + keyLength));
      at += 5 + keyLength;
      if (kind === SET) {
        const valueLength = view.getUint32(at, true);
        this.#map.set(key, bytes.slice(at + 4, at + 4 + valueLength));
        at += 4 + valueLength;
      } else if (kind === DELETE) this.#map.delete(key);
      else {
        throw new Error(
          `FileStore: ${this.path} is not a FileStore's file (record of kind ${kind} at byte ${
            this.#offset + at
          })`,
        );
      }
    }
    this.#offset += at;
  }

  /** Appends a record (the lock is held exclusively and the file is read to its end). */
  #append(file: Deno.FsFile, key: string, value: Uint8Array | null): void {
    const k = encoder.encode(key);
    const record = new Uint8Array(5 + k.length + (value ? 4 + value.length : 0));
    const view = new DataView(record.buffer);
    record[0] = value ? SET : DELETE;
    view.setUint32(1, k.length, true);
    record.set(k, 5);
    if (value) {
      view.setUint32(5 + k.length, value.length, true);
      record.set(value, 9 + k.length);
    }
    file.seekSync(0, Deno.SeekMode.End);
    let written = 0;
    while (written < record.length) written += file.writeSync(record.subarray(written));
    this.#offset += record.length;
    if (value) this.#map.set(key, value);
    else this.#map.delete(key);
  }

  /** Resolves once `keys` are all set (polling the file), or rejects after `timeoutMs`. */
  async #waitFor(op: string, keys: readonly string[], timeoutMs: number): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    let pause = 1;
    for (;;) {
      const missing = this.#locked(op, false, () => keys.filter((k) => !this.#map.has(k)));
      if (missing.length === 0) return;
      const left = deadline - performance.now();
      if (left <= 0) throw new StoreTimeoutError(op, missing, timeoutMs);
      await new Promise((resolve) => setTimeout(resolve, Math.min(pause, left)));
      pause = Math.min(pause * 2, MAX_POLL_MS);
    }
  }

  /** Sets `key` to `value`. */
  set(key: string, value: StoreValue): Promise<void> {
    return run(() => {
      const op = "FileStore.set";
      const [k, v] = [checkKey(op, key), valueBytes(op, value)];
      this.#locked(op, true, () => this.#append(this.#file!, k, v));
    });
  }

  /** `key`'s value, waiting up to the timeout for it. */
  async get(key: string): Promise<Uint8Array> {
    const op = "FileStore.get";
    await this.#waitFor(op, [checkKey(op, key)], this.timeoutMs);
    return this.#map.get(key)!.slice();
  }

  /** Adds `amount` to counter `key`, atomically over every user of the file; returns the sum. */
  add(key: string, amount: number): Promise<number> {
    return run(() => {
      const op = "FileStore.add";
      const [k, a] = [checkKey(op, key), checkAmount(op, amount)];
      return this.#locked(op, true, () => {
        const sum = counterSum(op, k, this.#map.get(k), a);
        this.#append(this.#file!, k, encoder.encode(String(sum)));
        return sum;
      });
    });
  }

  /** PyTorch's compare-and-set, atomically over every user of the file. */
  compareSet(key: string, expected: StoreValue, desired: StoreValue): Promise<Uint8Array> {
    return run(() => {
      const op = "FileStore.compareSet";
      const [k, e, d] = [checkKey(op, key), valueBytes(op, expected), valueBytes(op, desired)];
      return this.#locked(op, true, () => {
        const { store, result } = compareSetRule(this.#map.get(k), e, d);
        if (store) this.#append(this.#file!, k, store);
        return result.slice();
      });
    });
  }

  /** Waits for every key of `keys`. */
  async wait(keys: readonly string[], timeoutMs?: number): Promise<void> {
    const op = "FileStore.wait";
    checkKeys(op, keys);
    await this.#waitFor(op, keys, checkTimeout(op, timeoutMs ?? this.timeoutMs));
  }

  /** Removes `key`; whether it was set. */
  deleteKey(key: string): Promise<boolean> {
    return run(() => {
      const op = "FileStore.deleteKey";
      const k = checkKey(op, key);
      return this.#locked(op, true, () => {
        if (!this.#map.has(k)) return false;
        this.#append(this.#file!, k, null);
        return true;
      });
    });
  }

  /** How many keys are set. */
  numKeys(): Promise<number> {
    return run(() => this.#locked("FileStore.numKeys", false, () => this.#map.size));
  }

  /** Closes the file (it stays on disk). */
  override close(): void {
    this.#closed = true;
    this.#file?.close();
    this.#file = null;
  }
}

function run<T>(body: () => T): Promise<T> {
  try {
    return Promise.resolve(body());
  } catch (error) {
    return Promise.reject(error);
  }
}
