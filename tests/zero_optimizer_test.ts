/**
 * `distributed.optim.ZeroRedundancyOptimizer`: PyTorch 1.13's partition
 * (fixture tests/fixtures/torch_zero_partition.json), equivalence of DDP +
 * ZeRO over 2 and 3 cpu ranks with one process and the plain optimizer,
 * sharded state, consolidated state dicts (equal to a plain optimizer's,
 * and resumable at another world size), mpiexec, and the errors.
 * @module
 */

import assert from "node:assert/strict";
import {
  distributed,
  nn,
  optim,
  requestDevices,
  type Tensor,
  tensor,
  tidy,
  zeros,
} from "../mod.ts";
import { makeData, makeModel, parameterValues } from "./distributed_ranks.ts";
import {
  fromPlain,
  optimizerOf,
  type PlainStateDict,
  toPlain,
  type ZeroTrained,
  type ZeroTrainOptions,
} from "./zero_optimizer_ranks.ts";
import { MPICH_MPIEXEC, mpiRun } from "./mpiexec.ts";
import { BACKENDS } from "./harness.ts";

const RANKS = new URL("./zero_optimizer_ranks.ts", import.meta.url);
// Workers and shared memory outlive a test's own ops by design (terminated at its end).
const opts = { sanitizeOps: false, sanitizeResources: false };

interface PartitionCase {
  name: string;
  groups: number[][];
  worldSize: number;
  owner: number[];
  perRank: number[][][];
}
const FIXTURE = JSON.parse(
  await Deno.readTextFile(new URL("./fixtures/torch_zero_partition.json", import.meta.url)),
) as { cases: PartitionCase[] };

Deno.test("partitionParameters matches PyTorch 1.13's _partition_parameters", () => {
  assert.ok(FIXTURE.cases.length >= 15);
  for (const c of FIXTURE.cases) {
    const groups = c.groups.map((g) => g.map((n) => zeros([n])));
    const flat = groups.flat();
    const got = distributed.optim.partitionParameters(groups, c.worldSize)
      .map((rankGroups) => rankGroups.map((g) => g.map((p) => flat.indexOf(p))));
    assert.deepEqual(got, c.perRank, `${c.name}, world ${c.worldSize}`);
  }
});

Deno.test({
  name: "ZeroRedundancyOptimizer owns parameters as PyTorch does, addParamGroup included (3 ranks)",
  ...opts,
  fn: async () => {
    for (const name of ["two groups", "odd", "fewer params than ranks"]) {
      const c = FIXTURE.cases.find((k) => k.name === name && k.worldSize === 3)!;
      const ranks = await distributed.spawn<{ owner: number[]; perRank: number[][][] }>(RANKS, {
        nprocs: 3,
        args: ["partition", { groups: c.groups }],
      });
      for (const r of ranks) {
        assert.deepEqual(r.owner, c.owner, name);
        assert.deepEqual(r.perRank, c.perRank, name);
      }
    }
  },
});

/**
 * One process, the plain optimizer, the whole batch: parameters after every
 * step; `snapshot` is called after step `snapshotAfter` (1-based).
 */
async function reference(
  o: ZeroTrainOptions,
  snapshotAfter = 0,
  snapshot?: (opt: optim.Optimizer<object>) => Promise<void>,
): Promise<number[][][]> {
  const model = makeModel(1);
  const { optimizerClass, options } = optimizerOf(o.optimizer);
  const params = model.parameters();
  const opt = new (optimizerClass as distributed.optim.OptimizerClass<object, object>)(
    [{ params }],
    options,
  );
  const lossFn = new nn.CrossEntropyLoss();
  const rows = o.globalBatch;
  const all = makeData(o.steps * rows);
  const history: number[][][] = [];
  for (let s = 0; s < o.steps; s++) {
    const x = tensor(all.x.slice(s * rows, (s + 1) * rows));
    const y = tensor(all.y.slice(s * rows, (s + 1) * rows), { dtype: "int32" });
    tidy(() => {
      opt.zeroGrad();
      lossFn.forward(model.forward(x) as Tensor, y).backward();
      opt.step();
    });
    history.push(await parameterValues(model));
    if (s + 1 === snapshotAfter) await snapshot?.(opt);
  }
  return history;
}

