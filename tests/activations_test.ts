/**
 * LeakyReLU, SiLU, ELU and Softplus: PyTorch 1.13's values and gradients
 * (tests/fixtures/torch_layers.json, inputs at ±1000, ±89, 0 and the softplus
 * threshold) on every backend, ReLU's forward and gradient at NaN and ±inf
 * (PyTorch's select, not a product), every backend against cpu on random inputs,
 * and float64 gradient checks on cpu.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, nn, type Tensor, tensor } from "../mod.ts";
import { assertTensor, backendTest, decodeFixture, fixtureTensor, matchesCpu } from "./harness.ts";
import { check, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_layers.json" with { type: "json" };

const F = nn.functional;

function tol(device: Device) {
  return device.backend === "cpu" ? { atol: 1e-6, rtol: 1e-5 } : { atol: 1e-4, rtol: 1e-4 };
}

function makeActivation(module: string, kwargs: Record<string, number>): nn.Module {
  switch (module) {
    case "LeakyReLU":
      return new nn.LeakyReLU(kwargs);
    case "SiLU":
      return new nn.SiLU();
    case "ELU":
      return new nn.ELU(kwargs);
    case "Softplus":
      return new nn.Softplus(kwargs);
  }
  throw new Error(`unknown activation ${module}`);
}

backendTest("relu at NaN and ±inf, with NaN and infinite gradients, as PyTorch", async (device) => {
  const c = fixtures.relu_nan;
  const dtypes = device.backend === "cpu" ? ["float32", "float64"] as const : ["float32"] as const;
  for (const dtype of dtypes) {
    const x = fixtureTensor(c.input, device, { requiresGrad: true, dtype });
    const out = F.relu(x);
    await assertTensor(out, decodeFixture(c.output), { atol: 0, rtol: 0, what: `${dtype} output` });
    out.backward(fixtureTensor(c.g, device, { dtype }));
    // A NaN input passes g through; a clamped place gives 0 even for a NaN or infinite g.
    await assertTensor(x.grad!, decodeFixture(c.grads.input), {
      atol: 0,
      rtol: 0,
      what: `${dtype} gradient`,
    });
  }
});

for (const c of fixtures.activations) {
  backendTest(`${c.name}: forward and backward match PyTorch at the extremes`, async (device) => {
    const m = makeActivation(c.module, c.kwargs as Record<string, number>);
    assert.equal(m.toString(), c.repr);
    const x = tensor(c.input, { device, requiresGrad: true });
    const out = m.forward(x) as Tensor;
    await assertTensor(out, c.output, { ...tol(device), what: "output" });
    out.mul(tensor(c.g, { device })).sum().backward();
    await assertTensor(x.grad!, c.grads.input, { ...tol(device), what: "input grad" });
  });
}

const FUNCTIONAL: [string, (x: Tensor) => Tensor][] = [
  ["leakyRelu", (x) => F.leakyRelu(x, { negativeSlope: 0.1 })],
  ["silu", (x) => F.silu(x)],
  ["elu", (x) => F.elu(x, { alpha: 1.5 })],
  ["softplus", (x) => F.softplus(x, { beta: 3, threshold: 4 })],
];

for (const [name, fn] of FUNCTIONAL) {
  backendTest(`${name}: forward and input gradient equal cpu's`, async (device) => {
    const values = Array.from({ length: 60 }, (_, i) => Math.fround(Math.sin(i * 7.1) * 6));
    await matchesCpu(device, (d) => {
      const x = tensor(values, { shape: [3, 4, 5], device: d, requiresGrad: true });
      const y = fn(x);
      y.mul(y).sum().backward();
      return [y, x.grad!];
    }, { atol: 1e-5, rtol: 1e-5 });
  });
}

backendTest("activations of ±Infinity and NaN give PyTorch's values", async (device) => {
  const x = tensor([-Infinity, Infinity, NaN], { device });
  await assertTensor(F.softplus(x), [0, Infinity, NaN], { what: "softplus" });
  await assertTensor(F.elu(x), [-1, Infinity, NaN], { what: "elu" });
  await assertTensor(F.leakyRelu(x), [-Infinity, Infinity, NaN], { what: "leakyRelu" });
  await assertTensor(F.silu(x), [NaN, Infinity, NaN], { what: "silu" });
});

backendTest("activations refuse int32 input and bad options, naming them", (device) => {
  const ints = tensor([1, 2], { dtype: "int32", device });
  for (const [name, fn] of FUNCTIONAL) {
    assert.throws(
      () => fn(ints),
      new RegExp(`${name}: expected a floating-point input, got int32`),
    );
  }
  assert.throws(() => new nn.ELU({ alpha: NaN }), /ELU: alpha must be a finite number, got NaN/);
  assert.throws(
    () => new nn.Softplus({ beta: 0 }),
    /Softplus: beta must be a finite non-zero number, got 0/,
  );
  assert.throws(
    () => F.leakyRelu(tensor([1], { device }), { negativeSlope: Infinity }),
    /negativeSlope must be a finite number/,
  );
  assert.throws(() => F.silu([1, 2] as unknown as Tensor), /silu: input must be a Tensor/);
});

// Kinks and thresholds sit between the sampled points (0 and beta x = threshold excluded).
const AWAY = [-2.7, -1.3, -0.4, 0.3, 0.9, 2.2, -0.05, 0.07];
check("leakyRelu", (x) => F.leakyRelu(x, { negativeSlope: 0.2 }), [{ shape: [8], values: AWAY }]);
check("silu", (x) => F.silu(x), [inp([2, 5], 1201, -6, 6)]);
check("elu", (x) => F.elu(x, { alpha: 0.7 }), [{ shape: [2, 4], values: AWAY }]);
check("softplus", (x) => F.softplus(x), [inp([2, 5], 1202, -8, 8)]);
check(
  "softplus beta 2 threshold 3 (both branches)",
  (x) => F.softplus(x, { beta: 2, threshold: 3 }),
  [
    { shape: [6], values: [-3, -0.5, 0.2, 1.2, 1.7, 4] },
  ],
);
