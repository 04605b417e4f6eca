/**
 * What the ranks of tests/fsdp_review_test.ts run (spawned as Workers):
 * FULL_SHARD training where the ranks let their event loops run at
 * different points between forward and backward (rank 0 reads the loss,
 * as a logging rank does), which must not change the collectives a rank
 * calls, and two forwards before one backward.
 * @module
 */

import { distributed, nn, noGrad, optim, requestDevices, type Tensor, tensor } from "../mod.ts";
import type { OptimizerStateDict } from "../src/optim/optimizer.ts";
import { makeData } from "./distributed_ranks.ts";
import { Block, makeNet } from "./fsdp_ranks.ts";

const { FullyShardedDataParallel: FSDP } = distributed.fsdp;

/** How the ranks differ: nothing, rank 0 awaits the loss, or rank 0 sleeps, before backward. */
export type AwaitMode = "none" | "loss" | "sleep" | "eval" | "twoForwards";

/** A tensor as plain values. */
export interface PlainTensor {
  shape: number[];
  values: number[];
}

/** A plain module's state dict and its Adam's state dict, saved by one process. */
export interface SavedPlain {
  model: Record<string, PlainTensor>;
  state: Record<string, Record<string, PlainTensor | number>>;
  paramGroups: OptimizerStateDict["param_groups"];
}

/** The state dict's values after 2 steps of Adam (global batch 12). */
export type Trained = Record<string, number[]>;

/**
 * Two FULL_SHARD Adam steps of the nested-unit net on `rank`'s rows; `mode`
 * says what differs. With `saved`: a net of other weights loads the plain
 * module's and optimizer's state dicts (`shardFullOptimStateDict`) first,
 * and trains on steps 2 and 3.
 */
export async function main(
  rank: number,
  worldSize: number,
  mode: AwaitMode,
  saved?: SavedPlain,
): Promise<Trained> {
  const [device] = await requestDevices({ backend: "cpu" });
  const fsdp = new FSDP(makeNet(saved ? 11 : 7).to(device), {
    shardingStrategy: "FULL_SHARD",
    autoWrapPolicy: distributed.fsdp.ModuleWrapPolicy(new Set([Block])),
  });
  const opt = new optim.Adam(fsdp.parameters(), { lr: 0.01 });
  const first = saved ? 2 : 0;
  if (saved) {
    const made = (t: PlainTensor) => tensor(t.values, { device }).reshape(t.shape);
    fsdp.loadStateDict(
      Object.fromEntries(Object.entries(saved.model).map(([k, t]) => [k, made(t)])),
    );
    const state = Object.fromEntries(
      Object.entries(saved.state).map(([i, entry]) => [
        i,
        Object.fromEntries(
          Object.entries(entry).map(([k, v]) => [k, typeof v === "number" ? v : made(v)]),
        ),
      ]),
    );
    opt.loadStateDict(
      FSDP.shardFullOptimStateDict({ state, param_groups: saved.paramGroups }, fsdp),
    );
  }
  const lossFn = new nn.CrossEntropyLoss();
  const all = makeData(48);
  const b = 12 / worldSize;
  const rows = (from: number, n: number) => ({
    x: tensor(all.x.slice(from, from + n), { device }),
    y: tensor(all.y.slice(from, from + n), { dtype: "int32", device }),
  });
  for (let s = first; s < first + 2; s++) {
    opt.zeroGrad();
    if (mode === "twoForwards") {
      // Two halves of the rank's rows, one graph, one backward.
      const h = b / 2;
      const a = rows(s * 12 + rank * h, h);
      const c = rows(s * 12 + 6 + rank * h, h);
      const loss = lossFn.forward(fsdp.forward(a.x) as Tensor, a.y)
        .add(lossFn.forward(fsdp.forward(c.x) as Tensor, c.y));
      loss.backward();
    } else {
      const { x, y } = rows(s * 12 + rank * b, b);
      if (mode === "eval") {
        // Forwards without gradients, rank 0 reading each result in between.
        for (let k = 0; k < 2; k++) {
          const out = noGrad(() => fsdp.forward(x) as Tensor);
          if (rank === 0) await out.sum().item();
        }
      }
      const loss = lossFn.forward(fsdp.forward(x) as Tensor, y);
      if (mode === "loss" && rank === 0) await loss.item();
      if (mode === "sleep" && rank === 0) await new Promise((r) => setTimeout(r, 200));
      loss.backward();
    }
    opt.step();
  }
  const out: Trained = {};
  for (const [k, t] of Object.entries(fsdp.stateDict())) out[k] = [...(await t.data())];
  return out;
}
