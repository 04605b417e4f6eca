/**
 * What the ranks of tests/ddp_join_leftovers_test.ts run: spawned as Workers
 * (its `main`), under `mpiexec` or under multigrad's tcp launcher (run as a
 * script, writing each rank's result as JSON to a file). Each scenario
 * returns every rank's error messages (or "ok" where none was raised).
 * @module
 */

import { distributed, manualSeed, nn, optim, requestDevices, type Tensor, tensor } from "../mod.ts";
import { runAsLaunchedRank } from "./rank_main.ts";

/** Linear(4, 3) -> Tanh -> Linear(3, 2), the same on every rank (DDP broadcasts rank 0's). */
function model(): nn.Sequential {
  return new nn.Sequential(new nn.Linear(4, 3), new nn.Tanh(), new nn.Linear(3, 2));
}

/** Batch `i` of rank `rank`: x [2, 4], y [2, 2]. */
function batch(rank: number, i: number): [Tensor, Tensor] {
  const v = (n: number, k: number) =>
    Float32Array.from({ length: n }, (_, j) => Math.sin(rank * 7 + i * 3 + j + k));
  return [tensor(v(8, 0), { shape: [2, 4] }), tensor(v(4, 11), { shape: [2, 2] })];
}

function message(f: () => unknown): string {
  try {
    f();
    return "ok";
  } catch (e) {
    return (e as Error).message;
  }
}

/** A joinable of the user's own, whose hooks do nothing (it has no collectives). */
class Counter implements distributed.algorithms.Joinable {
  constructor(readonly joinDevice: distributed.algorithms.Joinable["joinDevice"]) {}
  readonly joinProcessGroup = undefined;
  joinHook(): distributed.algorithms.JoinHook {
    return new distributed.algorithms.JoinHook();
  }
}

/**
 * The order of the joinables: ZeRO before DDP is refused naming both; a
 * user's joinable may come anywhere else. Then `[ddp, zero]` trains on
 * uneven inputs (2 and 4 batches) to the end on every rank.
 */
async function order(rank: number): Promise<string[]> {
  const [device] = await requestDevices({ backend: "cpu" });
  const ddp = new distributed.DistributedDataParallel(model());
  const zero = new distributed.optim.ZeroRedundancyOptimizer(ddp.parameters(), {
    optimizerClass: optim.SGD,
    lr: 0.1,
  });
  const user = new Counter(device);
  const { Join } = distributed.algorithms;
  const out = [
    message(() => new Join([zero, ddp])),
    message(() => new Join([user, zero, ddp])),
    message(() => new Join([user, ddp, zero])),
    message(() => new Join([ddp, user, zero])),
  ];
  const lossFn = new nn.MSELoss();
  let steps = 0;
  await Join.run([ddp, zero], async () => {
    for (let i = 0; i < 2 + 2 * rank; i++) {
      zero.zeroGrad();
      const [x, y] = batch(rank, i);
      lossFn.forward(ddp.forward(x), y).backward();
      zero.step();
      steps++;
      await ddp.module.parameters()[0].data();
    }
  });
  out.push(`steps ${steps}`);
  out.push(JSON.stringify([...(await ddp.module.parameters()[0].data())]));
  // A user's joinable first: it notifies, at the top of every iteration.
  const ddp2 = new distributed.DistributedDataParallel(model());
  const zero2 = new distributed.optim.ZeroRedundancyOptimizer(ddp2.parameters(), {
    optimizerClass: optim.SGD,
    lr: 0.1,
  });
  steps = 0;
  await Join.run([user, ddp2, zero2], async () => {
    for (let i = 0; i < 3 - 2 * rank; i++) {
      await Join.notifyJoinContext(user);
      zero2.zeroGrad();
      const [x, y] = batch(rank, i);
      lossFn.forward(ddp2.forward(x), y).backward();
      zero2.step();
      steps++;
    }
  });
  out.push(`steps ${steps}`);
  out.push(JSON.stringify([...(await ddp2.module.parameters()[0].data())]));
  return out;
}

