/**
 * What the ranks of tests/integration_parallel_test.ts run (spawned as
 * Workers): DDP combined with other features, each scenario returning the
 * DDP result and, on rank 0, the single-process oracle trained on every
 * rank's rows.
 * @module
 */

import {
  distributed,
  getRngState,
  load,
  manualSeed,
  nn,
  noGrad,
  optim,
  save,
  seededRandom,
  setRngState,
  type Tensor,
  tensor,
  utils,
} from "../mod.ts";

const DDP = distributed.DistributedDataParallel;
type Params = Record<string, number[]>;

/** Rows [n, 6] and targets [n, 3] of step `step`, micro-batch `micro`, rank `rank`. */
function rows(step: number, micro: number, rank: number, n: number) {
  const random = seededRandom(10_000 * step + 100 * micro + rank + 1);
  const x = Array.from({ length: n }, () => Array.from({ length: 6 }, () => random() * 2 - 1));
  const y = Array.from({ length: n }, () => Array.from({ length: 3 }, () => random() * 2 - 1));
  return { x, y };
}

/** Every rank's rows of one step and micro-batch, in rank order (the oracle's batch). */
function allRows(step: number, micro: number, world: number, n: number) {
  const parts = Array.from({ length: world }, (_, r) => rows(step, micro, r, n));
  return { x: parts.flatMap((p) => p.x), y: parts.flatMap((p) => p.y) };
}

async function stateOf(module: nn.Module): Promise<Params> {
  const out: Params = {};
  for (const [k, t] of Object.entries(module.stateDict())) out[k] = [...(await t.data())];
  return out;
}

const mse = (out: Tensor, y: number[][]) => nn.functional.mseLoss(out, tensor(y));

// ---------------------------------------------------------------------------------------------
// DDP + utils.checkpoint

/** A block run under utils.checkpoint between two plain layers; `tie` shares a weight across. */
class Checkpointed extends nn.Module {
  first = new nn.Linear(6, 8);
  inner = new nn.Linear(8, 8);
  block = new nn.Sequential(this.inner, new nn.Tanh(), new nn.Linear(8, 8));
  last = new nn.Linear(8, 3);
  constructor(readonly reentrant: boolean, readonly segments: boolean) {
    super();
  }
  override forward(x: Tensor): Tensor {
    const h = (this.first.forward(x) as Tensor).relu();
    const options = { useReentrant: this.reentrant };
    const g = this.segments
      ? utils.checkpoint.checkpointSequential(this.block, 2, h, options)
      : utils.checkpoint.checkpoint((t: Tensor) => this.block.forward(t) as Tensor, [h], options);
    // The block's first layer again, outside the checkpoint: a parameter used in both.
    const again = this.inner.forward(g) as Tensor;
    return this.last.forward(again.tanh()) as Tensor;
  }
}

async function checkpointScenario(
  rank: number,
  world: number,
  o: { reentrant: boolean; segments: boolean; staticGraph?: boolean },
) {
  const make = (seed: number) => {
    manualSeed(seed);
    return new Checkpointed(o.reentrant, o.segments);
  };
  const ddp = new DDP(make(rank + 1), o.staticGraph ? { staticGraph: true } : {});
  const opt = new optim.SGD(ddp.parameters(), { lr: 0.1, momentum: 0.9 });
  const grads: number[][][] = [];
  for (let step = 0; step < 3; step++) {
    const { x, y } = rows(step, 0, rank, 4);
    opt.zeroGrad();
    mse(ddp.forward(tensor(x)), y).backward();
    grads.push(await Promise.all(ddp.parameters().map(async (p) => [...await p.grad!.data()])));
    opt.step();
  }
  if (rank !== 0) return { ddp: await stateOf(ddp), grads };
  const oracle = make(1);
  const opt1 = new optim.SGD(oracle.parameters(), { lr: 0.1, momentum: 0.9 });
  const oracleGrads: number[][][] = [];
  for (let step = 0; step < 3; step++) {
    const { x, y } = allRows(step, 0, world, 4);
    opt1.zeroGrad();
    mse(oracle.forward(tensor(x)), y).backward();
    oracleGrads.push(
      await Promise.all(oracle.parameters().map(async (p) => [...await p.grad!.data()])),
    );
    opt1.step();
  }
  return { ddp: await stateOf(ddp), grads, oracle: await stateOf(oracle), oracleGrads };
}

