/**
 * optim against PyTorch 1.13: thirteen optimizer runs of five steps on an MLP
 * (tests/fixtures/torch_reference.json; RMSprop and Adagrad in
 * torch_toolkit.json), AMSGrad against a float64 re-derivation, state dict round trips that resume bit for bit, parameter
 * groups, errors, and flat memory over many steps.
 */

import assert from "node:assert/strict";
import {
  type Device,
  manualSeed,
  nn,
  optim,
  randn,
  type Tensor,
  tensor,
  tidy,
  zeros,
} from "../mod.ts";
import { assertClose, assertTensor, backendTest, optimizerByName } from "./harness.ts";
import fixtures from "./fixtures/torch_reference.json" with { type: "json" };
import toolkit from "./fixtures/torch_toolkit.json" with { type: "json" };

type Nested = number | Nested[];
type Run = (typeof fixtures.mlp.runs)[number];

function t(values: Nested, device: Device): Tensor {
  return tensor(values as number[], { device });
}

function mlp(device: Device): nn.Sequential {
  const model = new nn.Sequential(new nn.Linear(6, 8), new nn.ReLU(), new nn.Linear(8, 3)).to(
    device,
  );
  model.loadStateDict(
    Object.fromEntries(Object.entries(fixtures.mlp.params).map(([k, v]) => [k, t(v, device)])),
  );
  return model;
}

function makeOptimizer(run: Run, params: Tensor[]): optim.Optimizer<object> {
  return optimizerByName(run.optimizer, params, run.options as Record<string, unknown>);
}

/** One training step on the fixture batch, inside tidy; the loss is kept for reading. */
function trainStep(
  model: nn.Sequential,
  opt: optim.Optimizer<object>,
  x: Tensor,
  y: Tensor,
): Tensor {
  const lossFn = new nn.CrossEntropyLoss();
  return tidy(() => {
    opt.zeroGrad();
    const loss = lossFn.forward(model.forward(x), y);
    loss.backward();
    opt.step();
    return loss;
  });
}

for (const run of [...fixtures.mlp.runs, ...toolkit.mlp_runs] as Run[]) {
  backendTest(`${run.optimizer} ${run.name}: 5 steps on the MLP match PyTorch`, async (device) => {
    const model = mlp(device);
    const opt = makeOptimizer(run, model.parameters());
    const x = t(fixtures.mlp.input, device);
    const y = tensor(fixtures.mlp.target, { device, dtype: "int32" });
    const cpu = device.backend === "cpu";
    const losses: number[] = [];
    for (let i = 0; i < fixtures.mlp.steps; i++) {
      losses.push(await trainStep(model, opt, x, y).item());
    }
    assertClose(losses, run.losses, {
      atol: cpu ? 1e-6 : 1e-5,
      rtol: cpu ? 1e-5 : 1e-4,
      what: "losses",
    });
    const final = new nn.CrossEntropyLoss().forward(model.forward(x), y);
    assertClose(await final.item(), run.final_loss, {
      atol: cpu ? 1e-6 : 1e-5,
      rtol: cpu ? 1e-5 : 1e-4,
      what: "final loss",
    });
    for (const [name, p] of model.namedParameters()) {
      const expected = (run.final_params as Record<string, Nested[]>)[name];
      await assertTensor(p, expected, {
        atol: cpu ? 1e-6 : 1e-5,
        rtol: cpu ? 1e-5 : 1e-4,
        what: `${run.name} ${name}`,
      });
    }
  });
}

