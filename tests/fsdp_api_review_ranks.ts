/**
 * What the ranks of tests/fsdp_api_review_test.ts run (spawned as
 * Workers): `clipGradNorm_` with `ignoredModules` (PyTorch 1.13 clips
 * their local gradients too), and the optimizer state and SHARDED dicts
 * of a model whose first parameter is 0-d and whose other parameters have
 * fewer rows than ranks or uneven rows.
 * @module
 */

import {
  distributed,
  manualSeed,
  nn,
  optim,
  randn,
  requestDevices,
  type Tensor,
  tensor,
  tidy,
} from "../mod.ts";
import { makeData } from "./distributed_ranks.ts";
import { Block, makeNet, type PlainOptimState, plainOptimState } from "./fsdp_ranks.ts";

const { FullyShardedDataParallel: FSDP, StateDictType, stateDictType } = distributed.fsdp;

/** A 0-d scale registered first, a weight of 1 row, an uneven bias, a Linear. */
export class OddShapes extends nn.Module {
  s = new nn.Parameter(tensor(0.5));
  w = new nn.Parameter(randn([1, 6]));
  b = new nn.Parameter(randn([5]));
  lin = new nn.Linear(6, 5);
  override forward(x: Tensor): Tensor {
    return x.matmul(this.w.t()).mul(this.s).add(this.lin.forward(x) as Tensor).add(this.b);
  }
}

/** The same {@link OddShapes} on every rank and in the reference. */
export function makeOdd(): OddShapes {
  manualSeed(3);
  return new OddShapes();
}

/** `rows` inputs and targets of {@link OddShapes}. */
export function oddData(rows: number): { x: Tensor; y: Tensor } {
  manualSeed(11);
  return { x: randn([rows, 6]), y: randn([rows, 5]) };
}

/** What the `clip` scenario returns. */
export interface ClipResult {
  /** The total norms clipGradNorm_ returned (2-norm, then inf-norm pass). */
  norms: number[];
  /** The ignored layer's gradients (weight then bias, flattened) after each clip. */
  clipped: number[][];
}

/**
 * `clipGradNorm_` on the net with its last layer ignored: two passes on
 * this rank's 4 rows, clipped by the 2-norm (positional) and the inf-norm
 * (`{ normType }`); on `backend`, the shards offloaded to the host when
 * `offload` (the ignored layer's gradients stay on the device).
 */
async function clip(rank: number, backend: string, offload: boolean): Promise<ClipResult> {
  const [device] = await requestDevices({ backend });
  const net = makeNet(7).to(device);
  const last = (net as unknown as Record<string, nn.Module>)["4"];
  const fsdp = new FSDP(net, {
    autoWrapPolicy: distributed.fsdp.ModuleWrapPolicy(new Set([Block])),
    ignoredModules: [last],
    cpuOffload: { offloadParams: offload },
  });
  const all = makeData(8);
  const x = tensor(all.x.slice(4 * rank, 4 * rank + 4), { device });
  const y = tensor(all.y.slice(4 * rank, 4 * rank + 4), { dtype: "int32", device });
  const lossFn = new nn.CrossEntropyLoss();
  const norms: number[] = [];
  const clipped: number[][] = [];
  for (const normType of [2, { normType: "inf" as const }]) {
    fsdp.zeroGrad();
    const norm = tidy(() => {
      lossFn.forward(fsdp.forward(x) as Tensor, y).backward();
      return fsdp.clipGradNorm_(0.05, normType);
    });
    norms.push(await norm.item());
    const [w, b] = last.parameters();
    clipped.push([...(await w.grad!.data()), ...(await b.grad!.data())]);
  }
  return { norms, clipped };
}

/** What the `odd` scenario returns. */
export interface OddResult {
  /** The optimizer's state, and that of one loaded from fullOptimStateDict + optimStateDictToLoad. */
  state: PlainOptimState;
  reloaded: PlainOptimState | string;
  /** SHARDED_STATE_DICT shapes of this rank, and whether a fresh model loaded from it equals the model. */
  shardedShapes: Record<string, number[]>;
  shardedWorst: number;
}

/** Two Adam steps of {@link OddShapes} at `worldSize` ranks, then its optimizer and SHARDED dicts. */
async function odd(rank: number, worldSize: number): Promise<OddResult> {
  const [device] = await requestDevices({ backend: "cpu" });
  const fsdp = new FSDP(makeOdd().to(device));
  const opt = new optim.Adam(fsdp.parameters(), { lr: 0.01 });
  const { x, y } = oddData(4 * worldSize);
  for (let s = 0; s < 2; s++) {
    tidy(() => {
      opt.zeroGrad();
      const rows = (t: Tensor) => t.narrow(0, (2 * s * worldSize + 2 * rank) % (4 * worldSize), 2);
      (fsdp.forward(rows(x)) as Tensor).sub(rows(y)).pow(2).sum().backward();
      opt.step();
    });
  }
  const state = await plainOptimState(opt.stateDict());
  let reloaded: PlainOptimState | string;
  try {
    const osd = FSDP.fullOptimStateDict(fsdp, opt, {
      rank0Only: false,
    }) as optim.OptimizerStateDict;
    const opt2 = new optim.Adam(fsdp.parameters(), { lr: 0.01 });
    opt2.loadStateDict(FSDP.optimStateDictToLoad(osd, fsdp, opt2));
    reloaded = await plainOptimState(opt2.stateDict());
  } catch (error) {
    reloaded = String(error);
  }
  const sharded = stateDictType(fsdp, StateDictType.SHARDED_STATE_DICT, () => fsdp.stateDict());
  const fresh = new FSDP(makeOdd().to(device));
  stateDictType(fresh, StateDictType.SHARDED_STATE_DICT, () => fresh.loadStateDict(sharded));
  const [a, b] = [fsdp.stateDict(), fresh.stateDict()];
  let shardedWorst = 0;
  for (const [k, t] of Object.entries(a)) {
    const [u, v] = [await t.data(), await b[k].data()];
    u.forEach((e, i) => (shardedWorst = Math.max(shardedWorst, Math.abs(e - v[i]))));
  }
  return {
    state,
    reloaded,
    shardedShapes: Object.fromEntries(Object.entries(sharded).map(([k, t]) => [k, [...t.shape]])),
    shardedWorst,
  };
}

/** A rank: `scenario` picks what it runs. */
export async function main(
  rank: number,
  worldSize: number,
  scenario: string,
  backend = "cpu",
  offload = false,
): Promise<unknown> {
  switch (scenario) {
    case "clip":
      return await clip(rank, backend, offload);
    case "odd":
      return await odd(rank, worldSize);
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
}