// ---------------------------------------------------------------------------------------------
// DDP + noSync accumulation + loss scaling + clipGradNorm_ + StepLR

const MICRO = 3;
const SCALE = 1024;

function accumulationStep(
  model: nn.Module,
  opt: { zeroGrad(): void; step(): unknown },
  sched: optim.lrScheduler.StepLR,
  micro: (k: number) => { x: number[][]; y: number[][] },
  noSync: (<T>(fn: () => T) => T) | null,
): Tensor {
  opt.zeroGrad();
  for (let k = 0; k < MICRO; k++) {
    const { x, y } = micro(k);
    const run = () => mse(model.forward(tensor(x)) as Tensor, y).mul(SCALE).backward();
    if (noSync && k < MICRO - 1) noSync(run);
    else run();
  }
  for (const p of model.parameters()) p.grad?.div_(SCALE);
  const norm = nn.utils.clipGradNorm_(model.parameters(), 0.05);
  opt.step();
  sched.step();
  return norm;
}

async function accumulateScenario(rank: number, world: number) {
  const make = (seed: number) => {
    manualSeed(seed);
    return new nn.Sequential(new nn.Linear(6, 16), new nn.ReLU(), new nn.Linear(16, 3));
  };
  const ddp = new DDP(make(rank + 1), { bucketCapMB: 1e-4 });
  const opt = new optim.SGD(ddp.parameters(), { lr: 0.2, momentum: 0.5 });
  const sched = new optim.lrScheduler.StepLR(opt, 1, { gamma: 0.5 });
  const norms: number[] = [];
  for (let step = 0; step < 3; step++) {
    norms.push(
      await accumulationStep(
        ddp,
        opt,
        sched,
        (k) => rows(step, k, rank, 3),
        (fn) => ddp.noSync(fn),
      ).item(),
    );
  }
  if (rank !== 0) return { ddp: await stateOf(ddp), norms };
  const oracle = make(1);
  const opt1 = new optim.SGD(oracle.parameters(), { lr: 0.2, momentum: 0.5 });
  const sched1 = new optim.lrScheduler.StepLR(opt1, 1, { gamma: 0.5 });
  const oracleNorms: number[] = [];
  for (let step = 0; step < 3; step++) {
    oracleNorms.push(
      await accumulationStep(oracle, opt1, sched1, (k) => allRows(step, k, world, 3), null).item(),
    );
  }
  return { ddp: await stateOf(ddp), norms, oracle: await stateOf(oracle), oracleNorms };
}

// ---------------------------------------------------------------------------------------------
// DDP + tied weights + a frozen parameter + an int32 buffer + float32 and float64 parameters

class Mixed extends nn.Module {
  a = new nn.Linear(6, 8);
  frozen = new nn.Linear(8, 8);
  b = new nn.Linear(8, 6);
  // Tied: its weight is `a`'s (transposed use, as tied embeddings).
  head = new nn.Linear(6, 3).double();
  count: Tensor;
  constructor(readonly step: number) {
    super();
    this.frozen.weight.requiresGrad_(false);
    this.frozen.bias!.requiresGrad_(false);
    this.count = tensor([0, 0], { dtype: "int32" });
    this.registerBuffer("count", this.count);
  }
  override forward(x: Tensor): Tensor {
    if (this.training) this.count.add_(tensor([this.step, 1], { dtype: "int32" }));
    let h = (this.a.forward(x) as Tensor).tanh();
    h = (this.frozen.forward(h) as Tensor).tanh();
    h = (this.b.forward(h) as Tensor).tanh();
    // a's weight used a second time, transposed: [6, 8] x [8, 6] stays [n, 6].
    h = h.matmul(this.a.weight.t()).matmul(this.a.weight).add(h);
    return (this.head.forward(h.to("float64")) as Tensor).to("float32");
  }
}

