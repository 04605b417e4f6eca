/**
 * What the ranks of tests/fsdp_test.ts run (spawned as Workers, `main`):
 * FSDP training scenarios returning plain values, and the one-process
 * reference they are compared with.
 * @module
 */

import {
  cat,
  distributed,
  manualSeed,
  nn,
  noGrad,
  optim,
  requestDevices,
  type Tensor,
  tensor,
  tidy,
} from "../mod.ts";
import { makeData } from "./distributed_ranks.ts";
import { runAsLaunchedRank } from "./rank_main.ts";

const { FullyShardedDataParallel: FSDP } = distributed.fsdp;

/** A residual block: the class `ModuleWrapPolicy` wraps. */
export class Block extends nn.Module {
  fc = new nn.Linear(16, 16);
  override forward(x: Tensor): Tensor {
    return x.add((this.fc.forward(x) as Tensor).tanh());
  }
}

/** A model whose `unused` layer never takes part in forward. */
class WithUnused extends nn.Module {
  body = makeNet(7);
  unused = new nn.Linear(2, 3);
  override forward(x: Tensor): Tensor {
    return this.body.forward(x) as Tensor;
  }
}

/** 6 → 16 → Block → Block → 3 (707 parameters: uneven over 2 and 3 ranks). */
export function makeNet(seed: number): nn.Sequential {
  manualSeed(seed);
  return new nn.Sequential(
    new nn.Linear(6, 16),
    new nn.ReLU(),
    new Block(),
    new Block(),
    new nn.Linear(16, 3),
  );
}

/** The scenario's model ("net", or "unused": the net plus a layer forward never uses). */
export function makeTestModel(kind: "net" | "unused"): nn.Module {
  if (kind === "unused") {
    manualSeed(3);
    return new WithUnused();
  }
  return makeNet(7);
}

/** Options of the training scenario. */
export interface FsdpTrainOptions {
  /** Backend of each rank's device (default cpu). */
  backend?: string;
  strategy: distributed.fsdp.ShardingStrategy;
  /** "sgd" (lr 0.1, momentum 0.9) or "adam" (lr 0.01). */
  optimizer: "sgd" | "adam";
  steps: number;
  /** Rows per step over all ranks. */
  globalBatch: number;
  /** How nested units are made. */
  wrap?: "none" | "size" | "module" | "explicit";
  /** Two micro-batches per step, the first under noSync. */
  accumulate?: boolean;
  /** clipGradNorm_ before each step with this max norm. */
  clip?: number;
  /** The clip's norm type (default 2). */
  normType?: number | "inf";
  model?: "net" | "unused";
}

/** A state dict as plain arrays. */
export type PlainDict = Record<string, number[]>;

async function plain(sd: Record<string, Tensor>): Promise<PlainDict> {
  const out: PlainDict = {};
  for (const [k, t] of Object.entries(sd)) out[k] = [...(await t.data())];
  return out;
}

/** An optimizer state dict's per-parameter state as plain values. */
export type PlainOptimState = Record<number, Record<string, number | number[]>>;

/** `sd.state` read into plain values. */
export async function plainOptimState(
  sd: { state: Record<number, Record<string, Tensor | number>> },
): Promise<PlainOptimState> {
  const out: PlainOptimState = {};
  for (const [i, entry] of Object.entries(sd.state)) {
    const values: Record<string, number | number[]> = {};
    for (const [k, v] of Object.entries(entry)) {
      values[k] = typeof v === "number" ? v : [...(await v.data())];
    }
    out[Number(i)] = values;
  }
  return out;
}

/** The optimizer a scenario names. */
export function makeOptimizer(
  name: "sgd" | "adam",
  params: Tensor[],
): optim.SGD | optim.Adam {
  return name === "adam"
    ? new optim.Adam(params, { lr: 0.01 })
    : new optim.SGD(params, { lr: 0.1, momentum: 0.9 });
}

