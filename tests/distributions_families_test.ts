/**
 * The discrete and multivariate `distributions` families (Binomial,
 * Geometric, NegativeBinomial, Poisson, Multinomial, Dirichlet, Chi2,
 * StudentT, FisherSnedecor, VonMises, ContinuousBernoulli,
 * LowRankMultivariateNormal, MixtureSameFamily) and their KL pairs against
 * PyTorch 1.13 (tests/fixtures/torch_distributions_families.json) on every
 * backend; draws checked by moments at fixed seeds; rsample's pathwise
 * gradients; float64 gradient checks on cpu; errors naming the bad value.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, distributions as D, manualSeed, type Tensor, tensor } from "../mod.ts";
import {
  assertClose,
  assertTensor,
  backendTest,
  decodeFixture,
  fixtureTensor,
  type FixtureValues,
  REF,
  sampleMoments,
  shapeOf,
} from "./harness.ts";
import { check, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_distributions_families.json" with { type: "json" };

type Params = Record<string, FixtureValues>;

function dtypeOf(device: Device) {
  return device.backend === "cpu" ? "float64" as const : "float32" as const;
}

function tol(device: Device, loose = 1) {
  return device.backend === "cpu"
    ? { atol: 1e-9, rtol: 1e-8 }
    : { atol: 3e-4 * loose, rtol: 3e-4 * loose };
}

type Num = Record<string, number>;

function build(kind: string, p: Record<string, Tensor>, n: Num = {}): D.Distribution {
  const count = (n.totalCount ?? p.totalCount) as number & Tensor;
  switch (kind) {
    case "Binomial":
      return new D.Binomial(count, { probs: p.probs, logits: p.logits });
    case "NegativeBinomial":
      return new D.NegativeBinomial(count, { probs: p.probs, logits: p.logits });
    case "Geometric":
      return new D.Geometric({ probs: p.probs, logits: p.logits });
    case "Poisson":
      return new D.Poisson(p.rate);
    case "Multinomial":
      return new D.Multinomial(n.totalCount, { probs: p.probs, logits: p.logits });
    case "Dirichlet":
      return new D.Dirichlet(p.concentration);
    case "Chi2":
      return new D.Chi2(p.df);
    case "StudentT":
      return new D.StudentT(p.df, p.loc, p.scale);
    case "FisherSnedecor":
      return new D.FisherSnedecor(p.df1, p.df2);
    case "VonMises":
      return new D.VonMises(p.loc, p.concentration);
    case "ContinuousBernoulli":
      return new D.ContinuousBernoulli({ probs: p.probs, logits: p.logits });
    case "LowRankMultivariateNormal":
      return new D.LowRankMultivariateNormal(p.loc, p.covFactor, p.covDiag);
    case "Wishart:cov":
      return new D.Wishart(p.df, { covarianceMatrix: p.matrix });
    case "Wishart:prec":
      return new D.Wishart(p.df, { precisionMatrix: p.matrix });
    case "Wishart:tril":
      return new D.Wishart(p.df, { scaleTril: p.matrix });
    case "LKJCholesky":
      return new D.LKJCholesky(n.dim, p.concentration);
    case "MultivariateNormal":
      return new D.MultivariateNormal(p.loc, { scaleTril: p.scaleTril });
    case "Mixture:Normal":
      return new D.MixtureSameFamily(
        new D.Categorical({ logits: p.mixLogits }),
        new D.Normal(p.loc, p.scale),
      );
    case "Mixture:IndependentNormal":
      return new D.MixtureSameFamily(
        new D.Categorical({ probs: p.mixProbs }),
        new D.Independent(new D.Normal(p.loc, p.scale), 1),
      );
    case "Normal":
      return new D.Normal(p.loc, p.scale);
    case "Exponential":
      return new D.Exponential(p.rate);
    case "Uniform":
      return new D.Uniform(p.low, p.high);
    case "Laplace":
      return new D.Laplace(p.loc, p.scale);
    case "Gumbel":
      return new D.Gumbel(p.loc, p.scale);
    case "Pareto":
      return new D.Pareto(p.scale, p.alpha);
    case "Gamma":
      return new D.Gamma(p.concentration, p.rate);
    case "Beta":
      return new D.Beta(p.concentration1, p.concentration0);
    case "Bernoulli":
      return new D.Bernoulli({ probs: p.probs, logits: p.logits });
  }
  throw new Error(`unknown kind ${kind}`);
}

function params(values: Params, device: Device): Record<string, Tensor> {
  return Object.fromEntries(
    Object.entries(values).map((
      [k, v],
    ) => [k, fixtureTensor(v, device, { dtype: dtypeOf(device), requiresGrad: true })]),
  );
}

type Any = Record<string, Tensor>;
const METHODS: Record<string, (d: D.Distribution, x: Tensor, p: Tensor | null) => Tensor> = {
  logProb: (d, x) => d.logProb(x),
  entropy: (d) => d.entropy(),
  mean: (d) => d.mean,
  mode: (d) => (d as unknown as Any).mode,
  variance: (d) => d.variance,
  stddev: (d) => d.stddev,
  cdf: (d, x) => d.cdf(x),
  icdf: (d, _x, p) => d.icdf(p!),
  covarianceMatrix: (d) => (d as unknown as Any).covarianceMatrix,
  precisionMatrix: (d) => (d as unknown as Any).precisionMatrix,
  scaleTril: (d) => (d as unknown as Any).scaleTril,
};

interface Entry {
  value: FixtureValues;
  weight?: FixtureValues;
  grads?: Params;
}

interface Case {
  kind: string;
  params: Params;
  numbers: Num;
  float64Only: boolean;
  value: FixtureValues;
  probs: FixtureValues | null;
  out: Record<string, Entry>;
}

interface KlCase {
  p: string;
  q: string;
  pParams: Params;
  qParams: Params;
  kl: FixtureValues;
  weight: FixtureValues;
  gradP: Params;
  gradQ: Params;
}

const FIXTURES = fixtures as unknown as {
  cases: Case[];
  kl: KlCase[];
  reprs: Record<string, string>;
};

/** Where float32 loses more than the default (lgamma/digamma compositions, large counts). */
const LOOSE: Record<string, number> = {
  Binomial: 10,
  NegativeBinomial: 10,
  Poisson: 10,
  Multinomial: 10,
  Dirichlet: 10,
  Chi2: 10,
  StudentT: 10,
  FisherSnedecor: 10,
  ContinuousBernoulli: 30,
  LowRankMultivariateNormal: 10,
  "Wishart:cov": 30,
  "Wishart:prec": 30,
  "Wishart:tril": 30,
  LKJCholesky: 10,
};

