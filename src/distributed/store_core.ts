/**
 * What the stores share: value and key checks, PyTorch's compare-and-set
 * rule, and the in-memory table with waiters. Internal to the distributed
 * layer (the stores are in `store.ts`).
 * @module
 */

import { StoreTimeoutError } from "./store_error.ts";

/** A value a store holds: bytes, or a string (kept as its UTF-8 bytes, as PyTorch's). */
export type StoreValue = Uint8Array | string;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A value as a fresh byte array (a caller's array must not change the stored one). */
export function valueBytes(op: string, value: StoreValue): Uint8Array {
  if (typeof value === "string") return encoder.encode(value);
  if (value instanceof Uint8Array) return value.slice();
  throw new TypeError(
    `${op}: a store value must be a Uint8Array or a string, got ${
      value === null ? "null" : typeof value
    }`,
  );
}

/** Checks a key: a string (PyTorch's keys are strings). */
export function checkKey(op: string, key: unknown): string {
  if (typeof key !== "string") {
    throw new TypeError(
      `${op}: a store key must be a string, got ${key === null ? "null" : typeof key}`,
    );
  }
  return key;
}

/** Checks a timeout in milliseconds. */
export function checkTimeout(op: string, timeoutMs: number): number {
  if (!(timeoutMs > 0) || !Number.isFinite(timeoutMs)) {
    throw new RangeError(
      `${op}: timeoutMs must be a positive number of milliseconds, got ${timeoutMs}`,
    );
  }
  return timeoutMs;
}

/** The integer a counter key holds (`add`), or an error naming the key and value. */
export function counterValue(op: string, key: string, bytes: Uint8Array | undefined): number {
  if (bytes === undefined) return 0;
  const text = decoder.decode(bytes);
  if (!/^-?\d+$/.test(text.trim()) || !Number.isSafeInteger(Number(text))) {
    throw new TypeError(
      `${op}: key "${key}" holds ${
        JSON.stringify(text.slice(0, 40))
      }, not an integer: add counts only on keys that add made (or that hold a decimal integer)`,
    );
  }
  return Number(text);
}

/**
 * `add`'s new value of counter `key`: an error naming the key when the sum
 * is past 2^53 - 1 in size (beyond it a number is no longer exact; PyTorch
 * counts in int64).
 */
export function counterSum(
  op: string,
  key: string,
  bytes: Uint8Array | undefined,
  amount: number,
): number {
  const before = counterValue(op, key, bytes);
  const sum = before + amount;
  if (!Number.isSafeInteger(sum)) {
    throw new RangeError(
      `${op}: key "${key}" would hold ${before} + ${amount}, past the exact integers (±${Number.MAX_SAFE_INTEGER})`,
    );
  }
  return sum;
}

/** Checks `add`'s amount. */
export function checkAmount(op: string, amount: number): number {
  if (!Number.isSafeInteger(amount)) {
    throw new RangeError(`${op}: amount must be an integer, got ${amount}`);
  }
  return amount;
}

/** What `compareSet` stores (or null: nothing) and returns, PyTorch's rule. */
export function compareSetRule(
  current: Uint8Array | undefined,
  expected: Uint8Array,
  desired: Uint8Array,
): { store: Uint8Array | null; result: Uint8Array } {
  if (current === undefined) {
    return expected.length === 0
      ? { store: desired, result: desired }
      : { store: null, result: expected };
  }
  const same = current.length === expected.length && current.every((b, i) => b === expected[i]);
  return same ? { store: desired, result: desired } : { store: null, result: current };
}

/** Checks `wait`'s keys. */
export function checkKeys(op: string, keys: unknown): readonly string[] {
  if (!Array.isArray(keys)) {
    throw new TypeError(`${op}: keys must be an array of strings, got ${String(keys)}`);
  }
  keys.forEach((k) => checkKey(op, k));
  return keys;
}

/**
 * An in-memory map whose waiters wake when keys are set: the
 * body of {@link HashStore} and of `TCPStore`'s server.
 */
export class KeyTable {
  readonly #map = new Map<string, Uint8Array>();
  readonly #waiters = new Set<
    { keys: readonly string[]; wake: () => void; fail: (error: Error) => void }
  >();

  /** The value of `key`, or undefined. */
  peek(key: string): Uint8Array | undefined {
    return this.#map.get(key);
  }

  /** Sets `key` and wakes the waiters whose keys are all set now. */
  put(key: string, value: Uint8Array): void {
    this.#map.set(key, value);
    for (const waiter of this.#waiters) {
      if (waiter.keys.every((k) => this.#map.has(k))) {
        this.#waiters.delete(waiter);
        waiter.wake();
      }
    }
  }

  /** Removes `key`; whether it was there. */
  remove(key: string): boolean {
    return this.#map.delete(key);
  }

  /** Number of keys. */
  get size(): number {
    return this.#map.size;
  }

  /** Adds `amount` to counter `key` and returns the sum. */
  add(op: string, key: string, amount: number): number {
    const sum = counterSum(op, key, this.#map.get(key), amount);
    this.put(key, encoder.encode(String(sum)));
    return sum;
  }

  /** PyTorch's compare-and-set; returns what the key then holds. */
  compareSet(key: string, expected: Uint8Array, desired: Uint8Array): Uint8Array {
    const { store, result } = compareSetRule(this.#map.get(key), expected, desired);
    if (store) this.put(key, store);
    return result;
  }

  /**
   * Rejects every pending {@link wait} with `error` now (a closing server:
   * their timers must not outlive it).
   */
  cancelWaits(error: Error): void {
    for (const waiter of this.#waiters) waiter.fail(error);
    this.#waiters.clear();
  }

  /** Resolves when every key is set, or rejects after `timeoutMs` naming the missing ones. */
  wait(op: string, keys: readonly string[], timeoutMs: number): Promise<void> {
    if (keys.every((k) => this.#map.has(k))) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const waiter = {
        keys,
        wake: () => {
          clearTimeout(timer);
          resolve();
        },
        fail: (error: Error) => {
          clearTimeout(timer);
          reject(error);
        },
      };
      const timer = setTimeout(() => {
        this.#waiters.delete(waiter);
        reject(new StoreTimeoutError(op, keys.filter((k) => !this.#map.has(k)), timeoutMs));
      }, timeoutMs);
      this.#waiters.add(waiter);
    });
  }
}
