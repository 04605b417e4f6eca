/**
 * nn against PyTorch 1.13's numbers (tests/fixtures/torch_reference.json):
 * every layer, activation and loss forward and backward, BatchNorm1d's
 * running statistics, Linear's initialisation, Dropout's statistics, and the
 * Module tree API (discovery, modes, devices, state dicts, replication,
 * printing).
 */

import assert from "node:assert/strict";
import {
  type Device,
  manualSeed,
  nn,
  noGrad,
  ones,
  rand,
  randn,
  type Tensor,
  tensor,
  tidy,
  zeros,
} from "../mod.ts";
import { assertClose, assertTensor, backendTest } from "./harness.ts";
import fixtures from "./fixtures/torch_reference.json" with { type: "json" };

const F = nn.functional;
type Nested = number | Nested[];

function tol(device: Device) {
  return device.backend === "cpu" ? { atol: 1e-6, rtol: 1e-5 } : { atol: 1e-4, rtol: 1e-4 };
}

function t(values: Nested, device: Device, requiresGrad = false): Tensor {
  return tensor(values as number[], { device, requiresGrad });
}

function ints(values: number[], device: Device): Tensor {
  return tensor(values, { device, dtype: "int32" });
}

/** Loads fixture parameters (nested arrays) through loadStateDict. */
function loadParams(
  module: nn.Module,
  params: Record<string, Nested | undefined>,
  device: Device,
): void {
  const sd: Record<string, Tensor> = {};
  for (const [k, v] of Object.entries(params)) if (v !== undefined) sd[k] = t(v, device);
  module.loadStateDict(sd, { strict: false });
}

function backwardWith(out: Tensor, g: Nested): void {
  out.mul(t(g, out.device)).sum().backward();
}

function mlp(): nn.Sequential {
  return new nn.Sequential(new nn.Linear(6, 8), new nn.ReLU(), new nn.Linear(8, 3));
}

// ---------------------------------------------------------------- layers vs PyTorch

for (const c of fixtures.linear) {
  backendTest(`Linear ${c.name}: forward and backward match PyTorch`, async (device) => {
    const layer = new nn.Linear(c.in_features, c.out_features, { bias: c.bias, device });
    assert.equal(layer.bias === null, !c.bias);
    loadParams(layer, c.params, device);
    const x = t(c.input, device, true);
    const out = layer.forward(x);
    await assertTensor(out, c.output, { ...tol(device), shape: [2, 3], what: "output" });
    backwardWith(out, c.g);
    await assertTensor(x.grad!, c.grads.input, { ...tol(device), what: "input grad" });
    await assertTensor(layer.weight.grad!, c.grads.weight, { ...tol(device), what: "weight grad" });
    if (c.bias) {
      await assertTensor(layer.bias!.grad!, (c.grads as { bias: number[] }).bias, {
        ...tol(device),
        what: "bias grad",
      });
    }
  });
}

function activation(module: string, kwargs: Record<string, unknown>): nn.Module {
  switch (module) {
    case "ReLU":
      return new nn.ReLU();
    case "Sigmoid":
      return new nn.Sigmoid();
    case "Tanh":
      return new nn.Tanh();
    case "GELU":
      return new nn.GELU({ approximate: kwargs.approximate as "none" });
    case "Softmax":
      return new nn.Softmax(kwargs.dim as number);
    case "LogSoftmax":
      return new nn.LogSoftmax(kwargs.dim as number);
  }
  throw new Error(`unknown activation ${module}`);
}

for (const c of fixtures.activations) {
  backendTest(
    `activation ${c.name}: forward and backward match PyTorch (±1000 inputs)`,
    async (device) => {
      const m = activation(c.module, c.kwargs);
      const x = t(c.input, device, true);
      const out = m.forward(x) as Tensor;
      await assertTensor(out, c.output, { ...tol(device), what: "output" });
      backwardWith(out, c.g);
      await assertTensor(x.grad!, c.grads.input, { ...tol(device), what: "input grad" });
    },
  );
}

backendTest("functional activations equal the modules", async (device) => {
  const x = t(fixtures.activations[0].input, device);
  for (const c of fixtures.activations) {
    const dim = (c.kwargs as { dim?: number }).dim ?? 1;
    const fn: Record<string, (x: Tensor) => Tensor> = {
      ReLU: F.relu,
      Sigmoid: F.sigmoid,
      Tanh: F.tanh,
      GELU: (v) => F.gelu(v),
      Softmax: (v) => F.softmax(v, dim),
      LogSoftmax: (v) => F.logSoftmax(v, dim),
    };
    await assertTensor(fn[c.module](x), c.output, { ...tol(device), what: c.name });
  }
});

Deno.test("F.linear takes the biases the linear op takes, and names shapes otherwise", async () => {
  const x = tensor([[1, 2], [3, 4]]);
  const w = tensor([[1, 0], [0, 1], [1, 1]]);
  await assertTensor(F.linear(x, w, tensor([1])), [[2, 3, 4], [4, 5, 8]]);
  await assertTensor(F.linear(x, w, tensor([1, 2, 3])), [[2, 4, 6], [4, 6, 10]]);
  assert.throws(
    () => F.linear(x, w, tensor([1, 2])),
    /bias of shape \[2\].*weight of shape \[3, 2\]/,
  );
  assert.throws(() => F.linear(x, w, 1 as unknown as Tensor), /linear: bias must be a Tensor/);
});

