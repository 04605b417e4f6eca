/**
 * A lost device is replaced by a fresh one: after a GPUDevice is destroyed
 * under multigrad (as a driver reset or `device.destroy()` would), reads on
 * it raise DeviceLostError, whose advice works: requestDevices() gives a new
 * device under the same name, and a model trains on it. A file of its own,
 * so that the loss does not reach other tests' devices.
 * @module
 */

import assert from "node:assert/strict";
import {
  device,
  DeviceLostError,
  manualSeed,
  nn,
  optim,
  requestDevices,
  setDefaultDevice,
  tensor,
} from "../mod.ts";
import type { WrappedDevice } from "../src/backends/backend.ts";
import type { WebGPUDevice } from "../src/backends/webgpu/device.ts";
import { BACKENDS } from "./harness.ts";

Deno.test({
  name: "webgpu: a destroyed GPUDevice is replaced by requestDevices and training goes on",
  ignore: !BACKENDS.has("webgpu"),
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const [lost, other] = await requestDevices({ backend: "webgpu", count: 2 });
    setDefaultDevice(lost);
    const before = tensor([1, 2, 3], { device: lost });
    await before.data();
    const gpu = (lost.backendDevice as WrappedDevice<WebGPUDevice>).impl.runtime.device;
    gpu.destroy();
    await assert.rejects(() => before.add(1).data(), DeviceLostError);
    assert.throws(() => before.mul(2), DeviceLostError, "every later call on it too");

    const [fresh, same] = await requestDevices({ backend: "webgpu", count: 2 });
    assert.notEqual(fresh, lost, "a new device");
    assert.equal(`${fresh}`, `${lost}`, "under the same name");
    assert.equal(same, other, "devices that were not lost stay");
    assert.equal(device(`${lost}`), fresh);
    assert.equal(tensor([0]).device, fresh, "the replacement of the default device is the default");

    // Seeded: whether 30 steps lower the loss depends on the initial weights.
    manualSeed(17);
    const model = new nn.Sequential(new nn.Linear(2, 8), new nn.ReLU(), new nn.Linear(8, 2))
      .to(fresh);
    const opt = new optim.SGD(model.parameters(), { lr: 0.5 });
    const x = tensor([[0, 0], [0, 1], [1, 0], [1, 1]], { device: fresh });
    const y = tensor([0, 1, 1, 0], { dtype: "int32", device: fresh });
    const lossFn = new nn.CrossEntropyLoss();
    const losses: number[] = [];
    for (let step = 0; step < 30; step++) {
      opt.zeroGrad();
      const loss = lossFn.forward(model.forward(x), y);
      loss.backward();
      opt.step();
      losses.push(await loss.item());
    }
    assert.ok(losses.at(-1)! < losses[0], `trains: ${losses[0]} -> ${losses.at(-1)}`);
    // The old device's tensors still say what happened.
    await assert.rejects(() => before.data(), /webgpu:0 was lost.*requestDevices/);
  },
});
