/**
 * What the ranks of tests/sync_batch_norm_test.ts run: spawned as Workers
 * (`main`) or under `mpiexec` (run as a script, each rank's result written
 * as JSON). Data and models come from the same seeds as the single-process
 * references the test computes.
 * @module
 */

import {
  autograd,
  distributed,
  manualSeed,
  nn,
  noGrad,
  optim,
  requestDevices,
  seededRandom,
  type Tensor,
  tensor,
  tidy,
} from "../mod.ts";

/** Channels of the direct scenario's inputs. */
export const CHANNELS = 3;

/** The direct scenario's whole batch: `rows` inputs of shape [C, ...inner] and loss weights. */
export function directData(
  rows: number,
  inner: number[],
): { x: number[]; coef: number[]; rowSize: number } {
  const random = seededRandom(7);
  const rowSize = CHANNELS * inner.reduce((a, b) => a * b, 1);
  // An offset far from 0 makes a sum of squares lose digits that Chan's formula keeps.
  const x = Array.from({ length: rows * rowSize }, () => 50 + random() * 4 - 2);
  const coef = Array.from({ length: rows * rowSize }, () => random() * 2 - 1);
  return { x, coef, rowSize };
}

/** Options of the direct scenario. */
export interface DirectOptions {
  backend: string;
  /** Rows per rank (a rank may have 0). */
  rows: number[];
  /** Dims after [N, C]. */
  inner: number[];
  /** Ranks of a `newGroup` the layer synchronises over; the others run a plain BatchNorm. */
  group?: number[];
  /** BatchNorm momentum (null: cumulative average). */
  momentum?: number | null;
  affine?: boolean;
}

/** What a rank of the direct scenario reports (after two forwards and one backward). */
export interface DirectResult {
  y: number[];
  xGrad: number[];
  weightGrad: number[] | null;
  biasGrad: number[] | null;
  runningMean: number[];
  runningVar: number[];
  tracked: number;
}

/** The weight and bias every direct layer starts from. */
export const AFFINE = { weight: [1.5, -0.5, 2], bias: [0.25, 0, -1] };

/** The first row of rank `rank`'s share when ranks hold `rows` rows each. */
export function firstRow(rows: number[], rank: number): number {
  return rows.slice(0, rank).reduce((a, b) => a + b, 0);
}

async function direct(rank: number, o: DirectOptions): Promise<DirectResult> {
  const [device] = await requestDevices({ backend: o.backend });
  const total = o.rows.reduce((a, b) => a + b, 0);
  const { x: all, coef: allCoef, rowSize } = directData(total, o.inner);
  const start = firstRow(o.rows, rank) * rowSize;
  const end = start + o.rows[rank] * rowSize;
  const shape = [o.rows[rank], CHANNELS, ...o.inner];
  const group = o.group ? await distributed.newGroup(o.group) : undefined;
  const options = { device, momentum: o.momentum, affine: o.affine ?? true };
  const member = !o.group || o.group.includes(rank);
  const layer = member
    ? new nn.SyncBatchNorm(CHANNELS, { ...options, processGroup: group })
    : new nn.BatchNorm1d(CHANNELS, options);
  const x = tensor(all.slice(start, end), { device }).reshape(shape);
  const coef = tensor(allCoef.slice(start, end), { device }).reshape(shape);
  return await runDirect(layer, x, coef);
}

/**
 * Two forwards of `layer` on `x` (the first moves the running statistics), the second
 * differentiated through Σ y·coef; what the direct scenario reports.
 */
export async function runDirect(
  layer: nn.BatchNormBase,
  x: Tensor,
  coef: Tensor,
): Promise<DirectResult> {
  noGrad(() => {
    layer.weight?.copy_(tensor(AFFINE.weight, { device: x.device }));
    layer.bias?.copy_(tensor(AFFINE.bias, { device: x.device }));
  });
  x.requiresGrad = true;
  tidy(() => {
    layer.forward(x.detach());
  });
  const y = layer.forward(x);
  y.mul(coef).sum().backward();
  return {
    y: [...await y.data()],
    xGrad: [...await x.grad!.data()],
    weightGrad: layer.weight ? [...await layer.weight.grad!.data()] : null,
    biasGrad: layer.bias ? [...await layer.bias.grad!.data()] : null,
    runningMean: [...await layer.runningMean!.data()],
    runningVar: [...await layer.runningVar!.data()],
    tracked: await layer.numBatchesTracked!.item(),
  };
}

/** The training scenario's model: BatchNorm between two Linears. */
export function makeBnModel(seed: number): nn.Sequential {
  manualSeed(seed);
  return new nn.Sequential(
    new nn.Linear(5, 8),
    new nn.BatchNorm1d(8),
    new nn.ReLU(),
    new nn.Linear(8, 3),
  );
}