function close(got: number[][], want: number[][], what: string): void {
  got.forEach((values, i) =>
    values.forEach((v, j) => {
      const e = want[i][j];
      assert.ok(
        Math.abs(v - e) <= 1e-5 + 1e-4 * Math.abs(e),
        `${what}: parameter ${i}[${j}]: ZeRO ${v}, one process ${e}`,
      );
    })
  );
}

/** Ranks bit-identical after every step, and within float32 rounding of `expected`. */
function checkRun(ranks: ZeroTrained[], expected: number[][][], label: string): void {
  for (const r of ranks.slice(1)) {
    assert.deepEqual(
      r.params,
      ranks[0].params,
      `${label}: all ranks hold bit-identical parameters`,
    );
  }
  assert.equal(ranks[0].params.length, expected.length);
  ranks[0].params.forEach((step, s) => close(step, expected[s], `${label} step ${s + 1}`));
  // Every parameter has exactly one owner.
  const owned = ranks.flatMap((r) => r.owned).sort((a, b) => a - b);
  assert.deepEqual(owned, [0, 1, 2, 3], `${label}: owners`);
}

// makeModel: Linear(6, 16) then Linear(16, 3): numels 96, 16, 48, 3.
const NUMELS = [96, 16, 48, 3];

for (const worldSize of [2, 3]) {
  for (const optimizer of ["adam", "sgd"] as const) {
    Deno.test({
      name:
        `ZeroRedundancyOptimizer(${optimizer}) + DDP over ${worldSize} cpu ranks ends every step like one process`,
      ...opts,
      fn: async () => {
        const o: ZeroTrainOptions = { optimizer, steps: 4, globalBatch: 12 };
        const ranks = await distributed.spawn<ZeroTrained>(RANKS, {
          nprocs: worldSize,
          args: ["train", { ...o, parametersAsBucketView: worldSize === 3 }],
        });
        checkRun(ranks, await reference(o), `${optimizer}, ${worldSize} ranks`);
        // Each rank holds state only for what it owns (Adam: 2 tensors each; SGD: 1).
        const perParam = optimizer === "adam" ? 2 : 1;
        const owners = FIXTURE.cases.find((c) => c.name === "mlp" && c.worldSize === worldSize)!;
        ranks.forEach((r, rank) => {
          const mine = owners.owner.flatMap((q, i) => (q === rank ? [i] : []));
          assert.deepEqual(r.owned, mine, `rank ${rank} owns as in PyTorch`);
          assert.equal(r.stateTensors, perParam * mine.length, `rank ${rank}: state tensors`);
          const elements = mine.reduce((n, i) => n + NUMELS[i], 0);
          assert.equal(r.stateElements, perParam * elements, `rank ${rank}: state elements`);
        });
      },
    });
  }
}

Deno.test({
  name:
    "ZeroRedundancyOptimizer(Adagrad, whose state is made at construction) keeps only owned state, consolidates like a plain Adagrad",
  ...opts,
  fn: async () => {
    const o: ZeroTrainOptions = {
      optimizer: "adagrad",
      steps: 3,
      globalBatch: 12,
      consolidateTo: 1,
    };
    const ranks = await distributed.spawn<ZeroTrained>(RANKS, { nprocs: 3, args: ["train", o] });
    let plain: PlainStateDict | null = null;
    const expected = await reference(o, 3, async (opt) => {
      plain = await toPlain(opt.stateDict());
    });
    checkRun(ranks, expected, "adagrad, 3 ranks");
    const owners = FIXTURE.cases.find((c) => c.name === "mlp" && c.worldSize === 3)!;
    ranks.forEach((r, rank) => {
      const mine = owners.owner.flatMap((q, i) => (q === rank ? [i] : []));
      assert.equal(r.stateTensors, mine.length, `rank ${rank}: state tensors`);
    });
    checkStateDict(ranks[1].consolidated!, plain!);
  },
});

Deno.test({
  name: "ZeroRedundancyOptimizer(adam) + DDP over 2 webgpu ranks ends every step like one process",
  ignore: !BACKENDS.has("webgpu"),
  ...opts,
  fn: async () => {
    const o: ZeroTrainOptions = { optimizer: "adam", steps: 3, globalBatch: 12, consolidateTo: 0 };
    const ranks = await distributed.spawn<ZeroTrained>(RANKS, {
      nprocs: 2,
      args: ["train", { ...o, backend: "webgpu" }],
    });
    let plain: PlainStateDict | null = null;
    const expected = await reference(o, 3, async (opt) => {
      plain = await toPlain(opt.stateDict());
    });
    checkRun(ranks, expected, "webgpu, 2 ranks");
    checkStateDict(ranks[0].consolidated!, plain!);
  },
});

