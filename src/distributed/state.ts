/**
 * The process-group registry and this thread's group: internal to the
 * distributed layer (the public functions are in `group.ts`).
 * @module
 */

import {
  type CallShape,
  type CollectiveCall,
  describeHeader,
  DistributedError,
  DistributedGroup,
  packHeader,
  type ProcessGroupBackend,
  type ProcessGroupFactory,
} from "./backend.ts";

const registry = new Map<string, ProcessGroupFactory>();

/** @internal Adds or replaces a backend factory. */
export function registerFactory(name: string, factory: ProcessGroupFactory): void {
  if (!/^[a-z][a-z0-9_-]*$/.test(name)) {
    throw new TypeError(
      `registerProcessGroupBackend: name must be lower-case letters, digits, - or _, got "${name}"`,
    );
  }
  if (typeof factory !== "function") {
    throw new TypeError(
      `registerProcessGroupBackend: the factory of "${name}" must be a function, got ${typeof factory}`,
    );
  }
  registry.set(name, factory);
}

/** @internal The factory registered as `name`, or an error listing the registered ones. */
export function factoryOf(name: string): ProcessGroupFactory {
  const factory = registry.get(name);
  if (!factory) {
    throw new Error(
      `initProcessGroup: no process-group backend "${name}" (registered: ${
        [...registry.keys()].join(", ")
      }; add one with registerProcessGroupBackend)`,
    );
  }
  return factory;
}

/**
 * This thread's process group: the backend plus what every backend needs
 * from the tensor layer: call numbering and running one collective at a
 * time, in call order. A failed collective breaks the group (the ranks no
 * longer agree on where they are), so later ones fail at once.
 */
export class ProcessGroup {
  #seq = 0;
  #tail: Promise<void> = Promise.resolve();
  #queued = 0;
  #failure: Error | null = null;
  #destroyed = false;
  readonly #p2pSeq = new Map<string, number>();
  /** Point-to-point calls in flight (settled promises that never reject). */
  readonly #p2p = new Set<Promise<void>>();
  /** The sub-groups made from this group (`newGroup`), destroyed with it. */
  readonly subgroups: ProcessGroup[] = [];
  /** How many `newGroup` calls this group has seen (members or not). */
  newGroups = 0;

  /**
   * Wraps a started backend; `members`: for a sub-group, the whole group's
   * rank of each of its ranks (its errors then say so).
   */
  constructor(
    readonly backendName: string,
    readonly backend: ProcessGroupBackend,
    readonly timeoutMs: number,
    readonly members: readonly number[] | null = null,
  ) {}

