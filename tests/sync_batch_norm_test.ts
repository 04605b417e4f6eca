/**
 * nn.SyncBatchNorm: N ranks normalize as one BatchNorm on all their rows
 * (outputs, input gradients, summed weight gradients, running statistics),
 * with unequal and empty batches, a sub-group, DDP training equal to one
 * process on the whole batch (Workers and mpiexec), and what it is without
 * a process group; convertSyncBatchnorm.
 * @module
 */

import assert from "node:assert/strict";
import { distributed, nn, optim, type Tensor, tensor, tidy } from "../mod.ts";
import { assertClose, BACKENDS } from "./harness.ts";
import { MPICH_MPIEXEC, mpiRun } from "./mpiexec.ts";
import {
  CHANNELS,
  type CreateGraphResult,
  directData,
  type DirectOptions,
  type DirectResult,
  firstRow,
  makeBnModel,
  runDirect,
  trainData,
  type TrainOptions,
  type TrainResult,
} from "./sync_batch_norm_ranks.ts";

const RANKS = new URL("./sync_batch_norm_ranks.ts", import.meta.url);
// Workers and shared memory outlive a test's own ops by design (terminated at its end).
const opts = { sanitizeOps: false, sanitizeResources: false };
const CLOSE = { atol: 2e-5, rtol: 2e-4 };

/** One process's BatchNorm over the rows of `ranks` (all of them): what the direct scenario does. */
async function directReference(o: DirectOptions, ranks: number[]): Promise<DirectResult> {
  const all = directData(o.rows.reduce((a, b) => a + b, 0), o.inner);
  const pick = (values: number[]) =>
    ranks.flatMap((r) => {
      const start = firstRow(o.rows, r) * all.rowSize;
      return values.slice(start, start + o.rows[r] * all.rowSize);
    });
  const rows = ranks.reduce((n, r) => n + o.rows[r], 0);
  const shape = [rows, CHANNELS, ...o.inner];
  const options = { momentum: o.momentum, affine: o.affine ?? true };
  const layer = o.inner.length === 2
    ? new nn.BatchNorm2d(CHANNELS, options)
    : new nn.BatchNorm1d(CHANNELS, options);
  return await runDirect(
    layer,
    tensor(pick(all.x)).reshape(shape),
    tensor(pick(all.coef)).reshape(shape),
  );
}

/** Checks the ranks `members` of a direct run against one BatchNorm over their rows. */
async function checkDirect(o: DirectOptions, results: DirectResult[], members: number[]) {
  const expected = await directReference(o, members);
  const rowSize = expected.y.length / members.reduce((n, r) => n + o.rows[r], 0);
  let at = 0;
  const summed = (key: "weightGrad" | "biasGrad") =>
    members.reduce<number[] | null>((sum, r) => {
      const g = results[r][key];
      if (!g) return null;
      return sum ? sum.map((v, i) => v + g[i]) : [...g];
    }, members.length ? [0, 0, 0] : null);
  for (const r of members) {
    const n = o.rows[r] * rowSize;
    const what = `rank ${r} of ${JSON.stringify(o)}`;
    assertClose(results[r].y, expected.y.slice(at, at + n), { ...CLOSE, what: `${what}: y` });
    assertClose(results[r].xGrad, expected.xGrad.slice(at, at + n), {
      ...CLOSE,
      what: `${what}: x.grad`,
    });
    assertClose(results[r].runningMean, expected.runningMean, { ...CLOSE, what: `${what}: mean` });
    assertClose(results[r].runningVar, expected.runningVar, { ...CLOSE, what: `${what}: var` });
    assert.equal(results[r].tracked, 2);
    // Every rank computes the statistics from the same gathered values.
    assert.deepEqual(results[r].runningMean, results[members[0]].runningMean, "bit-identical");
    assert.deepEqual(results[r].runningVar, results[members[0]].runningVar, "bit-identical");
    at += n;
  }
  // Each rank holds its own share of the affine gradients; their sum is the whole batch's.
  if (expected.weightGrad) {
    assertClose(summed("weightGrad")!, expected.weightGrad, { ...CLOSE, what: "Σ weight.grad" });
    assertClose(summed("biasGrad")!, expected.biasGrad!, { ...CLOSE, what: "Σ bias.grad" });
  } else {
    assert.equal(summed("weightGrad"), null);
  }
}

