/**
 * What a running `Join` tells each of its joinables (PyTorch's
 * `_JoinConfig`), kept apart from the public join module so that the
 * joinables (DDP, ZeRO) can read it without it becoming public API.
 * @module
 */

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
   * had no synchronised backward (a noGrad forward), so no optimizer steps.
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
