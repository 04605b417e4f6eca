/**
 * FSDP review cases: FULL_SHARD's reuse of the parameters a forward
 * released must not depend on when a rank's device queue runs (a rank that
 * reads its loss between forward and backward, as a logging rank 0 does,
 * called a different number of collectives than the others: a collective
 * mismatch), and two forwards before one backward train as one process.
 * @module
 */

import assert from "node:assert/strict";
import { distributed, nn, optim, requestDevices, type Tensor, tensor } from "../mod.ts";
import { makeData } from "./distributed_ranks.ts";
import { makeNet } from "./fsdp_ranks.ts";
import type { AwaitMode, PlainTensor, SavedPlain, Trained } from "./fsdp_review_ranks.ts";

const RANKS = new URL("./fsdp_review_ranks.ts", import.meta.url);
const opts = { sanitizeOps: false, sanitizeResources: false };

/**
 * The plain net after `steps` Adam steps on the 12 rows of each step (as
 * halves for twoForwards), and its state dicts after the first 2 steps.
 */
async function reference(
  halves: boolean,
  steps = 2,
): Promise<{ trained: Trained; saved: SavedPlain }> {
  const [device] = await requestDevices({ backend: "cpu" });
  const model = makeNet(7).to(device);
  const opt = new optim.Adam(model.parameters(), { lr: 0.01 });
  const lossFn = new nn.CrossEntropyLoss();
  const all = makeData(48);
  const rows = (from: number, n: number) =>
    lossFn.forward(
      model.forward(tensor(all.x.slice(from, from + n), { device })) as Tensor,
      tensor(all.y.slice(from, from + n), { dtype: "int32", device }),
    );
  const plainOf = async (t: Tensor): Promise<PlainTensor> => ({
    shape: [...t.shape],
    values: [...(await t.data())],
  });
  const saved: SavedPlain = { model: {}, state: {}, paramGroups: [] };
  for (let s = 0; s < steps; s++) {
    if (s === 2) {
      for (const [k, t] of Object.entries(model.stateDict())) saved.model[k] = await plainOf(t);
      const osd = opt.stateDict();
      for (const [i, entry] of Object.entries(osd.state)) {
        saved.state[i] = {};
        for (const [k, v] of Object.entries(entry)) {
          saved.state[i][k] = typeof v === "number" ? v : await plainOf(v as Tensor);
        }
      }
      saved.paramGroups = osd.param_groups.map((g) => ({ ...g, params: [...g.params] }));
    }
    opt.zeroGrad();
    (halves ? rows(s * 12, 6).add(rows(s * 12 + 6, 6)) : rows(s * 12, 12)).backward();
    opt.step();
  }
  const trained: Trained = {};
  for (const [k, t] of Object.entries(model.stateDict())) trained[k] = [...(await t.data())];
  return { trained, saved };
}

function assertTrained(got: Trained, want: Trained, what: string): void {
  assert.deepEqual(Object.keys(got).sort(), Object.keys(want).sort(), what);
  for (const [k, w] of Object.entries(want)) {
    const worst = Math.max(...w.map((v, i) => Math.abs(v - got[k][i]) / (1 + Math.abs(v))));
    assert.ok(worst <= 2e-5, `${what}: ${k} differs by ${worst}`);
  }
}

for (const mode of ["loss", "sleep", "eval", "twoForwards"] as AwaitMode[]) {
  Deno.test({
    name: `FSDP FULL_SHARD on 2 ranks trains as one process when ${
      mode === "twoForwards"
        ? "two forwards share one backward"
        : mode === "eval"
        ? "rank 0 alone reads no-grad forwards' results"
        : `rank 0 alone ${mode === "loss" ? "awaits loss.item()" : "sleeps"} before backward`
    }`,
    ...opts,
    fn: async () => {
      const [ranks, want] = await Promise.all([
        distributed.spawn<Trained>(RANKS, { nprocs: 2, args: [mode] }),
        reference(mode === "twoForwards"),
      ]);
      ranks.forEach((got, r) => assertTrained(got, want.trained, `${mode}, rank ${r}`));
    },
  });
}

Deno.test({
  name:
    "FSDP shardFullOptimStateDict: a plain module's Adam state saved by one process trains on at 3 ranks as that process",
  ...opts,
  fn: async () => {
    const want = await reference(false, 4);
    const ranks = await distributed.spawn<Trained>(RANKS, {
      nprocs: 3,
      args: ["none", want.saved],
    });
    ranks.forEach((got, r) => assertTrained(got, want.trained, `resumed, rank ${r}`));
  },
});