backendTest(
  "Adam with amsgrad and maximize follows PyTorch's rule (float64 re-derivation)",
  async (device) => {
    const p = new nn.Parameter(t([0.5, -1, 2], device));
    const grads = [[0.1, -0.2, 0.3], [-0.5, 0.1, 0.05], [0.01, 0.3, -0.2], [0.2, 0.2, 0.2]];
    const opt = new optim.Adam([p], {
      lr: 0.1,
      amsgrad: true,
      weightDecay: 0.05,
      betas: [0.8, 0.95],
    });
    const ref = [0.5, -1, 2];
    const m = [0, 0, 0];
    const v = [0, 0, 0];
    const vmax = [0, 0, 0];
    grads.forEach((g, s) => {
      p.grad = t(g, device);
      opt.step();
      const step = s + 1;
      for (let i = 0; i < 3; i++) {
        const gi = g[i] + 0.05 * ref[i];
        m[i] = 0.8 * m[i] + 0.2 * gi;
        v[i] = 0.95 * v[i] + 0.05 * gi * gi;
        vmax[i] = Math.max(vmax[i], v[i]);
        const denom = Math.sqrt(vmax[i]) / Math.sqrt(1 - 0.95 ** step) + 1e-8;
        ref[i] -= (0.1 / (1 - 0.8 ** step)) * m[i] / denom;
      }
    });
    await assertTensor(p, ref, { atol: 1e-5, rtol: 1e-5 });
    assert.equal(opt.state.get(p)!.step, 4);
    assert.ok(opt.state.get(p)!.maxExpAvgSq);
    // maximize walks uphill: one SGD step of +lr·grad.
    const q = new nn.Parameter(t([1, 2], device));
    q.grad = t([0.5, -1], device);
    new optim.SGD([q], { lr: 0.1, maximize: true }).step();
    await assertTensor(q, [1.05, 1.9]);
  },
);

for (
  const [name, make] of [
    [
      "SGD momentum nesterov",
      (ps: Tensor[]) => new optim.SGD(ps, { lr: 0.05, momentum: 0.9, nesterov: true }),
    ],
    ["Adam", (ps: Tensor[]) => new optim.Adam(ps, { lr: 0.01 })],
    ["AdamW amsgrad", (ps: Tensor[]) => new optim.AdamW(ps, { lr: 0.01, amsgrad: true })],
    [
      "RMSprop centered momentum",
      (ps: Tensor[]) => new optim.RMSprop(ps, { lr: 0.01, momentum: 0.5, centered: true }),
    ],
    ["Adagrad lrDecay", (ps: Tensor[]) => new optim.Adagrad(ps, { lr: 0.1, lrDecay: 0.1 })],
  ] as const
) {
  backendTest(`${name}: stateDict round trip resumes with identical steps`, async (device) => {
    const x = t(fixtures.mlp.input, device);
    const y = tensor(fixtures.mlp.target, { device, dtype: "int32" });
    const a = mlp(device);
    const optA = make(a.parameters());
    for (let i = 0; i < 2; i++) trainStep(a, optA, x, y);
    // Snapshots: the model's state dict shares storage, so clone it; the optimizer's copies already.
    const modelState = Object.fromEntries(
      Object.entries(a.stateDict()).map(([k, v]) => [k, v.clone()]),
    );
    const optState = optA.stateDict();
    assert.deepEqual(optState.param_groups.map((g) => g.params), [[0, 1, 2, 3]]);
    for (let i = 0; i < 3; i++) trainStep(a, optA, x, y);

    const b = new nn.Sequential(new nn.Linear(6, 8), new nn.ReLU(), new nn.Linear(8, 3)).to(device);
    b.loadStateDict(modelState);
    const optB = make(b.parameters());
    optB.loadStateDict(optState);
    for (let i = 0; i < 3; i++) trainStep(b, optB, x, y);
    const pa = a.parameters();
    const pb = b.parameters();
    for (let i = 0; i < pa.length; i++) {
      assert.deepEqual(await pb[i].data(), await pa[i].data(), `parameter ${i}`);
    }
    // State tensors are independent copies on the parameter's device.
    for (const p of pb) {
      for (const v of Object.values(optB.state.get(p)!)) {
        if (typeof v === "number") continue;
        assert.equal(v.device, device);
        assert.ok(v.storage.persistent);
      }
    }
  });
}

