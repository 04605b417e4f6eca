/**
 * The volumetric (3-d) layers against PyTorch 1.13
 * (tests/fixtures/torch_volumetric.json): Conv3d (strides, padding incl.
 * "same"/"valid", dilation, groups, padding modes), ConvTranspose3d (output
 * padding, groups, dilation, forward outputSize), MaxPool3d, AvgPool3d,
 * AdaptiveAvgPool3d, AdaptiveMaxPool3d, BatchNorm3d and InstanceNorm3d (two
 * training steps and an evaluation step), interpolate / Upsample "trilinear"
 * and "nearest" on 5-D inputs; module and functional forms, outputs and
 * gradients on every backend, reprs and state-dict keys. Dropout3d by its
 * structure (whole channels, scaling, evaluation). Float64 gradient checks
 * on cpu and errors naming the bad value.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, manualSeed, nn, noGrad, ones, type Tensor, tensor, zeros } from "../mod.ts";
import {
  assertTensor,
  backendTest,
  decodeFixture,
  fixtureTensor,
  type FixtureValues,
  shapeOf,
} from "./harness.ts";
import { check, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_volumetric.json" with { type: "json" };

const F = nn.functional;

function tol(device: Device) {
  return device.backend === "cpu" ? { atol: 2e-5, rtol: 1e-4 } : { atol: 1e-4, rtol: 1e-4 };
}

type Size3 = nn.functional.Size3;
type Options = Record<string, unknown>;
type Grads = Record<string, FixtureValues>;

interface Case {
  input: FixtureValues;
  output: FixtureValues;
  g: FixtureValues;
  grads: Grads;
}

/** Compares `out` and the gradients of (out · g).sum() with the case's. */
async function compare(
  device: Device,
  c: Case,
  x: Tensor,
  out: Tensor,
  params: Record<string, Tensor | null> = {},
): Promise<void> {
  await assertTensor(out, decodeFixture(c.output), {
    ...tol(device),
    what: "output",
    shape: shapeOf(c.output),
  });
  out.mul(fixtureTensor(c.g, device)).sum().backward();
  await assertTensor(x.grad!, decodeFixture(c.grads.input), { ...tol(device), what: "input grad" });
  for (const [name, p] of Object.entries(params)) {
    if (!p) continue;
    await assertTensor(p.grad!, decodeFixture(c.grads[name]), {
      ...tol(device),
      what: `${name} grad`,
    });
  }
}

function loadParams(m: nn.Module, params: Record<string, FixtureValues>, device: Device): void {
  const sd = m.namedParameters();
  noGrad(() => {
    for (const [name, p] of sd) p.copy_(fixtureTensor(params[name], device));
  });
}

for (const c of fixtures.conv3d) {
  backendTest(`Conv3d ${c.name}: ${c.repr}, as PyTorch`, async (device) => {
    const [cin, cout, k] = c.args as [number, number, Size3];
    const m = new nn.Conv3d(cin, cout, k, c.options as nn.Conv3dModuleOptions).to(device);
    assert.equal(m.toString(), c.repr);
    assert.deepEqual(Object.keys(m.stateDict()), c.keys);
    loadParams(m, c.params as Record<string, FixtureValues>, device);
    const x = fixtureTensor(c.input, device, { requiresGrad: true });
    await compare(device, c as Case, x, m.forward(x), { weight: m.weight, bias: m.bias });
    const o = c.options as nn.Conv3dModuleOptions;
    if ((o.paddingMode ?? "zeros") === "zeros") {
      // The functional form gives the same numbers.
      const x2 = fixtureTensor(c.input, device, { requiresGrad: true });
      const y = F.conv3d(x2, m.weight, m.bias, {
        stride: o.stride,
        padding: o.padding,
        dilation: o.dilation,
        groups: o.groups,
      });
      m.zeroGrad();
      await compare(device, c as Case, x2, y, { weight: m.weight, bias: m.bias });
    }
  });
}

