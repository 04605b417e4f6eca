/**
 * The decoder layers against PyTorch 1.13's numbers
 * (tests/fixtures/torch_layers.json, keys `conv_transpose`,
 * `conv_transpose_init` and `interpolate`) on every backend: ConvTranspose2d
 * and ConvTranspose1d (modules and functions; output and the gradients of
 * input, weight and bias), their default initialisation, Upsample and
 * `interpolate` (output and input gradient), and their errors.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, manualSeed, nn, type Tensor } from "../mod.ts";
import fixtures from "./fixtures/torch_layers.json" with { type: "json" };
import {
  assertTensor,
  backendTest,
  decodeFixture,
  fixtureTensor,
  type FixtureValues,
  on,
  shapeOf,
} from "./harness.ts";

const F = nn.functional;
const TOL = { atol: 2e-5, rtol: 1e-4 };

/** Output, then the gradients of `(out * g).sum()` for `inputs`, against the fixture. */
async function checkCase(
  what: string,
  out: Tensor,
  want: FixtureValues,
  g: FixtureValues,
  grads: [Tensor, FixtureValues | null][],
): Promise<void> {
  await assertTensor(out, decodeFixture(want), {
    ...TOL,
    shape: shapeOf(want),
    what: `${what} output`,
  });
  out.mul(fixtureTensor(g, out.device)).sum().backward();
  for (const [i, [x, expected]] of grads.entries()) {
    if (expected === null) continue;
    assert.ok(x.grad, `${what}: grad ${i} exists`);
    await assertTensor(x.grad, decodeFixture(expected), {
      ...TOL,
      shape: [...x.shape],
      what: `${what} grad ${i}`,
    });
  }
}

type ConvTCase = (typeof fixtures.conv_transpose)[number];

function makeConvT(d: Device, c: ConvTCase): nn.ConvTranspose2d | nn.ConvTranspose1d {
  const options = { ...c.options, device: d };
  return c.rank === 2
    ? new nn.ConvTranspose2d(
      c.in_channels,
      c.out_channels,
      c.kernel_size as nn.functional.Size2,
      options as nn.ConvTranspose2dModuleOptions,
    )
    : new nn.ConvTranspose1d(
      c.in_channels,
      c.out_channels,
      c.kernel_size as number,
      options as nn.ConvTranspose1dModuleOptions,
    );
}

for (const c of fixtures.conv_transpose) {
  backendTest(`torch ConvTranspose${c.rank}d ${c.name}: module`, async (d) => {
    const m = makeConvT(d, c);
    assert.equal(`${m}`, c.repr);
    assert.deepEqual(Object.keys(m.stateDict()), c.keys);
    m.loadStateDict({
      weight: fixtureTensor(c.weight, d),
      ...(c.bias ? { bias: fixtureTensor(c.bias, d) } : {}),
    });
    const x = fixtureTensor(c.input, d, { requiresGrad: true });
    const out = m.forward(x, c.output_size);
    await checkCase(c.name, out, c.output, c.g, [
      [x, c.grads.input],
      [m.weight, c.grads.weight],
      ...(m.bias ? [[m.bias, c.grads.bias] as [Tensor, FixtureValues | null]] : []),
    ]);
  });

  if (c.output_size !== null) continue;
  backendTest(`torch convTranspose${c.rank}d ${c.name}: function`, async (d) => {
    const x = fixtureTensor(c.input, d, { requiresGrad: true });
    const w = fixtureTensor(c.weight, d, { requiresGrad: true });
    const b = c.bias ? fixtureTensor(c.bias, d, { requiresGrad: true }) : null;
    const out = c.rank === 2
      ? F.convTranspose2d(x, w, { ...c.options as nn.functional.ConvTranspose2dOptions, bias: b })
      : F.convTranspose1d(x, w, { ...c.options as nn.functional.ConvTranspose1dOptions, bias: b });
    await checkCase(c.name, out, c.output, c.g, [
      [x, c.grads.input],
      [w, c.grads.weight],
      ...(b ? [[b, c.grads.bias] as [Tensor, FixtureValues | null]] : []),
    ]);
  });
}

