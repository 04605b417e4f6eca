/**
 * What the ranks of tests/fsdp_api_test.ts run (spawned as Workers, or
 * under mpiexec / the tcp launcher): FSDP's state dict configs, the
 * SHARDED state dict, the full optimizer state dict saved at one world
 * size and scattered at another, and the errors.
 * @module
 */

import {
  type Device,
  distributed,
  nn,
  type optim,
  requestDevices,
  type Tensor,
  tensor,
  tidy,
} from "../mod.ts";
import { makeData } from "./distributed_ranks.ts";
import {
  Block,
  makeNet,
  makeOptimizer,
  type PlainDict,
  type PlainOptimState,
  plainOptimState,
  stepLoss,
} from "./fsdp_ranks.ts";
import { runAsLaunchedRank } from "./rank_main.ts";

const { FullyShardedDataParallel: FSDP, StateDictType, stateDictType } = distributed.fsdp;

/** Options of the save and load scenarios. */
export interface ApiOptions {
  optimizer: "sgd" | "adam";
  strategy: distributed.fsdp.ShardingStrategy;
  /** All steps of the run (the save scenario trains the first `saveAfter`). */
  steps: number;
  saveAfter: number;
  /** Rows per step over all ranks. */
  globalBatch: number;
  /** Backend of each rank's device (default cpu). */
  backend?: string;
}

/** A full optimizer state dict as plain values. */
export interface PlainOptim {
  state: PlainOptimState;
  param_groups: optim.OptimizerStateDict["param_groups"];
}

/** What a rank of the save scenario returns. */
export interface Saved {
  /** FULL_STATE_DICT with `{ offloadToCpu, rank0Only }`: rank 0's values, `{}` elsewhere. */
  full: PlainDict;
  /** The devices of the offloaded dict's tensors. */
  fullDevices: string[];
  /** fullOptimStateDict (rank0Only): rank 0's, null elsewhere. */
  optim: PlainOptim | null;
  /** fullOptimStateDict(rank0Only: false) on this rank: whether it equals rank 0's. */
  everyRankOptimKeys: number;
  /** SHARDED_STATE_DICT: shapes of this rank's entries. */
  shardedShapes: Record<string, number[]>;
  /** The FULL dict of a fresh model after loading the SHARDED dict (should equal `full` of rank 0). */
  shardedReloaded: PlainDict;
  /** The errors: nn.utils.clipGradNorm_, another rank's SHARDED and LOCAL dicts, a wrong chunk shape, a config with LOCAL. */
  errors: string[];
}

async function plain(sd: Record<string, Tensor>): Promise<PlainDict> {
  const out: PlainDict = {};
  for (const [k, t] of Object.entries(sd)) out[k] = [...(await t.data())];
  return out;
}

function policy() {
  return distributed.fsdp.ModuleWrapPolicy(new Set([Block]));
}

/** Trains step `s` of a run at `worldSize` ranks (this rank's rows of the global batch). */
function trainStep(
  fsdp: nn.Module,
  opt: ReturnType<typeof makeOptimizer>,
  o: ApiOptions,
  s: number,
  rank: number,
  worldSize: number,
  device: Device,
): void {
  const all = makeData(o.steps * o.globalBatch);
  const b = o.globalBatch / worldSize;
  const from = s * o.globalBatch + rank * b;
  const x = tensor(all.x.slice(from, from + b), { device });
  const y = tensor(all.y.slice(from, from + b), { dtype: "int32", device });
  tidy(() => {
    opt.zeroGrad();
    stepLoss(fsdp, x, y, false, (fn) => fn());
    opt.step();
  });
}

function attempt(errors: string[], fn: () => unknown): void {
  try {
    fn();
    errors.push("no error");
  } catch (error) {
    errors.push((error as Error).message);
  }
}