/**
 * Join.run([ddp, zero]) with gradient accumulation: odd steps run under
 * `noSync` (no step), even ones synchronise and step. `batches[rank]`
 * batches each. Returns "ok" or the error, then the parameters (JSON)
 * after it and after the same loop in Join.run([ddp]) with a plain SGD.
 */
async function accumulate(rank: number, batches: number[]): Promise<string[]> {
  await requestDevices({ backend: "cpu" });
  const lossFn = new nn.MSELoss();
  const train = async (zero: boolean): Promise<string> => {
    manualSeed(5); // both runs start from the same weights
    const ddp = new distributed.DistributedDataParallel(model());
    const opt = zero
      ? new distributed.optim.ZeroRedundancyOptimizer(ddp.parameters(), {
        optimizerClass: optim.SGD,
        lr: 0.1,
      })
      : new optim.SGD(ddp.parameters(), { lr: 0.1 });
    const joinables = opt instanceof distributed.optim.ZeroRedundancyOptimizer ? [ddp, opt] : [ddp];
    await distributed.algorithms.Join.run(joinables, async () => {
      for (let i = 0; i < batches[rank]; i++) {
        const [x, y] = batch(rank, i);
        if (i % 2 === 1) {
          ddp.noSync(() => lossFn.forward(ddp.forward(x), y).backward());
          continue;
        }
        const loss = lossFn.forward(ddp.forward(x), y);
        loss.backward();
        opt.step();
        opt.zeroGrad();
        await loss.item();
      }
    });
    const values = await Promise.all(ddp.module.parameters().map((p) => p.data()));
    return JSON.stringify(values.flatMap((v) => [...v]));
  };
  let zero: string;
  try {
    zero = await train(true);
  } catch (e) {
    return [(e as Error).message];
  }
  return ["ok", zero, await train(false)];
}

/** A module whose `spare` layer only rank 1 uses, and only at the second step. */
class Spare extends nn.Module {
  body = new nn.Linear(4, 2);
  spare = new nn.Linear(2, 2);
  useSpare = false;
  override forward(x: Tensor): Tensor {
    const h = this.body.forward(x) as Tensor;
    return this.useSpare ? this.spare.forward(h) as Tensor : h;
  }
}

/**
 * DDP staticGraph: rank 1 gives `spare` a gradient after the first step
 * learnt it as unused; every rank must raise, naming it and rank 1.
 */
async function staticGraph(rank: number): Promise<string[]> {
  await requestDevices({ backend: "cpu" });
  const m = new Spare();
  const ddp = new distributed.DistributedDataParallel(m, { staticGraph: true });
  const opt = new optim.SGD(ddp.parameters(), { lr: 0.1 });
  const lossFn = new nn.MSELoss();
  try {
    for (let i = 0; i < 3; i++) {
      m.useSpare = rank === 1 && i === 1;
      opt.zeroGrad();
      const [x, y] = batch(rank, i);
      const loss = lossFn.forward(ddp.forward(x), y);
      loss.backward();
      opt.step();
      await loss.item();
      await m.body.weight.data();
    }
    return ["ok"];
  } catch (e) {
    return [(e as Error).message];
  }
}

/** A rank: `scenario` picks what it runs. */
export async function main(
  rank: number,
  _worldSize: number,
  scenario: string,
  options: Record<string, unknown> = {},
): Promise<string[]> {
  switch (scenario) {
    case "order":
      return await order(rank);
    case "accumulate":
      return await accumulate(rank, options.batches as number[]);
    case "staticGraph":
      return await staticGraph(rank);
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
}

// Under mpiexec or the tcp launcher: `deno run -A tests/ddp_join_leftovers_ranks.ts OUT_PREFIX SCENARIO JSON`.
if (import.meta.main) await runAsLaunchedRank(main);
