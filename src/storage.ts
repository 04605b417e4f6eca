/**
 * Device memory behind tensors, and its release.
 *
 * JavaScript frees objects when the garbage collector gets to them, which for
 * a few small tensor objects can be thousands of training steps later while
 * megabytes of GPU memory wait. So memory is released three ways: at once by
 * `dispose()`, at the end of a `tidy(fn)` scope for everything the scope made
 * and did not return or keep (as TensorFlow.js does), and by a
 * FinalizationRegistry as the last resort (reads give its callbacks the
 * event-loop turn they need, see {@link settleReleases}). Storage assigned to parameters,
 * gradients, buffers and optimizer state is marked persistent and survives
 * tidy scopes.
 * @module
 */

import type { DeviceBuffer } from "./backends/backend.ts";
import type { Device } from "./device.ts";
import type { Tensor } from "./tensor.ts";
import type { DType } from "./dtype.ts";
import { isPlainObject } from "./util.ts";

interface Held {
  readonly device: Device;
  readonly buffer: DeviceBuffer;
}

/** Frees `buffer` once the work queued ahead of it has run. */
function freeLater({ device, buffer }: Held): void {
  try {
    device.stream.submit(() => device.backendDevice.free(buffer));
  } catch {
    // A destroyed or lost device has nothing left to free.
  }
}

const finalizer = new FinalizationRegistry<Held>(freeLater);

const scopes: Set<Storage>[] = [];

// Storages made outside every tidy scope since reads last let the event loop
// turn: they may be garbage whose FinalizationRegistry callback is waiting.
let unscopedSinceTurn = 0;
let settling: Promise<void> | undefined;

/**
 * Lets the event loop run one macrotask turn when storages made outside
 * every tidy scope may be waiting for their FinalizationRegistry callback,
 * which only runs between macrotasks. A read on the cpu backend resolves
 * without one, so a plain training loop that awaits cpu reads would
 * otherwise never release the memory of tensors it dropped. A message on a
 * MessageChannel is a macrotask that costs microseconds (a `setTimeout(0)`
 * is clamped to milliseconds once nested); reads after nothing unscoped was
 * made skip it.
 */
export function settleReleases(): Promise<void> | undefined {
  // A read issued while a turn is pending waits for it too, so that reads
  // still resolve in the order they were made.
  if (unscopedSinceTurn === 0) return settling;
  unscopedSinceTurn = 0;
  settling ??= new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => {
      channel.port1.close();
      channel.port2.close();
      settling = undefined;
      resolve();
    };
    channel.port2.postMessage(null);
  });
  return settling;
}

/** Memory for `numel` elements of `dtype` on one device. */
export class Storage {
  #buffer: DeviceBuffer | null;
  /** Survives tidy scopes (parameters, gradients, buffers, optimizer state). */
  persistent = false;

  /** Takes ownership of `buffer`. */
  constructor(
    readonly device: Device,
    buffer: DeviceBuffer,
    readonly numel: number,
    readonly dtype: DType,
  ) {
    this.#buffer = buffer;
    finalizer.register(this, { device, buffer }, this);
    const scope = scopes.at(-1);
    if (scope) scope.add(this);
    else unscopedSinceTurn++;
  }

  /** Allocates fresh storage on `device`. */
  static allocate(device: Device, numel: number, dtype: DType): Storage {
    if (!device.backendDevice.dtypes.includes(dtype)) {
      throw new TypeError(
        `dtype ${dtype} is not supported on ${device} (supported: ${
          device.backendDevice.dtypes.join(", ")
        })`,
      );
    }
    return new Storage(device, device.backendDevice.allocate(numel, dtype), numel, dtype);
  }

  /** Whether {@link dispose} was called. */
  get disposed(): boolean {
    return this.#buffer === null;
  }

  /** The backend buffer, or an error naming `what` if it was disposed. */
  buffer(what = "tensor"): DeviceBuffer {
    if (this.#buffer === null) {
      throw new Error(
        `${what}: the tensor's memory on ${this.device} was released (dispose(), tidy() or zeroGrad()); keep() it or use it inside the scope`,
      );
    }
    return this.#buffer;
  }

  /** Gives the memory back once the work queued on it has run. */
  dispose(): void {
    const buffer = this.#buffer;
    if (buffer === null) return;
    this.#buffer = null;
    finalizer.unregister(this);
    freeLater({ device: this.device, buffer });
  }
}

/** Something that owns storage: a tensor. */
export interface HasStorage {
  /** The storage. */
  readonly storage: Storage;
}

function collect(value: unknown, into: Set<Storage>, seen: Set<unknown>): void {
  if (value === null || typeof value !== "object" || seen.has(value)) return;
  seen.add(value);
  if ("storage" in value && (value as HasStorage).storage instanceof Storage) {
    into.add((value as HasStorage).storage);
    return;
  }
  if (Array.isArray(value)) {
    for (const v of value) collect(v, into, seen);
    return;
  }
  if (value instanceof Map) {
    for (const v of value.values()) collect(v, into, seen);
    return;
  }
  if (isPlainObject(value)) {
    for (const v of Object.values(value)) collect(v, into, seen);
  }
}

/**
 * Runs `fn` and releases the memory of every tensor created inside it, except
 * the tensors it returns (in arrays and plain objects too), persistent ones
 * (parameters, gradients, optimizer state) and those passed to `keep`. `fn`
 * must be synchronous: ops never await. If `fn` throws, everything it made
 * that is not persistent or kept is released and the error rethrown.
 */
export function tidy<T>(fn: () => T): T {
  const scope = new Set<Storage>();
  scopes.push(scope);
  let result: T;
  try {
    result = fn();
  } catch (error) {
    scopes.pop();
    for (const storage of scope) if (!storage.persistent) storage.dispose();
    throw error;
  }
  scopes.pop();
  if (result instanceof Promise) {
    throw new TypeError(
      "tidy(fn): fn returned a Promise; tidy scopes are synchronous (await data() after tidy returns)",
    );
  }
  const kept = new Set<Storage>();
  collect(result, kept, new Set());
  const outer = scopes.at(-1);
  for (const storage of scope) {
    if (storage.persistent || kept.has(storage)) {
      if (!storage.persistent) outer?.add(storage);
      continue;
    }
    storage.dispose();
  }
  return result;
}

/** Marks a tensor's memory to survive every enclosing {@link tidy} scope. */
export function keep<T extends Tensor>(tensor: T): T {
  for (const scope of scopes) scope.delete(tensor.storage);
  return tensor;
}

/**
 * @internal Puts a tensor's memory under the innermost {@link tidy} scope, as
 * if it had been made there: for tensors made ahead of use (a data loader's
 * prefetched batch), which belong to the scope they are handed out in.
 */
export function adopt<T extends HasStorage>(tensor: T): T {
  if (!tensor.storage.persistent) scopes.at(-1)?.add(tensor.storage);
  return tensor;
}
