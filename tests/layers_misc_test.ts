/**
 * Padding layers, Unfold / Fold, AdaptiveAvgPool1d, LPPool1d/2d, max
 * pooling with returnIndices, MaxUnpool1d/2d, ChannelShuffle and Softmax2d
 * against PyTorch 1.13 (tests/fixtures/torch_layers_misc.json: odd sizes,
 * batched and unbatched inputs, NaN and ties in max-pool windows, ceil mode)
 * on every backend; reprs and state-dict keys; errors naming the bad value
 * or shape; float64 gradient checks on cpu.
 * @module
 */

import assert from "node:assert/strict";
import {
  backendNames,
  type Device,
  nn,
  registerBackend,
  requestDevices,
  type Tensor,
  tensor,
} from "../mod.ts";
import {
  assertTensor,
  backendTest,
  decodeFixture,
  fixtureTensor,
  type FixtureValues,
  shapeOf,
} from "./harness.ts";
import { check, inp } from "./gradcheck.ts";
import { thirdBackend } from "./third_backend.ts";
import fixtures from "./fixtures/torch_layers_misc.json" with { type: "json" };

const F = nn.functional;

function tol(device: Device) {
  return device.backend === "cpu" ? { atol: 1e-6, rtol: 1e-5 } : { atol: 1e-4, rtol: 1e-4 };
}

type Size = number | number[];
type Options = Record<string, Size | boolean>;

interface Case {
  name: string;
  module: string;
  args: unknown[];
  options: Options;
  repr: string;
  keys?: string[];
  input: FixtureValues;
  output: FixtureValues;
  g: FixtureValues;
  grad: FixtureValues;
}

const pair = (v: unknown) => v as Size as number | [number, number];
const single = (v: unknown) => v as number;

function makeModule(c: Case): nn.Module {
  const [a, b] = c.args;
  const o = c.options as Record<string, never>;
  switch (c.module) {
    case "ConstantPad1d":
      return new nn.ConstantPad1d(a as Size, single(b));
    case "ConstantPad2d":
      return new nn.ConstantPad2d(a as Size, single(b));
    case "ConstantPad3d":
      return new nn.ConstantPad3d(a as Size, single(b));
    case "ZeroPad2d":
      return new nn.ZeroPad2d(a as Size);
    case "ReflectionPad1d":
      return new nn.ReflectionPad1d(a as Size);
    case "ReflectionPad2d":
      return new nn.ReflectionPad2d(a as Size);
    case "ReflectionPad3d":
      return new nn.ReflectionPad3d(a as Size);
    case "ReplicationPad1d":
      return new nn.ReplicationPad1d(a as Size);
    case "ReplicationPad2d":
      return new nn.ReplicationPad2d(a as Size);
    case "ReplicationPad3d":
      return new nn.ReplicationPad3d(a as Size);
    case "Unfold":
      return new nn.Unfold(pair(a), o);
    case "Fold":
      return new nn.Fold(pair(a), pair(b), o);
    case "AdaptiveAvgPool1d":
      return new nn.AdaptiveAvgPool1d(single(a));
    case "LPPool1d":
      return new nn.LPPool1d(single(a), single(b), o);
    case "LPPool2d":
      return new nn.LPPool2d(single(a), pair(b), o);
    case "ChannelShuffle":
      return new nn.ChannelShuffle(single(a));
    case "Softmax2d":
      return new nn.Softmax2d();
  }
  throw new Error(`unknown module ${c.module}`);
}

const moduleCases: Case[] = [
  ...fixtures.pads,
  ...fixtures.unfolds,
  ...fixtures.folds,
  ...fixtures.adaptive_avg_pool1d,
  ...fixtures.lppools,
  ...fixtures.channel_shuffles,
  ...fixtures.softmax2d,
] as unknown as Case[];

for (const c of moduleCases) {
  backendTest(`${c.name}: ${c.repr} forward and input gradient equal PyTorch's`, async (device) => {
    const m = makeModule(c).to(device);
    assert.equal(m.toString(), c.repr);
    assert.deepEqual(Object.keys(m.stateDict()), c.keys);
    const x = fixtureTensor(c.input, device, { requiresGrad: true });
    const out = m.forward(x) as Tensor;
    await assertTensor(out, decodeFixture(c.output), {
      ...tol(device),
      what: "output",
      shape: shapeOf(c.output),
    });
    out.mul(fixtureTensor(c.g, device)).sum().backward();
    await assertTensor(x.grad!, decodeFixture(c.grad), { ...tol(device), what: "input grad" });
  });
}