for (const c of fixtures.conv_transpose3d) {
  backendTest(`ConvTranspose3d ${c.name}: ${c.repr}, as PyTorch`, async (device) => {
    const [cin, cout, k] = c.args as [number, number, Size3];
    const o = c.options as nn.ConvTranspose3dModuleOptions;
    const m = new nn.ConvTranspose3d(cin, cout, k, o).to(device);
    assert.equal(m.toString(), c.repr);
    assert.deepEqual(Object.keys(m.stateDict()), c.keys);
    loadParams(m, c.params as Record<string, FixtureValues>, device);
    const x = fixtureTensor(c.input, device, { requiresGrad: true });
    const out = m.forward(x, c.output_size);
    await compare(device, c as Case, x, out, { weight: m.weight, bias: m.bias });
    if (!c.output_size) {
      const x2 = fixtureTensor(c.input, device, { requiresGrad: true });
      const y = F.convTranspose3d(x2, m.weight, { ...o, bias: m.bias });
      m.zeroGrad();
      await compare(device, c as Case, x2, y, { weight: m.weight, bias: m.bias });
    }
  });
}

function makePool(module: string, args: unknown[], o: Options): nn.Module {
  const a0 = args[0] as Size3;
  switch (module) {
    case "MaxPool3d":
      return new nn.MaxPool3d(a0, o);
    case "AvgPool3d":
      return new nn.AvgPool3d(a0, o);
    case "AdaptiveAvgPool3d":
      return new nn.AdaptiveAvgPool3d(args[0] as nn.functional.AdaptiveSize3);
    case "AdaptiveMaxPool3d":
      return new nn.AdaptiveMaxPool3d(args[0] as nn.functional.AdaptiveSize3);
  }
  throw new Error(`unknown pool ${module}`);
}

function poolFunction(module: string, args: unknown[], o: Options): (x: Tensor) => Tensor {
  const a0 = args[0] as Size3;
  switch (module) {
    case "MaxPool3d":
      return (x) => F.maxPool3d(x, a0, o);
    case "AvgPool3d":
      return (x) => F.avgPool3d(x, a0, o);
    case "AdaptiveAvgPool3d":
      return (x) => F.adaptiveAvgPool3d(x, args[0] as nn.functional.AdaptiveSize3);
    default:
      return (x) => F.adaptiveMaxPool3d(x, args[0] as nn.functional.AdaptiveSize3);
  }
}

for (const c of fixtures.pools) {
  backendTest(`${c.module} ${c.name}: ${c.repr}, as PyTorch`, async (device) => {
    const m = makePool(c.module, c.args, c.options);
    assert.equal(m.toString(), c.repr);
    assert.deepEqual(Object.keys(m.stateDict()), []);
    const x = fixtureTensor(c.input, device, { requiresGrad: true });
    await compare(device, c as Case, x, m.forward(x) as Tensor);
    const x2 = fixtureTensor(c.input, device, { requiresGrad: true });
    await compare(device, c as Case, x2, poolFunction(c.module, c.args, c.options)(x2));
  });
}

for (const c of fixtures.norms) {
  backendTest(
    `${c.module} ${c.name}: two training steps and an evaluation step equal PyTorch's`,
    async (device) => {
      const o = c.options as nn.BatchNormModuleOptions & nn.InstanceNormModuleOptions;
      const m = (c.module === "BatchNorm3d"
        ? new nn.BatchNorm3d(c.num_features, o)
        : new nn.InstanceNorm3d(c.num_features, o as nn.InstanceNormModuleOptions)).to(device);
      assert.equal(m.toString(), c.repr);
      assert.deepEqual(Object.keys(m.stateDict()), c.keys);
      const params = c.params as Record<string, FixtureValues>;
      if (params.weight) {
        loadParams(m, params, device);
      }
      for (const [i, step] of c.steps.entries()) {
        m.train(step.training);
        m.zeroGrad();
        const x = fixtureTensor(step.input, device, { requiresGrad: true });
        await compare(device, step as Case, x, m.forward(x), {
          weight: m.weight,
          bias: m.bias,
        });
        const sd = m.stateDict();
        for (const [key, value] of Object.entries(step.buffers)) {
          if (key === "num_batches_tracked") {
            assert.equal(await sd[key].item(), value, `step ${i}: ${key}`);
          } else {
            await assertTensor(sd[key], decodeFixture(value as FixtureValues), {
              ...tol(device),
              what: `step ${i}: ${key}`,
            });
          }
        }
      }
    },
  );
}

