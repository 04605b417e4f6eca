/**
 * parallel.Pipe's `NoChunk` and `WithDevice`, as PyTorch 1.13's
 * `torch.distributed.pipeline.sync`: a NoChunk tensor reaches every
 * micro-batch whole (its gradient summed over them), and WithDevice places a
 * layer (moving its parameters) on the device it names. Outputs and
 * gradients against the same layers run one after another on one device, for
 * chunks 1–3 on cpu devices and one webgpu + cpu case; the errors.
 */

import assert from "node:assert/strict";
import {
  type Device,
  distributed,
  manualSeed,
  nn,
  parallel,
  randn,
  requestDevices,
  type Tensor,
} from "../mod.ts";
import { assertClose, BACKENDS } from "./harness.ts";

const cpus = await requestDevices({ backend: "cpu", count: 3 });
const gpus = BACKENDS.get("webgpu") ?? null;

function test(name: string, fn: () => Promise<void> | void): void {
  Deno.test({ name, sanitizeOps: false, sanitizeResources: false, fn });
}

/** (x, w, tag) → [tanh(fc(x) + x·w), w]: w is the whole [5, 4] tensor in every micro-batch. */
class Head extends nn.Module {
  fc = new nn.Linear(5, 4);
  rows: number[] = [];
  override forward(x: Tensor, w: Tensor, tag: string): Tensor[] {
    assert.equal(tag, "t");
    assert.deepEqual(w.shape, [5, 4]);
    this.rows.push(x.shape[0]);
    return [this.fc.forward(x).add(x.matmul(w)).tanh(), w];
  }
}

/** (h, w) → [fc(h) · Σ_rows w, w]: w passes on to the next partition. */
class Middle extends nn.Module {
  fc = new nn.Linear(4, 4);
  override forward(h: Tensor, w: Tensor): Tensor[] {
    return [this.fc.forward(h).mul(w.sum(0)), w];
  }
}

/** (h, w) → fc(h) + mean(w²). */
class Tail extends nn.Module {
  fc = new nn.Linear(4, 2);
  override forward(h: Tensor, w: Tensor): Tensor {
    return this.fc.forward(h).add(w.pow(2).mean());
  }
}

function layers(seed: number, devices: Device[]): [Head, Middle, Tail] {
  manualSeed(seed);
  const ls: [Head, Middle, Tail] = [new Head(), new Middle(), new Tail()];
  ls.forEach((l, i) => l.to(devices[i]));
  return ls;
}

async function gradsOf(ls: nn.Module[]): Promise<number[][]> {
  const out: number[][] = [];
  for (const l of ls) for (const p of l.parameters()) out.push(Array.from(await p.grad!.data()));
  return out;
}

function* placements(): Generator<[string, Device[], number[], parallel.PipeCheckpoint[]]> {
  yield ["cpu:0, cpu:1, cpu:2", [cpus[0], cpus[1], cpus[2]], [1, 2, 3], [
    "always",
    "except_last",
    "never",
  ]];
  if (gpus) yield ["webgpu:0, cpu:1, webgpu:1", [gpus[0], cpus[1], gpus[1]], [3], ["except_last"]];
}