/** One step's loss on rows `x`, `y` (micro-batches: each half weighs 0.5). */
export function stepLoss(
  model: nn.Module,
  x: Tensor,
  y: Tensor,
  accumulate: boolean,
  noSync: (fn: () => void) => void,
): void {
  const lossFn = new nn.CrossEntropyLoss();
  if (!accumulate) {
    lossFn.forward(model.forward(x) as Tensor, y).backward();
    return;
  }
  const half = x.shape[0] / 2;
  noSync(() =>
    lossFn.forward(model.forward(x.narrow(0, 0, half)) as Tensor, y.narrow(0, 0, half))
      .mul(0.5).backward()
  );
  lossFn.forward(model.forward(x.narrow(0, half, half)) as Tensor, y.narrow(0, half, half))
    .mul(0.5).backward();
}

/** What a training rank returns. */
export interface FsdpTrained {
  /** The FULL state dict after every step. */
  dicts: PlainDict[];
  /** Names and sizes of `parameters()` (the flat shards). */
  shards: [string, number][];
  /** Whether every original parameter's memory was released between steps. */
  released: boolean;
  /** Whether the original parameters were released right after a training forward (FULL_SHARD). */
  freedAfterForward: boolean;
  /** Total norms clipGradNorm_ returned. */
  norms: number[];
  /** The LOCAL state dict's keys. */
  localKeys: string[];
  /** The FULL state dict after loading the first step's back (round trip). */
  reloaded: PlainDict;
  /** `optimStateDict` after the last step. */
  optimState: PlainOptimState;
  /** Its param_groups' parameter indices. */
  optimGroups: number[][];
  /** The FULL state dict after loading the LOCAL one taken after the last step. */
  localReloaded: PlainDict;
}

/** The auto-wrap policy a scenario names. */
function wrapPolicy(o: FsdpTrainOptions): distributed.fsdp.AutoWrapPolicy | undefined {
  return o.wrap === "size"
    ? distributed.fsdp.sizeBasedAutoWrapPolicy({ minNumParams: 200 })
    : o.wrap === "module"
    ? distributed.fsdp.ModuleWrapPolicy(new Set([Block]))
    : undefined;
}

async function train(rank: number, worldSize: number, o: FsdpTrainOptions): Promise<FsdpTrained> {
  const [device] = await requestDevices({ backend: o.backend ?? "cpu" });
  const model = makeTestModel(o.model ?? "net").to(device);
  const options = { shardingStrategy: o.strategy };
  if (o.wrap === "explicit") {
    const seq = model as nn.Sequential;
    const fields = seq as unknown as Record<string, nn.Module>;
    fields["2"] = new FSDP(fields["2"], options);
    fields["3"] = new FSDP(fields["3"], options);
  }
  const fsdp = new FSDP(model, { ...options, autoWrapPolicy: wrapPolicy(o) });
  const opt = makeOptimizer(o.optimizer, fsdp.parameters());
  const all = makeData(o.steps * o.globalBatch);
  const b = o.globalBatch / worldSize;
  // A forward and backward outside the steps (their gradients are zeroed): what forward leaves.
  const probe = fsdp.forward(tensor(all.x.slice(0, b), { device })) as Tensor;
  const freedAfterForward = fsdp.module.parameters().every((p) => p.storage.disposed);
  probe.sum().backward();
  const dicts: PlainDict[] = [];
  const norms: number[] = [];
  let released = true;
  for (let s = 0; s < o.steps; s++) {
    const from = s * o.globalBatch + rank * b;
    const x = tensor(all.x.slice(from, from + b), { device });
    const y = tensor(all.y.slice(from, from + b), { dtype: "int32", device });
    const norm = tidy(() => {
      opt.zeroGrad();
      stepLoss(fsdp, x, y, o.accumulate ?? false, (fn) => fsdp.noSync(fn));
      const norm = o.clip !== undefined ? fsdp.clipGradNorm_(o.clip, o.normType) : null;
      opt.step();
      return norm;
    });
    if (norm) norms.push(await norm.item());
    released &&= fsdp.module.parameters().every((p) => p.storage.disposed);
    dicts.push(await plain(fsdp.stateDict()));
  }
  const osd = FSDP.optimStateDict(fsdp, opt);
  const optimState = await plainOptimState(osd);
  const { LOCAL_STATE_DICT } = distributed.fsdp.StateDictType;
  const local = distributed.fsdp.stateDictType(fsdp, LOCAL_STATE_DICT, () => fsdp.stateDict());
  const first = Object.fromEntries(
    Object.entries(dicts[0]).map(([k, v]) => [k, tensor(v, { device })]),
  );
  for (const [k, t] of Object.entries(fsdp.stateDict())) first[k] = first[k].reshape(t.shape);
  fsdp.loadStateDict(first);
  const reloaded = await plain(fsdp.stateDict());
  distributed.fsdp.stateDictType(fsdp, LOCAL_STATE_DICT, () => fsdp.loadStateDict(local));
  return {
    dicts,
    shards: fsdp.namedParameters().map(([n, p]) => [n, p.numel()]),
    released,
    freedAfterForward,
    norms,
    localKeys: Object.keys(local),
    optimState,
    optimGroups: osd.param_groups.map((g) => g.params),
    reloaded,
    localReloaded: await plain(fsdp.stateDict()),
  };
}

