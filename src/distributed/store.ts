/**
 * Key-value stores (`torch.distributed.Store` and its kinds): ranks meet,
 * count and pass small values through them, apart from any process group.
 * {@link HashStore} lives in one thread; `FileStore` (a file) and
 * `TCPStore` (a server on one rank) are shared by Workers and processes;
 * {@link PrefixStore} puts its keys under a prefix of another store. Every
 * method is async (the shared kinds do I/O); every wait is bounded by the
 * store's timeout.
 * @module
 */

import {
  checkAmount,
  checkKey,
  checkKeys,
  checkTimeout,
  KeyTable,
  type StoreValue,
  valueBytes,
} from "./store_core.ts";

export type { StoreValue };

/** Default of a store's timeout: 300 s, as PyTorch's. */
export const DEFAULT_STORE_TIMEOUT_MS = 300_000;

/**
 * The key-value store contract (`torch.distributed.Store`), with PyTorch's
 * methods in camelCase. Values are bytes; strings are stored as UTF-8.
 */
export abstract class Store {
  #timeoutMs: number;

  /** A store whose waits last at most `timeoutMs` (default 300 000). */
  constructor(timeoutMs: number = DEFAULT_STORE_TIMEOUT_MS) {
    this.#timeoutMs = checkTimeout(`${new.target.name}`, timeoutMs);
  }

  /** How long `get` and `wait` (without its own timeout) wait for keys, in milliseconds. */
  get timeoutMs(): number {
    return this.#timeoutMs;
  }

  /** Sets the timeout of later `get` and `wait` calls (`set_timeout`). */
  setTimeout(timeoutMs: number): void {
    this.#timeoutMs = checkTimeout(`${this.constructor.name}.setTimeout`, timeoutMs);
  }

  /** Sets `key` to `value`, replacing what it held. */
  abstract set(key: string, value: StoreValue): Promise<void>;
  /**
   * `key`'s value; waits for it to be set, up to the timeout (then a
   * `StoreTimeoutError` naming the key).
   */
  abstract get(key: string): Promise<Uint8Array>;
  /**
   * Adds `amount` to the integer `key` holds (0 when it is not set), as one
   * atomic step over every user of the store, and returns the sum. The
   * value is kept as its decimal text, so `get` gives e.g. `"5"`'s bytes.
   */
  abstract add(key: string, amount: number): Promise<number>;
  /**
   * Sets `key` to `desired` when it holds `expected` (or is unset and
   * `expected` is empty), atomically; returns what `key` then holds (when it
   * is unset and `expected` is not empty: `expected`, as PyTorch's).
   */
  abstract compareSet(key: string, expected: StoreValue, desired: StoreValue): Promise<Uint8Array>;
  /**
   * Resolves once every key of `keys` is set; waits up to `timeoutMs`
   * (default: the store's timeout), then rejects with a
   * `StoreTimeoutError` naming the keys still missing.
   */
  abstract wait(keys: readonly string[], timeoutMs?: number): Promise<void>;
  /** Removes `key`; whether it was set (`delete_key`). */
  abstract deleteKey(key: string): Promise<boolean>;
  /** How many keys are set (`num_keys`). */
  abstract numKeys(): Promise<number>;
  /** Releases what the store holds open (files, sockets); later calls fail. Idempotent. */
  close(): void | Promise<void> {}
}

/**
 * A store in this thread's memory (`torch.distributed.HashStore`): for
 * tests and for ranks that are async tasks of one thread. Workers do not
 * share it (use `FileStore` or `TCPStore` there).
 *
 * @example
 * ```ts
 * const store = new distributed.HashStore();
 * await store.set("k", "v");
 * new TextDecoder().decode(await store.get("k")); // "v"
 * ```
 */
export class HashStore extends Store {
  readonly #table = new KeyTable();

  /** An empty store; `get` and `wait` wait up to `timeoutMs` (default 300 000). */
  constructor(timeoutMs?: number) {
    super(timeoutMs);
  }

  /** Sets `key` to `value`. */
  set(key: string, value: StoreValue): Promise<void> {
    return attempt(() => {
      this.#table.put(checkKey("HashStore.set", key), valueBytes("HashStore.set", value));
    });
  }

  /** `key`'s value, waiting up to the timeout for it. */
  async get(key: string): Promise<Uint8Array> {
    checkKey("HashStore.get", key);
    await this.#table.wait("HashStore.get", [key], this.timeoutMs);
    return this.#table.peek(key)!.slice();
  }

