/**
 * The state dicts and optimizer state dicts of
 * {@link FullyShardedDataParallel} (PyTorch 1.13's
 * `torch.distributed.fsdp` `StateDictType`, `FullStateDictConfig`,
 * `SHARDED_STATE_DICT`, `full_optim_state_dict` and friends; the public
 * names are in state_dict_types.ts): the class
 * keeps its public methods and gives these functions a {@link RootView} of
 * its private state, so this file imports nothing of it but types.
 * @module
 */

import { noGrad } from "../../autograd.ts";
import { type Device, device as resolveDevice } from "../../device.ts";
import type { Module, Parameter } from "../../nn/module.ts";
import { full, tensor as tensorOf } from "../../ops/factory.ts";
import { empty } from "../../ops/util.ts";
import { cat } from "../../ops/view.ts";
import type { TypedArray } from "../../dtype.ts";
import { formatShape } from "../../shape.ts";
import type { Tensor } from "../../tensor.ts";
import type {
  OptimizerStateDict,
  OptimizerStateDictLike,
  ParamState,
} from "../../optim/optimizer.ts";
import { DistributedError, type DistributedGroup } from "../backend.ts";
import { broadcastObjectList } from "../objects.ts";
import { allGatherIntoTensor } from "../coalesced.ts";
import type { ProcessGroup } from "../state.ts";
import type { SummonFullParamsOptions } from "./fully_sharded.ts";
import {
  type FullStateDictConfig,
  SHARD_INFO_PREFIX,
  shardedTensorMetadata,
  StateDictType,
} from "./state_dict_types.ts";

const NAME = "FullyShardedDataParallel";

/**
 * Every rank says whether it found `problem`; if any did, every rank throws
 * (the ranks that found none a {@link DistributedError} naming those that
 * did), so a bad shard on one rank is an error everywhere, not a hang in
 * the collective that follows. Blocking (a small host exchange).
 */
function agree(group: ProcessGroup, op: string, problem: string | null): void {
  const backend = group.backend;
  if (group.worldSize === 1 || !backend.allGatherSync) {
    if (problem) throw new DistributedError(problem, [group.rank]);
    return;
  }
  const call = group.call({ kind: "allGather", dtype: "int32", shapes: [[1]] });
  const flags = group.runSync(
    call,
    () => backend.allGatherSync!(call, Int32Array.of(problem ? 1 : 0)),
  ).map((f) => f[0]);
  const bad = flags.flatMap((f, r) => f ? [r] : []);
  if (bad.length === 0) return;
  throw new DistributedError(
    problem ??
      `${op}: rank${bad.length === 1 ? "" : "s"} ${
        bad.join(", ")
      } of the group cannot load the state dict it was given (see the error there)`,
    bad,
  );
}

/** The state dict type {@link stateDictType} set on each root. */
export const dictTypes = new WeakMap<Module, StateDictType>();
/** The {@link FullStateDictConfig} {@link stateDictType} set on each root. */
export const dictConfigs = new WeakMap<Module, FullStateDictConfig>();

/** What the functions here read of one FSDP unit (its private state). */
export interface UnitView {
  /** This rank's shard of the flat parameter. */
  readonly shard: Parameter;
  /** The original parameters the unit flattens, in order. */
  readonly params: readonly Parameter[];
  /** Parameters of `ignoredModules` in the unit, with their names in its module. */
  readonly ignored: readonly [string, Parameter][];
  /** Where the shard and its optimizer state live. */
  readonly home: Device;
  /** The ranks the flat parameter is split among (1 under NO_SHARD). */
  readonly ranks: number;
  /** Elements of this rank's shard. */
  readonly shardNumel: number;
  /** The group as the user passed it. */
  readonly groupOption: DistributedGroup | undefined;
  /** Tensors flattened into one, zero-padded to `ranks · shardNumel`. */
  flatten(tensors: readonly Tensor[]): Tensor;
  /** This rank's part of a flat (padded) tensor. */
  part(flat: Tensor): Tensor;
}