for (const c of FIXTURES.cases) {
  const edge = c.float64Only ? " at probabilities 0 and 1 (float64)" : "";
  backendTest(
    `distributions ${c.kind}(${Object.keys(c.params)}) matches PyTorch${edge}`,
    async (device) => {
      // clamp_probs' eps is the dtype's: float32 cannot give float64's numbers at 0 and 1.
      if (c.float64Only && dtypeOf(device) !== "float64") return;
      const dtype = dtypeOf(device);
      const t = tol(device, LOOSE[c.kind] ?? 1);
      for (const [name, e] of Object.entries(c.out)) {
        const p = params(c.params, device);
        const d = build(c.kind, p, c.numbers);
        const x = fixtureTensor(c.value, device, { dtype });
        const probs = c.probs === null ? null : fixtureTensor(c.probs, device, { dtype });
        const y = METHODS[name](d, x, probs);
        const what = `${c.kind}.${name} on ${device}`;
        await assertTensor(y, decodeFixture(e.value), { ...t, what, shape: shapeOf(e.value) });
        if (!e.weight) continue;
        y.mul(fixtureTensor(e.weight, device, { dtype })).sum().backward();
        for (const [k, g] of Object.entries(e.grads!)) {
          const grad = p[k].grad;
          // Wishart:tril included: as PyTorch's, the entries above scale_tril's diagonal get
          // cholesky_solve's gradient.
          const expected = decodeFixture(g);
          if (grad === null) {
            assert.ok(expected.every((v) => v === 0), `${what}: no gradient for ${k}`);
          } else {
            await assertTensor(grad, expected, { ...t, what: `${what} d/d${k}` });
          }
        }
      }
    },
  );
}

for (const c of FIXTURES.kl) {
  backendTest(`distributions klDivergence(${c.p}, ${c.q}) matches PyTorch`, async (device) => {
    const dtype = dtypeOf(device);
    const p = params(c.pParams, device);
    const q = params(c.qParams, device);
    const kl = D.klDivergence(build(c.p, p), build(c.q, q));
    const what = `KL(${c.p}, ${c.q}) on ${device}`;
    const t = tol(device, 10);
    await assertTensor(kl, decodeFixture(c.kl), { ...t, what, shape: shapeOf(c.kl) });
    if (!kl.requiresGrad) return;
    kl.mul(fixtureTensor(c.weight, device, { dtype })).sum().backward();
    for (const [side, ps, grads] of [["p", p, c.gradP], ["q", q, c.gradQ]] as const) {
      for (const [k, g] of Object.entries(grads)) {
        const expected = decodeFixture(g);
        const grad = ps[k].grad;
        if (grad === null) {
          assert.ok(
            expected.every((v) => v === 0 || !Number.isFinite(v)),
            `${what}: no gradient for ${side}.${k}`,
          );
        } else {
          await assertTensor(grad, expected, { ...t, what: `${what} d/d${side}.${k}` });
        }
      }
    }
  });
}

Deno.test("distributions families: reprs match PyTorch", () => {
  const ones = (s: number[]) => tensor(new Array(s.reduce((a, b) => a * b, 1)).fill(1)).reshape(s);
  assert.equal(String(new D.Poisson(ones([2, 3]))), FIXTURES.reprs.Poisson);
  assert.equal(String(new D.Dirichlet(ones([2, 3]))), FIXTURES.reprs.Dirichlet);
  assert.equal(
    String(new D.LowRankMultivariateNormal(ones([3]).mul(0), ones([3, 2]), ones([3]))),
    FIXTURES.reprs.LowRankMultivariateNormal,
  );
  const eye2 = tensor([[1, 0], [0, 1]]);
  assert.equal(String(new D.Wishart(3, { covarianceMatrix: eye2 })), FIXTURES.reprs.Wishart);
  assert.equal(
    String(new D.Wishart(tensor([3, 4]), { scaleTril: eye2.expand([2, 2, 2]) })),
    FIXTURES.reprs.WishartTensor,
  );
  assert.equal(String(new D.LKJCholesky(3, 0.5)), FIXTURES.reprs.LKJCholesky);
  const mix = new D.MixtureSameFamily(
    new D.Categorical({ probs: ones([3]) }),
    new D.Normal(ones([3]).mul(0), ones([3])),
  );
  // PyTorch's Categorical repr lists both probs and logits once both were computed; ours the given one.
  assert.equal(
    String(mix),
    FIXTURES.reprs.MixtureSameFamily.replace(", logits: torch.Size([3])", ""),
  );
});