backendTest("GELU tanh approximation matches its formula", async (device) => {
  const xs = [-3, -1, -0.5, 0, 0.5, 1, 3];
  const expected = xs.map((x) =>
    0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)))
  );
  const m = new nn.GELU({ approximate: "tanh" });
  await assertTensor(m.forward(t(xs, device)), expected, tol(device));
  assert.equal(m.toString(), "GELU(approximate='tanh')");
  assert.throws(
    () => new nn.GELU({ approximate: "fast" as "tanh" }),
    /approximate must be "none" or "tanh"/,
  );
});

backendTest("LayerNorm matches PyTorch (output, input, weight and bias grads)", async (device) => {
  const c = fixtures.layer_norm;
  const ln = new nn.LayerNorm(c.normalized_shape, { eps: c.eps, device });
  assert.deepEqual(Object.keys(ln.stateDict()), ["weight", "bias"]);
  loadParams(ln, c.params, device);
  const x = t(c.input, device, true);
  const out = ln.forward(x);
  await assertTensor(out, c.output, tol(device));
  backwardWith(out, c.g);
  await assertTensor(x.grad!, c.grads.input, { ...tol(device), what: "input grad" });
  await assertTensor(ln.weight!.grad!, c.grads.weight, { ...tol(device), what: "weight grad" });
  await assertTensor(ln.bias!.grad!, c.grads.bias, { ...tol(device), what: "bias grad" });
  assert.equal(ln.toString(), "LayerNorm((5,), eps=1e-05, elementwise_affine=True)");
  const plain = new nn.LayerNorm(5, { elementwiseAffine: false, device });
  assert.equal(plain.parameters().length, 0);
  assert.throws(
    () => plain.forward(zeros([3, 4], { device })),
    /normalized shape \[5\] does not match .*\[3, 4\]/,
  );
});

backendTest(
  "BatchNorm1d: two training steps and eval match PyTorch, buffers included",
  async (device) => {
    const c = fixtures.batch_norm1d;
    const bn = new nn.BatchNorm1d(c.num_features, { eps: c.eps, momentum: c.momentum, device });
    assert.deepEqual(Object.keys(bn.stateDict()), [
      "weight",
      "bias",
      "running_mean",
      "running_var",
      "num_batches_tracked",
    ]);
    assert.equal(bn.numBatchesTracked!.dtype, "int32");
    assert.deepEqual([...bn.numBatchesTracked!.shape], []);
    loadParams(bn, { weight: c.params.weight, bias: c.params.bias }, device);
    await assertTensor(bn.runningMean!, c.initial_buffers.running_mean);
    await assertTensor(bn.runningVar!, c.initial_buffers.running_var);
    bn.train();
    for (const [i, step] of c.train_steps.entries()) {
      bn.zeroGrad();
      const x = t(step.input, device, true);
      const out = bn.forward(x);
      await assertTensor(out, step.output, { ...tol(device), what: `step ${i} output` });
      backwardWith(out, step.g);
      await assertTensor(x.grad!, step.grads.input, {
        ...tol(device),
        what: `step ${i} input grad`,
      });
      await assertTensor(bn.weight!.grad!, step.grads.weight, {
        ...tol(device),
        what: `step ${i} weight grad`,
      });
      await assertTensor(bn.bias!.grad!, step.grads.bias, {
        ...tol(device),
        what: `step ${i} bias grad`,
      });
      await assertTensor(bn.runningMean!, step.buffers_after.running_mean, {
        ...tol(device),
        what: `step ${i} running_mean`,
      });
      await assertTensor(bn.runningVar!, step.buffers_after.running_var, {
        ...tol(device),
        what: `step ${i} running_var`,
      });
      assert.equal(await bn.numBatchesTracked!.item(), step.buffers_after.num_batches_tracked);
    }
    bn.eval();
    bn.zeroGrad();
    const ev = c.eval;
    const x = t(ev.input, device, true);
    const out = bn.forward(x);
    await assertTensor(out, ev.output, { ...tol(device), what: "eval output" });
    backwardWith(out, ev.g);
    await assertTensor(x.grad!, ev.grads.input, { ...tol(device), what: "eval input grad" });
    await assertTensor(bn.weight!.grad!, ev.grads.weight, {
      ...tol(device),
      what: "eval weight grad",
    });
    await assertTensor(bn.bias!.grad!, ev.grads.bias, { ...tol(device), what: "eval bias grad" });
    await assertTensor(bn.runningMean!, ev.buffers_after.running_mean, {
      ...tol(device),
      what: "eval running_mean",
    });
    await assertTensor(bn.runningVar!, ev.buffers_after.running_var, {
      ...tol(device),
      what: "eval running_var",
    });
    assert.equal(await bn.numBatchesTracked!.item(), ev.buffers_after.num_batches_tracked);
    assert.equal(
      bn.toString(),
      "BatchNorm1d(4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)",
    );
  },
);

/** float64 reference batch norm over [N, C, L] (channel dim 1). */
function batchNorm3d(x: number[][][], eps: number) {
  const [n, c, l] = [x.length, x[0].length, x[0][0].length];
  const mean: number[] = [];
  const biased: number[] = [];
  const out = x.map((row) => row.map((ch) => ch.map(() => 0)));
  for (let j = 0; j < c; j++) {
    const vals = x.flatMap((row) => row[j]);
    const m = vals.reduce((a, b) => a + b, 0) / vals.length;
    const v = vals.reduce((a, b) => a + (b - m) ** 2, 0) / vals.length;
    mean.push(m);
    biased.push(v);
    for (let i = 0; i < n; i++) {
      for (let k = 0; k < l; k++) out[i][j][k] = (x[i][j][k] - m) / Math.sqrt(v + eps);
    }
  }
  return { out, mean, unbiased: biased.map((v) => (v * n * l) / (n * l - 1)) };
}