/** Trains `saveAfter` steps, then saves every kind of state dict and checks the errors. */
async function save(rank: number, worldSize: number, o: ApiOptions): Promise<Saved> {
  const [device] = await requestDevices({ backend: o.backend ?? "cpu" });
  const options = { shardingStrategy: o.strategy, autoWrapPolicy: policy() };
  const fsdp = new FSDP(makeNet(7).to(device), options);
  const opt = makeOptimizer(o.optimizer, fsdp.parameters());
  for (let s = 0; s < o.saveAfter; s++) trainStep(fsdp, opt, o, s, rank, worldSize, device);
  const errors: string[] = [];
  // A gradient to clip: nn.utils.clipGradNorm_ must refuse the shards.
  tidy(() => {
    const all = makeData(2 * worldSize);
    const x = tensor(all.x.slice(2 * rank, 2 * rank + 2), { device });
    (fsdp.forward(x) as Tensor).sum().backward();
    attempt(errors, () => nn.utils.clipGradNorm_(fsdp.parameters(), 1));
    fsdp.zeroGrad();
  });

  const config = new distributed.fsdp.FullStateDictConfig({ offloadToCpu: true, rank0Only: true });
  const fullDict = stateDictType(
    fsdp,
    StateDictType.FULL_STATE_DICT,
    config,
    () => fsdp.stateDict(),
  );
  const fullDevices = Object.values(fullDict).map((t) => String(t.device));
  const osd = FSDP.fullOptimStateDict(fsdp, opt);
  const everyRank = FSDP.fullOptimStateDict(fsdp, opt, { rank0Only: false });

  const sharded = stateDictType(fsdp, StateDictType.SHARDED_STATE_DICT, () => fsdp.stateDict());
  const shardedShapes = Object.fromEntries(
    Object.entries(sharded).map(([k, t]) => [k, [...t.shape]]),
  );
  const fresh = new FSDP(makeNet(11).to(device), options);
  stateDictType(fresh, StateDictType.SHARDED_STATE_DICT, () => fresh.loadStateDict(sharded));
  const reloaded = fresh.stateDict();

  // Every rank's dicts, so that each can try another rank's. Values are read only where every
  // rank awaits alike: a rank awaiting alone would leave the others' blocking exchanges waiting.
  const local = stateDictType(fsdp, StateDictType.LOCAL_STATE_DICT, () => fsdp.stateDict());
  const other = (rank + 1) % worldSize;
  const [shardedOther, localOther] = await exchange([sharded, local], other, device);
  attempt(
    errors,
    () =>
      stateDictType(
        fresh,
        StateDictType.SHARDED_STATE_DICT,
        () => fresh.loadStateDict(shardedOther),
      ),
  );
  attempt(
    errors,
    () =>
      stateDictType(fresh, StateDictType.LOCAL_STATE_DICT, () => fresh.loadStateDict(localOther)),
  );
  // Only rank 1 is given a wrong chunk: rank 0 must not go on into the gathers alone.
  const wrongShape = rank === 1
    ? { ...sharded, "4.weight": tensor([[1, 2]], { device }) }
    : sharded;
  attempt(
    errors,
    () =>
      stateDictType(fresh, StateDictType.SHARDED_STATE_DICT, () => fresh.loadStateDict(wrongShape)),
  );
  attempt(
    errors,
    () => stateDictType(fresh, StateDictType.LOCAL_STATE_DICT, { rank0Only: true }, () => 0),
  );
  const full = osd as optim.OptimizerStateDict;
  return {
    full: await plain(fullDict),
    fullDevices,
    optim: Object.keys(osd).length > 0
      ? { state: await plainOptimState(full), param_groups: full.param_groups }
      : null,
    everyRankOptimKeys: Object.keys(everyRank.state ?? {}).length,
    shardedShapes,
    shardedReloaded: await plain(reloaded),
    errors,
  };
}

/** `dicts` of rank `from` (every rank sends its own to the previous rank). */
async function exchange(
  dicts: Record<string, Tensor>[],
  from: number,
  device: Device,
): Promise<Record<string, Tensor>[]> {
  const mine = [];
  for (const d of dicts) {
    const entries: [string, number[], number[], string][] = [];
    for (const [k, t] of Object.entries(d)) {
      entries.push([k, [...t.shape], [...(await t.data())], t.dtype]);
    }
    mine.push(entries);
  }
  const all = await distributed.allGatherObject(mine);
  const theirs = all[from] as [string, number[], number[], string][][];
  return theirs.map((entries) =>
    Object.fromEntries(
      entries.map(([k, shape, values, dtype]) => [
        k,
        tensor(values, { device, dtype: dtype as "float32" | "int32" }).reshape(shape),
      ]),
    )
  );
}

/** The plain optimizer dict back as tensors (shapes from the plain model's parameters). */
function optimFromPlain(p: PlainOptim, device: Device): optim.OptimizerStateDict {
  const shapes = makeNet(7).parameters().map((t) => t.shape);
  const state: Record<number, Record<string, number | Tensor>> = {};
  for (const [i, entry] of Object.entries(p.state)) {
    state[Number(i)] = Object.fromEntries(
      Object.entries(entry).map(([k, v]) => [
        k,
        typeof v === "number"
          ? v
          : tensor(v, { device }).reshape(v.length === 1 ? [] : shapes[Number(i)]),
      ]),
    );
  }
  return { state, param_groups: p.param_groups };
}

