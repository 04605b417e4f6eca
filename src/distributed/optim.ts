/**
 * Distributed optimizers (`torch.distributed.optim`):
 * {@link ZeroRedundancyOptimizer}, which shards an optimizer's state over
 * the ranks (ZeRO stage 1).
 * @module
 */

import type { DType, TypedArray } from "../dtype.ts";
import { tensor } from "../ops/factory.ts";
import { noGrad } from "../autograd.ts";
import { formatShape } from "../shape.ts";
import { Tensor } from "../tensor.ts";
import {
  Optimizer,
  type OptimizerStateDict,
  type OptionValue,
  type ParamGroup,
  type ParamGroupInput,
  type ParamState,
  type ScalarFn,
} from "../optim/optimizer.ts";
import { torchKey } from "../optim/util.ts";
import { LBFGS } from "../optim/lbfgs.ts";
import { DistributedError, type DistributedGroup } from "./backend.ts";
import { broadcastFlat, orderAfter } from "./host.ts";
import { gatherObject } from "./objects.ts";
import { activeGroup, type ProcessGroup } from "./state.ts";
import type { Device } from "../device.ts";
import { Join, type Joinable, JoinHook } from "./join.ts";
import { checkStrayStep, joinableKind, joinStateOf, setJoinableKind } from "./join_state.ts";

/**
 * An optimizer class {@link ZeroRedundancyOptimizer} can wrap: built as
 * `new optimizerClass(paramGroups, options)` (`optim.Adam`, `optim.SGD`, ...).
 */
export type OptimizerClass<O extends object, P> = new (
  params: Iterable<ParamGroupInput<O>>,
  options: P,
) => Optimizer<O>;

/** What {@link ZeroRedundancyOptimizer} takes besides the wrapped optimizer's own options. */
export interface ZeroRedundancyOptions<O extends object, P> {
  /** The optimizer each rank runs on its shard (PyTorch's `optimizer_class`). */
  optimizerClass: OptimizerClass<O, P>;
  /**
   * Shard over the ranks of this group only (from `newGroup`; PyTorch's
   * `process_group`). Default: every rank.
   */
  processGroup?: DistributedGroup;
  /**
   * PyTorch packs each rank's shard into one flat bucket tensor so that it
   * is broadcast in one collective (default false). Here a shard always
   * moves in one collective, so both settings communicate alike; the
   * parameters keep their own memory (multigrad tensors are not views).
   */
  parametersAsBucketView?: boolean;
  /**
   * Overlap the step with DDP's gradient all-reduce through a DDP
   * communication hook (PyTorch's `ddp_zero_hook` functions). multigrad's
   * DDP runs its all-reduce, and any communication hook, once backward has
   * ended (one meeting of the ranks per step), so a step inside the hook
   * would overlap nothing: `true` is an error; default false.
   */
  overlapWithDdp?: boolean;
}

/**
 * The options of {@link ZeroRedundancyOptimizer}: its own
 * ({@link ZeroRedundancyOptions}) plus the wrapped optimizer's (`lr`,
 * `betas`, ...), which become its defaults (PyTorch's `**defaults`).
 */
export type ZeroRedundancyOptimizerOptions<O extends object, P> =
  & ZeroRedundancyOptions<O, P>
  & P;

/** One state value as it travels to the consolidating rank. */
type SentValue = number | { dtype: DType; shape: number[]; values: TypedArray };

/** A rank's shard of the state: by global parameter index, PyTorch's keys. */
type SentState = Record<number, Record<string, SentValue>>;

const OWN_OPTIONS = new Set([
  "optimizerClass",
  "processGroup",
  "parametersAsBucketView",
  "overlapWithDdp",
]);

/** Instances whose constructor has returned (the base constructor calls addParamGroup before). */
const initialized = new WeakSet<object>();

/** FNV-1a over int32 words. */
function hashWords(words: readonly number[]): number {
  let h = 0x811c9dc5;
  for (const w of words) {
    h = Math.imul(h ^ (w & 0xffff), 0x01000193);
    h = Math.imul(h ^ (w >>> 16), 0x01000193);
  }
  return h | 0;
}

/**
 * PyTorch 1.13's `ZeroRedundancyOptimizer._partition_parameters`: group by
 * group, each group's parameters sorted by size, largest first (a stable
 * sort: ties keep their order), each going to the rank with the fewest
 * elements so far (the lowest such rank); the running sizes carry over
 * from group to group. Returns, per rank, per group, the parameters in
 * the order assigned.
 */