backendTest("stateDict structure: state by index, step counts, hyperparameters", (device) => {
  const model = mlp(device);
  const opt = new optim.Adam([
    { params: model.at(0).parameters() },
    { params: model.at(2).parameters(), lr: 0.5 },
  ], { lr: 0.01, betas: [0.8, 0.9] });
  trainStep(
    model,
    opt,
    t(fixtures.mlp.input, device),
    tensor(fixtures.mlp.target, { device, dtype: "int32" }),
  );
  const sd = opt.stateDict();
  // PyTorch's keys, so the dict moves between the two as is.
  assert.deepEqual(sd.param_groups, [
    {
      lr: 0.01,
      betas: [0.8, 0.9],
      eps: 1e-8,
      weight_decay: 0,
      amsgrad: false,
      maximize: false,
      params: [0, 1],
    },
    {
      lr: 0.5,
      betas: [0.8, 0.9],
      eps: 1e-8,
      weight_decay: 0,
      amsgrad: false,
      maximize: false,
      params: [2, 3],
    },
  ]);
  assert.deepEqual(Object.keys(sd.state), ["0", "1", "2", "3"]);
  assert.equal(sd.state[3].step, 1);
  assert.deepEqual(Object.keys(sd.state[0]), ["step", "exp_avg", "exp_avg_sq"]);
  assert.deepEqual([...(sd.state[0].exp_avg as Tensor).shape], [8, 6]);
  assert.notEqual(sd.state[0].exp_avg, opt.state.get(model.parameters()[0])!.expAvg, "a copy");
  // Loading restores hyperparameters too.
  const other = new optim.Adam([
    { params: model.at(0).parameters() },
    { params: model.at(2).parameters() },
  ]);
  other.loadStateDict(sd);
  assert.equal(other.paramGroups[1].lr, 0.5);
  assert.deepEqual(other.paramGroups[0].betas, [0.8, 0.9]);
  assert.equal(other.state.get(model.parameters()[2])!.step, 1);
});

backendTest("loadStateDict errors leave the optimizer unchanged", async (device) => {
  const model = mlp(device);
  const opt = new optim.SGD(model.parameters(), { lr: 0.1, momentum: 0.9 });
  trainStep(
    model,
    opt,
    t(fixtures.mlp.input, device),
    tensor(fixtures.mlp.target, { device, dtype: "int32" }),
  );
  const sd = opt.stateDict();
  const buffer = opt.state.get(model.parameters()[0])!.momentumBuffer as Tensor;
  const before = await buffer.data();
  const badShape = opt.stateDict();
  badShape.state[0].momentum_buffer = zeros([8, 5], { device });
  assert.throws(
    () => opt.loadStateDict(badShape),
    /state "momentumBuffer" of parameter 0 has shape \[8, 5\], the parameter \[8, 6\]/,
  );
  const badGroups = { ...sd, param_groups: [...sd.param_groups, sd.param_groups[0]] };
  assert.throws(() => opt.loadStateDict(badGroups), /2 parameter groups, the optimizer 1/);
  const badSize = { ...sd, param_groups: [{ ...sd.param_groups[0], params: [0, 1] }] };
  assert.throws(
    () => opt.loadStateDict(badSize),
    /group 0 has 2 parameters in the state dict, 4 in the optimizer/,
  );
  const badLr = { ...sd, param_groups: [{ ...sd.param_groups[0], lr: -1 }] };
  assert.throws(() => opt.loadStateDict(badLr), /invalid learning rate: -1/);
  const bothSpellings = {
    ...sd,
    param_groups: [{ ...sd.param_groups[0], weightDecay: 0.5 }],
  };
  assert.throws(
    () => opt.loadStateDict(bothSpellings),
    /parameter group 0 has both "weight_decay" and "weightDecay"/,
  );
  const stepTensor = opt.stateDict();
  stepTensor.state[0].step = zeros([], { device });
  assert.throws(
    () => opt.loadStateDict(stepTensor),
    /state "step" of parameter 0 must be a number, got a tensor of shape \[\]/,
  );
  const differentiable = {
    ...sd,
    param_groups: [{ ...sd.param_groups[0], differentiable: true }],
  };
  assert.throws(() => opt.loadStateDict(differentiable), /differentiable: true/);
  assert.throws(
    () => opt.loadStateDict({ paramz: [] } as unknown as optim.OptimizerStateDict),
    /expected \{ state, param_groups \}, got an object with keys \["paramz"\]/,
  );
  assert.equal(opt.paramGroups[0].lr, 0.1);
  assert.equal(opt.state.get(model.parameters()[0])!.momentumBuffer, buffer);
  assert.deepEqual(await buffer.data(), before);
});