/** Checks a consolidated state dict against a plain optimizer's (`want`). */
function checkStateDict(got: PlainStateDict, want: PlainStateDict): void {
  assert.deepEqual(got.param_groups, want.param_groups);
  assert.deepEqual(Object.keys(got.state), Object.keys(want.state));
  for (const [i, entry] of Object.entries(want.state)) {
    const mine = got.state[Number(i)];
    assert.deepEqual(Object.keys(mine), Object.keys(entry), `state ${i} keys`);
    for (const [k, v] of Object.entries(entry)) {
      if (typeof v === "number") assert.equal(mine[k], v, `state ${i}.${k}`);
      else close([mine[k] as number[]], [v], `state ${i}.${k}`);
    }
  }
}

Deno.test({
  name:
    "ZeroRedundancyOptimizer: consolidateStateDict + stateDict equal a plain Adam's, and resume over another world size",
  ...opts,
  fn: async () => {
    // 2 ranks, 3 steps, consolidated on rank 1.
    const first: ZeroTrainOptions = {
      optimizer: "adam",
      steps: 3,
      globalBatch: 12,
      consolidateTo: 1,
    };
    const two = await distributed.spawn<ZeroTrained>(RANKS, { nprocs: 2, args: ["train", first] });
    let plain: PlainStateDict | null = null;
    let plainOpt: optim.Optimizer<object> | null = null;
    const full: ZeroTrainOptions = { optimizer: "adam", steps: 5, globalBatch: 12 };
    const expected = await reference(full, 3, async (opt) => {
      plainOpt = opt;
      plain = await toPlain(opt.stateDict());
    });
    assert.ok(plain && plainOpt);
    checkRun(two, expected.slice(0, 3), "2 ranks before the checkpoint");
    assert.equal(two[0].consolidated, null);
    assert.equal(
      two[0].notConsolidated,
      "Optimizer state has not been consolidated on this rank. Please call `consolidateStateDict(0)` on all ranks beforehand if you meant to save the global state.",
    );
    const saved = two[1].consolidated!;
    assert.ok(saved);
    checkStateDict(saved, plain);
    assert.deepEqual(Object.keys(saved.state[0]), ["step", "exp_avg", "exp_avg_sq"]);
    assert.equal(saved.state[0].step, 3);

    // The checkpoint loads into a plain Adam...
    const model = makeModel(1);
    const params = model.parameters();
    const fresh = new optim.Adam(params, { lr: 0.01 });
    fresh.loadStateDict(fromPlain(saved, params));
    checkStateDict(await toPlain(fresh.stateDict()), plain);

    // ...and into ZeRO over 3 ranks, which continues like the one process.
    const resumed = await distributed.spawn<ZeroTrained>(RANKS, {
      nprocs: 3,
      args: ["train", {
        optimizer: "adam",
        steps: 2,
        globalBatch: 12,
        firstStep: 3,
        resume: { params: two[0].params[2], state: saved },
      }],
    });
    for (const r of resumed.slice(1)) assert.deepEqual(r.params, resumed[0].params);
    resumed[0].params.forEach((step, s) => close(step, expected[3 + s], `resumed step ${4 + s}`));
    // After loading, each of the 3 ranks holds only its own shard.
    const owners = FIXTURE.cases.find((c) => c.name === "mlp" && c.worldSize === 3)!;
    resumed.forEach((r, rank) => {
      const mine = owners.owner.flatMap((q, i) => (q === rank ? [i] : []));
      assert.equal(r.stateTensors, 2 * mine.length);
    });
  },
});

Deno.test({
  name: "ZeroRedundancyOptimizer: ranks passing different parameters fail naming each rank's",
  ...opts,
  fn: async () => {
    const messages = await distributed.spawn<string>(RANKS, { nprocs: 2, args: ["mismatch"] });
    for (const m of messages) {
      assert.match(
        m,
        /ZeroRedundancyOptimizer: every rank must pass the same parameters.*rank 0 has 2 parameters in 1 group \(7 elements\), rank 1 has 1 parameter in 1 group \(4 elements\)/,
      );
    }
  },
});