for (const c of fixtures.interpolate) {
  backendTest(`interpolate ${c.name}: ${c.repr}, as PyTorch`, async (device) => {
    const o = c.options as nn.functional.InterpolateOptions;
    const x = fixtureTensor(c.input, device, { requiresGrad: true });
    await compare(device, c as Case, x, F.interpolate(x, o));
    const { recomputeScaleFactor: _, ...upsample } = o;
    const m = new nn.Upsample(upsample);
    assert.equal(m.toString(), c.repr);
    if (!o.recomputeScaleFactor) {
      const x2 = fixtureTensor(c.input, device, { requiresGrad: true });
      await compare(device, c as Case, x2, m.forward(x2));
    }
  });
}

Deno.test("Dropout3d and Upsample trilinear: reprs as PyTorch", () => {
  assert.equal(new nn.Dropout3d(0.2).toString(), fixtures.reprs.Dropout3d);
  assert.equal(
    new nn.Upsample({ scaleFactor: 2, mode: "trilinear" }).toString(),
    fixtures.reprs.Upsample_trilinear,
  );
});

backendTest(
  "dropout3d drops whole channels of 5-D and unbatched 4-D inputs, scales the rest, evaluation is the identity",
  async (device) => {
    manualSeed(31);
    for (const shape of [[3, 8, 2, 3, 2], [16, 2, 3, 2]]) {
      const x = ones(shape, { device, requiresGrad: true });
      const y = F.dropout3d(x, 0.5);
      const values = await y.data();
      const per = shape.slice(-3).reduce((a, b) => a * b, 1);
      const channels = values.length / per;
      let dropped = 0;
      for (let i = 0; i < channels; i++) {
        const chunk = Array.from(values.slice(i * per, (i + 1) * per));
        const first = chunk[0];
        assert.ok(first === 0 || first === 2, `channel ${i}: ${first}`);
        assert.ok(chunk.every((v) => v === first), `channel ${i} is not dropped as a whole`);
        if (first === 0) dropped++;
      }
      assert.ok(dropped > 0 && dropped < channels, `${dropped} of ${channels} channels dropped`);
      y.sum().backward();
      assert.deepEqual(Array.from(await x.grad!.data()), Array.from(values));
    }
    const x = ones([2, 3, 2, 2, 2], { device });
    const m = new nn.Dropout3d(0.5);
    m.eval();
    assert.equal(m.forward(x), x);
    assert.deepEqual(Array.from(await F.dropout3d(x, 0).data()), new Array(48).fill(1));
    assert.deepEqual(Array.from(await F.dropout3d(x, 1).data()), new Array(48).fill(0));
    m.train();
    manualSeed(32);
    const a = await m.forward(x).data();
    manualSeed(32);
    assert.deepEqual(Array.from(await F.dropout3d(x, 0.5).data()), Array.from(a));
  },
);

backendTest(
  "conv3d: an output element of a larger input equals the sum over its window",
  async (device) => {
    // A shape beyond the fixtures' sizes: larger depth, several taps.
    const x = tensor(Array.from({ length: 2 * 3 * 9 * 6 * 5 }, (_, i) => Math.sin(i * 0.37)), {
      shape: [2, 3, 9, 6, 5],
      device,
    });
    const w = tensor(Array.from({ length: 4 * 3 * 3 * 2 * 2 }, (_, i) => Math.cos(i * 0.11)), {
      shape: [4, 3, 3, 2, 2],
      device,
    });
    const y = F.conv3d(x, w, null, { stride: [2, 1, 1], padding: [2, 1, 0], dilation: [3, 1, 2] });
    assert.deepEqual([...y.shape], [2, 4, 4, 7, 3]);
    // One output element by hand: the sum over the window it reads.
    const xs = await x.data();
    const ws = await w.data();
    const [od, oh, ow] = [2, 3, 2];
    let expected = 0;
    for (let c = 0; c < 3; c++) {
      for (let kd = 0; kd < 3; kd++) {
        for (let kh = 0; kh < 2; kh++) {
          for (let kw = 0; kw < 2; kw++) {
            const [d, h, ww] = [od * 2 - 2 + kd * 3, oh - 1 + kh, ow + kw * 2];
            if (d < 0 || d >= 9 || h < 0 || h >= 6 || ww < 0 || ww >= 5) continue;
            expected += xs[((1 * 3 + c) * 9 + d) * 30 + h * 5 + ww] *
              ws[(((2 * 3 + c) * 3 + kd) * 2 + kh) * 2 + kw];
          }
        }
      }
    }
    const got = (await y.data())[(((1 * 4 + 2) * 4 + od) * 7 + oh) * 3 + ow];
    assert.ok(Math.abs(got - expected) < 1e-4, `conv3d element: ${got}, expected ${expected}`);
  },
);

