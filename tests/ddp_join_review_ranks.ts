/**
 * What the ranks of tests/ddp_join_review_test.ts run (spawned Workers):
 * DDP joins over a sub-group, with a communication hook, with evaluation
 * forwards under `noGrad`, with a rank whose loop throws, and a buffer
 * holding -0. Each scenario returns plain values.
 * @module
 */

import { distributed, nn, noGrad, optim, requestDevices, tensor } from "../mod.ts";

/** Options of the training scenario. */
export interface ReviewTrainOptions {
  /** Batches per rank. */
  counts: number[];
  /** Which data each rank trains on (default: its own rank's). */
  dataOf?: number[];
  /** Wrap the DDP in a sub-group of these ranks (the others only join the group's creation). */
  group?: number[];
  /** Register `ddpCommHooks.allreduceHook`. */
  hook?: boolean;
  /** `divideByInitialWorldSize` (default true). */
  divide?: boolean;
  /** Run an evaluation forward under `noGrad` before every training step. */
  evaluate?: boolean;
  /** This rank's loop throws after its first step. */
  throwOn?: number;
  /** The ranks' backend (default "cpu"). */
  backend?: string;
  /** Even steps accumulate under `noSync`, odd steps synchronise and step. */
  accum?: boolean;
  /** Add a BatchNorm1d(3) after the first Linear. */
  bn?: boolean;
  /** Build the join, then another with the other divide mode, then run the first. */
  secondJoin?: boolean;
}

/** What a training rank returns. */
export interface ReviewTrained {
  /** Final state dict values by key (absent on a rank outside the group). */
  state?: Record<string, number[]>;
  /** The error message, where the join raised. */
  error?: string;
}

/** A deterministic stream of numbers in [-0.5, 0.5). */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32 - 0.5;
  };
}

/**
 * Linear(4, 3) [-> BatchNorm1d(3)] -> Tanh -> Linear(3, 2), the same on every
 * rank (and in tests/fixtures/torch_ddp_join_review.py).
 */
function model(batchNorm = false): nn.Sequential {
  const layers: nn.Module[] = [new nn.Linear(4, 3)];
  if (batchNorm) layers.push(new nn.BatchNorm1d(3));
  const m = new nn.Sequential(...layers, new nn.Tanh(), new nn.Linear(3, 2));
  const r = lcg(7);
  noGrad(() => {
    for (const p of m.parameters()) {
      p.copy_(tensor(Float32Array.from({ length: p.numel() }, r), { shape: [...p.shape] }));
    }
  });
  return m;
}

async function train(rank: number, o: ReviewTrainOptions): Promise<ReviewTrained> {
  const [device] = await requestDevices({ backend: o.backend ?? "cpu" });
  const group = o.group ? await distributed.newGroup(o.group) : undefined;
  if (o.group && !o.group.includes(rank)) return {};
  const ddp = new distributed.DistributedDataParallel(model(o.bn).to(device), {
    processGroup: group,
  });
  if (o.hook) {
    ddp.registerCommHook(group ?? null, distributed.algorithms.ddpCommHooks.allreduceHook);
  }
  const opt = new optim.SGD(ddp.parameters(), { lr: 0.1, momentum: 0.9 });
  const lossFn = new nn.MSELoss();
  const r = lcg(100 + (o.dataOf?.[rank] ?? rank));
  const loop = async () => {
    for (let i = 0; i < o.counts[rank]; i++) {
      const x = tensor(Float32Array.from({ length: 8 }, r), { shape: [2, 4] });
      const y = tensor(Float32Array.from({ length: 4 }, r), { shape: [2, 2] }).to(device);
      if (o.evaluate) await noGrad(() => ddp.forward(x)).sum().item();
      if (o.accum && i % 2 === 0) {
        await ddp.noSync(() => lossFn.forward(ddp.forward(x), y).backward());
        continue;
      }
      if (!o.accum) opt.zeroGrad();
      const loss = lossFn.forward(ddp.forward(x), y);
      loss.backward();
      opt.step();
      if (o.accum) opt.zeroGrad();
      await loss.item();
      if (o.throwOn === rank) throw new Error(`rank ${rank}: bad batch`);
    }
  };
  let error: string | undefined;
  try {
    const join = ddp.join({ divideByInitialWorldSize: o.divide });
    if (o.secondJoin) ddp.join({ divideByInitialWorldSize: o.divide === false });
    await join.run(loop);
  } catch (e) {
    error = (e as Error).message;
  }
  const state: Record<string, number[]> = {};
  for (const [k, v] of Object.entries(ddp.stateDict())) state[k] = [...(await v.data())];
  return { state, error };
}