// ---------------------------------------------------------------- sampling

const N = 20000;

/** Sample means within 5 standard errors, sample variances within `vtol` (relative). */
async function checkMoments(d: D.Distribution, what: string, vtol = 0.1): Promise<void> {
  manualSeed(4321);
  const x = d.sample([N]);
  assert.deepEqual([...x.shape], [N, ...d.batchShape, ...d.eventShape], `${what}: shape`);
  const { mean, variance } = await sampleMoments(x);
  const mu = Array.from(await d.mean.data());
  const v = Array.from(await d.variance.data());
  for (let j = 0; j < mu.length; j++) {
    const se = Math.sqrt(v[j] / N);
    assert.ok(
      Math.abs(mean[j] - mu[j]) <= 5 * se + 1e-12,
      `${what}: sample mean ${mean[j]} vs ${mu[j]} (column ${j})`,
    );
    assert.ok(
      Math.abs(variance[j] - v[j]) <= vtol * v[j] + 1e-12,
      `${what}: sample variance ${variance[j]} vs ${v[j]} (column ${j})`,
    );
  }
}

backendTest("distributions families: sample moments", async (device) => {
  const f = (v: number[]) => tensor(v, { device });
  await checkMoments(new D.Binomial(7, { probs: f([0.1, 0.5, 0.93]) }), "Binomial");
  // n·min(p, 1 - p) below 10 (waiting times) and above (BTRS), p above ½ (flipped), p at 0 and 1.
  await checkMoments(
    new D.Binomial(f([5, 40, 200, 1000, 30, 12, 0]), {
      probs: f([0.3, 0.6, 0.1, 0.97, 0, 1, 0.5]),
    }),
    "Binomial with tensor totalCount",
  );
  await checkMoments(new D.Geometric({ probs: f([0.2, 0.6, 1]) }), "Geometric");
  await checkMoments(
    new D.NegativeBinomial(f([2, 5.5]), { probs: f([0.3, 0.6]) }),
    "NegativeBinomial",
    0.15,
  );
  await checkMoments(new D.Poisson(f([0.5, 4, 30])), "Poisson");
  await checkMoments(
    new D.Multinomial(6, { probs: f([0.1, 0.2, 0.3, 0.4]) }),
    "Multinomial",
  );
  await checkMoments(new D.Dirichlet(f([0.5, 2, 4])), "Dirichlet");
  await checkMoments(new D.Chi2(f([1, 4, 10])), "Chi2", 0.15);
  await checkMoments(new D.StudentT(f([6, 10]), f([1, -2]), f([0.5, 2])), "StudentT", 0.2);
  await checkMoments(new D.FisherSnedecor(f([5, 20]), f([12, 30])), "FisherSnedecor", 0.25);
  await checkMoments(new D.ContinuousBernoulli({ probs: f([0.1, 0.5, 0.8]) }), "CB");
  await checkMoments(
    new D.LowRankMultivariateNormal(
      f([1, -1, 0]),
      f([1, 0.5, 0, 2, -1, 1]).reshape([3, 2]),
      f([
        0.5,
        1,
        2,
      ]),
    ),
    "LowRankMultivariateNormal",
  );
  await checkMoments(
    new D.MixtureSameFamily(
      new D.Categorical({ probs: f([0.3, 0.7]) }),
      new D.Normal(f([-2, 1]), f([0.5, 1])),
    ),
    "MixtureSameFamily",
  );
  await checkMoments(
    new D.MixtureSameFamily(
      new D.Categorical({ probs: f([0.3, 0.7]) }),
      new D.Independent(
        new D.Normal(f([-2, 1, 3, 0]).reshape([2, 2]), f([0.5, 1, 1, 2]).reshape([2, 2])),
        1,
      ),
    ),
    "MixtureSameFamily of Independent",
  );
});

backendTest(
  "distributions families: Binomial draws by exact masses",
  async (device) => {
    manualSeed(21);
    // BTRS (n·p = 20), flipped BTRS (n·(1 - p) = 12) and waiting times (n·p = 3).
    const n = [200, 60, 10];
    const d = new D.Binomial(tensor(n, { device }), { probs: tensor([0.1, 0.8, 0.3], { device }) });
    const x = await d.sample([N]).data();
    const ks = [20, 48, 3];
    const pk = await d.logProb(tensor(ks, { device })).exp().data();
    for (let j = 0; j < 3; j++) {
      let hits = 0;
      for (let i = 0; i < N; i++) if (x[i * 3 + j] === ks[j]) hits++;
      const se = Math.sqrt(pk[j] * (1 - pk[j]) / N);
      assert.ok(Math.abs(hits / N - pk[j]) <= 5 * se, `P(X = ${ks[j]}): ${hits / N} vs ${pk[j]}`);
    }
  },
);