/**
 * A fresh model at this world size loads the saved full dict, rank 0 the
 * full optimizer dict (scatterFullOptimStateDict gives each rank its
 * shard), and trains the remaining steps: the FULL dict after each.
 */
async function load(
  rank: number,
  worldSize: number,
  o: ApiOptions & { saved: Saved },
): Promise<{ dicts: PlainDict[]; otherWorldSize: string }> {
  const [device] = await requestDevices({ backend: "cpu" });
  const options = { shardingStrategy: o.strategy, autoWrapPolicy: policy() };
  const fsdp = new FSDP(makeNet(11).to(device), options);
  const shapes = new Map(Object.entries(makeNet(7).stateDict()).map(([k, t]) => [k, t.shape]));
  fsdp.loadStateDict(
    Object.fromEntries(
      Object.entries(o.saved.full).map((
        [k, v],
      ) => [k, tensor(v, { device }).reshape(shapes.get(k)!)]),
    ),
  );
  // A SHARDED dict of 2 ranks (rank 0's rows at that size) is an error at any other world size.
  const saved2 = Object.fromEntries(
    Object.entries(o.saved.full).map(([k, v]) => {
      const shape = shapes.get(k)!;
      const meta = distributed.fsdp.shardedTensorMetadata(shape, 0, 2);
      const per = v.length / shape[0];
      const rows = v.slice(meta.offsets[0] * per, (meta.offsets[0] + meta.shape[0]) * per);
      return [k, tensor(rows, { device }).reshape(meta.shape)];
    }),
  );
  saved2[`_fsdpShard.rank${rank}.of2`] = tensor([rank, 2], { dtype: "int32", device });
  let otherWorldSize = "no error";
  try {
    stateDictType(fsdp, StateDictType.SHARDED_STATE_DICT, () => fsdp.loadStateDict(saved2));
  } catch (error) {
    otherWorldSize = (error as Error).message;
  }
  const opt = makeOptimizer(o.optimizer, fsdp.parameters());
  const full = rank === 0 ? optimFromPlain(o.saved.optim!, device) : null;
  opt.loadStateDict(await FSDP.scatterFullOptimStateDict(full, fsdp));
  const dicts: PlainDict[] = [];
  for (let s = o.saveAfter; s < o.steps; s++) {
    trainStep(fsdp, opt, o, s, rank, worldSize, device);
    dicts.push(await plain(fsdp.stateDict()));
  }
  return { dicts, otherWorldSize };
}