for (const c of fixtures.maxpools) {
  backendTest(`${c.name}: ${c.repr} with returnIndices equals PyTorch's`, async (device) => {
    const o = { ...(c.options as Record<string, never>), returnIndices: true as const };
    const m = c.module === "MaxPool1d"
      ? new nn.MaxPool1d(single(c.args[0]), o)
      : new nn.MaxPool2d(pair(c.args[0]), o);
    assert.equal(m.toString(), c.repr);
    const x = fixtureTensor(c.input, device, { requiresGrad: true });
    const [out, indices] = m.forward(x);
    await assertTensor(out, decodeFixture(c.output), {
      ...tol(device),
      what: "output",
      shape: shapeOf(c.output),
    });
    assert.equal(indices.dtype, "int32");
    assert.equal(indices.requiresGrad, false);
    await assertTensor(indices, decodeFixture(c.indices), {
      atol: 0,
      rtol: 0,
      what: "indices",
      shape: shapeOf(c.indices),
    });
    out.mul(fixtureTensor(c.g, device)).sum().backward();
    await assertTensor(x.grad!, decodeFixture(c.grad), { ...tol(device), what: "input grad" });
    // The functional form agrees, and without returnIndices gives the output alone.
    const plain = c.module === "MaxPool1d"
      ? F.maxPool1d(x, single(c.args[0]), c.options as Record<string, never>)
      : F.maxPool2d(x, pair(c.args[0]), c.options as Record<string, never>);
    await assertTensor(plain, decodeFixture(c.output), { ...tol(device), what: "plain output" });
  });
}

for (const c of fixtures.unpools) {
  backendTest(`${c.name}: ${c.repr} forward and gradient equal PyTorch's`, async (device) => {
    const o = c.options as Record<string, never>;
    const m = c.module === "MaxUnpool1d"
      ? new nn.MaxUnpool1d(single(c.args[0]), o)
      : new nn.MaxUnpool2d(pair(c.args[0]), o);
    assert.equal(m.toString(), c.repr);
    assert.deepEqual(Object.keys(m.stateDict()), []);
    const x = fixtureTensor(c.input, device, { requiresGrad: true });
    const indices = fixtureTensor(c.indices, device, { dtype: "int32" });
    const out = m.forward(x, indices, c.outputSize);
    await assertTensor(out, decodeFixture(c.output), {
      ...tol(device),
      what: "output",
      shape: shapeOf(c.output),
    });
    out.mul(fixtureTensor(c.g, device)).sum().backward();
    await assertTensor(x.grad!, decodeFixture(c.grad), { ...tol(device), what: "input grad" });
  });
}

backendTest("maxPool2d returnIndices round-trips through maxUnpool2d", async (device) => {
  const x = tensor([1, 5, 2, 0, 3, 4, 8, 7, 6, 9, 11, 10, 15, 14, 13, 12], {
    shape: [1, 1, 4, 4],
    device,
  });
  const [y, i] = F.maxPool2d(x, 2, { returnIndices: true });
  assert.deepEqual(await i.data(), Int32Array.from([1, 6, 12, 14]));
  const back = F.maxUnpool2d(y, i, 2);
  assert.deepEqual(
    Array.from(await back.data()),
    [0, 5, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 15, 0, 13, 0],
  );
});

backendTest(
  "maxPool2d returnIndices: a window of -inf names its first element inside the input, as PyTorch",
  async (device) => {
    const values = new Array(12).fill(-Infinity);
    values[11] = 1;
    const x = tensor(values, { shape: [1, 1, 3, 4], device });
    const [y, i] = F.maxPool2d(x, 3, {
      stride: 2,
      padding: 1,
      ceilMode: true,
      returnIndices: true,
    });
    assert.deepEqual(Array.from(await y.data()), [
      -Infinity,
      -Infinity,
      -Infinity,
      -Infinity,
      1,
      1,
    ]);
    // From PyTorch 1.13.
    assert.deepEqual(Array.from(await i.data()), [0, 1, 3, 4, 11, 11]);
  },
);