backendTest("BatchNorm1d on [N, C, L] inputs, cumulative momentum, no tracking", async (device) => {
  manualSeed(5);
  const x = randn([4, 3, 5], { device });
  const values = (await x.toArray()) as number[][][];
  const ref = batchNorm3d(values, 1e-5);
  const bn = new nn.BatchNorm1d(3, { momentum: null, device });
  await assertTensor(bn.forward(x), ref.out.flat(2), { ...tol(device), shape: [4, 3, 5] });
  // With momentum null the first batch's statistics replace the initial ones (factor 1/1).
  await assertTensor(bn.runningMean!, ref.mean, tol(device));
  await assertTensor(bn.runningVar!, ref.unbiased, tol(device));
  assert.equal(
    bn.toString(),
    "BatchNorm1d(3, eps=1e-05, momentum=None, affine=True, track_running_stats=True)",
  );

  const free = new nn.BatchNorm1d(3, { trackRunningStats: false, affine: false, device });
  assert.deepEqual(Object.keys(free.stateDict()), []);
  assert.equal(free.runningMean, null);
  free.eval();
  await assertTensor(free.forward(x), ref.out.flat(2), tol(device));
});

backendTest("BatchNorm1d: a bad input throws before any buffer changes", async (device) => {
  const bn = new nn.BatchNorm1d(4, { device });
  assert.throws(() => bn.forward(zeros([6, 3], { device })), /3 channels \(dim 1\), expected 4/);
  assert.throws(
    () => bn.forward(zeros([6], { device })),
    /2D \[N, C\] or 3D \[N, C, L\] input, got shape \[6\]/,
  );
  assert.throws(
    () => bn.forward(zeros([1, 4], { device })),
    /more than 1 value per channel when training/,
  );
  assert.equal(await bn.numBatchesTracked!.item(), 0);
  await assertTensor(bn.runningMean!, [0, 0, 0, 0]);
  bn.eval();
  await assertTensor(bn.forward(ones([1, 4], { device })), [1, 1, 1, 1], { atol: 1e-4 });
  assert.throws(() => new nn.BatchNorm1d(0), /positive integer/);
  assert.throws(() => new nn.BatchNorm1d(2, { momentum: 2 }), /momentum must be in \[0, 1\]/);
});

// ---------------------------------------------------------------- losses

for (const c of fixtures.losses) {
  backendTest(`loss ${c.name}: value and gradient match PyTorch`, async (device) => {
    const x = t(c.input, device, true);
    const target = c.module === "MSELoss"
      ? t(c.target as Nested, device)
      : ints(c.target as number[], device);
    const m = c.module === "MSELoss" ? new nn.MSELoss() : new nn.CrossEntropyLoss();
    const loss = (m as nn.MSELoss).forward(x, target);
    assert.deepEqual([...loss.shape], []);
    assertClose(await loss.item(), c.loss, { ...tol(device), what: "loss" });
    loss.backward();
    await assertTensor(x.grad!, c.grads.input, { ...tol(device), what: "input grad" });
    const fn = c.module === "MSELoss" ? F.mseLoss : F.crossEntropy;
    assertClose(await fn(x.detach(), target).item(), c.loss, tol(device));
  });
}

/** float64 reference cross entropy (mean over non-ignored, weighted, smoothed). */
function crossEntropyRef(
  logits: number[][],
  target: number[],
  opts: { weight?: number[]; ignoreIndex?: number; smoothing?: number } = {},
): number {
  const c = logits[0].length;
  const w = opts.weight ?? new Array(c).fill(1);
  const eps = opts.smoothing ?? 0;
  let nll = 0;
  let smooth = 0;
  let denom = 0;
  logits.forEach((row, i) => {
    if (target[i] === (opts.ignoreIndex ?? -100)) return;
    const max = Math.max(...row);
    const lse = max + Math.log(row.reduce((a, v) => a + Math.exp(v - max), 0));
    const logp = row.map((v) => v - lse);
    nll += -w[target[i]] * logp[target[i]];
    smooth += -logp.reduce((a, v, j) => a + w[j] * v, 0);
    denom += w[target[i]];
  });
  return (1 - eps) * (nll / denom) + (eps / c) * (smooth / denom);
}