Deno.test("ZeroRedundancyOptimizer: argument errors", async () => {
  const [cpu0, cpu1] = await requestDevices({ backend: "cpu", count: 2 });
  const a = zeros([2], { requiresGrad: true, device: cpu0 });
  const b = zeros([3], { requiresGrad: true, device: cpu1 });
  const c = zeros([3], { requiresGrad: true, dtype: "float64", device: cpu0 });
  const make = (params: Tensor[], extra: Record<string, unknown> = {}) =>
    new distributed.optim.ZeroRedundancyOptimizer(params, {
      optimizerClass: optim.SGD,
      lr: 0.1,
      ...extra,
    });
  assert.throws(
    () => make([a, b]),
    /same dense type for all parameters \(one dtype, one device\) but got both float32 on cpu:0 \(parameter 0, shape \[2\]\) and float32 on cpu:1 \(parameter 1, shape \[3\]\)/,
  );
  assert.throws(() => make([a, c]), /float32 on cpu:0 .* and float64 on cpu:0 \(parameter 1/);
  assert.throws(
    () => make([a], { overlapWithDdp: true }),
    /overlapWithDdp is not supported: multigrad's DistributedDataParallel reduces the gradients/,
  );
  assert.throws(
    () =>
      new distributed.optim.ZeroRedundancyOptimizer([a], { optimizerClass: nn.Linear as never }),
    /optimizerClass must be an optimizer class .* got Linear/,
  );
  assert.throws(() => make([]), /empty parameter list/);
  assert.throws(
    () =>
      new distributed.optim.ZeroRedundancyOptimizer([a], {
        optimizerClass: optim.LBFGS as never,
      }),
    /optimizerClass LBFGS is not supported: its step is async/,
  );
  assert.throws(() => make([a]), /no process group in this thread/);
  await distributed.initProcessGroup({ backend: "local", rank: 0, worldSize: 1 });
  try {
    assert.throws(() => make([a], { momentun: 0.9 }), /SGD: unknown option "momentun"/);
    const opt = make([a]);
    assert.throws(() => opt.stateDict(), /consolidateStateDict\(0\)/);
    await assert.rejects(opt.consolidateStateDict(1), /to must be a rank in \[0, 1\), got 1/);
    assert.throws(
      () => opt.loadStateDict({ state: {}, param_groups: [] }),
      /the state dict has 0 parameter groups, the optimizer 1/,
    );
    assert.throws(
      () => opt.loadStateDict({ state: { 5: {} }, param_groups: [{ lr: 0.1, params: [0] }] }),
      /state for parameter index 5, which no parameter group lists/,
    );
    // One rank: a plain SGD with a single group, stepping in place.
    a.grad = tensor([1, 2]);
    opt.step();
    assert.deepEqual(await a.toArray(), [-0.10000000149011612, -0.20000000298023224]);
  } finally {
    await distributed.destroyProcessGroup();
  }
});

// ---- under mpiexec ----

if (!MPICH_MPIEXEC) {
  console.warn(
    "MPICH's mpiexec not found: the mpiexec test of ZeroRedundancyOptimizer is SKIPPED (install it with `apt-get install mpich`)",
  );
}

Deno.test({
  name:
    "mpi: ZeroRedundancyOptimizer(adam) + DDP under mpiexec -n 2 ends every step like one process",
  ignore: !MPICH_MPIEXEC,
  ...opts,
  fn: async () => {
    const o: ZeroTrainOptions = { optimizer: "adam", steps: 3, globalBatch: 12, consolidateTo: 0 };
    const run = await mpiRun<ZeroTrained>(
      RANKS,
      2,
      "train",
      o as unknown as Record<string, unknown>,
    );
    assert.equal(run.code, 0, run.output);
    const ranks = run.results as ZeroTrained[];
    ranks.forEach((r, rank) => assert.ok(r, `rank ${rank} wrote no result: ${run.output}`));
    let plain: PlainStateDict | null = null;
    const expected = await reference(o, 3, async (opt) => {
      plain = await toPlain(opt.stateDict());
    });
    checkRun(ranks, expected, "mpiexec -n 2");
    checkStateDict(ranks[0].consolidated!, plain!);
  },
});