/** What the functions here read of a root FSDP module. */
export interface RootView {
  /** The root itself (its `parameters()` are the shards). */
  readonly root: Module;
  /** The wrapped module. */
  readonly module: Module;
  /** This rank's device. */
  readonly device: Device;
  readonly group: ProcessGroup;
  readonly groupOption: DistributedGroup | undefined;
  /** Every unit of the tree, the root first (pre-order). */
  readonly units: readonly UnitView[];
  /** A key of `module`'s state dict without the `module.` steps through nested units. */
  cleanKey(key: string): string;
  /** `summonFullParams` of the root. */
  summon<T>(fn: () => T, options?: SummonFullParamsOptions): T;
}

/** {@link FullyShardedDataParallel.optimStateDict}'s dict (the model checked). */
export function optimStateDictOf(
  view: RootView,
  optimizer: { readonly params: readonly Tensor[]; stateDict(): OptimizerStateDictLike },
): OptimizerStateDict {
  const sd = optimizer.stateDict();
  const params = optimizer.params;
  const plainIndex = new Map(view.module.parameters().map((p, i) => [p, i]));
  const state: Record<number, ParamState> = {};
  const originals = new Map<number, number[]>();
  noGrad(() => {
    for (const unit of view.units) {
      const i = params.indexOf(unit.shard);
      if (i < 0 || unit.params.length === 0) continue;
      originals.set(i, unit.params.map((p) => plainIndex.get(p)!));
      const entries = Object.entries((sd.state[i] ?? {}) as ParamState);
      const perParam = unit.params.map(() => ({} as ParamState));
      for (const [key, value] of entries) {
        if (typeof value === "number" || value.numel() !== unit.shardNumel) {
          perParam.forEach((st) => (st[key] = typeof value === "number" ? value : value.clone()));
          continue;
        }
        let flat = value.reshape([-1]);
        if (unit.ranks > 1) {
          flat = empty([unit.shardNumel * unit.ranks], value.dtype, value.device);
          allGatherIntoTensor(flat, value.reshape([-1]), { group: unit.groupOption });
        }
        let at = 0;
        unit.params.forEach((p, k) => {
          perParam[k][key] = flat.narrow(0, at, p.numel()).reshape(p.shape).clone();
          at += p.numel();
        });
      }
      unit.params.forEach((p, k) => {
        if (entries.length > 0) state[plainIndex.get(p)!] = perParam[k];
      });
    }
    // The ignored modules' parameters: their own state, as the plain optimizer's.
    for (const [, p] of view.units.flatMap((u) => u.ignored)) {
      const i = params.indexOf(p);
      if (i < 0) continue;
      const at = plainIndex.get(p)!;
      originals.set(i, [at]);
      const entry = sd.state[i] as ParamState | undefined;
      if (!entry) continue;
      state[at] = Object.fromEntries(
        Object.entries(entry).map(([k, v]) => [k, typeof v === "number" ? v : v.clone()]),
      );
    }
  });
  const groups = sd.param_groups.map((group) => ({
    ...group,
    params: group.params.flatMap((i) => originals.get(i) ?? []).sort((a, b) => a - b),
  }));
  return { state, param_groups: groups };
}

