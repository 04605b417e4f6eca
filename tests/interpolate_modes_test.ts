/**
 * `interpolate` mode "nearest-exact" (3-D, 4-D, 5-D) and `antialias` for
 * "bilinear"/"bicubic", and `nn.Upsample({ mode: "nearest-exact" })`,
 * against PyTorch 1.13 (tests/fixtures/torch_interpolate_modes.json):
 * outputs and input gradients on every backend, float64 cases held to a
 * tight tolerance on cpu, float64 gradient checks on cpu, and errors naming
 * the mode, the input's rank and the option.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, nn, tensor } from "../mod.ts";
import { assertFixture, assertTensor, backendTest, fixtureTensor } from "./harness.ts";
import { check, CPU0 as CPU, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_interpolate_modes.json" with { type: "json" };

const F = nn.functional;

function tol(device: Device) {
  return device.backend === "cpu" ? { atol: 2e-5, rtol: 1e-4 } : { atol: 2e-4, rtol: 2e-4 };
}

for (const c of fixtures.interpolate) {
  backendTest(`interpolate ${c.name}: output and gradient equal PyTorch's`, async (device) => {
    const x = fixtureTensor(c.input, device, { requiresGrad: true });
    const out = F.interpolate(x, c.options as nn.functional.InterpolateOptions);
    await assertFixture(out, c.output, { ...tol(device), what: "output" });
    out.mul(fixtureTensor(c.g, device)).sum().backward();
    await assertFixture(x.grad, c.grad, { ...tol(device), what: "input gradient" });
  });
}

// float64: the filter weights, their normalization and the source indices are PyTorch's to
// rounding, not merely to float32 tolerance.
for (const c of fixtures.float64) {
  Deno.test(`interpolate ${c.name} float64: output and gradient equal PyTorch's`, async () => {
    const x = fixtureTensor(c.input, CPU, { requiresGrad: true, dtype: "float64" });
    const out = F.interpolate(x, c.options as nn.functional.InterpolateOptions);
    assert.equal(out.dtype, "float64");
    const tight = { atol: 1e-12, rtol: 1e-12 };
    await assertFixture(out, c.output, { ...tight, what: "output" });
    out.mul(fixtureTensor(c.g, CPU, { dtype: "float64" })).sum().backward();
    await assertFixture(x.grad, c.grad, { ...tight, what: "input gradient" });
  });
}

for (const c of fixtures.modules) {
  backendTest(`${c.repr}: repr, output and gradient equal PyTorch's`, async (device) => {
    const m = new nn.Upsample(c.options as nn.UpsampleOptions).to(device);
    assert.equal(m.toString(), c.repr);
    assert.deepEqual(Object.keys(m.stateDict()), c.keys);
    const x = fixtureTensor(c.input, device, { requiresGrad: true });
    const out = m.forward(x);
    await assertFixture(out, c.output, { ...tol(device), what: "output" });
    out.mul(fixtureTensor(c.g, device)).sum().backward();
    await assertFixture(x.grad, c.grad, { ...tol(device), what: "input gradient" });
  });
}

// "nearest-exact" reads pixel centres, "nearest" pixel corners: 3 -> 2 picks elements 0, 2 with
// the one and 0, 1 with the other (PyTorch: the same).
backendTest("interpolate nearest-exact and nearest pick different source elements", async (d) => {
  const x = tensor([10, 20, 30], { shape: [1, 1, 3], device: d });
  await assertTensor(F.interpolate(x, { size: 2, mode: "nearest-exact" }), [10, 30]);
  await assertTensor(F.interpolate(x, { size: 2 }), [10, 20]);
});

// ------------------------------------------------------------ gradchecks

check(
  "interpolate nearest-exact 1-D, 2-D, 3-D",
  (a, b, c) =>
    F.interpolate(a, { size: 7, mode: "nearest-exact" }).sum().add(
      F.interpolate(b, { scaleFactor: [0.6, 2.3], mode: "nearest-exact" }).square().sum(),
    ).add(F.interpolate(c, { size: [3, 1, 4], mode: "nearest-exact" }).square().sum()),
  [inp([1, 2, 4], 6400), inp([1, 2, 5, 3], 6401), inp([1, 1, 2, 3, 5], 6402)],
);
for (const mode of ["bilinear", "bicubic"] as const) {
  for (const alignCorners of [false, true]) {
    check(
      `interpolate ${mode} antialias, down and up, alignCorners ${alignCorners}`,
      (x) => F.interpolate(x, { size: [3, 8], mode, alignCorners, antialias: true }),
      [inp([1, 2, 9, 5], 6410)],
    );
  }
  check(
    `interpolate ${mode} antialias scaleFactor 0.3 and one that keeps a size`,
    (x) => F.interpolate(x, { scaleFactor: [0.3, 1.1], mode, antialias: true }),
    [inp([1, 1, 11, 4], 6411)],
  );
}

// ------------------------------------------------------------ errors

Deno.test("interpolate modes: errors name the mode, the input's rank and the option", () => {
  const x3 = tensor(new Array(6).fill(1), { shape: [1, 2, 3] });
  const x4 = tensor(new Array(24).fill(1), { shape: [1, 2, 3, 4] });
  const x5 = tensor(new Array(24).fill(1), { shape: [1, 1, 2, 3, 4] });
  const x6 = tensor(new Array(24).fill(1), { shape: [1, 1, 2, 3, 2, 2] });
  for (const mode of ["nearest", "nearest-exact", "area"] as const) {
    assert.throws(
      () => F.interpolate(x4, { size: 2, mode, antialias: true }),
      new RegExp(
        `antialias is only supported for modes "bilinear" and "bicubic" on 4-D .*got mode "${mode}" and a 4-D input of shape \\[1, 2, 3, 4\\]`,
      ),
    );
  }
  assert.throws(
    () => F.interpolate(x3, { size: 2, mode: "linear", antialias: true }),
    /antialias is only supported .*got mode "linear" and a 3-D input of shape \[1, 2, 3\]/,
  );
  assert.throws(
    () => F.interpolate(x5, { size: 2, mode: "trilinear", antialias: true }),
    /antialias is only supported .*got mode "trilinear" and a 5-D input of shape \[1, 1, 2, 3, 4\]/,
  );
  // PyTorch also refuses a bilinear antialias on a 3-D input by the option, not the rank.
  assert.throws(
    () => F.interpolate(x3, { size: 2, mode: "bilinear", antialias: true }),
    /antialias is only supported .*got mode "bilinear" and a 3-D input/,
  );
  assert.throws(
    () => F.interpolate(x4, { size: 2, mode: "nearest-exact", alignCorners: true }),
    /alignCorners can only be set .*mode is "nearest-exact"/,
  );
  assert.throws(
    () => F.interpolate(x6, { size: 2, mode: "nearest-exact" }),
    /mode "nearest-exact" needs a 3-D \[N, C, L\], 4-D \[N, C, H, W\] or 5-D \[N, C, D, H, W\] input, got shape \[1, 1, 2, 3, 2, 2\]/,
  );
  assert.throws(
    () => F.interpolate(x4, { size: 2, mode: "nearest-exact", recomputeScaleFactor: true }),
    /recomputeScaleFactor has no meaning with an explicit size/,
  );
  assert.throws(
    () => F.interpolate(x4, { scaleFactor: 0.2, mode: "bicubic", antialias: true }),
    /scaleFactor 0.2 gives an empty output \[0, 0\] for the spatial size \[3, 4\]/,
  );
  assert.throws(
    () => new nn.Upsample({ size: [2, 2, 2], mode: "nearest-exact" }).forward(x4),
    /size \[2,2,2\] must have one entry per spatial dim of the input \(\[3, 4\]\)/,
  );
});