backendTest("constructor and option errors", (device) => {
  const p = new nn.Parameter(zeros([2], { device }));
  assert.throws(() => new optim.SGD([p], { lr: -0.1 }), /SGD: invalid learning rate: -0.1/);
  assert.throws(() => new optim.SGD([p], {}), /learning rate lr is required/);
  // As PyTorch: no default lr when every group has its own; a group without one is the error.
  const q = new nn.Parameter(zeros([2], { device }));
  const grouped = new optim.SGD([{ params: [p], lr: 0.1 }, { params: [q], lr: 0.2 }], {});
  assert.deepEqual(grouped.paramGroups.map((g) => g.lr), [0.1, 0.2]);
  assert.throws(
    () => new optim.SGD([{ params: [p], lr: 0.1 }, { params: [q] }], {}),
    /learning rate lr is required/,
  );
  assert.throws(
    () => new optim.SGD([p], { lr: 0.1, nesterov: true }),
    /Nesterov momentum requires a momentum and zero dampening/,
  );
  assert.throws(() => new optim.SGD([p], { lr: 0.1, momentum: -1 }), /invalid momentum value/);
  assert.throws(
    () => new optim.Adam([p], { betas: [1, 0.9] }),
    /invalid beta parameter at index 0: 1/,
  );
  assert.throws(() => new optim.Adam([p], { eps: -1 }), /invalid epsilon value/);
  assert.throws(
    () => new optim.AdamW([p], { weightDecay: -1 }),
    /AdamW: invalid weight_decay value/,
  );
  assert.throws(() => new optim.SGD([], { lr: 0.1 }), /empty parameter list/);
  assert.throws(() => new optim.SGD([p, p], { lr: 0.1 }), /appear more than once/);
  assert.throws(() => new optim.SGD([p.mul(2)], { lr: 0.1 }), /non-leaf Tensor/);
  assert.throws(
    () => new optim.SGD([zeros([2], { dtype: "int32" })], { lr: 0.1 }),
    /only floating-point/,
  );
  assert.equal(new optim.AdamW([p]).paramGroups[0].weightDecay, 0.01);
  assert.equal(new optim.Adam([p]).paramGroups[0].lr, 1e-3);
});

backendTest(
  "zeroGrad sets gradients to null and releases them; step skips parameters without one",
  async (device) => {
    const a = new nn.Parameter(tensor([1, 2], { device }));
    const b = new nn.Parameter(tensor([3], { device }));
    const opt = new optim.SGD([a, b], { lr: 0.5 });
    a.grad = tensor([1, 1], { device });
    const g = a.grad;
    opt.step();
    await assertTensor(a, [0.5, 1.5]);
    await assertTensor(b, [3]);
    opt.zeroGrad();
    assert.equal(a.grad, null);
    assert.ok(g.storage.disposed);
    opt.step();
    await assertTensor(a, [0.5, 1.5]);
    // A learning-rate change between steps takes effect; with a closure, step returns its loss.
    opt.paramGroups[0].lr = 1;
    const loss = opt.step(() => {
      opt.zeroGrad();
      const l = a.sum();
      l.backward();
      return l;
    });
    assert.equal(await loss!.item(), 2);
    await assertTensor(a, [-0.5, 0.5]);
    opt.paramGroups[0].lr = -1;
    assert.throws(() => opt.step(), /invalid learning rate: -1/);
  },
);

backendTest(
  "state follows a module moved after the optimizer was made",
  async (device, devices) => {
    const model = new nn.Linear(3, 2, { device });
    const opt = new optim.SGD(model.parameters(), { lr: 0.1, momentum: 0.9 });
    const x = randn([4, 3], { device });
    tidy(() => {
      opt.zeroGrad();
      model.forward(x).sum().backward();
      opt.step();
    });
    model.to(devices[1]);
    tidy(() => {
      opt.zeroGrad();
      model.forward(x.to(devices[1])).sum().backward();
      opt.step();
    });
    const state = opt.state.get(model.weight)!;
    assert.equal((state.momentumBuffer as Tensor).device, devices[1]);
    assert.equal(model.weight.device, devices[1]);
    await model.weight.data();
  },
);

