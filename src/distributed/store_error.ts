/**
 * The error a store's bounded waits end with.
 * @module
 */

/**
 * A store's `get` or `wait` found some keys still missing when its timeout
 * passed. `keys` are those keys.
 */
export class StoreTimeoutError extends Error {
  /** The keys that were not set in time. */
  readonly keys: readonly string[];

  /** `op` waited `timeoutMs` for `keys`. */
  constructor(op: string, keys: readonly string[], timeoutMs: number) {
    super(
      `${op}: ${keys.length === 1 ? "key" : "keys"} ${
        keys.map((k) => JSON.stringify(k)).join(", ")
      } ${keys.length === 1 ? "was" : "were"} not set within ${timeoutMs} ms`,
    );
    this.name = "StoreTimeoutError";
    this.keys = keys;
  }
}
