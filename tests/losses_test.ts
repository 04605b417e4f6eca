/**
 * NLL, cross entropy (-inf logits, ignoreIndex), BCE, BCE-with-logits, L1,
 * SmoothL1, Huber and KLDiv losses: PyTorch 1.13's values and input
 * gradients (tests/fixtures/torch_layers.json, with
 * probabilities of exactly 0 and 1, logits of ±1000, ties at beta/delta) on
 * every backend, every backend against cpu, float64 gradient checks on cpu,
 * and the errors for bad shapes, dtypes and options.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, nn, type Tensor, tensor } from "../mod.ts";
import {
  assertClose,
  assertTensor,
  backendTest,
  fixtureTensor,
  type FixtureValues,
  matchesCpu,
} from "./harness.ts";
import { check, inp, values } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_layers.json" with { type: "json" };

const F = nn.functional;
type Nested = FixtureValues;
type Kwargs = Record<string, unknown>;

function tol(device: Device) {
  return device.backend === "cpu" ? { atol: 1e-6, rtol: 1e-5 } : { atol: 1e-4, rtol: 1e-4 };
}

function makeLoss(module: string, kwargs: Kwargs, device: Device): nn.Module {
  const options: Kwargs = { ...kwargs };
  for (const key of ["weight", "posWeight"]) {
    if (options[key]) options[key] = tensor(options[key] as number[], { device });
  }
  switch (module) {
    case "NLLLoss":
      return new nn.NLLLoss(options);
    case "CrossEntropyLoss":
      return new nn.CrossEntropyLoss(options);
    case "BCELoss":
      return new nn.BCELoss(options);
    case "BCEWithLogitsLoss":
      return new nn.BCEWithLogitsLoss(options);
    case "L1Loss":
      return new nn.L1Loss(options);
    case "SmoothL1Loss":
      return new nn.SmoothL1Loss(options);
    case "HuberLoss":
      return new nn.HuberLoss(options);
    case "KLDivLoss":
      return new nn.KLDivLoss(options);
  }
  throw new Error(`unknown loss ${module}`);
}

for (const c of fixtures.losses) {
  backendTest(`${c.name}: value and input gradient match PyTorch`, async (device) => {
    const loss = makeLoss(c.module, c.kwargs as Kwargs, device);
    const x = fixtureTensor(c.input as Nested, device, { requiresGrad: true });
    const target = fixtureTensor(c.target as Nested, device, {
      dtype: c.module === "NLLLoss" || c.module === "CrossEntropyLoss" ? "int32" : "float32",
    });
    const out = loss.forward(x, target) as Tensor;
    // BCE's gradient at a wrong 0/1 probability is ~1e12: relative tolerance covers it.
    await assertTensor(out, c.output as Nested as number[], { ...tol(device), what: "loss" });
    if ("g" in c) out.mul(tensor(c.g as Nested as number[], { device })).sum().backward();
    else out.backward();
    await assertTensor(x.grad!, c.grads.input as Nested as number[], {
      ...tol(device),
      what: "input grad",
    });
  });
}

Deno.test("loss modules print PyTorch's repr and keep weights as buffers", () => {
  for (const c of fixtures.losses) {
    const loss = makeLoss(c.module, c.kwargs as Kwargs, tensor(0).device);
    // PyTorch prints no options for these losses except the reduction's.
    assert.equal(loss.toString().split("(")[0], c.repr.split("(")[0]);
  }
  const w = tensor([1, 2, 3]);
  const bce = new nn.BCEWithLogitsLoss({ posWeight: w });
  assert.deepEqual(Object.keys(bce.stateDict()), ["pos_weight"]);
  assert.deepEqual(Object.keys(new nn.NLLLoss({ weight: w }).stateDict()), ["weight"]);
  assert.deepEqual(bce.parameters(), []);
});

const PAIRS: [string, (x: Tensor, t: Tensor) => Tensor, number, number][] = [
  ["l1Loss", (x, t) => F.l1Loss(x, t, { reduction: "none" }), -3, 3],
  ["smoothL1Loss", (x, t) => F.smoothL1Loss(x, t, { beta: 0.7, reduction: "sum" }), -3, 3],
  ["huberLoss", (x, t) => F.huberLoss(x, t, { delta: 1.3 }), -3, 3],
  ["binaryCrossEntropy", (x, t) => F.binaryCrossEntropy(x.sigmoid(), t.sigmoid()), -3, 3],
  [
    "binaryCrossEntropyWithLogits",
    (x, t) => F.binaryCrossEntropyWithLogits(x, t.sigmoid(), { reduction: "none" }),
    -30,
    30,
  ],
  ["klDiv", (x, t) => F.klDiv(x.logSoftmax(1), t.softmax(1), { reduction: "batchmean" }), -3, 3],
];

for (const [name, fn, low, high] of PAIRS) {
  backendTest(`${name}: value and gradients equal cpu's`, async (device) => {
    const xs = values([4, 6], 1350, low, high).map(Math.fround);
    const ts = values([4, 6], 1351, low, high).map(Math.fround);
    await matchesCpu(device, (d) => {
      const x = tensor(xs, { shape: [4, 6], device: d, requiresGrad: true });
      const t = tensor(ts, { shape: [4, 6], device: d, requiresGrad: true });
      const y = fn(x, t);
      y.mul(y).sum().backward();
      return [y, x.grad!, t.grad!];
    }, { atol: 1e-4, rtol: 1e-4 });
  });
}

backendTest("nllLoss with weights and ignoreIndex equals cpu's on [N, C, d] input", async (d) => {
  const xs = values([3, 4, 5], 1352).map(Math.fround);
  const targets = [0, 1, 2, 3, -100, 1, 1, 3, 0, 2, 2, -100, 0, 0, 3];
  await matchesCpu(d, (dev) => {
    const x = tensor(xs, { shape: [3, 4, 5], device: dev, requiresGrad: true });
    const t = tensor(targets, { shape: [3, 5], device: dev, dtype: "int32" });
    const w = tensor([1, 0.5, 2, 0.25], { device: dev });
    const y = F.nllLoss(x.logSoftmax(1), t, { weight: w });
    y.backward();
    return [y, x.grad!];
  }, { atol: 1e-5, rtol: 1e-5 });
});

backendTest("oneHot gives int32 [*, C] rows", async (device) => {
  const idx = tensor([[2, 0], [1, 3]], { device, dtype: "int32" });
  const out = F.oneHot(idx, 4);
  assert.deepEqual([...out.shape], [2, 2, 4]);
  assert.equal(out.dtype, "int32");
  assert.deepEqual(await out.toArray(), [
    [[0, 0, 1, 0], [1, 0, 0, 0]],
    [[0, 1, 0, 0], [0, 0, 0, 1]],
  ]);
  assert.throws(() => F.oneHot(tensor([1.5], { device }), 3), /oneHot: expected int32/);
  assert.throws(() => F.oneHot(idx, 0), /numClasses must be a positive integer/);
});

backendTest("all targets ignored: mean NLL is NaN, as PyTorch", async (device) => {
  const x = tensor([[-1, -2], [-0.5, -3]], { device });
  const t = tensor([-100, -100], { device, dtype: "int32" });
  assert.ok(Number.isNaN(await F.nllLoss(x, t).item()));
  assertClose(await F.nllLoss(x, t, { reduction: "sum" }).item(), 0);
});

backendTest("losses name bad shapes, dtypes, devices and options", (device, devices) => {
  const x = tensor([[0.2, 0.8]], { device });
  const y = tensor([[1, 0]], { device });
  const ints = tensor([[1, 0]], { device, dtype: "int32" });
  assert.throws(
    () => F.l1Loss(x, tensor([1, 0, 1], { device })),
    /l1Loss: input of shape \[1, 2\] and target of shape \[3\] differ/,
  );
  assert.throws(() => F.binaryCrossEntropy(x, ints), /expected a floating-point target, got int32/);
  assert.throws(() => F.huberLoss(x, y, { delta: 0 }), /delta must be positive/);
  assert.throws(() => F.smoothL1Loss(x, y, { beta: -1 }), /beta must be non-negative/);
  assert.throws(() => F.klDiv(x, y, { reduction: "avg" as "mean" }), /"batchmean"/);
  assert.throws(
    () => F.binaryCrossEntropyWithLogits(x, y, { posWeight: tensor([1, 2, 3], { device }) }),
    /posWeight of shape \[3\] does not broadcast to input of shape \[1, 2\]/,
  );
  assert.throws(
    () => F.nllLoss(x, tensor([0], { device })),
    /target must hold int32 class indices of shape \[1\] for input of shape \[1, 2\], got float32/,
  );
  assert.throws(
    () => F.nllLoss(x, tensor([0, 1], { device, dtype: "int32" })),
    /of shape \[1\] .* got int32 of shape \[2\]/,
  );
  assert.throws(
    () =>
      F.nllLoss(x, tensor([0], { device, dtype: "int32" }), { weight: tensor([1], { device }) }),
    /weight of shape \[1\] does not match the 2 classes/,
  );
  if (devices.length > 1) {
    assert.throws(() => F.l1Loss(x, y.to(devices[1])), /expected all tensors on one device/);
  }
  assert.throws(() => new nn.BCELoss({ reduction: "max" as "sum" }), /BCELoss: reduction must be/);
});

// ---- float64 gradient checks (cpu) ----

const NLL_TARGET = [2, 0, -100, 1];
check(
  "nllLoss mean with weights and an ignored target",
  (x, w) => F.nllLoss(x, tensor(NLL_TARGET, { dtype: "int32" }), { weight: w }),
  [
    inp([4, 3], 1360),
    inp([3], 1361, 0.5, 2),
  ],
);
check(
  "nllLoss none on [N, C, d]",
  (x) => F.nllLoss(x, tensor([[0, 2], [1, 1]], { dtype: "int32" }), { reduction: "none" }),
  [
    inp([2, 3, 2], 1362),
  ],
);
check(
  "binaryCrossEntropy (input, target and weight)",
  (x, t, w) => F.binaryCrossEntropy(x, t, { weight: w, reduction: "sum" }),
  [
    inp([2, 3], 1363, 0.05, 0.95),
    inp([2, 3], 1364, 0, 1),
    inp([3], 1365, 0.5, 2),
  ],
);
check(
  "binaryCrossEntropyWithLogits with posWeight and weight",
  (x, t, p, w) => F.binaryCrossEntropyWithLogits(x, t, { posWeight: p, weight: w }),
  [
    inp([2, 3], 1366, -4, 4),
    inp([2, 3], 1367, 0, 1),
    inp([3], 1368, 0.5, 3),
    inp([2, 1], 1369, 0.5, 2),
  ],
);
// Differences kept away from 0 and from beta/delta, where the loss has kinks.
const DIFF_X = [-2.1, -0.8, -0.3, 0.35, 0.9, 2.4];
const ZEROS = [0, 0, 0, 0, 0, 0];
check("l1Loss", (x, t) => F.l1Loss(x, t), [{ shape: [6], values: DIFF_X }, {
  shape: [6],
  values: ZEROS,
}]);
check("smoothL1Loss beta 0.5", (x, t) => F.smoothL1Loss(x, t, { beta: 0.5, reduction: "none" }), [
  { shape: [6], values: DIFF_X },
  { shape: [6], values: ZEROS },
]);
check("huberLoss delta 1.5", (x, t) => F.huberLoss(x, t, { delta: 1.5, reduction: "sum" }), [
  { shape: [6], values: DIFF_X },
  { shape: [6], values: ZEROS },
]);
check("klDiv batchmean (input and target)", (x, t) => F.klDiv(x, t, { reduction: "batchmean" }), [
  inp([2, 3], 1370),
  inp([2, 3], 1371, 0.1, 1),
]);
check("klDiv logTarget", (x, t) => F.klDiv(x, t, { logTarget: true, reduction: "none" }), [
  inp([2, 3], 1372),
  inp([2, 3], 1373, -3, 0),
]);

backendTest(
  "out-of-range class indices: the next read rejects, naming index and classes",
  async (d) => {
    const logp = tensor([[-0.5, -1], [-2, -0.1]], { device: d });
    for (const bad of [5, -1]) {
      const loss = F.nllLoss(logp, tensor([0, bad], { device: d, dtype: "int32" }));
      await assert.rejects(
        () => loss.item(),
        new RegExp(
          `nllLoss: class index ${bad} is out of range for 2 classes \\(0 to 1, or ignoreIndex -100\\)`,
        ),
      );
      // Reported once: the next read works.
      assert.equal(typeof (await loss.item()), "number");
    }
    const ignored = F.nllLoss(logp, tensor([-100, 1], { device: d, dtype: "int32" }));
    assertClose(await ignored.item(), 0.1, { what: "ignored target is not out of range" });
    await assert.rejects(
      () => F.oneHot(tensor([0, 3], { device: d, dtype: "int32" }), 3).data(),
      /oneHot: class index 3 is out of range for 3 classes \(0 to 2\)/,
    );
  },
);
