/**
 * FSDP's everyday API beyond training: `FullStateDictConfig` (rank0Only,
 * offloadToCpu), `SHARDED_STATE_DICT`, `fullOptimStateDict` saved at
 * world size 2 and `scatterFullOptimStateDict` loaded at 3 and 1 (training
 * on equals one process training every row), `nn.utils.clipGradNorm_`
 * refusing shards, and the errors of mismatched shards. PyTorch 1.13's
 * fsdp does not import on this machine's Python, so the reference is the
 * one-process computation.
 * @module
 */

import assert from "node:assert/strict";
import { distributed, requestDevices, tensor, tidy } from "../mod.ts";
import { makeData } from "./distributed_ranks.ts";
import type { ApiOptions, Ignored, Offloaded, Saved } from "./fsdp_api_ranks.ts";
import { makeNet, makeOptimizer, type PlainDict, stepLoss } from "./fsdp_ranks.ts";
import { MPICH_MPIEXEC, mpiRun } from "./mpiexec.ts";
import { BACKENDS } from "./harness.ts";
import { tcpRun } from "./tcprun.ts";

const RANKS = new URL("./fsdp_api_ranks.ts", import.meta.url);
// Workers and shared memory outlive a test's own ops by design (terminated at its end).
const opts = { sanitizeOps: false, sanitizeResources: false };

/** The plain model's state dict after every step of one process training all rows. */
async function reference(o: ApiOptions): Promise<PlainDict[]> {
  const [device] = await requestDevices({ backend: "cpu" });
  const model = makeNet(7).to(device);
  const opt = makeOptimizer(o.optimizer, model.parameters());
  const all = makeData(o.steps * o.globalBatch);
  const dicts: PlainDict[] = [];
  for (let s = 0; s < o.steps; s++) {
    const from = s * o.globalBatch;
    const x = tensor(all.x.slice(from, from + o.globalBatch), { device });
    const y = tensor(all.y.slice(from, from + o.globalBatch), { dtype: "int32", device });
    tidy(() => {
      opt.zeroGrad();
      stepLoss(model, x, y, false, (fn) => fn());
      opt.step();
    });
    const dict: PlainDict = {};
    for (const [k, t] of Object.entries(model.stateDict())) dict[k] = [...(await t.data())];
    dicts.push(dict);
  }
  return dicts;
}

function assertDictsClose(got: PlainDict, want: PlainDict, what: string, tol = 2e-5): number {
  assert.deepEqual(Object.keys(got).sort(), Object.keys(want).sort(), `${what}: keys`);
  let worst = 0;
  for (const [k, w] of Object.entries(want)) {
    const g = got[k];
    assert.equal(g.length, w.length, `${what}: ${k} length`);
    const off = Math.max(...w.map((v, i) => Math.abs(v - g[i]) / (1 + Math.abs(v))));
    assert.ok(off <= tol, `${what}: ${k} differs by ${off}`);
    worst = Math.max(worst, off);
  }
  return worst;
}

/** Row chunks of each parameter at 2 ranks (torch.chunk along dim 0) of the 6 → 16 → 16 → 16 → 3 net. */
function expectedShardedShapes(rank: number): Record<string, number[]> {
  const shapes: Record<string, number[]> = {
    "0.weight": [16, 6],
    "0.bias": [16],
    "2.fc.weight": [16, 16],
    "2.fc.bias": [16],
    "3.fc.weight": [16, 16],
    "3.fc.bias": [16],
    "4.weight": [3, 16],
    "4.bias": [3],
  };
  const out: Record<string, number[]> = {};
  for (const [k, s] of Object.entries(shapes)) {
    out[k] = distributed.fsdp.shardedTensorMetadata(s, rank, 2).shape;
  }
  out[`_fsdpShard.rank${rank}.of2`] = [2];
  return out;
}