backendTest(
  "distributions families: Binomial draws in float32 at large totalCount",
  async (device) => {
    // BTRS with n·p near 10 and n up to 1e9: float32 must not lose the bound's (n + 1)·log term.
    await checkMoments(
      new D.Binomial(tensor([1e7, 1e8, 1e9], { device }), {
        probs: tensor([1e-6, 1e-7, 1e-8], { device }),
      }),
      "Binomial in float32 with totalCount up to 1e9",
    );
  },
);

backendTest("distributions families: Wishart and LKJCholesky draws", async (device) => {
  const f = (v: number[]) => tensor(v, { device });
  await checkMoments(
    new D.Wishart(f([7, 12]), { covarianceMatrix: f([2, 0.5, 0.5, 1]).reshape([2, 2]) }),
    "Wishart",
    0.15,
  );
  // dim 2: L = [[1, 0], [r, √(1 - r²)]] with (r + 1)/2 ~ Beta(η, η): E r = 0, Var r = 1/(2η + 1).
  manualSeed(9);
  const eta = [0.5, 1, 4];
  const l = new D.LKJCholesky(2, f(eta)).sample([N]);
  assert.deepEqual([...l.shape], [N, 3, 2, 2]);
  const r = await l.narrow(-2, 1, 1).narrow(-1, 0, 1).reshape([N, 3]).data();
  for (let j = 0; j < 3; j++) {
    let m = 0, v = 0;
    for (let i = 0; i < N; i++) m += r[i * 3 + j] / N;
    for (let i = 0; i < N; i++) v += (r[i * 3 + j] - m) ** 2 / (N - 1);
    const want = 1 / (2 * eta[j] + 1);
    assert.ok(Math.abs(m) <= 5 * Math.sqrt(want / N), `LKJ E r: ${m}`);
    assert.ok(Math.abs(v - want) <= 0.1 * want, `LKJ Var r: ${v} vs ${want}`);
  }
  // Larger draws are Cholesky factors of correlation matrices (rows of unit length).
  const big = new D.LKJCholesky(5, 1.5).sample([50]);
  const rows = await big.square().sum(-1).data();
  assertClose(rows, new Array(rows.length).fill(1), { what: "LKJ row norms", atol: 1e-5 });
  const upper = await big.triu(1).abs().sum().data();
  assert.equal(upper[0], 0, "LKJ draws are lower triangular");
  const lp = await new D.LKJCholesky(5, 1.5).logProb(big).data();
  assert.ok(lp.every(Number.isFinite), "LKJ logProb of its draws is finite");
});

backendTest(
  "distributions families: LKJCholesky correlations past the second row",
  async (device) => {
    // Every correlation of LKJ(η) in dim d has (r + 1)/2 ~ Beta(η - 1 + d/2, η - 1 + d/2), so
    // Var r = 1/(2η + d - 1). PyTorch 1.13's onion draws row i with Beta(i - ½, ·) instead of
    // Beta(i/2, ·), which widens every row past the second (e.g. 0.21 instead of 1/6 below).
    manualSeed(12);
    for (const [dim, eta] of [[3, 2], [5, 0.5]]) {
      const l = new D.LKJCholesky(dim, tensor(eta, { device })).sample([N]);
      const c = await l.matmul(l.transpose(-1, -2)).data();
      const want = 1 / (2 * eta + dim - 1);
      for (let a = 1; a < dim; a++) {
        for (let b = 0; b < a; b++) {
          let v = 0;
          for (let i = 0; i < N; i++) v += c[i * dim * dim + a * dim + b] ** 2;
          v /= N;
          assert.ok(
            Math.abs(v - want) <= 0.06 * want,
            `dim ${dim}: Var r[${a},${b}] ${v} vs ${want}`,
          );
        }
      }
    }
  },
);

backendTest("distributions families: the moment check rejects a wrong sampler", async (device) => {
  const wrong = new (class extends D.Poisson {
    override sample(shape: number[] = []): Tensor {
      return super.sample(shape).add(1);
    }
  })(tensor([3], { device }));
  await assert.rejects(checkMoments(wrong, "wrong"), /sample mean/);
});

backendTest("distributions families: VonMises draws by circular moments", async (device) => {
  manualSeed(7);
  const loc = [0.5, -2.5, 3];
  const k = [0.3, 2, 20];
  const d = new D.VonMises(tensor(loc, { device }), tensor(k, { device }));
  const x = d.sample([N]);
  const v = await x.data();
  const circVar = await d.variance.data();
  assert.ok(v.every((a) => a >= -Math.PI && a < Math.PI + 1e-6), "VonMises draws lie in [-π, π)");
  for (let j = 0; j < 3; j++) {
    // E[cos(x - loc)] = I₁(κ)/I₀(κ) = 1 - circular variance; E[sin(x - loc)] = 0.
    let c = 0, s = 0, c2 = 0;
    for (let i = 0; i < N; i++) {
      const a = v[i * 3 + j] - loc[j];
      c += Math.cos(a);
      s += Math.sin(a);
      c2 += Math.cos(a) ** 2;
    }
    const mc = c / N;
    const se = Math.sqrt((c2 / N - mc * mc) / N) + 1e-3 / Math.sqrt(N);
    assert.ok(Math.abs(mc - (1 - circVar[j])) <= 5 * se, `E cos: ${mc} vs ${1 - circVar[j]}`);
    assert.ok(Math.abs(s / N) <= 5 * Math.sqrt(0.5 / N), `E sin: ${s / N}`);
  }
});

