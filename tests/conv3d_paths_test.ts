/**
 * The paths of conv3d and convTranspose3d (src/nn/functional/volumetric.ts:
 * one conv2d / convTranspose2d over the depth slices, whose products the cpu
 * backend may run with an operand copied out of its transposed layout, see
 * src/backends/cpu/blas.ts and tests/cpu_backend_test.ts).
 * Against PyTorch 1.13 (tests/fixtures/torch_conv3d_paths.json) on every
 * backend, with cases for both branches, the pointwise and depth-unfold
 * branches, batch 1, odd sizes, strides, dilation, padding ("same" with an
 * even kernel), output padding, groups and unbatched inputs; against the
 * 2-d composition they replaced (conv2d / convTranspose2d over the depth
 * slices) at a bench-like size; with only the weight or only the input
 * requiring grad; float64 gradient checks, first and second order, on cpu.
 * @module
 */

import assert from "node:assert/strict";
import { cat, type Device, manualSeed, nn, randn, type Tensor, tidy } from "../mod.ts";
import {
  assertClose,
  assertTensor,
  backendTest,
  decodeFixture,
  fixtureTensor,
  type FixtureValues,
  shapeOf,
} from "./harness.ts";
import { check, gradgradcheck, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_conv3d_paths.json" with { type: "json" };

const F = nn.functional;

function tol(device: Device) {
  return device.backend === "cpu" ? { atol: 2e-5, rtol: 1e-4 } : { atol: 1e-4, rtol: 1e-4 };
}

interface Case {
  name: string;
  options: Record<string, unknown>;
  input: FixtureValues;
  weight: FixtureValues;
  bias?: FixtureValues;
  output: FixtureValues;
  g: FixtureValues;
  grads: Record<string, FixtureValues>;
}

async function compareCase(
  device: Device,
  c: Case,
  forward: (x: Tensor, w: Tensor, b: Tensor | null) => Tensor,
): Promise<void> {
  const x = fixtureTensor(c.input, device, { requiresGrad: true });
  const w = fixtureTensor(c.weight, device, { requiresGrad: true });
  const b = c.bias === undefined ? null : fixtureTensor(c.bias, device, { requiresGrad: true });
  const out = forward(x, w, b);
  await assertTensor(out, decodeFixture(c.output), {
    ...tol(device),
    what: `${c.name}: output`,
    shape: shapeOf(c.output),
  });
  out.mul(fixtureTensor(c.g, device)).sum().backward();
  const got: [string, Tensor | null][] = [["input", x], ["weight", w], ["bias", b]];
  for (const [name, t] of got) {
    if (!t) continue;
    await assertTensor(t.grad!, decodeFixture(c.grads[name]), {
      ...tol(device),
      what: `${c.name}: ${name} grad`,
    });
  }
}

for (const c of fixtures.conv3d as Case[]) {
  backendTest(
    `conv3d ${c.name}: output and gradients as PyTorch`,
    (device) =>
      compareCase(
        device,
        c,
        (x, w, b) => F.conv3d(x, w, b, c.options as nn.functional.Conv3dOptions),
      ),
  );
}

for (const c of fixtures.conv_transpose3d as Case[]) {
  backendTest(
    `convTranspose3d ${c.name}: output and gradients as PyTorch`,
    (device) =>
      compareCase(device, c, (x, w, b) =>
        F.convTranspose3d(x, w, {
          ...(c.options as nn.functional.ConvTranspose3dOptions),
          bias: b,
        })),
  );
}

// ---------------------------------------------- against the 2-d composition they replaced

/** conv3d as before: conv2d over each output depth's stacked input slices (stride 1 in depth). */
function conv3dBefore(x: Tensor, w: Tensor, b: Tensor, padding: number): Tensor {
  const [n, c, d, h, ww] = x.shape;
  const [cout, , kd, kh, kw] = w.shape;
  const xp = F.pad(x, [0, 0, 0, 0, padding, padding]);
  const od = d + 2 * padding - kd + 1;
  const slices = Array.from({ length: od }, (_, o) => xp.narrow(2, o, kd));
  const stacked = slices.map((s) => s.reshape([n, c * kd, h, ww]));
  const y = stacked.map((s) =>
    F.conv2d(s, w.reshape([cout, c * kd, kh, kw]), b, { padding }).unsqueeze(2)
  );
  return cat(y, 2);
}

backendTest(
  "conv3d and convTranspose3d at a bench-like size: as the 2-d composition they replaced",
  async (device) => {
    manualSeed(77);
    const x = randn([2, 6, 5, 6, 4], { device, requiresGrad: true });
    const w = randn([8, 6, 3, 3, 3], { device, requiresGrad: true });
    const b = randn([8], { device, requiresGrad: true });
    const g = randn([2, 8, 5, 6, 4], { device });
    const grads = async (y: Tensor) => {
      tidy(() => y.mul(g).sum().backward());
      const out = [await x.grad!.data(), await w.grad!.data(), await b.grad!.data()];
      for (const t of [x, w, b]) t.grad = null;
      return out;
    };
    const yNew = F.conv3d(x, w, b, { padding: 1 });
    const yOld = conv3dBefore(x, w, b, 1);
    assertClose(await yNew.data(), await yOld.data(), { atol: 1e-4, rtol: 1e-4, what: "output" });
    const [gNew, gOld] = [await grads(yNew), await grads(yOld)];
    for (const [i, what] of ["input", "weight", "bias"].entries()) {
      assertClose(gNew[i], gOld[i], { atol: 1e-4, rtol: 1e-4, what: `${what} grad` });
    }
    // convTranspose3d (same weight) is conv3d's adjoint in its input: <conv3d(x), a> = <x, convT3d(a)>.
    const a = randn([2, 8, 5, 6, 4], { device });
    const lhs = await F.conv3d(x, w, null, { padding: 1 }).mul(a).sum().item();
    const rhs = await x.mul(F.convTranspose3d(a, w, { padding: 1 })).sum().item();
    assert.ok(Math.abs(lhs - rhs) <= 1e-3 * (1 + Math.abs(lhs)), `adjoint: ${lhs} vs ${rhs}`);
  },
);

backendTest(
  "conv3d and convTranspose3d: only the weight, or only the input, requiring grad",
  async (device) => {
    manualSeed(78);
    const xs = randn([1, 3, 4, 3, 5], { device });
    const ws = randn([2, 3, 2, 2, 2], { device });
    const wt = randn([3, 2, 2, 1, 2], { device });
    const forwards: [string, (x: Tensor, w: Tensor) => Tensor, Tensor][] = [
      ["conv3d", (x, w) => F.conv3d(x, w, null, { stride: [1, 2, 1] }), ws],
      ["convTranspose3d", (x, w) => F.convTranspose3d(x, w, { stride: 2 }), wt],
    ];
    for (const [what, f, w0] of forwards) {
      const full = [xs.clone(), w0.clone()];
      full.forEach((t) => (t.requiresGrad = true));
      f(full[0], full[1]).square().sum().backward();
      for (const only of [0, 1]) {
        const part = [xs.clone(), w0.clone()];
        part[only].requiresGrad = true;
        f(part[0], part[1]).square().sum().backward();
        assert.equal(part[1 - only].grad, null, `${what}: no gradient for the other`);
        assertClose(await part[only].grad!.data(), await full[only].grad!.data(), {
          atol: 1e-5,
          rtol: 1e-5,
          what: `${what}: ${only === 0 ? "input" : "weight"} gradient alone`,
        });
      }
    }
  },
);

// ------------------------------------------------------------ gradient checks (float64, cpu)

const CONV_CHECKS: [string, (x: Tensor, w: Tensor, b: Tensor) => Tensor, number[][]][] = [
  [
    "conv3d pointwise, columns smaller than the output gradient",
    (x, w, b) => F.conv3d(x, w, b),
    [[2, 2, 2, 3, 2], [4, 2, 1, 1, 1], [4]],
  ],
  [
    "conv3d k 3, stride 2, padding 1, batch 1 (output gradient transposed)",
    (x, w, b) => F.conv3d(x, w, b, { stride: 2, padding: 1, dilation: [1, 1, 2] }),
    [[1, 2, 4, 3, 5], [2, 2, 3, 2, 2], [2]],
  ],
  [
    "convTranspose3d, input smaller than the output gradient",
    (x, w, b) => F.convTranspose3d(x, w, { bias: b, stride: 2, padding: 1, outputPadding: 1 }),
    [[1, 2, 2, 3, 2], [2, 2, 3, 2, 3], [2]],
  ],
  [
    "convTranspose3d, output gradient smaller than the input (unbatched)",
    (x, w, b) => F.convTranspose3d(x, w, { bias: b, stride: [1, 2, 1] }),
    [[5, 2, 2, 3], [5, 1, 1, 1, 2], [1]],
  ],
];
for (const [i, [name, f, shapes]] of CONV_CHECKS.entries()) {
  check(name, f, shapes.map((s, j) => inp(s, 9500 + 10 * i + j)));
  Deno.test(`gradgradcheck ${name}`, () =>
    gradgradcheck(f, shapes.map((s, j) => inp(s, 9600 + 10 * i + j)), { tol: 1e-5 }));
}

backendTest("conv3d and convTranspose3d: an empty batch or no output channels", async (device) => {
  const cases: [number[], number[], boolean, number[]][] = [
    [[0, 2, 3, 3, 3], [4, 2, 2, 2, 2], false, [0, 4, 2, 2, 2]],
    [[1, 2, 3, 3, 3], [0, 2, 2, 2, 2], false, [1, 0, 2, 2, 2]],
    [[0, 2, 3, 3, 3], [2, 4, 2, 2, 2], true, [0, 4, 4, 4, 4]],
    [[2, 2, 3, 3, 3], [2, 0, 2, 2, 2], true, [2, 0, 4, 4, 4]],
  ];
  for (const [xs, ws, transposed, want] of cases) {
    const x = randn(xs, { device, requiresGrad: true });
    const w = randn(ws, { device, requiresGrad: true });
    const y = transposed ? F.convTranspose3d(x, w) : F.conv3d(x, w);
    assert.deepEqual([...y.shape], want);
    y.sum().backward();
    assert.deepEqual([...x.grad!.shape], xs);
    assert.deepEqual([...w.grad!.shape], ws);
    for (const g of [x.grad!, w.grad!]) {
      assert.ok((await g.data()).every((v) => v === 0), `zero gradients for ${xs} ${ws}`);
    }
  }
});