function checkSaved(saved: Saved[], want: PlainDict[], o: ApiOptions, what: string): void {
  const [zero, one] = saved;
  assertDictsClose(zero.full, want[o.saveAfter - 1], `${what}: rank 0's full dict`);
  assert.ok(zero.fullDevices.every((d) => d === "cpu:0" || d === "cpu"), zero.fullDevices.join());
  assert.deepEqual(one.full, {}, `${what}: rank0Only gives rank 1 an empty dict`);
  assert.ok(zero.optim && Object.keys(zero.optim.state).length === 8, `${what}: rank 0's optim`);
  assert.equal(one.optim, null, `${what}: fullOptimStateDict gives rank 1 {}`);
  for (const [r, s] of saved.entries()) {
    assert.equal(s.everyRankOptimKeys, 8, `${what}: rank0Only false, rank ${r}`);
    assert.deepEqual(s.shardedShapes, expectedShardedShapes(r), `${what}: sharded shapes`);
    assertDictsClose(s.shardedReloaded, zero.full, `${what}: SHARDED round trip, rank ${r}`, 0);
    const [clip, shardedOther, localOther, wrongShape, config] = s.errors;
    assert.match(
      clip,
      new RegExp(
        `clipGradNorm_: parameter 0 .* only this rank's shard .* rank ${r}'s shard .*world size 2.* call clipGradNorm_\\(maxNorm, normType\\) of the FSDP root`,
      ),
    );
    assert.match(
      shardedOther,
      new RegExp(
        `SHARDED_STATE_DICT\\) on rank ${r} of world size 2: the dict is rank ${
          (r + 1) % 2
        }'s of world size 2 \\(each rank loads the dict it saved\\)`,
      ),
    );
    assert.match(
      localOther,
      new RegExp(`LOCAL_STATE_DICT\\) on rank ${r} .* rank ${(r + 1) % 2}'s`),
    );
    // Only rank 1 was given a wrong chunk; rank 0 is told which rank was.
    assert.match(
      wrongShape,
      r === 1
        ? /rank 1 of world size 2: 4\.weight has shape \[1, 2\], but this rank's chunk of \[3, 16\] is \[1, 16\]/
        : /SHARDED_STATE_DICT\): rank 1 of the group cannot load the state dict it was given/,
    );
    assert.match(config, /a FullStateDictConfig goes with FULL_STATE_DICT, not LOCAL_STATE_DICT/);
  }
}

async function saveLoadResume(o: ApiOptions): Promise<void> {
  const want = await reference(o);
  const saved = await distributed.spawn<Saved>(RANKS, { nprocs: 2, args: ["save", o] });
  checkSaved(saved, want, o, `${o.optimizer}, saved at 2`);
  const resumed = { ...o, saved: saved[0] };
  for (const nprocs of [3, 1]) {
    const ranks = await distributed.spawn<{ dicts: PlainDict[]; otherWorldSize: string }>(RANKS, {
      nprocs,
      args: ["load", resumed],
    });
    for (const [r, { dicts, otherWorldSize }] of ranks.entries()) {
      assert.match(
        otherWorldSize,
        new RegExp(
          `SHARDED_STATE_DICT\\) on rank ${r} of world size ${nprocs}: the dict is rank ${r}'s of world size 2; a SHARDED_STATE_DICT loads only at the world size it was saved with`,
        ),
      );
      assert.equal(dicts.length, o.steps - o.saveAfter);
      dicts.forEach((d, i) =>
        assertDictsClose(
          d,
          want[o.saveAfter + i],
          `${o.optimizer}: saved at 2, loaded at ${nprocs}, rank ${r}, step ${o.saveAfter + i}`,
        )
      );
    }
  }
}

const BASE = { strategy: "FULL_SHARD", steps: 4, saveAfter: 2, globalBatch: 12 } as const;

Deno.test({
  name:
    "FSDP Adam: FULL (rank0Only, offloadToCpu) and fullOptimStateDict saved at 2 ranks, scattered at 3 and 1, train on as one process; SHARDED round trip and errors",
  ...opts,
  fn: () => saveLoadResume({ ...BASE, optimizer: "adam" }),
});

Deno.test({
  name: "FSDP SGD momentum (SHARD_GRAD_OP): saved at 2 ranks, resumed at 3 and 1 as one process",
  ...opts,
  fn: () => saveLoadResume({ ...BASE, strategy: "SHARD_GRAD_OP", optimizer: "sgd" }),
});

for (const backend of BACKENDS.has("webgpu") ? ["webgpu"] : []) {
  Deno.test({
    name:
      `FSDP on 2 ${backend} ranks: offloadToCpu gives host tensors, rank0Only, SHARDED round trip and errors`,
    ...opts,
    fn: async () => {
      const o: ApiOptions = { ...BASE, optimizer: "adam", backend };
      const [saved, want] = await Promise.all([
        distributed.spawn<Saved>(RANKS, { nprocs: 2, args: ["save", o] }),
        reference(o),
      ]);
      checkSaved(saved, want, o, `${backend}, saved at 2`);
    },
  });
}

const OFFLOAD_CASES: (readonly [string, distributed.fsdp.ShardingStrategy])[] = [
  ["cpu", "FULL_SHARD"],
  ...(BACKENDS.has("webgpu") ? [["webgpu", "FULL_SHARD"], ["webgpu", "NO_SHARD"]] as const : []),
];
for (const [backend, strategy] of OFFLOAD_CASES) {
  Deno.test({
    name:
      `FSDP CPUOffload({ offloadParams }) on 2 ${backend} ranks (${strategy}): shards and gradients on the host, trains as one process`,
    ...opts,
    fn: async () => {
      const o: ApiOptions = { ...BASE, strategy, optimizer: "adam", backend, steps: 3 };
      const [ranks, want] = await Promise.all([
        distributed.spawn<Offloaded>(RANKS, { nprocs: 2, args: ["offload", o] }),
        reference(o),
      ]);
      for (const [r, got] of ranks.entries()) {
        assert.ok(got.moduleDevice.startsWith(backend), got.moduleDevice);
        assert.ok(
          got.shardDevices.length === 3 && got.shardDevices.every((d) => d.startsWith("cpu")),
        );
        assert.ok(got.gradDevices.every((d) => d.startsWith("cpu")), got.gradDevices.join());
        got.dicts.forEach((d, s) =>
          assertDictsClose(d, want[s], `${backend} CPUOffload, rank ${r}, step ${s}`)
        );
      }
    },
  });
}