/** Ranks wrapping modules of different shapes: the construction error's message. */
async function mismatch(rank: number): Promise<string> {
  const [device] = await requestDevices({ backend: "cpu" });
  const model = new nn.Sequential(new nn.Linear(4, rank === 1 ? 5 : 3)).to(device);
  try {
    new FSDP(model);
    return "no error";
  } catch (error) {
    return (error as Error).message;
  }
}

/** The errors of one process group: forward inside summonFullParams, devices. */
async function errors(): Promise<string[]> {
  const [device] = await requestDevices({ backend: "cpu" });
  const fsdp = new FSDP(makeNet(7).to(device));
  const out: string[] = [];
  const x = tensor([[1, 2, 3, 4, 5, 6]], { device });
  try {
    fsdp.summonFullParams(() => fsdp.forward(x));
  } catch (error) {
    out.push((error as Error).message);
  }
  // The summon's values match the state dict, and writeback of a change reaches the shards.
  const before = await fsdp.stateDict()["0.bias"].data();
  fsdp.summonFullParams(() => noGrad(() => fsdp.module.parameters()[1].fill_(0.5)));
  const after = await fsdp.stateDict()["0.bias"].data();
  out.push(`${before[0] !== 0.5} ${after.every((v) => v === 0.5)}`);
  const partlyFrozen = makeNet(7).to(device);
  partlyFrozen.parameters()[1].requiresGrad = false;
  try {
    new FSDP(partlyFrozen);
  } catch (error) {
    out.push((error as Error).message);
  }
  const [, other] = await requestDevices({ backend: "cpu", count: 2 });
  const split = makeNet(7).to(device);
  (split as unknown as Record<string, nn.Module>)["4"].to(other);
  try {
    new FSDP(split);
  } catch (error) {
    out.push(`${device} ${other} ${(error as Error).message}`);
  }
  return out;
}

/** Different weights per rank, units wrapped by hand, all with syncModuleStates: the full dict. */
async function sync(rank: number): Promise<PlainDict> {
  const [device] = await requestDevices({ backend: "cpu" });
  const model = makeNet(1 + rank * 10).to(device);
  const fields = model as unknown as Record<string, nn.Module>;
  fields["2"] = new FSDP(fields["2"], { syncModuleStates: true });
  fields["3"] = new FSDP(fields["3"], { syncModuleStates: true });
  return await plain(new FSDP(model, { syncModuleStates: true }).stateDict());
}

/** What the `semantics` scenario observes (see tests/fsdp_test.ts). */
export interface FsdpSemantics {
  /** At the end of backward (the input's gradient hook), whether the last unit's full gradients were already reduced and dropped. */
  lastUnitReducedEarly: boolean;
  /** Whether the last unit's shard had its gradient by then. */
  lastShardHasGrad: boolean;
  /** Shard gradients (rank's) after a noSync backward, `zeroGrad(setToNone)`, then a synced backward. */
  afterZeroGrad: Record<string, number[]>;
  /** The same shard gradients of only the synced backward (fresh gradients). */
  syncedOnly: Record<string, number[]>;
  /** Worst difference between two synced backward passes' gradients without zeroGrad and twice one's. */
  accumulatedWorst: number;
  /** `training` of the wrapper and every module inside after `eval()`. */
  evalModes: boolean[];
  /** Shard gradients after one backward of a loss over two forwards of the same model. */
  twoForwards: number[];
  /** Shard gradients of the same loss in one forward of both batches concatenated. */
  oneForward: number[];
  /** The output of a forward (no gradients). */
  beforeChange: number[];
  /** The same after another forward and every shard zeroed in place (all zeros unless stale parameters were used). */
  afterChange: number[];
}

