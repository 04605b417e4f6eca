/**
 * The webgpu backend's early maps (`src/backends/webgpu/early_map.ts`): a
 * read takes its mapping as soon as the device has made it, not when Deno's
 * `mapAsync` resolves 10 ms later. The values must be exactly those of a
 * read that waits, and a staging buffer taken early must stay out of the
 * pool until its map settles. Skipped when no WebGPU adapter exists.
 */

import assert from "node:assert/strict";
import type { WrappedDevice } from "../src/backends/backend.ts";
import type { WebGPUDevice } from "../src/backends/webgpu/device.ts";
import { earlyMapsSupported } from "../src/backends/webgpu/early_map.ts";
import { webgpuBackend } from "../src/backends/webgpu/mod.ts";
import {
  type Device,
  manualSeed,
  nn,
  optim,
  randn,
  registerBackend,
  requestDevices,
  type Tensor,
  tensor,
  tidy,
} from "../mod.ts";

const ignore = await webgpuBackend().then(() => false, () => true);
const supported = !ignore && earlyMapsSupported(navigator.gpu);

registerBackend("webgpu-early", () => webgpuBackend({ name: "webgpu-early" }), {
  priority: -10,
});
registerBackend(
  "webgpu-waiting",
  () => webgpuBackend({ name: "webgpu-waiting", earlyMaps: false }),
  { priority: -10 },
);

function test(name: string, fn: () => Promise<void>): void {
  Deno.test({ name: `webgpu early maps: ${name}`, ignore, fn });
}

function impl(d: Device): WebGPUDevice {
  return (d.backendDevice as WrappedDevice<WebGPUDevice>).impl;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test("on for Deno's own navigator.gpu in the checked versions, off for any other WebGPU", () => {
  const [major, minor] = Deno.version.deno.split(".").map(Number);
  assert.equal(earlyMapsSupported(navigator.gpu), major === 2 && minor >= 2 && minor <= 9);
  assert.equal(earlyMapsSupported({} as GPU), false);
  return Promise.resolve();
});

test("reads after kernels give the same values early and waiting, early once a buffer is primed", async () => {
  const [early] = await requestDevices({ backend: "webgpu-early" });
  const [waiting] = await requestDevices({ backend: "webgpu-waiting" });
  for (let i = 0; i < 12; i++) {
    const values = Array.from({ length: 1000 + i }, (_, j) => Math.sin(j * 0.37 + i));
    const f = Math.fround;
    const expected = new Float32Array(values.map((v) => f(f(v) * 3) - i));
    const read = (d: Device) => tensor(values, { device: d }).mul(3).sub(i).data();
    const [a, b] = await Promise.all([read(early), read(waiting)]);
    assert.deepEqual(a, expected, `read ${i}, early`);
    assert.deepEqual(b, expected, `read ${i}, waiting`);
    // Every other read leaves time for the last staging buffer to come back.
    if (i % 2 === 1) await sleep(15);
  }
  assert.equal(impl(waiting).earlyMaps.counts.early, 0);
  if (supported) {
    assert.ok(
      impl(early).earlyMaps.counts.early >= 4,
      JSON.stringify(impl(early).earlyMaps.counts),
    );
  } else {
    assert.equal(impl(early).earlyMaps.counts.early, 0);
  }
});

test("a staging buffer taken early goes back to the pool at once and serves the next read early", async () => {
  const [d] = await requestDevices({ backend: "webgpu-early" });
  const staging = impl(d).runtime.staging;
  const x = tensor([1, 2, 3, 4], { device: d });
  await x.add(1).data(); // primes one staging buffer of this size
  await sleep(15);
  const before = impl(d).earlyMaps.counts.early;
  assert.deepEqual(await x.add(2).data(), new Float32Array([3, 4, 5, 6]));
  if (!supported) return;
  assert.equal(impl(d).earlyMaps.counts.early, before + 1, "taken early");
  assert.equal(staging.inUseBytes, 0, "back in the pool");
  // Back to back, before the first map's promise has resolved: the same
  // buffer, early again, with the new values (a stale mapping would give 3..6).
  for (let i = 3; i < 8; i++) {
    assert.deepEqual(await x.add(i).data(), new Float32Array([1 + i, 2 + i, 3 + i, 4 + i]));
  }
  assert.equal(impl(d).earlyMaps.counts.early, before + 6, "every read early");
  assert.equal(staging.inUseBytes, 0);
  await sleep(30); // the pending promises settle on buffers in use again: harmless
  assert.deepEqual(await x.add(9).data(), new Float32Array([10, 11, 12, 13]));
});

test("training steps give bit-identical losses and parameters early and waiting", async () => {
  const run = async (backend: string) => {
    const [d] = await requestDevices({ backend });
    manualSeed(3);
    const model = new nn.Sequential(new nn.Linear(8, 32), new nn.ReLU(), new nn.Linear(32, 4))
      .to(d);
    const opt = new optim.SGD(model.parameters(), { lr: 0.1, momentum: 0.9 });
    const x = randn([16, 8]).to(d);
    const y = tensor(Array.from({ length: 16 }, (_, i) => i % 4), { dtype: "int32" }).to(d);
    const losses: number[] = [];
    for (let step = 0; step < 6; step++) {
      let loss: Tensor | null = null;
      tidy(() => {
        opt.zeroGrad();
        loss = new nn.CrossEntropyLoss().forward(model.forward(x) as Tensor, y);
        loss.backward();
        opt.step();
        return loss;
      });
      losses.push(await loss!.item());
      loss!.dispose();
    }
    const params = await Promise.all(model.parameters().map((p) => p.data()));
    return { losses, params, early: impl(d).earlyMaps.counts.early };
  };
  const early = await run("webgpu-early");
  const waiting = await run("webgpu-waiting");
  assert.deepEqual(early.losses, waiting.losses);
  assert.deepEqual(early.params, waiting.params);
  assert.equal(waiting.early, 0);
  if (supported) assert.ok(early.early > 0, "some reads were taken early");
});