backendTest(
  "reflection / replication padding: negative amounts crop, as PyTorch (which reflects about the uncropped edges)",
  async (device) => {
    const x = tensor([0, 1, 2], { shape: [1, 1, 3], device, requiresGrad: true });
    const y = new nn.ReflectionPad1d([-1, 2]).forward(x);
    assert.deepEqual(Array.from(await y.data()), [1, 2, 1, 0]);
    y.mul(tensor([1, 2, 3, 4], { shape: [1, 1, 4], device })).sum().backward();
    assert.deepEqual(Array.from(await x.grad!.data()), [4, 4, 2]);
    const x2 = tensor(Array.from({ length: 12 }, (_, i) => i), {
      shape: [1, 1, 3, 4],
      device,
      requiresGrad: true,
    });
    const g = tensor(Array.from({ length: 10 }, (_, i) => i + 1), { shape: [1, 1, 2, 5], device });
    // From PyTorch 1.13.
    const cases: [nn.Module, number[], number[]][] = [
      [
        new nn.ReflectionPad2d([-1, 2, 1, -2]),
        [5, 6, 7, 6, 5, 1, 2, 3, 2, 1],
        [0, 16, 16, 8, 0, 6, 6, 3, 0, 0, 0, 0],
      ],
      [
        new nn.ReplicationPad2d([-1, 2, 1, -2]),
        [1, 2, 3, 3, 3, 1, 2, 3, 3, 3],
        [0, 7, 9, 39, 0, 0, 0, 0, 0, 0, 0, 0],
      ],
    ];
    for (const [m, want, grad] of cases) {
      x2.grad = null;
      const out = m.forward(x2) as Tensor;
      assert.deepEqual(out.shape, [1, 1, 2, 5]);
      assert.deepEqual(Array.from(await out.data()), want);
      out.mul(g).sum().backward();
      assert.deepEqual(Array.from(await x2.grad!.data()), grad);
    }
    const x3 = tensor(Array.from({ length: 24 }, (_, i) => i), { shape: [1, 2, 3, 4], device });
    const y3 = new nn.ReflectionPad3d([-1, 2, 1, -2, 1, -1]).forward(x3);
    assert.deepEqual(y3.shape, [1, 2, 2, 5]);
    assert.deepEqual(
      Array.from(await y3.data()),
      [17, 18, 19, 18, 17, 13, 14, 15, 14, 13, 5, 6, 7, 6, 5, 1, 2, 3, 2, 1],
    );
  },
);

backendTest("ConstantPad1d/2d/3d: -inf and NaN fill, as PyTorch", async (device) => {
  const m = new nn.ConstantPad1d(1, -Infinity);
  assert.equal(m.toString(), "ConstantPad1d(padding=(1, 1), value=-inf)");
  const y = m.forward(tensor([0, 1, 2], { shape: [1, 3], device }));
  assert.deepEqual(Array.from(await y.data()), [-Infinity, 0, 1, 2, -Infinity]);
  const n = new nn.ConstantPad2d([1, 0, 0, 0], NaN);
  assert.equal(n.toString(), "ConstantPad2d(padding=(1, 0, 0, 0), value=nan)");
  assert.ok(Number.isNaN((await n.forward(tensor([1], { shape: [1, 1], device })).data())[0]));
  assert.equal(
    new nn.ConstantPad3d(1, 1e-7).toString(),
    "ConstantPad3d(padding=(1, 1, 1, 1, 1, 1), value=1e-07)",
  );
});

backendTest(
  "maxUnpool1d / maxUnpool2d: a value several overlapping windows chose comes back exactly",
  async (device) => {
    // Three windows name the same element: its mean was 1 ulp off 0.9 and
    // the sum of 3e38 overflowed to inf.
    const x = tensor([0, 0.1, 0.9, 0.2, 0, 0, 1, 3e38, 1, 0], { shape: [1, 2, 5], device });
    const [y, i] = F.maxPool1d(x, 3, { stride: 1, returnIndices: true });
    assert.deepEqual(Array.from(await i.data()), [2, 2, 2, 2, 2, 2]);
    const back = F.maxUnpool1d(y, i, 3, { stride: 1 });
    const want = [0, 0, 0.9, 0, 0, 0, 0, 3e38, 0, 0].map(Math.fround);
    assert.deepEqual(Array.from(await back.data()), want);
    const [y2, i2] = F.maxPool2d(x.reshape([2, 1, 5]), [1, 3], {
      stride: 1,
      returnIndices: true,
    });
    const back2 = F.maxUnpool2d(y2, i2, [1, 3], { stride: 1 });
    assert.deepEqual(Array.from(await back2.data()), want);
  },
);

