/**
 * Training on uneven inputs (`torch.distributed.algorithms.join`): a rank
 * that runs out of batches before the others "shadows" their collectives
 * ({@link Join}, {@link Joinable}, {@link JoinHook}), so they do not wait
 * for it until the timeout.
 * @module
 */

import type { Device } from "../device.ts";
import { DistributedError, type DistributedGroup } from "./backend.ts";
import {
  askForHook,
  exchangeFlags,
  joinableKind,
  type JoinState,
  joinStateOf,
  setJoinState,
  STRAY_STEP,
  strayStepError,
} from "./join_state.ts";
import { activeGroup, type ProcessGroup } from "./state.ts";

/**
 * What a {@link Join} passes to every joinable's {@link Joinable.joinHook}
 * (PyTorch's `**kwargs`): each joinable reads the keys it knows.
 */
export interface JoinHookOptions {
  /**
   * `DistributedDataParallel`: divide the gradients by the world size the
   * run started with (true, the default: every sample weighs the same) or
   * by the number of ranks that still have data (false).
   */
  divideByInitialWorldSize?: boolean;
  /** Keys for other joinables' hooks. */
  [key: string]: unknown;
}

/** Options of {@link Join}: its own, plus those passed to the joinables' hooks. */
export interface JoinOptions extends JoinHookOptions {
  /** Detect uneven inputs (default true); false runs the body as if there were no join. */
  enable?: boolean;
  /**
   * Raise on every rank once one rank is out of data (default false),
   * instead of shadowing it. The error on the rank that ran out says so;
   * on the others it names the ranks that ran out (PyTorch's does not).
   * Needed when the loop runs collectives the joinables do not know of
   * (SyncBatchNorm, a user's `allReduce`). This check blocks the thread at
   * every iteration until all ranks have reached it (the backend's
   * `allGatherSync`), so every rank must let its event loop run at the same
   * points of its loop (all await the loss, or none), as with DDP's
   * `findUnusedParameters`.
   */
  throwOnEarlyTermination?: boolean;
}

/**
 * A joinable's two entry points into a {@link Join} (PyTorch's `JoinHook`):
 * `mainHook` runs once per iteration of the other ranks while some rank has
 * data left, to shadow that iteration's collectives; `postHook` once all
 * ranks have joined. Both may be async (the join awaits them; the
 * collectives they start must be queued in the same order as the
 * non-joined ranks'). Extend it and override what you need; the defaults
 * do nothing.
 */
export class JoinHook {
  /** Shadows the collectives of one iteration of the ranks that still have data. */
  mainHook(): void | Promise<void> {}

  /**
   * Runs once every rank has joined; `isLastJoiner` is true on the ranks
   * that joined last (they hold the most trained state).
   */
  postHook(_isLastJoiner: boolean): void | Promise<void> {}
}

/**
 * Something that can take part in a {@link Join} (PyTorch's `Joinable`):
 * `DistributedDataParallel` and `distributed.optim.ZeroRedundancyOptimizer`
 * are. A joinable calls {@link Join.notifyJoinContext} before its own
 * per-iteration collectives.
 */
export interface Joinable {
  /** The hook that shadows this joinable's collectives on a rank out of data. */
  joinHook(options: JoinHookOptions): JoinHook;
  /** The device of the joinable's tensors. */
  readonly joinDevice: Device;
  /** The group its collectives run in (`processGroup`; undefined: every rank). */
  readonly joinProcessGroup: DistributedGroup | undefined;
}

/**
 * Training with uneven inputs across ranks, as
 * `torch.distributed.algorithms.join.Join`. PyTorch's context manager
 * becomes an async function form: `await Join.run([ddp, zero], async () =>
 * { training loop })`, or `await new Join([...], options).run(fn)`. The
 * body is the training loop over this rank's own data. While it runs, the
 * first joinable notifies the others at every iteration that this rank is
 * still active (one small all-reduce); when the body returns, this rank
 * has "joined": it keeps answering the other ranks' notifications and runs
 * every joinable's {@link JoinHook.mainHook} for each of their iterations
 * (DDP then takes part in the gradient all-reduce with zeros, ZeRO steps
 * and broadcasts its shard), until every rank has joined; then every
 * hook's {@link JoinHook.postHook} runs (DDP makes every rank's model the
 * last joiner's).
 *
 * Not `await using`: a disposer cannot tell whether the body threw, and a
 * body that threw must not shadow (PyTorch's `__exit__` skips the join
 * then too); `run` rethrows the body's error at once.
 *
 * Every joinable must use the same process group. Unlike PyTorch, the
 * joinables leave the join when `run` settles (PyTorch keeps the
 * configuration, so later forwards still notify), and one joinable may be
 * in one join at a time (and once in it). As in PyTorch, a
 * `DistributedDataParallel` that a join with `enable` was built over takes
 * the buffers it broadcasts outside a join from the highest rank, not rank
 * 0 (until a join with `enable: false` is built over it). The first joinable notifies, so
 * it must be the one whose collectives come first in an iteration: a
 * `DistributedDataParallel` must come before a `ZeroRedundancyOptimizer`
 * (the constructor refuses the other order, naming both; PyTorch 1.13
 * accepts it and then aborts every rank in gloo with a size mismatch). A
 * joinable of your own may come first (it then notifies).
 *
 * @example
 * ```ts
 * const ddp = new distributed.DistributedDataParallel(model);
 * const opt = new distributed.optim.ZeroRedundancyOptimizer(ddp.parameters(), {
 *   optimizerClass: optim.Adam,
 *   lr: 0.01,
 * });
 * await distributed.algorithms.Join.run([ddp, opt], async () => {
 *   for (const [x, y] of myBatches) { // a different count on each rank
 *     opt.zeroGrad();
 *     lossFn.forward(ddp.forward(x), y).backward();
 *     opt.step();
 *   }
 * });
 * // every rank gets here, with the same parameters
 * ```
 */
