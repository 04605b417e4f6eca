/**
 * parallel.Pipe with tuples (arrays), as PyTorch 1.13's Pipe: several inputs,
 * layers that return tuples feeding the next layer's arguments within and
 * across partitions, non-tensor items passed unchanged, tuple outputs
 * gathered; outputs and gradients (parameters and inputs) against the same
 * layers run one after another on one device, for chunks 1–3 and every
 * checkpoint mode on cpu devices and one webgpu case; the errors.
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
  zeros,
} from "../mod.ts";
import { assertClose, BACKENDS } from "./harness.ts";

const cpus = await requestDevices({ backend: "cpu", count: 3 });
const gpus = BACKENDS.get("webgpu") ?? null;

function test(name: string, fn: () => Promise<void> | void, ignore = false): void {
  Deno.test({ name, ignore, sanitizeOps: false, sanitizeResources: false, fn });
}

/** (x, y, tag) → [tanh(fc(x)) + y, 2y, tag, 3]: three inputs, a four-item tuple out. */
class Head extends nn.Module {
  fc = new nn.Linear(5, 4);
  override forward(x: Tensor, y: Tensor, tag: string): unknown[] {
    assert.equal(typeof tag, "string");
    return [this.fc.forward(x).tanh().add(y), y.mul(2), tag, 3];
  }
}

/** (h, y, tag, k) → [relu(fc(h)) · y, k · y, tag]: a tuple in, a tuple out. */
class Middle extends nn.Module {
  fc = new nn.Linear(4, 4);
  override forward(h: Tensor, y: Tensor, tag: string, k: number): unknown[] {
    assert.equal(k, 3);
    return [this.fc.forward(h).relu().mul(y), y.mul(k), `${tag}!`];
  }
}

/** (h, y, tag) → [fc(h), Σ y over dim 1, tag]. */
class Tail extends nn.Module {
  fc = new nn.Linear(4, 2);
  override forward(h: Tensor, y: Tensor, tag: string): unknown[] {
    return [this.fc.forward(h), y.sum(1, true), tag.length];
  }
}

/** The three layers, seeded, on `devices` (one each). */
function layers(seed: number, devices: Device[]): [Head, Middle, Tail] {
  manualSeed(seed);
  const ls: [Head, Middle, Tail] = [new Head(), new Middle(), new Tail()];
  ls.forEach((l, i) => l.to(devices[i]));
  return ls;
}

/** The layers one after another, each tuple spread over the next one's arguments. */
function reference([head, middle, tail]: [Head, Middle, Tail], x: Tensor, y: Tensor): unknown[] {
  const a = head.forward(x, y, "t") as [Tensor, Tensor, string, number];
  const b = middle.forward(...a) as [Tensor, Tensor, string];
  return tail.forward(...b);
}

async function paramGrads(ls: nn.Module[]): Promise<number[][]> {
  const out: number[][] = [];
  for (const l of ls) {
    for (const p of l.parameters()) out.push(Array.from(await p.grad!.data()));
  }
  return out;
}

/** A loss of both tensor outputs, so both reach every gradient. */
function loss(h: Tensor, s: Tensor, w: Tensor): Tensor {
  return h.mul(w.to(h.device)).sum().add(s.pow(2).sum().to(h.device));
}

function* placements(): Generator<[string, Device[], number[], string[]]> {
  const modes = ["always", "except_last", "never"];
  yield ["cpu:0, cpu:1, cpu:2", [cpus[0], cpus[1], cpus[2]], [1, 2, 3], modes];
  // One webgpu case: two partitions on the GPU devices, the last back on the cpu.
  if (gpus) yield ["webgpu:0, webgpu:1, cpu:1", [gpus[0], gpus[1], cpus[1]], [3], ["except_last"]];
}