/** {@link FullyShardedDataParallel.scatterFullOptimStateDict} (the model checked). */
export async function scatterFullOptimStateDictOf(
  fullOptimStateDict: OptimizerStateDictLike | null,
  view: RootView,
): Promise<OptimizerStateDict> {
  const op = `${NAME}.scatterFullOptimStateDict`;
  const group = view.group;
  type Wire = { error: string } | {
    state: Record<
      string,
      Record<string, number | { shape: number[]; dtype: string; data: TypedArray }>
    >;
    param_groups: OptimizerStateDict["param_groups"];
  };
  let payload: Wire | null = null;
  if (group.rank === 0) {
    const full = fullOptimStateDict as OptimizerStateDict | null;
    if (typeof full !== "object" || full === null || !Array.isArray(full.param_groups)) {
      payload = {
        error:
          `${op}: rank 0 must pass the full optimizer state dict ({ state, param_groups }), got ${
            full === null
              ? "null"
              : typeof full === "object"
              ? "an object without param_groups"
              : typeof full
          }`,
      };
    } else {
      const state: Record<
        string,
        Record<string, number | { shape: number[]; dtype: string; data: TypedArray }>
      > = {};
      for (const [i, entry] of Object.entries(full.state ?? {})) {
        state[i] = {};
        for (const [k, v] of Object.entries(entry as ParamState)) {
          state[i][k] = typeof v === "number"
            ? v
            : { shape: [...v.shape], dtype: v.dtype, data: await v.data() };
        }
      }
      payload = { state, param_groups: full.param_groups };
    }
  }
  const list: unknown[] = [payload];
  await broadcastObjectList(list, {
    src: group.members?.[0] ?? 0,
    group: view.groupOption,
  });
  const got = list[0] as Wire;
  if ("error" in got) throw new DistributedError(got.error, [group.members?.[0] ?? 0]);
  const state: Record<number, ParamState> = {};
  for (const [i, entry] of Object.entries(got.state)) {
    const st: ParamState = {};
    for (const [k, v] of Object.entries(entry)) {
      st[k] = typeof v === "number"
        ? v
        : tensorOf(v.data, { dtype: v.dtype as Tensor["dtype"], device: view.device })
          .reshape(v.shape);
    }
    state[Number(i)] = st;
  }
  const sharded = shardFullOptimStateDictOf(
    { state, param_groups: got.param_groups },
    view,
  );
  for (const entry of Object.values(state)) {
    for (const v of Object.values(entry)) if (typeof v !== "number") v.dispose();
  }
  return sharded;
}

/** {@link FullyShardedDataParallel.optimStateDictToLoad} (the model checked). */
export function optimStateDictToLoadOf(
  optimStateDict: OptimizerStateDictLike,
  view: RootView,
  optimizer: { readonly params: readonly Tensor[] },
): OptimizerStateDict {
  const op = `${NAME}.optimStateDictToLoad`;
  const mine = view.root.parameters();
  const theirs = optimizer?.params ?? [];
  const at = mine.findIndex((p, i) => theirs[i] !== p);
  if (at >= 0 || theirs.length !== mine.length) {
    const names = view.root.namedParameters().map(([k]) => k);
    throw new Error(
      `${op}: the optimizer must hold model.parameters() in order (${mine.length}: ${
        names.join(", ")
      }), but it holds ${theirs.length} parameter(s)${
        at >= 0 ? ` and its parameter ${at} is not ${names[at]}` : ""
      }; make it from model.parameters()`,
    );
  }
  return shardFullOptimStateDictOf(optimStateDict, view);
}

