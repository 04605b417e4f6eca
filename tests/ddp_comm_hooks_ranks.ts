/**
 * What the ranks of tests/ddp_comm_hooks_test.ts run: spawned as Workers
 * (its `main`) or under `mpiexec` (run as a script, writing each rank's
 * result as JSON to a file).
 * @module
 */

import {
  distributed,
  manualSeed,
  nn,
  noGrad,
  optim,
  seededRandom,
  type Tensor,
  tensor,
  tidy,
} from "../mod.ts";

const { allreduceHook, PowerSGDState, powerSGDHook } = distributed.algorithms.ddpCommHooks;
type GradBucket = distributed.GradBucket;

/**
 * A float32 layer, then a float64 one: two buckets (one per dtype), bucket 0
 * the float64 layer's (the last parameters), bucket 1 the float32 layer's.
 */
export class Mixed extends nn.Module {
  a: nn.Linear;
  b: nn.Linear;
  constructor(seed: number, hidden = 16) {
    super();
    manualSeed(seed);
    this.a = new nn.Linear(6, hidden);
    this.b = new nn.Linear(hidden, 3).double();
  }
  override forward(x: Tensor): Tensor {
    return this.b.forward(this.a.forward(x).relu().to("float64")) as Tensor;
  }
}

/** Rank `rank`'s batch of step `step`: [rows, 6] float32, different per rank and step. */
export function batch(rank: number, step: number, rows = 5): number[][] {
  const random = seededRandom(1000 * step + rank + 7);
  return Array.from({ length: rows }, () => Array.from({ length: 6 }, () => random() * 2 - 1));
}

/** One training-free step: forward on this rank's batch, backward of a squared sum. */
function step(model: nn.Module, rank: number, s: number): void {
  const out = model.forward(tensor(batch(rank, s))) as Tensor;
  out.mul(out).sum().mul(0.5).backward();
}

async function grads(model: nn.Module): Promise<number[][]> {
  return await Promise.all(model.parameters().map(async (p) => [...(await p.grad!.data())]));
}

async function values(ts: readonly Tensor[]): Promise<number[][]> {
  return await Promise.all(ts.map(async (t) => [...(await t.data())]));
}

/** SGD by hand (no optimizer needed): p -= lr * grad. */
function sgd(model: nn.Module, lr: number): void {
  noGrad(() => {
    for (const p of model.parameters()) p.add_(p.grad!, { alpha: -lr });
  });
}

/** What a rank saw of one bucket in the recording hook. */
export interface Seen {
  index: number;
  isLast: boolean;
  dtype: string;
  buffer: number[];
  gradients: number[][];
  gradientShapes: number[][];
  parameters: string[];
}