backendTest(
  "maxPool2d / maxPool1d: a dilated window with no tap inside the input is -inf, as PyTorch",
  async (device) => {
    // Rows -1 and 2 of a 2-row input: PyTorch gives -inf and names the first
    // tap at or after the start (row 2, past the plane); the fused kernels
    // read the next plane (cpu) or gave 0 and -1 (webgpu).
    const x = tensor([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], {
      shape: [2, 1, 2, 3],
      device,
      requiresGrad: true,
    });
    const options = { stride: 1, padding: [1, 0], dilation: [3, 1] } as const;
    const [y, i] = F.maxPool2d(x, [2, 1], { ...options, returnIndices: true });
    assert.deepEqual(Array.from(await y.data()), new Array(6).fill(-Infinity));
    assert.deepEqual(Array.from(await i.data()), [6, 7, 8, 6, 7, 8]);
    const plain = F.maxPool2d(x, [2, 1], options);
    assert.deepEqual(Array.from(await plain.data()), new Array(6).fill(-Infinity));
    plain.sum().backward();
    assert.deepEqual(Array.from(await x.grad!.data()), new Array(12).fill(0));
    const x1 = tensor([1, 2, 3, 4], { shape: [2, 2], device });
    const [y1, i1] = F.maxPool1d(x1, 2, { padding: 1, dilation: 3, returnIndices: true });
    assert.deepEqual(Array.from(await y1.data()), [-Infinity, -Infinity]);
    assert.deepEqual(Array.from(await i1.data()), [2, 2]);
  },
);

Deno.test({
  name:
    "maxPool2d composed (no fused kernel): a window of -inf sends its gradient where its index is",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    if (!backendNames().includes("third")) registerBackend("third", thirdBackend, { priority: -5 });
    const [device] = await requestDevices({ backend: "third" });
    assert.equal(device.backendDevice.kernels.maxPool2d, undefined);
    const inf = -Infinity;
    const x = tensor([inf, inf, inf, 2, inf, inf, inf, inf, 1, inf, inf, inf], {
      shape: [1, 1, 3, 4],
      device,
      requiresGrad: true,
    });
    const [y, i] = F.maxPool2d(x, 3, { stride: 2, padding: 1, returnIndices: true });
    // From PyTorch 1.13: the window of -inf at (0, 0) names element 0 and
    // gets its gradient (argmax named a padding tap, which dropped it).
    assert.deepEqual(Array.from(await y.data()), [inf, 2, 1, inf]);
    assert.deepEqual(Array.from(await i.data()), [0, 3, 8, 5]);
    y.mul(tensor([1, 2, 4, 8], { shape: [1, 1, 2, 2], device })).sum().backward();
    assert.deepEqual(Array.from(await x.grad!.data()), [1, 0, 0, 2, 0, 8, 0, 0, 4, 0, 0, 0]);
  },
});

// ------------------------------------------------------------ gradchecks

check("ReflectionPad2d", (x) => new nn.ReflectionPad2d([1, 2, 2, 0]).forward(x), [
  inp([1, 2, 3, 4], 5001),
]);
check("ReplicationPad3d", (x) => new nn.ReplicationPad3d([1, 0, 2, 1, 0, 1]).forward(x), [
  inp([2, 2, 3, 2], 5002),
]);
check("ConstantPad1d with cropping", (x) => new nn.ConstantPad1d([-1, 2], 0.5).forward(x), [
  inp([2, 5], 5003),
]);
check("unfold", (x) => F.unfold(x, [2, 3], { dilation: [2, 1], padding: 1, stride: [2, 1] }), [
  inp([1, 2, 5, 4], 5004),
]);
check("fold", (x) => F.fold(x, [4, 5], 2, { padding: [1, 0], stride: [1, 2] }), [
  inp([1, 8, 10], 5005),
]);
check("adaptiveAvgPool1d", (x) => F.adaptiveAvgPool1d(x, 3), [inp([2, 2, 7], 5006)]);
check("lpPool1d", (x) => F.lpPool1d(x, 2, 3, { stride: 2, ceilMode: true }), [
  inp([2, 2, 8], 5007),
]);
check("lpPool2d", (x) => F.lpPool2d(x.abs().add(0.5), 1.5, [2, 3], { stride: 1 }), [
  inp([1, 2, 4, 5], 5008),
]);
check("maxPool2d with returnIndices (output)", (x) =>
  F.maxPool2d(x, 3, {
    stride: 2,
    padding: 1,
    returnIndices: true,
  })[0], [inp([1, 2, 5, 6], 5009)]);