for (const [where, devices, chunkList, modes] of placements()) {
  for (const chunks of chunkList) {
    for (const checkpoint of modes as parallel.PipeCheckpoint[]) {
      test(`Pipe with tuples on ${where}, chunks ${chunks}, checkpoint ${checkpoint}: outputs, parameter and input gradients equal one device's (batch 7)`, async () => {
        const ref = layers(5, [cpus[0], cpus[0], cpus[0]]);
        const placed = layers(5, devices);
        const pipe = new parallel.Pipe(new nn.Sequential(...placed), { chunks, checkpoint });
        assert.deepEqual(pipe.devices, devices);
        manualSeed(40 + chunks);
        const x = randn([7, 5], { requiresGrad: true });
        const y = randn([7, 4], { requiresGrad: true });
        const w = randn([7, 2]);
        const [h, s, n] = reference(ref, x, y) as [Tensor, Tensor, number];
        const xs = x.detach().to(devices[0]).requiresGrad_();
        const ys = y.detach().to(devices[0]).requiresGrad_();
        const out = pipe.forward<[Tensor, Tensor, number[]]>(xs, ys, "t");
        assert.ok(Array.isArray(out) && out.length === 3);
        const [ph, ps, pn] = out;
        assert.equal(ph.device, devices[2]);
        assert.deepEqual(ph.shape, [7, 2]);
        assert.deepEqual(ps.shape, [7, 1]);
        // A non-tensor output is the list of the micro-batches' values, as PyTorch's gather.
        assert.deepEqual(pn, new Array(chunks).fill(n));
        assertClose(await ph.data(), await h.data(), { what: "first output" });
        assertClose(await ps.data(), await s.data(), { what: "second output" });
        loss(h, s, w).backward();
        loss(ph, ps, w).backward();
        const want = await paramGrads(ref);
        (await paramGrads(placed)).forEach((g, i) => {
          assertClose(g, want[i], { atol: 1e-5, what: `parameter ${i} grad` });
        });
        assertClose(await xs.grad!.data(), await x.grad!.data(), { atol: 1e-5, what: "x.grad" });
        assertClose(await ys.grad!.data(), await y.grad!.data(), { atol: 1e-5, what: "y.grad" });
      });
    }
  }
}

/** x → [fc(x), x]: one tensor in, a tuple out. */
class Fork extends nn.Module {
  fc = new nn.Linear(3, 3);
  override forward(x: Tensor): Tensor[] {
    return [this.fc.forward(x), x];
  }
}

/** (a, b) → fc(a · b): a tuple in, one tensor out. */
class Join extends nn.Module {
  fc = new nn.Linear(3, 1);
  override forward(a: Tensor, b: Tensor): Tensor {
    return this.fc.forward(a.mul(b));
  }
}

test("Pipe: one tensor in, a tuple between partitions (passing the input itself on), one tensor out", async () => {
  for (const checkpoint of ["always", "never"] as const) {
    manualSeed(8);
    const [fork, join] = [new Fork(), new Join()];
    const x = randn([5, 3], { requiresGrad: true });
    const expected = join.forward(...fork.forward(x) as [Tensor, Tensor]);
    expected.sum().backward();
    const want = [fork.fc.weight.grad!, join.fc.weight.grad!, x.grad!];
    const wantData = await Promise.all(want.map((g) => g.data()));
    fork.zeroGrad();
    join.zeroGrad();
    fork.to(cpus[0]);
    join.to(cpus[1]);
    const xs = x.detach().requiresGrad_();
    const out = new parallel.Pipe(new nn.Sequential(fork, join), { chunks: 2, checkpoint })
      .forward(xs);
    assert.equal(out.device, cpus[1]);
    assertClose(await out.data(), await expected.data(), { what: checkpoint });
    out.sum().backward();
    const got = [fork.fc.weight.grad!, join.fc.weight.grad!, xs.grad!];
    for (const [i, g] of got.entries()) {
      assertClose(await g.data(), wantData[i], { atol: 1e-6, what: `${checkpoint} grad ${i}` });
    }
  }
});