export function partitionParameters(
  groups: readonly (readonly Tensor[])[],
  worldSize: number,
): Tensor[][][] {
  const sizes = new Array<number>(worldSize).fill(0);
  const out = Array.from({ length: worldSize }, () => groups.map(() => [] as Tensor[]));
  groups.forEach((params, g) => {
    const sorted = [...params].sort((a, b) => b.numel() - a.numel());
    for (const p of sorted) {
      let rank = 0;
      for (let r = 1; r < worldSize; r++) if (sizes[r] < sizes[rank]) rank = r;
      out[rank][g].push(p);
      sizes[rank] += p.numel();
    }
  });
  return out;
}

/** Checks that every parameter has one dtype and one device, as PyTorch's "same dense type" rule. */
function checkSameType(params: readonly Tensor[]): void {
  const first = params[0];
  const describe = (t: Tensor, i: number) =>
    `${t.dtype} on ${t.device} (parameter ${i}, shape ${formatShape(t.shape)})`;
  params.forEach((p, i) => {
    if (p.dtype !== first.dtype || p.device !== first.device) {
      throw new TypeError(
        `ZeroRedundancyOptimizer only supports using the same dense type for all parameters (one dtype, one device) but got both ${
          describe(first, 0)
        } and ${describe(p, i)}`,
      );
    }
  });
}

/** The tensors of a group input list, for the checks made before the optimizers exist. */
function tensorsOf(list: readonly unknown[]): Tensor[] {
  const out: Tensor[] = [];
  for (const item of list) {
    if (item instanceof Tensor) out.push(item);
    else if (item !== null && typeof item === "object" && "params" in item) {
      const params = (item as { params: unknown }).params;
      if (params instanceof Tensor) out.push(params);
      else if (params !== null && typeof params === "object" && Symbol.iterator in params) {
        for (const p of params as Iterable<unknown>) if (p instanceof Tensor) out.push(p);
      }
    }
  }
  return out;
}

/**
 * ZeRO stage 1, as `torch.distributed.optim.ZeroRedundancyOptimizer`: every
 * rank holds all parameters, but each parameter is owned by one rank (PyTorch
 * 1.13's greedy partition by size, so ownership is PyTorch's), and only its
 * owner keeps its optimizer state and updates it. `step()` runs the wrapped
 * optimizer on this rank's shard, then every owner broadcasts its updated
 * shard (one collective per owner rank, in rank order, in stream order: no
 * await is needed). With `DistributedDataParallel` averaging the gradients,
 * N ranks then end each step with the parameters one process with the plain
 * optimizer gets on the whole batch, while each keeps about 1/N of the state.
 *
 * The wrapped optimizer is built over every parameter, then keeps only
 * this rank's (multigrad's optimizers refuse an empty group): one that
 * makes state when built (Adagrad) frees the other ranks' at once.
 *
 * Every rank must construct it with the same parameters (count, sizes and
 * groups, in the same order); a difference fails the first collective after
 * it on every rank with an error naming each rank's parameters. `state`
 * holds this rank's shard only. A full state dict (the wrapped optimizer's
 * format, loadable into a plain optimizer) needs
 * `await consolidateStateDict(to)` on every rank, then `stateDict()` on
 * rank `to`; {@link loadStateDict} takes a full state dict (from any world
 * size) and keeps this rank's shard of it.
 *
 * @example
 * ```ts
 * const ddp = new distributed.DistributedDataParallel(model);
 * const opt = new distributed.optim.ZeroRedundancyOptimizer(ddp.parameters(), {
 *   optimizerClass: optim.Adam,
 *   lr: 0.01,
 * });
 * // per step: opt.zeroGrad(); loss.backward(); opt.step();
 * await opt.consolidateStateDict(0);
 * if (rank === 0) save(opt.stateDict());
 * ```
 */
