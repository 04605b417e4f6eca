/**
 * parallel.Pipe (PyTorch 1.13's GPipe `Pipe`) against the same Sequential
 * on one device: outputs, every parameter gradient and several SGD steps,
 * for chunks 1, 2, 3 and each checkpoint mode, on logical cpu devices and on
 * webgpu devices; DeferredBatchNorm against one BatchNorm over the whole
 * batch; the errors.
 */

import assert from "node:assert/strict";
import {
  autograd,
  cat,
  type Device,
  manualSeed,
  nn,
  noGrad,
  optim,
  parallel,
  randn,
  requestDevices,
  type Tensor,
  tensor,
  zeros,
} from "../mod.ts";
import { clockCycles } from "../src/parallel/pipe_schedule.ts";
import { assertClose, BACKENDS } from "./harness.ts";
import fixtures from "./fixtures/torch_pipe.json" with { type: "json" };

const cpus = await requestDevices({ backend: "cpu", count: 3 });
const gpus = BACKENDS.get("webgpu") ?? null;

function test(name: string, fn: () => Promise<void> | void, ignore = false): void {
  Deno.test({ name, ignore, sanitizeOps: false, sanitizeResources: false, fn });
}

/** Linear, Tanh, Linear, ReLU, Linear, with seeded weights, every layer on `d`. */
function mlp(seed: number, d: Device): nn.Sequential {
  manualSeed(seed);
  return new nn.Sequential(
    new nn.Linear(5, 8),
    new nn.Tanh(),
    new nn.Linear(8, 6),
    new nn.ReLU(),
    new nn.Linear(6, 3),
  ).to(d);
}

/** The same model with its three Linear layers on `placement` (layer index → device). */
function placed(seed: number, placement: Device[]): nn.Sequential {
  const model = mlp(seed, cpus[0]);
  [0, 2, 4].forEach((layer, k) => model.at(layer).to(placement[k]));
  return model;
}

async function grads(model: nn.Module): Promise<Map<string, number[]>> {
  const out = new Map<string, number[]>();
  for (const [name, p] of model.namedParameters()) {
    assert.ok(p.grad, `${name} got a gradient`);
    out.set(name, Array.from(await p.grad.data()));
  }
  return out;
}

async function values(model: nn.Module): Promise<Map<string, number[]>> {
  const out = new Map<string, number[]>();
  for (const [name, p] of model.namedParameters()) out.set(name, Array.from(await p.data()));
  return out;
}

function* placements(): Generator<[string, Device[]]> {
  yield ["cpu:0, cpu:1, cpu:2", [cpus[0], cpus[1], cpus[2]]];
  if (gpus) yield ["2 webgpu devices", [gpus[0], gpus[1], gpus[1]]];
  if (gpus) yield ["webgpu + cpu", [gpus[0], cpus[1], cpus[1]]];
}

test("clockCycles equals PyTorch's _clock_cycles (fixture)", () => {
  for (const { m, n, cycles } of fixtures.clock_cycles) {
    assert.deepEqual(clockCycles(m, n), cycles, `m=${m}, n=${n}`);
  }
});

for (
  const [where, device] of [["cpu", cpus[0]], ...(gpus ? [["webgpu", gpus[0]]] : [])] as [
    string,
    Device,
  ][]
) {
  test(`DeferredBatchNorm on ${where} against PyTorch's (fixture): micro-batch outputs, running mean, running variance unbiased`, async () => {
    for (const fx of fixtures.deferred_batch_norm) {
      const bn = new nn.BatchNorm1d(4, { momentum: fx.momentum });
      noGrad(() => {
        bn.weight!._assign(tensor(fx.weight));
        bn.bias!._assign(tensor(fx.bias));
      });
      bn.to(device);
      const deferred = parallel.DeferredBatchNorm.convertDeferredBatchNorm(bn, fx.chunks);
      assert.ok(deferred instanceof parallel.DeferredBatchNorm);
      assert.equal(deferred.weight, bn.weight);
      assert.equal(deferred.runningMean, bn.runningMean);
      let ourVar: number[] = [1, 1, 1, 1];
      for (const [k, step] of fx.steps.entries()) {
        const x = tensor(step.x, { device });
        const ys = x.chunk(fx.chunks).map((c) => deferred.forward(c));
        const y = ys.length === 1 ? ys[0] : cat(ys);
        const what = `rows ${fx.rows}, chunks ${fx.chunks}, momentum ${fx.momentum}, step ${k}`;
        assertClose(await y.data(), step.y.flat(2), { atol: 2e-5, rtol: 1e-4, what });
        assertClose(await bn.runningMean!.data(), step.running_mean, { atol: 1e-5, what });
        assert.deepEqual(await bn.numBatchesTracked!.toArray(), step.num_batches_tracked);
        // PyTorch's running_var takes the biased batch variance; ours the unbiased one.
        const m = fx.momentum ?? 1 / (k + 1);
        const n = fx.rows * 3;
        ourVar = step.running_var.map((v, c) => {
          const previous = k === 0 ? 1 : fx.steps[k - 1].running_var[c];
          const biased = (v - (1 - m) * previous) / m;
          return (1 - m) * ourVar[c] + m * biased * n / (n - 1);
        });
        assertClose(await bn.runningVar!.data(), ourVar, { atol: 1e-5, rtol: 1e-4, what });
      }
    }
  });
}

