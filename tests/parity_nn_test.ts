/**
 * nn pieces that ported PyTorch programs reached for: `ModuleDict` (keys
 * in state dicts as PyTorch's, errors naming the keys),
 * `Module.requiresGrad_` (freezing part of a model for fine-tuning), and
 * `normalize`, `cosineSimilarity`, `utils.padSequence` equal to PyTorch 1.13
 * with their gradients on every backend (float64 gradient checks on cpu).
 * @module
 */

import assert from "node:assert/strict";
import { type Device, nn, optim, randn, type Tensor } from "../mod.ts";
import { assertTensor, backendTest, fixtureTensor } from "./harness.ts";
import { check, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_programs.json" with { type: "json" };

Deno.test("ModuleDict: fields by key, PyTorch's state-dict names, order, iteration, errors", () => {
  const heads = new nn.ModuleDict({ cls: new nn.Linear(4, 3), box: new nn.Linear(4, 2) });
  heads.set("aux", new nn.Linear(4, 1));
  assert.deepEqual(heads.keys(), ["cls", "box", "aux"]);
  assert.deepEqual(Object.keys(heads.stateDict()), [
    "cls.weight",
    "cls.bias",
    "box.weight",
    "box.bias",
    "aux.weight",
    "aux.bias",
  ]);
  assert.equal(heads.parameters().length, 6);
  assert.deepEqual([...heads].map(([k, m]) => [k, (m as nn.Linear).outFeatures]), [
    ["cls", 3],
    ["box", 2],
    ["aux", 1],
  ]);
  assert.ok(heads.has("box") && !heads.has("forward") && !heads.has("nope"));
  assert.equal((heads.get("box") as nn.Linear).outFeatures, 2);
  // Same module under two keys: both keys, as PyTorch's ModuleDict.
  const shared = new nn.Linear(2, 2);
  assert.deepEqual(new nn.ModuleDict([["a", shared], ["b", shared]]).keys(), ["a", "b"]);
  assert.throws(
    () => heads.get("nope"),
    /ModuleDict.get: no module "nope" \(keys: cls, box, aux\)/,
  );
  for (const bad of ["training", "forward", "a.b", ""]) {
    assert.throws(() => heads.set(bad, new nn.ReLU()), /ModuleDict: key .* is not usable/);
  }
  assert.throws(
    () => new nn.ModuleDict({ x: 3 as unknown as nn.Module }),
    /ModuleDict: argument 0 is not an nn.Module \(got number\)/,
  );
  // A state dict round trip through another instance.
  const copy = new nn.ModuleDict({ cls: new nn.Linear(4, 3), box: new nn.Linear(4, 2) });
  copy.set("aux", new nn.Linear(4, 1)).loadStateDict(heads.stateDict());
});

Deno.test("Module.requiresGrad_(false) freezes a part of a model: no gradient, the optimizer skips it", async () => {
  const model = new nn.Sequential(new nn.Linear(3, 4), new nn.ReLU(), new nn.Linear(4, 2));
  const backbone = model.at(0) as nn.Linear;
  assert.equal(backbone.requiresGrad_(false), backbone);
  assert.deepEqual(model.parameters().map((p) => p.requiresGrad), [false, false, true, true]);
  const before = await backbone.weight.toArray();
  const opt = new optim.SGD(model.parameters(), { lr: 0.5 });
  model.forward(randn([5, 3])).sum().backward();
  assert.equal(backbone.weight.grad, null);
  assert.notEqual((model.at(2) as nn.Linear).weight.grad, null);
  opt.step();
  assert.deepEqual(await backbone.weight.toArray(), before);
  model.requiresGrad_();
  assert.ok(model.parameters().every((p) => p.requiresGrad));
});

type Values = Parameters<typeof fixtureTensor>[0];

function closeness(device: Device) {
  return device.backend === "cpu" ? { atol: 1e-6, rtol: 1e-5 } : { atol: 1e-5, rtol: 1e-4 };
}

for (const c of fixtures.similarity) {
  backendTest(`${c.fn} (${c.name}) and its gradients equal PyTorch`, async (device) => {
    const xs = c.inputs.map((v) => fixtureTensor(v as Values, device, { requiresGrad: true }));
    const options = Object.fromEntries(
      Object.entries(c.options).map(([k, v]) => [k, v === "Infinity" ? Infinity : v]),
    );
    const out = c.fn === "normalize"
      ? nn.functional.normalize(xs[0], options)
      : nn.functional.cosineSimilarity(xs[0], xs[1], options);
    const tol = closeness(device);
    await assertTensor(out, c.out, { ...tol, what: "output", shape: c.shape });
    out.mul(fixtureTensor(c.g, device)).sum().backward();
    for (let i = 0; i < xs.length; i++) {
      // Gradients of 1/eps scale (a zero vector's) keep float32's relative error.
      await assertTensor(xs[i].grad!, c.grads[i], { ...tol, what: `gradient ${i}` });
    }
  });
}

for (const c of fixtures.pad_sequence) {
  backendTest(`padSequence (batchFirst ${c.batch_first}) equals pad_sequence`, async (device) => {
    const seqs = c.inputs.map((v) => fixtureTensor(v as Values, device, { requiresGrad: true }));
    const out = nn.utils.padSequence(seqs, {
      batchFirst: c.batch_first,
      paddingValue: c.padding_value,
    });
    await assertTensor(out, c.out, { atol: 0, rtol: 0, what: "output", shape: c.shape });
    out.mul(fixtureTensor(c.g, device)).sum().backward();
    for (let i = 0; i < seqs.length; i++) {
      await assertTensor(seqs[i].grad!, c.grads[i], { atol: 0, rtol: 0 });
    }
  });
}

backendTest(
  "padSequence, normalize, cosineSimilarity: errors name shapes and options",
  (device) => {
    const a = randn([2, 3], { device });
    assert.throws(() => nn.utils.padSequence([]), /padSequence: expected a non-empty array/);
    assert.throws(
      () => nn.utils.padSequence([a, randn([2, 4], { device })]),
      /padSequence: sequence 1 \(shape \[2, 4\], float32, .*\) does not match sequence 0 \(shape \[2, 3\]/,
    );
    assert.throws(
      () => nn.functional.normalize(a, { p: 0 }),
      /normalize: p must be a positive number/,
    );
    assert.throws(() => nn.functional.normalize(a, { dim: 2 }), /normalize.*2/);
    assert.throws(
      () => nn.functional.cosineSimilarity(a, randn([2, 4], { device })),
      /cosineSimilarity.*\[2, 3\].*\[2, 4\]/,
    );
  },
);

check("normalize p=2 over dim 1", (x: Tensor) => nn.functional.normalize(x), [inp([3, 4], 1360)]);
check("normalize p=3 over dim 0", (x: Tensor) => nn.functional.normalize(x, { p: 3, dim: 0 }), [
  inp([3, 4], 1361),
]);
check(
  "cosineSimilarity over the last dim, broadcast",
  (a: Tensor, b: Tensor) => nn.functional.cosineSimilarity(a, b, { dim: -1 }),
  [inp([2, 3, 4], 1362), inp([3, 4], 1363)],
);
check("padSequence", (a: Tensor, b: Tensor) => nn.utils.padSequence([a, b], { batchFirst: true }), [
  inp([3, 2], 1364),
  inp([1, 2], 1365),
]);

for (const c of fixtures.hard_activations) {
  backendTest(
    `${c.fn}(${JSON.stringify(c.options)}) equals PyTorch, kinks included`,
    async (device) => {
      const x = fixtureTensor(c.inputs[0], device, { requiresGrad: true });
      const F = nn.functional;
      const out = {
        relu6: () => F.relu6(x),
        hardtanh: () => F.hardtanh(x, c.options),
        hardsigmoid: () => F.hardsigmoid(x),
        hardswish: () => F.hardswish(x),
        mish: () => F.mish(x),
      }[c.fn]!();
      const tol = closeness(device);
      await assertTensor(out, c.out, { ...tol, what: "output", shape: c.shape });
      out.mul(fixtureTensor(c.g, device)).sum().backward();
      await assertTensor(x.grad!, c.grads[0], { ...tol, what: "gradient" });
    },
  );
}

Deno.test("Hardtanh, ReLU6, Hardsigmoid, Hardswish, Mish modules: as their functions, PyTorch's repr", async () => {
  const x = randn([4, 5]);
  const pairs: [nn.Module, Tensor][] = [
    [
      new nn.Hardtanh({ minVal: -2, maxVal: 0.5 }),
      nn.functional.hardtanh(x, { minVal: -2, maxVal: 0.5 }),
    ],
    [new nn.ReLU6(), nn.functional.relu6(x)],
    [new nn.Hardsigmoid(), nn.functional.hardsigmoid(x)],
    [new nn.Hardswish(), nn.functional.hardswish(x)],
    [new nn.Mish(), nn.functional.mish(x)],
  ];
  for (const [m, want] of pairs) {
    assert.deepEqual(await (m.forward(x) as Tensor).toArray(), await want.toArray());
  }
  assert.equal(new nn.Hardtanh().toString(), "Hardtanh(min_val=-1.0, max_val=1.0)");
  assert.throws(
    () => nn.functional.hardtanh(x, { minVal: 1, maxVal: 0 }),
    /hardtanh: minVal 1 is above maxVal 0/,
  );
});

check("hardswish", (x: Tensor) => nn.functional.hardswish(x), [inp([9], 1392, -5, 5)]);
check("mish", (x: Tensor) => nn.functional.mish(x), [inp([9], 1393, -5, 5)]);
check("hardtanh", (x: Tensor) => nn.functional.hardtanh(x, { minVal: -0.5, maxVal: 1.5 }), [
  inp([9], 1394),
]);
check("hardsigmoid", (x: Tensor) => nn.functional.hardsigmoid(x), [inp([9], 1395, -5, 5)]);
check("relu6", (x: Tensor) => nn.functional.relu6(x), [inp([9], 1396, -2, 8)]);

for (const c of fixtures.pool1d) {
  backendTest(
    `${c.fn}Pool1d(${c.kernel}, ${JSON.stringify(c.options)}) equals PyTorch`,
    async (device) => {
      const x = fixtureTensor(c.inputs[0], device, { requiresGrad: true });
      const out = c.fn === "max"
        ? new nn.MaxPool1d(c.kernel, c.options).forward(x)
        : nn.functional.avgPool1d(x, [c.kernel], c.options);
      const tol = closeness(device);
      await assertTensor(out, c.out, { ...tol, what: "output", shape: c.shape });
      out.mul(fixtureTensor(c.g, device)).sum().backward();
      await assertTensor(x.grad!, c.grads[0], { ...tol, what: "gradient" });
    },
  );
}

Deno.test("maxPool1d/avgPool1d: unbatched input, and an error naming the shape", async () => {
  const x = randn([3, 8]);
  assert.deepEqual([...new nn.AvgPool1d(2).forward(x).shape], [3, 4]);
  assert.deepEqual(
    await nn.functional.maxPool1d(x, 2).toArray(),
    await nn.functional.maxPool1d(x.unsqueeze(0), 2).squeeze(0).toArray(),
  );
  assert.throws(
    () => nn.functional.maxPool1d(randn([1, 2, 3, 4]), 2),
    /maxPool1d: expected \[N, C, L\] or \[C, L\], got shape \[1, 2, 3, 4\]/,
  );
});

check(
  "maxPool1d stride 2 padding 1",
  (x: Tensor) => nn.functional.maxPool1d(x, 3, { stride: 2, padding: 1 }),
  [
    inp([1, 2, 7], 1402),
  ],
);
check("avgPool1d", (x: Tensor) => nn.functional.avgPool1d(x, 2), [inp([2, 6], 1403)]);