  /** Adds `amount` to counter `key`; returns the sum. */
  add(key: string, amount: number): Promise<number> {
    return attempt(() =>
      this.#table.add(
        "HashStore.add",
        checkKey("HashStore.add", key),
        checkAmount("HashStore.add", amount),
      )
    );
  }

  /** PyTorch's compare-and-set. */
  compareSet(key: string, expected: StoreValue, desired: StoreValue): Promise<Uint8Array> {
    const op = "HashStore.compareSet";
    return attempt(() =>
      this.#table.compareSet(checkKey(op, key), valueBytes(op, expected), valueBytes(op, desired))
        .slice()
    );
  }

  /** Waits for every key of `keys`. */
  async wait(keys: readonly string[], timeoutMs?: number): Promise<void> {
    const op = "HashStore.wait";
    checkKeys(op, keys);
    await this.#table.wait(op, keys, checkTimeout(op, timeoutMs ?? this.timeoutMs));
  }

  /** Removes `key`; whether it was set. */
  deleteKey(key: string): Promise<boolean> {
    return attempt(() => this.#table.remove(checkKey("HashStore.deleteKey", key)));
  }

  /** How many keys are set. */
  numKeys(): Promise<number> {
    return Promise.resolve(this.#table.size);
  }
}

/** Runs `body` now; its value or error as a promise (the methods are async, but checks run at the call). */
function attempt<T>(body: () => T): Promise<T> {
  try {
    return Promise.resolve(body());
  } catch (error) {
    return Promise.reject(error);
  }
}

/**
 * Another store's keys under `prefix` (`torch.distributed.PrefixStore`):
 * key `k` is `${prefix}/k` there. Several users of one store keep apart
 * this way. `numKeys` counts the whole underlying store's keys (as
 * PyTorch's); the timeout is the underlying store's.
 */
export class PrefixStore extends Store {
  /** The store the keys live in. */
  readonly underlyingStore: Store;
  /** The prefix, without the "/". */
  readonly prefix: string;

  /** Keys of `store` under `prefix`. */
  constructor(prefix: string, store: Store) {
    if (!(store instanceof Store)) {
      throw new TypeError(`PrefixStore: store must be a Store, got ${String(store)}`);
    }
    super(store.timeoutMs);
    this.prefix = checkKey("PrefixStore", prefix);
    this.underlyingStore = store;
  }

  #key(op: string, key: string): string {
    return `${this.prefix}/${checkKey(`PrefixStore.${op}`, key)}`;
  }

  /** The underlying store's timeout. */
  override get timeoutMs(): number {
    return this.underlyingStore?.timeoutMs ?? super.timeoutMs;
  }

  /** Sets the underlying store's timeout. */
  override setTimeout(timeoutMs: number): void {
    this.underlyingStore.setTimeout(timeoutMs);
  }

  /** Sets `prefix/key`. */
  set(key: string, value: StoreValue): Promise<void> {
    return attempt(() => this.#key("set", key)).then((k) => this.underlyingStore.set(k, value));
  }

  /** `prefix/key`'s value, waiting for it. */
  get(key: string): Promise<Uint8Array> {
    return attempt(() => this.#key("get", key)).then((k) => this.underlyingStore.get(k));
  }

  /** Adds to counter `prefix/key`. */
  add(key: string, amount: number): Promise<number> {
    return attempt(() => this.#key("add", key)).then((k) => this.underlyingStore.add(k, amount));
  }

  /** Compare-and-set of `prefix/key`. */
  compareSet(key: string, expected: StoreValue, desired: StoreValue): Promise<Uint8Array> {
    return attempt(() => this.#key("compareSet", key)).then((k) =>
      this.underlyingStore.compareSet(k, expected, desired)
    );
  }

  /** Waits for `prefix/k` of every key. */
  wait(keys: readonly string[], timeoutMs?: number): Promise<void> {
    return attempt(() => checkKeys("PrefixStore.wait", keys).map((k) => this.#key("wait", k)))
      .then((ks) => this.underlyingStore.wait(ks, timeoutMs));
  }

  /** Removes `prefix/key`. */
  deleteKey(key: string): Promise<boolean> {
    return attempt(() => this.#key("deleteKey", key)).then((k) =>
      this.underlyingStore.deleteKey(k)
    );
  }

  /** The underlying store's number of keys. */
  numKeys(): Promise<number> {
    return this.underlyingStore.numKeys();
  }
}