Deno.test("Conv3d and ConvTranspose3d: PyTorch's init bounds, 1/sqrt(fan-in)", async () => {
  // fan-in = weight dim 1 · kernel volume: 2 · 2·3·4 for both (ConvTranspose3d: 4 / groups 2).
  const bound = 1 / Math.sqrt(2 * 24);
  // Seeded: unseeded, the 4 biases of ConvTranspose3d all fall within half the bound once in
  // 16 runs (and Conv3d's 6 once in 64).
  manualSeed(33);
  for (
    const m of [
      new nn.Conv3d(4, 6, [2, 3, 4], { groups: 2 }),
      new nn.ConvTranspose3d(6, 4, [2, 3, 4], { groups: 2 }),
    ]
  ) {
    for (const p of [m.weight, m.bias!]) {
      const values = Array.from(await p.data());
      const max = Math.max(...values.map(Math.abs));
      assert.ok(max <= bound && max > bound / 2, `${m}: max |value| ${max}, bound ${bound}`);
    }
  }
  assert.deepEqual([...new nn.Conv3d(4, 6, [2, 3, 4], { groups: 2 }).weight.shape], [
    6,
    2,
    2,
    3,
    4,
  ]);
  assert.deepEqual([...new nn.ConvTranspose3d(6, 4, 2, { groups: 2 }).weight.shape], [
    6,
    2,
    2,
    2,
    2,
  ]);
});

// ------------------------------------------------------------ gradient checks (float64, cpu)

check(
  "conv3d: stride, padding, dilation, groups (input, weight, bias)",
  (x, w, b) =>
    F.conv3d(x, w, b, { stride: [2, 1, 2], padding: [1, 0, 1], dilation: [1, 2, 1], groups: 2 }),
  [inp([1, 4, 5, 5, 4], 7001), inp([2, 2, 2, 2, 3], 7002), inp([2], 7003)],
);
check(
  "conv3d: padding same with an even kernel, unbatched",
  (x, w) => F.conv3d(x, w, null, { padding: "same" }),
  [inp([2, 3, 4, 3], 7004), inp([3, 2, 2, 3, 2], 7005)],
);
check(
  "convTranspose3d: stride, padding, outputPadding, groups, dilation (input, weight, bias)",
  (x, w, b) =>
    F.convTranspose3d(x, w, {
      bias: b,
      stride: [2, 1, 2],
      padding: [1, 0, 0],
      outputPadding: [1, 0, 1],
      dilation: [1, 2, 1],
      groups: 2,
    }),
  [inp([1, 4, 3, 2, 3], 7006), inp([4, 1, 3, 2, 2], 7007), inp([2], 7008)],
);
check(
  "maxPool3d: stride, padding, dilation, ceilMode",
  (x) =>
    F.maxPool3d(x, [3, 2, 2], {
      stride: 2,
      padding: [1, 1, 0],
      dilation: [1, 1, 2],
      ceilMode: true,
    }),
  [{
    shape: [1, 2, 5, 4, 5],
    values: Array.from({ length: 200 }, (_, i) => Math.sin(i * 1.3) * 3),
  }],
);
check(
  "avgPool3d: ceilMode, countIncludePad false",
  (x) => F.avgPool3d(x, 3, { stride: 2, padding: 1, ceilMode: true, countIncludePad: false }),
  [inp([1, 2, 5, 4, 6], 7010)],
);
check(
  "avgPool3d: divisorOverride, unbatched",
  (x) => F.avgPool3d(x, [2, 2, 3], { stride: 1, divisorOverride: 5 }),
  [inp([2, 3, 3, 4], 7011)],
);
check("adaptiveAvgPool3d", (x) => F.adaptiveAvgPool3d(x, [2, 3, null]), [
  inp([1, 2, 5, 4, 3], 7012),
]);
check(
  "adaptiveMaxPool3d",
  (x) => F.adaptiveMaxPool3d(x, [2, 3, 2]),
  [{
    shape: [1, 2, 5, 4, 3],
    values: Array.from({ length: 120 }, (_, i) => Math.sin(i * 2.1) * 3),
  }],
);
check(
  "interpolate trilinear",
  (x) => F.interpolate(x, { size: [4, 5, 3], mode: "trilinear" }),
  [inp([1, 2, 3, 2, 4], 7013)],
);
check(
  "interpolate trilinear, alignCorners",
  (x) => F.interpolate(x, { scaleFactor: 1.5, mode: "trilinear", alignCorners: true }),
  [inp([1, 1, 3, 2, 3], 7014)],
);
check("interpolate nearest 5-D", (x) => F.interpolate(x, { size: [4, 1, 5] }), [
  inp([1, 2, 3, 2, 3], 7015),
]);