test("clockCycles: cycle k runs micro-batch i on partition j with i + j = k (PyTorch's _clock_cycles)", () => {
  // PyTorch: list(_clock_cycles(3, 2)) and list(_clock_cycles(2, 3)).
  assert.deepEqual(clockCycles(3, 2), [[[0, 0]], [[1, 0], [0, 1]], [[2, 0], [1, 1]], [[2, 1]]]);
  assert.deepEqual(clockCycles(2, 3), [[[0, 0]], [[1, 0], [0, 1]], [[1, 1], [0, 2]], [[1, 2]]]);
  assert.deepEqual(clockCycles(1, 1), [[[0, 0]]]);
});

test("Pipe: consecutive layers on one device form a partition; parameter-less layers join the one before", () => {
  const model = placed(1, [cpus[0], cpus[1], cpus[1]]);
  const pipe = new parallel.Pipe(model, { chunks: 2 });
  assert.deepEqual(pipe.devices, [cpus[0], cpus[1]]);
  assert.equal(pipe.partitions.length, 2);
  assert.equal((pipe.partitions.at(0) as nn.Sequential).length, 2); // Linear, Tanh
  assert.equal((pipe.partitions.at(1) as nn.Sequential).length, 3);
  assert.equal(pipe.length, 5);
  assert.equal(pipe.at(-1), model.at(4));
  assert.deepEqual([...pipe], [...model]);
  assert.deepEqual(Object.keys(pipe.stateDict()), [
    "partitions.0.0.weight",
    "partitions.0.0.bias",
    "partitions.1.0.weight",
    "partitions.1.0.bias",
    "partitions.1.2.weight",
    "partitions.1.2.bias",
  ]);
  assert.equal(pipe.parameters().length, 6);
});

for (const [where, placement] of placements()) {
  for (const chunks of [1, 2, 3]) {
    for (const checkpoint of ["always", "except_last", "never"] as const) {
      test(`Pipe on ${where}, chunks ${chunks}, checkpoint ${checkpoint}: outputs, gradients and 3 SGD steps equal one device's (batch 7)`, async () => {
        const reference = mlp(11, cpus[0]);
        const model = placed(11, placement);
        const pipe = new parallel.Pipe(model, { chunks, checkpoint });
        const first = placement[0];
        const last = placement[2];
        const refOpt = new optim.SGD(reference.parameters(), { lr: 0.1 });
        const opt = new optim.SGD(pipe.parameters(), { lr: 0.1 });
        for (let step = 0; step < 3; step++) {
          manualSeed(100 + step);
          const x = randn([7, 5]);
          const target = randn([7, 3]);
          const expected = reference.forward(x);
          const out = pipe.forward(x.to(first));
          assert.equal(out.device, last);
          assert.deepEqual(out.shape, [7, 3]);
          assertClose(await out.data(), await expected.data(), { what: `output, step ${step}` });
          refOpt.zeroGrad();
          opt.zeroGrad();
          nn.functional.mseLoss(expected, target).backward();
          nn.functional.mseLoss(out, target.to(last)).backward();
          const want = await grads(reference);
          for (const [name, g] of await grads(model)) {
            assertClose(g, want.get(name)!, { atol: 1e-6, what: `${name}.grad, step ${step}` });
          }
          refOpt.step();
          opt.step();
        }
        const want = await values(reference);
        for (const [name, v] of await values(model)) {
          assertClose(v, want.get(name)!, { atol: 1e-6, what: `${name} after 3 steps` });
        }
      });
    }
  }
}