for (const backend of ["cpu", ...(BACKENDS.has("webgpu") ? ["webgpu"] : [])]) {
  Deno.test({
    name:
      `SyncBatchNorm: 3 ranks normalize as one BatchNorm on all rows (unequal and empty batches, 3D and 4D, cumulative momentum, no affine) [${backend}]`,
    ...opts,
    fn: async () => {
      const cases: DirectOptions[] = [
        { backend, rows: [2, 3, 4], inner: [4] },
        { backend, rows: [1, 1, 1], inner: [2, 3], momentum: null },
        { backend, rows: [3, 0, 2], inner: [5], affine: false },
      ];
      for (const o of cases) {
        const results = await distributed.spawn<DirectResult>(RANKS, {
          nprocs: 3,
          args: ["direct", o],
        });
        await checkDirect(o, results, [0, 1, 2]);
      }
    },
  });
}

for (const backend of ["cpu", ...(BACKENDS.has("webgpu") ? ["webgpu"] : [])]) {
  Deno.test({
    name:
      `SyncBatchNorm under createGraph: the plain first-order gradients; a second derivative throws [${backend}]`,
    ...opts,
    fn: async () => {
      const results = await distributed.spawn<CreateGraphResult>(RANKS, {
        nprocs: 2,
        args: ["createGraph", { backend }],
      });
      const error = "syncBatchNorm's backward is not differentiable (createGraph)";
      for (const r of results) assert.deepEqual(r, { same: true, recorded: true, error });
    },
  });
}

Deno.test({
  name: "SyncBatchNorm: processGroup synchronises its ranks only; a rank outside it is an error",
  ...opts,
  fn: async () => {
    const o: DirectOptions = { backend: "cpu", rows: [2, 3, 4], inner: [4], group: [0, 2] };
    const results = await distributed.spawn<DirectResult>(RANKS, {
      nprocs: 3,
      args: ["direct", o],
    });
    await checkDirect(o, results, [0, 2]);
    // Rank 1 ran a plain BatchNorm on its own rows.
    await checkDirect(o, results, [1]);
    const outside = await distributed.spawn<string>(RANKS, {
      nprocs: 3,
      args: ["outsideGroup", {}],
    });
    assert.deepEqual([outside[0], outside[2]], ["member", "member"]);
    assert.match(
      outside[1],
      /SyncBatchNorm: rank 1 is not a member of the group of ranks \[0, 2\]/,
    );
  },
});

/** One process training the unconverted model on every rank's rows at once. */
async function trainReference(worldSize: number, o: TrainOptions): Promise<TrainResult> {
  const model = makeBnModel(100);
  const optimizer = new optim.SGD(model.parameters(), { lr: 0.1, momentum: 0.9 });
  const lossFn = new nn.CrossEntropyLoss();
  const rows = worldSize * o.batch;
  const data = trainData(o.steps * rows);
  for (let step = 0; step < o.steps; step++) {
    tidy(() => {
      optimizer.zeroGrad();
      const x = tensor(data.x.slice(step * rows, (step + 1) * rows));
      const y = tensor(data.y.slice(step * rows, (step + 1) * rows), { dtype: "int32" });
      lossFn.forward(model.forward(x) as Tensor, y).backward();
      optimizer.step();
    });
  }
  const out: TrainResult = {};
  for (const [key, t] of Object.entries(model.stateDict())) out[key] = [...await t.data()];
  return out;
}

function checkTrained(ranks: TrainResult[], expected: TrainResult, what: string): void {
  for (const r of ranks.slice(1)) assert.deepEqual(r, ranks[0], `${what}: ranks bit-identical`);
  assert.deepEqual(Object.keys(ranks[0]), Object.keys(expected), `${what}: state-dict keys`);
  for (const key of Object.keys(expected)) {
    assertClose(ranks[0][key], expected[key], { ...CLOSE, what: `${what}: ${key}` });
  }
  // Not vacuous: the running statistics moved away from their start.
  assert.notDeepEqual(expected["1.running_mean"], new Array(8).fill(0));
}

for (const backend of ["cpu", ...(BACKENDS.has("webgpu") ? ["webgpu"] : [])]) {
  Deno.test({
    name:
      `SyncBatchNorm + DDP: 2 ranks x b train as one process with BatchNorm on 2b rows [${backend}]`,
    ...opts,
    fn: async () => {
      const o: TrainOptions = { backend, steps: 4, batch: 6 };
      const ranks = await distributed.spawn<TrainResult>(RANKS, { nprocs: 2, args: ["train", o] });
      const expected = await trainReference(2, o);
      checkTrained(ranks, expected, backend);
      // Plain BatchNorm per rank would normalize over 6 rows, not 12: a different model.
      const perRank = await trainReference(1, { ...o, batch: 6 });
      assert.notDeepEqual(perRank["1.running_mean"], expected["1.running_mean"]);
    },
  });
}