backendTest("distributions families: VonMises draws at tiny concentration", async (device) => {
  // κ → 0 is the uniform circle; the proposal's ρ must not cancel to 0 (which left every draw
  // at loc: float32 at κ = 1e-6, float64 at 1e-9).
  manualSeed(8);
  for (const [k, dtype] of [[1e-6, "float32"], [1e-9, dtypeOf(device)]] as const) {
    const x = await new D.VonMises(tensor([1], { device, dtype }), tensor([k], { device, dtype }))
      .sample([N]).data();
    let c = 0, s = 0;
    for (const a of x) [c, s] = [c + Math.cos(a - 1), s + Math.sin(a - 1)];
    const bound = 5 * Math.sqrt(0.5 / N);
    assert.ok(Math.abs(c / N) <= bound && Math.abs(s / N) <= bound, `κ = ${k}: E cos ${c / N}`);
  }
});

backendTest("distributions families: rsample gradients", async (device) => {
  const dtype = dtypeOf(device);
  // ContinuousBernoulli: x = icdf(u), so dx/dp is icdf's derivative at the same u.
  const p = tensor([0.2, 0.7], { device, dtype, requiresGrad: true });
  manualSeed(11);
  const x = new D.ContinuousBernoulli({ probs: p }).rsample([5]);
  x.sum().backward();
  const p2 = tensor([0.2, 0.7], { device, dtype, requiresGrad: true });
  manualSeed(11);
  const u = (await import("../mod.ts")).rand([5, 2], { device, dtype });
  new D.ContinuousBernoulli({ probs: p2 }).icdf(u).sum().backward();
  assertClose(await p.grad!.data(), await p2.grad!.data(), { what: "CB rsample grad" });
  assert.ok((await p.grad!.data()).some((g) => Math.abs(g) > 1e-3), "CB rsample grad is nonzero");
  // LowRankMultivariateNormal: d(sum x)/d loc = number of draws, d/d covDiag = Σ ε_D/(2√D).
  const loc = tensor([0, 1], { device, dtype, requiresGrad: true });
  const w = tensor([[1], [0.5]], { device, dtype, requiresGrad: true });
  const dg = tensor([0.5, 2], { device, dtype, requiresGrad: true });
  manualSeed(3);
  new D.LowRankMultivariateNormal(loc, w, dg).rsample([4]).sum().backward();
  assertClose(await loc.grad!.data(), [4, 4], { what: "LowRank rsample d/dloc" });
  assert.ok((await dg.grad!.data()).some((g) => g !== 0), "LowRank rsample reaches covDiag");
  assert.ok((await w.grad!.data()).some((g) => g !== 0), "LowRank rsample reaches covFactor");
});

// ---------------------------------------------------------------- gradchecks (float64, cpu)

const pos = (t: Tensor) => t.abs().add(0.3);
const unit = (t: Tensor) => t.sigmoid().mul(0.9).add(0.05);