/** {@link FullyShardedDataParallel.shardFullOptimStateDict} (the model checked). */
export function shardFullOptimStateDictOf(
  fullOptimStateDict: OptimizerStateDictLike,
  view: RootView,
): OptimizerStateDict {
  const op = `${NAME}.shardFullOptimStateDict`;
  const full = fullOptimStateDict as OptimizerStateDict;
  if (typeof full !== "object" || full === null || !Array.isArray(full.param_groups)) {
    throw new TypeError(`${op}: expected an optimizer state dict ({ state, param_groups })`);
  }
  const plain = view.module.namedParameters().map(([k, p]) => [view.cleanKey(k), p] as const);
  const nameOf = (i: number) => `${i} (${plain[i][0]})`;
  const stateKeys = Object.keys(full.state ?? {}).map(Number);
  const groupKeys = full.param_groups.flatMap((g) => g.params);
  const outside = [...stateKeys, ...groupKeys].filter((i) =>
    !Number.isInteger(i) || i < 0 || i >= plain.length
  );
  if (outside.length > 0) {
    throw new RangeError(
      `${op}: the state dict names parameter ${
        outside[0]
      }, but the plain module of model has ${plain.length} parameters (a dict of another model?)`,
    );
  }
  const plainIndex = new Map(plain.map(([, p], i) => [p as Parameter, i]));
  const shardIndex = new Map(view.root.parameters().map((p, i) => [p, i]));
  const state: Record<number, ParamState> = {};
  const unitOf = new Map<number, number>();
  noGrad(() => {
    for (const unit of view.units) {
      const at = shardIndex.get(unit.shard);
      if (at === undefined || unit.params.length === 0) continue;
      const indices = unit.params.map((p) => plainIndex.get(p)!);
      indices.forEach((i) => unitOf.set(i, at));
      const entries = indices.map((i) => (full.state[i] ?? {}) as ParamState);
      const keys = [...new Set(entries.flatMap((e) => Object.keys(e)))];
      if (keys.length === 0) continue;
      const sharded: ParamState = {};
      for (const key of keys) {
        const values = entries.map((e) => e[key]);
        // A number, or a 0-d tensor of a parameter that is not 0-d, is a step count: the
        // unit's, taken from the first parameter's. A 0-d parameter's 0-d state is its own.
        const scalar = values.find((v, k) =>
          typeof v === "number" || (v !== undefined && v.ndim === 0 && unit.params[k].ndim > 0)
        );
        if (scalar !== undefined) {
          sharded[key] = typeof scalar === "number" ? scalar : scalar.clone();
          continue;
        }
        const pieces = values.map((v, k) => {
          const p = unit.params[k];
          if (v === undefined) return p.zerosLike().detach().to(unit.home);
          const t = v as Tensor;
          if (typeof v === "number" || formatShape(t.shape) !== formatShape(p.shape)) {
            throw new RangeError(
              `${op}: state ${indices[k]}.${key} has shape ${
                typeof v === "number" ? "[] (a number)" : formatShape(t.shape)
              }, but parameter ${nameOf(indices[k])} has ${
                formatShape(p.shape)
              } (a dict of another model, or a sharded one: pass FSDP.optimStateDict's full dict)`,
            );
          }
          return t.to(unit.home);
        });
        const flat = unit.flatten(pieces);
        const mine = unit.part(flat);
        if (mine !== flat) flat.dispose();
        sharded[key] = mine;
      }
      state[at] = sharded;
    }
    for (const [, p] of view.units.flatMap((u) => u.ignored)) {
      const at = shardIndex.get(p);
      const i = plainIndex.get(p);
      if (at === undefined || i === undefined) continue;
      unitOf.set(i, at);
      const entry = full.state[i] as ParamState | undefined;
      if (!entry) continue;
      const st: ParamState = {};
      for (const [key, v] of Object.entries(entry)) {
        if (
          typeof v !== "number" && v.ndim > 0 && formatShape(v.shape) !== formatShape(p.shape)
        ) {
          throw new RangeError(
            `${op}: state ${i}.${key} has shape ${formatShape(v.shape)}, but parameter ${
              nameOf(i)
            } (of an ignored module) has ${formatShape(p.shape)}`,
          );
        }
        st[key] = typeof v === "number" ? v : v.to(p.device).clone();
      }
      state[at] = st;
    }
  });
  const groups = full.param_groups.map((group) => {
    const shards = [...new Set(group.params.map((i) => unitOf.get(i)))]
      .filter((i): i is number => i !== undefined)
      .sort((a, b) => a - b);
    return { ...group, params: shards };
  });
  return { state, param_groups: groups };
}

/**
 * The original parameters' keys (as the plain module names them) with
 * the parameters; `whole`: the ignored modules' parameters and the
 * buffers (every rank holds them whole).
 */
function plainEntries(
  view: RootView,
): { params: [string, Parameter][]; whole: [string, Tensor][] } {
  const managed = new Set(view.units.flatMap((u) => u.params));
  const named = view.module.namedParameters().map(([k, p]) =>
    [view.cleanKey(k), p] as [string, Parameter]
  );
  return {
    params: named.filter(([, p]) => managed.has(p)),
    whole: [
      ...named.filter(([, p]) => !managed.has(p)),
      ...view.module.namedBuffers().map(([k, t]) => [view.cleanKey(k), t] as [string, Tensor]),
    ],
  };
}

