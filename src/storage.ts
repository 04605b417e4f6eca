/**
 * Device memory behind tensors, and its release.
 *
 * JavaScript frees objects when the garbage collector gets to them, which for
 * a few small tensor objects can be thousands of training steps later while
 * megabytes of GPU memory wait. So memory is released four ways: at once by
 * `dispose()`; at the end of a `tidy(fn)` scope for everything the scope made
 * and did not return or keep (as TensorFlow.js does); by the autograd graph,
 * to which a scope hands what backward still needs, as backward runs through
 * it (layers, losses and DataParallel run in such scopes, so a plain training
 * loop frees its activations at backward); and by a FinalizationRegistry as
 * the last resort, for what the user held (reads give its callbacks the
 * event-loop turn they need, see {@link settleReleases}). Storage assigned to
 * parameters, gradients, buffers and optimizer state is marked persistent and
 * survives tidy scopes.
 * @module
 */

import type { DeviceBuffer } from "./backends/backend.ts";
import type { Device } from "./device.ts";
import type { Tensor } from "./tensor.ts";
import { type DType, getDefaultDtype } from "./dtype.ts";
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

// Ticks at every allocation and in-place update: what existed, and what was
// changed, before or after a point (an op recorded for backward).
let clock = 0;
// The op whose backward runs now, and the tick it was recorded at.
let backwardOf: { readonly op: string; readonly recordedAt: number } | null = null;

/** The current tick (see {@link Storage.markModified}). */
export function now(): number {
  return clock;
}

/**
 * Runs `fn`, the backward of `op` recorded at tick `recordedAt`, so that
 * reading memory made before and changed in place after that tick throws
 * (PyTorch's version-counter check on saved tensors).
 */
export function asBackwardOf<T>(op: string, recordedAt: number, fn: () => T): T {
  const outer = backwardOf;
  backwardOf = { op, recordedAt };
  try {
    return fn();
  } finally {
    backwardOf = outer;
  }
}

/** @internal The op whose backward runs now, if any (for error messages). */
export const backwardOp = (): string | null => backwardOf?.op ?? null;

