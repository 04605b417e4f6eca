/**
 * Where the parallel features meet: DDP (2 cpu ranks, spawned Workers) with
 * utils.checkpoint, noSync accumulation with loss scaling, clipGradNorm_
 * and an lr scheduler, tied / frozen / mixed-dtype parameters and an int32
 * buffer, SyncBatchNorm with eval/train switching, and a save/load resume,
 * each against one process training on every rank's rows (the oracle).
 * @module
 */

import assert from "node:assert/strict";
import {
  arange,
  cat,
  data,
  distributed,
  manualSeed,
  nn,
  requestDevices,
  seededRandom,
  type Tensor,
  tensor,
} from "../mod.ts";
import { assertClose } from "./harness.ts";

const RANKS = new URL("./integration_parallel_ranks.ts", import.meta.url);
// Workers and shared memory outlive a test's own ops by design (terminated at its end).
const opts = { sanitizeOps: false, sanitizeResources: false };
type Params = Record<string, number[]>;

function assertSameParams(got: Params, want: Params, what: string, atol = 2e-6): void {
  assert.deepEqual(Object.keys(got), Object.keys(want), `${what}: the same keys`);
  for (const key of Object.keys(want)) {
    assertClose(got[key], want[key], { atol, rtol: 1e-5, what: `${what}: ${key}` });
  }
}

interface Trained {
  ddp: Params;
  oracle?: Params;
}

/** Both ranks end identical, and equal to the oracle rank 0 trained on all rows. */
function checkTrained<T extends Trained>(ranks: T[], what: string, atol?: number): T {
  const [r0, r1] = ranks;
  assert.deepEqual(r1.ddp, r0.ddp, `${what}: the ranks stay bit-identical`);
  assertSameParams(r0.ddp, r0.oracle!, what, atol);
  return r0;
}

for (const reentrant of [true, false]) {
  for (const segments of [false, true]) {
    Deno.test({
      name: `DDP + utils.${
        segments ? "checkpointSequential" : "checkpoint"
      } (useReentrant ${reentrant}, a parameter used inside and outside): one process's gradients`,
      ...opts,
      fn: async () => {
        const ranks = await distributed.spawn<
          Trained & { grads: number[][][]; oracleGrads?: number[][][] }
        >(RANKS, { nprocs: 2, args: ["checkpoint", { reentrant, segments }] });
        const r0 = checkTrained(ranks, "checkpoint");
        r0.grads.forEach((step, s) =>
          step.forEach((g, i) =>
            assertClose(g, r0.oracleGrads![s][i], {
              atol: 2e-6,
              rtol: 1e-5,
              what: `step ${s} parameter ${i}`,
            })
          )
        );
        assert.deepEqual(ranks[1].grads, r0.grads);
      },
    });
  }
}

Deno.test({
  name:
    "DDP staticGraph (PyTorch's static_graph) with a reentrant checkpoint trains as one process",
  ...opts,
  fn: async () => {
    const ranks = await distributed.spawn<Trained>(RANKS, {
      nprocs: 2,
      args: ["checkpoint", { reentrant: true, segments: true, staticGraph: true }],
    });
    checkTrained(ranks, "staticGraph");
  },
});

Deno.test({
  name:
    "DDP staticGraph (setStaticGraph): a parameter no rank uses is allowed and skipped; a changed graph or a late call is an error",
  ...opts,
  fn: async () => {
    const ranks = await distributed.spawn<
      Trained & { spareGrad: boolean; changed: string; late: string }
    >(RANKS, { nprocs: 2, args: ["staticUnused"] });
    // The spare layer is untouched by the optimizer (no gradient: weight decay skips it), as
    // in the single process that never uses it.
    checkTrained(ranks, "staticUnused");
    for (const r of ranks) {
      assert.equal(r.spareGrad, true);
      assert.match(r.changed, /staticGraph.*spare\.weight, spare\.bias got a gradient.*not static/);
      assert.match(r.late, /setStaticGraph: a backward pass already ran/);
    }
  },
});

Deno.test({
  name:
    "DDP + noSync accumulation + loss scaling + clipGradNorm_ + StepLR: one process on all micro-batches",
  ...opts,
  fn: async () => {
    const ranks = await distributed.spawn<Trained & { norms: number[]; oracleNorms?: number[] }>(
      RANKS,
      { nprocs: 2, args: ["accumulate"] },
    );
    const r0 = checkTrained(ranks, "accumulate");
    assertClose(r0.norms, r0.oracleNorms!, { rtol: 1e-5 });
    assert.deepEqual(ranks[1].norms, r0.norms, "each rank clips by the same (global) norm");
    assert.ok(r0.norms.every((n) => n > 0.05), "clipping was active");
  },
});

Deno.test({
  name:
    "DDP + a tied weight, a frozen layer, an int32 buffer, float32 and float64 parameters: one process",
  ...opts,
  fn: async () => {
    const ranks = await distributed.spawn<
      Trained & { countsBefore: number[][]; frozenGrad: boolean }
    >(RANKS, { nprocs: 2, args: ["mixed"] });
    // The last forward's increments are each rank's own (broadcast before the next forward).
    assert.deepEqual(ranks.map((r) => r.ddp.count), [[3, 3], [4, 3]]);
    for (const r of ranks) delete r.ddp.count;
    delete ranks[0].oracle!.count;
    const r0 = checkTrained(ranks, "mixed", 1e-5);
    // Rank 0 adds [1, 1] per training forward, rank 1 [2, 1]: rank 1 reads rank 0's counts,
    // broadcast before each forward, plus its own last increment.
    assert.deepEqual(r0.countsBefore, [[1, 1], [2, 2], [3, 3]]);
    assert.deepEqual(ranks[1].countsBefore, [[2, 1], [3, 2], [4, 3]]);
    for (const r of ranks) assert.equal(r.frozenGrad, true, "the frozen weight gets no gradient");
  },
});