backendTest(
  "ConvTranspose default init: kaiming-uniform with fan_in from weight dim 1",
  async (d) => {
    // Seeded: unseeded, the 72 weights of the first case all fall within 0.85 of the bound
    // with probability 0.85^72 ≈ 8e-6 per backend.
    manualSeed(6);
    for (const c of fixtures.conv_transpose_init) {
      const m = makeConvT(d, { ...c, options: { ...c.options } } as unknown as ConvTCase);
      assert.deepEqual([...m.weight.shape], c.weight_shape);
      const w = Array.from(await m.weight.data());
      const b = Array.from(await m.bias!.data());
      // The bound uses fan_in = (out / groups) · kernel: with in / groups (a
      // plain convolution's) these weights would overflow or fill less.
      const bound = c.bound * (1 + 1e-6);
      assert.ok(w.every((v) => Math.abs(v) <= bound), `weights within ${c.bound}`);
      assert.ok(Math.max(...w.map(Math.abs)) > 0.85 * c.bound, `weights fill ±${c.bound}`);
      assert.ok(b.every((v) => Math.abs(v) <= bound), `bias within ${c.bound}`);
      // PyTorch's own draw reached the same range.
      assert.ok(c.observed_max_abs.weight <= c.bound && c.observed_max_abs.weight > 0.85 * c.bound);
    }
  },
);

for (const c of fixtures.interpolate) {
  backendTest(`torch interpolate ${c.name}`, async (d) => {
    const options = c.options as nn.UpsampleOptions;
    const m = new nn.Upsample(options);
    assert.equal(`${m}`, c.repr);
    const x = fixtureTensor(c.input, d, { requiresGrad: true });
    await checkCase(`Upsample ${c.name}`, m.forward(x), c.output, c.g, [[x, c.grads.input]]);
    const x2 = fixtureTensor(c.input, d, { requiresGrad: true });
    await checkCase(`interpolate ${c.name}`, F.interpolate(x2, options), c.output, c.g, [
      [x2, c.grads.input],
    ]);
  });
}