/** allreduceHook against no hook; a recording, scaling hook; setBuffer; noSync. */
async function hooks(rank: number) {
  const plain = new distributed.DistributedDataParallel(new Mixed(1));
  const hooked = new distributed.DistributedDataParallel(new Mixed(1));
  hooked.registerCommHook(null, allreduceHook);
  const defaultVsHook: { plain: number[][]; hooked: number[][] }[] = [];
  for (let s = 0; s < 3; s++) {
    for (const m of [plain, hooked]) {
      m.zeroGrad();
      step(m, rank, s);
    }
    defaultVsHook.push({ plain: await grads(plain), hooked: await grads(hooked) });
    sgd(plain, 0.05);
    sgd(hooked, 0.05);
  }

  // A hook that records the bucket and returns sum(float64(buffer) * scale), cast back.
  const model = new Mixed(2);
  const names = new Map(model.namedParameters().map(([n, p]) => [p, n]));
  const ddp = new distributed.DistributedDataParallel(model);
  const seen: Seen[] = [];
  const pending: Promise<void>[] = [];
  let calls = 0;
  ddp.registerCommHook({ scale: 3 }, (state: { scale: number }, bucket: GradBucket) => {
    calls++;
    const entry: Seen = {
      index: bucket.index(),
      isLast: bucket.isLast(),
      dtype: bucket.buffer().dtype,
      buffer: [],
      gradients: [],
      gradientShapes: bucket.gradients().map((g) => [...g.shape]),
      parameters: bucket.parameters().map((p) => names.get(p)!),
    };
    seen.push(entry);
    const buffer = bucket.buffer();
    pending.push(buffer.data().then((d) => void (entry.buffer = [...d])));
    pending.push(values(bucket.gradients()).then((g) => void (entry.gradients = g)));
    const t = buffer.to("float64").mul(state.scale);
    distributed.allReduce(t);
    return t.to(buffer.dtype);
  });
  step(ddp, rank, 0);
  await Promise.all(pending);
  const scaled = await grads(ddp);
  // noSync: the hook is not called; the next synchronising backward reduces the sum.
  ddp.zeroGrad();
  ddp.noSync(() => step(ddp, rank, 1));
  const callsAfterNoSync = calls;
  const localAccumulated = await grads(ddp);
  step(ddp, rank, 2);
  await Promise.all(pending);
  const afterNoSync = await grads(ddp);

  // setBuffer: the hook replaces the buffer with twice it, then averages.
  const set = new distributed.DistributedDataParallel(new Mixed(3));
  let setOk = true;
  set.registerCommHook(null, (_: null, bucket: GradBucket) => {
    const doubled = bucket.buffer().mul(2);
    bucket.setBuffer(doubled);
    setOk &&= bucket.buffer() === doubled;
    return allreduceHook(null, bucket);
  });
  step(set, rank, 0);
  const setGrads = await grads(set);
  const plainSet = new distributed.DistributedDataParallel(new Mixed(3));
  step(plainSet, rank, 0);
  const plainSetGrads = await grads(plainSet);
  return {
    defaultVsHook,
    seen,
    scaled,
    calls,
    callsAfterNoSync,
    localAccumulated,
    afterNoSync,
    setOk,
    setGrads,
    plainSetGrads,
    parameterOrder: model.namedParameters().map(([n]) => n),
  };
}

/** Options of the PowerSGD scenario. */
export interface PowerOptions {
  rank: number;
  errorFeedback: boolean;
  warmStart: boolean;
  start: number;
  steps: number;
  epsilon?: number;
  hidden?: number;
}

/** PowerSGD: each step's local buffers (input to the hook) and the resulting gradients. */
async function power(rank: number, o: PowerOptions) {
  const model = new Mixed(4, o.hidden ?? 16);
  const ddp = new distributed.DistributedDataParallel(model);
  const state = new PowerSGDState({
    matrixApproximationRank: o.rank,
    startPowerSGDIter: o.start,
    useErrorFeedback: o.errorFeedback,
    warmStart: o.warmStart,
    orthogonalizationEpsilon: o.epsilon ?? 0,
    randomSeed: 5,
    minCompressionRate: 1,
  });
  const inputs: Tensor[][] = [];
  ddp.registerCommHook(state, (s: typeof state, bucket: GradBucket) => {
    (inputs[bucket.index()] ??= []).push(bucket.buffer().clone());
    return powerSGDHook(s, bucket);
  });
  const steps: { grads: number[][] }[] = [];
  for (let s = 0; s < o.steps; s++) {
    ddp.zeroGrad();
    step(ddp, rank, s);
    steps.push({ grads: await grads(ddp) });
    sgd(ddp, 0.02);
  }
  return {
    steps,
    inputs: await Promise.all(inputs.map((list) => values(list))),
    iter: state.iter,
    stats: state.compressionStats(),
    params: await values(model.parameters()),
  };
}

/**
 * Training with PowerSGD (rank 1 from step 2) on a fixed regression target,
 * each step in a `tidy` (the hook's temporaries freed, its state kept): the
 * losses and the cpu memory in use after each step.
 */