for (
  const [name, make] of [
    [
      "SGD momentum",
      (ps: Tensor[]) => new optim.SGD(ps, { lr: 0.01, momentum: 0.9, weightDecay: 1e-4 }),
    ],
    ["AdamW", (ps: Tensor[]) => new optim.AdamW(ps, { lr: 0.001 })],
  ] as const
) {
  backendTest(`memory: 200 ${name} steps inside tidy keep bytesInUse flat`, async (device) => {
    manualSeed(0);
    const model = new nn.Sequential(new nn.Linear(6, 16), new nn.ReLU(), new nn.Linear(16, 3)).to(
      device,
    );
    const opt = make(model.parameters());
    const x = randn([32, 6], { device });
    const y = tensor(Array.from({ length: 32 }, (_, i) => i % 3), { device, dtype: "int32" });
    const lossFn = new nn.CrossEntropyLoss();
    const step = () =>
      tidy(() => {
        opt.zeroGrad();
        lossFn.forward(model.forward(x), y).backward();
        opt.step();
      });
    for (let i = 0; i < 10; i++) step();
    await model.at(0).parameters()[0].data();
    const used = device.memory().bytesInUse;
    for (let i = 0; i < 200; i++) step();
    await model.at(0).parameters()[0].data();
    // Flat: not more (earlier tests' tensors may be collected meanwhile).
    assert.ok(
      device.memory().bytesInUse <= used,
      `${device.memory().bytesInUse} > ${used} bytes after 200 steps`,
    );
  });
}

backendTest(
  "RMSprop and Adagrad state: PyTorch's keys, Adagrad's made at construction",
  (device) => {
    const p = new nn.Parameter(t([1, -2, 3], device));
    const adagrad = new optim.Adagrad([p], { initialAccumulatorValue: 0.5 });
    // As PyTorch: state before any step, with the accumulator at its initial value.
    const before = adagrad.stateDict();
    assert.deepEqual(Object.keys(before.state[0]), ["step", "sum"]);
    assert.equal(before.state[0].step, 0);
    const rms = new optim.RMSprop([p], { momentum: 0.9, centered: true });
    assert.deepEqual(rms.stateDict().state, {});
    p.grad = t([0.1, 0.2, -0.3], device);
    rms.step();
    adagrad.step();
    assert.deepEqual(Object.keys(rms.stateDict().state[0]), [
      "step",
      "square_avg",
      "momentum_buffer",
      "grad_avg",
    ]);
    assert.equal(adagrad.stateDict().state[0].step, 1);
    assert.throws(() => new optim.RMSprop([p], { alpha: -1 }), /RMSprop: invalid alpha value: -1/);
    assert.throws(
      () => new optim.Adagrad([p], { lrDecay: -0.1 }),
      /Adagrad: invalid lr_decay value: -0.1/,
    );
    assert.throws(
      () => new optim.Adagrad([p], { initialAccumulatorValue: -1 }),
      /invalid initial_accumulator_value value: -1/,
    );
  },
);

backendTest(
  "Adagrad: initial accumulator and lr decay follow PyTorch's rule (float64)",
  async (device) => {
    const p = new nn.Parameter(t([0.5, -1, 2], device));
    const grads = [[0.1, -0.2, 0.3], [-0.5, 0.1, 0.05], [0.01, 0.3, -0.2]];
    const opt = new optim.Adagrad([p], {
      lr: 0.2,
      lrDecay: 0.5,
      initialAccumulatorValue: 0.3,
      weightDecay: 0.1,
      maximize: true,
    });
    const ref = [0.5, -1, 2];
    const sum = [0.3, 0.3, 0.3];
    grads.forEach((g, s) => {
      p.grad = t(g, device);
      opt.step();
      const clr = 0.2 / (1 + s * 0.5);
      for (let i = 0; i < 3; i++) {
        const gi = -g[i] + 0.1 * ref[i];
        sum[i] += gi * gi;
        ref[i] -= clr * gi / (Math.sqrt(sum[i]) + 1e-10);
      }
    });
    await assertTensor(p, ref, { atol: 1e-6, rtol: 1e-5 });
  },
);

Deno.test("a parameter group's params may be a single Tensor, as in PyTorch; a non-iterable is refused", async () => {
  const w = tensor([1, 2], { requiresGrad: true });
  const opt = new optim.SGD([{ params: w }], { lr: 0.5 });
  assert.equal(opt.paramGroups[0].params.length, 1);
  assert.equal(opt.paramGroups[0].params[0], w);
  w.sum().backward();
  opt.step();
  assert.deepEqual(Array.from(await w.data()), [0.5, 1.5]);
  assert.throws(
    () => new optim.SGD([{ params: 3 as unknown as Tensor[] }], { lr: 0.1 }),
    /SGD: a parameter group needs a "params" iterable/,
  );
});