check("maxUnpool2d", (x) => {
  const indices = tensor([0, 3, 9, 10, 6, 7, 12, 15], { shape: [1, 2, 2, 2], dtype: "int32" });
  return F.maxUnpool2d(x, indices, 2);
}, [inp([1, 2, 2, 2], 5010)]);
check("maxUnpool1d with outputSize", (x) => {
  const indices = tensor([1, 2, 4, 6], { shape: [1, 4], dtype: "int32" });
  return F.maxUnpool1d(x, indices, 2, { outputSize: [9] });
}, [inp([1, 4], 5011)]);
check("channelShuffle", (x) => F.channelShuffle(x, 3), [inp([1, 6, 2, 2], 5012)]);
check("Softmax2d", (x) => new nn.Softmax2d().forward(x), [inp([2, 3, 2, 2], 5013)]);

// ---------------------------------------------------------------- errors

Deno.test("padding layers: wrong ranks, amounts and sizes are errors naming them", () => {
  const x2 = tensor([1, 2, 3, 4], { shape: [2, 2] });
  assert.throws(
    () => new nn.ReflectionPad2d(1).forward(x2),
    /ReflectionPad2d: expected a 3-D \(unbatched\) or 4-D \(batched\) input, got shape \[2, 2\]/,
  );
  assert.throws(
    () => new nn.ReplicationPad3d(1).forward(x2),
    /ReplicationPad3d: expected a 4-D .* got shape \[2, 2\]/,
  );
  assert.throws(
    () => new nn.ReplicationPad1d(1).forward(tensor([1, 2, 3])),
    /ReplicationPad1d: expected a 2-D .* got shape \[3\]/,
  );
  assert.throws(
    () => new nn.ConstantPad2d(1, 0).forward(tensor([1, 2, 3])),
    /ConstantPad2d: padding \(1, 1, 1, 1\) needs an input of at least 2 dims, got shape \[3\]/,
  );
  assert.throws(
    () => new nn.ReflectionPad1d(2).forward(x2),
    /reflect padding \(2, 2\) must be less than the size 2/,
  );
  assert.throws(
    () => new nn.ReflectionPad2d([1, 2]),
    /ReflectionPad2d: padding must be .* got \[1,2\]/,
  );
  assert.throws(
    () => new nn.ReplicationPad1d([-2, -1]).forward(tensor([1, 2, 3], { shape: [1, 3] })),
    /ReplicationPad1d: padding \(-2, -1\) leaves 0 elements of dim 1 \(size 3\) of input of shape \[1, 3\]/,
  );
  assert.throws(() => new nn.ConstantPad1d(1, "0" as unknown as number), /value must be a number/);
  assert.throws(() => new nn.ConstantPad1d(1.5, 0), /ConstantPad1d: padding .* got 1.5/);
  assert.throws(
    () => new nn.ReplicationPad1d(1).forward(tensor([], { shape: [1, 0] })),
    /ReplicationPad1d: expected non-empty .* got shape \[1, 0\]/,
  );
});

