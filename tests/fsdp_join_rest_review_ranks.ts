/**
 * What the ranks of tests/fsdp_join_rest_review_test.ts run (spawned as
 * Workers, or as a script under the tcp launcher): misuse of gradient
 * accumulation with a ZeroRedundancyOptimizer in a join.
 * @module
 */

import { distributed, manualSeed, nn, optim, requestDevices, type Tensor, tensor } from "../mod.ts";
import { runAsLaunchedRank } from "./rank_main.ts";

function batch(rank: number, i: number): [Tensor, Tensor] {
  const v = (n: number, k: number) =>
    Float32Array.from({ length: n }, (_, j) => Math.sin(rank * 7 + i * 3 + j + k));
  return [tensor(v(8, 0), { shape: [2, 4] }), tensor(v(4, 11), { shape: [2, 2] })];
}

/**
 * Join.run([ddp, zero]) where rank q trains `batches[q]` batches, runs odd
 * ones under `noSync` and steps after every backward (a misuse once a rank
 * has joined). Returns "ok" or the error message.
 */
async function stepAfterNoSync(rank: number, batches: number[]): Promise<string[]> {
  await requestDevices({ backend: "cpu" });
  manualSeed(5);
  const ddp = new distributed.DistributedDataParallel(
    new nn.Sequential(new nn.Linear(4, 3), new nn.Tanh(), new nn.Linear(3, 2)),
  );
  const zero = new distributed.optim.ZeroRedundancyOptimizer(ddp.parameters(), {
    optimizerClass: optim.SGD,
    lr: 0.1,
  });
  const lossFn = new nn.MSELoss();
  try {
    await distributed.algorithms.Join.run([ddp, zero], async () => {
      for (let i = 0; i < batches[rank]; i++) {
        const [x, y] = batch(rank, i);
        if (i % 2 === 1) ddp.noSync(() => lossFn.forward(ddp.forward(x), y).backward());
        else lossFn.forward(ddp.forward(x), y).backward();
        zero.step();
        zero.zeroGrad();
        await ddp.module.parameters()[0].data();
      }
    });
    return ["ok"];
  } catch (e) {
    return [(e as Error).message];
  }
}

/**
 * A DDP over BatchNorm whose `joinHook()` the user asks for without a Join
 * (PyTorch's `join_hook()` leaves `_join_config` alone): a training forward
 * on rank-specific data, then an eval forward, which broadcasts the buffers
 * first. Returns the running mean after the first forward and after the
 * second (JSON): the second must be rank 0's first on every rank.
 */
async function hookWithoutJoin(rank: number): Promise<string[]> {
  await requestDevices({ backend: "cpu" });
  const ddp = new distributed.DistributedDataParallel(new nn.BatchNorm1d(2));
  ddp.joinHook();
  ddp.joinHook({ enable: true }); // the options a Join passes: still not a join
  ddp.forward(tensor([rank, 3 * rank + 1, 2, -rank], { shape: [2, 2] }));
  const bn = ddp.module as nn.BatchNorm1d;
  const first = JSON.stringify([...(await bn.runningMean!.data())]);
  ddp.module.eval();
  ddp.forward(tensor([0, 0], { shape: [1, 2] }));
  return [first, JSON.stringify([...(await bn.runningMean!.data())])];
}

/** Entry of the spawned Workers. */
export async function main(
  rank: number,
  _worldSize: number,
  scenario: string,
  options: Record<string, unknown> = {},
): Promise<string[]> {
  switch (scenario) {
    case "stepAfterNoSync":
      return await stepAfterNoSync(rank, options.batches as number[]);
    case "hookWithoutJoin":
      return await hookWithoutJoin(rank);
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
}

// Under the tcp launcher: `deno run -A tests/fsdp_join_rest_review_ranks.ts OUT_PREFIX SCENARIO JSON`.
if (import.meta.main) await runAsLaunchedRank(main);