backendTest(
  "crossEntropy: ignoreIndex, class weights, label smoothing, probability targets, reductions",
  async (device) => {
    const logits = [[1, 2, 0.5], [0.1, -1, 3], [2, 2, 2], [-1, 0, 1]];
    const target = [0, 2, -100, 1];
    const x = t(logits, device);
    const y = ints(target, device);
    const w = [0.2, 1, 3];
    assertClose(await F.crossEntropy(x, y).item(), crossEntropyRef(logits, target), tol(device));
    assertClose(
      await F.crossEntropy(x, y, { weight: t(w, device) }).item(),
      crossEntropyRef(logits, target, { weight: w }),
      tol(device),
    );
    assertClose(
      await F.crossEntropy(x, y, { labelSmoothing: 0.1 }).item(),
      crossEntropyRef(logits, target, { smoothing: 0.1 }),
      tol(device),
    );
    assertClose(
      await F.crossEntropy(x, y, { labelSmoothing: 0.2, weight: t(w, device) }).item(),
      crossEntropyRef(logits, target, { smoothing: 0.2, weight: w }),
      tol(device),
    );
    const none = F.crossEntropy(x, y, { reduction: "none" });
    assert.deepEqual([...none.shape], [4]);
    const perSample = (await none.data()) as Float32Array;
    assertClose(perSample[2], 0);
    assertClose(
      await F.crossEntropy(x, y, { reduction: "sum" }).item(),
      perSample.reduce((a, b) => a + b, 0),
      tol(device),
    );
    // Probabilities: one-hot rows equal class indices (without ignored rows).
    const probs = t([[1, 0, 0], [0, 0, 1], [0, 1, 0]], device);
    const three = t(logits.filter((_, i) => i !== 2), device);
    assertClose(
      await F.crossEntropy(three, probs).item(),
      await F.crossEntropy(three, ints([0, 2, 1], device)).item(),
      tol(device),
    );
    // [N, C, d] with the class in dim 1.
    const x3 = t([[[1, 0], [2, 3], [0.5, -1]]], device);
    const y3 = tensor([[1, 0]], { device, dtype: "int32" });
    const ref3 = crossEntropyRef([[1, 2, 0.5], [0, 3, -1]], [1, 0]);
    assertClose(await F.crossEntropy(x3, y3).item(), ref3, tol(device));
    assert.throws(
      () => F.crossEntropy(x, ints([0, 1], device)),
      /target of shape \[2\] does not fit input of shape \[4, 3\]/,
    );
    assert.throws(() => F.crossEntropy(x, y, { reduction: "avg" as "mean" }), /reduction must be/);
  },
);

backendTest("MSELoss reductions and shape errors", async (device) => {
  const a = t([[1, 2], [3, 4]], device);
  const b = t([[0, 2], [5, 4]], device);
  assertClose(await new nn.MSELoss().forward(a, b).item(), 5 / 4);
  assertClose(await new nn.MSELoss({ reduction: "sum" }).forward(a, b).item(), 5);
  await assertTensor(new nn.MSELoss({ reduction: "none" }).forward(a, b), [1, 0, 4, 0], {
    shape: [2, 2],
  });
  assert.throws(
    () => F.mseLoss(a, t([1, 2], device)),
    /input of shape \[2, 2\] and target of shape \[2\] differ/,
  );
});

// ---------------------------------------------------------------- an MLP, end to end

backendTest("Sequential MLP forward, loss and gradients match PyTorch", async (device) => {
  const model = mlp().to(device);
  model.loadStateDict(
    Object.fromEntries(Object.entries(fixtures.mlp.params).map(([k, v]) => [k, t(v, device)])),
  );
  const out = model.forward(t(fixtures.mlp.input, device));
  await assertTensor(out, fixtures.parallel.output, { ...tol(device), shape: [10, 3] });
  const loss = new nn.CrossEntropyLoss().forward(out, ints(fixtures.mlp.target, device));
  assertClose(await loss.item(), fixtures.parallel.loss, tol(device));
  loss.backward();
  for (const [name, p] of model.namedParameters()) {
    await assertTensor(p.grad!, (fixtures.parallel.grads as Record<string, Nested[]>)[name], {
      ...tol(device),
      what: name,
    });
  }
});

// ---------------------------------------------------------------- initialisation

for (const c of fixtures.linear_init) {
  backendTest(
    `Linear(${c.in_features}, ${c.out_features}) init: shapes and PyTorch's bounds`,
    async (device) => {
      manualSeed(700);
      const layer = new nn.Linear(c.in_features, c.out_features, { device });
      assert.deepEqual([...layer.weight.shape], c.weight_shape);
      assert.deepEqual([...layer.bias!.shape], c.bias_shape);
      assert.ok(layer.weight.requiresGrad && layer.weight.isLeaf);
      assert.ok(layer.weight.storage.persistent);
      const w = Array.from(await layer.weight.data());
      const b = Array.from(await layer.bias!.data());
      for (const v of w) {
        assert.ok(Math.abs(v) <= c.weight_bound, `weight ${v} beyond ${c.weight_bound}`);
      }
      for (const v of b) {
        assert.ok(Math.abs(v) <= c.bias_bound, `bias ${v} beyond ${c.bias_bound}`);
      }
      if (c.in_features === 0) assert.deepEqual([...b], [0, 0, 0]);
      if (w.length > 10_000) {
        // Uniform over the whole interval: the extremes come close to the bound, as PyTorch's do.
        const min = w.reduce((a, v) => Math.min(a, v), Infinity);
        const max = w.reduce((a, v) => Math.max(a, v), -Infinity);
        assert.ok(
          min < -0.99 * c.weight_bound && max > 0.99 * c.weight_bound,
          `range [${min}, ${max}]`,
        );
        assertClose(min, c.observed.weight_min!, { atol: 0.01 * c.weight_bound, rtol: 0 });
        assertClose(max, c.observed.weight_max!, { atol: 0.01 * c.weight_bound, rtol: 0 });
        const mean = w.reduce((a, v) => a + v, 0) / w.length;
        assert.ok(Math.abs(mean) < 0.01 * c.weight_bound, `mean ${mean}`);
      }
    },
  );
}