Deno.test("unfold / fold: wrong ranks, block counts and channel counts are errors naming them", () => {
  const x = tensor(new Array(25).fill(1), { shape: [1, 1, 5, 5] });
  assert.throws(
    () => F.unfold(x.reshape([5, 5]), 2),
    /unfold: expected a 3-D .* got shape \[5, 5\]/,
  );
  assert.throws(() => F.unfold(x, 6), /unfold: .*\(5, 5\).* gives 0 x 0 sliding blocks/);
  const cols = tensor(new Array(2 * 12 * 15).fill(1), { shape: [2, 12, 15] });
  assert.throws(
    () => F.fold(cols, [5, 5], 2),
    /fold: outputSize \(5, 5\) .* has 4 x 4 = 16 sliding blocks, but dim 2 of input of shape \[2, 12, 15\] is 15/,
  );
  assert.throws(
    () => F.fold(tensor(new Array(13 * 16).fill(1), { shape: [1, 13, 16] }), [5, 5], 2),
    /fold: dim 1 of input of shape \[1, 13, 16\] \(13\) must be a non-zero multiple of the kernel's 2 x 2 = 4 taps/,
  );
  assert.throws(
    () => F.fold(tensor(new Array(16).fill(1)), [5, 5], 2),
    /fold: expected a 2-D .* got shape \[16\]/,
  );
  assert.throws(() => F.unfold(x, 2, { stride: 0 }), /unfold: stride must be an integer >= 1/);
  assert.throws(() => F.unfold(x.to("int32"), 2), /unfold: expected a floating-point input/);
});

Deno.test("pooling extras: bad ranks, sizes and indices are errors naming them", async () => {
  const x1 = tensor([1, 2, 3, 4, 5, 6, 7]);
  assert.throws(
    () => F.adaptiveAvgPool1d(x1, 3),
    /adaptiveAvgPool1d: expected a 2-D .* got shape \[7\]/,
  );
  const x = tensor([1, 2, 3, 4, 5, 6, 7, 8], { shape: [1, 2, 4] });
  assert.throws(() => F.adaptiveAvgPool1d(x, 0), /outputSize must be an integer >= 1 .* got 0/);
  assert.throws(
    () => F.lpPool1d(x, 0, 2),
    /lpPool1d: normType must be a finite non-zero number, got 0/,
  );
  assert.throws(
    () => F.lpPool2d(x.reshape([2, 4]), 2, 2),
    /lpPool2d: expected a 3-D .* got shape \[2, 4\]/,
  );
  const [y, i] = F.maxPool1d(x, 2, { returnIndices: true });
  assert.throws(
    () => F.maxUnpool1d(y, i.to("float32"), 2),
    /maxUnpool1d: indices must be an int32 tensor .* got float32/,
  );
  assert.throws(
    () => F.maxUnpool1d(y, i.reshape([2, 2]), 2),
    /indices of shape \[2, 2\] must have the shape of input \[1, 2, 2\]/,
  );
  assert.throws(
    () => F.maxUnpool1d(y, i, 2, { outputSize: [6] }),
    /maxUnpool1d: invalid outputSize \[6\] \(dim 0 must be between 2 and 6, exclusive\)/,
  );
  assert.throws(
    () => F.maxUnpool1d(y, i, 2, { outputSize: [1, 5] }),
    /outputSize must have 1 or 3 elements, got \[1,5\]/,
  );
  const bad = tensor([0, 9, 1, 2], { shape: [1, 2, 2], dtype: "int32" });
  // Indices from the host fail at once, ones the device computed at the next read.
  assert.throws(
    () => F.maxUnpool1d(y, bad, 2),
    /maxUnpool1d: index 9 is out of range for output planes of size 4 \(4 elements\)/,
  );
  await assert.rejects(
    () => F.maxUnpool1d(y, i.add(3), 2).data(),
    /maxUnpool1d: index [4-7] is out of range for output planes of size 4/,
  );
  assert.throws(
    () => F.channelShuffle(tensor([1, 2, 3, 4, 5, 6], { shape: [1, 6] }), 2),
    /channelShuffle: expected an input of more than 2 dims .* got shape \[1, 6\]/,
  );
  assert.throws(
    () => new nn.ChannelShuffle(4).forward(tensor(new Array(24).fill(0), { shape: [1, 6, 2, 2] })),
    /the 6 channels \(dim 1\) of input of shape \[1, 6, 2, 2\] must be divisible by groups 4/,
  );
  assert.throws(
    () => new nn.ChannelShuffle(0),
    /ChannelShuffle: groups must be a positive integer, got 0/,
  );
  assert.throws(
    () => new nn.Softmax2d().forward(tensor([1, 2, 3, 4], { shape: [2, 2] })),
    /Softmax2d: expected a 3-D .* got shape \[2, 2\]/,
  );
});
