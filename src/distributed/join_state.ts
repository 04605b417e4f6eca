/**
 * What a running `Join` tells each of its joinables (PyTorch's
 * `_JoinConfig`), kept apart from the public join module so that the
 * joinables (DDP, ZeRO) can read it without it becoming public API.
 * @module
 */

import { DistributedError } from "./backend.ts";
import type { ProcessGroup } from "./state.ts";

/** @internal One joinable's view of the join it takes part in. */
export interface JoinState {
  /** The group the join's own collectives run in. */
  readonly group: ProcessGroup;
  /** Whether uneven-input detection is on (PyTorch's `enable`). */
  readonly enable: boolean;
  /** Whether every rank raises once one is out of data. */
  readonly throwOnEarlyTermination: boolean;
  /**
   * The options the join gave the hooks (`divideByInitialWorldSize`...),
   * read while it runs: a join built later must not change this one's.
   */
  readonly options: Readonly<Record<string, unknown>>;
  /** Whether this joinable runs the join's per-iteration notification (the first one does). */
  readonly isFirstJoinable: boolean;
  /** Whether this rank ran out of data: its hooks are shadowing the others. */
  joined: boolean;
  /** Non-joined ranks at the iteration being shadowed (set before the main hooks run). */
  active: number;
  /** Every joinable of the join, in hook order (a joinable checks what it shares the join with). */
  readonly joinables: readonly object[];
  /**
   * A `DistributedDataParallel`'s: the iteration its join hook just shadowed
   * had no synchronised backward (a noGrad or noSync forward), so no optimizer steps.
   */
  stepless?: boolean;
}

/**
 * @internal What a built-in joinable is, for the checks a join makes of
 * the combination (DDP's collectives must come before ZeRO's).
 */
export type JoinableKind = "DistributedDataParallel" | "ZeroRedundancyOptimizer";

const kinds = new WeakMap<object, JoinableKind>();

/** @internal Marks `joinable` as a built-in joinable of `kind`. */
export function setJoinableKind(joinable: object, kind: JoinableKind): void {
  kinds.set(joinable, kind);
}

/** @internal The built-in kind of `joinable`, or undefined (a user's joinable). */
export function joinableKind(joinable: object): JoinableKind | undefined {
  return kinds.get(joinable);
}

/** The joinable a Join is asking for its hook right now, with the join's `enable`. */
let asking: { readonly joinable: object; readonly enable: boolean } | null = null;

/**
 * @internal Runs `ask` (a Join asking `joinable` for its hook) with the
 * join's `enable` readable through {@link enableOfAskingJoin}: PyTorch's
 * Join sets `_join_config`, a user's own `join_hook()` call sets nothing.
 */
export function askForHook<T>(joinable: object, enable: boolean, ask: () => T): T {
  const previous = asking;
  asking = { joinable, enable };
  try {
    return ask();
  } finally {
    asking = previous;
  }
}

/** @internal The `enable` of the Join asking `joinable` for its hook now, or undefined (a user's call). */
export function enableOfAskingJoin(joinable: object): boolean | undefined {
  return asking?.joinable === joinable ? asking.enable : undefined;
}

const states = new WeakMap<object, JoinState>();

/** @internal The join `joinable` takes part in now, or undefined. */
export function joinStateOf(joinable: object): JoinState | undefined {
  return states.get(joinable);
}

/** @internal Sets (or, with undefined, clears) `joinable`'s join. */
export function setJoinState(joinable: object, state: JoinState | undefined): void {
  if (state) states.set(joinable, state);
  else states.delete(joinable);
}

/**
 * @internal The flag a rank still training sends in the join's
 * notification all-reduce (where the others send 1, joined ranks 0) when
 * it steps a `ZeroRedundancyOptimizer` after a forward whose backward does
 * not synchronise: joined ranks' optimizers do not step for it.
 */
export const STRAY_STEP = 2;

/** @internal The error of a stray step, on every rank: names who stepped, who joined, who did not step. */
export function strayStepError(group: ProcessGroup, flags: Int32Array): DistributedError {
  const whole = (q: number) => group.members?.[q] ?? q;
  const ranks = (f: number) => [...flags.keys()].filter((q) => flags[q] === f).map(whole);
  const [stepped, joined, idle] = [ranks(STRAY_STEP), ranks(0), ranks(1)];
  const also = idle.length ? `, and rank(s) ${idle.join(", ")} went on without stepping` : "";
  return new DistributedError(
    `Join: rank(s) ${
      stepped.join(", ")
    } stepped a ZeroRedundancyOptimizer after a DistributedDataParallel forward under noSync or noGrad (no synchronised backward) while rank(s) ${
      joined.join(", ") || "none"
    } had joined${also}: a joined rank's optimizer steps only after the synchronised backwards, so in a join step only after the backward of a forward outside noSync`,
    [...stepped, ...joined, ...idle],
  );
}

/**
 * @internal Run by a `ZeroRedundancyOptimizer` stepping, on a rank still
 * training, after such a forward: in place of the joined ranks' next
 * notification, fails the group on every rank with {@link strayStepError}
 * unless every rank steps here (none has joined).
 */
export function checkStrayStep(state: JoinState): Promise<void> {
  const group = state.group;
  return exchangeFlags(group, STRAY_STEP, (flags) => {
    if (flags.some((f) => f !== STRAY_STEP)) throw strayStepError(group, flags);
  });
}

/**
 * @internal Every rank's int32 flag (this rank's is `mine`), by a queued sum
 * all-reduce of one word per rank, handed to `then` on every rank.
 */
export function exchangeFlags<T>(
  group: ProcessGroup,
  mine: number,
  then: (flags: Int32Array) => T,
): Promise<T> {
  const flags = new Int32Array(group.worldSize);
  flags[group.rank] = mine;
  const call = group.call({
    kind: "allReduce",
    dtype: "int32",
    shapes: [[flags.length]],
    op: "sum",
  });
  return group.run(call, async () => {
    await group.backend.allReduce(call, flags);
    return then(flags);
  });
}
