/**
 * `FullyShardedDataParallel` (PyTorch 1.13's `torch.distributed.fsdp`):
 * every rank keeps 1/N of each unit's parameters, gathers a unit's full
 * parameters around its forward and backward, and reduce-scatters its
 * gradients.
 * @module
 */

import {
  isGradEnabled,
  noGrad,
  queueBackwardCallback,
  registerPostAccumulateGradHook,
  registerTensorHook,
} from "../../autograd.ts";
import { type Device, device as resolveDevice } from "../../device.ts";
import { Module, Parameter } from "../../nn/module.ts";
import { refuseLazy } from "../../nn/lazy_state.ts";
import { markShardedGradient } from "../../nn/utils/sharded_grad.ts";
import { mapTensors } from "../../nested.ts";
import { full } from "../../ops/factory.ts";
import { empty } from "../../ops/util.ts";
import { cat, stack } from "../../ops/view.ts";
import { where } from "../../ops/indexing.ts";
import type { TypedArray } from "../../dtype.ts";
import { formatShape } from "../../shape.ts";
import type { Tensor } from "../../tensor.ts";
import type { OptimizerStateDict, OptimizerStateDictLike } from "../../optim/optimizer.ts";
import { DistributedError, type DistributedGroup, SYNC_WORDS } from "../backend.ts";
import { allReduce } from "../collectives.ts";
import {
  allGatherOnHost,
  borrowHost,
  broadcastFlat,
  giveBackHost,
  readFlatInto,
  runOnHost,
  writeFlat,
} from "../host.ts";
import { type Storage, tidy } from "../../storage.ts";
import { activeGroup, type ProcessGroup } from "../state.ts";
import type { AutoWrapPolicy } from "./wrap.ts";
import {
  dictConfigs,
  dictTypes,
  loadShardedOf,
  optimStateDictOf,
  optimStateDictToLoadOf,
  type RootView,
  scatterFullOptimStateDictOf,
  shardFullOptimStateDictOf,
  stateDictOf,
  type UnitView,
} from "./state_dict.ts";
import {
  FullStateDictConfig,
  type FullStateDictConfigOptions,
  StateDictType,
} from "./state_dict_types.ts";

const NAME = "FullyShardedDataParallel";

/** `torch.distributed.fsdp.ShardingStrategy`: what each rank keeps of a unit between uses. */
export const ShardingStrategy = {
  /** Parameters, gradients and optimizer state sharded; full parameters gathered for forward and again for backward. */
  FULL_SHARD: "FULL_SHARD",
  /** As FULL_SHARD, but the full parameters gathered for forward stay until backward ends (one gather per step). */
  SHARD_GRAD_OP: "SHARD_GRAD_OP",
  /** Nothing sharded: every rank keeps everything and gradients are all-reduced, as DDP. */
  NO_SHARD: "NO_SHARD",
} as const;
/** One of {@link ShardingStrategy}'s values. */
export type ShardingStrategy = typeof ShardingStrategy[keyof typeof ShardingStrategy];

/** Options of {@link CPUOffload}. */
export interface CPUOffloadOptions {
  /** Keep the shards (and their gradients and optimizer state) on the host between uses (default false). */
  offloadParams?: boolean;
}

/**
 * `torch.distributed.fsdp.CPUOffload(offload_params)`: with
 * `offloadParams`, each unit's shard lives on the host (`cpu`), so its
 * gradient and the optimizer's state and step do too; the full parameters
 * are gathered onto the model's device around forward and backward, and
 * the reduced gradient is written straight to the host. Useful when the
 * model is on webgpu; on cpu ranks it changes nothing.
 */
export class CPUOffload {
  /** Whether the shards live on the host. */
  readonly offloadParams: boolean;
  /** `offloadParams` defaults to false, as PyTorch. */
  constructor(options: CPUOffloadOptions = {}) {
    this.offloadParams = options.offloadParams ?? false;
  }
}

/** Options of {@link FullyShardedDataParallel}. */
export interface FullyShardedDataParallelOptions {
  /** Shard among the ranks of this group only (from `newGroup`); default: every rank. */
  processGroup?: DistributedGroup;
  /** Default {@link ShardingStrategy.FULL_SHARD}. */
  shardingStrategy?: ShardingStrategy;
  /**
   * Makes submodules FSDP units of their own (`sizeBasedAutoWrapPolicy`,
   * `ModuleWrapPolicy`, `transformerAutoWrapPolicy`); they get the same
   * options. Submodules wrapped by hand before are kept as they are.
   */
  autoWrapPolicy?: AutoWrapPolicy;
  /** This rank's device: the module is moved there first (PyTorch's `device_id`); inputs are moved there. */
  deviceId?: Device | string;
  /** Broadcast rank 0's parameters and buffers at construction (default false, as PyTorch). */
  syncModuleStates?: boolean;
  /**
   * PyTorch's `ignored_modules`: these modules' parameters (and their
   * submodules') are neither flattened, sharded nor reduced: every rank
   * keeps them whole, with its own local gradient; `parameters()` lists
   * them (under `module.<path>`) so the optimizer steps them, the state
   * dicts hold them whole, and `clipGradNorm_` leaves them out (PyTorch
   * 1.13 clips only its flat parameters). Auto-wrap does not wrap them.
   */
  ignoredModules?: Iterable<Module>;
  /** A {@link CPUOffload} (or its options): shards on the host between uses. */
  cpuOffload?: CPUOffloadOptions;
}

/** Options of {@link FullyShardedDataParallel.summonFullParams}. */
export interface SummonFullParamsOptions {
  /** Write changes of the full parameters back into the shards when `fn` ends (default true). */
  writeback?: boolean;
  /** Nested units gather theirs too (default true). */
  recurse?: boolean;
}

/** Summons now running: a forward inside one is an error (PyTorch's). */
let summoning = 0;

/**
 * Parameters of `m` not inside a nested unit, with their names, each once:
 * those not in `ignored` (or, with `wantIgnored`, only those in it).
 */
function ownUnitParameters(
  m: Module,
  ignored: ReadonlySet<Parameter> = NONE,
  wantIgnored = false,
): [string, Parameter][] {
  const out: [string, Parameter][] = [];
  const seen = new Set<Parameter>();
  const visit = (mod: Module, prefix: string) => {
    for (const [name, p] of mod.namedParameters("", false)) {
      if (!seen.has(p) && ignored.has(p) === wantIgnored) {
        seen.add(p);
        out.push([prefix + name, p]);
      }
    }
    for (const [field, child] of mod.namedChildren()) {
      if (!(child instanceof FullyShardedDataParallel)) visit(child, `${prefix}${field}.`);
    }
  };
  visit(m, "");
  return out;
}

const NONE: ReadonlySet<Parameter> = new Set();

