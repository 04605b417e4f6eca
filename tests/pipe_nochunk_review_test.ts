/**
 * Review of parallel.WithDevice inside a Pipe: a wrapped Sequential's layers
 * join its device's partition, and the Pipe's state-dict keys are PyTorch
 * 1.13's (checked against a real PyTorch Pipe: no `_module` in them, the
 * wrapper being dropped), with the wrapped BatchNorm made deferred in place.
 */

import assert from "node:assert/strict";
import { nn, parallel, randn, requestDevices } from "../mod.ts";

const cpus = await requestDevices({ backend: "cpu", count: 2 });

Deno.test("Pipe with WithDevice of a Sequential: PyTorch's partition layers and state-dict keys", async () => {
  const inner = new nn.Sequential(new nn.Linear(2, 2), new nn.BatchNorm1d(2));
  const model = new nn.Sequential(
    new nn.Linear(2, 2).to(cpus[0]),
    new parallel.WithDevice(inner, cpus[1]),
  );
  const pipe = new parallel.Pipe(model, { chunks: 2, deferredBatchNorm: true });
  assert.deepEqual(pipe.devices, [cpus[0], cpus[1]]);
  assert.equal(pipe.length, 3);
  assert.ok(pipe.at(2) instanceof parallel.DeferredBatchNorm);
  assert.equal((pipe.at(1) as nn.Linear).weight.device, cpus[1]);
  // PyTorch's keys, less its DeferredBatchNorm's persistent sum and sum_squares (documented).
  const bn = ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"];
  assert.deepEqual(Object.keys(pipe.stateDict()), [
    "partitions.0.0.weight",
    "partitions.0.0.bias",
    "partitions.1.0.weight",
    "partitions.1.0.bias",
    ...bn.map((k) => `partitions.1.1.${k}`),
  ]);
  assert.deepEqual(Object.keys(model.stateDict()), [
    "0.weight",
    "0.bias",
    "1._module.0.weight",
    "1._module.0.bias",
    ...bn.map((k) => `1._module.1.${k}`),
  ]);
  const out = pipe.forward(randn([4, 2], { device: cpus[0] }));
  assert.equal(out.device, cpus[1]);
  assert.equal(await (pipe.at(2) as parallel.DeferredBatchNorm).numBatchesTracked!.item(), 1);
});