async function shardGrads(fsdp: distributed.fsdp.FullyShardedDataParallel) {
  const out: Record<string, number[]> = {};
  for (const [k, p] of fsdp.namedParameters()) out[k] = p.grad ? [...(await p.grad.data())] : [];
  return out;
}

/** Per-unit reduction, zeroGrad after noSync, two forwards before one backward (2 ranks, FULL_SHARD, each Linear a unit). */
async function semantics(rank: number): Promise<FsdpSemantics> {
  const [device] = await requestDevices({ backend: "cpu" });
  const policy = distributed.fsdp.ModuleWrapPolicy(new Set([nn.Linear]));
  const fsdp = new FSDP(makeNet(7).to(device), { autoWrapPolicy: policy });
  const last = fsdp.module as unknown as Record<string, distributed.fsdp.FullyShardedDataParallel>;
  const lastUnit = last["4"];
  const all = makeData(8);
  const x = tensor(all.x.slice(rank * 4, rank * 4 + 4), { device, requiresGrad: true });
  const y = tensor(all.y.slice(rank * 4, rank * 4 + 4), { dtype: "int32", device });
  const lossFn = new nn.CrossEntropyLoss();
  let lastUnitReducedEarly = false;
  let lastShardHasGrad = false;
  x.registerHook(() => {
    lastUnitReducedEarly = lastUnit.module.parameters().every((p) => p.grad === null);
    lastShardHasGrad = lastUnit.parameters()[0].grad !== null;
  });
  lossFn.forward(fsdp.forward(x) as Tensor, y).backward();
  const x2 = x.detach().mul(2);
  for (const setToNone of [true, false]) {
    fsdp.zeroGrad(setToNone);
    fsdp.noSync(() => lossFn.forward(fsdp.forward(x) as Tensor, y).backward());
    fsdp.zeroGrad(setToNone);
    lossFn.forward(fsdp.forward(x2) as Tensor, y).backward();
  }
  const afterZeroGrad = await shardGrads(fsdp);
  fsdp.zeroGrad(true);
  lossFn.forward(fsdp.forward(x2) as Tensor, y).backward();
  const syncedOnly = await shardGrads(fsdp);
  // Accumulation without noSync: a second synced backward adds into the shards' gradients.
  lossFn.forward(fsdp.forward(x2) as Tensor, y).backward();
  const twice = await shardGrads(fsdp);
  const accumulatedWorst = Math.max(
    ...Object.entries(syncedOnly).flatMap(([k, g]) =>
      g.map((v, i) => Math.abs(2 * v - twice[k][i]))
    ),
  );
  fsdp.eval();
  const evalModes = [fsdp.training, ...fsdp.module.modules().map((m) => m.training)];
  fsdp.train();
  fsdp.zeroGrad(true);
  const a = lossFn.forward(fsdp.forward(x) as Tensor, y);
  const b = lossFn.forward(fsdp.forward(x2) as Tensor, y);
  a.add(b).div(2).backward();
  const twoForwards = Object.values(await shardGrads(fsdp)).flat();
  fsdp.zeroGrad(true);
  lossFn.forward(fsdp.forward(cat([x.detach(), x2])) as Tensor, cat([y, y])).backward();
  const oneForward = Object.values(await shardGrads(fsdp)).flat();
  // A forward parks its full parameters; shards changed before the next forward are gathered anew.
  const beforeChange = [...(await noGrad(() => fsdp.forward(x2) as Tensor).data())];
  noGrad(() => fsdp.forward(x2));
  noGrad(() => fsdp.parameters().forEach((p) => p.mul_(0)));
  const afterChange = [...(await noGrad(() => fsdp.forward(x2) as Tensor).data())];
  return {
    beforeChange,
    afterChange,
    lastUnitReducedEarly,
    lastShardHasGrad,
    afterZeroGrad,
    syncedOnly,
    accumulatedWorst,
    evalModes,
    twoForwards,
    oneForward,
  };
}

