/**
 * What the ranks of tests/zero_optimizer_test.ts run: spawned as Workers
 * (its `main`) or under `mpiexec` (run as a script, writing each rank's
 * result as JSON to a file). Each scenario returns plain values.
 * @module
 */

import {
  distributed,
  nn,
  optim,
  requestDevices,
  type Tensor,
  tensor,
  tidy,
  zeros,
} from "../mod.ts";
import { makeData, makeModel, parameterValues } from "./distributed_ranks.ts";
import { runAsLaunchedRank } from "./rank_main.ts";

/** A state dict with its tensors as plain arrays (what crosses between Workers and the test). */
export interface PlainStateDict {
  state: Record<number, Record<string, number | number[]>>;
  param_groups: optim.OptimizerStateDict["param_groups"];
}

/** `sd` with its tensors read into arrays. */
export async function toPlain(sd: optim.OptimizerStateDict): Promise<PlainStateDict> {
  const state: PlainStateDict["state"] = {};
  for (const [i, entry] of Object.entries(sd.state)) {
    const out: Record<string, number | number[]> = {};
    for (const [k, v] of Object.entries(entry)) {
      out[k] = typeof v === "number" ? v : [...(await v.data())];
    }
    state[Number(i)] = out;
  }
  return { state, param_groups: sd.param_groups };
}

/** A plain state dict's arrays as tensors shaped like `params` (by index). */
export function fromPlain(
  plain: PlainStateDict,
  params: readonly Tensor[],
): optim.OptimizerStateDict {
  const state: optim.OptimizerStateDict["state"] = {};
  for (const [i, entry] of Object.entries(plain.state)) {
    const out: optim.ParamState = {};
    for (const [k, v] of Object.entries(entry)) {
      out[k] = typeof v === "number"
        ? v
        : tensor(Float32Array.from(v), { shape: [...params[Number(i)].shape] });
    }
    state[Number(i)] = out;
  }
  return { state, param_groups: plain.param_groups };
}

/** Options of the training scenario. */
export interface ZeroTrainOptions {
  /** "adam" (lr 0.01), "sgd" (lr 0.1, momentum 0.9) or "adagrad" (state made at construction). */
  optimizer: "adam" | "sgd" | "adagrad";
  /** Steps to run here. */
  steps: number;
  /** Rows per step over all ranks (a multiple of the world size). */
  globalBatch: number;
  /** The data step the run starts at (a resumed run). */
  firstStep?: number;
  /** Consolidate on this rank after the steps, and return its full state dict. */
  consolidateTo?: number;
  /** Start from these parameters and this full state dict (a resumed run). */
  resume?: { params: number[][]; state: PlainStateDict };
  /** The ranks' device backend (default cpu). */
  backend?: string;
  /** Pack shards as bucket views. */
  parametersAsBucketView?: boolean;
}

/** What a rank of the training scenario returns. */
export interface ZeroTrained {
  /** Parameters after every step. */
  params: number[][][];
  /** Indices (in `parameters()` order) of the parameters this rank owns. */
  owned: number[];
  /** State tensors this rank holds, and their elements. */
  stateTensors: number;
  stateElements: number;
  /** The full state dict on the consolidating rank, else null. */
  consolidated: PlainStateDict | null;
  /** The error `stateDict()` raised on the other ranks. */
  notConsolidated: string | null;
}

/** The optimizer class and options a scenario names. */
export function optimizerOf(name: "adam" | "sgd" | "adagrad") {
  if (name === "adagrad") {
    return { optimizerClass: optim.Adagrad, options: { lr: 0.05, initialAccumulatorValue: 0.1 } };
  }
  return name === "adam"
    ? { optimizerClass: optim.Adam, options: { lr: 0.01 } }
    : { optimizerClass: optim.SGD, options: { lr: 0.1, momentum: 0.9 } };
}