/** A rank: `scenario` picks what it runs. */
export async function main(
  rank: number,
  worldSize: number,
  scenario: string,
  options: Record<string, unknown> = {},
): Promise<unknown> {
  switch (scenario) {
    case "save":
      return await save(rank, worldSize, options as unknown as ApiOptions);
    case "offload":
      return await offload(rank, worldSize, options as unknown as ApiOptions);
    case "ignored":
      return await ignored(rank, worldSize);
    case "load":
      return await load(rank, worldSize, options as unknown as ApiOptions & { saved: Saved });
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
}

// Under mpiexec or the tcp launcher: `deno run -A tests/fsdp_api_ranks.ts OUT_PREFIX SCENARIO JSON_OPTIONS`.
if (import.meta.main) await runAsLaunchedRank(main);

/** What the `ignored` scenario returns. */
export interface Ignored {
  names: [string, number[]][];
  /** The ignored layer's gradient against a plain model's on this rank's rows only. */
  localGradWorst: number;
  /** The same against the average over the ranks (should differ). */
  averagedGradWorst: number;
  fullKeys: Record<string, number[]>;
  shardedShapes: Record<string, number[]>;
  /** fullOptimStateDict's momentum of 4.weight, and the reloaded optimizer's. */
  momentum: number[];
  reloadedMomentum: number[];
  errors: string[];
}

/**
 * `ignoredModules`: the last layer of the net is left whole on every rank,
 * its gradient local; the state dicts and optimizer dicts carry it whole.
 */
async function ignored(rank: number, worldSize: number): Promise<Ignored> {
  const [device] = await requestDevices({ backend: "cpu" });
  const net = makeNet(7).to(device);
  const last = (net as unknown as Record<string, nn.Module>)["4"];
  const fsdp = new FSDP(net, { autoWrapPolicy: policy(), ignoredModules: [last] });
  const opt = makeOptimizer("sgd", fsdp.parameters());
  const all = makeData(4 * worldSize);
  const rows = (r: number) => ({
    x: tensor(all.x.slice(4 * r, 4 * r + 4), { device }),
    y: tensor(all.y.slice(4 * r, 4 * r + 4), { dtype: "int32", device }),
  });
  const lossFn = new nn.CrossEntropyLoss();
  const { x, y } = rows(rank);
  lossFn.forward(fsdp.forward(x) as Tensor, y).backward();
  const grad = [...(await last.parameters()[0].grad!.data())];
  // Plain models on this rank's rows, and on every rank's rows (the average DDP would give).
  const plainGrad = async (r: number) => {
    const plainNet = makeNet(7).to(device);
    const { x, y } = rows(r);
    lossFn.forward(plainNet.forward(x) as Tensor, y).backward();
    return [...(await plainNet.parameters()[6].grad!.data())];
  };
  const mine = await plainGrad(rank);
  const each = await Promise.all([...Array(worldSize).keys()].map(plainGrad));
  const average = mine.map((_, i) => each.reduce((a, g) => a + g[i], 0) / worldSize);
  const worst = (a: number[], b: number[]) => Math.max(...a.map((v, i) => Math.abs(v - b[i])));
  opt.step();
  const names = fsdp.namedParameters().map(([k, p]) => [k, [...p.shape]] as [string, number[]]);
  const fullDict = fsdp.stateDict();
  const sharded = stateDictType(fsdp, StateDictType.SHARDED_STATE_DICT, () => fsdp.stateDict());
  const osd = FSDP.fullOptimStateDict(fsdp, opt, { rank0Only: false }) as optim.OptimizerStateDict;
  const opt2 = makeOptimizer("sgd", fsdp.parameters());
  opt2.loadStateDict(FSDP.optimStateDictToLoad(osd, fsdp, opt2));
  const at = fsdp.parameters().indexOf(last.parameters()[0] as never);
  const reloaded = opt2.stateDict().state[at].momentum_buffer as Tensor;
  const errors: string[] = [];
  attempt(errors, () => new FSDP(makeNet(7).to(device), { ignoredModules: [fsdp] }));
  const partial = makeOptimizer("sgd", fsdp.parameters().slice(1));
  attempt(errors, () => FSDP.optimStateDictToLoad(osd, fsdp, partial));
  const root = makeNet(7).to(device);
  attempt(errors, () => new FSDP(root, { ignoredModules: [root] }));
  const shapes = (sd: Record<string, Tensor>) =>
    Object.fromEntries(Object.entries(sd).map(([k, t]) => [k, [...t.shape]]));
  return {
    names,
    localGradWorst: worst(grad, mine),
    averagedGradWorst: worst(grad, average),
    fullKeys: shapes(fullDict),
    shardedShapes: shapes(sharded),
    momentum: [...(await (osd.state[6].momentum_buffer as Tensor).data())],
    reloadedMomentum: [...(await reloaded.data())],
    errors,
  };
}

/** What the `offload` scenario returns. */
export interface Offloaded {
  /** The FULL state dict after every step. */
  dicts: PlainDict[];
  /** Devices of the shards, their gradients (after the last backward) and the module's device. */
  shardDevices: string[];
  gradDevices: string[];
  moduleDevice: string;
}

/** Trains `o.steps` steps under `CPUOffload({ offloadParams: true })`. */
async function offload(rank: number, worldSize: number, o: ApiOptions): Promise<Offloaded> {
  const [device] = await requestDevices({ backend: o.backend ?? "cpu" });
  const fsdp = new FSDP(makeNet(7).to(device), {
    shardingStrategy: o.strategy,
    autoWrapPolicy: policy(),
    cpuOffload: new distributed.fsdp.CPUOffload({ offloadParams: true }),
  });
  const opt = makeOptimizer(o.optimizer, fsdp.parameters());
  const dicts: PlainDict[] = [];
  for (let s = 0; s < o.steps; s++) {
    trainStep(fsdp, opt, o, s, rank, worldSize, device);
    dicts.push(await plain(fsdp.stateDict()));
  }
  const all = makeData(worldSize);
  const x = tensor(all.x.slice(rank, rank + 1), { device });
  (fsdp.forward(x) as Tensor).sum().backward();
  return {
    dicts,
    shardDevices: fsdp.parameters().map((p) => String(p.device)),
    gradDevices: fsdp.parameters().map((p) => String(p.grad?.device)),
    moduleDevice: String(device),
  };
}