async function powerTrain(rank: number) {
  const model = new Mixed(6, 24);
  const ddp = new distributed.DistributedDataParallel(model);
  ddp.registerCommHook(new PowerSGDState({ startPowerSGDIter: 2 }), powerSGDHook);
  const opt = new optim.SGD(ddp.parameters(), { lr: 0.1 });
  const device = model.a.weight.device;
  const losses: number[] = [];
  const memory: number[] = [];
  for (let s = 0; s < 40; s++) {
    const x = tensor(batch(rank, s % 4, 16));
    const loss = tidy(() => {
      opt.zeroGrad();
      const target = x.narrow(1, 0, 3).mul(2).sub(x.narrow(1, 3, 3)).to("float64");
      const d = (ddp.forward(x) as Tensor).sub(target);
      const loss = d.mul(d).mean();
      loss.backward();
      opt.step();
      return loss;
    });
    losses.push(await loss.item());
    loss.dispose();
    x.dispose();
    memory.push(device.memory().bytesInUse);
  }
  return { losses, memory, params: await values(model.parameters()) };
}

/** Rank 0 uses `extra`, no rank uses `never`: findUnusedParameters with and without a hook. */
class Partial extends nn.Module {
  a: nn.Linear;
  extra: nn.Linear;
  never: nn.Linear;
  constructor() {
    super();
    manualSeed(9);
    this.a = new nn.Linear(6, 3);
    this.extra = new nn.Linear(6, 3);
    this.never = new nn.Linear(6, 3);
  }
  override forward(x: Tensor, useExtra: boolean): Tensor {
    const y = this.a.forward(x) as Tensor;
    return useExtra ? y.add(this.extra.forward(x) as Tensor) : y;
  }
}

async function unused(rank: number) {
  const out: (number[] | null)[][] = [];
  for (const hooked of [false, true]) {
    const ddp = new distributed.DistributedDataParallel(new Partial(), {
      findUnusedParameters: true,
    });
    if (hooked) ddp.registerCommHook(null, allreduceHook);
    (ddp.forward(tensor(batch(rank, 0)), rank === 0) as Tensor).sum().backward();
    out.push(
      await Promise.all(
        ddp.parameters().map(async (p) => (p.grad ? [...await p.grad.data()] : null)),
      ),
    );
  }
  return out;
}

async function message(fn: () => unknown): Promise<string> {
  try {
    await fn();
  } catch (error) {
    return `${(error as Error).name}: ${(error as Error).message}`;
  }
  return "no error";
}

/** The errors, the same on every rank (each before any collective of its pass). */
async function errors(rank: number) {
  const out: Record<string, string> = {};
  const twice = new distributed.DistributedDataParallel(new Mixed(1));
  twice.registerCommHook(null, allreduceHook);
  out.twice = await message(() => twice.registerCommHook(null, allreduceHook));
  out.notCallable = await message(() =>
    new distributed.DistributedDataParallel(new Mixed(1)).registerCommHook(
      null,
      "hook" as unknown as typeof allreduceHook,
    )
  );
  const late = new distributed.DistributedDataParallel(new Mixed(1));
  step(late, rank, 0);
  out.late = await message(() => late.registerCommHook(null, allreduceHook));
  const bad = (result: (b: GradBucket) => unknown) => {
    const m = new distributed.DistributedDataParallel(new Mixed(1));
    m.registerCommHook(null, (_: null, b: GradBucket) => result(b) as Tensor);
    return message(() => step(m, rank, 0));
  };
  out.shape = await bad((b) => b.buffer().narrow(0, 0, 5));
  out.dtype = await bad((b) =>
    b.buffer().to("float32").to(b.index() === 0 ? "float32" : "float64")
  );
  out.promise = await bad((b) => Promise.resolve(b.buffer()));
  out.setBuffer = await bad((b) => {
    b.setBuffer(b.buffer().reshape([1, -1]));
    return b.buffer();
  });
  out.stateRank = await message(() => new PowerSGDState({ matrixApproximationRank: 0 }));
  out.stateStart = await message(() => new PowerSGDState({ startPowerSGDIter: 1 }));
  out.stateNoFeedback = await message(() =>
    new PowerSGDState({ startPowerSGDIter: 0, useErrorFeedback: false, warmStart: false })
  );
  return out;
}