test("Pipe: a checkpointed micro-batch keeps no graph inside its partition, and recomputes in backward", () => {
  const model = placed(3, [cpus[0], cpus[1], cpus[2]]);
  const x = randn([4, 5]);
  const always = new parallel.Pipe(model, { chunks: 2, checkpoint: "always" }).forward(x);
  const never = new parallel.Pipe(model, { chunks: 2, checkpoint: "never" }).forward(x);
  const names = (t: Tensor) => {
    const seen = new Set<string>();
    const todo = t.gradFn ? [t.gradFn] : [];
    for (let n = todo.pop(); n; n = todo.pop()) {
      seen.add(n.name);
      todo.push(...n.producers());
    }
    return seen;
  };
  assert.ok(names(always).has("CheckpointBackward"));
  assert.ok(!names(always).has("TanhBackward") && ![...names(always)].some((n) => /tanh/i.test(n)));
  assert.ok(!names(never).has("CheckpointBackward"));
  assert.ok([...names(never)].some((n) => /tanh/i.test(n)));
  // Evaluation or noGrad: nothing is checkpointed (PyTorch's checkpoint_stop = 0).
  const evalPipe = new parallel.Pipe(model, { chunks: 2, checkpoint: "always" }).eval();
  assert.ok(!names(evalPipe.forward(x)).has("CheckpointBackward"));
  model.train();
  assert.equal(
    noGrad(() => new parallel.Pipe(model, { chunks: 2, checkpoint: "always" }).forward(x)).gradFn,
    null,
  );
});

test("Pipe: dropout under checkpointing draws the same mask in the recomputation", async () => {
  const build = () => {
    manualSeed(21);
    const model = new nn.Sequential(
      new nn.Linear(5, 16),
      new nn.Dropout(0.5),
      new nn.Linear(16, 2),
    );
    model.at(2).to(cpus[1]);
    return model;
  };
  const results: Map<string, number[]>[] = [];
  const outs: number[][] = [];
  for (const checkpoint of ["always", "never"] as const) {
    const model = build();
    manualSeed(5);
    const x = randn([6, 5]);
    const out = new parallel.Pipe(model, { chunks: 3, checkpoint }).forward(x);
    out.pow(2).sum().backward();
    outs.push(Array.from(await out.data()));
    results.push(await grads(model));
  }
  assertClose(outs[0], outs[1]);
  for (const [name, g] of results[0]) assertClose(g, results[1].get(name)!, { what: name });
});

test("Pipe: a plain BatchNorm in a checkpointed partition updates its running statistics once per micro-batch, not again in backward", async () => {
  manualSeed(8);
  const bn = new nn.BatchNorm1d(4);
  const model = new nn.Sequential(new nn.Linear(3, 4), bn, new nn.Linear(4, 2).to(cpus[1]));
  const pipe = new parallel.Pipe(model, { chunks: 2, checkpoint: "always" });
  const out = pipe.forward(randn([6, 3]));
  const before = Array.from(await bn.runningMean!.data());
  out.sum().backward();
  assert.deepEqual(await bn.numBatchesTracked!.toArray(), 2);
  assertClose(await bn.runningMean!.data(), before, { atol: 0, rtol: 0 });
});

for (
  const [where, devices] of [
    ["cpu:0, cpu:1", [cpus[0], cpus[1]]],
    ...(gpus ? [["2 webgpu devices", [gpus[0], gpus[1]]]] : []),
  ] as [string, Device[]][]
) {
  test(`Pipe deferredBatchNorm on ${where}: running statistics of the whole batch, as one BatchNorm over it`, async () => {
    const build = (d0: Device, d1: Device) => {
      manualSeed(31);
      const model = new nn.Sequential(
        new nn.Linear(4, 6),
        new nn.BatchNorm1d(6),
        new nn.ReLU(),
        new nn.Linear(6, 2),
      );
      model.to(d0);
      model.at(3).to(d1);
      return model;
    };
    const reference = build(cpus[0], cpus[0]);
    const model = build(devices[0], devices[1]);
    const pipe = new parallel.Pipe(model, {
      chunks: 3,
      deferredBatchNorm: true,
      checkpoint: "always",
    });
    const deferred = model.at(1);
    assert.ok(deferred instanceof parallel.DeferredBatchNorm);
    assert.ok(pipe.at(1) === deferred);
    assert.deepEqual(Object.keys(pipe.stateDict()).filter((k) => k.startsWith("partitions.0.1.")), [
      "partitions.0.1.weight",
      "partitions.0.1.bias",
      "partitions.0.1.running_mean",
      "partitions.0.1.running_var",
      "partitions.0.1.num_batches_tracked",
    ]);
    const refBn = reference.at(1) as nn.BatchNorm1d;
    // Batches 8 ([3, 3, 2] micro-batches) and 6 ([2, 2, 2]), then momentum null (cumulative average).
    for (const [step, rows] of [[0, 8], [1, 6], [2, 8]]) {
      if (step === 2) {
        refBn.momentum = null;
        (deferred as parallel.DeferredBatchNorm).momentum = null;
      }
      manualSeed(40 + step);
      const x = randn([rows, 4]).mul(3).add(1);
      reference.forward(x).sum().backward();
      pipe.forward(x.to(devices[0])).sum().backward();
      const mine = deferred as parallel.DeferredBatchNorm;
      assert.deepEqual(await mine.numBatchesTracked!.toArray(), step + 1);
      assertClose(await mine.runningMean!.data(), await refBn.runningMean!.data(), {
        atol: 1e-5,
        what: `running_mean, step ${step}`,
      });
      assertClose(await mine.runningVar!.data(), await refBn.runningVar!.data(), {
        atol: 1e-4,
        rtol: 1e-4,
        what: `running_var, step ${step}`,
      });
    }
    // Evaluation normalizes with those statistics: the outputs agree.
    pipe.eval();
    reference.eval();
    const x = randn([5, 4]);
    assertClose(await pipe.forward(x.to(devices[0])).data(), await reference.forward(x).data(), {
      atol: 1e-5,
    });
  });
}