function unwrappedNumel(m: Module, ignored: ReadonlySet<Parameter>): number {
  return ownUnitParameters(m, ignored).reduce((n, [, p]) => n + p.numel(), 0);
}

/**
 * PyTorch's `_get_ignored_modules` / `_get_ignored_params`: the parameters
 * of `ignoredModules` and their submodules (nested units excluded), checked.
 */
function ignoredParameters(
  root: Module,
  ignoredModules: Iterable<Module> | undefined,
): { modules: Set<Module>; params: Set<Parameter> } {
  const modules = new Set<Module>();
  const params = new Set<Parameter>();
  if (ignoredModules === undefined) return { modules, params };
  if (
    ignoredModules === null || typeof ignoredModules !== "object" ||
    !(Symbol.iterator in ignoredModules)
  ) {
    throw new TypeError(`${NAME}: ignoredModules must be an iterable of nn.Module`);
  }
  const visit = (m: Module) => {
    if (m instanceof FullyShardedDataParallel || modules.has(m)) return;
    modules.add(m);
    for (const [, p] of m.namedParameters("", false)) params.add(p);
    for (const [, child] of m.namedChildren()) visit(child);
  };
  for (const m of ignoredModules) {
    if (!(m instanceof Module)) {
      throw new TypeError(`${NAME}: ignoredModules must hold nn.Module instances, got ${typeof m}`);
    }
    if (m instanceof FullyShardedDataParallel) {
      throw new TypeError(`${NAME}: ignoredModules must not include FSDP units`);
    }
    if (m === root) {
      throw new Error(
        `${NAME}: ignoredModules holds the wrapped module itself (every parameter ignored); wrap its other submodules instead`,
      );
    }
    visit(m);
  }
  return { modules, params };
}

/** PyTorch's `_recursive_wrap`: wraps `module`'s children bottom-up where `policy` says. */
function recursiveWrap(
  module: Module,
  policy: AutoWrapPolicy,
  wrap: (m: Module) => Module,
  onlyChildren: boolean,
  ignored: { modules: Set<Module>; params: Set<Parameter> },
): Module {
  if (module instanceof FullyShardedDataParallel || ignored.modules.has(module)) return module;
  if (!policy(module, true, unwrappedNumel(module, ignored.params))) return module;
  for (const [field, child] of module.namedChildren()) {
    const wrapped = recursiveWrap(child, policy, wrap, false, ignored);
    if (wrapped !== child) (module as unknown as Record<string, unknown>)[field] = wrapped;
  }
  if (!onlyChildren && policy(module, false, unwrappedNumel(module, ignored.params))) {
    return wrap(module);
  }
  return module;
}

/** `[count, ndim, ...dims, ...]` of `params` (what the ranks compare at construction). */
function encodeShapes(params: readonly Parameter[]): Int32Array {
  const words = [params.length];
  for (const p of params) words.push(p.ndim, ...p.shape);
  return Int32Array.from(words);
}

function decodeShapes(words: Int32Array): string {
  const count = words[0];
  const shapes: string[] = [];
  let at = 1;
  for (let i = 0; i < count && at < words.length; i++) {
    const ndim = words[at++];
    shapes.push(formatShape([...words.subarray(at, at + ndim)]));
    at += ndim;
  }
  return `${count} parameter${count === 1 ? "" : "s"} ${shapes.join(", ")}`;
}

/**
 * Every rank must wrap a module of the same parameter shapes: compared in
 * two small blocking exchanges (the lengths, then the padded shape lists),
 * so a difference is an error on every rank naming the ranks and shapes,
 * not a hang or a wrong sum later.
 */
function checkSameShapes(group: ProcessGroup, params: readonly Parameter[]): void {
  const backend = group.backend;
  if (group.worldSize === 1 || !backend.allGatherSync) return;
  let mine = encodeShapes(params);
  if (mine.length > SYNC_WORDS) {
    // Too long to exchange: the count, the total and a hash of the shapes.
    let hash = 0;
    for (const w of mine) hash = (Math.imul(hash, 31) + w) | 0;
    mine = Int32Array.from([params.length, -1, hash]);
  }
  const lengthCall = group.call({ kind: "allGather", dtype: "int32", shapes: [[1]] });
  const lengths = group.runSync(
    lengthCall,
    () => backend.allGatherSync!(lengthCall, Int32Array.of(mine.length)),
  ).map((l) => l[0]);
  const longest = Math.max(...lengths);
  const padded = new Int32Array(longest);
  padded.set(mine);
  const call = group.call({ kind: "allGather", dtype: "int32", shapes: [[longest]] });
  const all = group.runSync(call, () => backend.allGatherSync!(call, padded));
  const key = (w: Int32Array) => w.join(",");
  const differing = all.map((w, r) => [r, w] as const).filter(([, w]) => key(w) !== key(all[0]));
  if (differing.length > 0) {
    const ranks = [0, ...differing.map(([r]) => r)];
    throw new DistributedError(
      `${NAME}: every rank must wrap a module of the same parameter shapes, but rank 0 has ${
        decodeShapes(all[0])
      } and ${
        differing.map(([r, w]) => `rank ${r} has ${decodeShapes(w)}`).join("; ")
      } (ranks of the group)`,
      ranks,
    );
  }
}

/**
 * Fully sharded data parallelism, as PyTorch 1.13's
 * `torch.distributed.fsdp.FullyShardedDataParallel`. Each unit (this
 * wrapper, and every nested one made by hand or by `autoWrapPolicy`)
 * flattens its own parameters (not nested units') into one flat parameter,
 * zero-padded to a multiple of the world size N; each rank keeps only its
 * 1/N shard, which is the leaf that {@link parameters} returns and the
 * optimizer steps. Before a unit's forward its full flat parameter is
 * all-gathered and the original parameters are set from it;
 * `FULL_SHARD` frees them after forward and gathers again when backward
 * reaches the unit's outputs, `SHARD_GRAD_OP` keeps them until backward
 * ends. As soon as every parameter of a unit has its gradient of the pass
 * (post-accumulate hooks: the unit's backward is done), the unit's flat
 * gradient is averaged, this rank's part goes into its shard's `.grad` and
 * the full gradients are dropped (a unit a parameter of which got no
 * gradient: at the end of backward), in stream order: no await is needed
 * before `optimizer.step()`. So N ranks with batch b train like one
 * process with batch N·b.
 *
 * Where it differs from PyTorch: multigrad tensors have no storage
 * offsets, so each original parameter holds its own slice of the gathered
 * flat parameter (written there straight from the host, no full flat
 * tensor on the device); they are released when the unit frees its full
 * parameter, between steps each rank holds only its shards (and their
 * gradients and optimizer state). Frees happen in stream order: while a
 * collective holds the device's queue (on cpu ranks, from the first gather
 * of a step until the step's work has run) nothing freed is given back, so
 * a FULL_SHARD training forward parks its full parameters and the unit's
 * backward takes them back instead of gathering into new memory (one
 * gather per unit and step, on every rank alike; again only when the shard
 * changed in between, e.g. an optimizer step); the gradient is reduced from the parameters' gradients
 * on the host, without a flat gradient on the device. The full parameters
 * are freed at the end of backward (PyTorch: as each unit's backward
 * ends). The collectives are PyTorch's: an all-gather of the shards and an
 * average reduce-scatter of the flat gradient. After a
 * {@link noSync} backward, call this wrapper's `zeroGrad`, not only the
 * optimizer's. The root frees its full parameters after forward too under
 * `FULL_SHARD` (PyTorch keeps the root's). Names: `parameters()` are
 * `flatParam`, `module.0.flatParam` (PyTorch 1.13:
 * `_fsdp_wrapped_module.flat_param`, nested units under their paths).
 *
 * @example
 * ```ts
 * export async function main(rank: number, worldSize: number) {
 *   const model = new distributed.fsdp.FullyShardedDataParallel(makeModel(), {
 *     autoWrapPolicy: distributed.fsdp.sizeBasedAutoWrapPolicy({ minNumParams: 1e5 }),
 *   });
 *   const opt = new optim.Adam(model.parameters(), { lr: 1e-3 });
 *   lossFn.forward(model.forward(x), y).backward(); // gradients reduce-scattered
 *   opt.step();
 * }
 * ```
 */