Deno.test({
  name: "SyncBatchNorm + DDP under mpiexec -n 2 trains as one process on the whole batch",
  ignore: !MPICH_MPIEXEC,
  ...opts,
  fn: async () => {
    const o: TrainOptions = { backend: "cpu", steps: 3, batch: 5 };
    const run = await mpiRun<TrainResult>(RANKS, 2, "train", { ...o });
    assert.equal(run.code, 0, run.output);
    run.results.forEach((r, rank) => assert.ok(r, `rank ${rank} wrote no result: ${run.output}`));
    checkTrained(run.results as TrainResult[], await trainReference(2, o), "mpi");
  },
});

Deno.test("SyncBatchNorm without a process group, or in eval mode, is a plain BatchNorm", async () => {
  const x = tensor([[[1, 5], [2, -1]], [[0, 3], [4, 4]], [[2, 2], [-3, 1]]]);
  const sync = new nn.SyncBatchNorm(2, { momentum: 0.3 });
  const plain = new nn.BatchNorm1d(2, { momentum: 0.3 });
  for (const train of [true, false]) {
    sync.train(train);
    plain.train(train);
    assert.deepEqual(await sync.forward(x).toArray(), await plain.forward(x).toArray());
  }
  assert.deepEqual(await sync.runningVar!.toArray(), await plain.runningVar!.toArray());
  assert.equal(
    sync.toString(),
    "SyncBatchNorm(2, eps=1e-05, momentum=0.3, affine=True, track_running_stats=True)",
  );
  // Any input of at least 2 dims, as PyTorch's SyncBatchNorm.
  assert.deepEqual(sync.train().forward(tensor([[1, 2], [3, 5]])).shape, [2, 2]);
  assert.throws(
    () => sync.forward(tensor([1, 2])),
    /at least 2 dims \[N, C, \.\.\.\], got shape \[2\]/,
  );
  assert.throws(
    () => sync.forward(tensor([[1, 2, 3], [3, 5, 6]])),
    /has 3 channels \(dim 1\), expected 2/,
  );
});

Deno.test("SyncBatchNorm.convertSyncBatchnorm swaps every BatchNorm, keeping its tensors and mode", () => {
  class Net extends nn.Module {
    body = new nn.Sequential(new nn.Linear(3, 4), new nn.BatchNorm1d(4, { momentum: null }));
    head = new nn.ModuleDict({ norm: new nn.BatchNorm2d(4, { eps: 1e-3, affine: false }) });
    alias: nn.Module;
    constructor() {
      super();
      this.alias = this.body.at(1);
    }
  }
  const net = new Net();
  const bn = net.body.at(1) as nn.BatchNorm1d;
  bn.eval();
  const keys = Object.keys(net.stateDict());
  const tensors = Object.values(net.stateDict());
  const converted: Net = nn.SyncBatchNorm.convertSyncBatchnorm(net);
  assert.equal(converted, net, "a container is converted in place and returned");
  const sync = net.body.at(1);
  assert.ok(sync instanceof nn.SyncBatchNorm);
  assert.equal(net.alias, sync, "one layer under two names becomes one SyncBatchNorm");
  assert.equal(sync.momentum, null);
  assert.equal(sync.training, false, "the mode is kept");
  assert.equal(
    sync.weight,
    bn.weight,
    "the same Parameter: an optimizer made before still holds it",
  );
  assert.equal(sync.runningMean, bn.runningMean);
  const norm = net.head.get("norm") as nn.SyncBatchNorm;
  assert.ok(norm instanceof nn.SyncBatchNorm);
  assert.equal(norm.eps, 1e-3);
  assert.equal(norm.affine, false);
  assert.equal(norm.weight, null);
  assert.deepEqual(Object.keys(net.stateDict()), keys, "state-dict keys unchanged");
  assert.deepEqual(Object.values(net.stateDict()), tensors, "the same tensors");
  // A BatchNorm itself is returned converted; anything else as it is.
  const lone: nn.SyncBatchNorm = nn.SyncBatchNorm.convertSyncBatchnorm(new nn.BatchNorm1d(3));
  assert.ok(lone instanceof nn.SyncBatchNorm);
  // A SyncBatchNorm is remade over the group given, as in PyTorch.
  const group = new distributed.DistributedGroup([0], 0);
  const regrouped = nn.SyncBatchNorm.convertSyncBatchnorm(lone, group);
  assert.equal(regrouped.processGroup, group);
  assert.equal(regrouped.weight, lone.weight);
  const linear = new nn.Linear(2, 2);
  assert.equal(nn.SyncBatchNorm.convertSyncBatchnorm(linear), linear);
  assert.throws(
    () => nn.SyncBatchNorm.convertSyncBatchnorm(null as unknown as nn.Module),
    /convertSyncBatchnorm: expected an nn\.Module, got null/,
  );
});
