/**
 * Spatial sampling against PyTorch 1.13 (tests/fixtures/torch_sampling.json):
 * `interpolate` modes "bicubic" and "area", UpsamplingNearest2d and
 * UpsamplingBilinear2d, `affineGrid` (2-D, 3-D) and `gridSample` (every
 * mode, padding mode and corner alignment; grids outside [-1, 1] and on the
 * borders) with input and grid gradients, on every backend; float64
 * gradient checks on cpu; `gumbelSoftmax`'s distribution (chi-square of the
 * argmax frequencies at a fixed seed) and its straight-through gradient;
 * errors naming the bad value.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, manualSeed, nn, type Tensor, tensor, zeros } from "../mod.ts";
import {
  assertFixture,
  assertTensor,
  backendTest,
  fixtureTensor,
  type FixtureValues,
  shapeOf,
} from "./harness.ts";
import { check, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_sampling.json" with { type: "json" };

const F = nn.functional;

function tol(device: Device) {
  return device.backend === "cpu" ? { atol: 2e-5, rtol: 1e-4 } : { atol: 2e-4, rtol: 2e-4 };
}

function expectTensor(
  t: Tensor | null,
  expected: FixtureValues,
  device: Device,
  what: string,
): Promise<void> {
  return assertFixture(t, expected, { ...tol(device), what });
}

for (const c of fixtures.interpolate) {
  backendTest(`interpolate ${c.name}: output and gradient equal PyTorch's`, async (device) => {
    const x = fixtureTensor(c.input, device, { requiresGrad: true });
    const out = F.interpolate(x, c.options as nn.functional.InterpolateOptions);
    await expectTensor(out, c.output, device, "output");
    out.mul(fixtureTensor(c.g, device)).sum().backward();
    await expectTensor(x.grad, c.grad, device, "input gradient");
  });
}

function makeModule(name: string, options: Record<string, unknown>): nn.Module {
  if (name === "UpsamplingNearest2d") return new nn.UpsamplingNearest2d(options);
  if (name === "UpsamplingBilinear2d") return new nn.UpsamplingBilinear2d(options);
  return new nn.Upsample(options as nn.UpsampleOptions);
}

for (const c of fixtures.modules) {
  backendTest(`${c.repr}: repr, output and gradient equal PyTorch's`, async (device) => {
    const m = makeModule(c.module, c.options).to(device);
    assert.equal(m.toString(), c.repr);
    assert.deepEqual(Object.keys(m.stateDict()), c.keys);
    const x = fixtureTensor(c.input, device, { requiresGrad: true });
    const out = m.forward(x) as Tensor;
    await expectTensor(out, c.output, device, "output");
    out.mul(fixtureTensor(c.g, device)).sum().backward();
    await expectTensor(x.grad, c.grad, device, "input gradient");
  });
}

for (const c of fixtures.affine_grid) {
  backendTest(
    `affineGrid size [${c.size}] alignCorners ${c.alignCorners}: grid and theta gradient`,
    async (device) => {
      const theta = fixtureTensor(c.theta, device, { requiresGrad: true });
      const out = F.affineGrid(theta, c.size, { alignCorners: c.alignCorners });
      await expectTensor(out, c.output, device, "grid");
      out.mul(fixtureTensor(c.g, device)).sum().backward();
      await expectTensor(theta.grad, c.grad, device, "theta gradient");
    },
  );
}

for (const c of fixtures.grid_sample) {
  const shape = shapeOf(c.input);
  backendTest(
    `gridSample [${shape}] ${c.mode} ${c.paddingMode} alignCorners ${c.alignCorners}: output, input and grid gradients`,
    async (device) => {
      const x = fixtureTensor(c.input, device, { requiresGrad: true });
      const grid = fixtureTensor(c.grid, device, { requiresGrad: true });
      const out = F.gridSample(x, grid, {
        mode: c.mode as nn.functional.GridSampleMode,
        paddingMode: c.paddingMode as nn.functional.GridSamplePadding,
        alignCorners: c.alignCorners,
      });
      await expectTensor(out, c.output, device, "output");
      out.mul(fixtureTensor(c.g, device)).sum().backward();
      await expectTensor(x.grad, c.grad_input, device, "input gradient");
      await expectTensor(grid.grad, c.grad_grid, device, "grid gradient");
    },
  );
}

for (const c of fixtures.grid_sample_nan) {
  backendTest(
    `gridSample ${c.mode} ${c.paddingMode}: a NaN grid entry and an infinite input as PyTorch`,
    async (device) => {
      const out = F.gridSample(fixtureTensor(c.input, device), fixtureTensor(c.grid, device), {
        mode: c.mode as nn.functional.GridSampleMode,
        paddingMode: c.paddingMode as nn.functional.GridSamplePadding,
        alignCorners: c.alignCorners,
      });
      await expectTensor(out, c.output, device, "output");
    },
  );
}

// ------------------------------------------------------------ gradchecks

for (const alignCorners of [false, true]) {
  check(
    `interpolate bicubic alignCorners ${alignCorners}`,
    (x) => F.interpolate(x, { size: [5, 2], mode: "bicubic", alignCorners }),
    [inp([1, 2, 3, 4], 6100)],
  );
}
check(
  "interpolate bicubic scaleFactor 1.7",
  (x) => F.interpolate(x, { scaleFactor: 1.7, mode: "bicubic" }),
  [inp([1, 1, 3, 2], 6101)],
);
// PyTorch's bicubic kernel resamples a dim whose size a scale factor keeps
// (7 · 1.1 -> 7) at 1 / 1.1; only the linear modes copy such a dim.
backendTest(
  "interpolate bicubic scaleFactor 1.1 resamples a dim whose size stays",
  async (device) => {
    const values = [3, -1, 2, 0.5, 1, 4, -2, 2, 0, -3, 1, 2.5];
    const x = tensor(values, { shape: [1, 1, 3, 4], device, requiresGrad: true });
    const out = F.interpolate(x, { scaleFactor: [1.1, 1.5], mode: "bicubic" });
    await assertTensor(out, [
      3.428223,
      0.645948,
      -1.021722,
      1.725392,
      1.596287,
      0.308369,
      1.075887,
      3.169725,
      3.305625,
      -1.209765,
      -0.526828,
      2.098327,
      0.279783,
      -0.800925,
      -1.357507,
      -0.189204,
      1.515889,
      2.631865,
    ], { ...tol(device), shape: [1, 1, 3, 6], what: "output" });
    const g = tensor(Array.from({ length: 18 }, (_, i) => i / 7 - 1), {
      shape: [1, 1, 3, 6],
      device,
    });
    out.mul(g).sum().backward();
    await assertTensor(x.grad!, [
      -1.541009,
      -1.209232,
      -0.824842,
      -0.44652,
      0.135062,
      0.521729,
      0.922462,
      1.276081,
      0.888089,
      1.146331,
      1.394444,
      1.594545,
    ], { ...tol(device), shape: [1, 1, 3, 4], what: "input gradient" });
    // Both sizes kept: PyTorch 1.13 still resamples (its backward copies the
    // gradient instead, which is not this output's gradient; see the gradcheck).
    const same = F.interpolate(x.detach(), { scaleFactor: 1.1, mode: "bicubic" });
    await assertTensor(same, [
      3.19313,
      -0.920682,
      1.501243,
      1.12187,
      1.223776,
      4.09121,
      -0.887107,
      0.430818,
      0.192238,
      -1.375997,
      -0.343001,
      1.882573,
    ], { ...tol(device), shape: [1, 1, 3, 4], what: "same-size output" });
  },
);
check(
  "interpolate bicubic scaleFactor 1.1, sizes kept",
  (x) => F.interpolate(x, { scaleFactor: 1.1, mode: "bicubic" }),
  [inp([1, 1, 3, 4], 6107)],
);
check(
  "interpolate area 1-D, 2-D, 3-D",
  (a, b, c) =>
    F.interpolate(a, { size: 3, mode: "area" }).sum().add(
      F.interpolate(b, { size: [2, 4], mode: "area" }).mul(
        F.interpolate(c, { size: [1, 2, 2], mode: "area" }).reshape([1, 1, 2, 2]).sum(),
      ),
    ),
  [inp([1, 2, 7], 6102), inp([1, 1, 5, 3], 6103), inp([1, 1, 3, 3, 5], 6104)],
);
for (const alignCorners of [false, true]) {
  check(
    `affineGrid 2-D and 3-D alignCorners ${alignCorners}`,
    (a, b) =>
      F.affineGrid(a, [2, 1, 3, 4], { alignCorners }).sum().add(
        F.affineGrid(b, [1, 1, 2, 3, 2], { alignCorners }),
      ),
    [inp([2, 2, 3], 6105), inp([1, 3, 4], 6106)],
  );
}
for (const mode of ["bilinear", "bicubic"] as const) {
  for (const paddingMode of ["zeros", "border", "reflection"] as const) {
    for (const alignCorners of [false, true]) {
      check(
        `gridSample ${mode} ${paddingMode} alignCorners ${alignCorners}`,
        (x, grid) => F.gridSample(x, grid, { mode, paddingMode, alignCorners }),
        [inp([1, 2, 3, 4], 6110), inp([1, 2, 3, 2], 6111, -1.6, 1.6)],
      );
    }
  }
}
check(
  "gridSample nearest (input gradient; the grid's is zero)",
  (x, grid) => F.gridSample(x, grid, { mode: "nearest", paddingMode: "reflection" }),
  [inp([1, 2, 3, 4], 6112), inp([1, 2, 3, 2], 6113, -1.6, 1.6)],
);
for (const paddingMode of ["zeros", "border", "reflection"] as const) {
  check(
    `gridSample 5-D bilinear ${paddingMode}`,
    (x, grid) => F.gridSample(x, grid, { paddingMode, alignCorners: paddingMode === "border" }),
    [inp([1, 1, 2, 3, 3], 6114), inp([1, 1, 2, 2, 3], 6115, -1.4, 1.4)],
  );
}
check(
  "gumbelSoftmax soft, tau 0.7 (fixed noise)",
  (x) => {
    manualSeed(6120);
    return F.gumbelSoftmax(x, { tau: 0.7, dim: 0 });
  },
  [inp([4, 3], 6121)],
);

// ------------------------------------------------------------ gumbelSoftmax

backendTest(
  "gumbelSoftmax: argmax frequencies follow softmax(logits) (chi-square)",
  async (device) => {
    const logits = [1.2, 0, -0.7, 0.4];
    const rows = 20000;
    manualSeed(6130);
    const x = tensor(Array.from({ length: rows }, () => logits).flat(), {
      shape: [rows, 4],
      device,
    });
    for (const tau of [1, 0.3]) {
      const sample = F.gumbelSoftmax(x, { tau });
      const sums = await sample.sum(1).data();
      assert.ok(sums.every((s) => Math.abs(s - 1) < 1e-4), "every sample sums to 1");
      const picks = await sample.argmax(1).data();
      const counts = [0, 0, 0, 0];
      for (const p of picks) counts[p]++;
      const z = logits.map(Math.exp);
      const total = z.reduce((a, b) => a + b, 0);
      const chiSquare = (p: number[]) =>
        counts.reduce((s, n, i) => {
          const e = (rows * p[i]) / p.reduce((a, b) => a + b, 0);
          return s + (n - e) ** 2 / e;
        }, 0);
      // 3 degrees of freedom: P(chi2 > 16.27) = 0.001.
      const chi2 = chiSquare(z);
      assert.ok(chi2 < 16.27, `tau ${tau}: chi-square ${chi2} of counts ${counts} (${total})`);
      // The test has the power to see a slightly wrong distribution (logits · 0.9).
      const off = chiSquare(logits.map((l) => Math.exp(0.9 * l)));
      assert.ok(off > 16.27, `tau ${tau}: chi-square ${off} against logits · 0.9`);
    }
  },
);

backendTest("gumbelSoftmax hard: one-hot forward, straight-through gradient", async (device) => {
  const values = [0.3, -1.1, 2.0, 0.5, 0.2, 0.1, -0.4, 1.5, 0.0, 0.7, -0.2, 0.9];
  const w = tensor([0.5, -1, 2, 0.25, 1, -0.5, 0.75, -2, 1.5, 0.1, -0.3, 0.6], {
    shape: [3, 4],
    device,
  });
  const x = tensor(values, { shape: [3, 4], device, requiresGrad: true });
  manualSeed(6140);
  const hard = F.gumbelSoftmax(x, { tau: 0.5, hard: true, dim: 1 });
  hard.mul(w).sum().backward();
  const hardGrad = await x.grad!.data();
  const y = tensor(values, { shape: [3, 4], device, requiresGrad: true });
  manualSeed(6140);
  const soft = F.gumbelSoftmax(y, { tau: 0.5, dim: 1 });
  soft.mul(w).sum().backward();
  assert.deepEqual(Array.from(hardGrad), Array.from(await y.grad!.data()));
  assert.ok(Array.from(hardGrad).some((g) => Math.abs(g) > 1e-3), "the gradient is not zero");
  const h = Array.from(await hard.data());
  const s = Array.from(await soft.data());
  for (let r = 0; r < 3; r++) {
    const row = h.slice(4 * r, 4 * r + 4).map((v) => Math.round(v * 1e5) / 1e5);
    const softRow = s.slice(4 * r, 4 * r + 4);
    const best = softRow.indexOf(Math.max(...softRow));
    assert.deepEqual(row, [0, 1, 2, 3].map((i) => (i === best ? 1 : 0)), `row ${r}`);
  }
});

// The noise was -log(-log(1 - u)): 1 - u rounds to 1 for u below 2^-25 in
// float32 (about one element in 10^7), an infinite Gumbel and a NaN row.
// Seed 9's stream has such a u at element 1,790,220.
Deno.test("gumbelSoftmax: no NaN where the uniform noise is tiny", async () => {
  manualSeed(9);
  const rows = 179_023;
  const sample = await F.gumbelSoftmax(zeros([rows, 10])).data();
  const bad = sample.findIndex((v) => !Number.isFinite(v));
  assert.equal(bad, -1, `element ${bad} is ${sample[bad]}`);
});

// ------------------------------------------------------------ errors

Deno.test("sampling errors name the bad value", () => {
  const x4 = tensor(new Array(24).fill(1), { shape: [1, 2, 3, 4] });
  const x3 = tensor(new Array(6).fill(1), { shape: [1, 2, 3] });
  assert.throws(
    () => F.interpolate(x3, { size: 4, mode: "bicubic" }),
    /mode "bicubic" needs a 4-D \[N, C, H, W\] input, got shape \[1, 2, 3\]/,
  );
  assert.throws(
    () => F.interpolate(x4, { size: 2, mode: "area", alignCorners: true }),
    /alignCorners can only be set .*mode is "area"/,
  );
  assert.throws(
    () => F.interpolate(x4, { size: 2, mode: "cubic" as nn.functional.InterpolateMode }),
    /mode must be one of .*"bicubic", "area", got "cubic"/,
  );
  const theta = tensor(new Array(6).fill(0), { shape: [1, 2, 3] });
  assert.throws(
    () => F.affineGrid(theta, [1, 1, 2, 2, 2]),
    /\[N, 3, 4\] for size \[1,1,2,2,2\], got theta of shape \[1, 2, 3\]/,
  );
  assert.throws(() => F.affineGrid(theta, [2, 1, 2, 2]), /asks for a batch of 2/);
  assert.throws(() => F.affineGrid(theta, [1, 1, 0, 2]), /positive output size, got \[1,1,0,2\]/);
  assert.throws(() => F.affineGrid(theta, [1, 2]), /only 4-D .* got \[1,2\]/);
  const grid = tensor(new Array(12).fill(0), { shape: [1, 2, 2, 3] });
  assert.throws(
    () => F.gridSample(x4, grid),
    /needs a 4-D grid .* got grid of shape \[1, 2, 2, 3\]/,
  );
  const grid2 = tensor(new Array(16).fill(0), { shape: [2, 2, 2, 2] });
  assert.throws(
    () => F.gridSample(x4, grid2),
    /input of shape \[1, 2, 3, 4\] and grid of shape \[2, 2, 2, 2\] differ in batch size/,
  );
  const grid1 = tensor(new Array(8).fill(0), { shape: [1, 2, 2, 2] });
  assert.throws(
    () => F.gridSample(x4, grid1, { mode: "cubic" as nn.functional.GridSampleMode }),
    /mode must be .* got "cubic"/,
  );
  assert.throws(
    () => F.gridSample(x4, grid1, { paddingMode: "wrap" as nn.functional.GridSamplePadding }),
    /paddingMode must be .* got "wrap"/,
  );
  assert.throws(() => F.gridSample(x4, grid1.to("float64")), /\(float32\) and grid \(float64\)/);
  assert.throws(() => F.gridSample(x4.to("int32"), grid1), /floating-point input, got int32/);
  const x5 = tensor(new Array(8).fill(1), { shape: [1, 1, 2, 2, 2] });
  const grid5 = tensor(new Array(24).fill(0), { shape: [1, 2, 2, 2, 3] });
  assert.throws(
    () => F.gridSample(x5, grid5, { mode: "bicubic" }),
    /"bicubic" needs a 4-D input, got shape \[1, 1, 2, 2, 2\]/,
  );
  assert.throws(() => F.gumbelSoftmax(x4, { tau: 0 }), /tau must be a positive .* got 0/);
  assert.throws(() => F.gumbelSoftmax(x4, { dim: 4 }), /4/);
  assert.throws(() => F.gumbelSoftmax(x4.to("int32")), /floating-point logits, got int32/);
});