async function train(rank: number, worldSize: number, o: ZeroTrainOptions): Promise<ZeroTrained> {
  const [device] = await requestDevices({ backend: o.backend ?? "cpu" });
  // Different weights per rank: DDP broadcasts rank 0's.
  const model = makeModel(1 + rank * 100).to(device);
  if (o.resume) {
    model.parameters().forEach((p, i) =>
      p._assign(
        tensor(Float32Array.from(o.resume!.params[i]), { shape: [...p.shape], device }),
      )
    );
  }
  const ddp = new distributed.DistributedDataParallel(model);
  const { optimizerClass, options } = optimizerOf(o.optimizer);
  const params = ddp.parameters();
  const opt = new distributed.optim.ZeroRedundancyOptimizer(params, {
    optimizerClass: optimizerClass as distributed.optim.OptimizerClass<object, object>,
    parametersAsBucketView: o.parametersAsBucketView,
    ...options,
  });
  if (o.resume) opt.loadStateDict(fromPlain(o.resume.state, params));
  const lossFn = new nn.CrossEntropyLoss();
  const first = o.firstStep ?? 0;
  const all = makeData((first + o.steps) * o.globalBatch);
  const b = o.globalBatch / worldSize;
  const history: number[][][] = [];
  for (let s = first; s < first + o.steps; s++) {
    const from = s * o.globalBatch + rank * b;
    const x = tensor(all.x.slice(from, from + b), { device });
    const y = tensor(all.y.slice(from, from + b), { dtype: "int32", device });
    tidy(() => {
      opt.zeroGrad();
      lossFn.forward(ddp.forward(x) as Tensor, y).backward();
      opt.step();
    });
    history.push(await parameterValues(model));
  }
  const owner = opt.paramToRank;
  let stateTensors = 0;
  let stateElements = 0;
  for (const s of opt.state.values()) {
    for (const v of Object.values(s)) {
      if (typeof v !== "number") {
        stateTensors++;
        stateElements += v.numel();
      }
    }
  }
  let consolidated: PlainStateDict | null = null;
  let notConsolidated: string | null = null;
  if (o.consolidateTo !== undefined) {
    await opt.consolidateStateDict(o.consolidateTo);
    if (rank === o.consolidateTo) consolidated = await toPlain(opt.stateDict());
    else {
      try {
        opt.stateDict();
      } catch (error) {
        notConsolidated = (error as Error).message;
      }
    }
  }
  return {
    params: history,
    owned: params.flatMap((p, i) => (owner.get(p) === rank ? [i] : [])),
    stateTensors,
    stateElements,
    consolidated,
    notConsolidated,
  };
}

/**
 * Tensors of `groups` sizes; the optimizer is built over the first group
 * and the others are added with addParamGroup. Returns the owner of every
 * parameter (index over the groups) and this rank's partition.
 */
function partition(groups: number[][]): { owner: number[]; perRank: number[][][] } {
  const tensors = groups.map((g) => g.map((n) => zeros([n], { requiresGrad: true })));
  const opt = new distributed.optim.ZeroRedundancyOptimizer(tensors[0], {
    optimizerClass: optim.SGD,
    lr: 0.1,
  });
  for (const g of tensors.slice(1)) opt.addParamGroup({ params: g, lr: 0.2 });
  const flat = tensors.flat();
  const owner = opt.paramToRank;
  const perRank = opt.partition().map((rankGroups) =>
    rankGroups.map((g) => g.map((p) => flat.indexOf(p)))
  );
  // The local optimizer holds exactly this rank's share, in the same order.
  const local = opt.optim.paramGroups.map((g) => g.params.map((p) => flat.indexOf(p)));
  if (JSON.stringify(local) !== JSON.stringify(perRank[opt.rank])) {
    throw new Error(`local groups ${JSON.stringify(local)} are not the partition's`);
  }
  return { owner: flat.map((p) => owner.get(p)!), perRank };
}

/** Rank 1 passes one parameter fewer: every rank's step then fails naming both. */
async function mismatch(rank: number): Promise<string> {
  const params = [zeros([4], { requiresGrad: true }), zeros([3], { requiresGrad: true })];
  if (rank === 1) params.pop();
  const opt = new distributed.optim.ZeroRedundancyOptimizer(params, {
    optimizerClass: optim.SGD,
    lr: 0.1,
  });
  for (const p of params) p.grad = zeros([...p.shape]);
  opt.step();
  try {
    await params[0].data();
    return "no error";
  } catch (error) {
    return (error as Error).message;
  }
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
      return await train(rank, worldSize, options as unknown as ZeroTrainOptions);
    case "partition":
      return partition(options.groups as number[][]);
    case "mismatch":
      return await mismatch(rank);
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
}

// Under mpiexec: `deno run -A tests/zero_optimizer_ranks.ts OUT_PREFIX SCENARIO JSON_OPTIONS`.
if (import.meta.main) await runAsLaunchedRank(main);