/** Adds the {@link SHARD_INFO_PREFIX} entry of this rank to a SHARDED or LOCAL dict. */
function addShardInfo(view: RootView, out: Record<string, Tensor>): void {
  const { rank, worldSize } = view.group;
  out[`${SHARD_INFO_PREFIX}.rank${rank}.of${worldSize}`] = tensorOf([rank, worldSize], {
    dtype: "int32",
    device: resolveDevice("cpu"),
  });
}

/**
 * Checks a SHARDED or LOCAL dict's {@link SHARD_INFO_PREFIX} key (LOCAL
 * dicts saved before it existed have none) against this rank and world
 * size: another rank's or world size's dict is an error (PyTorch's
 * ShardedTensor metadata), not a silently wrong model.
 */
function checkShardInfo(view: RootView, infoKeys: string[], what: string): string | null {
  const here = view.group;
  const op = `${NAME}.loadStateDict (${what}) on rank ${here.rank} of world size ${here.worldSize}`;
  if (infoKeys.length > 1) {
    return `${op}: the dict holds ${infoKeys.join(", ")} (several ranks' dicts merged?)`;
  }
  if (infoKeys.length === 0) return null;
  const m = /^_fsdpShard\.rank(\d+)\.of(\d+)$/.exec(infoKeys[0]);
  if (!m) return `${op}: malformed key ${infoKeys[0]}`;
  const [rank, worldSize] = [Number(m[1]), Number(m[2])];
  if (rank === here.rank && worldSize === here.worldSize) return null;
  return `${op}: the dict is rank ${rank}'s of world size ${worldSize}${
    worldSize === here.worldSize ? " (each rank loads the dict it saved)" : ""
  }; a ${what} loads only at the world size it was saved with (a FULL_STATE_DICT loads at any)`;
}

/** {@link FullyShardedDataParallel.stateDict} of `type` (`config`: FULL_STATE_DICT's). */
export function stateDictOf(
  view: RootView,
  type: StateDictType,
  config: FullStateDictConfig | undefined,
): Record<string, Tensor> {
  const out: Record<string, Tensor> = {};
  if (type === StateDictType.LOCAL_STATE_DICT) {
    noGrad(() => {
      for (const [k, t] of view.root.namedParameters()) out[k] = t.detach().clone();
      for (const [k, t] of view.module.namedBuffers()) {
        out[view.cleanKey(k)] = t.detach().clone();
      }
    });
    addShardInfo(view, out);
    return out;
  }
  if (type === StateDictType.SHARDED_STATE_DICT) {
    const { rank, worldSize } = view.group;
    view.summon(() =>
      noGrad(() => {
        const { params, whole } = plainEntries(view);
        for (const [k, p] of params) {
          const meta = shardedTensorMetadata(p.shape, rank, worldSize);
          if (p.ndim === 0) {
            out[k] = rank === 0 ? p.detach().clone() : empty([0], p.dtype, p.device);
          } else if (meta.shape[0] === 0) out[k] = empty(meta.shape, p.dtype, p.device);
          else out[k] = p.detach().narrow(0, meta.offsets[0], meta.shape[0]).clone();
        }
        for (const [k, t] of whole) out[k] = t.detach().clone();
      }), { writeback: false });
    addShardInfo(view, out);
    return out;
  }
  const host = config?.offloadToCpu ? resolveDevice("cpu") : null;
  view.summon(() =>
    noGrad(() => {
      for (const [k, t] of Object.entries(view.module.stateDict())) {
        // `.to` of a tensor already there is itself, which the summon's end frees.
        out[view.cleanKey(k)] = host && t.device !== host
          ? t.detach().to(host)
          : t.detach().clone();
      }
    }), { writeback: false });
  if (config?.rank0Only && view.group.rank !== 0) {
    for (const t of Object.values(out)) t.dispose();
    return {};
  }
  return out;
}