export class FullyShardedDataParallel<M extends Module = Module> extends Module {
  /** The wrapped module (its original parameters are only materialised around forward and backward). */
  readonly module: M;
  /** This unit's sharding strategy. */
  readonly shardingStrategy: ShardingStrategy;
  /** This rank's device. */
  readonly device: Device;
  /** Where the shard, its gradient and the optimizer state live: `cpu` under {@link CPUOffload}, else {@link device}. */
  readonly #home: Device;
  readonly #group: ProcessGroup;
  /** The group as the user passed it (the collectives' option). */
  readonly #groupOption: DistributedGroup | undefined;
  /** The original parameters this unit flattens (not nested units'), in order, with their names in `module`. */
  readonly #params: readonly Parameter[];
  readonly #names: readonly string[];
  /** Elements of the flat parameter before padding. */
  readonly #numel: number;
  /** Parameters of `ignoredModules` in this unit (not nested units'), with their names in `module`. */
  readonly #ignored: readonly [string, Parameter][];
  /** This rank's shard of the flat parameter (NO_SHARD: all of it). */
  readonly #shard: Parameter;
  /** Whether the original parameters hold the full values now. */
  #gathered = false;
  /** The full parameters' storages a training forward released, until its backward (see {@link #park}). */
  #parked: { storages: Storage[]; shard: Storage; version: number } | null = null;
  #syncing = true;
  /** Set by a forward with gradients on; cleared when its backward ends. */
  #armed = false;
  /** Whether this backward pass has reached the unit (its end callback is queued). */
  #inBackward = false;
  #summoned = false;
  /** Parameters whose gradient of this backward pass is in (see {@link #gradReady}). */
  readonly #ready = new Set<Parameter>();
  /** Whether this backward pass has reduced the unit's gradients already. */
  #reduced = false;
  /** Parameters of the unit that require grad. */
  #trainable = 0;
  /** The unit whose module holds this one (null: a root); set by that unit's constructor. */
  #parent: FullyShardedDataParallel | null = null;

  /** Wraps `module` (auto-wrapping its submodules first when `autoWrapPolicy` is given) and shards its parameters. */
  constructor(module: M, options: FullyShardedDataParallelOptions = {}) {
    super();
    if (!(module instanceof Module)) {
      throw new TypeError(`${NAME}: the first argument must be an nn.Module`);
    }
    if (module instanceof FullyShardedDataParallel) {
      throw new TypeError(`${NAME}: the module is already an FSDP unit; wrap its module instead`);
    }
    const strategy = options.shardingStrategy ?? ShardingStrategy.FULL_SHARD;
    if (!Object.values(ShardingStrategy).includes(strategy)) {
      throw new TypeError(
        `${NAME}: shardingStrategy must be one of ${
          Object.values(ShardingStrategy).join(", ")
        }, got ${JSON.stringify(strategy)}`,
      );
    }
    const group = activeGroup(NAME, options.processGroup);
    if (options.deviceId !== undefined) module.to(resolveDevice(options.deviceId));
    const ignored = ignoredParameters(module, options.ignoredModules);
    const named = ownUnitParameters(module, ignored.params);
    refuseLazy(named.map(([, p]) => p), NAME);
    const all = [...module.namedParameters(), ...module.namedBuffers()];
    const target = options.deviceId !== undefined
      ? resolveDevice(options.deviceId)
      : (all[0]?.[1].device ?? null);
    if (target === null) {
      throw new Error(`${NAME}: the module has no parameters or buffers; pass { deviceId }`);
    }
    const elsewhere = all.filter(([, t]) => t.device !== target);
    if (elsewhere.length > 0) {
      throw new Error(
        `${NAME}: every parameter and buffer must be on one device (${target}), but ${
          elsewhere.map(([n, t]) => `${n} is on ${t.device}`).join(", ")
        }; call module.to(device) or pass { deviceId }`,
      );
    }
    const dtypes = new Set(named.map(([, p]) => p.dtype));
    if (dtypes.size > 1) {
      throw new TypeError(
        `${NAME}: a unit flattens parameters of one dtype, but ${
          named.map(([n, p]) => `${n} is ${p.dtype}`).join(", ")
        }; wrap the parameters of other dtypes in units of their own`,
      );
    }
    this.module = module;
    this.shardingStrategy = strategy;
    this.device = target;
    this.#home = options.cpuOffload?.offloadParams ? resolveDevice("cpu") : target;
    this.#group = group;
    this.#groupOption = options.processGroup;
    this.#params = named.map(([, p]) => p);
    this.#names = named.map(([n]) => n);
    this.#numel = this.#params.reduce((n, p) => n + p.numel(), 0);
    // Ranks compare the whole module's shapes once, before any unit is made.
    if (!nestedConstruction) checkSameShapes(group, module.parameters());
    if (options.syncModuleStates && group.worldSize > 1) {
      // Before auto-wrapping frees them; units wrapped by hand earlier sync with their own option.
      const tensors = [...new Set([...named.map(([, p]) => p as Tensor), ...module.buffers()])];
      const byDType = new Map<string, Tensor[]>();
      for (const t of tensors) byDType.set(t.dtype, [...(byDType.get(t.dtype) ?? []), t]);
      for (const list of byDType.values()) broadcastFlat(group, list, 0, NAME);
    }
    if (options.autoWrapPolicy) {
      const policy = options.autoWrapPolicy;
      // The ignored modules as a list: a one-shot iterable was read here already.
      const childOptions = {
        ...options,
        autoWrapPolicy: undefined,
        syncModuleStates: false,
        ignoredModules: [...ignored.modules],
      };
      nestedConstruction = true;
      try {
        const wrap = (m: Module) => new FullyShardedDataParallel(m, childOptions);
        recursiveWrap(module, policy, wrap, true, ignored);
      } finally {
        nestedConstruction = false;
      }
      const mine = ownUnitParameters(module, ignored.params);
      this.#params = mine.map(([, p]) => p);
      this.#names = mine.map(([n]) => n);
      this.#numel = this.#params.reduce((n, p) => n + p.numel(), 0);
    }
    this.#ignored = ownUnitParameters(module, ignored.params, true);
    const frozen = this.#names.filter((_, i) => !this.#params[i].requiresGrad);
    if (frozen.length > 0 && frozen.length < this.#params.length) {
      // PyTorch 1.13's rule: one flat parameter has one requiresGrad.
      throw new Error(
        `${NAME}: a unit flattens parameters that all require grad or none do, but ${
          frozen.join(", ")
        } do not and the others do; wrap the frozen ones in a unit of their own`,
      );
    }
    const dtype = this.#params[0]?.dtype ?? "float32";
    this.#shard = new Parameter(empty([this.#shardNumel()], dtype, this.#home));
    this.#shard.requiresGrad = this.#params.some((p) => p.requiresGrad);
    if (this.#ranks() > 1) {
      markShardedGradient(
        this.#shard,
        `it is rank ${group.rank}'s shard of ${NAME}'s flat parameter (world size ${group.worldSize}): call clipGradNorm_(maxNorm, normType) of the FSDP root module on every rank, which all-reduces the norm`,
      );
    }
    const trainable = this.#params.filter((p) => p.requiresGrad);
    this.#trainable = trainable.length;
    for (const p of trainable) registerPostAccumulateGradHook(p, () => this.#gradReady(p));
    this.#reshard();
    // Units made earlier (by hand or by auto-wrap, innermost first) that no other unit holds yet.
    for (const u of this.#units()) if (u !== this && u.#parent === null) u.#parent = this;
  }

  /** Elements of this rank's shard. */
  #shardNumel(): number {
    const n = this.#ranks();
    return Math.ceil(this.#numel / n);
  }

  /** The ranks a flat parameter is split among (1 under NO_SHARD). */
  #ranks(): number {
    return this.shardingStrategy === ShardingStrategy.NO_SHARD ? 1 : this.#group.worldSize;
  }

  /** `tensors` flattened into one, zero-padded to `ranks · shard` elements. */
  #flatten(tensors: readonly Tensor[]): Tensor {
    const padded = this.#shardNumel() * this.#ranks();
    const parts = tensors.map((t) => t.reshape([-1]));
    if (padded > this.#numel) {
      parts.push(
        full([padded - this.#numel], 0, {
          dtype: this.#shard.dtype,
          device: tensors[0]?.device ?? this.device,
        }),
      );
    }
    return parts.length === 1 ? parts[0].clone() : cat(parts);
  }