/** The training scenario's data set (the same on every rank). */
export function trainData(rows: number): { x: number[][]; y: number[] } {
  const random = seededRandom(11);
  const x = Array.from({ length: rows }, () => Array.from({ length: 5 }, () => random() * 2 - 1));
  const y = x.map((row) => (row[0] > 0 ? 0 : row[1] > 0 ? 1 : 2));
  return { x, y };
}

/** Options of the training scenario. */
export interface TrainOptions {
  backend: string;
  steps: number;
  /** Rows per rank per step. */
  batch: number;
}

/** A rank's parameters and buffers after training, by state-dict key. */
export type TrainResult = Record<string, number[]>;

async function train(rank: number, worldSize: number, o: TrainOptions): Promise<TrainResult> {
  const [device] = await requestDevices({ backend: o.backend });
  // Each rank seeds differently: DDP's broadcast must make them equal.
  const model = nn.SyncBatchNorm.convertSyncBatchnorm(makeBnModel(100 + rank)).to(device);
  const ddp = new distributed.DistributedDataParallel(model);
  const optimizer = new optim.SGD(ddp.parameters(), { lr: 0.1, momentum: 0.9 });
  const lossFn = new nn.CrossEntropyLoss();
  const data = trainData(o.steps * o.batch * worldSize);
  for (let step = 0; step < o.steps; step++) {
    const from = (step * worldSize + rank) * o.batch;
    tidy(() => {
      optimizer.zeroGrad();
      const x = tensor(data.x.slice(from, from + o.batch), { device });
      const y = tensor(data.y.slice(from, from + o.batch), { dtype: "int32", device });
      lossFn.forward(ddp.forward(x) as Tensor, y).backward();
      optimizer.step();
    });
  }
  const out: TrainResult = {};
  for (const [key, t] of Object.entries(ddp.stateDict())) out[key] = [...await t.data()];
  return out;
}

/** What a rank of the createGraph scenario reports. */
export interface CreateGraphResult {
  /** The gradients of x and the weight under createGraph equal the plain ones, bit for bit. */
  same: boolean;
  /** Whether x's gradient under createGraph carries a node. */
  recorded: boolean;
  /** The error of differentiating x's gradient again. */
  error: string;
}

/**
 * The gradients of Σ y·coef under createGraph (syncBatchNorm's backward is first-order only:
 * the plain numbers, on a node that refuses a second derivative), then a second derivative.
 */
async function createGraph(rank: number, o: { backend: string }): Promise<CreateGraphResult> {
  const [device] = await requestDevices({ backend: o.backend });
  const { x: all, coef: allCoef, rowSize } = directData(4, [2]);
  const rows = (values: number[]) =>
    tensor(values.slice(rank * 2 * rowSize, (rank + 1) * 2 * rowSize), { device })
      .reshape([2, CHANNELS, 2]);
  const [x, coef] = [rows(all), rows(allCoef)];
  x.requiresGrad = true;
  const layer = new nn.SyncBatchNorm(CHANNELS, { device });
  const grads = (createGraph: boolean) =>
    autograd.grad(layer.forward(x).mul(coef).sum(), [x, layer.weight!], { createGraph });
  const plain = grads(false);
  const graphed = grads(true);
  let same = true;
  for (const [i, g] of graphed.entries()) {
    const [a, b] = [await g!.data(), await plain[i]!.data()];
    same &&= a.length === b.length && a.every((v, k) => Object.is(v, b[k]));
  }
  let error = "no error";
  try {
    autograd.grad(graphed[0]!.mul(coef).sum(), x);
  } catch (e) {
    error = (e as Error).message;
  }
  return { same, recorded: graphed[0]!.requiresGrad, error };
}

/** A rank: `scenario` picks what it runs. */
export async function main(
  rank: number,
  worldSize: number,
  scenario: string,
  options: Record<string, unknown>,
): Promise<unknown> {
  switch (scenario) {
    case "direct":
      return await direct(rank, options as unknown as DirectOptions);
    case "train":
      return await train(rank, worldSize, options as unknown as TrainOptions);
    case "createGraph":
      return await createGraph(rank, options as unknown as { backend: string });
    case "outsideGroup": {
      // Every rank makes the group; rank 1, not in it, calls a layer synchronised over it.
      const group = await distributed.newGroup([0, 2]);
      if (rank !== 1) return "member";
      const layer = new nn.SyncBatchNorm(2, { processGroup: group });
      try {
        layer.forward(tensor([[1, 2], [3, 4]]));
        return "no error";
      } catch (error) {
        return (error as Error).message;
      }
    }
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
}

// Under mpiexec: `deno run -A tests/sync_batch_norm_ranks.ts OUT_PREFIX SCENARIO JSON_OPTIONS`.
if (import.meta.main) {
  const [out, scenario, json] = Deno.args;
  await distributed.initProcessGroup({ timeoutMs: 60_000 });
  const rank = distributed.getRank();
  const result = await main(rank, distributed.getWorldSize(), scenario, JSON.parse(json));
  await Deno.writeTextFile(`${out}.${rank}.json`, JSON.stringify(result));
  await distributed.destroyProcessGroup();
}