for (const broadcastBuffers of [true, false]) {
  Deno.test({
    name:
      `DDP + SyncBatchNorm + eval/train switching (broadcastBuffers ${broadcastBuffers}): one process's BatchNorm on all rows`,
    ...opts,
    fn: async () => {
      const ranks = await distributed.spawn<
        Trained & { evals: number[][]; oracleEvals?: number[][] }
      >(RANKS, { nprocs: 2, args: ["syncBn", { broadcastBuffers }] });
      const r0 = checkTrained(ranks, "syncBn");
      assertClose(r0.evals.flat(), r0.oracleEvals!.flat(), { atol: 2e-6, rtol: 1e-5 });
      assert.deepEqual(ranks[1].evals, r0.evals);
    },
  });
}

Deno.test({
  name:
    "DDP stateDict + optimizer + scheduler + rng through save/load mid-training: resumed equals uninterrupted",
  ...opts,
  fn: async () => {
    const dir = await Deno.makeTempDir();
    try {
      const ranks = await distributed.spawn<
        { uninterrupted: Params; resumed: Params; lr: number[] }
      >(RANKS, { nprocs: 2, args: ["resume", { dir }] });
      for (const r of ranks) {
        assert.deepEqual(r.resumed, r.uninterrupted);
        assert.equal(r.lr[1], r.lr[0]);
      }
      assert.deepEqual(ranks[1].resumed, ranks[0].resumed);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

interface SamplerCase {
  n: number;
  replicas: number;
  seed: number;
  dropLast: boolean;
  shuffle: boolean;
  /** epochs[e][rank]: the indices PyTorch's DistributedSampler gives (through a DataLoader). */
  epochs: number[][][];
}

const FIXTURE = JSON.parse(
  await Deno.readTextFile(new URL("./fixtures/torch_integration_parallel.json", import.meta.url)),
) as { samplers: SamplerCase[] };

Deno.test({
  name:
    "DataLoader (numWorkers 2) + DistributedSampler per rank + setEpoch: PyTorch's indices on every rank",
  ...opts,
  fn: async () => {
    for (const c of FIXTURE.samplers) {
      const dataset = new data.TensorDataset(arange(0, c.n, 1, { dtype: "int32" }));
      for (let rank = 0; rank < c.replicas; rank++) {
        const sampler = new data.DistributedSampler(dataset, {
          numReplicas: c.replicas,
          rank,
          seed: c.seed,
          shuffle: c.shuffle,
          dropLast: c.dropLast,
        });
        // One loader (persistent workers) over the epochs: setEpoch reaches the workers' order.
        const loader = new data.DataLoader(dataset, {
          batchSize: 4,
          sampler,
          numWorkers: 2,
          persistentWorkers: true,
        });
        try {
          for (const [epoch, want] of c.epochs.entries()) {
            sampler.setEpoch(epoch);
            const got: number[] = [];
            for await (const [b] of loader) got.push(...(await b.data()));
            assert.deepEqual(
              got,
              want[rank],
              `n ${c.n} seed ${c.seed} epoch ${epoch} rank ${rank}`,
            );
          }
        } finally {
          await loader.shutdown();
        }
      }
    }
  },
});

Deno.test({
  name:
    "DataParallel over 3 cpu devices with BatchNorm + Dropout: per-chunk statistics and masks, summed gradients, replica 0's running stats",
  ...opts,
  fn: async () => {
    const cpus = await requestDevices({ backend: "cpu", count: 3 });
    const make = () => {
      manualSeed(21);
      return new nn.Sequential(
        new nn.Linear(4, 6),
        new nn.BatchNorm1d(6),
        new nn.ReLU(),
        new nn.Dropout(0.4),
        new nn.Linear(6, 2),
      ).to(cpus[0]);
    };
    const random = seededRandom(8);
    const x = Array.from({ length: 8 }, () => Array.from({ length: 4 }, () => random() * 4 - 2));
    const model = make();
    const dp = new nn.DataParallel(model, { devices: cpus });
    manualSeed(99);
    const out = dp.forward(tensor(x)) as Tensor;
    out.mul(out).sum().backward();

    // The oracle: the module on each chunk (PyTorch's sizes 3, 3, 2) in device order, drawing
    // the masks in that order; only the first chunk's forward updates the running statistics.
    const oracle = make();
    const copy = make();
    manualSeed(99);
    const outs = [x.slice(0, 3), x.slice(3, 6), x.slice(6)].map((chunk, i) =>
      (i === 0 ? oracle : copy).forward(tensor(chunk)) as Tensor
    );
    const y = cat(outs, 0);
    y.mul(y).sum().backward();
    assertClose(await out.data(), await y.data(), { atol: 1e-6, what: "outputs" });
    const oracleGrads = new Map(oracle.namedParameters());
    const copyGrads = new Map(copy.namedParameters());
    for (const [name, p] of model.namedParameters()) {
      const want = oracleGrads.get(name)!.grad!.add(copyGrads.get(name)!.grad!);
      assertClose(await p.grad!.data(), await want.data(), { atol: 1e-5, what: name });
    }
    for (const [name, b] of oracle.namedBuffers()) {
      const got = model.namedBuffers().find(([n]) => n === name)![1];
      assert.deepEqual([...(await got.data())], [...(await b.data())], name);
    }
  },
});