check(
  "Binomial logProb/mean/variance/entropy",
  (logits, n) => {
    const counts = tensor([[0, 3, 5], [2, 6, 1]], { dtype: "float64" });
    const a = new D.Binomial(6, { logits });
    const b = new D.Binomial(pos(n).add(6), { probs: unit(logits), validateArgs: false });
    return a.logProb(counts).add(a.entropy()).add(a.variance).add(b.logProb(counts)).add(b.mean);
  },
  [inp([3], 1), inp([3], 2)],
);
check(
  "Geometric and Poisson logProb/entropy/moments",
  (probs, rate) => {
    const k = tensor([[0, 3, 5], [2, 6, 1]], { dtype: "float64" });
    const g = new D.Geometric({ probs: unit(probs) });
    const p = new D.Poisson(pos(rate));
    return g.logProb(k).add(g.entropy()).add(g.variance).add(p.logProb(k)).add(p.mean);
  },
  [inp([3], 3), inp([3], 4)],
);
check(
  "NegativeBinomial logProb/mean/variance",
  (n, logits) => {
    const k = tensor([[0, 3, 5], [2, 6, 1]], { dtype: "float64" });
    const d = new D.NegativeBinomial(pos(n), { logits });
    return d.logProb(k).add(d.mean).add(d.variance);
  },
  [inp([3], 5), inp([3], 6)],
);
check(
  "Multinomial logProb/entropy",
  (logits) => {
    const counts = tensor([[1, 0, 2], [0, 3, 0]], { dtype: "float64" });
    const d = new D.Multinomial(3, { logits });
    return d.logProb(counts).add(d.entropy()).add(d.variance.sum(-1));
  },
  [inp([3], 7)],
);
check(
  "Dirichlet logProb/entropy/variance",
  (c, x) => {
    const d = new D.Dirichlet(pos(c));
    return d.logProb(x.softmax(-1)).add(d.entropy()).add(d.variance.sum(-1));
  },
  [inp([2, 3], 8), inp([2, 3], 9)],
  { tol: 1e-5 },
);
check(
  "Chi2, StudentT and FisherSnedecor logProb/entropy",
  (df, loc, scale, x) => {
    const c = new D.Chi2(pos(df));
    const t = new D.StudentT(pos(df).add(2), loc, pos(scale));
    const f = new D.FisherSnedecor(pos(df), pos(scale).add(1));
    return c.logProb(pos(x)).add(c.entropy()).add(t.logProb(x)).add(t.entropy())
      .add(t.variance).add(f.logProb(pos(x)));
  },
  [inp([3], 10), inp([3], 11), inp([3], 12), inp([2, 3], 13)],
  { tol: 1e-5 },
);
check(
  "VonMises logProb/variance",
  (loc, k, x) => {
    const d = new D.VonMises(loc, pos(k).mul(3));
    return d.logProb(x).add(d.variance);
  },
  [inp([3], 14), inp([3], 15), inp([2, 3], 16)],
);
check(
  "ContinuousBernoulli logProb/cdf/icdf/entropy/mean/variance",
  (logits, x, u) => {
    const d = new D.ContinuousBernoulli({ logits: logits.add(0.5) });
    const v = unit(x);
    return d.logProb(v).add(d.cdf(v)).add(d.icdf(unit(u))).add(d.entropy()).add(d.mean)
      .add(d.variance);
  },
  [inp([3], 17), inp([2, 3], 18), inp([3], 19)],
  { tol: 1e-5 },
);
check(
  "LowRankMultivariateNormal logProb/entropy/precision",
  (loc, w, dg, x) => {
    const d = new D.LowRankMultivariateNormal(loc, w, pos(dg));
    return d.logProb(x).add(d.entropy()).add(d.precisionMatrix.sum([-2, -1]))
      .add(d.scaleTril.sum([-2, -1]));
  },
  [inp([3], 20), inp([3, 2], 21), inp([3], 22), inp([2, 3], 23)],
  { tol: 1e-5 },
);
check(
  "LowRankMultivariateNormal rsample at a fixed seed",
  (loc, w, dg) => {
    manualSeed(5);
    return new D.LowRankMultivariateNormal(loc, w, pos(dg)).rsample([2]);
  },
  [inp([3], 24), inp([3, 2], 25), inp([3], 26)],
);
check(
  "MixtureSameFamily logProb/mean/variance/cdf",
  (logits, loc, scale, x) => {
    const d = new D.MixtureSameFamily(
      new D.Categorical({ logits }),
      new D.Normal(loc, pos(scale)),
    );
    return d.logProb(x).add(d.cdf(x)).add(d.mean).add(d.variance);
  },
  [inp([3], 27), inp([3], 28), inp([3], 29), inp([4], 30)],
);
check(
  "KL low-rank pairs, Dirichlet, ContinuousBernoulli, Binomial",
  (a, b, w) => {
    const p = new D.LowRankMultivariateNormal(a, w, pos(b));
    const q = new D.LowRankMultivariateNormal(b, w.mul(0.5), pos(a));
    const dp = new D.Dirichlet(pos(a));
    const dq = new D.Dirichlet(pos(b));
    const cp = new D.ContinuousBernoulli({ logits: a });
    const cq = new D.ContinuousBernoulli({ probs: unit(b) });
    const bp = new D.Binomial(4, { logits: a });
    const bq = new D.Binomial(4, { logits: b });
    return D.klDivergence(p, q).add(D.klDivergence(dp, dq)).add(D.klDivergence(cp, cq).sum())
      .add(D.klDivergence(bp, bq).sum());
  },
  [inp([3], 31), inp([3], 32), inp([3, 2], 33)],
  { tol: 1e-5 },
);

check(
  "Wishart logProb/entropy/mean/variance",
  (df, a, b) => {
    const eye3 = tensor([[1, 0, 0], [0, 1, 0], [0, 0, 1]], { dtype: "float64" });
    const cov = a.matmul(a.transpose(-1, -2)).add(eye3);
    const x = b.matmul(b.transpose(-1, -2)).add(eye3);
    const d = new D.Wishart(pos(df).add(3), { covarianceMatrix: cov });
    return d.logProb(x).add(d.entropy()).add(d.mean.sum([-2, -1])).add(d.variance.sum([-2, -1]));
  },
  [inp([2], 34), inp([3, 3], 35, -1, 1), inp([2, 3, 3], 36, -1, 1)],
  { tol: 1e-5 },
);
check(
  "LKJCholesky logProb",
  (c, x) => {
    // A correlation Cholesky factor from unconstrained x: rows normalized, positive diagonal.
    const l = x.tril(-1).add(pos(x.diagonal(0, -2, -1)).diagEmbed());
    const corr = l.div(l.square().sum(-1, true).sqrt());
    return new D.LKJCholesky(3, pos(c)).logProb(corr);
  },
  [inp([2], 37), inp([2, 3, 3], 38)],
  { tol: 1e-5 },
);

// ---------------------------------------------------------------- errors