/** {@link FullyShardedDataParallel.loadStateDict} of a LOCAL or SHARDED dict. */
export function loadShardedOf(
  view: RootView,
  type: StateDictType,
  stateDict: Record<string, Tensor>,
): { missingKeys: string[]; unexpectedKeys: string[] } {
  const sharded = type === StateDictType.SHARDED_STATE_DICT;
  const { rank, worldSize } = view.group;
  const { params, whole } = plainEntries(view);
  const buffers = view.module.namedBuffers().map(([k, t]) => [view.cleanKey(k), t] as const);
  const targets: (readonly [string, Tensor])[] = sharded
    ? [...params, ...whole]
    : [...view.root.namedParameters(), ...buffers];
  const known = new Set(targets.map(([k]) => k));
  const infoKeys = Object.keys(stateDict).filter((k) => k.startsWith(`${SHARD_INFO_PREFIX}.`));
  const missing = targets.map(([k]) => k).filter((k) => !(k in stateDict));
  if (sharded && infoKeys.length === 0) missing.push(`${SHARD_INFO_PREFIX}.rank<r>.of<n>`);
  const unexpected = Object.keys(stateDict).filter((k) => !known.has(k) && !infoKeys.includes(k));
  let problem: string | null = null;
  if (missing.length > 0 || unexpected.length > 0) {
    problem = `${NAME}.loadStateDict (${type}) on rank ${rank}: missing key(s) ${
      missing.join(", ") || "none"
    }; unexpected key(s) ${unexpected.join(", ") || "none"}`;
  }
  problem ??= checkShardInfo(view, infoKeys, type);
  if (problem === null) {
    const paramSet = new Set<Tensor>(params.map(([, p]) => p));
    for (const [k, t] of targets) {
      const v = stateDict[k];
      const chunk = sharded && paramSet.has(t);
      const want = chunk
        ? (t.ndim === 0 && rank !== 0 ? [0] : shardedTensorMetadata(t.shape, rank, worldSize).shape)
        : t.shape;
      const fits = chunk || !sharded ? v.numel() === want.reduce((n, d) => n * d, 1) : false;
      const exact = formatShape(v.shape) === formatShape(want);
      if (!(sharded ? exact : fits || exact)) {
        problem =
          `${NAME}.loadStateDict (${type}) on rank ${rank} of world size ${worldSize}: ${k} has shape ${
            formatShape(v.shape)
          }, but this rank's ${chunk ? `chunk of ${formatShape(t.shape)}` : "tensor"} is ${
            formatShape(want)
          } (a ${type} loads only at the world size and wrapping it was saved with, each rank its own)`;
        break;
      }
      if (v.dtype !== t.dtype) {
        problem =
          `${NAME}.loadStateDict (${type}) on rank ${rank}: ${k} is ${v.dtype}, the model's is ${t.dtype}`;
        break;
      }
    }
  }
  agree(view.group, `${NAME}.loadStateDict (${type})`, problem);
  if (!sharded) {
    noGrad(() => {
      for (const [k, t] of targets) t.copy_(stateDict[k].to(t.device).reshape(t.shape));
    });
    return { missingKeys: [], unexpectedKeys: [] };
  }
  view.summon(() =>
    noGrad(() => {
      for (const [k, p] of params) {
        const v = stateDict[k].to(p.device);
        if (worldSize === 1) {
          p.copy_(v.reshape(p.shape));
          continue;
        }
        // PyTorch's load hook: pad each chunk to ceil(d0 / N) rows, all-gather, cut.
        const rows = p.ndim === 0 ? 1 : Math.ceil(p.shape[0] / worldSize);
        const per = p.ndim === 0 ? 1 : rows * (p.numel() / Math.max(p.shape[0], 1));
        const mine = v.reshape([-1]);
        const padded = mine.numel() === per
          ? mine
          : cat([mine, full([per - mine.numel()], 0, { dtype: p.dtype, device: p.device })]);
        const gathered = empty([per * worldSize], p.dtype, p.device);
        allGatherIntoTensor(gathered, padded, { group: view.groupOption });
        p.copy_(gathered.narrow(0, 0, p.numel()).reshape(p.shape));
      }
      for (const [k, t] of whole) t.copy_(stateDict[k].to(t.device).reshape(t.shape));
    })
  );
  return { missingKeys: [], unexpectedKeys: [] };
}