  /** A sub-group's error, with the ranks it names translated to the whole group's. */
  #inGroup(error: unknown): unknown {
    const members = this.members;
    if (!members || !(error instanceof Error)) return error;
    const ranks = error instanceof DistributedError ? error.ranks.map((q) => members[q]) : [];
    return new DistributedError(
      `in the group of ranks [${
        members.join(", ")
      }] (its rank i is rank members[i] of the whole group): ${error.message}`,
      ranks,
      { cause: error },
    );
  }

  /** This rank. */
  get rank(): number {
    return this.backend.rank;
  }

  /** Number of ranks. */
  get worldSize(): number {
    return this.backend.worldSize;
  }

  /** Numbers the next call (in program order, at the call) and packs its header. */
  call(shape: Omit<CallShape, "seq">): CollectiveCall {
    return ProcessGroup.#make(shape, this.#seq++);
  }

  /**
   * Numbers the next call now, in program order, and packs its header later with the function
   * returned: for the second exchange of a collective whose first exchange decides its size (an
   * uneven all-to-all pads every part to the longest, which only the first tells).
   */
  reserveCall(): (shape: Omit<CallShape, "seq">) => CollectiveCall {
    const seq = this.#seq++;
    return (shape) => ProcessGroup.#make(shape, seq);
  }

  /**
   * Numbers a point-to-point call and packs its header. Sends to a rank
   * and receives from it are counted per peer and tag, apart from the
   * collectives (whose numbers every rank must share).
   */
  p2pCall(shape: Omit<CallShape, "seq">): CollectiveCall {
    const key = `${shape.kind} ${shape.src ?? shape.dst} ${shape.tag ?? 0}`;
    const seq = this.#p2pSeq.get(key) ?? 0;
    this.#p2pSeq.set(key, seq + 1);
    return ProcessGroup.#make(shape, seq);
  }

  static #make(shape: Omit<CallShape, "seq">, seq: number): CollectiveCall {
    return {
      kind: shape.kind,
      seq,
      dtype: shape.dtype,
      op: shape.op,
      src: shape.src,
      dst: shape.dst,
      tag: shape.tag,
      header: packHeader({ ...shape, seq }),
    };
  }

  /** Throws when the group failed or was destroyed: `call` cannot run. */
  #checkUsable(call: CollectiveCall): void {
    const failure = this.#failure;
    if (failure) {
      const ranks = failure instanceof DistributedError ? failure.ranks : [];
      throw new DistributedError(
        `${
          describeHeader(call.header)
        }: the process group failed at an earlier collective, so no collective can run after it: ${failure.message}`,
        ranks,
        { cause: failure },
      );
    }
    if (this.#destroyed) {
      throw new Error(
        `${describeHeader(call.header)}: the process group was destroyed before it ran`,
      );
    }
  }

  /** Collectives started on this rank that have not settled yet (they run only as its event loop does). */
  get queued(): number {
    return this.#queued;
  }

  /**
   * Runs a blocking collective (`allGatherSync`) now, apart from the
   * queue of the others; its failure breaks the group like theirs.
   */
  runSync<T>(call: CollectiveCall, body: () => T): T {
    this.#checkUsable(call);
    try {
      return body();
    } catch (error) {
      this.#failure ??= error instanceof Error ? error : new Error(String(error));
      throw this.#inGroup(error);
    }
  }

  /** Runs `body` (which calls the backend once) after every earlier collective settled. */
  run<T>(call: CollectiveCall, body: () => Promise<T>): Promise<T> {
    this.#queued++;
    const ran = this.#tail.then(() => {
      this.#checkUsable(call);
      return body();
    });
    this.#tail = this.#failOn(ran).finally(() => this.#queued--);
    return this.#named(ran);
  }

  /**
   * Runs a point-to-point `body` at once, beside the collectives' queue (a
   * send must not wait for a collective its receiver only reaches after
   * receiving). Its failure breaks the group like a collective's.
   */
  runP2P<T>(call: CollectiveCall, body: () => Promise<T>): Promise<T> {
    const ran = Promise.resolve().then(() => {
      this.#checkUsable(call);
      return body();
    });
    const settled = this.#failOn(ran);
    this.#p2p.add(settled);
    settled.then(() => this.#p2p.delete(settled));
    return this.#named(ran);
  }

  /** Settles when `ran` does; its failure breaks the group. */
  #failOn(ran: Promise<unknown>): Promise<void> {
    return ran.then(() => {}, (error) => {
      this.#failure ??= error instanceof Error ? error : new Error(String(error));
    });
  }

  /** `ran`, with a sub-group's errors naming the whole group's ranks. */
  #named<T>(ran: Promise<T>): Promise<T> {
    if (!this.members) return ran;
    return ran.catch((error) => {
      throw this.#inGroup(error);
    });
  }

  /** Leaves the group once every collective and point-to-point call made so far has settled. */
  async destroy(): Promise<void> {
    await Promise.all(this.subgroups.map((g) => g.destroy()));
    await Promise.all([this.#tail, ...this.#p2p]);
    this.#destroyed = true;
    await this.backend.destroy();
  }
}

let current: ProcessGroup | null = null;

/** @internal This thread's group, or null. */
export function currentGroup(): ProcessGroup | null {
  return current;
}

/** @internal Sets (or clears) this thread's group. */
export function setCurrentGroup(group: ProcessGroup | null): void {
  current = group;
}

const groupHandles = new WeakMap<DistributedGroup, ProcessGroup | null>();

/** @internal A handle for `group` (null: this rank is not a member of the group of `ranks`). */
export function makeGroupHandle(
  ranks: readonly number[],
  group: ProcessGroup | null,
): DistributedGroup {
  const handle = new DistributedGroup(ranks, group ? group.rank : -1);
  groupHandles.set(handle, group);
  return handle;
}

/**
 * @internal This thread's group (or `group`'s, when given), or an error
 * telling `op` how to start one, or that this rank is not in `group`.
 */
export function activeGroup(op: string, group?: DistributedGroup): ProcessGroup {
  if (!current) {
    throw new Error(
      `${op}: no process group in this thread: call await distributed.initProcessGroup() first (in a rank started by distributed.spawn, or under mpiexec)`,
    );
  }
  if (group === undefined) return current;
  const processGroup = groupHandles.get(group);
  if (processGroup === undefined) {
    throw new TypeError(`${op}: group must come from distributed.newGroup`);
  }
  if (!processGroup) {
    throw new DistributedError(
      `${op}: rank ${current.rank} is not a member of the group of ranks [${
        group.ranks.join(", ")
      }]: only its members may call its collectives`,
      [current.rank],
    );
  }
  return processGroup;
}

/**
 * @internal The rank in `group` of the whole group's rank `given` (PyTorch's `src`
 * and `dst` are whole-group ranks, also with a group), or an error.
 */
export function groupRankOf(
  op: string,
  group: ProcessGroup,
  given: number,
  name: string,
): number {
  const members = group.members;
  if (members) {
    const at = Number.isInteger(given) ? members.indexOf(given) : -1;
    if (at < 0) {
      throw new RangeError(
        `${op}: ${name} must be a rank of the group [${members.join(", ")}], got ${given}`,
      );
    }
    return at;
  }
  if (!Number.isInteger(given) || given < 0 || given >= group.worldSize) {
    throw new RangeError(`${op}: ${name} must be a rank in [0, ${group.worldSize}), got ${given}`);
  }
  return given;
}