backendTest("the same seed gives the same Linear initialisation", async (device) => {
  manualSeed(42);
  const a = new nn.Linear(5, 4, { device });
  manualSeed(42);
  const b = new nn.Linear(5, 4, { device });
  assert.deepEqual(await a.weight.data(), await b.weight.data());
  assert.deepEqual(await a.bias!.data(), await b.bias!.data());
  const c = new nn.Linear(5, 4, { device });
  assert.notDeepEqual(await a.weight.data(), await c.weight.data());
});

// ---------------------------------------------------------------- dropout

backendTest(
  "Dropout: fraction zeroed, scaling, gradient, eval identity, p = 0 and 1",
  async (device) => {
    manualSeed(1);
    const n = 100_000;
    for (const p of [0.1, 0.5, 0.8]) {
      const drop = new nn.Dropout(p);
      const x = ones([n], { device, requiresGrad: true });
      const y = drop.forward(x);
      const values = await y.data();
      let zeros = 0;
      for (const v of values) {
        if (v === 0) zeros++;
        else assertClose(v, 1 / (1 - p), { rtol: 1e-6, what: "kept value" });
      }
      const sd = Math.sqrt(p * (1 - p) / n);
      assert.ok(Math.abs(zeros / n - p) < 5 * sd, `p=${p}: fraction zeroed ${zeros / n}`);
      y.sum().backward();
      // The gradient is the same scaled mask.
      assert.deepEqual(await x.grad!.data(), values);
    }
    const drop = new nn.Dropout(0.5);
    const x = randn([4, 5], { device });
    drop.eval();
    assert.equal(drop.forward(x), x);
    assert.equal(new nn.Dropout(0).forward(x), x);
    await assertTensor(new nn.Dropout(1).forward(x), new Array(20).fill(0));
    assert.equal(F.dropout(x, 0.5, false), x);
    assert.throws(() => new nn.Dropout(1.5), /between 0 and 1, but got 1.5/);
    assert.equal(drop.toString(), "Dropout(p=0.5, inplace=False)");
  },
);

backendTest("Dropout masks come from the seeded stream on the input's device", async (device) => {
  const x = ones([64], { device });
  manualSeed(3);
  const a = await F.dropout(x, 0.5).data();
  manualSeed(3);
  const b = await F.dropout(x, 0.5).data();
  assert.deepEqual(a, b);
  assert.equal(F.dropout(x, 0.5).device, device);
});

// ---------------------------------------------------------------- the Module tree

class Block extends nn.Module {
  fc = new nn.Linear(3, 4);
  norm = new nn.BatchNorm1d(4);
  override forward(x: Tensor): Tensor {
    return this.norm.forward(this.fc.forward(x)).relu();
  }
}

class Net extends nn.Module {
  scale = new nn.Parameter(ones([1]));
  block1 = new Block();
  drop = new nn.Dropout(0.25);
  head = new nn.Sequential(new nn.Linear(4, 2), new nn.Tanh());
  notAParameter = zeros([2]);
  label = "net";
  override forward(x: Tensor): Tensor {
    return this.head.forward(this.drop.forward(this.block1.forward(x))).mul(this.scale);
  }
}

backendTest(
  "Module discovery: names and order of parameters, buffers, children, modules",
  (_device) => {
    const net = new Net();
    assert.deepEqual(net.namedParameters().map(([n]) => n), [
      "scale",
      "block1.fc.weight",
      "block1.fc.bias",
      "block1.norm.weight",
      "block1.norm.bias",
      "head.0.weight",
      "head.0.bias",
    ]);
    assert.equal(net.parameters().length, 7);
    assert.ok(net.parameters().every((p) => p instanceof nn.Parameter));
    assert.deepEqual(net.namedBuffers().map(([n]) => n), [
      "block1.norm.running_mean",
      "block1.norm.running_var",
      "block1.norm.num_batches_tracked",
    ]);
    assert.equal(net.buffers().length, 3);
    assert.deepEqual(net.namedChildren().map(([n]) => n), ["block1", "drop", "head"]);
    assert.deepEqual(net.children().map((m) => m.constructor.name), [
      "Block",
      "Dropout",
      "Sequential",
    ]);
    assert.deepEqual(net.namedModules().map(([n]) => n), [
      "",
      "block1",
      "block1.fc",
      "block1.norm",
      "drop",
      "head",
      "head.0",
      "head.1",
    ]);
    assert.equal(net.modules()[0], net);
    assert.deepEqual(Object.keys(net.stateDict()), [
      "scale",
      "block1.fc.weight",
      "block1.fc.bias",
      "block1.norm.weight",
      "block1.norm.bias",
      "block1.norm.running_mean",
      "block1.norm.running_var",
      "block1.norm.num_batches_tracked",
      "head.0.weight",
      "head.0.bias",
    ]);
    assert.deepEqual(net.namedParameters("", false).map(([n]) => n), ["scale"]);
    // A parameter shared by two modules is listed once.
    const shared = new nn.Sequential(net.block1.fc, net.block1.fc);
    assert.equal(shared.parameters().length, 2);
    assert.deepEqual(Object.keys(shared.stateDict()), ["0.weight", "0.bias", "1.weight", "1.bias"]);
    assert.equal(shared.children().length, 1);
  },
);

