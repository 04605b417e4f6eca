/**
 * Reparameterized sampling of the gamma family (Gamma, Chi2, Beta,
 * Dirichlet, StudentT, FisherSnedecor, Wishart): the implicit gradients
 * `standardGammaGrad` and `dirichletGrad` against PyTorch 1.13's
 * `_standard_gamma_grad` and `_dirichlet_grad` on grids
 * (tests/fixtures/torch_distributions_rsample.json) on every backend and
 * against central differences of the regularized incomplete gamma function;
 * `rsample`'s gradients of E[f(x)] over many seeded draws against the
 * analytic derivatives within standard-error bounds; `hasRsample` flags;
 * float64 gradient checks of the deterministic paths; errors naming the
 * bad argument.
 * @module
 */

import assert from "node:assert/strict";
import {
  type Device,
  distributions as D,
  manualSeed,
  special,
  type Tensor,
  tensor,
} from "../mod.ts";
import { assertClose, backendTest, REF } from "./harness.ts";
import { check, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_distributions_rsample.json" with { type: "json" };

function dtypeOf(device: Device) {
  return device.backend === "cpu" ? "float64" as const : "float32" as const;
}

/**
 * Float64 must match to `rtol64`; float32 (PyTorch's computed in double from
 * float32 inputs, here in float32, where the series lose a few digits to
 * cancellation) must have `share` of the points within `rtol32` and all
 * within `worst32`.
 */
function compareGrid(
  what: string,
  actual: ArrayLike<number>,
  expected: number[],
  float64: boolean,
  { rtol64 = 1e-9, rtol32 = 1e-3, share = 0.95, worst32 = 0.1 } = {},
): void {
  if (float64) {
    assertClose(actual, expected, { atol: 1e-300, rtol: rtol64, what });
    return;
  }
  let within = 0;
  for (let i = 0; i < expected.length; i++) {
    const e = expected[i];
    const err = Math.abs(actual[i] - e);
    const scale = Math.abs(e) + 1e-6;
    assert.ok(
      err <= worst32 * scale,
      `${what}: element ${i} is ${actual[i]}, expected ${e} (relative error above ${worst32})`,
    );
    if (err <= rtol32 * scale) within++;
  }
  assert.ok(
    within >= share * expected.length,
    `${what}: only ${within} of ${expected.length} within ${rtol32}`,
  );
}

backendTest("rsample: standardGammaGrad matches torch._standard_gamma_grad", async (device) => {
  const g = fixtures.gamma;
  const dtype = dtypeOf(device);
  const f64 = dtype === "float64";
  const alpha = tensor(f64 ? g.alpha : g.alpha32, { dtype, device });
  const x = tensor(f64 ? g.x : g.x32, { dtype, device });
  const out = D.standardGammaGrad(alpha, x);
  assert.deepEqual(out.shape, [g.x.length]);
  assert.equal(out.dtype, dtype);
  compareGrid("standardGammaGrad", await out.data(), f64 ? g.grad : g.grad32, f64, {
    rtol32: 1e-4,
    worst32: 2e-3,
  });
});

backendTest("rsample: dirichletGrad matches torch._dirichlet_grad", async (device) => {
  const d = fixtures.dirichlet;
  const dtype = dtypeOf(device);
  const f64 = dtype === "float64";
  const out = D.dirichletGrad(
    tensor(f64 ? d.x : d.x32, { dtype, device }),
    tensor(d.alpha, { dtype, device }),
    tensor(d.total, { dtype, device }),
  );
  compareGrid("dirichletGrad", await out.data(), f64 ? d.grad : d.grad32, f64, {
    rtol64: 1e-8,
    share: 0.97,
    worst32: 0.01,
  });
});

Deno.test("rsample: standardGammaGrad is -(dP/da)/p by central differences of gammainc", async () => {
  // Independent of PyTorch: the implicit gradient from the regularized incomplete gamma P(a, x).
  const pts = [
    [0.05, 0.01],
    [0.5, 0.3],
    [1.5, 0.7],
    [1.5, 2.5],
    [4, 1],
    [4, 9],
    [7, 3],
    [
      20,
      14,
    ],
    [20, 20.5],
    [20, 31],
    [300, 280],
  ];
  const opts = { dtype: "float64" as const, device: REF };
  const a = tensor(pts.map((p) => p[0]), opts);
  const x = tensor(pts.map((p) => p[1]), opts);
  const h = 1e-5;
  const dP = special.gammainc(a.add(h), x).sub(special.gammainc(a.sub(h), x)).div(2 * h);
  const logPdf = a.sub(1).mul(x.log()).sub(x).sub(a.lgamma());
  const expected = await dP.neg().div(logPdf.exp()).data();
  const got = await D.standardGammaGrad(a, x).data();
  assertClose(got, expected, { atol: 1e-7, rtol: 2e-3, what: "dx/da" });
});

backendTest("rsample: hasRsample flags match PyTorch", (device) => {
  const opts = { dtype: dtypeOf(device), device };
  const one = tensor(2, opts);
  const flags = fixtures.hasRsample;
  const made: Record<string, D.Distribution> = {
    Gamma: new D.Gamma(one, one),
    Chi2: new D.Chi2(one),
    Beta: new D.Beta(one, one),
    Dirichlet: new D.Dirichlet(tensor([1, 1, 1], opts)),
    StudentT: new D.StudentT(one),
    FisherSnedecor: new D.FisherSnedecor(one, one),
    Wishart: new D.Wishart(tensor(3, opts), { covarianceMatrix: tensor([[1, 0], [0, 1]], opts) }),
    LKJCholesky: new D.LKJCholesky(3, one),
    NegativeBinomial: new D.NegativeBinomial(one, { probs: tensor(0.5, opts) }),
    Poisson: new D.Poisson(one),
  };
  for (const [name, dist] of Object.entries(made)) {
    assert.equal(dist.hasRsample, flags[name as keyof typeof flags], `${name}.hasRsample`);
  }
  assert.equal(new D.Independent(new D.Gamma(tensor([1, 2], opts), 1), 1).hasRsample, true);
  assert.throws(() => new D.Poisson(one).rsample(), /Poisson does not support rsample/);
});

backendTest("rsample: Gamma's backward is g·standardGammaGrad(α, βx)/β", async (device) => {
  const opts = { dtype: dtypeOf(device), device };
  manualSeed(3);
  const alpha = tensor([0.02, 0.4, 1, 3.5, 9, 60, 2000], { ...opts, requiresGrad: true });
  const rate = tensor([2, 0.5, 1, 3, 1.5, 0.25, 4], { ...opts, requiresGrad: true });
  const w = tensor([1, -2, 0.5, 3, -1, 2, 0.25], opts);
  const x = new D.Gamma(alpha, rate).rsample([3]);
  assert.deepEqual(x.shape, [3, 7]);
  assert.ok(x.requiresGrad, "rsample's draws require grad");
  x.mul(w).sum().backward();
  const ratesExpanded = rate.detach().expand([3, 7]);
  const std = x.detach().mul(ratesExpanded);
  const dxda = D.standardGammaGrad(alpha.detach().expand([3, 7]), std).div(ratesExpanded);
  const tol = opts.dtype === "float64" ? 1e-10 : 1e-4;
  assertClose(await alpha.grad!.data(), await dxda.mul(w).sum(0).data(), {
    atol: tol,
    rtol: tol,
    what: "d/dα",
  });
  const dxdb = x.detach().neg().div(ratesExpanded);
  assertClose(await rate.grad!.data(), await dxdb.mul(w).sum(0).data(), {
    atol: tol,
    rtol: tol,
    what: "d/dβ",
  });
  // sample carries no history, rsample's forward draws alike.
  manualSeed(3);
  const s = new D.Gamma(alpha, rate).sample([3]);
  assert.equal(s.requiresGrad, false);
  assertClose(await s.data(), await x.detach().data(), { atol: 0, rtol: 0, what: "sample" });
});

/**
 * Asserts the mean of per-draw gradients `grads` is `target` within `z`
 * standard errors (plus a relative slack for float32's rounding).
 */
async function meanNear(what: string, grads: Tensor, target: number, z = 5, slack = 0) {
  const g = await grads.data();
  const n = g.length;
  let mean = 0;
  for (const v of g) mean += v;
  mean /= n;
  let ss = 0;
  for (const v of g) ss += (v - mean) ** 2;
  const se = Math.sqrt(ss / (n - 1) / n);
  assert.ok(Number.isFinite(mean), `${what}: mean gradient ${mean}`);
  assert.ok(
    Math.abs(mean - target) <= z * se + slack * Math.abs(target),
    `${what}: mean gradient ${mean} (standard error ${se}), expected ${target}`,
  );
}

/** A length-n tensor of `v` requiring grad: one parameter per draw, for per-draw gradients. */
function perDraw(n: number, v: number, device: Device): Tensor {
  return tensor(new Array(n).fill(v), { dtype: dtypeOf(device), device, requiresGrad: true });
}

const N = 20000;

backendTest("rsample: Gamma and Chi2 gradients of E[x] and E[log x]", async (device) => {
  const slack = device.backend === "cpu" ? 0 : 1e-3;
  for (const [i, a] of fixtures.trigamma.alpha.entries()) {
    manualSeed(100 + i);
    const alpha = perDraw(N, a, device);
    const rate = perDraw(N, 1.5, device);
    new D.Gamma(alpha, rate).rsample().sum().backward();
    await meanNear(`Gamma(${a}) dE[x]/dα`, alpha.grad!, 1 / 1.5, 5, slack);
    await meanNear(`Gamma(${a}) dE[x]/dβ`, rate.grad!, -a / 1.5 ** 2, 5, slack);
    const alpha2 = perDraw(N, a, device);
    new D.Gamma(alpha2, 1).rsample().log().sum().backward();
    await meanNear(`Gamma(${a}) dE[log x]/dα`, alpha2.grad!, fixtures.trigamma.value[i], 5, slack);
  }
  manualSeed(7);
  const df = perDraw(N, 3, device);
  new D.Chi2(df).rsample().sum().backward();
  await meanNear("Chi2(3) dE[x]/ddf", df.grad!, 1, 5, slack);
});

backendTest("rsample: Beta and Dirichlet gradients of E[x]", async (device) => {
  const slack = device.backend === "cpu" ? 0 : 1e-3;
  for (const [a, b] of [[0.7, 2.5], [0.05, 0.3], [12, 30]]) {
    manualSeed(11);
    const c1 = perDraw(N, a, device);
    const c0 = perDraw(N, b, device);
    const x = new D.Beta(c1, c0).rsample();
    assert.deepEqual(x.shape, [N]);
    x.sum().backward();
    const t = a + b;
    await meanNear(`Beta(${a}, ${b}) dE[x]/dα`, c1.grad!, b / t ** 2, 5, slack);
    await meanNear(`Beta(${a}, ${b}) dE[x]/dβ`, c0.grad!, -a / t ** 2, 5, slack);
  }
  const alpha = [0.5, 2, 4];
  const w = [1, -2, 3];
  const a0 = alpha.reduce((s, v) => s + v);
  const wm = alpha.reduce((s, v, i) => s + v * w[i], 0) / a0;
  const n = 8000;
  manualSeed(12);
  const c = tensor(new Array(n).fill(alpha).flat(), {
    shape: [n, 3],
    dtype: dtypeOf(device),
    device,
    requiresGrad: true,
  });
  const x = new D.Dirichlet(c).rsample();
  assert.deepEqual(x.shape, [n, 3]);
  x.mul(tensor(w, { dtype: dtypeOf(device), device })).sum().backward();
  for (let j = 0; j < 3; j++) {
    await meanNear(`Dirichlet dE[w·x]/dα${j}`, c.grad!.select(1, j), (w[j] - wm) / a0, 5, slack);
  }
});

backendTest("rsample: StudentT, FisherSnedecor and Wishart gradients", async (device) => {
  const slack = device.backend === "cpu" ? 0 : 2e-3;
  const dtype = dtypeOf(device);
  manualSeed(21);
  const df = perDraw(N, 10, device);
  const scale = perDraw(N, 2, device);
  const loc = perDraw(N, 0.5, device);
  new D.StudentT(df, loc, scale).rsample().sub(0.5).square().sum().backward();
  // E[(x - loc)²] = scale²·df/(df - 2).
  await meanNear("StudentT dE/ddf", df.grad!, -2 * 4 / 64, 5, slack);
  await meanNear("StudentT dE/dscale", scale.grad!, 2 * 2 * 10 / 8, 5, slack);
  await meanNear("StudentT dE/dloc", loc.grad!, 0, 5, slack);

  manualSeed(22);
  const d1 = perDraw(N, 6, device);
  const d2 = perDraw(N, 12, device);
  new D.FisherSnedecor(d1, d2).rsample().sum().backward();
  // E[x] = d2/(d2 - 2), free of d1.
  await meanNear("FisherSnedecor dE/dd1", d1.grad!, 0, 5, slack);
  await meanNear("FisherSnedecor dE/dd2", d2.grad!, -2 / 100, 5, slack);

  const n = 4000;
  manualSeed(23);
  const nu = perDraw(n, 4.5, device);
  const lv = [1.2, 0, 0.4, 0.8];
  const l = tensor(new Array(n).fill(lv).flat(), {
    shape: [n, 2, 2],
    dtype,
    device,
    requiresGrad: true,
  });
  const wv = [1, 0.5, -1, 2];
  const wt = tensor(wv, { shape: [2, 2], dtype, device });
  const x = new D.Wishart(nu, { scaleTril: l }).rsample();
  assert.deepEqual(x.shape, [n, 2, 2]);
  x.mul(wt).sum().backward();
  // E[X] = ν·L·Lᵀ: d/dν Σ W⊙E[X] = Σ W⊙LLᵀ; d/dL = ν(W + Wᵀ)L, above the diagonal too (PyTorch
  // uses the given factor as it is, so L·noise hands its upper triangle a gradient).
  const llt = [lv[0] * lv[0], lv[0] * lv[2], lv[0] * lv[2], lv[2] * lv[2] + lv[3] * lv[3]];
  await meanNear("Wishart dE/dν", nu.grad!, llt.reduce((s, v, i) => s + v * wv[i], 0), 5, slack);
  const sym = [2 * wv[0], wv[1] + wv[2], wv[1] + wv[2], 2 * wv[3]];
  const dl = [
    4.5 * (sym[0] * lv[0] + sym[1] * lv[2]),
    4.5 * (sym[0] * lv[1] + sym[1] * lv[3]),
    4.5 * (sym[2] * lv[0] + sym[3] * lv[2]),
    4.5 * (sym[3] * lv[3]),
  ];
  const lg = l.grad!.reshape([n, 4]);
  for (const k of [0, 1, 2, 3]) {
    await meanNear(`Wishart dE/dL[${k}]`, lg.select(1, k), dl[k], 5, slack);
  }
});

backendTest("rsample: forward draws equal sample's at a seed", async (device) => {
  const opts = { dtype: dtypeOf(device), device };
  const p = tensor([0.3, 2], { ...opts, requiresGrad: true });
  const cases: [string, () => D.Distribution][] = [
    ["Beta", () => new D.Beta(p, p.add(1))],
    ["Dirichlet", () => new D.Dirichlet(p.add(0.5))],
    ["StudentT", () => new D.StudentT(p.add(1), p, p.add(1))],
    ["FisherSnedecor", () => new D.FisherSnedecor(p.add(1), p.add(3))],
    ["Chi2", () => new D.Chi2(p)],
  ];
  for (const [name, make] of cases) {
    manualSeed(5);
    const r = make().rsample([4]);
    assert.ok(r.requiresGrad, `${name}.rsample requires grad`);
    manualSeed(5);
    const s = make().sample([4]);
    assert.equal(s.requiresGrad, false, `${name}.sample has no history`);
    assertClose(await r.detach().data(), await s.data(), { atol: 0, rtol: 0, what: name });
  }
});

backendTest("rsample: errors name the bad argument", (device) => {
  const opts = { dtype: dtypeOf(device), device };
  const a = tensor([1, 2], opts);
  assert.throws(
    () => D.standardGammaGrad(a, tensor([1, 2, 3], opts)),
    /standardGammaGrad: alpha and x must have the same shape, got \[2\] and \[3\]/,
  );
  assert.throws(
    () => D.standardGammaGrad(a, tensor([1, 2], { dtype: "int32", device })),
    /standardGammaGrad: x must be a float tensor, got dtype int32/,
  );
  const other = opts.dtype === "float64" ? "float32" : "float64";
  if (device.backend === "cpu") {
    assert.throws(
      () => D.standardGammaGrad(a, tensor([1, 2], { dtype: other, device })),
      /alpha and x must have the same dtype, got float64 and float32/,
    );
  }
  assert.throws(
    () => D.dirichletGrad(a, a, 3 as unknown as Tensor),
    /dirichletGrad: total must be a Tensor, got number/,
  );
  assert.throws(
    () => D.dirichletGrad(a, tensor([[1, 2]], opts), a),
    /dirichletGrad: x and alpha must have the same shape, got \[2\] and \[1, 2\]/,
  );
});

// ---------------------------------------------------------------- gradchecks (float64, cpu)

const pos = (t: Tensor) => t.abs().add(0.5);

// The draws are fixed by the seed, so the paths other than the implicit one are deterministic.
check(
  "Gamma.rsample in the rate",
  (rate) => {
    manualSeed(31);
    return new D.Gamma(tensor([0.4, 2, 7], { dtype: "float64" }), pos(rate)).rsample([2]);
  },
  [inp([3], 1)],
);
check(
  "StudentT.rsample in loc and scale",
  (loc, scale) => {
    manualSeed(32);
    return new D.StudentT(tensor([3, 9], { dtype: "float64" }), loc, pos(scale)).rsample([2]);
  },
  [inp([2], 2), inp([2], 3)],
);
check(
  "Wishart.rsample in the scale",
  (m) => {
    manualSeed(33);
    const tril = m.tril().add(tensor([[1.5, 0], [0, 1.5]], { dtype: "float64" }));
    return new D.Wishart(4, { scaleTril: tril }).rsample([2]);
  },
  [inp([2, 2], 4, -0.5, 0.5)],
);
Deno.test("rsample: Dirichlet draws sum to 1, so their sum has zero gradient", async () => {
  manualSeed(34);
  const c = tensor([[0.4, 3, 1.2], [25, 0.05, 7]], { dtype: "float64", requiresGrad: true });
  new D.Dirichlet(c).rsample([3]).sum().backward();
  assertClose(await c.grad!.data(), new Array(6).fill(0), { atol: 1e-12, what: "d/dα Σx" });
  const w = tensor([1, 2, 3], { dtype: "float64" });
  const c2 = c.detach().requiresGrad_();
  manualSeed(34);
  new D.Dirichlet(c2).rsample([3]).mul(w).sum().backward();
  assert.ok((await c2.grad!.abs().sum().item()) > 1e-3, "a weighted sum has a gradient");
});
