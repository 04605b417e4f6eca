/**
 * What the ranks of tests/ddp_join_leftovers_review_test.ts run (spawned as
 * Workers, its `main`): staticGraph runs that never misbehave must train as
 * findUnusedParameters does (the added check is not a numeric change), and
 * the noSync + ZeroRedundancyOptimizer refusal must not fire where the
 * optimizer's join hook cannot step (no join, a disabled join, a noGrad
 * forward).
 * @module
 */

import {
  distributed,
  manualSeed,
  nn,
  noGrad,
  optim,
  requestDevices,
  type Tensor,
  tensor,
} from "../mod.ts";

/** Batch `i` of rank `rank`: x [2, 4], y [2, 2]. */
function batch(rank: number, i: number): [Tensor, Tensor] {
  const v = (n: number, k: number) =>
    Float32Array.from({ length: n }, (_, j) => Math.cos(rank * 5 + i * 3 + j + k));
  return [tensor(v(8, 0), { shape: [2, 4] }), tensor(v(4, 11), { shape: [2, 2] })];
}

/** `body` always, `spare` never: the parameters staticGraph learns as unused. */
class Spare extends nn.Module {
  body = new nn.Linear(4, 2);
  spare = new nn.Linear(2, 2);
  override forward(x: Tensor): Tensor {
    return this.body.forward(x) as Tensor;
  }
}

/**
 * Five steps (the second accumulates under noSync), optionally with an
 * allreduce comm hook; the final parameters, as JSON.
 */
async function train(
  rank: number,
  options: distributed.DistributedDataParallelOptions,
  hook: boolean,
): Promise<string> {
  manualSeed(3);
  const m = new Spare();
  const ddp = new distributed.DistributedDataParallel(m, options);
  if (hook) ddp.registerCommHook(null, distributed.algorithms.ddpCommHooks.allreduceHook);
  const opt = new optim.SGD(ddp.parameters(), { lr: 0.1, momentum: 0.5 });
  const lossFn = new nn.MSELoss();
  for (let i = 0; i < 5; i++) {
    const [x, y] = batch(rank, i);
    if (i === 1) {
      ddp.noSync(() => lossFn.forward(ddp.forward(x), y).backward());
      continue;
    }
    const loss = lossFn.forward(ddp.forward(x), y);
    loss.backward();
    opt.step();
    opt.zeroGrad();
    await loss.item();
  }
  const out: number[] = [];
  for (const p of m.parameters()) out.push(...await p.data());
  return JSON.stringify(out);
}

/** staticGraph and findUnusedParameters, without and with a comm hook. */
async function staticClean(rank: number): Promise<string[]> {
  await requestDevices({ backend: "cpu" });
  const out: string[] = [];
  for (const hook of [false, true]) {
    out.push(await train(rank, { findUnusedParameters: true }, hook));
    out.push(await train(rank, { staticGraph: true }, hook));
  }
  return out;
}

type Pair = [
  distributed.DistributedDataParallel<nn.Sequential>,
  distributed.optim.ZeroRedundancyOptimizer,
];

function ddpAndZero(): Pair {
  const ddp = new distributed.DistributedDataParallel(
    new nn.Sequential(new nn.Linear(4, 3), new nn.Tanh(), new nn.Linear(3, 2)),
  );
  const zero = new distributed.optim.ZeroRedundancyOptimizer(ddp.parameters(), {
    optimizerClass: optim.SGD,
    lr: 0.1,
  });
  return [ddp, zero];
}

/** Two accumulated micro-batches then a step, `n` times; "ok" or the error. */
async function accumulate(
  rank: number,
  ddp: Pair[0],
  zero: Pair[1],
  n: number,
): Promise<void> {
  const lossFn = new nn.MSELoss();
  for (let i = 0; i < n; i++) {
    const [x, y] = batch(rank, 2 * i);
    ddp.noSync(() => lossFn.forward(ddp.forward(x), y).backward());
    const [x2, y2] = batch(rank, 2 * i + 1);
    const loss = lossFn.forward(ddp.forward(x2) as Tensor, y2);
    loss.backward();
    zero.step();
    zero.zeroGrad();
    await loss.item();
  }
}

async function outcome(f: () => Promise<void>): Promise<string> {
  try {
    await f();
    return "ok";
  } catch (e) {
    return (e as Error).message;
  }
}

/**
 * noSync accumulation with a ZeroRedundancyOptimizer outside a join, in a
 * disabled join, and a noGrad forward inside noSync in a join: all train.
 */
async function zeroAllowed(rank: number): Promise<string[]> {
  await requestDevices({ backend: "cpu" });
  const { Join } = distributed.algorithms;
  const out: string[] = [];
  {
    const [ddp, zero] = ddpAndZero();
    out.push(await outcome(() => accumulate(rank, ddp, zero, 2)));
  }
  {
    const [ddp, zero] = ddpAndZero();
    out.push(
      await outcome(() =>
        Join.run([ddp, zero], () => accumulate(rank, ddp, zero, 2), { enable: false })
      ),
    );
  }
  {
    const [ddp, zero] = ddpAndZero();
    const lossFn = new nn.MSELoss();
    out.push(
      await outcome(() =>
        Join.run([ddp, zero], async () => {
          for (let i = 0; i < 2; i++) {
            const [x, y] = batch(rank, i);
            const val = ddp.noSync(() => noGrad(() => lossFn.forward(ddp.forward(x), y)));
            await val.item();
            const loss = lossFn.forward(ddp.forward(x), y);
            loss.backward();
            zero.step();
            zero.zeroGrad();
            await loss.item();
          }
        })
      ),
    );
  }
  return out;
}

/**
 * Join.run([ddp, zero]) on uneven inputs (1 and 3 batches) with a noGrad
 * validation forward before and after each step, then the same without
 * them: the final parameters of both runs, as JSON, or the error.
 */
async function validate(rank: number): Promise<string[]> {
  await requestDevices({ backend: "cpu" });
  const out: string[] = [];
  for (const validating of [true, false]) {
    manualSeed(4);
    const [ddp, zero] = ddpAndZero();
    const lossFn = new nn.MSELoss();
    const check = async (x: Tensor, y: Tensor) => {
      if (validating) await noGrad(() => lossFn.forward(ddp.forward(x) as Tensor, y)).item();
    };
    out.push(
      await outcome(() =>
        distributed.algorithms.Join.run([ddp, zero], async () => {
          for (let i = 0; i < 1 + 2 * rank; i++) {
            const [x, y] = batch(rank, i);
            await check(x, y);
            const loss = lossFn.forward(ddp.forward(x) as Tensor, y);
            loss.backward();
            zero.step();
            zero.zeroGrad();
            await loss.item();
            await check(x, y);
          }
        })
      ),
    );
    const values: number[] = [];
    for (const p of ddp.module.parameters()) values.push(...await p.data());
    out.push(JSON.stringify(values));
  }
  return out;
}

/** A rank: `scenario` picks what it runs. */
export async function main(
  rank: number,
  _worldSize: number,
  scenario: string,
): Promise<string[]> {
  switch (scenario) {
    case "staticClean":
      return await staticClean(rank);
    case "zeroAllowed":
      return await zeroAllowed(rank);
    case "validate":
      return await validate(rank);
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
}