backendTest(
  "train()/eval() propagate; call() is forward; apply() visits every module",
  (device) => {
    const net = new Net().to(device);
    assert.ok(net.modules().every((m) => m.training));
    assert.equal(net.eval(), net);
    assert.ok(net.modules().every((m) => !m.training));
    net.train();
    assert.ok(net.modules().every((m) => m.training));
    net.train(false);
    const x = randn([5, 3], { device });
    const a = net.call(x);
    assert.deepEqual([...a.shape], [5, 2]);
    const seen: string[] = [];
    net.apply((m) => seen.push(m.constructor.name));
    assert.deepEqual(seen, [
      "Linear",
      "BatchNorm1d",
      "Block",
      "Dropout",
      "Linear",
      "Tanh",
      "Sequential",
      "Net",
    ]);
    assert.throws(() => new nn.Module().forward(), /forward is not implemented/);
  },
);

backendTest(
  "to(device) keeps parameter identity and moves values, gradients and buffers",
  async (device, devices) => {
    const other = devices[1];
    manualSeed(11);
    const net = new Net().to(device);
    const params = net.parameters();
    const before = await Promise.all(params.map((p) => p.data()));
    const x = randn([6, 3], { device });
    net.forward(x).sum().backward();
    const grads = await Promise.all(params.map((p) => p.grad!.data()));
    assert.equal(net.to(other), net);
    const after = net.parameters();
    after.forEach((p, i) => {
      assert.equal(p, params[i], "same Parameter object");
      assert.equal(p.device, other);
      assert.equal(p.grad!.device, other);
      assert.ok(p.requiresGrad && p.storage.persistent);
    });
    for (const [i, p] of after.entries()) {
      assert.deepEqual(await p.data(), before[i]);
      assert.deepEqual(await p.grad!.data(), grads[i]);
    }
    for (const b of net.buffers()) assert.equal(b.device, other);
    assert.equal(net.block1.norm.runningMean!.device, other);
    assert.equal(await net.block1.norm.numBatchesTracked!.item(), 1);
    // Still trainable where it is now.
    net.zeroGrad();
    net.forward(randn([6, 3], { device: other })).sum().backward();
    assert.equal(net.scale.grad!.device, other);
    net.to(device);
    assert.equal(net.scale.device, device);
  },
);

backendTest("zeroGrad: to null with the memory released, or zeroed in place", async (device) => {
  const layer = new nn.Linear(3, 2, { device });
  layer.forward(ones([4, 3], { device })).sum().backward();
  const old = layer.weight.grad!;
  layer.zeroGrad(false);
  assert.equal(layer.weight.grad, old);
  await assertTensor(old, [0, 0, 0, 0, 0, 0]);
  layer.zeroGrad();
  assert.equal(layer.weight.grad, null);
  assert.equal(layer.bias!.grad, null);
  assert.ok(old.storage.disposed);
  await assert.rejects(() => old.data(), /released/);
});

backendTest("toString prints PyTorch's repr, nested", (_device) => {
  class DataParallelModel extends nn.Module {
    block1 = new nn.Linear(10, 20);
    override forward(x: Tensor): Tensor {
      return this.block1.forward(x);
    }
  }
  assert.equal(
    new DataParallelModel().toString(),
    "DataParallelModel(\n  (block1): Linear(in_features=10, out_features=20, bias=True)\n)",
  );
  assert.equal(
    new Net().toString(),
    [
      "Net(",
      "  (block1): Block(",
      "    (fc): Linear(in_features=3, out_features=4, bias=True)",
      "    (norm): BatchNorm1d(4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)",
      "  )",
      "  (drop): Dropout(p=0.25, inplace=False)",
      "  (head): Sequential(",
      "    (0): Linear(in_features=4, out_features=2, bias=True)",
      "    (1): Tanh()",
      "  )",
      ")",
    ].join("\n"),
  );
  assert.equal(
    new nn.Linear(2, 3, { bias: false }).toString(),
    "Linear(in_features=2, out_features=3, bias=False)",
  );
  assert.equal(`${new nn.ReLU()}`, "ReLU()");
  assert.equal(new nn.Flatten().toString(), "Flatten(start_dim=1, end_dim=-1)");
  assert.equal(new nn.Identity().toString(), "Identity()");
  assert.equal(new nn.CrossEntropyLoss().toString(), "CrossEntropyLoss()");
  assert.equal(new nn.Softmax(1).toString(), "Softmax(dim=1)");
});