export class ZeroRedundancyOptimizer<O extends object = object, P = unknown> extends Optimizer<O>
  implements Joinable {
  /** The wrapped optimizer over this rank's shard (PyTorch's `optim`). */
  readonly optim: Optimizer<O>;
  /** This rank in the process group. */
  readonly rank: number;
  /** Number of ranks sharing the state. */
  readonly worldSize: number;
  /** See {@link ZeroRedundancyOptions.parametersAsBucketView}. */
  readonly parametersAsBucketView: boolean;
  readonly #group: ProcessGroup;
  /** The `processGroup` handle given (undefined: every rank). */
  readonly #processGroup: DistributedGroup | undefined;
  #partition: Tensor[][][] = [];
  #owner = new Map<Tensor, number>();
  /** The consolidated state, on the rank it was consolidated to (PyTorch's `_all_state_dicts`). */
  #consolidated: SentState | null = null;

  /**
   * Shards an optimizer of class `optimizerClass` over `params` (tensors or
   * parameter groups); the other options are the wrapped optimizer's.
   */
  constructor(
    params: Iterable<Tensor> | Iterable<ParamGroupInput<O>>,
    options: ZeroRedundancyOptimizerOptions<O, P>,
  ) {
    const name = "ZeroRedundancyOptimizer";
    if (options === null || typeof options !== "object") {
      throw new TypeError(`${name}: options { optimizerClass, ... } are required`);
    }
    const { optimizerClass, processGroup, parametersAsBucketView, overlapWithDdp } = options;
    if (typeof optimizerClass !== "function" || !(optimizerClass.prototype instanceof Optimizer)) {
      throw new TypeError(
        `${name}: optimizerClass must be an optimizer class (optim.Adam, optim.SGD, ...), got ${
          typeof optimizerClass === "function" ? optimizerClass.name : typeof optimizerClass
        }`,
      );
    }
    if ((optimizerClass as unknown) === LBFGS || optimizerClass.prototype instanceof LBFGS) {
      throw new TypeError(
        `${name}: optimizerClass LBFGS is not supported: its step is async (it reads the loss), so the shards could not be broadcast after it in stream order`,
      );
    }
    if (overlapWithDdp) {
      throw new Error(
        `${name}: overlapWithDdp is not supported: multigrad's DistributedDataParallel reduces the gradients (and runs communication hooks) once backward has ended, so a step inside a hook would overlap nothing; leave overlapWithDdp false and call step() after backward()`,
      );
    }
    const defaults: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(options)) if (!OWN_OPTIONS.has(k)) defaults[k] = v;
    if (
      params === null || typeof params !== "object" || !(Symbol.iterator in params) ||
      params instanceof Tensor
    ) {
      throw new TypeError(
        `${name}: params must be an iterable of tensors or of parameter groups, got ${
          params instanceof Tensor ? "a Tensor" : typeof params
        }`,
      );
    }
    // Groups' parameter iterables are read once here: both optimizers see them.
    const list = [...params].map((item) =>
      item !== null && typeof item === "object" && !(item instanceof Tensor) && "params" in item &&
        !(item.params instanceof Tensor) && item.params !== null &&
        typeof item.params === "object" && Symbol.iterator in item.params
        ? { ...item, params: [...(item.params as Iterable<unknown>)] }
        : item
    ) as unknown[];
    if (list.length === 0) throw new Error(`${name}: got an empty parameter list`);
    const all = tensorsOf(list);
    if (all.length > 0) checkSameType(all);
    const group = activeGroup(name, processGroup);
    // The wrapped optimizer is built over every parameter (it checks them and
    // the options, and resolves the defaults), then keeps only this rank's:
    // multigrad's optimizers refuse a group without parameters.
    const local = new optimizerClass(list as Iterable<ParamGroupInput<O>>, defaults as P);
    super(list as Iterable<ParamGroupInput<O>>, local.defaults as O, {});
    this.optim = local;
    this.#group = group;
    this.#processGroup = processGroup;
    this.rank = group.rank;
    this.worldSize = group.worldSize;
    this.parametersAsBucketView = parametersAsBucketView ?? false;
    // This rank's state is the wrapped optimizer's.
    (this as { state: Map<Tensor, ParamState> }).state = local.state;
    this.#repartition();
    local.paramGroups.forEach((g, i) => (g.params = this.#partition[this.rank][i]));
    this.#dropForeignState();
    initialized.add(this);
    setJoinableKind(this, "ZeroRedundancyOptimizer");
    this.#checkSameParameters();
  }

  /** The wrapped optimizer validates options (when built and when groups are added). */
  protected override validateOptions(_options: O): void {}

  /** Never called: {@link step} runs the wrapped optimizer. */
  protected override updateGroup(_group: ParamGroup<O>, _scalar: ScalarFn): void {}

  /** The rank that owns each parameter (PyTorch's `_param_to_rank`). */
  get paramToRank(): Map<Tensor, number> {
    return new Map(this.#owner);
  }

  /**
   * Per rank, per group, the parameters it owns, in the order assigned
   * (PyTorch's `_partition_parameters()`, with the tensors only).
   */
  partition(): Tensor[][][] {
    return this.#partition.map((groups) => groups.map((g) => [...g]));
  }

  #repartition(): void {
    this.#partition = partitionParameters(this.paramGroups.map((g) => g.params), this.worldSize);
    this.#owner = new Map();
    this.#partition.forEach((groups, r) => {
      for (const g of groups) for (const p of g) this.#owner.set(p, r);
    });
  }

  /**
   * Queues a check that every rank passed the same parameters: a small
   * gather of each rank's counts and a hash of its sizes. On a difference
   * every rank fails it with the same error, which breaks the group, so the
   * step's broadcasts after it fail with it too (at the next read), never
   * a hang nor a silent mix of different partitions.
   */
  #checkSameParameters(): void {
    const group = this.#group;
    if (group.worldSize === 1) return;
    const groups = this.paramGroups;
    const numel = this.params.reduce((n, p) => n + p.numel(), 0);
    const words = [this.params.length, groups.length, numel % 2 ** 30, Math.floor(numel / 2 ** 30)];
    const layout = groups.flatMap((g) => [g.params.length, ...g.params.map((p) => p.numel())]);
    const mine = Int32Array.from([...words, hashWords(layout)]);
    const members = group.members;
    const whole = (q: number) => members?.[q] ?? q;
    const call = group.call({ kind: "allGather", dtype: "int32", shapes: [[mine.length]] });
    const done = group.run(call, async () => {
      const parts = (await group.backend.allGather(call, mine)) as Int32Array[];
      const key = (w: Int32Array) => Array.from(w).join(",");
      if (parts.every((w) => key(w) === key(parts[0]))) return;
      const describe = (w: Int32Array, q: number) =>
        `rank ${whole(q)} has ${w[0]} parameter${w[0] === 1 ? "" : "s"} in ${w[1]} group${
          w[1] === 1 ? "" : "s"
        } (${w[2] + w[3] * 2 ** 30} elements)`;
      const counts = parts.map(describe);
      const same = new Set(counts).size === 1;
      throw new DistributedError(
        `ZeroRedundancyOptimizer: every rank must pass the same parameters (each rank computes the partition from its own), but ${
          counts.join(", ")
        }${same ? ", with different sizes or order" : ""}`,
        parts.flatMap((w, q) => (key(w) === key(parts[0]) ? [] : [whole(q)])),
      );
    });
    // Raised by the collectives after it (the group is broken), at their reads.
    done.catch(() => {});
    orderAfter(this.params[0].device, done);
  }

  /**
   * Adds a group `{ params, ...options }` (on every rank: the partition
   * changes on all). The earlier groups keep their owners (the greedy
   * partition runs group by group); this rank's share of the new group
   * joins the wrapped optimizer.
   */
  override addParamGroup(group: ParamGroupInput<O>): void {
    if (!initialized.has(this)) {
      super.addParamGroup(group);
      return;
    }
    const params = group?.params instanceof Tensor
      ? [group.params]
      : group?.params
      ? [...group.params]
      : [];
    checkSameType([...this.params, ...params]);
    super.addParamGroup({ ...group, params });
    const added = this.paramGroups[this.paramGroups.length - 1];
    const local = this.optim;
    try {
      const { params: _, ...options } = added;
      local.addParamGroup({ ...options, params } as unknown as ParamGroupInput<O>);
    } catch (error) {
      this.paramGroups.pop();
      throw error;
    }
    this.#repartition();
    local.paramGroups[local.paramGroups.length - 1].params = this.#partition[this.rank].at(-1)!;
    this.#dropForeignState();
  }

  /**
   * Frees the wrapped optimizer's state of parameters other ranks own: one
   * that makes state when built (Adagrad) made it for every parameter.
   */
  #dropForeignState(): void {
    for (const [p, s] of this.optim.state) {
      if (this.#owner.get(p) === this.rank) continue;
      for (const v of Object.values(s)) if (v instanceof Tensor) v.dispose();
      this.optim.state.delete(p);
    }
  }

  /** Copies the groups' options (not their parameters) from `from` to `to`, as PyTorch's `_sync_param_groups`. */
  static #syncGroups<T extends object>(from: ParamGroup<T>[], to: ParamGroup<T>[]): void {
    from.forEach((group, i) => {
      const target = to[i] as Record<string, unknown>;
      for (const [k, v] of Object.entries(group)) {
        if (k !== "params") target[k] = Array.isArray(v) ? [...v] : v;
      }
    });
  }

  /**
   * Steps this rank's shard with the wrapped optimizer (after copying the
   * groups' options to it, so learning-rate schedules apply), then
   * broadcasts every rank's updated shard from its owner, in rank order.
   * Returns the closure's loss, when given.
   */
  override step(closure?: () => Tensor): Tensor | undefined {
    void Join.notifyJoinContext(this);
    const join = joinStateOf(this);
    if (
      join?.enable && !join.joined && !join.throwOnEarlyTermination &&
      join.joinables.some((j) =>
        joinableKind(j) === "DistributedDataParallel" && joinStateOf(j)?.stepless
      )
    ) {
      // Joined ranks' optimizers do not step after such a forward: fail every rank clearly.
      checkStrayStep(join).catch(() => {}); // raised by the broadcasts after it, which fail with it
    }
    ZeroRedundancyOptimizer.#syncGroups(this.paramGroups, this.optim.paramGroups);
    const loss = this.optim.step(closure);
    ZeroRedundancyOptimizer.#syncGroups(this.optim.paramGroups, this.paramGroups);
    this.#syncParams();
    return loss;
  }

  /**
   * The join hook (PyTorch's `_ZeROJoinHook`): on a rank out of data, each
   * iteration of the others runs {@link step}, which updates this rank's
   * shard (with the gradients DDP's join hook averaged into it, when DDP
   * is in the same join before this optimizer) and broadcasts it. So
   * `Join.run([ddp, zero], ...)` ends where DDP with the plain optimizer
   * does. This deliberately differs from PyTorch 1.13, whose joined rank
   * steps its shard with gradients DDP's join hook left untouched (its
   * last own batch's), so that its result differs from plain DDP's (by up
   * to 0.16 on tests/fixtures/torch_ddp_join.py's cases). The hook steps
   * for the iterations of the other ranks whose backward synchronises: a
   * forward of the `DistributedDataParallel` in the same join under
   * `noSync` (gradient accumulation) or `noGrad` (validation) is not an
   * iteration it steps for, so the others step exactly after their
   * synchronised backwards (PyTorch 1.13 steps at every iteration and
   * hangs there once a rank has joined): a step after such a forward while
   * a rank has joined fails every rank, naming the ranks. List the
   * `DistributedDataParallel` before this optimizer in the join.
   */
  joinHook(): JoinHook {
    const hook = new JoinHook();
    hook.mainHook = () => {
      const ddps = joinStateOf(this)?.joinables.filter((j) =>
        joinableKind(j) === "DistributedDataParallel"
      );
      // A noGrad forward of the others (validation) is no iteration of training.
      if (!ddps?.some((j) => joinStateOf(j)?.stepless)) void this.step();
    };
    return hook;
  }

  /** The device of the parameters (PyTorch's `join_device`). */
  get joinDevice(): Device {
    return this.params[0].device;
  }

  /** The group the shards are broadcast in (`processGroup`; undefined: every rank). */
  get joinProcessGroup(): DistributedGroup | undefined {
    return this.#processGroup;
  }

  /** One broadcast per owner rank (that owns something), of its shard, in rank order. */
  #syncParams(): void {
    const group = this.#group;
    if (group.worldSize === 1) return;
    this.#partition.forEach((groups, src) => {
      const shard = groups.flat();
      if (shard.length === 0) return;
      broadcastFlat(group, shard, src, "ZeroRedundancyOptimizer.step");
    });
  }

  /**
   * Gathers every rank's shard of the state on rank `to` (default 0; a rank
   * of the process group, as PyTorch's), for {@link stateDict} there. Every
   * rank must call it (and await it before its next collective), after the
   * same steps. Other ranks forget any state consolidated earlier.
   */
  async consolidateStateDict(to = 0): Promise<void> {
    const name = "ZeroRedundancyOptimizer.consolidateStateDict";
    const group = this.#group;
    if (!Number.isInteger(to) || to < 0 || to >= group.worldSize) {
      throw new RangeError(`${name}: to must be a rank in [0, ${group.worldSize}), got ${to}`);
    }
    ZeroRedundancyOptimizer.#syncGroups(this.paramGroups, this.optim.paramGroups);
    this.#consolidated = null;
    const index = new Map(this.params.map((p, i) => [p, i]));
    const reads: Promise<void>[] = [];
    const mine: SentState = {};
    for (const [p, s] of this.optim.state) {
      const i = index.get(p);
      if (i === undefined || this.#owner.get(p) !== this.rank) continue;
      const entry: Record<string, SentValue> = {};
      for (const [k, v] of Object.entries(s)) {
        if (v instanceof Tensor) {
          const value = {
            dtype: v.dtype,
            shape: [...v.shape],
            values: new Float32Array(0) as TypedArray,
          };
          reads.push(v.data().then((data) => void (value.values = data.slice())));
          entry[torchKey(k)] = value;
        } else entry[torchKey(k)] = v;
      }
      mine[i] = entry;
    }
    await Promise.all(reads);
    const dst = group.members?.[to] ?? to;
    const parts = await gatherObject(mine, {
      dst,
      group: this.#processGroup,
    }) as SentState[] | null;
    if (parts && group.rank === to) this.#consolidated = Object.assign({}, ...parts);
  }

  /**
   * The full state dict, as the wrapped optimizer's `stateDict()` over
   * every parameter (so it loads into a plain optimizer): the groups'
   * current options, and the state as consolidated by the last
   * {@link consolidateStateDict} to this rank (tensors on cpu). Before
   * that, an error (PyTorch's).
   */
  override stateDict(): OptimizerStateDict {
    const consolidated = this.#consolidated;
    if (!consolidated) {
      throw new Error(
        `Optimizer state has not been consolidated on this rank. Please call \`consolidateStateDict(${this.rank})\` on all ranks beforehand if you meant to save the global state.`,
      );
    }
    let next = 0;
    const param_groups = this.paramGroups.map((group) => {
      const { params, ...options } = group;
      const out: Record<string, OptionValue> = {};
      for (const [k, v] of Object.entries(options)) {
        out[torchKey(k)] = Array.isArray(v) ? [...v] : v as OptionValue;
      }
      return { ...out, params: params.map(() => next++) };
    });
    const state: Record<number, ParamState> = {};
    noGrad(() => {
      for (const [i, entry] of Object.entries(consolidated)) {
        const s: ParamState = {};
        for (const [k, v] of Object.entries(entry)) {
          s[k] = typeof v === "number"
            ? v
            : tensor(v.values.slice(), { dtype: v.dtype, shape: v.shape });
        }
        state[Number(i)] = s;
      }
    });
    return { state, param_groups };
  }

  /**
   * Loads a full state dict (from {@link stateDict}, or a plain optimizer's,
   * of any world size): the groups' options, and the state of the
   * parameters this rank owns (the rest is dropped), checked by the wrapped
   * optimizer. On error nothing changes.
   */
  override loadStateDict(stateDict: OptimizerStateDict): void {
    const name = "ZeroRedundancyOptimizer.loadStateDict";
    const groups = stateDict?.param_groups;
    if (stateDict === null || typeof stateDict !== "object" || !Array.isArray(groups)) {
      throw new TypeError(`${name}: expected { state, param_groups }`);
    }
    if (groups.length !== this.paramGroups.length) {
      throw new Error(
        `${name}: the state dict has ${groups.length} parameter groups, the optimizer ${this.paramGroups.length}`,
      );
    }
    const byIndex = new Map<number, Tensor>();
    groups.forEach((saved, g) => {
      const mine = this.paramGroups[g].params;
      if (!Array.isArray(saved?.params) || saved.params.length !== mine.length) {
        throw new Error(
          `${name}: parameter group ${g} has ${
            Array.isArray(saved?.params) ? saved.params.length : "no"
          } parameters in the state dict, ${mine.length} in the optimizer`,
        );
      }
      saved.params.forEach((idx, j) => byIndex.set(idx, mine[j]));
    });
    const local = this.optim;
    const localIndex = new Map<Tensor, number>();
    const localGroups = groups.map((saved, g) => {
      const { params: _, ...options } = saved;
      return {
        ...options,
        params: local.paramGroups[g].params.map((p) => {
          localIndex.set(p, localIndex.size);
          return localIndex.size - 1;
        }),
      };
    });
    const localState: Record<number, ParamState> = {};
    for (const [key, entry] of Object.entries(stateDict.state ?? {})) {
      const p = byIndex.get(Number(key));
      if (!p) {
        throw new Error(
          `${name}: state for parameter index ${key}, which no parameter group lists`,
        );
      }
      const at = localIndex.get(p);
      if (at !== undefined) localState[at] = entry;
    }
    local.loadStateDict({ state: localState, param_groups: localGroups });
    ZeroRedundancyOptimizer.#syncGroups(local.paramGroups, this.paramGroups);
  }
}
