/**
 * The webgpu backend's read-ahead (`src/backends/webgpu/read_ahead.ts`): the
 * read of a loss starts at `backward()`; what a later read returns must be
 * exactly what it returns without read-ahead, whatever the program does in
 * between. Skipped when no WebGPU adapter exists.
 */

import assert from "node:assert/strict";
import type { WrappedDevice } from "../src/backends/backend.ts";
import type { WebGPUDevice } from "../src/backends/webgpu/device.ts";
import type { ReadAhead } from "../src/backends/webgpu/read_ahead.ts";
import { webgpuBackend } from "../src/backends/webgpu/mod.ts";
import { DeviceLostError } from "../src/errors.ts";
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

registerBackend("webgpu-ahead", () => webgpuBackend({ name: "webgpu-ahead" }), {
  priority: -10,
});
registerBackend(
  "webgpu-plain",
  () => webgpuBackend({ name: "webgpu-plain", readAhead: false }),
  { priority: -10 },
);

function test(name: string, fn: () => Promise<void>): void {
  Deno.test({ name: `webgpu read-ahead: ${name}`, ignore, fn });
}

async function device(backend: "webgpu-ahead" | "webgpu-plain"): Promise<Device> {
  const [d] = await requestDevices({ backend });
  return d;
}

function readAhead(d: Device): ReadAhead {
  const impl = (d.backendDevice as WrappedDevice<WebGPUDevice>).impl;
  assert.ok(impl.readAhead, `${d} has read-ahead`);
  return impl.readAhead;
}

/** The demo's model on `d`: one step returns the loss (kept), optionally changed by `after`. */
function demo(d: Device, after?: (loss: Tensor) => void): () => Tensor {
  manualSeed(7);
  const model = new nn.Sequential(
    new nn.Linear(2, 16),
    new nn.GELU(),
    new nn.Linear(16, 3),
  ).to(d);
  const opt = new optim.Adam(model.parameters(), { lr: 0.05 });
  const lossFn = new nn.CrossEntropyLoss();
  const x = randn([32, 2], { device: d });
  const y = tensor(Array.from({ length: 32 }, (_, i) => i % 3), { dtype: "int32", device: d });
  return () =>
    tidy(() => {
      opt.zeroGrad();
      const loss = lossFn.forward(model.forward(x), y);
      loss.backward();
      opt.step();
      after?.(loss);
      return loss;
    });
}

test("a training loop reads the same losses as without read-ahead, each from the early copy", async () => {
  const [a, p] = [await device("webgpu-ahead"), await device("webgpu-plain")];
  const [stepA, stepP] = [demo(a), demo(p)];
  const before = { ...readAhead(a).counts };
  for (let i = 0; i < 6; i++) {
    const [la, lp] = [stepA(), stepP()];
    assert.equal(await la.item(), await lp.item(), `step ${i}`);
    la.dispose();
    lp.dispose();
  }
  assert.equal(readAhead(a).counts.started - before.started, 6);
  assert.equal(readAhead(a).counts.taken - before.taken, 6);
});

test("a loss changed in place after backward reads its new value", async () => {
  const [a, p] = [await device("webgpu-ahead"), await device("webgpu-plain")];
  const change = (loss: Tensor) => void loss.detach().mul_(3).add_(1);
  const [stepA, stepP] = [demo(a, change), demo(p, change)];
  for (let i = 0; i < 3; i++) {
    const before = readAhead(a).counts.taken;
    const [la, lp] = [stepA(), stepP()];
    const value = await la.item();
    assert.equal(value, await lp.item(), `step ${i}`);
    assert.equal(readAhead(a).counts.taken, before, "the stale early copy was not used");
    la.dispose();
    lp.dispose();
  }
});

test("losses not read turn read-ahead off; reading one turns it back on", async () => {
  const a = await device("webgpu-ahead");
  const p = await device("webgpu-plain");
  const [stepA, stepP] = [demo(a), demo(p)];
  // Read the first one so that read-ahead is on whatever ran before.
  const [fa, fp] = [stepA(), stepP()];
  assert.equal(await fa.item(), await fp.item());
  const started = readAhead(a).counts.started;
  for (let i = 0; i < 5; i++) {
    stepA().dispose();
    stepP().dispose();
  }
  // One early copy went unread, then no more were started.
  assert.equal(readAhead(a).counts.started - started, 1);
  const [la, lp] = [stepA(), stepP()];
  assert.equal(await la.item(), await lp.item());
  const [ma, mp] = [stepA(), stepP()];
  assert.equal(readAhead(a).counts.started - started, 2, "on again after a read");
  assert.equal(await ma.item(), await mp.item());
  for (const t of [fa, fp, la, lp, ma, mp]) t.dispose();
});

test("other reads between backward and the loss's read see their own values", async () => {
  const a = await device("webgpu-ahead");
  const p = await device("webgpu-plain");
  const [stepA, stepP] = [demo(a), demo(p)];
  const [la, lp] = [stepA(), stepP()];
  // A read of something else first, then the loss twice (the second is a plain read).
  const other = (d: Device) => tensor([1, 2, 3], { device: d }).add(1).toArray();
  assert.deepEqual(await other(a), [2, 3, 4]);
  assert.equal(await la.item(), await lp.item());
  assert.equal(await la.item(), await lp.item());
  la.dispose();
  lp.dispose();
});

test("a loss disposed before it is read, and its memory reused, is never read from the early copy", async () => {
  const a = await device("webgpu-ahead");
  const stepA = demo(a);
  const loss = stepA();
  loss.dispose();
  // Same size class: the pool hands the freed buffer out again.
  const fresh = tensor([42], { device: a });
  assert.equal(await fresh.item(), 42);
  fresh.dispose();
});

test("a kernel failing after the early copy still rejects the read that takes it", async () => {
  const d = (await (await webgpuBackend({ name: "ahead-raw" })).createDevice(0)) as WrappedDevice<
    WebGPUDevice
  >;
  try {
    const x = d.allocate(1, "float32");
    d.write(x, 0, new Float32Array([5]));
    const rt = d.impl.runtime;
    d.readSoon!(x, 0, 1, "float32");
    rt.dispatch({
      name: "brokenKernel",
      key: "broken",
      wgsl: () => "this is not wgsl",
      signature: "w",
      buffers: [rt.storage.acquire(16)],
      params: [],
      groups: [1, 1, 1],
    });
    const taken = d.impl.readAhead!.counts.taken;
    await assert.rejects(d.read(x, 0, 1, "float32"), /brokenKernel/);
    assert.equal(d.impl.readAhead!.counts.taken, taken + 1, "the early copy was taken");
    assert.deepEqual([...await d.read(x, 0, 1, "float32")], [5]);
    // Lost while the early copy is mapping: the read rejects with DeviceLostError.
    d.readSoon!(x, 0, 1, "float32");
    const pending = d.read(x, 0, 1, "float32");
    d.destroy();
    await assert.rejects(pending, DeviceLostError);
    d.readSoon!(x, 0, 1, "float32"); // a hint on a lost device does nothing
  } finally {
    d.destroy();
  }
});