/** One case of tests/fixtures/torch_ddp_comm_hooks.json. */
export interface TorchCase {
  hook: "allreduce" | "powerSGD";
  options: Record<string, number | boolean>;
  steps: number;
  shapes: number[][][];
  dtypes: ("float32" | "float64")[];
  inputs: number[][][][];
  qs: number[][];
  outputs: number[][][][];
}

/** Replays a PyTorch case: the same bucket inputs and initial Qs, straight into the hook. */
async function torchCase(rank: number, c: TorchCase): Promise<number[][][]> {
  const o = c.options;
  let drawn = 0;
  const state = c.hook === "allreduce" ? null : new PowerSGDState({
    matrixApproximationRank: o.matrix_approximation_rank as number,
    startPowerSGDIter: o.start_powerSGD_iter as number,
    minCompressionRate: (o.min_compression_rate as number | undefined) ?? 2,
    useErrorFeedback: (o.use_error_feedback as boolean | undefined) ?? true,
    warmStart: (o.warm_start as boolean | undefined) ?? true,
    orthogonalizationEpsilon: (o.orthogonalization_epsilon as number | undefined) ?? 0,
    randomQ: (shape, dtype) => tensor(c.qs[drawn++], { dtype }).reshape(shape),
  });
  const params = c.shapes.map((shapes, b) =>
    shapes.map((s) =>
      new nn.Parameter(
        tensor(new Array(s.reduce((x, y) => x * y, 1)).fill(0), {
          dtype: c.dtypes[b],
        }).reshape(s),
      )
    )
  );
  const outputs: number[][][] = [];
  for (let s = 0; s < c.steps; s++) {
    const step: Tensor[] = [];
    for (let b = 0; b < c.shapes.length; b++) {
      const bucket = new distributed.GradBucket(
        b,
        tensor(c.inputs[rank][s][b], { dtype: c.dtypes[b] }),
        params[b],
        b === c.shapes.length - 1,
      );
      step.push(state ? powerSGDHook(state, bucket) : allreduceHook(null, bucket));
    }
    outputs.push(await values(step));
  }
  if (drawn !== c.qs.length) throw new Error(`drew ${drawn} Qs, PyTorch drew ${c.qs.length}`);
  return outputs;
}

/** A rank: `scenario` picks what it runs. */
export async function main(
  rank: number,
  _worldSize: number,
  scenario: string,
  options: Record<string, unknown> = {},
): Promise<unknown> {
  switch (scenario) {
    case "hooks":
      return await hooks(rank);
    case "power":
      return await power(rank, options as unknown as PowerOptions);
    case "powerTrain":
      return await powerTrain(rank);
    case "errors":
      return await errors(rank);
    case "unused":
      return await unused(rank);
    case "torch": {
      const out = [];
      for (const c of options.cases as TorchCase[]) out.push(await torchCase(rank, c));
      return out;
    }
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
}

// Under mpiexec: `deno run -A tests/ddp_comm_hooks_ranks.ts OUT_PREFIX SCENARIO JSON_OPTIONS`.
if (import.meta.main) {
  const [out, scenario, json] = Deno.args;
  const options = JSON.parse(json ?? "{}");
  await distributed.initProcessGroup({ timeoutMs: 60_000 });
  const rank = distributed.getRank();
  const result = await main(rank, distributed.getWorldSize(), scenario, options);
  await Deno.writeTextFile(`${out}.${rank}.json`, JSON.stringify(result));
  await distributed.destroyProcessGroup();
}