test("Pipe with tuples: errors name the inputs, their shapes and the devices", () => {
  const pipe = new parallel.Pipe(new nn.Sequential(...layers(1, cpus)), { chunks: 2 });
  const x = randn([7, 5]);
  assert.throws(
    () => pipe.forward(x, randn([6, 4]), "t"),
    /batch sizes \(dim 0\) differ, input 0 of shape \[7, 5\] and input 1 of shape \[6, 4\]/,
  );
  assert.throws(
    () => pipe.forward(x, randn([1, 4]), "t"),
    /batch sizes \(dim 0\) differ, input 0 of shape \[7, 5\] and input 1 of shape \[1, 4\]/,
  );
  assert.throws(
    () => pipe.forward(x, zeros([]), "t"),
    /input 1 of shape \[\] has no batch dim \(dim 0\) to split into micro-batches/,
  );
  assert.throws(
    () => pipe.forward(x, randn([7, 4], { device: cpus[1] }), "t"),
    /the input 1 is on device cpu:1 but the first partition is on cpu:0/,
  );
  assert.throws(
    () => pipe.forward([x, randn([7, 4])]),
    /inputs hold no Tensor \(got \[an array of 2\]\); pass a tuple's items as separate arguments/,
  );
  assert.throws(() => pipe.forward("t", 3), /inputs hold no Tensor \(got \[string, number\]\)/);
  class Lost extends nn.Module {
    fc = new nn.Linear(5, 5);
    override forward(x: Tensor): unknown[] {
      return [this.fc.forward(x).shape[0], "no tensor"];
    }
  }
  assert.throws(
    () => new parallel.Pipe(new nn.Sequential(new Lost())).forward(x),
    /partition 0 \(on cpu:0\) returned an array with no Tensor, \[number, string\]/,
  );
  class Nested extends nn.Module {
    fc = new nn.Linear(5, 5);
    override forward(x: Tensor): unknown[] {
      const y = this.fc.forward(x);
      return [y, [y, y]];
    }
  }
  assert.throws(
    () => new parallel.Pipe(new nn.Sequential(new Nested())).forward(x),
    /partition 0 \(on cpu:0\) returned a tuple whose item 1 is an array holding tensors/,
  );
  class Ragged extends nn.Module {
    fc = new nn.Linear(5, 5);
    override forward(x: Tensor): unknown {
      const y = this.fc.forward(x);
      return x.shape[0] === 3 ? [y, 1] : [y];
    }
  }
  // Batch 7 in 3 chunks: rows 3, 3 and 1, so the last micro-batch's tuple is shorter.
  assert.throws(
    () => new parallel.Pipe(new nn.Sequential(new Ragged()), { chunks: 3 }).forward(x),
    /micro-batch 2's output \(an array of 1\) does not match micro-batch 0's \(an array of 2\)/,
  );
  class Mixed extends nn.Module {
    fc = new nn.Linear(5, 5);
    override forward(x: Tensor): unknown {
      const y = this.fc.forward(x);
      return [y, x.shape[0] === 3 ? y : "short"];
    }
  }
  assert.throws(
    () => new parallel.Pipe(new nn.Sequential(new Mixed()), { chunks: 3 }).forward(x),
    /item 1 of micro-batch 2's output is string, of micro-batch 0's Tensor; their types must match/,
  );
});

test("distributed.pipeline.sync.Pipe is parallel.Pipe (PyTorch's name for it)", () => {
  assert.equal(distributed.pipeline.sync.Pipe, parallel.Pipe);
  const options: distributed.pipeline.sync.PipeOptions = { chunks: 2, checkpoint: "never" };
  const pipe = new distributed.pipeline.sync.Pipe(new nn.Sequential(new nn.Linear(2, 2)), options);
  assert.ok(pipe instanceof parallel.Pipe);
  assert.equal(pipe.chunks, 2);
});