backendTest("convTranspose and interpolate: errors name the shapes and values", (d) => {
  const x = on(d, [1, 4, 3, 3], new Array(36).fill(1));
  const w = on(d, [4, 2, 3, 3], new Array(72).fill(1));
  assert.throws(
    () => F.convTranspose2d(on(d, [4, 3], new Array(12).fill(1)), w),
    /convTranspose2d: expected a 3-D \(unbatched\) or 4-D \(batched\) input, got shape \[4, 3\]/,
  );
  assert.throws(
    () => F.convTranspose2d(x, on(d, [3, 2, 3, 3], new Array(54).fill(1))),
    /convTranspose2d: input of shape \[1, 4, 3, 3\] has 4 channels, but weight of shape \[3, 2, 3, 3\] expects 3/,
  );
  assert.throws(
    () => F.convTranspose2d(x, w, { stride: 2, outputPadding: 2 }),
    /convTranspose2d: outputPadding \[2,2\] must be smaller than either stride \[2,2\] or dilation \[1,1\]/,
  );
  assert.throws(
    () => F.convTranspose2d(x, w, { groups: 3 }),
    /groups \(3\) must be a positive integer dividing the weight's in_channels \(4/,
  );
  assert.throws(
    () => F.convTranspose2d(x, w, { bias: on(d, [3], [1, 2, 3]) }),
    /bias of shape \[3\] does not match 2 output channels/,
  );
  assert.throws(
    () => F.convTranspose2d(on(d, [1, 4, 1, 1], new Array(4).fill(1)), w, { padding: 2 }),
    /convTranspose2d: the output size -1x-1 is too small for input of shape \[1, 4, 1, 1\] \(kernel 3x3, stride \[1,1\], padding \[2,2\], dilation \[1,1\]\)/,
  );
  assert.throws(
    () =>
      F.convTranspose1d(
        on(d, [1, 4, 5], new Array(20).fill(1)),
        on(d, [2, 2, 3], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]),
      ),
    /convTranspose1d: input of shape \[1, 4, 5\] has 4 channels, but weight of shape \[2, 2, 3\] expects 2/,
  );
  assert.throws(
    () =>
      F.convTranspose1d(
        on(d, [1, 2, 5], new Array(10).fill(1)),
        on(d, [2, 1, 3], new Array(6).fill(1)),
        {
          stride: 2,
          dilation: 3,
          outputPadding: 3,
        },
      ),
    /convTranspose1d: outputPadding 3 must be smaller than either stride 2 or dilation 3/,
  );
  const m = new nn.ConvTranspose2d(4, 2, 3, { stride: 2, device: d });
  assert.deepEqual([...m.forward(x, [8, 8]).shape], [1, 2, 8, 8]);
  assert.throws(
    () => m.forward(x, [9, 8]),
    /ConvTranspose2d: requested an output size of \[9,8\], but valid sizes range from \[7,7\] to \[8,8\]/,
  );
  assert.throws(() => m.forward(x, [8]), /outputSize must have 2 or 4 entries, got \[8\]/);

  const img = on(d, [1, 2, 3, 3], new Array(18).fill(1));
  assert.throws(
    () => F.interpolate(img, { size: 4, scaleFactor: 2 }),
    /interpolate: give exactly one of size and scaleFactor, got both \(size 4, scaleFactor 2\)/,
  );
  assert.throws(
    () => F.interpolate(img),
    /interpolate: give exactly one of size and scaleFactor, got neither/,
  );
  assert.throws(
    () => F.interpolate(img, { size: 4, mode: "cubic" as nn.functional.InterpolateMode }),
    /interpolate: mode must be one of "nearest", "nearest-exact", "linear", "bilinear", "trilinear", "bicubic", "area", got "cubic"/,
  );
  assert.throws(
    () => F.interpolate(img, { size: 4, mode: "linear" }),
    /interpolate: mode "linear" needs a 3-D \[N, C, L\] input, got shape \[1, 2, 3, 3\]/,
  );
  assert.throws(
    () => F.interpolate(on(d, [2, 3], new Array(6).fill(1)), { size: 4 }),
    /interpolate: mode "nearest" needs a 3-D \[N, C, L\], 4-D \[N, C, H, W\] or 5-D \[N, C, D, H, W\] input, got shape \[2, 3\]/,
  );
  assert.throws(
    () => F.interpolate(img, { size: 4, alignCorners: true }),
    /alignCorners can only be set with the interpolating modes/,
  );
  assert.throws(
    () => F.interpolate(img, { size: [4, 4, 4] }),
    /size \[4,4,4\] must have one entry per spatial dim of the input \(\[3, 3\]\)/,
  );
  assert.throws(
    () => F.interpolate(img, { scaleFactor: 0.2 }),
    /scaleFactor 0.2 gives an empty output \[0, 0\] for the spatial size \[3, 3\]/,
  );
  const x1 = on(d, [1, 2, 1], [1, 2]);
  const w1 = on(d, [2, 1, 1], [1, 2]);
  assert.throws(
    () => F.convTranspose1d(x1, w1, { stride: 2.5 }),
    /convTranspose1d: stride must be an integer >= 1 or \[one\], got 2.5/,
  );
  assert.throws(
    () => F.convTranspose1d(x1, w1, { padding: 4 }),
    /convTranspose1d: the output length -7 is too small for input of shape \[1, 2, 1\] \(kernel 1, stride 1, padding 4, dilation 1\)/,
  );
  assert.throws(
    () => new nn.ConvTranspose2d(2, 2, 3, { paddingMode: "reflect", device: d } as never),
    /ConvTranspose2d: only "zeros" paddingMode is supported, got "reflect"/,
  );
});

backendTest("a batch of 0 rows gives an empty output and zero parameter gradients", async (d) => {
  const empty = (shape: number[]) => on(d, shape, []);
  const convT = new nn.ConvTranspose2d(3, 2, 3, { stride: 2, device: d });
  const x = empty([0, 3, 4, 4]);
  const y = convT.forward(x);
  assert.deepEqual(y.shape, [0, 2, 9, 9]);
  y.sum().backward();
  assert.deepEqual(Array.from(await convT.weight.grad!.data()), new Array(54).fill(0));
  const convT1 = new nn.ConvTranspose1d(2, 4, 3, { groups: 2, device: d });
  assert.deepEqual(convT1.forward(empty([0, 2, 5])).shape, [0, 4, 7]);
  for (const mode of ["nearest", "bilinear"] as const) {
    assert.deepEqual(F.interpolate(empty([0, 2, 2, 2]), { scaleFactor: 1.5, mode }).shape, [
      0,
      2,
      3,
      3,
    ]);
  }
});