/**
 * Buffers holding -0 (and +0) through a join whose active rank broadcasts
 * its buffers: whether each element is still -0 on this rank at the end
 * (float32, and float64 on cpu / int32 on webgpu).
 */
async function negativeZero(
  rank: number,
  { counts, backend }: { counts: number[]; backend: string },
): Promise<boolean[]> {
  const [device] = await requestDevices({ backend });
  const m = model();
  m.registerBuffer("signs", tensor(Float32Array.of(-0, 0, -0, 1), { shape: [4] }));
  // webgpu has no float64: an int32 buffer goes by the same sum there.
  const second = backend === "cpu" ? Float64Array.of(-0, 2) : Int32Array.of(-7, 2);
  m.registerBuffer("second", tensor(second, { shape: [2] }));
  const ddp = new distributed.DistributedDataParallel(m.to(device));
  await ddp.join().run(async () => {
    for (let i = 0; i < counts[rank]; i++) {
      ddp.forward(tensor(Float32Array.from({ length: 8 }, () => i), { shape: [2, 4] }))
        .sum().backward();
      await ddp.module.buffers()[0].data();
    }
  });
  const values = [
    ...(await m.buffers()[0].data()),
    ...(await m.buffers()[1].data()),
  ];
  if (values[4] !== (backend === "cpu" ? -0 : -7) || values[5] !== 2) {
    throw new Error(`buffer "second" became ${values.slice(4)}`);
  }
  return values.map((v) => Object.is(v, -0));
}

/**
 * Misuse that must be a clear error on every rank, not a hang: the same
 * joinable twice in a join, and `setStaticGraph` inside a running join
 * (its blocking exchange would wait for a rank that already joined).
 */
async function misuse(rank: number): Promise<string[]> {
  await requestDevices({ backend: "cpu" });
  const out: string[] = [];
  const ddp = new distributed.DistributedDataParallel(model());
  try {
    await distributed.algorithms.Join.run([ddp, ddp], () => {});
    out.push("no error");
  } catch (e) {
    out.push((e as Error).message);
  }
  const late = new distributed.DistributedDataParallel(model());
  try {
    await late.join().run(() => {
      if (rank === 0) return; // out of data at once
      late.setStaticGraph();
      late.forward(tensor(Float32Array.from({ length: 4 }, () => 1), { shape: [1, 4] }))
        .sum().backward();
    });
    out.push("no error");
  } catch (e) {
    out.push((e as Error).message);
  }
  // staticGraph's blocking exchange, with a buffer broadcast queued before it, meets a rank
  // that left: the error names the option that blocked.
  const m = model();
  m.registerBuffer("b", tensor(Float32Array.of(1), { shape: [1] }));
  const blocked = new distributed.DistributedDataParallel(m, { staticGraph: true });
  if (rank === 0) return out;
  try {
    blocked.forward(tensor(Float32Array.from({ length: 4 }, () => 1), { shape: [1, 4] }))
      .sum().backward();
    out.push("no error");
  } catch (e) {
    out.push((e as Error).message);
  }
  return out;
}

/** A rank: `scenario` picks what it runs. */
export async function main(
  rank: number,
  _worldSize: number,
  scenario: string,
  options: unknown,
): Promise<unknown> {
  switch (scenario) {
    case "train":
      return await train(rank, options as ReviewTrainOptions);
    case "misuse":
      return await misuse(rank);
    case "negativeZero":
      return await negativeZero(rank, options as { counts: number[]; backend: string });
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
}
