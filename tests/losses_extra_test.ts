/**
 * MarginRanking, CosineEmbedding, TripletMargin, SoftMargin,
 * MultiLabelSoftMargin, GaussianNLL and PoissonNLL losses and the adaptive
 * max pools: PyTorch 1.13's values and gradients
 * (tests/fixtures/torch_losses_extra.json: margins hit exactly, ties, zero
 * vectors, clamped variances, large magnitudes) on every backend, float64
 * gradient checks on cpu, and the errors for bad shapes and options.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, nn, type Tensor, tensor } from "../mod.ts";
import {
  assertClose,
  assertTensor,
  backendTest,
  decodeFixture,
  type FixtureValues,
} from "./harness.ts";
import { check, distinct, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_losses_extra.json" with { type: "json" };

const F = nn.functional;
type Kwargs = Record<string, unknown>;

function tol(device: Device) {
  return device.backend === "cpu" ? { atol: 1e-6, rtol: 1e-5 } : { atol: 1e-4, rtol: 1e-4 };
}

function makeLoss(module: string, options: Kwargs, device: Device): nn.Module {
  const o: Kwargs = { ...options };
  if (o.weight) o.weight = tensor(o.weight as number[], { device });
  switch (module) {
    case "MarginRankingLoss":
      return new nn.MarginRankingLoss(o);
    case "CosineEmbeddingLoss":
      return new nn.CosineEmbeddingLoss(o);
    case "TripletMarginLoss":
      return new nn.TripletMarginLoss(o);
    case "SoftMarginLoss":
      return new nn.SoftMarginLoss(o);
    case "MultiLabelSoftMarginLoss":
      return new nn.MultiLabelSoftMarginLoss(o);
    case "GaussianNLLLoss":
      return new nn.GaussianNLLLoss(o);
    case "PoissonNLLLoss":
      return new nn.PoissonNLLLoss(o);
  }
  throw new Error(`unknown loss ${module}`);
}

const shapes = (c: { input_shapes: unknown }) => c.input_shapes as Record<string, number[]>;

for (const c of fixtures.losses) {
  backendTest(`${c.name}: value and gradients match PyTorch`, async (device) => {
    const loss = makeLoss(c.module, c.options as Kwargs, device);
    const xs = Object.entries(c.inputs as unknown as Record<string, FixtureValues>).map(([k, v]) =>
      tensor(decodeFixture(v), {
        shape: shapes(c)[k],
        device,
        requiresGrad: c.grad_inputs.includes(k),
      })
    );
    const out = loss.forward(...xs) as Tensor;
    await assertTensor(out, [decodeFixture(c.output as FixtureValues)].flat(), {
      ...tol(device),
      shape: c.shape,
      what: "loss",
    });
    out.mul(tensor(decodeFixture(c.g as FixtureValues), { shape: c.shape, device })).sum()
      .backward();
    const names = Object.keys(c.inputs);
    for (const [k, g] of Object.entries(c.grads as unknown as Record<string, FixtureValues>)) {
      const x = xs[names.indexOf(k)];
      await assertTensor(x.grad!, decodeFixture(g), { ...tol(device), what: `${k} grad` });
    }
  });
}

Deno.test("new loss modules print PyTorch's repr and keep weights as buffers", () => {
  for (const c of fixtures.losses) {
    assert.equal(makeLoss(c.module, c.options as Kwargs, tensor(0).device).toString(), c.repr);
  }
  const w = tensor([1, 2, 3]);
  const m = new nn.MultiLabelSoftMarginLoss({ weight: w });
  assert.deepEqual(Object.keys(m.stateDict()), ["weight"]);
  assert.deepEqual(m.parameters(), []);
});

for (const c of fixtures.pools) {
  backendTest(`${c.name}: adaptive max pool matches PyTorch`, async (device) => {
    const x = tensor(decodeFixture(c.input as FixtureValues), {
      shape: c.shape,
      device,
      requiresGrad: true,
    });
    const size = c.output_size as number | [number | null, number | null];
    const pool = c.module === "AdaptiveMaxPool2d"
      ? new nn.AdaptiveMaxPool2d(size)
      : new nn.AdaptiveMaxPool1d(size as number);
    assert.equal(pool.toString(), c.repr);
    const out = pool.forward(x) as Tensor;
    // Integer inputs: the maxima are exact on every backend.
    await assertTensor(out, decodeFixture(c.output as FixtureValues), {
      shape: c.out_shape,
      atol: 0,
      rtol: 0,
      what: "output",
    });
    out.mul(tensor(decodeFixture(c.g as FixtureValues), { shape: c.out_shape, device })).sum()
      .backward();
    await assertTensor(x.grad!, decodeFixture(c.grads.input as FixtureValues), {
      ...tol(device),
      what: "input grad",
    });
  });
}

backendTest("new losses and pools name bad shapes and options", async (device) => {
  const t = (v: number[], shape?: number[]) => tensor(v, { shape, device });
  const a = t([1, 2, 3, 4, 5, 6], [2, 3]);
  const b = t([1, 2, 3, 4, 5, 6], [2, 3]);
  assert.throws(
    () => F.marginRankingLoss(a, b, t([1, -1])),
    /marginRankingLoss: all inputs must have the same number of dims, got input1 \[2, 3\], input2 \[2, 3\], target \[2\]/,
  );
  assert.throws(
    () => F.marginRankingLoss(a, t([1, 2], [1, 2]), t([1, 1, 1], [1, 3])),
    /marginRankingLoss.*\[2, 3\].*\[1, 2\]/,
  );
  assert.throws(
    () => F.cosineEmbeddingLoss(a, b, t([1, 1, 1])),
    /cosineEmbeddingLoss: expected input1 and input2 of shape \[N, D\] with target \[N\], or \[D\] with target \[\], got input1 \[2, 3\], input2 \[2, 3\], target \[3\]/,
  );
  assert.throws(
    () => F.tripletMarginLoss(a, b, t([1, 2, 3])),
    /tripletMarginLoss: all inputs must have the same number of dims, got anchor \[2, 3\], positive \[2, 3\], negative \[3\]/,
  );
  assert.throws(
    () => F.tripletMarginLoss(a, b, b, { p: 0 }),
    /p must be positive \(Infinity allowed\), got 0/,
  );
  assert.throws(
    () => F.tripletMarginLoss(t([1]).reshape([]), t([1]).reshape([]), t([1]).reshape([])),
    /expected inputs of at least 1 dim/,
  );
  // PyTorch 1.13 takes any rank (one loss per row of the last dim), p = Infinity, and
  // cosine inputs that broadcast ([N, D] against [1, D]); values checked against torch.
  const trip = (k: number, s: number) =>
    t(Array.from({ length: k }, (_, i) => Math.sin(i * s + 1) * 2), [2, 3, 4]);
  const [ta, tb, tc] = [trip(24, 0.7), trip(24, 1.3), trip(24, 2.1)];
  assert.deepEqual(F.tripletMarginLoss(ta, tb, tc, { reduction: "none" }).shape, [2, 3]);
  assertClose(
    await F.tripletMarginLoss(ta, tb, tc, { p: Infinity, swap: true }).item(),
    0.9283522963523865,
    { what: "triplet p=inf" },
  );
  const x1 = t(Array.from({ length: 12 }, (_, i) => Math.sin(i * 0.9 + 1) * 2), [4, 3]);
  const x2 = t(Array.from({ length: 3 }, (_, i) => Math.sin(i * 0.4 + 1) * 2), [1, 3]);
  assertClose(
    await F.cosineEmbeddingLoss(x1, x2, t([1, -1, 1, -1]), { reduction: "none", margin: 0.1 })
      .toArray(),
    [0.0736810564994812, 0, 0.10272115468978882, 0],
    { what: "cosine, broadcast inputs" },
  );
  assert.throws(
    () => F.softMarginLoss(a, t([1, 1])),
    /softMarginLoss \(input and target\)/,
  );
  // A target that broadcasts is PyTorch's: the same as the expanded one.
  assert.equal(
    await F.softMarginLoss(a, t([1, -1, 1])).item(),
    await F.softMarginLoss(a, t([1, -1, 1, 1, -1, 1], [2, 3])).item(),
  );
  assert.deepEqual(
    await F.multilabelSoftMarginLoss(a, t([1, 0, 1]), { reduction: "none" }).toArray(),
    await F.multilabelSoftMarginLoss(a, t([1, 0, 1, 1, 0, 1], [2, 3]), { reduction: "none" })
      .toArray(),
  );
  assert.throws(
    () => F.multilabelSoftMarginLoss(a, b, { weight: t([1, 2]) }),
    /weight of shape \[2\] does not broadcast to input of shape \[2, 3\]/,
  );
  assert.throws(
    () => F.gaussianNllLoss(a, b, t([1, 1, 1])),
    /gaussianNllLoss: var of shape \[3\] does not fit input of shape \[2, 3\]/,
  );
  assert.throws(() => F.gaussianNllLoss(a, b, b, { eps: 0 }), /eps must be positive/);
  assert.throws(
    () => F.poissonNllLoss(a, b, { reduction: "avg" as "mean" }),
    /poissonNllLoss: reduction must be/,
  );
  assert.throws(
    () =>
      F.softMarginLoss(a, tensor([1, 1, 1, 1, 1, 1], { shape: [2, 3], dtype: "int32", device })),
    /softMarginLoss: expected a floating-point target, got int32/,
  );
  assert.throws(() => new nn.TripletMarginLoss({ reduction: "max" as "sum" }), /reduction must be/);
  assert.throws(
    () => F.adaptiveMaxPool2d(t([1, 2, 3, 4], [2, 2]), 1),
    /adaptiveMaxPool2d: expected a 3-D \(unbatched\) or 4-D \(batched\) input, got shape \[2, 2\]/,
  );
  assert.throws(
    () => F.adaptiveMaxPool2d(t([1, 2, 3, 4], [1, 2, 2]), [0, 1]),
    /adaptiveMaxPool2d: outputSize must be a positive integer or a pair of them \(or null\), got \[0,1\]/,
  );
  assert.throws(
    () => F.adaptiveMaxPool1d(t([1, 2, 3, 4], [4]), 2),
    /adaptiveMaxPool1d: expected \[N, C, L\] or \[C, L\], got shape \[4\]/,
  );
  assert.throws(
    () => F.adaptiveMaxPool1d(a, 1.5),
    /outputSize must be a positive integer, got 1.5/,
  );
});

backendTest("gaussianNllLoss: a negative variance is reported by the next read", async (d) => {
  const x = tensor([0.5, 1], { device: d });
  const loss = F.gaussianNllLoss(x, x, tensor([1, -0.25], { device: d }));
  await assert.rejects(() => loss.item(), /gaussianNllLoss: var has 1 negative entries/);
  // Beside a NaN too (min() would be NaN there and hide it).
  const withNaN = F.gaussianNllLoss(x, x, tensor([NaN, -1], { device: d }));
  await assert.rejects(() => withNaN.item(), /gaussianNllLoss: var has 1 negative entries/);
});

// ---- float64 gradient checks (cpu) ----

// Hinges kept away from 0 (the kink) by construction of the inputs.
check(
  "marginRankingLoss",
  (x1, x2, y) => F.marginRankingLoss(x1, x2, y, { margin: 0.3, reduction: "none" }),
  [
    { shape: [6], values: [1.2, -0.4, 0.9, 2.0, -1.1, 0.05] },
    { shape: [6], values: [0.1, 0.8, 1.5, -0.7, -0.2, 0.6] },
    { shape: [6], values: [1, -1, 1, -1, 1, -1] },
  ],
);
check(
  "cosineEmbeddingLoss",
  (x1, x2, y) => F.cosineEmbeddingLoss(x1, x2, y, { margin: -0.5, reduction: "sum" }),
  [inp([4, 3], 1500), inp([4, 3], 1501), { shape: [4], values: [1, -1, 1, -1] }],
);
check(
  "tripletMarginLoss p=2 swap",
  (a, p, n) => F.tripletMarginLoss(a, p, n, { margin: 3, swap: true }),
  [inp([3, 4], 1502), inp([3, 4], 1503), inp([3, 4], 1504)],
);
check(
  "tripletMarginLoss p=1.5",
  (a, p, n) => F.tripletMarginLoss(a, p, n, { margin: 3, p: 1.5, reduction: "none" }),
  [inp([3, 4], 1505), inp([3, 4], 1506), inp([3, 4], 1507)],
);
check("softMarginLoss", (x, y) => F.softMarginLoss(x, y), [
  inp([2, 4], 1508, -4, 4),
  { shape: [2, 4], values: [1, -1, -1, 1, 1, 1, -1, -1] },
]);
check(
  "multilabelSoftMarginLoss (input, target, weight)",
  (x, y, w) => F.multilabelSoftMarginLoss(x, y, { weight: w, reduction: "none" }),
  [inp([3, 4], 1509, -4, 4), inp([3, 4], 1510, 0, 1), inp([4], 1511, 0.5, 2)],
);
check(
  "gaussianNllLoss (input, target, var [N])",
  (x, t, v) => F.gaussianNllLoss(x, t, v, { full: true }),
  [inp([3, 4], 1512), inp([3, 4], 1513), inp([3], 1514, 0.2, 2)],
);
check(
  "poissonNllLoss logInput full",
  (x, t) => F.poissonNllLoss(x, t, { full: true, reduction: "sum" }),
  [inp([2, 3], 1515), { shape: [2, 3], values: [0, 0.5, 1.5, 2.2, 4, 7] }],
);
check(
  "poissonNllLoss rate",
  (x, t) => F.poissonNllLoss(x, t, { logInput: false, reduction: "none" }),
  [inp([2, 3], 1516, 0.2, 3), inp([2, 3], 1517, 0, 5)],
);
// Distinct values: no ties, so the max is differentiable.
check("adaptiveMaxPool2d 5x7 -> 3x4", (x) => F.adaptiveMaxPool2d(x, [3, 4]), [
  { shape: [1, 2, 5, 7], values: distinct([1, 2, 5, 7], 1518) },
]);
check("adaptiveMaxPool1d 7 -> 3", (x) => F.adaptiveMaxPool1d(x, 3), [
  { shape: [2, 7], values: distinct([2, 7], 1519) },
]);