for (const [where, devices, chunkList, modes] of placements()) {
  for (const chunks of chunkList) {
    for (const checkpoint of modes) {
      test(`Pipe with a NoChunk input on ${where}, chunks ${chunks}, checkpoint ${checkpoint}: outputs and gradients (the NoChunk tensor's summed over micro-batches) equal one device's`, async () => {
        const ref = layers(3, [cpus[0], cpus[0], cpus[0]]);
        const placed = layers(3, devices);
        const pipe = new parallel.Pipe(new nn.Sequential(...placed), { chunks, checkpoint });
        manualSeed(60 + chunks);
        const x = randn([7, 5], { requiresGrad: true });
        const w = randn([5, 4], { requiresGrad: true });
        const g = randn([7, 2]);
        const [h, ww] = ref[0].forward(x, w, "t");
        const expected = ref[2].forward(...ref[1].forward(h, ww) as [Tensor, Tensor]);
        const xs = x.detach().to(devices[0]).requiresGrad_();
        const ws = w.detach().to(devices[0]).requiresGrad_();
        const out = pipe.forward(xs, new parallel.NoChunk(ws), "t");
        assert.equal(out.device, devices[2]);
        // Batch 7 in `chunks` micro-batches (the torch.chunk rule), each with the whole w.
        const rows = { 1: [7], 2: [4, 3], 3: [3, 3, 1] }[chunks]!;
        assert.deepEqual(placed[0].rows, rows);
        assertClose(await out.data(), await expected.data(), { atol: 1e-5, what: "output" });
        expected.mul(g).sum().backward();
        out.mul(g.to(out.device)).sum().backward();
        const want = await gradsOf(ref);
        (await gradsOf(placed)).forEach((grad, i) => {
          assertClose(grad, want[i], { atol: 1e-5, what: `parameter ${i} grad` });
        });
        assertClose(await xs.grad!.data(), await x.grad!.data(), { atol: 1e-5, what: "x.grad" });
        assertClose(await ws.grad!.data(), await w.grad!.data(), { atol: 1e-5, what: "w.grad" });
      });
    }
  }
}

test("Pipe: a 0-dimensional NoChunk tensor is neither split nor batch-size checked", async () => {
  class Shift extends nn.Module {
    fc = new nn.Linear(3, 3);
    override forward(x: Tensor, s: Tensor): Tensor {
      return this.fc.forward(x).mul(s);
    }
  }
  manualSeed(4);
  const shift = new Shift();
  const x = randn([5, 3]);
  const s = randn([], { requiresGrad: true });
  const expected = shift.forward(x, s);
  expected.pow(2).sum().backward();
  const pipe = new parallel.Pipe(new nn.Sequential(shift), { chunks: 3 });
  const ss = s.detach().requiresGrad_();
  const out = pipe.forward(x, new parallel.NoChunk(ss));
  assertClose(await out.data(), await expected.data(), { what: "output" });
  out.pow(2).sum().backward();
  assertClose(await ss.grad!.data(), await s.grad!.data(), { atol: 1e-5, what: "s.grad" });
});

/** A layer without parameters that records where it ran. */
class Where extends nn.Module {
  seen: string[] = [];
  override forward(x: Tensor): Tensor {
    this.seen.push(String(x.device));
    return x.relu();
  }
}

for (
  const [where, [d0, d1]] of [
    ["cpu:0 and cpu:1", [cpus[0], cpus[1]]],
    ...(gpus ? [["cpu:0 and webgpu:0", [cpus[0], gpus[0]]]] : []),
  ] as [string, Device[]][]
) {
  test(`Pipe with WithDevice on ${where}: the layer runs on its device, chunks 1–3 equal one device's`, async () => {
    for (const chunks of [1, 2, 3]) {
      manualSeed(9);
      const [a, b] = [new nn.Linear(4, 6), new nn.Linear(6, 3)];
      const x = randn([7, 4]);
      const g = randn([7, 3]);
      const expected = b.forward(a.forward(x).relu());
      expected.mul(g).sum().backward();
      const want = await gradsOf([a, b]);
      a.zeroGrad();
      b.zeroGrad();
      const weight = b.weight;
      const relu = new Where();
      // b starts on d0: WithDevice moves it to d1 in place, as PyTorch's Pipe does.
      const model = new nn.Sequential(
        a.to(d0),
        new parallel.WithDevice(relu, d1),
        new parallel.WithDevice(b.to(d0), String(d1)),
      );
      const pipe = new parallel.Pipe(model, { chunks });
      assert.deepEqual(pipe.devices, [d0, d1]);
      assert.equal(pipe.length, 3);
      // The partitions hold the wrapped layers themselves, as PyTorch's.
      assert.equal(pipe.at(1), relu);
      assert.equal(pipe.at(2), b);
      assert.equal(b.weight, weight);
      assert.equal(b.weight.device, d1);
      const out = pipe.forward(x.to(d0));
      assert.equal(out.device, d1);
      assert.deepEqual(relu.seen, new Array(chunks).fill(String(d1)));
      assertClose(await out.data(), await expected.data(), {
        atol: 1e-5,
        what: `chunks ${chunks}`,
      });
      out.mul(g.to(d1)).sum().backward();
      (await gradsOf([a, b])).forEach((grad, i) => {
        assertClose(grad, want[i], { atol: 1e-5, what: `chunks ${chunks}, grad ${i}` });
      });
    }
  });
}