test("Pipe without deferredBatchNorm tracks each micro-batch (the statistics differ from the whole batch's)", async () => {
  manualSeed(31);
  const model = new nn.Sequential(new nn.Linear(4, 6), new nn.BatchNorm1d(6), new nn.Linear(6, 2));
  model.at(2).to(cpus[1]);
  const pipe = new parallel.Pipe(model, { chunks: 3 });
  pipe.forward(randn([9, 4]));
  assert.deepEqual(await (model.at(1) as nn.BatchNorm1d).numBatchesTracked!.toArray(), 3);
});

test("Pipe: errors name the sizes, the module and the devices", () => {
  const model = placed(2, [cpus[0], cpus[1], cpus[2]]);
  assert.throws(
    () => new parallel.Pipe(model, { chunks: 4 }).forward(randn([])),
    /the input of shape \[\] has no batch dim \(dim 0\) to split into micro-batches/,
  );
  assert.throws(
    () => new parallel.Pipe(model).forward(randn([3, 5], { device: cpus[1] })),
    /input is on device cpu:1 but the first partition is on cpu:0/,
  );
  assert.throws(
    () => new parallel.Pipe(new nn.Linear(2, 2) as unknown as nn.Sequential),
    /module must be nn.Sequential to be partitioned, got Linear/,
  );
  assert.throws(
    () => new parallel.Pipe(model, { chunks: 0 }),
    /chunks must be a positive integer, got 0/,
  );
  assert.throws(
    () => new parallel.Pipe(model, { checkpoint: "sometimes" as "always" }),
    /checkpoint is not one of 'always', 'except_last', or 'never', got "sometimes"/,
  );
  class Split extends nn.Module {
    weight = new nn.Parameter(zeros([2]));
    bias = new nn.Parameter(zeros([2], { device: cpus[1] }));
  }
  const split = new Split();
  assert.throws(
    () => new parallel.Pipe(new nn.Sequential(split)),
    /layer 0 \(Split\) should have all its parameters and buffers on a single device, but weight is on cpu:0 and bias on cpu:1/,
  );
  const shared = new nn.Linear(2, 2);
  assert.throws(
    () => new parallel.Pipe(new nn.Sequential(shared, shared)),
    /layers 0 and 1 are the same module/,
  );
  assert.throws(() => new parallel.Pipe(new nn.Sequential()), /has no layers/);
});

test("Pipe: double backward through checkpointed micro-batches equals the plain Sequential", async () => {
  // A gradient penalty: the second derivative must reach every partition through the
  // checkpointed micro-batches' inputs (the output of the partition before).
  const results: Map<string, number[]>[] = [];
  for (const pipeIt of [false, true]) {
    // Tanh opens partition 1: its Jacobian depends on partition 0's output, so the second
    // derivative with respect to layer 0 runs back through partition 1's input.
    manualSeed(31);
    const model = new nn.Sequential(
      new nn.Linear(5, 8),
      new nn.Linear(8, 6),
      new nn.Tanh(),
      new nn.Linear(6, 3),
    );
    if (pipeIt) [0, 1, 3].forEach((layer, k) => model.at(layer).to(cpus[k]));
    const net: nn.Module = pipeIt
      ? new parallel.Pipe(model, { chunks: 2, checkpoint: "always" })
      : model;
    manualSeed(5);
    const x = randn([4, 5]);
    const out = (net.forward as (t: Tensor) => Tensor)(x);
    out.pow(2).sum().backward(undefined, { createGraph: true });
    const w = model.at(0).parameters()[0];
    const penalty = w.grad!.pow(2).sum();
    for (const p of model.parameters()) p.grad = null; // zeroGrad would free w.grad's memory
    penalty.backward();
    results.push(await grads(model));
  }
  for (const [name, g] of results[0]) {
    assertClose(results[1].get(name)!, g, { atol: 1e-5, what: `d(penalty)/d${name}` });
  }
});