export class Join {
  /** The joinables, in hook order. */
  readonly joinables: readonly Joinable[];
  /** Whether uneven-input detection is on. */
  readonly enable: boolean;
  /** Whether every rank raises once one rank is out of data. */
  readonly throwOnEarlyTermination: boolean;
  readonly #hooks: readonly JoinHook[];
  readonly #hookOptions: JoinHookOptions;
  readonly #group: ProcessGroup;

  /**
   * A join over `joinables` (at least one; their hooks run in this order);
   * `options` also go to each joinable's `joinHook`.
   */
  constructor(joinables: readonly Joinable[], options: JoinOptions = {}) {
    if (!Array.isArray(joinables) || joinables.length === 0) {
      throw new Error("Join: the join context manager requires at least one joinable");
    }
    const { enable = true, throwOnEarlyTermination = false, ...hookOptions } = options;
    let group: ProcessGroup | null = null;
    joinables.forEach((j, i) => {
      if (j === null || typeof j !== "object" || typeof j.joinHook !== "function") {
        throw new TypeError(`Join: joinable ${i} does not implement Joinable (joinHook)`);
      }
      // Its hooks would shadow twice what it runs once per iteration.
      const first = joinables.indexOf(j);
      if (first !== i) throw new Error(`Join: joinable ${i} is joinable ${first} again`);
      const g = activeGroup("Join", j.joinProcessGroup);
      if (group && g !== group) {
        throw new Error(
          `Join: using the join with multiple process groups (joinable ${i}'s differs from joinable 0's)`,
        );
      }
      group = g;
    });
    this.#group = group!;
    checkOrder(joinables);
    this.joinables = [...joinables];
    this.enable = enable;
    this.throwOnEarlyTermination = throwOnEarlyTermination;
    if (enable && throwOnEarlyTermination && !this.#group.backend.allGatherSync) {
      throw new Error(
        `Join: throwOnEarlyTermination needs a backend with allGatherSync, which "${this.#group.backendName}" lacks`,
      );
    }
    this.#hookOptions = { ...hookOptions, throwOnEarlyTermination, enable };
    this.#hooks = this.joinables.map((j) =>
      askForHook(j, enable, () => j.joinHook({ ...this.#hookOptions }))
    );
  }

  /** `new Join(joinables, options).run(fn)`. */
  static run<T>(
    joinables: readonly Joinable[],
    fn: () => T | Promise<T>,
    options: JoinOptions = {},
  ): Promise<T> {
    return new Join(joinables, options).run(fn);
  }

  /** This rank in the join's process group. */
  get rank(): number {
    return this.#group.rank;
  }

  /**
   * Runs the training loop `fn` (this rank's data), then shadows the other
   * ranks until all have joined, then runs the post-hooks; resolves with
   * `fn`'s result. An error of `fn` is rethrown at once, without shadowing.
   */
  async run<T>(fn: () => T | Promise<T>): Promise<T> {
    if (!this.enable) return await fn();
    const busy = this.joinables.find((j) => joinStateOf(j));
    if (busy) throw new Error("Join: a joinable is already in a running join");
    const states = this.joinables.map((_j, i): JoinState => ({
      group: this.#group,
      enable: true,
      throwOnEarlyTermination: this.throwOnEarlyTermination,
      options: this.#hookOptions,
      isFirstJoinable: i === 0,
      joined: false,
      active: this.#group.worldSize,
      joinables: this.joinables,
    }));
    this.joinables.forEach((j, i) => setJoinState(j, states[i]));
    try {
      const result = await fn();
      for (const s of states) s.joined = true;
      await this.#shadow(states);
      return result;
    } finally {
      for (const j of this.joinables) setJoinState(j, undefined);
    }
  }

  /** PyTorch's `__exit__`: main hooks while a rank is active, then the post-hooks. */
  async #shadow(states: readonly JoinState[]): Promise<void> {
    let isLastJoiner = true;
    for (let i = 0;; i++) {
      const active = this.throwOnEarlyTermination ? this.#activeSync(0) : await this.#count(0);
      if (active.length === 0) break;
      if (this.throwOnEarlyTermination) {
        throw new Error(`Rank ${this.#whole(this.#group.rank)} exhausted all inputs.`);
      }
      if (i === 1000) {
        console.warn(
          `Join: detected uneven input skew of greater than 1000: rank ${
            this.#whole(this.#group.rank)
          } has at least 1000 fewer inputs than other currently-active ranks, which may slow training`,
        );
      }
      for (const s of states) s.active = active.length;
      for (const hook of this.#hooks) await hook.mainHook();
      isLastJoiner = false;
    }
    for (const hook of this.#hooks) await hook.postHook(isLastJoiner);
  }

  /** A rank of the join's group as the whole group numbers it. */
  #whole(q: number): number {
    return this.#group.members?.[q] ?? q;
  }

  /**
   * The ranks still active, learnt by a queued all-reduce of one flag per
   * rank (PyTorch all-reduces a count; the flags also say which).
   */
  #count(mine: 0 | 1): Promise<number[]> {
    return countActive(this.#group, mine);
  }

  /** `#count`, blocking (throwOnEarlyTermination). */
  #activeSync(mine: 0 | 1): number[] {
    return activeSync(this.#group, mine);
  }

  /**
   * Called by a joinable before its per-iteration collectives (PyTorch's
   * `notify_join_context`): on the first joinable of a running join, on a
   * rank still in its loop, it queues the all-reduce that tells joined
   * ranks an iteration is coming and resolves with the number of ranks
   * still active; with `throwOnEarlyTermination` it first blocks until
   * every rank has reached this point and throws, naming them, when a rank
   * is out of data. Otherwise (not in a join, not the first joinable, or
   * called by a hook on a joined rank) it does nothing and returns null.
   */
  static notifyJoinContext(joinable: Joinable): Promise<number> | null {
    const state = joinStateOf(joinable);
    if (!state || !state.enable || !state.isFirstJoinable || state.joined) return null;
    const group = state.group;
    if (state.throwOnEarlyTermination) {
      const active = activeSync(group, 1);
      if (active.length < group.worldSize) {
        const whole = (q: number) => group.members?.[q] ?? q;
        const out = [...Array(group.worldSize).keys()].filter((q) => !active.includes(q));
        throw new DistributedError(
          `Detected at least one rank that exhausted inputs (rank${out.length === 1 ? "" : "s"} ${
            out.map(whole).join(", ")
          }). Throwing across all ranks.`,
          out.map(whole),
        );
      }
      return Promise.resolve(active.length);
    }
    const count = countActive(group, 1).then((active) => active.length);
    count.catch(() => {}); // raised by the collectives after it, which fail with it
    return count;
  }
}

/**
 * Refuses a `ZeroRedundancyOptimizer` listed before a
 * `DistributedDataParallel`: on a rank still in its loop DDP's collectives
 * (forward, backward) come before the optimizer's step, but a joined rank
 * runs the hooks in list order, so the ranks' collectives would not match.
 */
function checkOrder(joinables: readonly Joinable[]): void {
  const zero = joinables.findIndex((j) => joinableKind(j) === "ZeroRedundancyOptimizer");
  const ddp = joinables.findLastIndex((j) => joinableKind(j) === "DistributedDataParallel");
  if (zero < 0 || ddp < zero) return;
  throw new Error(
    `Join: joinable ${zero} (ZeroRedundancyOptimizer) is listed before joinable ${ddp} (DistributedDataParallel); list the DistributedDataParallel first, as Join.run([ddp, zero], fn): a rank in its loop runs DDP's collectives (forward, backward) before the optimizer's step, and a joined rank shadows them in list order`,
  );
}

/** The ranks whose flag is set, by a queued int32 all-reduce of one flag per rank. */
function countActive(group: ProcessGroup, mine: 0 | 1): Promise<number[]> {
  return exchangeFlags(group, mine, (flags) => {
    if (flags.includes(STRAY_STEP)) throw strayStepError(group, flags);
    return [...flags.keys()].filter((q) => flags[q] !== 0);
  });
}

/** The ranks whose flag is set, by a blocking `allGatherSync`. */
function activeSync(group: ProcessGroup, mine: 0 | 1): number[] {
  if (group.worldSize === 1) return mine ? [group.rank] : [];
  const call = group.call({ kind: "allGather", dtype: "int32", shapes: [[1]] });
  const data = Int32Array.of(mine);
  const parts = group.runSync(call, () => group.backend.allGatherSync!(call, data));
  return parts.flatMap((p, q) => (p[0] !== 0 ? [q] : []));
}
