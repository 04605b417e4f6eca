/**
 * The worker identity `getWorkerInfo` reports: set once by the worker's
 * bootstrap (`worker_entry.ts`), read by `getWorkerInfo`. Kept apart from
 * the public module so that the setter is not public API.
 * @module
 */

let current: object | null = null;

/** The info the bootstrap set in this Worker, or null. */
export function currentWorker(): object | null {
  return current;
}

/** Called by the bootstrap of a loader's Worker, before the user's init function. */
export function setCurrentWorker(info: object): void {
  current = Object.freeze(info);
}