  /** This rank's part of a flat (padded) tensor. */
  #part(flat: Tensor): Tensor {
    const s = this.#shardNumel();
    const rank = this.#ranks() === 1 ? 0 : this.#group.rank;
    const piece = flat.narrow(0, rank * s, s);
    return piece.storage === flat.storage ? piece.clone() : piece;
  }

  /** Takes the shard from the original parameters' current values, and frees them. */
  #reshard(): void {
    if (this.#params.length === 0) return;
    // tidy: the views and pieces made on the way are freed now, not whenever the collector runs.
    tidy(() =>
      noGrad(() => {
        const flat = this.#flatten(this.#params);
        this.#shard.copy_(this.#part(flat).to(this.#home));
      })
    );
    this.#gathered = true;
    this.#free();
  }

  /**
   * Gives each original parameter its slice of the full flat parameter:
   * the storages parked by the forward before when they are still there,
   * else every rank's shard gathered on the host and written straight into
   * the parameters (no full flat tensor on the device besides them).
   */
  #gather(): void {
    if (this.#gathered || this.#params.length === 0) return;
    const parked = this.#parked;
    this.#parked = null;
    const shard = this.#shard.storage;
    if (parked && parked.shard === shard && parked.version === shard.version) {
      this.#params.forEach((p, i) => p._setStorage(parked.storages[i]));
      this.#gathered = true;
      return;
    }
    // The shard changed since (an optimizer step, a loaded state dict): gather anew.
    for (const s of parked?.storages ?? []) s.dispose();
    tidy(() =>
      noGrad(() => {
        let pieces: Tensor[];
        if (this.#ranks() > 1) {
          pieces = this.#params.map((p) => empty(p.shape, p.dtype, this.device));
          const call = this.#group.call({
            kind: "allGather",
            dtype: this.#shard.dtype,
            shapes: [[this.#shardNumel()]],
          });
          writeFlat(pieces, allGatherOnHost(this.#group, call, [this.#shard.detach()], NAME));
        } else {
          let at = 0;
          pieces = this.#params.map((p) => {
            const piece = this.#shard.narrow(0, at, p.numel()).reshape(p.shape);
            at += p.numel();
            if (this.#home !== this.device) return piece.to(this.device);
            return piece.storage === this.#shard.storage ? piece.clone() : piece;
          });
        }
        this.#params.forEach((p, i) => {
          pieces[i].storage.persistent = true;
          p._setStorage(pieces[i].storage);
          p.storage.markModified();
        });
      })
    );
    this.#gathered = true;
  }

  /**
   * Releases the full parameters after a FULL_SHARD training forward (a
   * use is an error) but keeps their storages for this unit's backward,
   * which takes them back instead of gathering into new memory (unless the
   * shard changed since). While a collective holds the device's queue (the
   * usual case: the step is recorded before the first gather has landed) a
   * free would only be queued, the memory held all the same. They are kept
   * until that backward (or the next gather or free) whether or not the
   * queue ran meanwhile: whether a rank gathers again must not depend on
   * when its device ran, or a rank that read its loss before backward
   * would call one collective more than the others (a collective mismatch).
   */
  #park(): void {
    if (!this.#gathered) return;
    const storages = this.#params.map((p) => p.storage);
    const shard = this.#shard.storage;
    const released = empty([0], this.#shard.dtype, this.device).storage;
    released.dispose();
    for (const p of this.#params) p._setStorage(released);
    this.#gathered = false;
    this.#parked = { storages, shard, version: shard.version };
  }

  /** Releases the original parameters' memory (a use before the next gather is an error naming the release). */
  #free(): void {
    const parked = this.#parked;
    this.#parked = null;
    for (const s of parked?.storages ?? []) s.dispose();
    if (!this.#gathered) return;
    for (const p of this.#params) p.storage.dispose();
    this.#gathered = false;
  }

  /** Units of this tree (this one first, pre-order). */
  #units(): FullyShardedDataParallel[] {
    return this.namedModules().map(([, m]) => m).filter((m) =>
      m instanceof FullyShardedDataParallel
    ) as FullyShardedDataParallel[];
  }

  /**
   * Gathers the full parameters, runs the wrapped module on this rank's
   * batch (inputs moved to this rank's device) and, under `FULL_SHARD` or
   * without gradients, frees them again.
   */
  override forward(...args: Parameters<M["forward"]>): ReturnType<M["forward"]> {
    if (summoning > 0) {
      throw new Error(
        `${NAME}: forward was called while summonFullParams is active (rank ${this.#group.rank}); call it after the summoned function returns`,
      );
    }
    this.#gather();
    this.#armed = isGradEnabled() && this.#params.some((p) => p.requiresGrad);
    this.#inBackward = false;
    const moved = mapTensors(args, (t) => t.to(this.device)) as Parameters<M["forward"]>;
    const out = this.module.forward(...moved) as ReturnType<M["forward"]>;
    if (this.#armed) {
      mapTensors(out, (t) => {
        if (t.requiresGrad) registerTensorHook(t, () => void this.#preBackward());
        return t;
      });
    }
    // Without a backward to come, nothing is kept (every forward gathers, on every rank alike).
    if (!this.#armed) this.#free();
    else if (this.shardingStrategy === ShardingStrategy.FULL_SHARD) this.#park();
    return out;
  }

  /** Backward has reached one of the unit's outputs: its parameters are needed again. */
  #preBackward(): void {
    if (!this.#armed || this.#inBackward) return;
    this.#inBackward = true;
    this.#reduced = false;
    this.#ready.clear();
    this.#gather();
    queueBackwardCallback(() => this.#postBackward());
  }

  /**
   * A post-accumulate hook of one of the unit's parameters: once every
   * parameter of the unit that requires grad has its gradient of this pass,
   * the unit's backward is done and its gradient is reduced at once (as
   * PyTorch's post-backward hook), so the full gradients of the units are
   * not all alive together. A parameter this pass gives no gradient leaves
   * the reduction to the end of backward.
   */
  #gradReady(p: Parameter): void {
    if (!this.#inBackward || this.#reduced) return;
    this.#ready.add(p);
    if (this.#ready.size < this.#trainable) return;
    this.#reduced = true;
    this.#reduceGrads();
  }

  /** The end of backward: reduce the unit's gradients (unless done) and free the full parameters. */
  #postBackward(): void {
    this.#armed = false;
    this.#inBackward = false;
    this.#free();
    const reduced = this.#reduced;
    this.#reduced = false;
    this.#ready.clear();
    if (!reduced) this.#reduceGrads();
  }

  /** Reduces the original parameters' gradients into the shard's `.grad`, and drops them. */
  #reduceGrads(): void {
    // Under noSync the full gradients accumulate on the original parameters.
    if (!this.#syncing || !this.#shard.requiresGrad) return;
    // tidy: the flat gradient and the views made on the way are freed now (a
    // step's worth of them waiting for the collector held 2.6 MiB in bench `fsdp`).
    tidy(() =>
      noGrad(() => {
        const grads = this.#params.map((p) => p.grad ?? p.zerosLike());
        const shardNumel = this.#shardNumel();
        const reduced = empty([shardNumel], this.#shard.dtype, this.#home);
        if (this.#group.worldSize > 1) writeFlat([reduced], this.#reduceOnHost(grads));
        else reduced.copy_(this.#flatten(grads).to(this.#home));
        for (const p of this.#params) {
          p.grad?.dispose();
          p.grad = null;
        }
        reduced.storage.persistent = true;
        const shard = this.#shard;
        if (shard.grad) {
          shard.grad.add_(reduced);
          reduced.dispose();
        } else {
          shard.grad = reduced;
        }
      })
    );
  }

  /**
   * The average over the ranks of the flat gradient `grads` make, this
   * rank's part (NO_SHARD: all of it): read straight from the gradients
   * into a host array, reduce-scattered (NO_SHARD: all-reduced) there, the
   * same collectives as `reduceScatterTensor` and `allReduce` of the flat
   * gradient without that flat gradient on the device.
   */
  #reduceOnHost(grads: readonly Tensor[]): Promise<TypedArray> {
    const group = this.#group;
    const ranks = this.#ranks();
    const dtype = this.#shard.dtype;
    const padded = this.#shardNumel() * ranks;
    const host = borrowHost(dtype, padded);
    const values = readFlatInto(grads, host, 0, NAME).then(() => host.fill(0, this.#numel));
    const kind = ranks > 1 ? "reduceScatter" : "allReduce";
    const call = group.call({ kind, dtype, shapes: [[padded]], op: "avg" });
    return runOnHost(group, call, values, async (flat) => {
      const backend = group.backend;
      if (ranks === 1) {
        await backend.allReduce(call, flat);
        return flat;
      }
      let part: TypedArray;
      if (backend.reduceScatterInto) {
        part = borrowHost(dtype, padded / ranks);
        await backend.reduceScatterInto(call, flat, part);
      } else if (backend.reduceScatter) part = await backend.reduceScatter(call, flat);
      else {
        await backend.allReduce(call, flat);
        part = flat.slice(group.rank * padded / ranks, (group.rank + 1) * padded / ranks);
      }
      giveBackHost(flat);
      return part;
    }).catch((error) => {
      giveBackHost(host);
      throw error;
    });
  }

  /**
   * Every unit's flat shard, under `<unit path>.flatParam` (PyTorch:
   * `_fsdp_wrapped_module.flat_param`): what an optimizer takes. The
   * original parameters are not listed; {@link stateDict} names them.
   */
  override namedParameters(
    prefixOrOptions: string | { prefix?: string; recurse?: boolean } = "",
    recurse = true,
  ): [string, Parameter][] {
    const prefix = typeof prefixOrOptions === "string"
      ? prefixOrOptions
      : (prefixOrOptions.prefix ?? "");
    const deep = typeof prefixOrOptions === "string" ? recurse : (prefixOrOptions.recurse ?? true);
    const units = deep
      ? this.namedModules(prefix).filter(([, m]) => m instanceof FullyShardedDataParallel)
      : [[prefix, this] as [string, Module]];
    return units.flatMap(([name, m]) => {
      const unit = m as FullyShardedDataParallel;
      const at = name ? `${name}.` : "";
      const shard: [string, Parameter][] = unit.#params.length > 0
        ? [[`${at}flatParam`, unit.#shard]]
        : [];
      const ignored = unit.#ignored.map(([k, p]) => [`${at}module.${k}`, p] as [string, Parameter]);
      return [...shard, ...ignored];
    });
  }

  /**
   * Zeroes (or drops) the shards' gradients and the full gradients that
   * backward passes under {@link noSync} hold on the original parameters
   * (PyTorch keeps those in `flat_param.grad`, which its `zero_grad`
   * clears). Differs from PyTorch: an optimizer's `zeroGrad` sees only the
   * shards, so after a noSync backward call this one.
   */
  override zeroGrad(setToNone = true): void {
    super.zeroGrad(setToNone);
    const held = this.#units().flatMap((u) => u.#params.filter((p) => p.grad));
    for (const p of held) {
      if (setToNone) p.grad!.dispose();
      else noGrad(() => p.grad!.zero_());
    }
    if (setToNone) { for (const p of held) p.grad = null; }
  }

  /**
   * Runs `fn` with synchronisation off: backward passes inside it keep
   * their full gradients on the original parameters (accumulating), and the
   * next backward outside it reduce-scatters the sum (PyTorch's `no_sync`,
   * on the root: it holds for every nested unit; on a nested unit it is an
   * error naming the unit, as 1.13's assertion). `fn` may be async.
   */
  noSync<T>(fn: () => T): T {
    this.#refuseNested(`${NAME}.noSync`, "noSync() on inner FSDP instances is not supported");
    const units = this.#units();
    const previous = units.map((u) => u.#syncing);
    const restore = () => units.forEach((u, i) => (u.#syncing = previous[i]));
    units.forEach((u) => (u.#syncing = false));
    return runThen(fn, restore);
  }

  /** An error naming this unit and its root when it is a nested unit (`what`: PyTorch's words). */
  #refuseNested(op: string, what: string): void {
    if (this.#parent === null) return;
    let root: FullyShardedDataParallel = this.#parent;
    while (root.#parent !== null) root = root.#parent;
    const path = root.namedModules().find(([, m]) => m === this)?.[0] ?? "?";
    throw new Error(
      `${op}: ${what}, but this is the nested unit "${path}" (wrapping ${this.module.constructor.name}) of the root ${NAME} (wrapping ${root.module.constructor.name}) on rank ${this.#group.rank}; call the root's instead, on every rank`,
    );
  }

  /**
   * Scales the shards' gradients so that the norm of the whole model's
   * gradient (all shards of all ranks) is at most `maxNorm`, as
   * `nn.utils.clipGradNorm_` on the unsharded model: the local sums of
   * `|g|^p` (max for `"inf"`) are all-reduced, so every rank takes the same
   * coefficient. Returns the total norm (before clipping). Call it on the
   * root, on every rank. `nn.utils.clipGradNorm_` of the shards is an
   * error pointing here (PyTorch silently takes the local norm). The
   * gradients of `ignoredModules`' parameters (each rank's own) are
   * clipped too and their `|g|^p` summed over the ranks with the shards'
   * (PyTorch 1.13 clips `self.parameters()`, which holds them). `normType`
   * may also be given as `{ normType }`, as `nn.utils.clipGradNorm_` takes it.
   *
   * As PyTorch 1.13's FSDP, the gradients are scaled by
   * `maxNorm / (totalNorm + 1e-6)` only where that is below 1: a NaN total
   * norm (a NaN in any rank's gradients) leaves every gradient as it is,
   * and an infinite one scales them by 0 (finite values become 0, infinite
   * ones NaN). Every rank decides alike, from the all-reduced norm.
   * (`nn.utils.clipGradNorm_` of 1.13 clamps the coefficient instead, so a
   * NaN norm makes every gradient NaN there.) Only the root unit clips: on
   * a nested unit it is an error naming the unit, on every rank, before
   * any collective (PyTorch 1.13 asserts it is the root). Unlike 1.13,
   * which returns None, it returns the total norm, as PyTorch 2 does.
   */
  clipGradNorm_(
    maxNorm: number,
    normTypeOrOptions: number | "inf" | { normType?: number | "inf" } = 2,
  ): Tensor {
    const op = `${NAME}.clipGradNorm_`;
    if (typeof maxNorm !== "number" || Number.isNaN(maxNorm)) {
      throw new TypeError(`${op}: maxNorm must be a number, got ${String(maxNorm)}`);
    }
    const normType = typeof normTypeOrOptions === "object" && normTypeOrOptions !== null
      ? (normTypeOrOptions.normType ?? 2)
      : normTypeOrOptions;
    const p = normType === "inf" ? Infinity : normType;
    if (typeof p !== "number" || !(p > 0)) {
      throw new RangeError(
        `${op}: normType must be a positive number or "inf", got ${JSON.stringify(normType)}`,
      );
    }
    this.#refuseNested(op, "clip_grad_norm should only be called on the root (parent) instance");
    const units = this.#units();
    const withParams = units.find((u) => u.#params.length > 0);
    const dtype = withParams ? withParams.#shard.dtype : "float32";
    const home = withParams ? withParams.#home : this.device;
    return noGrad(() => {
      const grads: Tensor[] = [];
      const local = units.flatMap((u) => {
        // Replicated (NO_SHARD) gradients count once, not once per rank; ignored ones are each rank's own.
        const scale = u.#ranks() === 1 && u.#group.worldSize > 1 ? 1 / u.#group.worldSize : 1;
        const own = [
          ...(u.#shard.grad ? [[u.#shard.grad, scale] as const] : []),
          ...u.#ignored.flatMap(([, q]) => q.grad ? [[q.grad, 1] as const] : []),
        ];
        return own.map(([g, s]) => {
          grads.push(g);
          const term = p === Infinity ? g.abs().max() : g.abs().pow(p).sum().mul(s);
          return term.to(home);
        });
      });
      let total = local.length === 0
        ? full([], 0, { dtype, device: home })
        : (p === Infinity ? stack(local).max() : stack(local).sum());
      if (this.#group.worldSize > 1) {
        allReduce(total, { op: p === Infinity ? "max" : "sum", group: this.#groupOption });
      }
      if (p !== Infinity) total = total.pow(1 / p);
      const ratio = full([], maxNorm, { dtype, device: home }).div(total.add(1e-6));
      // PyTorch's `if clip_coef < 1`, without reading the value back: x · 1 is x for every x.
      const coefficient = where(ratio.lt(1), ratio, 1);
      for (const g of grads) g._assign(g.mul(coefficient.to(g.device)));
      return total;
    });
  }

  /**
   * Runs `fn` with every unit's full parameters gathered into the original
   * parameters of `module` (PyTorch's `summon_full_params` context); with
   * `writeback` (default) their values when `fn` ends become the shards'.
   * A forward inside `fn` is an error. `fn` may be async; the parameters
   * are freed when it settles. Every rank must call it.
   */
  summonFullParams<T>(fn: () => T, options: SummonFullParamsOptions = {}): T {
    const writeback = options.writeback ?? true;
    const units = options.recurse === false ? [this] : this.#units();
    const active = units.filter((u) => u.#summoned);
    if (active.length > 0) {
      throw new Error(`${NAME}.summonFullParams: already active on this unit (nested summons)`);
    }
    for (const u of units) {
      u.#gather();
      u.#summoned = true;
    }
    summoning++;
    const end = () => {
      summoning--;
      for (const u of units) {
        u.#summoned = false;
        if (writeback) u.#reshard();
        else u.#free();
      }
    };
    return runThen(fn, end);
  }

  /**
   * The optimizer's state as the plain module's optimizer would have it
   * (PyTorch 1.13's `full_optim_state_dict`, named as 2.0's
   * `optim_state_dict`): every state tensor of a flat shard is all-gathered
   * and cut into one tensor per original parameter, keyed by the original
   * parameter's index in the plain module's `parameters()` order (what
   * `optim.stateDict()` of one process training the plain module gives);
   * `param_groups` list those indices. Every rank gets it (PyTorch: rank 0
   * only by default) and every rank must call it. Load it back into a sharded
   * optimizer with {@link shardFullOptimStateDict}.
   */
  static optimStateDict(
    model: FullyShardedDataParallel,
    optimizer: { readonly params: readonly Tensor[]; stateDict(): OptimizerStateDictLike },
  ): OptimizerStateDict {
    if (!(model instanceof FullyShardedDataParallel)) {
      throw new TypeError(`${NAME}.optimStateDict: model must be a FullyShardedDataParallel`);
    }
    return optimStateDictOf(model.#view(), optimizer);
  }

  /**
   * PyTorch 1.13's `FSDP.full_optim_state_dict(model, optim, rank0_only=True)`:
   * {@link optimStateDict}'s full dict (every rank must call it: it
   * gathers) on rank 0 of the group, `{}` on the others unless
   * `rank0Only` is false (then every rank gets it).
   */
  static fullOptimStateDict(
    model: FullyShardedDataParallel,
    optimizer: { readonly params: readonly Tensor[]; stateDict(): OptimizerStateDictLike },
    options: { rank0Only?: boolean } = {},
  ): OptimizerStateDict | Record<string, never> {
    const full = FullyShardedDataParallel.optimStateDict(model, optimizer);
    if ((options.rank0Only ?? true) && model.#group.rank !== 0) {
      for (const entry of Object.values(full.state)) {
        for (const v of Object.values(entry)) if (typeof v !== "number") v.dispose();
      }
      return {};
    }
    return full;
  }

  /**
   * PyTorch's `FSDP.scatter_full_optim_state_dict(full_osd, model)`: rank
   * 0 of `model`'s group passes the full optimizer state dict
   * ({@link fullOptimStateDict}'s, saved at any world size), the other
   * ranks pass null; each rank gets what its optimizer of `model`'s shards
   * loads ({@link shardFullOptimStateDict}'s). Differs from PyTorch: rank 0
   * broadcasts the whole dict through the host (`broadcastObjectList`)
   * and every rank cuts its own shard, so it is async (reading rank 0's
   * tensors) and every rank briefly holds the full state; PyTorch's rank 0
   * shards and scatters. A missing or malformed dict on rank 0 is an error
   * on every rank. Every rank must call it.
   */
  static async scatterFullOptimStateDict(
    fullOptimStateDict: OptimizerStateDictLike | null,
    model: FullyShardedDataParallel,
  ): Promise<OptimizerStateDict> {
    const op = `${NAME}.scatterFullOptimStateDict`;
    if (!(model instanceof FullyShardedDataParallel)) {
      throw new TypeError(`${op}: model must be a FullyShardedDataParallel`);
    }
    return await scatterFullOptimStateDictOf(fullOptimStateDict, model.#view());
  }

  /**
   * PyTorch 2.0's `FSDP.optim_state_dict_to_load(optim_state_dict, model,
   * optim)`: {@link shardFullOptimStateDict}'s dict for `optimizer`, which
   * must hold `model.parameters()` in their order (an optimizer made from
   * them): another optimizer would take the shards' state under the wrong
   * indices, so that is an error. No collective runs.
   */
  static optimStateDictToLoad(
    optimStateDict: OptimizerStateDictLike,
    model: FullyShardedDataParallel,
    optimizer: { readonly params: readonly Tensor[] },
  ): OptimizerStateDict {
    const op = `${NAME}.optimStateDictToLoad`;
    if (!(model instanceof FullyShardedDataParallel)) {
      throw new TypeError(`${op}: model must be a FullyShardedDataParallel`);
    }
    return optimStateDictToLoadOf(optimStateDict, model.#view(), optimizer);
  }

  /**
   * PyTorch's `FSDP.shard_full_optim_state_dict(full_osd, model)`: the
   * part of a full optimizer state dict ({@link optimStateDict}'s, or the
   * plain module's optimizer's: state by the index of the parameter in the
   * plain module's `parameters()`) that this rank's optimizer of `model`'s
   * shards takes in `loadStateDict`: each unit's per-parameter state
   * tensors flattened, zero-padded and cut to this rank's shard (keyed by
   * the shard's index in `model.parameters()`, the order an optimizer made
   * from them has). The full dict does not depend on the world size or the
   * wrapping it was saved with, so it loads at any (as PyTorch's). A dict
   * of another model (more parameters, other shapes, a sharded dict) is an
   * error naming the parameter. Every rank calls it; no collective runs.
   */
  static shardFullOptimStateDict(
    fullOptimStateDict: OptimizerStateDictLike,
    model: FullyShardedDataParallel,
  ): OptimizerStateDict {
    const op = `${NAME}.shardFullOptimStateDict`;
    if (!(model instanceof FullyShardedDataParallel)) {
      throw new TypeError(`${op}: model must be a FullyShardedDataParallel`);
    }
    return shardFullOptimStateDictOf(fullOptimStateDict, model.#view());
  }

  /** `key` of `module`'s state dict without the `module.` steps through nested units. */
  #cleanKey(key: string): string {
    const out: string[] = [];
    let m: unknown = this.module;
    for (const part of key.split(".")) {
      if (m instanceof FullyShardedDataParallel && part === "module") {
        m = m.module;
        continue;
      }
      out.push(part);
      m = m instanceof Module ? (m as unknown as Record<string, unknown>)[part] : undefined;
    }
    return out.join(".");
  }

  /**
   * The state dict of the type {@link stateDictType} set (default
   * `FULL_STATE_DICT`): the original parameters, unflattened, and the
   * buffers, under the names the plain module has (copies: they do not
   * change with training); with {@link FullStateDictConfig}'s `rank0Only`
   * ranks other than 0 get `{}`, with `offloadToCpu` the tensors are on the
   * host. `LOCAL_STATE_DICT`: each unit's flat shard under
   * `<unit path>.flatParam`, and the buffers. `SHARDED_STATE_DICT`: each
   * original parameter's chunk of rows of this rank
   * ({@link shardedTensorMetadata}) under its plain name, and the buffers.
   * LOCAL and SHARDED dicts also hold a {@link SHARD_INFO_PREFIX} key
   * naming the saving rank (PyTorch keeps it in ShardedTensors' metadata). Every
   * rank must call it (FULL and SHARDED gather).
   */
  override stateDict(): Record<string, Tensor> {
    const type = dictTypes.get(this) ?? StateDictType.FULL_STATE_DICT;
    return stateDictOf(this.#view(), type, dictConfigs.get(this));
  }

  /**
   * Loads a state dict of the type {@link stateDictType} set: a full one
   * (the plain module's names) is loaded into the original parameters and
   * re-sharded; a local one copies each unit's shard; a sharded one
   * all-gathers each parameter's chunks (PyTorch's
   * `_sharded_pre_load_state_dict_hook`). Options as `Module.loadStateDict`.
   * LOCAL and SHARDED dicts load only at the world size they were saved
   * with, each rank its own: a missing or unexpected key, a chunk of the
   * wrong shape, or another rank's or world size's dict is an error on
   * every rank naming the ranks and shapes (checked before any collective
   * runs, in a small blocking exchange as the constructor's shape check: a
   * rank must not be awaiting, alone, a value of an earlier collective
   * when the others reach it).
   */
  override loadStateDict(
    stateDict: Record<string, Tensor>,
    ...rest: unknown[]
  ): ReturnType<Module["loadStateDict"]> {
    const type = dictTypes.get(this) ?? StateDictType.FULL_STATE_DICT;
    const load = Module.prototype.loadStateDict as (
      this: Module,
      sd: Record<string, Tensor>,
      ...r: unknown[]
    ) => ReturnType<Module["loadStateDict"]>;
    if (type === StateDictType.LOCAL_STATE_DICT || type === StateDictType.SHARDED_STATE_DICT) {
      return loadShardedOf(this.#view(), type, stateDict) as ReturnType<Module["loadStateDict"]>;
    }
    return this.summonFullParams(() => {
      const inner = new Map(
        Object.keys(this.module.stateDict()).map((k) => [this.#cleanKey(k), k]),
      );
      const mapped: Record<string, Tensor> = {};
      for (const [k, v] of Object.entries(stateDict)) mapped[inner.get(k) ?? k] = v;
      return load.call(this.module, mapped, ...rest);
    });
  }

  /** What state_dict.ts reads of this root (its private state). */
  #view(): RootView {
    return {
      root: this,
      module: this.module,
      device: this.device,
      group: this.#group,
      groupOption: this.#groupOption,
      units: this.#units().map((u) => u.#unitView()),
      cleanKey: (key) => this.#cleanKey(key),
      summon: (fn, options) => this.summonFullParams(fn, options),
    };
  }

  /** What state_dict.ts reads of this unit. */
  #unitView(): UnitView {
    return {
      shard: this.#shard,
      params: this.#params,
      ignored: this.#ignored,
      home: this.#home,
      ranks: this.#ranks(),
      shardNumel: this.#shardNumel(),
      groupOption: this.#groupOption,
      flatten: (tensors) => this.#flatten(tensors),
      part: (flat) => this.#part(flat),
    };
  }
}

/** Whether units are being made by a root's auto-wrap (they skip the root's checks). */
let nestedConstruction = false;

/**
 * `FullyShardedDataParallel.state_dict_type(model, type, config)`: runs
 * `fn` with `model.stateDict()` and `model.loadStateDict()` of `type` (and,
 * for `FULL_STATE_DICT`, a {@link FullStateDictConfig}), then restores the
 * type and config before. `fn` may be async.
 *
 * @example
 * ```ts
 * const { FULL_STATE_DICT } = distributed.fsdp.StateDictType;
 * const config = new distributed.fsdp.FullStateDictConfig({ offloadToCpu: true, rank0Only: true });
 * const sd = distributed.fsdp.stateDictType(model, FULL_STATE_DICT, config, () => model.stateDict());
 * ```
 */
export function stateDictType<T>(
  model: FullyShardedDataParallel,
  type: StateDictType,
  fn: () => T,
): T;
/** With a {@link FullStateDictConfig} (or its options) for `FULL_STATE_DICT`. */
export function stateDictType<T>(
  model: FullyShardedDataParallel,
  type: StateDictType,
  config: FullStateDictConfigOptions | null | undefined,
  fn: () => T,
): T;
export function stateDictType<T>(
  model: FullyShardedDataParallel,
  type: StateDictType,
  configOrFn: FullStateDictConfigOptions | null | undefined | (() => T),
  maybeFn?: () => T,
): T {
  if (!(model instanceof FullyShardedDataParallel)) {
    throw new TypeError("stateDictType: model must be a FullyShardedDataParallel");
  }
  if (!Object.values(StateDictType).includes(type)) {
    throw new TypeError(
      `stateDictType: type must be one of ${Object.values(StateDictType).join(", ")}, got ${
        JSON.stringify(type)
      }`,
    );
  }
  const fn = typeof configOrFn === "function" ? configOrFn : maybeFn;
  const given = typeof configOrFn === "function" ? undefined : configOrFn;
  if (typeof fn !== "function") {
    throw new TypeError("stateDictType: the last argument must be the function to run");
  }
  if (given != null && type !== StateDictType.FULL_STATE_DICT) {
    // PyTorch 1.13's Local/ShardedStateDictConfig have no fields.
    throw new TypeError(
      `stateDictType: a FullStateDictConfig goes with FULL_STATE_DICT, not ${type}`,
    );
  }
  const config = given == null ? undefined : new FullStateDictConfig(given);
  const previous = dictTypes.get(model);
  const previousConfig = dictConfigs.get(model);
  const restore = () => {
    if (previous === undefined) dictTypes.delete(model);
    else dictTypes.set(model, previous);
    if (previousConfig === undefined) dictConfigs.delete(model);
    else dictConfigs.set(model, previousConfig);
  };
  dictTypes.set(model, type);
  if (config) dictConfigs.set(model, config);
  else dictConfigs.delete(model);
  return runThen(fn, restore);
}

/**
 * `fn()`, then `cleanup` once it has ended: at once for a plain result or a
 * throw, when the promise settles for an async `fn` (a context manager's
 * exit, for callers that may pass either kind of function).
 */
function runThen<T>(fn: () => T, cleanup: () => void): T {
  let result: T;
  try {
    result = fn();
  } catch (error) {
    cleanup();
    throw error;
  }
  if (result instanceof Promise) return result.finally(cleanup) as T;
  cleanup();
  return result;
}