/** What the `resume` scenario returns. */
export interface FsdpResumed {
  /** The FULL state dict after each step of the second half, training on. */
  uninterrupted: PlainDict[];
  /** The same of a new model and optimizer loaded from the first half's state dicts. */
  resumed: PlainDict[];
  /** shardFullOptimStateDict's errors: another model's parameter count, shapes, a sharded dict. */
  errors: string[];
}

/**
 * Trains `o.steps` steps; after half of them saves the full state dict and
 * `optimStateDict`, loads both into a new FSDP model (other initial
 * weights) and optimizer (`shardFullOptimStateDict`), and trains it on.
 */
async function resume(rank: number, worldSize: number, o: FsdpTrainOptions): Promise<FsdpResumed> {
  const [device] = await requestDevices({ backend: o.backend ?? "cpu" });
  const options = { shardingStrategy: o.strategy, autoWrapPolicy: wrapPolicy(o) };
  const all = makeData(o.steps * o.globalBatch);
  const b = o.globalBatch / worldSize;
  const step = (fsdp: nn.Module, opt: ReturnType<typeof makeOptimizer>, s: number) => {
    const from = s * o.globalBatch + rank * b;
    const x = tensor(all.x.slice(from, from + b), { device });
    const y = tensor(all.y.slice(from, from + b), { dtype: "int32", device });
    tidy(() => {
      opt.zeroGrad();
      stepLoss(fsdp, x, y, false, (fn) => fn());
      opt.step();
    });
  };
  const fsdp = new FSDP(makeNet(7).to(device), options);
  const opt = makeOptimizer(o.optimizer, fsdp.parameters());
  const half = o.steps / 2;
  for (let s = 0; s < half; s++) step(fsdp, opt, s);
  const osd = FSDP.optimStateDict(fsdp, opt);
  const sd = fsdp.stateDict();
  const uninterrupted: PlainDict[] = [];
  for (let s = half; s < o.steps; s++) {
    step(fsdp, opt, s);
    uninterrupted.push(await plain(fsdp.stateDict()));
  }
  const fresh = new FSDP(makeNet(11).to(device), options);
  fresh.loadStateDict(sd);
  const opt2 = makeOptimizer(o.optimizer, fresh.parameters());
  opt2.loadStateDict(FSDP.shardFullOptimStateDict(osd, fresh));
  const resumed: PlainDict[] = [];
  for (let s = half; s < o.steps; s++) {
    step(fresh, opt2, s);
    resumed.push(await plain(fresh.stateDict()));
  }
  const errors: string[] = [];
  const attempt = (fn: () => unknown) => {
    try {
      fn();
      errors.push("no error");
    } catch (error) {
      errors.push((error as Error).message);
    }
  };
  const small = new FSDP(new nn.Sequential(new nn.Linear(6, 3)).to(device));
  attempt(() => FSDP.shardFullOptimStateDict(osd, small));
  const wider = makeNet(7);
  (wider as unknown as Record<string, nn.Module>)["4"] = new nn.Linear(16, 4);
  attempt(() => FSDP.shardFullOptimStateDict(osd, new FSDP(wider.to(device), options)));
  attempt(() => FSDP.shardFullOptimStateDict(opt.stateDict(), fresh));
  return { uninterrupted, resumed, errors };
}

/** A rank: `scenario` picks what it runs. */
export async function main(
  rank: number,
  worldSize: number,
  scenario: string,
  options: Record<string, unknown> = {},
): Promise<unknown> {
  switch (scenario) {
    case "train":
      return await train(rank, worldSize, options as unknown as FsdpTrainOptions);
    case "mismatch":
      return await mismatch(rank);
    case "sync":
      return await sync(rank);
    case "errors":
      return await errors();
    case "semantics":
      return await semantics(rank);
    case "resume":
      return await resume(rank, worldSize, options as unknown as FsdpTrainOptions);
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
}

// Under mpiexec or the tcp launcher: `deno run -A tests/fsdp_ranks.ts OUT_PREFIX SCENARIO JSON_OPTIONS`.
if (import.meta.main) await runAsLaunchedRank(main);