test("Pipe: a forward that throws mid-schedule leaves no partial DeferredBatchNorm statistics behind", async () => {
  // The layer before the BatchNorm throws on the second micro-batch: the first one has been
  // tracked, the mini-batch never completes. As with one BatchNorm over the whole batch (which
  // the throw comes before), the running statistics must not see it.
  manualSeed(50);
  const model = new nn.Sequential(new nn.Linear(4, 4), new nn.BatchNorm1d(4), new nn.Linear(4, 2));
  const reference = new nn.Sequential(
    new nn.Linear(4, 4),
    new nn.BatchNorm1d(4),
    new nn.Linear(4, 2),
  );
  reference.loadStateDict(model.stateDict());
  let calls = 0;
  let fail = false;
  const thrower = new (class extends nn.Module {
    override forward(t: Tensor): Tensor {
      if (fail && ++calls === 2) throw new Error("boom");
      return t;
    }
  })();
  model.at(2).to(cpus[1]);
  const withThrower = new nn.Sequential(model.at(0), thrower, model.at(1), model.at(2));
  const pipe = new parallel.Pipe(withThrower, { chunks: 2, deferredBatchNorm: true });
  manualSeed(51);
  const bad = randn([4, 4]).mul(10).add(5);
  fail = true;
  assert.throws(() => pipe.forward(bad), /boom/);
  fail = false;
  for (const seed of [52, 53]) {
    manualSeed(seed);
    const x = randn([4, 4]);
    pipe.forward(x).sum().backward();
    reference.forward(x).sum().backward();
  }
  const mine = pipe.at(2) as parallel.DeferredBatchNorm;
  const ref = reference.at(1) as nn.BatchNorm1d;
  assertClose(await mine.runningMean!.data(), await ref.runningMean!.data(), { atol: 1e-5 });
  assertClose(await mine.runningVar!.data(), await ref.runningVar!.data(), { atol: 1e-5 });
  assert.equal(await mine.numBatchesTracked!.item(), 2);
});

test("Pipe: eval mode and noGrad give the plain Sequential's output (dropout off, no checkpoint)", async () => {
  manualSeed(60);
  const model = new nn.Sequential(
    new nn.Linear(5, 6),
    new nn.Dropout(0.5),
    new nn.Linear(6, 3),
  );
  model.at(2).to(cpus[1]);
  const pipe = new parallel.Pipe(model, { chunks: 3, checkpoint: "always" });
  const x = randn([6, 5]);
  pipe.eval();
  assert.equal(model.at(1).training, false, "eval reaches the layers");
  const expected = await noGrad(() =>
    model.at(2).forward((model.at(0).forward(x) as Tensor).to(cpus[1])) as Tensor
  ).data();
  const evalOut = pipe.forward(x);
  assertClose(await evalOut.data(), expected, { atol: 1e-6 });
  assert.ok(evalOut.requiresGrad, "eval mode still records the graph (no checkpoint)");
  pipe.train();
  const plain = noGrad(() => pipe.forward(x));
  assert.equal(plain.gradFn, null);
  assert.equal(plain.requiresGrad, false);
});

test("Pipe: autograd.grad through checkpointed micro-batches gives the plain Sequential's gradients, no .grad touched", async () => {
  const results: number[][][] = [];
  for (const pipeIt of [false, true]) {
    const model = pipeIt ? placed(33, [cpus[0], cpus[1], cpus[2]]) : mlp(33, cpus[0]);
    const net: nn.Module = pipeIt
      ? new parallel.Pipe(model, { chunks: 2, checkpoint: "always" })
      : model;
    manualSeed(6);
    const x = randn([4, 5]).requiresGrad_();
    const out = (net.forward as (t: Tensor) => Tensor)(x);
    const params = model.parameters();
    const found = autograd.grad(out.pow(2).sum(), [x, ...params]);
    assert.ok(params.every((p) => p.grad === null));
    const values: number[][] = [];
    for (const g of found) values.push(Array.from(await g!.data()));
    results.push(values);
  }
  results[0].forEach((g, i) => assertClose(results[1][i], g, { atol: 1e-5, what: `input ${i}` }));
});