async function mixedScenario(rank: number, world: number) {
  const make = (seed: number, step: number) => {
    manualSeed(seed);
    return new Mixed(step);
  };
  // Rank 1's buffer grows differently: the broadcast before each forward makes it rank 0's.
  const model = make(rank + 1, rank + 1);
  const ddp = new DDP(model);
  const opt = new optim.Adam(ddp.parameters(), { lr: 0.01 });
  const countsBefore: number[][] = [];
  for (let step = 0; step < 3; step++) {
    const { x, y } = rows(step, 0, rank, 4);
    opt.zeroGrad();
    const out = ddp.forward(tensor(x));
    countsBefore.push([...(await model.count.data())]);
    mse(out, y).backward();
    opt.step();
  }
  const frozenGrad = model.frozen.weight.grad === null;
  const result = { ddp: await stateOf(ddp), countsBefore, frozenGrad };
  if (rank !== 0) return result;
  const oracle = make(1, 1);
  const opt1 = new optim.Adam(oracle.parameters(), { lr: 0.01 });
  for (let step = 0; step < 3; step++) {
    const { x, y } = allRows(step, 0, world, 4);
    opt1.zeroGrad();
    mse(oracle.forward(tensor(x)), y).backward();
    opt1.step();
  }
  return { ...result, oracle: await stateOf(oracle) };
}

// ---------------------------------------------------------------------------------------------
// DDP + SyncBatchNorm + eval/train switching + broadcastBuffers

function bnModel(seed: number, sync: boolean): nn.Sequential {
  manualSeed(seed);
  const model = new nn.Sequential(
    new nn.Linear(6, 8),
    new nn.BatchNorm1d(8),
    new nn.ReLU(),
    new nn.Linear(8, 3),
  );
  return sync ? nn.SyncBatchNorm.convertSyncBatchnorm(model) as nn.Sequential : model;
}

async function syncBnScenario(rank: number, world: number, o: { broadcastBuffers: boolean }) {
  const ddp = new DDP(bnModel(rank + 1, true), { broadcastBuffers: o.broadcastBuffers });
  const opt = new optim.SGD(ddp.parameters(), { lr: 0.1 });
  const evals: number[][] = [];
  const probe = rows(99, 0, 0, 3).x;
  const train = (
    model: nn.Module,
    o2: { zeroGrad(): void; step(): unknown },
    x: number[][],
    y: number[][],
  ) => {
    model.train();
    o2.zeroGrad();
    mse(model.forward(tensor(x)) as Tensor, y).backward();
    o2.step();
  };
  for (let step = 0; step < 4; step++) {
    const { x, y } = rows(step, 0, rank, 4);
    train(ddp, opt, x, y);
    if (step % 2 === 1) {
      // Rank 1 evaluates twice, rank 0 once: under noGrad no forward leaves the buffers to
      // broadcast (PyTorch's require_forward_param_sync) and SyncBatchNorm in eval mode runs
      // no collective, so uneven evaluation is allowed.
      ddp.eval();
      for (let i = 0; i < (rank === 1 ? 2 : 1); i++) {
        const out = noGrad(() => ddp.forward(tensor(probe)));
        if (i === 0) evals.push([...(await out.data())]);
      }
    }
  }
  const result = { ddp: await stateOf(ddp), evals };
  if (rank !== 0) return result;
  const oracle = bnModel(1, false);
  const opt1 = new optim.SGD(oracle.parameters(), { lr: 0.1 });
  const oracleEvals: number[][] = [];
  for (let step = 0; step < 4; step++) {
    const { x, y } = allRows(step, 0, world, 4);
    train(oracle, opt1, x, y);
    if (step % 2 === 1) {
      oracle.eval();
      oracleEvals.push([...(await (oracle.forward(tensor(probe)) as Tensor).data())]);
    }
  }
  return { ...result, oracle: await stateOf(oracle), oracleEvals };
}

// ---------------------------------------------------------------------------------------------
// DDP stateDict through save/load mid-training: resumed equals uninterrupted

function dropModel(seed: number): nn.Sequential {
  manualSeed(seed);
  return new nn.Sequential(
    new nn.Linear(6, 16),
    new nn.ReLU(),
    new nn.Dropout(0.3),
    new nn.Linear(16, 3),
  );
}

