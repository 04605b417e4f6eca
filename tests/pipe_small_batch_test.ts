/**
 * parallel.Pipe with any batch size, as PyTorch 1.13's Pipe: the mini-batch
 * splits by torch.chunk's rule, so a batch smaller than `chunks` (or one
 * that does not divide evenly) gives fewer, unevenly sized micro-batches.
 * The sizes a layer sees come from torch_pipe_chunks.json (recorded inside a
 * real PyTorch Pipe); outputs and gradients equal the same layers run on
 * those micro-batches one after another on one device, and DeferredBatchNorm's
 * running statistics equal one BatchNorm's over each whole mini-batch.
 */

import assert from "node:assert/strict";
import {
  cat,
  type Device,
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

interface Case {
  rows: number;
  chunks: number;
  /** Rows of each micro-batch of one tensor input. */
  single: number[];
  /** Per micro-batch: rows of x, rows of y, rows of the NoChunk w, and "t". */
  tuple: (number | string)[][];
}
const FIXTURE: { cases: Case[] } = JSON.parse(
  await Deno.readTextFile(new URL("./fixtures/torch_pipe_chunks.json", import.meta.url)),
);

function test(name: string, fn: () => Promise<void> | void): void {
  Deno.test({ name, sanitizeOps: false, sanitizeResources: false, fn });
}

/** Identity that records the rows of each call (no parameters: it joins the partition before). */
class Record extends nn.Module {
  rows: number[] = [];
  override forward(x: Tensor): Tensor {
    this.rows.push(x.shape[0]);
    return x;
  }
}

/** [N, 5, 3] → [N, 5, 2]: Linear, BatchNorm1d over the 5 channels, Tanh, Linear. */
function bnModel(seed: number, devices: Device[]): [nn.Sequential, Record] {
  manualSeed(seed);
  const record = new Record();
  const model = new nn.Sequential(
    new nn.Linear(3, 4).to(devices[0]),
    record,
    new nn.BatchNorm1d(5, { momentum: 0.3 }).to(devices[1]),
    new nn.Tanh(),
    new nn.Linear(4, 2).to(devices[2]),
  );
  return [model, record];
}

async function gradsOf(model: nn.Module): Promise<number[][]> {
  const out: number[][] = [];
  for (const [name, p] of model.namedParameters()) {
    assert.ok(p.grad, `${name} got a gradient`);
    out.push(Array.from(await p.grad.data()));
  }
  return out;
}

function* placements(): Generator<[string, Device[], number[]]> {
  yield ["cpu:0, cpu:1, cpu:2", [cpus[0], cpus[1], cpus[2]], [1, 2, 3, 4]];
  if (!gpus) return;
  yield ["webgpu:0, webgpu:1, webgpu:0", [gpus[0], gpus[1], gpus[0]], [3]];
  yield ["webgpu:0, cpu:1, webgpu:1", [gpus[0], cpus[1], gpus[1]], [4]];
}

for (const [where, devices, chunkList] of placements()) {
  test(`Pipe with deferredBatchNorm on ${where}, batches 1–9 × chunks ${chunkList}: PyTorch's micro-batch sizes, outputs and gradients of those micro-batches, running statistics of the whole batch`, async () => {
    for (const fx of FIXTURE.cases) {
      if (fx.rows === 0 || !chunkList.includes(fx.chunks)) continue;
      const what = `batch ${fx.rows}, chunks ${fx.chunks}`;
      const [model, record] = bnModel(5, devices);
      const pipe = new parallel.Pipe(model, { chunks: fx.chunks, deferredBatchNorm: true });
      // The same layers on one device: run on PyTorch's micro-batches for the outputs and
      // gradients, and on the whole batch for the running statistics.
      const [perChunk] = bnModel(5, [cpus[0], cpus[0], cpus[0]]);
      const [whole] = bnModel(5, [cpus[0], cpus[0], cpus[0]]);
      // Two mini-batches: the first one's statistics must not leak into the second's.
      for (let step = 0; step < 2; step++) {
        manualSeed(40 + 10 * fx.rows + fx.chunks + step);
        const x = randn([fx.rows, 5, 3]).mul(2).add(0.5);
        const r = randn([fx.rows, 5, 2]);
        record.rows = [];
        const out = pipe.forward(x.to(devices[0]));
        assert.deepEqual(record.rows, fx.single, `${what}: micro-batch rows`);
        assert.equal(out.device, devices[2]);
        assert.deepEqual(out.shape, [fx.rows, 5, 2]);
        const expected = cat(x.split(fx.single, 0).map((c) => perChunk.forward(c)), 0);
        whole.forward(x);
        assertClose(await out.data(), await expected.data(), {
          atol: 1e-5,
          what: `${what}, step ${step}: output`,
        });
        pipe.zeroGrad();
        perChunk.zeroGrad();
        out.mul(r.to(devices[2])).sum().backward();
        expected.mul(r).sum().backward();
        const want = await gradsOf(perChunk);
        (await gradsOf(model)).forEach((g, i) => {
          assertClose(g, want[i], { atol: 1e-5, what: `${what}, step ${step}: grad ${i}` });
        });
        const bn = pipe.at(2) as parallel.DeferredBatchNorm;
        const ref = whole.at(2) as nn.BatchNorm1d;
        assert.equal(bn.tracked, 0, `${what}: every micro-batch committed`);
        assert.equal(await bn.numBatchesTracked!.item(), step + 1, `${what}: num_batches_tracked`);
        assertClose(await bn.runningMean!.data(), await ref.runningMean!.data(), {
          atol: 1e-5,
          what: `${what}, step ${step}: running_mean`,
        });
        assertClose(await bn.runningVar!.data(), await ref.runningVar!.data(), {
          atol: 1e-5,
          what: `${what}, step ${step}: running_var`,
        });
      }
    }
  });
}

/** (x, y, w, tag) → [tanh(fc(x) + y·wᵀ), y], recording each argument's rows. */
class Head extends nn.Module {
  fc = new nn.Linear(3, 4);
  seen: (number | string)[][] = [];
  override forward(x: Tensor, y: Tensor, w: Tensor, tag: string): [Tensor, Tensor] {
    this.seen.push([x.shape[0], y.shape[0], w.shape[0], tag]);
    return [this.fc.forward(x).add(y.matmul(w.t())).tanh(), y];
  }
}

/** (h, y) → fc(h) + gy(y). */
class Tail extends nn.Module {
  fc = new nn.Linear(4, 2);
  gy = new nn.Linear(3, 2);
  override forward(h: Tensor, y: Tensor): Tensor {
    return this.fc.forward(h).add(this.gy.forward(y));
  }
}

function tupleLayers(seed: number, devices: Device[]): [Head, Tail] {
  manualSeed(seed);
  const head = new Head().to(devices[0]);
  return [head, new Tail().to(devices[1])];
}

test("Pipe with a tuple and a NoChunk on cpu:0, cpu:1, batches 0–9 × chunks 1–4: PyTorch's micro-batches (the NoChunk whole in each), outputs and gradients", async () => {
  for (const fx of FIXTURE.cases) {
    const what = `batch ${fx.rows}, chunks ${fx.chunks}`;
    const [head, tail] = tupleLayers(8, [cpus[0], cpus[1]]);
    const pipe = new parallel.Pipe(new nn.Sequential(head, tail), { chunks: fx.chunks });
    const [rHead, rTail] = tupleLayers(8, [cpus[0], cpus[0]]);
    manualSeed(70 + 10 * fx.rows + fx.chunks);
    const [x, y, r] = [randn([fx.rows, 3]), randn([fx.rows, 3]), randn([fx.rows, 2])];
    const w = randn([4, 3]);
    const leaves = () => [x, y, w].map((t) => t.detach().requiresGrad_());
    const [px, py, pw] = leaves();
    const out = pipe.forward(px, py, new parallel.NoChunk(pw), "t");
    assert.deepEqual(head.seen, fx.tuple, `${what}: micro-batch rows of (x, y, w, tag)`);
    assert.deepEqual(out.shape, [fx.rows, 2]);
    assert.equal(out.device, cpus[1]);
    const [rx, ry, rw] = leaves();
    const sizes = fx.tuple.map((s) => s[0] as number);
    const ys = ry.split(sizes, 0);
    const expected = cat(
      rx.split(sizes, 0).map((c, i) => rTail.forward(...rHead.forward(c, ys[i], rw, "t"))),
      0,
    );
    assertClose(await out.data(), await expected.data(), { atol: 1e-5, what: `${what}: output` });
    out.mul(r.to(cpus[1])).sum().backward();
    expected.mul(r).sum().backward();
    for (const [i, [got, want]] of [[px, rx], [py, ry], [pw, rw]].entries()) {
      assertClose(await got.grad!.data(), await want.grad!.data(), {
        atol: 1e-5,
        what: `${what}: input ${i} grad`,
      });
    }
    const want = [...(await gradsOf(rHead)), ...(await gradsOf(rTail))];
    [...(await gradsOf(head)), ...(await gradsOf(tail))].forEach((g, i) => {
      assertClose(g, want[i], { atol: 1e-5, what: `${what}: grad ${i}` });
    });
  }
});

test("Pipe: a 0-dim input has no batch to split, as PyTorch's chunk", () => {
  const pipe = new parallel.Pipe(new nn.Sequential(...tupleLayers(1, cpus)), { chunks: 2 });
  assert.throws(
    () => pipe.forward(randn([4, 3]), zeros([]), new parallel.NoChunk(randn([4, 3])), "t"),
    {
      name: "RangeError",
      message:
        /input 1 of shape \[\] has no batch dim \(dim 0\) to split into micro-batches; give it one, or wrap it in NoChunk/,
    },
  );
  assert.throws(
    () =>
      new parallel.Pipe(new nn.Sequential(new nn.Linear(1, 1)), { chunks: 3 }).forward(zeros([])),
    /the input of shape \[\] has no batch dim \(dim 0\)/,
  );
});