test("Pipe without WithDevice: a layer without parameters joins the partition before it", () => {
  const relu = new Where();
  const pipe = new parallel.Pipe(
    new nn.Sequential(new nn.Linear(4, 6).to(cpus[0]), relu, new nn.Linear(6, 3).to(cpus[1])),
  );
  pipe.forward(randn([2, 4], { device: cpus[0] }));
  assert.deepEqual(relu.seen, ["cpu:0"]);
});

test("WithDevice outside Pipe: forwards to its module, with PyTorch's state-dict names", async () => {
  manualSeed(2);
  const fc = new nn.Linear(2, 2);
  const wrapped = new parallel.WithDevice(fc, "cpu:1");
  assert.equal(wrapped.module, fc);
  assert.equal(wrapped.device, cpus[1]);
  // Not moved until a Pipe places it, as PyTorch's.
  assert.equal(fc.weight.device, cpus[0]);
  assert.deepEqual(Object.keys(wrapped.stateDict()), ["_module.weight", "_module.bias"]);
  const x = randn([3, 2]);
  assertClose(await wrapped.forward(x).data(), await fc.forward(x).data());
});

test("Pipe with WithDevice and deferredBatchNorm: the wrapped BatchNorm is converted and placed", () => {
  const pipe = new parallel.Pipe(
    new nn.Sequential(
      new nn.Linear(3, 4).to(cpus[0]),
      new parallel.WithDevice(new nn.BatchNorm1d(4), cpus[1]),
    ),
    { chunks: 2, deferredBatchNorm: true },
  );
  assert.ok(pipe.at(1) instanceof parallel.DeferredBatchNorm);
  assert.deepEqual(pipe.devices, [cpus[0], cpus[1]]);
  assert.equal(pipe.forward(randn([4, 3], { device: cpus[0] })).device, cpus[1]);
});

test("NoChunk and WithDevice: errors name what is wrong", () => {
  assert.throws(
    () => new parallel.NoChunk(5 as unknown as Tensor),
    { name: "TypeError", message: /NoChunk only supported for tensors, found: 5/ },
  );
  assert.throws(
    () => new parallel.NoChunk([randn([2])] as unknown as Tensor),
    /NoChunk only supported for tensors, found: an array of 1/,
  );
  assert.throws(
    () => new parallel.WithDevice(new nn.ReLU(), "not a device"),
    { name: "TypeError", message: /WithDevice: .*"not a device" is not a device name/ },
  );
  assert.throws(
    () => new parallel.WithDevice(new nn.ReLU(), "cuda:0"),
    /WithDevice: .*no backend "cuda" is registered/,
  );
  assert.throws(
    () => new parallel.WithDevice({} as nn.Module, cpus[0]),
    { name: "TypeError", message: /WithDevice: module must be an nn\.Module, got Object/ },
  );
  const pipe = new parallel.Pipe(new nn.Sequential(...layers(1, cpus)), { chunks: 2 });
  const x = randn([6, 5]);
  assert.throws(
    () => pipe.forward(new parallel.NoChunk(x)),
    { name: "TypeError", message: /inputs hold no Tensor to split \(got \[NoChunk\]\)/ },
  );
  assert.throws(
    () => pipe.forward(x, new parallel.NoChunk(randn([5, 4], { device: cpus[1] })), "t"),
    /the NoChunk input 1 is on device cpu:1 but the first partition is on cpu:0/,
  );
});

test("distributed.pipeline.sync.NoChunk and WithDevice are parallel's", () => {
  assert.equal(distributed.pipeline.sync.NoChunk, parallel.NoChunk);
  assert.equal(distributed.pipeline.sync.WithDevice, parallel.WithDevice);
});