/** Memory for `numel` elements of `dtype` on one device. */
export class Storage {
  #buffer: DeviceBuffer | null;
  /** Survives tidy scopes (parameters, gradients, buffers, optimizer state). */
  persistent = false;
  /** How many times it was changed in place (PyTorch's `_version`). */
  version = 0;
  /** A reshape view shares it: a recorded in-place change would miss the other tensor's history. */
  aliased = false;
  /** [min, max] of int values written from the host, while they are unchanged. */
  knownRange: readonly [number, number] | null = null;
  /** The tick it was allocated at (see {@link now}). */
  readonly madeAt: number = ++clock;
  #changedAt = 0;

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
    if (scope) scope.storages.add(this);
    else unscopedSinceTurn++;
  }

  /** Allocates fresh storage on `device`. */
  static allocate(device: Device, numel: number, dtype: DType): Storage {
    if (!device.backendDevice.dtypes.includes(dtype)) {
      const cause = dtype !== "float32" && dtype === getDefaultDtype()
        ? `; ${dtype} is the default dtype: setDefaultDtype("float32") sets it back (or pass a dtype)`
        : "";
      throw new TypeError(
        `dtype ${dtype} is not supported on ${device} (supported: ${
          device.backendDevice.dtypes.join(", ")
        })${cause}`,
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
    const node = backwardOf;
    if (node && this.madeAt <= node.recordedAt && this.#changedAt > node.recordedAt) {
      const what = this.persistent ? "a parameter or buffer" : "a tensor";
      throw new Error(
        `${node.op} backward: ${what} it saved (${this.dtype}, ${this.numel} element${
          this.numel === 1 ? "" : "s"
        } on ${this.device}) was modified in place after ${node.op} was recorded (it is now at version ${this.version}), so its gradient would be wrong; an optimizer step or another in-place update ran between forward and backward. Call backward() first, or clone() the tensor before the op.`,
      );
    }
    return this.#buffer;
  }

  /** Records an in-place change (optimizer step, `_assign`, a collective). */
  markModified(): void {
    this.version++;
    this.knownRange = null;
    this.#changedAt = ++clock;
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

/**
 * What a scope sees of an autograd node: enough to tell whether backward can
 * still run through it and to tie memory to it. The storage layer knows
 * nothing else of autograd.
 */
export interface GraphNode {
  /** False once backward has run through it without `retainGraph`. */
  readonly live: boolean;
  /** The nodes that made its inputs (toward the leaves). */
  producers(): Iterable<GraphNode>;
  /** Frees `group`'s memory when this node is released, once its other nodes are. */
  join(group: ReleaseGroup): void;
  /** Drops what backward would have needed (idempotent). */
  release(): void;
}

/**
 * Memory a scope made that only the graph still needs: freed when the last
 * of its nodes is released (as backward does), or by the garbage collector
 * if backward never comes.
 */
export class ReleaseGroup {
  #storages: Storage[];
  #pending: number;

  /** `storages`, freed once `nodes` nodes have each called {@link nodeReleased}. */
  constructor(storages: Storage[], nodes: number) {
    this.#storages = storages;
    this.#pending = nodes;
  }

  /** One more node holds the memory (recorded by a backward under createGraph). */
  share(): this {
    this.#pending++;
    return this;
  }

  /** One of the group's nodes was released. */
  nodeReleased(): void {
    if (--this.#pending > 0) return;
    for (const storage of this.#storages) if (!storage.persistent) storage.dispose();
    this.#storages = [];
  }
}

interface Scope {
  /** Storage made while this scope was the innermost. */
  readonly storages: Set<Storage>;
  /** Nodes recorded in this scope, or in inner ones that returned them. */
  readonly nodes: GraphNode[];
  /** Nodes of tensors passed to {@link keep}: the graph behind them stays usable. */
  readonly keptNodes: GraphNode[];
}

const scopes: Scope[] = [];

/** @internal Puts a freshly recorded node under the innermost {@link tidy} scope. */
export function noteNode(node: GraphNode): void {
  scopes.at(-1)?.nodes.push(node);
}

/**
 * Adds the storage of every tensor in `value` (tensors, arrays, Maps and
 * plain objects of them) to `into` and their nodes to `roots`. Returns false
 * when `value` holds an object it cannot look into (a class instance).
 */
function collect(
  value: unknown,
  into: Set<Storage>,
  roots: GraphNode[],
  seen: Set<unknown>,
): boolean {
  if (value === null || typeof value !== "object" || seen.has(value)) return true;
  seen.add(value);
  if ("storage" in value && (value as HasStorage).storage instanceof Storage) {
    into.add((value as HasStorage).storage);
    const node = (value as { gradFn?: GraphNode | null }).gradFn;
    if (node) roots.push(node);
    return true;
  }
  let seeThrough = true;
  if (Array.isArray(value)) {
    for (const v of value) seeThrough = collect(v, into, roots, seen) && seeThrough;
  } else if (value instanceof Map) {
    for (const v of value.values()) seeThrough = collect(v, into, roots, seen) && seeThrough;
  } else if (isPlainObject(value)) {
    for (const v of Object.values(value)) seeThrough = collect(v, into, roots, seen) && seeThrough;
  } else return false;
  return seeThrough;
}

/** The scope's nodes that backward can still reach from `roots`. */
function liveNodes(scope: Scope, roots: GraphNode[]): Set<GraphNode> {
  const mine = new Set(scope.nodes);
  const live = new Set<GraphNode>();
  const stack = [...roots, ...scope.keptNodes];
  while (stack.length > 0) {
    const node = stack.pop()!;
    if (live.has(node) || !mine.has(node) || !node.live) continue;
    live.add(node);
    for (const producer of node.producers()) stack.push(producer);
  }
  return live;
}

/**
 * Runs `fn` and releases the memory of every tensor created inside it, except
 * the tensors it returns (in arrays and plain objects too), persistent ones
 * (parameters, gradients, optimizer state) and those passed to `keep`. `fn`
 * must be synchronous: ops never await. If `fn` throws, everything it made
 * that is not persistent or kept is released and the error rethrown.
 *
 * Memory that backward still needs is handed to the graph instead: when the
 * returned (or kept) tensors have a history through operations recorded in
 * the scope, what the scope made stays until backward has run through those
 * operations (without `retainGraph`), so `tidy(() => model.forward(x))`
 * followed by `backward()` outside works and frees it. Library layers and
 * losses run in such scopes, so a plain training loop frees its activations
 * at backward without `tidy`.
 */
export function tidy<T>(fn: () => T): T {
  return runScope(fn, false);
}

/**
 * @internal {@link tidy} for the library's own layers and losses: the same,
 * except that a result holding objects it cannot look into (a user module's
 * class instance) leaves everything to the enclosing scope.
 */
export function forwardScope<T>(fn: () => T): T {
  return runScope(fn, true);
}

function runScope<T>(fn: () => T, lenient: boolean): T {
  const scope: Scope = { storages: new Set(), nodes: [], keptNodes: [] };
  scopes.push(scope);
  let result: T;
  try {
    result = fn();
  } catch (error) {
    scopes.pop();
    for (const node of scope.nodes) node.release();
    for (const storage of scope.storages) if (!storage.persistent) storage.dispose();
    throw error;
  }
  scopes.pop();
  if (result instanceof Promise) {
    throw new TypeError(
      "tidy(fn): fn returned a Promise; tidy scopes are synchronous (await data() after tidy returns)",
    );
  }
  const kept = new Set<Storage>();
  const roots: GraphNode[] = [];
  const outer = scopes.at(-1);
  if (!collect(result, kept, roots, new Set()) && lenient) {
    // As if there had been no scope.
    for (const storage of scope.storages) {
      if (outer) outer.storages.add(storage);
      else unscopedSinceTurn++;
    }
    outer?.nodes.push(...scope.nodes);
    return result;
  }
  const live = scope.nodes.length > 0 ? liveNodes(scope, roots) : new Set<GraphNode>();
  // Nodes nothing returned can reach are dead: backward can never run them.
  for (const node of scope.nodes) if (!live.has(node)) node.release();
  const dropped: Storage[] = [];
  for (const storage of scope.storages) {
    if (storage.persistent || kept.has(storage)) {
      if (!storage.persistent) outer?.storages.add(storage);
    } else if (!storage.disposed) dropped.push(storage);
  }
  if (live.size === 0) {
    for (const storage of dropped) storage.dispose();
  } else {
    if (dropped.length > 0) {
      const group = new ReleaseGroup(dropped, live.size);
      for (const node of live) node.join(group);
    }
    outer?.nodes.push(...live);
  }
  return result;
}

/** @internal Whether `storage` was made inside the innermost open {@link tidy} scope. */
export function madeInScope(storage: Storage): boolean {
  return scopes.at(-1)?.storages.has(storage) ?? false;
}

/** Marks a tensor's memory to survive every enclosing {@link tidy} scope. */
export function keep<T extends Tensor>(tensor: T): T {
  const node = tensor.gradFn;
  for (const scope of scopes) {
    scope.storages.delete(tensor.storage);
    if (node) scope.keptNodes.push(node);
  }
  return tensor;
}

/**
 * @internal Puts a tensor's memory under the innermost {@link tidy} scope, as
 * if it had been made there: for tensors made ahead of use (a data loader's
 * prefetched batch), which belong to the scope they are handed out in.
 */
export function adopt<T extends HasStorage>(tensor: T): T {
  if (!tensor.storage.persistent) scopes.at(-1)?.storages.add(tensor.storage);
  return tensor;
}