Deno.test("distributions families: bad input is a clear error", async () => {
  const t = (v: number[]) => tensor(v, { device: REF });
  assert.throws(() => new D.Binomial(-1, { probs: 0.5 }), /Binomial: totalCount .* got -1/);
  assert.throws(() => new D.Binomial(2.5, { probs: 0.5 }), /Binomial: totalCount .* got 2.5/);
  assert.throws(() => new D.Binomial(3, { probs: 1.5 }), /Binomial: probs .* got 1.5/);
  assert.throws(() => new D.Binomial(3, { probs: 0.5, logits: 0 }), /either probs or logits/);
  assert.throws(
    () => new D.Binomial(t([3, 4]), { probs: t([0.5, 0.2]) }).entropy(),
    /Binomial.entropy: needs totalCount as a number .* shape \[2\]/,
  );
  assert.throws(
    () => new D.Geometric({ probs: 0 }),
    /Geometric: probs must satisfy 0 < x <= 1, got 0/,
  );
  assert.throws(() => new D.NegativeBinomial(2, { probs: 1 }), /NegativeBinomial: probs .* got 1/);
  assert.throws(() => new D.Poisson(-0.5), /Poisson: rate must satisfy x >= 0, got -0.5/);
  assert.throws(
    () => new D.Multinomial(2.5, { probs: t([0.5, 0.5]) }),
    /Multinomial: totalCount must be a nonnegative integer number, got 2.5/,
  );
  assert.throws(() => new D.Chi2(0), /Chi2: df must satisfy x > 0, got 0/);
  assert.throws(() => new D.StudentT(-1), /StudentT: df must satisfy x > 0, got -1/);
  assert.throws(
    () => new D.FisherSnedecor(1, -2),
    /FisherSnedecor: df2 must satisfy x > 0, got -2/,
  );
  assert.throws(() => new D.VonMises(0, 0), /VonMises: concentration must satisfy x > 0, got 0/);
  assert.throws(
    () => new D.ContinuousBernoulli({ probs: 2 }),
    /ContinuousBernoulli: probs .* got 2/,
  );
  assert.throws(
    () => new D.Dirichlet(tensor(1, { device: REF })),
    /Dirichlet: concentration must be at least 1-dimensional, got shape \[\]/,
  );
  assert.throws(
    () =>
      new D.LowRankMultivariateNormal(t([0, 0, 0]), t([1, 1, 1, 1]).reshape([2, 2]), t([1, 1, 1])),
    /covFactor must be a batch of matrices of shape \[3, m\] .* got \[2, 2\]/,
  );
  assert.throws(
    () => new D.LowRankMultivariateNormal(t([0, 0]), t([1, 1]).reshape([2, 1]), t([1, 1, 1])),
    /covDiag must be a batch of vectors of shape \[2\] .* got \[3\]/,
  );
  assert.throws(
    () =>
      new D.MixtureSameFamily(
        new D.Categorical({ probs: t([0.5, 0.5]) }),
        new D.Normal(t([0, 1, 2]), 1),
      ),
    /mixtureDistribution has 2 components but componentDistribution's last batch dim is 3/,
  );
  assert.throws(
    () => new D.MixtureSameFamily(new D.Categorical({ probs: t([1]) }), new D.Normal(0, 1)),
    /at least one batch dim/,
  );
  const eye2 = t([1, 0, 0, 1]).reshape([2, 2]);
  assert.throws(
    () => new D.Wishart(0.5, { covarianceMatrix: eye2 }),
    /Wishart: df must be greater than p - 1 = 1, got 0.5/,
  );
  assert.throws(() => new D.Wishart(3, {}), /exactly one of covarianceMatrix/);
  assert.throws(
    () => new D.Wishart(3, { covarianceMatrix: t([1, 2, 3]) }),
    /Wishart: covarianceMatrix must be a batch of square matrices, got shape \[3\]/,
  );
  assert.throws(() => new D.LKJCholesky(1), /LKJCholesky: dim must be an integer >= 2, got 1/);
  assert.throws(
    () => new D.LKJCholesky(3, -1),
    /LKJCholesky: concentration must satisfy x > 0, got -1/,
  );
  assert.throws(() => new D.LKJCholesky(3).mean, /LKJCholesky.mean: not implemented/);
  await assert.rejects(
    new D.Wishart(3, { covarianceMatrix: t([1, 2, 2, 1]).reshape([2, 2]) }).mean.data(),
    /Wishart: covarianceMatrix must be positive definite \(batch element 0 is not\)/,
  );
  // Tensor parameters are checked on the device: the next read rejects naming the value.
  await assert.rejects(
    new D.Poisson(t([1, -2])).mean.data(),
    /Poisson: rate must satisfy x >= 0, got -2 at index 1/,
  );
  await assert.rejects(
    new D.Dirichlet(t([1, 0, 2])).mean.data(),
    /Dirichlet: concentration must satisfy x > 0, got 0 at index 1/,
  );
  await assert.rejects(
    new D.Binomial(t([3, 2.5]), { probs: 0.5 }).mean.data(),
    /Binomial: totalCount must satisfy integer >= 0, got 2.5 at index 1/,
  );
  // Values outside the support.
  await assert.rejects(
    new D.Poisson(t([1, 2])).logProb(t([1, 1.5])).data(),
    /Poisson.logProb: value must be within the support .* got 1.5 at index 1/,
  );
  await assert.rejects(
    new D.Binomial(3, { probs: t([0.5]) }).logProb(t([4])).data(),
    /Binomial.logProb: value must be within the support .* got 4/,
  );
  await assert.rejects(
    new D.Dirichlet(t([1, 2])).logProb(t([0.5, 0.6])).data(),
    /Dirichlet.logProb: value must be within the support \(simplex\)/,
  );
  // KL between Binomials with more trials in q is not implemented (as PyTorch).
  await assert.rejects(
    D.klDivergence(new D.Binomial(t([2]), { probs: 0.5 }), new D.Binomial(t([3]), { probs: 0.5 }))
      .data(),
    /Binomial KL where q.totalCount > p.totalCount is not implemented \(q.totalCount 3/,
  );
  assert.throws(
    () =>
      D.klDivergence(
        new D.LowRankMultivariateNormal(t([0, 0]), t([1, 1]).reshape([2, 1]), t([1, 1])),
        new D.LowRankMultivariateNormal(t([0, 0, 0]), t([1, 1, 1]).reshape([3, 1]), t([1, 1, 1])),
      ),
    /different event shapes \[2\] and \[3\]/,
  );
  assert.throws(
    () => D.klDivergence(new D.StudentT(3), new D.StudentT(4)),
    /no KL divergence is registered for StudentT and StudentT/,
  );
});

Deno.test("distributions families: Multinomial.logProb takes non-integer counts, as PyTorch", async () => {
  // constraints.multinomial checks only x >= 0 and Σx <= totalCount (PyTorch's numbers).
  const d = new D.Multinomial(3, { probs: tensor([0.5, 0.5], { dtype: "float64" }) });
  const lp = await d.logProb(tensor([1.5, 1.5], { dtype: "float64" })).data();
  assertClose(lp, [-0.8570478133976192], { atol: 1e-12, rtol: 1e-12 });
  const e = new D.Multinomial(4, { probs: tensor([0.2, 0.8], { dtype: "float64" }) });
  const lp2 = await e.logProb(tensor([0.5, 2.25], { dtype: "float64" })).data();
  assertClose(lp2, [-0.6349960615540851], { atol: 1e-12, rtol: 1e-12 });
  await assert.rejects(
    () => d.logProb(tensor([1.5, 2], { dtype: "float64" })).data(),
    /Multinomial.logProb: value must be within the support/,
  );
});

Deno.test("distributions families: LowRankMultivariateNormal rejects NaN loc and covFactor", async () => {
  // PyTorch checks loc (real_vector) and cov_factor (independent real) too, not only cov_diag.
  const t = (v: number[] | number[][]) => tensor(v, { dtype: "float64" });
  await assert.rejects(
    () =>
      new D.LowRankMultivariateNormal(t([NaN, 0]), t([[1], [1]]), t([1, 1])).logProb(t([0, 0]))
        .data(),
    /LowRankMultivariateNormal: loc must satisfy real, got NaN at index 0/,
  );
  await assert.rejects(
    () =>
      new D.LowRankMultivariateNormal(t([0, 0]), t([[1], [NaN]]), t([1, 1])).logProb(t([0, 0]))
        .data(),
    /LowRankMultivariateNormal: covFactor must satisfy real, got NaN at index 1/,
  );
});

Deno.test("distributions families: number parameters and Chi2 as a Gamma", async () => {
  const c = new D.Chi2(4);
  assert.ok(c instanceof D.Gamma);
  assertClose(await c.mean.data(), [4], { what: "Chi2 mean" });
  assertClose(await c.variance.data(), [8], { what: "Chi2 variance" });
  assert.equal(String(new D.Chi2(tensor([1, 2]))), "Chi2(df: torch.Size([2]))");
  const kl = await D.klDivergence(new D.Poisson(2), new D.Poisson(3)).data();
  assertClose(kl, [2 * Math.log(2 / 3) + 1], { what: "KL(Poisson(2), Poisson(3))" });
  const b = new D.Binomial(10, { probs: 0.3 });
  assertClose(await b.logProb(tensor([3])).data(), [Math.log(0.26682793200000005)], {
    what: "Binomial(10, 0.3) at 3",
  });
});

backendTest(
  "distributions families: number parameters follow the partner's device",
  async (device) => {
    const dtype = dtypeOf(device);
    const g = new D.Gamma(tensor([1.5, 3], { device, dtype }), tensor([0.5, 2], { device, dtype }));
    const kl = D.klDivergence(new D.Chi2(3), g);
    assert.equal(kl.device, device);
    const klT = D.klDivergence(new D.Chi2(tensor([3, 3], { device, dtype })), g);
    assertClose(await kl.data(), await klT.data(), { what: "KL(Chi2(3), Gamma)", atol: 1e-5 });
    const lp = new D.Poisson(2.5).logProb(tensor([0, 3], { device, dtype }));
    assert.equal(lp.device, device);
    assertClose(await lp.data(), [-2.5, 3 * Math.log(2.5) - 2.5 - Math.log(6)], {
      what: "Poisson(2.5).logProb",
      atol: 1e-5,
    });
  },
);