backendTest("Flatten, Identity, Sequential helpers and Parameter", (device) => {
  const x = randn([2, 3, 4], { device });
  assert.deepEqual([...new nn.Flatten().forward(x).shape], [2, 12]);
  assert.deepEqual([...new nn.Flatten(0).forward(x).shape], [24]);
  assert.equal(new nn.Identity().forward(x), x);
  const seq = new nn.Sequential(new nn.Flatten(), new nn.Linear(12, 2, { device }));
  assert.equal(seq.length, 2);
  assert.ok(seq.at(-1) instanceof nn.Linear);
  assert.deepEqual([...seq].map((m) => m.constructor.name), ["Flatten", "Linear"]);
  assert.deepEqual([...seq.forward(x).shape], [2, 2]);
  seq.append(new nn.ReLU());
  assert.deepEqual(seq.namedChildren().map(([n]) => n), ["0", "1", "2"]);
  assert.throws(
    () => new nn.Sequential(new nn.ReLU(), {} as nn.Module),
    /argument 1 is not an nn.Module/,
  );
  const p = new nn.Parameter(zeros([2, 2], { device }));
  assert.ok(p.requiresGrad && p.isLeaf && p.storage.persistent);
  assert.match(p.toString(), /^Parameter\(shape=\[2, 2\]/);
  assert.equal(new nn.Parameter(zeros([1]), false).requiresGrad, false);
  assert.throws(() => new nn.Parameter(zeros([1], { dtype: "int32" })), /only floating-point/);
  // Parameters survive tidy scopes.
  const made = tidy(() => new nn.Linear(2, 2, { device }));
  assert.equal(made.weight.storage.disposed, false);
});

backendTest("registerBuffer: fields, names, persistence and errors", (device) => {
  class WithBuffers extends nn.Module {
    step: Tensor;
    cache: Tensor;
    w = new nn.Parameter(ones([2], { device }));
    constructor() {
      super();
      this.step = this.registerBuffer("step_count", zeros([], { device }), { field: "step" });
      this.cache = this.registerBuffer("cache_values", zeros([2], { device }), {
        persistent: false,
      });
    }
  }
  const m = new WithBuffers();
  assert.equal((m as unknown as Record<string, Tensor>).cacheValues, m.cache);
  assert.deepEqual(m.namedBuffers().map(([n]) => n), ["step_count", "cache_values"]);
  assert.deepEqual(Object.keys(m.stateDict()), ["w", "step_count"]);
  assert.ok(m.step.storage.persistent);
  assert.throws(() => m.registerBuffer("w", zeros([2])), /already holds a Parameter/);
  assert.throws(() => m.registerBuffer("a.b", zeros([2])), /without "."/);
});

// ---------------------------------------------------------------- state dicts

backendTest("stateDict round trip into a fresh model gives the same outputs", async (device) => {
  manualSeed(1);
  const a = new Net().to(device).eval();
  a.block1.norm.train();
  a.block1.norm.forward(randn([8, 4], { device }));
  a.block1.norm.eval();
  manualSeed(2);
  const b = new Net().to(device).eval();
  const x = randn([5, 3], { device });
  assert.notDeepEqual(await a.forward(x).data(), await b.forward(x).data());
  const sd = a.stateDict();
  assert.ok(Object.values(sd).every((v) => !v.requiresGrad));
  assert.equal(
    sd["block1.fc.weight"].storage,
    a.block1.fc.weight.storage,
    "shares storage as PyTorch",
  );
  const result = b.loadStateDict(sd);
  assert.deepEqual(result, { missingKeys: [], unexpectedKeys: [] });
  assert.deepEqual(await a.forward(x).data(), await b.forward(x).data());
  assert.equal(await b.block1.norm.numBatchesTracked!.item(), 1);
  // The copy is independent of the source.
  noGrad(() => a.scale._assign(tensor([5], { device })));
  assert.deepEqual([...(await b.scale.data())], [1]);
});

backendTest(
  "loadStateDict: a checkpoint without num_batches_tracked loads, with 0 (as PyTorch)",
  async (device) => {
    const bn = new nn.BatchNorm1d(2, { device });
    bn.forward(randn([4, 2], { device }));
    assert.equal(await bn.numBatchesTracked!.item(), 1);
    const sd = bn.stateDict();
    delete sd["num_batches_tracked"];
    const result = bn.loadStateDict(sd);
    assert.deepEqual(result, { missingKeys: [], unexpectedKeys: [] });
    assert.equal(await bn.numBatchesTracked!.item(), 0);
    // Any other missing buffer is still an error.
    delete sd["running_mean"];
    assert.throws(() => bn.loadStateDict(sd), /missing key\(s\) in state dict: "running_mean"/);
  },
);

backendTest("loadStateDict across devices and dtypes", async (device, devices) => {
  const a = new nn.Linear(3, 2, { device: devices[1] });
  const b = new nn.Linear(3, 2, { device });
  b.loadStateDict(a.stateDict());
  assert.deepEqual(await b.weight.data(), await a.weight.data());
  assert.equal(b.weight.device, device);
  const bn = new nn.BatchNorm1d(2, { device });
  const sd = bn.stateDict();
  sd.num_batches_tracked = tensor(7, { device });
  bn.loadStateDict(sd);
  assert.equal(bn.numBatchesTracked!.dtype, "int32");
  assert.equal(await bn.numBatchesTracked!.item(), 7);
});

backendTest(
  "loadStateDict errors name the key and shapes, and leave the module unchanged",
  async (device) => {
    const model = mlp().to(device);
    const before = await Promise.all(model.parameters().map((p) => p.data()));
    const good = () => Object.fromEntries(Object.entries(mlp().to(device).stateDict()));
    const missing = good();
    delete missing["2.bias"];
    missing["0.weight"] = zeros([8, 6], { device });
    assert.throws(() => model.loadStateDict(missing), /missing key\(s\) in state dict: "2.bias"/);
    const unexpected = { ...good(), "3.weight": zeros([1], { device }) };
    assert.throws(
      () => model.loadStateDict(unexpected),
      /unexpected key\(s\) in state dict: "3.weight"/,
    );
    const wrong = { ...good(), "2.weight": zeros([4, 8], { device }) };
    assert.throws(
      () => model.loadStateDict(wrong),
      /size mismatch for "2.weight": copying a tensor of shape \[4, 8\] from the state dict, the shape in the current model is \[3, 8\]/,
    );
    const notTensor = { ...good(), "0.bias": [1, 2] as unknown as Tensor };
    assert.throws(() => model.loadStateDict(notTensor), /value for "0.bias" is not a Tensor/);
    assert.throws(
      () => model.loadStateDict(null as unknown as Record<string, Tensor>),
      /plain object of tensors/,
    );
    const after = await Promise.all(model.parameters().map((p) => p.data()));
    assert.deepEqual(after, before, "module unchanged");
    // Not strict: missing and unexpected keys are reported, present ones loaded.
    const partial = { "0.weight": zeros([8, 6], { device }), extra: zeros([1], { device }) };
    const result = model.loadStateDict(partial, { strict: false });
    assert.deepEqual(result, {
      missingKeys: ["0.bias", "2.weight", "2.bias"],
      unexpectedKeys: ["extra"],
    });
    await assertTensor(model.parameters()[0], new Array(48).fill(0));
    // A wrong shape throws even when not strict.
    assert.throws(
      () => model.loadStateDict({ "0.bias": zeros([9], { device }) }, { strict: false }),
      /\[9\].*\[8\]/,
    );
  },
);

// ---------------------------------------------------------------- replication

backendTest(
  "_replicateWith: a structural copy with substituted parameters and buffers",
  async (device, devices) => {
    manualSeed(4);
    const net = new Net().to(device);
    const calls: [string, string][] = [];
    const replica = net._replicateWith((t, kind, name) => {
      calls.push([kind, name]);
      return kind === "parameter" ? t.mul(2) : t.to(devices[1]).to(device).clone();
    });
    assert.deepEqual(calls, [
      ["parameter", "scale"],
      ["parameter", "block1.fc.weight"],
      ["parameter", "block1.fc.bias"],
      ["parameter", "block1.norm.weight"],
      ["parameter", "block1.norm.bias"],
      ["buffer", "block1.norm.running_mean"],
      ["buffer", "block1.norm.running_var"],
      ["buffer", "block1.norm.num_batches_tracked"],
      ["parameter", "head.0.weight"],
      ["parameter", "head.0.bias"],
    ]);
    assert.ok(replica instanceof Net);
    assert.notEqual(replica, net);
    assert.notEqual(replica.block1, net.block1);
    assert.ok(replica.block1 instanceof Block);
    assert.ok(replica.head instanceof nn.Sequential);
    assert.equal(replica.label, "net");
    assert.equal(replica.notAParameter, net.notAParameter);
    assert.equal(replica.toString(), net.toString());
    // Replacements are not Parameters: not listed, as PyTorch's replicas; buffers are.
    assert.equal(replica.parameters().length, 0);
    assert.equal(replica.buffers().length, 3);
    assert.notEqual(replica.block1.norm.runningMean, net.block1.norm.runningMean);
    assert.ok(!(replica.block1.fc.weight instanceof nn.Parameter));
    // The original is untouched, and gradients flow back to it through the mapping.
    assert.equal(net.parameters().length, 7);
    assert.ok(net.block1.fc.weight instanceof nn.Parameter);
    const x = randn([4, 3], { device });
    replica.eval();
    assert.ok(net.training, "modes are per copy");
    replica.forward(x).sum().backward();
    assert.ok(net.block1.fc.weight.grad !== null);
    await assertTensor(
      replica.block1.fc.weight,
      Array.from(await net.block1.fc.weight.data(), (v) => 2 * v),
    );
    // Training the replica's batch norm updates the replica's buffers only.
    replica.train();
    replica.forward(x);
    assert.equal(await replica.block1.norm.numBatchesTracked!.item(), 1);
    assert.equal(await net.block1.norm.numBatchesTracked!.item(), 0);
  },
);

backendTest("_replicateWith keeps sharing and checks the callback", (device) => {
  const lin = new nn.Linear(2, 2, { device });
  const seq = new nn.Sequential(lin, lin);
  let calls = 0;
  const replica = seq._replicateWith((t) => {
    calls++;
    return t.detach();
  });
  assert.equal(calls, 2, "each tensor mapped once");
  assert.equal(replica.at(0), replica.at(1), "shared module stays shared");
  assert.throws(
    () => seq._replicateWith(() => zeros([3])),
    /mapTensor must return a Tensor of shape \[2, 2\] for parameter "0.weight"/,
  );
});

backendTest(
  "memory: forward/backward of a module inside tidy leaves only parameters and gradients",
  async (device) => {
    const model = mlp().to(device);
    const x = randn([10, 6], { device });
    const y = ints(fixtures.mlp.target, device);
    const loss = new nn.CrossEntropyLoss();
    const step = () =>
      tidy(() => {
        model.zeroGrad();
        loss.forward(model.forward(x), y).backward();
      });
    // Reads let queued work (the copies of .to(), frees behind them) run before measuring.
    step();
    await model.parameters()[0].grad!.data();
    const used = device.memory().bytesInUse;
    for (let i = 0; i < 20; i++) step();
    await model.parameters()[0].grad!.data();
    // Not more (tensors of earlier tests may be collected meanwhile, hence not "equal").
    assert.ok(device.memory().bytesInUse <= used, `${device.memory().bytesInUse} > ${used} bytes`);
    // Dropout and BatchNorm too.
    const net = new Net().to(device);
    const netStep = () =>
      tidy(() => {
        net.zeroGrad();
        net.forward(rand([6, 3], { device })).sum().backward();
      });
    netStep();
    await net.scale.grad!.data();
    const used2 = device.memory().bytesInUse;
    for (let i = 0; i < 20; i++) netStep();
    await net.scale.grad!.data();
    assert.ok(
      device.memory().bytesInUse <= used2,
      `${device.memory().bytesInUse} > ${used2} bytes`,
    );
  },
);
