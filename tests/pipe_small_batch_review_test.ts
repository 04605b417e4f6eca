/**
 * Review of parallel.Pipe with a batch smaller than `chunks`: checkpointing
 * counts the micro-batches the batch really made (except_last spares the real
 * last one, which PyTorch 1.13's fixed `chunks - 1` stop would checkpoint
 * too), and a DeferredBatchNorm given an empty batch fails clearly, leaving
 * no statistics behind (PyTorch's commits NaN running statistics).
 */

import assert from "node:assert/strict";
import { manualSeed, nn, parallel, randn, requestDevices, type Tensor, zeros } from "../mod.ts";
import { assertClose } from "./harness.ts";

const cpus = await requestDevices({ backend: "cpu", count: 2 });

function test(name: string, fn: () => Promise<void> | void): void {
  Deno.test({ name, sanitizeOps: false, sanitizeResources: false, fn });
}

/** A Linear that records the rows of each forward call (a recomputation calls it again). */
class Rows extends nn.Module {
  fc = new nn.Linear(3, 3);
  rows: number[] = [];
  override forward(x: Tensor): Tensor {
    this.rows.push(x.shape[0]);
    return this.fc.forward(x);
  }
}

test("Pipe checkpointing with fewer micro-batches than chunks: except_last spares the real last one", () => {
  // Batch 5 with chunks 4 makes micro-batches of [2, 2, 1] rows; batch 2 makes [1, 1].
  const cases: [number, number, Record<parallel.PipeCheckpoint, number[]>][] = [
    [5, 4, { always: [2, 2, 1, 1, 2, 2], except_last: [2, 2, 1, 2, 2], never: [2, 2, 1] }],
    [2, 4, { always: [1, 1, 1, 1], except_last: [1, 1, 1], never: [1, 1] }],
    [1, 4, { always: [1, 1], except_last: [1], never: [1] }],
  ];
  for (const [batch, chunks, byMode] of cases) {
    for (const [mode, want] of Object.entries(byMode) as [parallel.PipeCheckpoint, number[]][]) {
      manualSeed(1);
      const layer = new Rows().to(cpus[0]);
      const pipe = new parallel.Pipe(
        new nn.Sequential(layer, new nn.Linear(3, 2).to(cpus[1])),
        { chunks, checkpoint: mode },
      );
      pipe.forward(randn([batch, 3], { device: cpus[0] })).sum().backward();
      // Forward calls, then the recomputations in backward (last micro-batch first).
      assert.deepEqual(layer.rows, want, `batch ${batch}, chunks ${chunks}, ${mode}`);
    }
  }
});

test("Pipe with deferredBatchNorm: an empty batch is a clear error and leaves the running statistics clean", async () => {
  manualSeed(3);
  const conv = new nn.Conv1d(3, 3, 1);
  const bn = new nn.BatchNorm1d(3, { momentum: 0.5 });
  const ref = new nn.BatchNorm1d(3, { momentum: 0.5 });
  const pipe = new parallel.Pipe(
    new nn.Sequential(conv.to(cpus[0]), bn.to(cpus[1])),
    { chunks: 4, deferredBatchNorm: true },
  );
  const deferred = pipe.at(1) as parallel.DeferredBatchNorm;
  assert.throws(
    () => pipe.forward(zeros([0, 3, 2], { device: cpus[0] })),
    /got input of shape \[0, 3, 2\]/,
  );
  assert.equal(deferred.tracked, 0);
  assert.equal(await deferred.numBatchesTracked!.item(), 0);
  assert.deepEqual(Array.from(await deferred.runningMean!.data()), [0, 0, 0]);
  assert.deepEqual(Array.from(await deferred.runningVar!.data()), [1, 1, 1]);
  // The next mini-batch's statistics are its own.
  const x = randn([3, 3, 2]);
  pipe.forward(x.to(cpus[0]));
  ref.forward(conv.to(cpus[0]).forward(x));
  assert.equal(await deferred.numBatchesTracked!.item(), 1);
  assertClose(await deferred.runningMean!.data(), await ref.runningMean!.data(), { atol: 1e-5 });
  assertClose(await deferred.runningVar!.data(), await ref.runningVar!.data(), { atol: 1e-5 });
});