// ------------------------------------------------------------ errors

Deno.test("volumetric layers: bad input is an error naming the value or shape", () => {
  const x = zeros([1, 2, 4, 4, 4]);
  const w = zeros([3, 2, 3, 3, 3]);
  assert.throws(
    () => F.conv3d(zeros([2, 4, 4, 4, 4, 1]), w),
    /conv3d: expected a 4-D \(unbatched\) or 5-D \(batched\) input, got shape \[2, 4, 4, 4, 4, 1\]/,
  );
  assert.throws(
    () => F.conv3d(x, zeros([3, 2, 3, 3])),
    /conv3d: weight must be \[out_channels, in_channels \/ groups, kD, kH, kW\], got shape \[3, 2, 3, 3\]/,
  );
  assert.throws(
    () => F.conv3d(zeros([1, 3, 4, 4, 4]), w),
    /conv3d: input of shape \[1, 3, 4, 4, 4\] has 3 channels, but weight of shape \[3, 2, 3, 3, 3\] with groups=1 expects 2/,
  );
  assert.throws(
    () => F.conv3d(x, w, null, { groups: 4 }),
    /groups \(4\) must be a positive integer/,
  );
  assert.throws(
    () => F.conv3d(x, w, zeros([2])),
    /conv3d: bias of shape \[2\] does not match 3 output channels/,
  );
  assert.throws(
    () => F.conv3d(x, w, null, { stride: [1, 2, 1], padding: "same" }),
    /conv3d: padding="same" needs stride 1, got \[1,2,1\]/,
  );
  assert.throws(
    () => F.conv3d(x, w, null, { stride: [1, 2] as unknown as Size3 }),
    /conv3d: stride must be an integer >= 1 or a triple of them, got \[1,2\]/,
  );
  assert.throws(
    () => F.conv3d(x, zeros([3, 2, 5, 3, 3])),
    /conv3d: the kernel 5x3x3 .* is larger than the padded input 4x4x4/,
  );
  assert.throws(
    () => F.conv3d(x, zeros([3, 2, 3, 3, 3], { dtype: "float64" })),
    /conv3d: dtypes differ \(input float32, weight float64\)/,
  );
  assert.throws(
    () => F.convTranspose3d(x, zeros([3, 2, 3, 3, 3])),
    /convTranspose3d: input of shape \[1, 2, 4, 4, 4\] has 2 channels, but weight of shape \[3, 2, 3, 3, 3\] expects 3/,
  );
  assert.throws(
    () => F.convTranspose3d(x, zeros([2, 2, 3, 3, 3]), { stride: 2, outputPadding: [0, 2, 0] }),
    /convTranspose3d: outputPadding \[0,2,0\] must be smaller than either stride \[2,2,2\] or dilation \[1,1,1\]/,
  );
  assert.throws(
    () => F.convTranspose3d(zeros([1, 2, 1, 1, 1]), zeros([2, 2, 1, 1, 1]), { padding: 1 }),
    /convTranspose3d: the output size -1x-1x-1 is too small/,
  );
  const ct = new nn.ConvTranspose3d(2, 2, 3, { stride: 2 });
  assert.throws(
    () => ct.forward(x, [9, 9, 12]),
    /ConvTranspose3d: requested an output size of \[9,9,12\], but valid sizes range from \[9,9,9\] to \[10,10,10\]/,
  );
  assert.throws(
    () =>
      new nn.ConvTranspose3d(
        2,
        2,
        3,
        { paddingMode: "reflect" } as nn.ConvTranspose3dModuleOptions,
      ),
    /ConvTranspose3d: only "zeros" paddingMode is supported, got "reflect"/,
  );
  assert.throws(
    () => new nn.Conv3d(2, 3, 3, { groups: 2 }),
    /Conv3d: groups \(2\) must be a positive integer dividing inChannels \(2\) and outChannels \(3\)/,
  );
  assert.throws(
    () => F.maxPool3d(x, 3, { padding: [1, 2, 1] }),
    /maxPool3d: padding \[1,2,1\] must be at most half the kernel size \[3,3,3\]/,
  );
  assert.throws(
    () => F.maxPool3d(x, [5, 2, 2]),
    /maxPool3d: output size 0x2x2 is too small for input of shape \[1, 2, 4, 4, 4\]/,
  );
  assert.throws(
    () => F.avgPool3d(x, 2, { divisorOverride: 0 }),
    /avgPool3d: divisorOverride must be a positive integer, got 0/,
  );
  // PyTorch's avg_pool3d rejects an input dim shorter than the kernel even when padding
  // would make the window fit (max_pool3d does not).
  assert.throws(
    () => F.avgPool3d(zeros([1, 1, 1, 4, 4]), 2, { padding: 1 }),
    /avgPool3d: input of shape \[1, 1, 1, 4, 4\] has spatial size 1x4x4, smaller than the kernel 2x2x2/,
  );
  assert.throws(
    () =>
      new nn.AvgPool3d([1, 3, 3], { padding: [0, 1, 1], ceilMode: true }).forward(
        zeros([1, 8, 1, 4]),
      ),
    /avgPool3d: input of shape \[1, 8, 1, 4\] has spatial size 8x1x4, smaller than the kernel 1x3x3/,
  );
  // A dim exactly the kernel size is fine.
  assert.deepEqual(
    [...F.avgPool3d(zeros([1, 1, 2, 3, 2]), [2, 3, 2], { padding: 1 }).shape],
    [1, 1, 2, 1, 2],
  );
  assert.throws(
    () => F.avgPool3d(zeros([4, 4, 4]), 2),
    /avgPool3d: expected a 4-D \(unbatched\) or 5-D \(batched\) input, got shape \[4, 4, 4\]/,
  );
  assert.throws(
    () => F.adaptiveAvgPool3d(x, [2, 0, 1]),
    /adaptiveAvgPool3d: outputSize must be a positive integer or a triple of them \(or null\), got \[2,0,1\]/,
  );
  assert.throws(
    () => F.adaptiveMaxPool3d(x, [2, 2] as unknown as nn.functional.AdaptiveSize3),
    /adaptiveMaxPool3d: outputSize must be a positive integer or a triple of them \(or null\), got \[2,2\]/,
  );
  assert.throws(
    () => new nn.BatchNorm3d(2).forward(zeros([2, 2, 4, 4])),
    /batchNorm: expected a 5D \[N, C, D, H, W\] input, got shape \[2, 2, 4, 4\]/,
  );
  assert.throws(
    () => new nn.InstanceNorm3d(2, { affine: true }).forward(zeros([1, 3, 2, 2, 2])),
    /InstanceNorm3d: expected input's size at dim=1 to match num_features \(2\), but got 3/,
  );
  assert.throws(
    () => new nn.InstanceNorm3d(2).forward(zeros([2, 2, 2])),
    /InstanceNorm3d: expected 4D or 5D input, got 3D input of shape \[2, 2, 2\]/,
  );
  assert.throws(
    () => F.dropout3d(x, 1.5),
    /dropout3d: dropout probability has to be between 0 and 1, but got 1.5/,
  );
  assert.throws(
    () => new nn.Dropout3d(-0.1),
    /Dropout3d: dropout probability has to be between 0 and 1, but got -0.1/,
  );
  assert.throws(
    () => F.interpolate(zeros([1, 2, 3, 3]), { size: 4, mode: "trilinear" }),
    /interpolate: mode "trilinear" needs a 5-D \[N, C, D, H, W\] input, got shape \[1, 2, 3, 3\]/,
  );
  // An empty spatial dim is a clear error (it used to fail inside the matrix / index setup).
  for (const mode of ["trilinear", "nearest"] as const) {
    assert.throws(
      () => F.interpolate(zeros([1, 1, 0, 2, 2]), { size: [2, 2, 2], mode }),
      /interpolate: input of shape \[1, 1, 0, 2, 2\] has an empty spatial dim/,
    );
  }
  assert.throws(
    () => F.interpolate(x, { size: [2, 2], mode: "trilinear" }),
    /interpolate: size \[2,2\] must have one entry per spatial dim of the input \(\[4, 4, 4\]\)/,
  );
});