async function resumeScenario(rank: number, _world: number, o: { dir: string }) {
  const STEPS = 4, CUT = 2;
  const setup = (seed: number) => {
    const ddp = new DDP(dropModel(seed));
    const opt = new optim.Adam(ddp.parameters(), { lr: 0.01 });
    const sched = new optim.lrScheduler.StepLR(opt, 1, { gamma: 0.7 });
    return { ddp, opt, sched };
  };
  const train = (s: ReturnType<typeof setup>, step: number) => {
    const { x, y } = rows(step, 0, rank, 4);
    s.opt.zeroGrad();
    mse(s.ddp.forward(tensor(x)), y).backward();
    s.opt.step();
    s.sched.step();
  };
  // Uninterrupted, each rank drawing its own dropout masks.
  manualSeed(500 + rank);
  const whole = setup(rank + 1);
  for (let step = 0; step < STEPS; step++) train(whole, step);
  const uninterrupted = await stateOf(whole.ddp);

  manualSeed(500 + rank);
  const first = setup(rank + 1);
  for (let step = 0; step < CUT; step++) train(first, step);
  const path = `${o.dir}/rank${rank}.safetensors`;
  await save({
    model: first.ddp.stateDict(),
    optimizer: first.opt.stateDict(),
    scheduler: first.sched.stateDict(),
    rng: getRngState(),
  }, path);
  manualSeed(12345); // a fresh process's generator
  const resumed = setup(7 + rank); // a fresh model: all from the checkpoint
  const ckpt = await load<{
    model: Record<string, Tensor>;
    optimizer: optim.OptimizerStateDict;
    scheduler: Record<string, unknown>;
    rng: string;
  }>(path);
  resumed.ddp.loadStateDict(ckpt.model);
  resumed.opt.loadStateDict(ckpt.optimizer);
  resumed.sched.loadStateDict(ckpt.scheduler as Parameters<typeof resumed.sched.loadStateDict>[0]);
  setRngState(ckpt.rng);
  for (let step = CUT; step < STEPS; step++) train(resumed, step);
  return {
    uninterrupted,
    resumed: await stateOf(resumed.ddp),
    lr: [whole.opt.paramGroups[0].lr, resumed.opt.paramGroups[0].lr],
  };
}

// ---------------------------------------------------------------------------------------------
// DDP staticGraph: unused parameters learnt once; a changed graph is an error

class WithSpare extends nn.Module {
  body = new nn.Linear(6, 3);
  spare = new nn.Linear(3, 3);
  override forward(x: Tensor, useSpare = false): Tensor {
    const h = this.body.forward(x) as Tensor;
    return useSpare ? this.spare.forward(h) as Tensor : h;
  }
}

async function staticUnusedScenario(rank: number, world: number) {
  const make = (seed: number) => {
    manualSeed(seed);
    return new WithSpare();
  };
  const ddp = new DDP(make(rank + 1));
  ddp.setStaticGraph();
  const opt = new optim.SGD(ddp.parameters(), { lr: 0.1, momentum: 0.9, weightDecay: 0.1 });
  for (let step = 0; step < 3; step++) {
    const { x, y } = rows(step, 0, rank, 4);
    opt.zeroGrad();
    mse(ddp.forward(tensor(x)), y).backward();
    opt.step();
  }
  const spareGrad = ddp.module.spare.weight.grad;
  const state = await stateOf(ddp);
  let changed = "";
  try {
    const { x, y } = rows(9, 0, rank, 4);
    mse(ddp.forward(tensor(x), true), y).backward();
  } catch (error) {
    changed = (error as Error).message;
  }
  let late = "";
  try {
    ddp.setStaticGraph();
  } catch (error) {
    late = (error as Error).message;
  }
  const result = { ddp: state, spareGrad: spareGrad === null, changed, late };
  if (rank !== 0) return result;
  const oracle = make(1);
  const opt1 = new optim.SGD(oracle.parameters(), { lr: 0.1, momentum: 0.9, weightDecay: 0.1 });
  for (let step = 0; step < 3; step++) {
    const { x, y } = allRows(step, 0, world, 4);
    opt1.zeroGrad();
    mse(oracle.forward(tensor(x)), y).backward();
    opt1.step();
  }
  return { ...result, oracle: await stateOf(oracle) };
}

/** Entry point of each spawned rank. */
export async function main(
  rank: number,
  world: number,
  scenario: string,
  options: Record<string, unknown> = {},
): Promise<unknown> {
  switch (scenario) {
    case "checkpoint":
      return await checkpointScenario(
        rank,
        world,
        options as { reentrant: boolean; segments: boolean; staticGraph?: boolean },
      );
    case "accumulate":
      return await accumulateScenario(rank, world);
    case "mixed":
      return await mixedScenario(rank, world);
    case "syncBn":
      return await syncBnScenario(rank, world, options as { broadcastBuffers: boolean });
    case "staticUnused":
      return await staticUnusedScenario(rank, world);
    case "resume":
      return await resumeScenario(rank, world, options as { dir: string });
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
}