Deno.test({
  name:
    "FSDP ignoredModules: whole on every rank, local gradients, whole in the state and optimizer dicts; errors",
  ...opts,
  fn: async () => {
    const ranks = await distributed.spawn<Ignored>(RANKS, { nprocs: 2, args: ["ignored"] });
    for (const [r, got] of ranks.entries()) {
      assert.deepEqual(got.names.filter(([k]) => !k.endsWith("flatParam")), [
        ["module.4.weight", [3, 16]],
        ["module.4.bias", [3]],
      ]);
      // The root's flat parameter holds only 0.weight and 0.bias (112 elements, 56 per rank).
      assert.deepEqual(got.names.find(([k]) => k === "flatParam"), ["flatParam", [56]]);
      assert.ok(
        got.localGradWorst <= 1e-6,
        `rank ${r}: local gradient off by ${got.localGradWorst}`,
      );
      assert.ok(got.averagedGradWorst > 1e-3, `rank ${r}: the ignored gradient was averaged`);
      assert.deepEqual(got.fullKeys["4.weight"], [3, 16]);
      assert.deepEqual(got.shardedShapes["4.weight"], [3, 16], "SHARDED keeps it whole");
      assert.deepEqual(got.shardedShapes["0.weight"], [8, 6]);
      assert.equal(got.momentum.length, 48);
      assert.ok(got.momentum.some((v) => v !== 0));
      assert.deepEqual(got.reloadedMomentum, got.momentum);
      assert.match(got.errors[0], /ignoredModules must not include FSDP units/);
      assert.match(
        got.errors[1],
        /optimStateDictToLoad: the optimizer must hold model.parameters\(\) in order \(5: flatParam, module\.4\.weight, module\.4\.bias, module\.2\.flatParam, module\.3\.flatParam\), but it holds 4 parameter\(s\) and its parameter 0 is not flatParam/,
      );
      assert.match(got.errors[2], /ignoredModules holds the wrapped module itself/);
    }
  },
});

Deno.test("FSDP shardedTensorMetadata: torch.chunk along dim 0, empty ranks past the last chunk", () => {
  const { shardedTensorMetadata } = distributed.fsdp;
  assert.deepEqual(shardedTensorMetadata([3, 16], 0, 2), {
    globalShape: [3, 16],
    offsets: [0, 0],
    shape: [2, 16],
  });
  assert.deepEqual(shardedTensorMetadata([3, 16], 1, 2).offsets, [2, 0]);
  assert.deepEqual(shardedTensorMetadata([3, 16], 1, 2).shape, [1, 16]);
  // torch.chunk(3 rows, 4) gives 3 chunks of 1: rank 3 holds none.
  assert.deepEqual(shardedTensorMetadata([3], 3, 4).shape, [0]);
  assert.deepEqual(shardedTensorMetadata([3], 3, 4).offsets, [3]);
  // torch.chunk(5 rows, 4): chunks of 2, 2, 1 and none.
  assert.deepEqual([0, 1, 2, 3].map((r) => shardedTensorMetadata([5, 2], r, 4).shape[0]), [
    2,
    2,
    1,
    0,
  ]);
  assert.throws(() => shardedTensorMetadata([4], 2, 2), /rank 2 is not a rank of world size 2/);
});

// ---- as processes: under mpiexec and the tcp launcher ----

const PROCESS_CASE: ApiOptions = { ...BASE, optimizer: "adam" };

for (
  const [name, run, ignore] of [
    ["mpi (mpiexec -n 2)", mpiRun, !MPICH_MPIEXEC],
    ["tcp launcher (2 processes)", tcpRun, false],
  ] as const
) {
  Deno.test({
    name: `${name}: FSDP FULL config, fullOptimStateDict, SHARDED round trip and errors`,
    ignore,
    ...opts,
    fn: async () => {
      const [job, want] = await Promise.all([
        run<Saved>(RANKS, 2, "save", PROCESS_CASE as unknown as Record<string, unknown>),
        reference(PROCESS_CASE),
      ]);
      assert.equal(job.code, 0, job.output);
      job.results.forEach((r, rank) => assert.ok(r, `rank ${rank} wrote no result: ${job.output}`));
      checkSaved(job.results as Saved[], want, PROCESS_CASE, name);
    },
  });
}
