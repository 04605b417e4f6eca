/**
 * `Distribution.expand` for every family, `enumerateSupport` /
 * `hasEnumerateSupport`, and `ExponentialFamily` (the Bregman entropy against
 * each family's closed form, the Bregman KL fallback) against PyTorch 1.13
 * (tests/fixtures/torch_distributions_expand.json) on every backend: float64
 * on cpu, float32 on WebGPU.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, distributions as D, type DType, manualSeed, type Tensor } from "../mod.ts";
import {
  assertClose,
  backendTest,
  decodeFixture,
  fixtureTensor,
  type FixtureValues,
  REF,
} from "./harness.ts";
import fixtures from "./fixtures/torch_distributions_expand.json" with { type: "json" };

type Params = Record<string, FixtureValues>;

function dtypeOf(device: Device): DType {
  return device.backend === "cpu" ? "float64" : "float32";
}

function tol(device: Device) {
  return device.backend === "cpu" ? { atol: 1e-9, rtol: 1e-8 } : { atol: 3e-4, rtol: 3e-4 };
}

/** The distribution of `kind` from fixture parameters (as the fixture script's `build`). */
function build(kind: string, p: Params, device: Device): D.Distribution {
  const dtype = dtypeOf(device);
  const t = (name: string) => fixtureTensor(p[name], device, { dtype });
  const temperature = () => fixtureTensor(0.7, device, { dtype });
  switch (kind) {
    case "Normal":
      return new D.Normal(t("loc"), t("scale"));
    case "Uniform":
      return new D.Uniform(t("low"), t("high"));
    case "Exponential":
      return new D.Exponential(t("rate"));
    case "Laplace":
      return new D.Laplace(t("loc"), t("scale"));
    case "Cauchy":
      return new D.Cauchy(t("loc"), t("scale"));
    case "Gumbel":
      return new D.Gumbel(t("loc"), t("scale"));
    case "LogNormal":
      return new D.LogNormal(t("loc"), t("scale"));
    case "HalfNormal":
      return new D.HalfNormal(t("scale"));
    case "HalfCauchy":
      return new D.HalfCauchy(t("scale"));
    case "Weibull":
      return new D.Weibull(t("scale"), t("concentration"));
    case "Pareto":
      return new D.Pareto(t("scale"), t("alpha"));
    case "Kumaraswamy":
      return new D.Kumaraswamy(t("concentration1"), t("concentration0"));
    case "LogisticNormal":
      return new D.LogisticNormal(t("loc"), t("scale"));
    case "Gamma":
      return new D.Gamma(t("concentration"), t("rate"));
    case "Beta":
      return new D.Beta(t("concentration1"), t("concentration0"));
    case "Chi2":
      return new D.Chi2(t("df"));
    case "StudentT":
      return new D.StudentT(t("df"), t("loc"), t("scale"));
    case "FisherSnedecor":
      return new D.FisherSnedecor(t("df1"), t("df2"));
    case "VonMises":
      return new D.VonMises(t("loc"), t("concentration"));
    case "ContinuousBernoulli":
      return new D.ContinuousBernoulli({ probs: t("probs") });
    case "Bernoulli(probs)":
      return new D.Bernoulli({ probs: t("probs") });
    case "Bernoulli(logits)":
      return new D.Bernoulli({ logits: t("logits") });
    case "Categorical":
      return new D.Categorical({ probs: t("probs") });
    case "Categorical(logits)":
      return new D.Categorical({ logits: t("logits") });
    case "OneHotCategorical":
      return new D.OneHotCategorical({ probs: t("probs") });
    case "OneHotCategoricalStraightThrough":
      return new D.OneHotCategoricalStraightThrough({ logits: t("logits") });
    case "Binomial":
      return new D.Binomial(p.total_count as number, { probs: t("probs") });
    case "Geometric":
      return new D.Geometric({ probs: t("probs") });
    case "NegativeBinomial":
      return new D.NegativeBinomial(t("total_count"), { probs: t("probs") });
    case "Poisson":
      return new D.Poisson(t("rate"));
    case "Multinomial":
      return new D.Multinomial(p.total_count as number, { probs: t("probs") });
    case "Dirichlet":
      return new D.Dirichlet(t("concentration"));
    case "MultivariateNormal(cov)":
      return new D.MultivariateNormal(t("loc"), { covarianceMatrix: t("matrix") });
    case "MultivariateNormal(precision)":
      return new D.MultivariateNormal(t("loc"), { precisionMatrix: t("matrix") });
    case "MultivariateNormal(tril)":
      return new D.MultivariateNormal(t("loc"), { scaleTril: t("matrix") });
    case "LowRankMultivariateNormal":
      return new D.LowRankMultivariateNormal(t("loc"), t("cov_factor"), t("cov_diag"));
    case "Wishart":
      return new D.Wishart(t("df"), { covarianceMatrix: t("matrix") });
    case "Wishart(number df)":
      return new D.Wishart(p.df as number, { scaleTril: t("matrix") });
    case "LKJCholesky":
      return new D.LKJCholesky(3, t("concentration"));
    case "Independent":
      return new D.Independent(new D.Normal(t("loc"), t("scale")), 1);
    case "TransformedDistribution":
      return new D.TransformedDistribution(new D.Normal(t("loc"), t("scale")), [
        new D.ExpTransform(),
        new D.AffineTransform(1, 2),
      ]);
    case "TransformedDistribution(broadcast)":
      return new D.TransformedDistribution(
        new D.Normal(fixtureTensor(0, device, { dtype }), fixtureTensor(1, device, { dtype })),
        new D.AffineTransform(t("shift"), 2),
      );
    case "RelaxedBernoulli":
      return new D.RelaxedBernoulli(temperature(), { probs: t("probs") });
    case "LogitRelaxedBernoulli":
      return new D.LogitRelaxedBernoulli(temperature(), { logits: t("logits") });
    case "RelaxedOneHotCategorical":
      return new D.RelaxedOneHotCategorical(temperature(), { probs: t("probs") });
    case "ExpRelaxedCategorical":
      return new D.ExpRelaxedCategorical(temperature(), { logits: t("logits") });
    case "MixtureSameFamily":
      return new D.MixtureSameFamily(
        new D.Categorical({ probs: t("mix") }),
        new D.Normal(t("loc"), t("scale")),
      );
    case "MixtureSameFamily(MVN)":
      return new D.MixtureSameFamily(
        new D.Categorical({ probs: t("mix") }),
        new D.Independent(new D.Normal(t("loc"), t("scale")), 1),
      );
  }
  throw new Error(`no builder for ${kind}`);
}

async function values(x: Tensor): Promise<number[]> {
  return Array.from(await x.data(), Number);
}

Deno.test("expand: the fixture covers every exported family", () => {
  const covered = new Set(fixtures.expand.map((c) => c.type));
  const families = Object.entries(D).filter(([name, value]) =>
    typeof value === "function" && value.prototype instanceof D.Distribution &&
    !["ExponentialFamily"].includes(name)
  ).map(([name]) => name);
  const missing = families.filter((name) => !covered.has(name));
  assert.deepEqual(missing, [], `families without an expand case: ${missing.join(", ")}`);
});

for (const c of fixtures.expand) {
  backendTest(
    `expand: ${c.kind} ${JSON.stringify(c.base_batch_shape)} -> ${
      JSON.stringify(c.expand)
    } as PyTorch`,
    async (device) => {
      const dtype = dtypeOf(device);
      const d = build(c.kind, c.params as unknown as Params, device);
      assert.deepEqual(d.batchShape, c.base_batch_shape);
      const e = d.expand(c.expand);
      assert.equal(e.constructor.name, c.type);
      assert.notEqual(e, d);
      assert.deepEqual(e.batchShape, c.batch_shape);
      assert.deepEqual(e.eventShape, c.event_shape);
      assert.equal(e.validateArgs, d.validateArgs);
      const integer = c.kind.startsWith("Categorical");
      const value = fixtureTensor(c.value as FixtureValues, device, {
        dtype: integer ? "int32" : dtype,
      });
      const what = `${c.kind} logProb`;
      const lp = e.logProb(value);
      assert.deepEqual(lp.shape, c.batch_shape, what);
      assertClose(await values(lp), decodeFixture(c.log_prob as FixtureValues), {
        ...tol(device),
        what,
      });
      // The expanded distribution agrees with the original, broadcast.
      assertClose(await values(lp), await values(d.logProb(value).expand(c.batch_shape)), {
        ...tol(device),
        what: `${c.kind} logProb of the original`,
      });
      for (const key of ["mean", "variance", "mode"] as const) {
        const expected = c[key] as FixtureValues | null;
        if (expected === null) {
          assert.throws(() => e[key], TypeError, `${c.kind}.${key} is not defined in PyTorch`);
          continue;
        }
        const got = e[key];
        assert.deepEqual(got.shape, [...c.batch_shape, ...c.event_shape], `${c.kind} ${key} shape`);
        // PyTorch 1.13's Kumaraswamy mode is NaN for every b > 1; this package's is the textbook one.
        if (c.kind === "Kumaraswamy" && key === "mode") continue;
        assertClose(await values(got), decodeFixture(expected), {
          ...tol(device),
          what: `${c.kind} ${key}`,
        });
      }
      manualSeed(3);
      assert.deepEqual(e.sample([2]).shape, c.sample_shape);
      if (e.hasRsample) assert.deepEqual(e.rsample([2]).shape, c.sample_shape);
    },
  );
}

backendTest(
  "expand: draws of an expanded Normal are independent across the new dims",
  async (device) => {
    manualSeed(7);
    const d = build("Normal", { loc: [0.5, -1], scale: [1, 2] }, device).expand([4000, 2]);
    const x = await values(d.sample());
    const col = (j: number) => x.filter((_, i) => i % 2 === j);
    for (const [j, [mu, sd]] of [[0.5, 1], [-1, 2]].entries()) {
      const v = col(j);
      const mean = v.reduce((a, b) => a + b, 0) / v.length;
      const sdHat = Math.sqrt(v.reduce((a, b) => a + (b - mean) ** 2, 0) / (v.length - 1));
      assert.ok(Math.abs(mean - mu) < 5 * sd / Math.sqrt(v.length), `column ${j} mean ${mean}`);
      assert.ok(Math.abs(sdHat - sd) < 0.1 * sd, `column ${j} sd ${sdHat}`);
    }
    assert.notEqual(x[0], x[2], "rows are fresh draws, not copies");
  },
);

backendTest("expand: a bad batch shape is a RangeError naming both shapes", (device) => {
  const d = build("Normal", { loc: [0.5, -1], scale: [1, 2] }, device);
  assert.throws(
    () => d.expand([3]),
    /Normal\.expand: the batch shape \[2\] cannot be expanded to \[3\]/,
  );
  assert.throws(() => d.expand([2, 1]), /batch shape \[2\] cannot be expanded to \[2, 1\]/);
  assert.throws(() => d.expand([]), /batch shape \[2\] cannot be expanded to \[\]/);
  assert.throws(() => d.expand([-1, 2]), TypeError);
  assert.throws(() => d.expand([1.5]), TypeError);
  const mvn = build("MultivariateNormal(precision)", {
    loc: [[0.5, -1], [0.1, 0.2]],
    matrix: [[2, 0.5], [0.5, 1]],
  }, device);
  assert.throws(
    () => mvn.expand([3]),
    /MultivariateNormal\.expand: the batch shape \[2\] cannot be expanded to \[3\]/,
  );
  const ind = build("Independent", { loc: [[0, 1], [2, 3]], scale: [[1, 1], [1, 1]] }, device);
  assert.throws(() => ind.expand([3]), /Independent\.expand: .*\[2\] cannot be expanded to \[3\]/);
});

backendTest(
  "expand: validateArgs carries over and keeps checking logProb's argument",
  async (device) => {
    const dtype = dtypeOf(device);
    const d = new D.Exponential(fixtureTensor([1, 2], device, { dtype }));
    const e = d.expand([3, 2]);
    assert.equal(e.validateArgs, true);
    e.logProb(fixtureTensor([-1, 1], device, { dtype }));
    await assert.rejects(() => fixtureTensor([0], device, { dtype }).data(), /support/);
    const off = new D.Exponential(fixtureTensor([1, 2], device, { dtype }), {
      validateArgs: false,
    });
    assert.equal(off.expand([2]).validateArgs, false);
  },
);

backendTest(
  "expand: a Binomial with a number count still enumerates; with a tensor count it explains why not",
  (device) => {
    const dtype = dtypeOf(device);
    const d = new D.Binomial(3, { probs: fixtureTensor([0.2, 0.7], device, { dtype }) }).expand([
      4,
      2,
    ]);
    assert.deepEqual(d.enumerateSupport().shape, [4, 4, 2]);
    const t = new D.Binomial(fixtureTensor([3, 3], device, { dtype }), {
      probs: fixtureTensor([0.2, 0.7], device, { dtype }),
    });
    assert.throws(
      () => t.enumerateSupport(),
      /Binomial\.enumerateSupport: needs totalCount as a number/,
    );
  },
);

for (const c of fixtures.enumerate) {
  backendTest(`enumerateSupport: ${c.kind} as PyTorch`, async (device) => {
    const dtype = dtypeOf(device);
    const p = c.params as unknown as Params;
    const t = (name: string) => fixtureTensor(p[name], device, { dtype });
    const d = c.kind.startsWith("Bernoulli")
      ? new D.Bernoulli({ probs: t("probs") })
      : c.kind === "Binomial"
      ? new D.Binomial(p.total_count as number, { probs: t("probs") })
      : c.kind === "Categorical"
      ? new D.Categorical({ probs: t("probs") })
      : c.kind === "OneHotCategorical"
      ? new D.OneHotCategorical({ probs: t("probs") })
      : c.kind === "OneHotCategoricalStraightThrough"
      ? new D.OneHotCategoricalStraightThrough({ logits: t("logits") })
      : new D.Independent(new D.Bernoulli({ probs: t("probs") }), 0);
    assert.equal(d.hasEnumerateSupport, c.has_enumerate_support);
    const expanded = d.enumerateSupport();
    const plain = d.enumerateSupport({ expand: false });
    assert.deepEqual(expanded.shape, c.expanded_shape);
    assert.deepEqual(plain.shape, c.unexpanded_shape);
    assert.equal(expanded.dtype, c.kind === "Categorical" ? "int32" : dtype);
    assertClose(await values(expanded), decodeFixture(c.expanded as FixtureValues));
    assertClose(await values(plain), decodeFixture(c.unexpanded as FixtureValues));
    // Every enumerated value is in the support: logProb accepts it.
    await values(d.logProb(expanded));
  });
}

backendTest("enumerateSupport: unavailable where PyTorch has none", (device) => {
  const dtype = dtypeOf(device);
  const normal = new D.Normal(fixtureTensor([0, 1], device, { dtype }), 1);
  assert.equal(normal.hasEnumerateSupport, false);
  assert.throws(() => normal.enumerateSupport(), /Normal\.enumerateSupport: not implemented/);
  const ind = new D.Independent(
    new D.Bernoulli({ probs: fixtureTensor([0.2, 0.7], device, { dtype }) }),
    1,
  );
  assert.equal(ind.hasEnumerateSupport, false);
  assert.throws(() => ind.enumerateSupport(), /cartesian product/);
  const geometric = new D.Geometric({ probs: fixtureTensor([0.2], device, { dtype }) });
  assert.equal(geometric.hasEnumerateSupport, false);
});

Deno.test("ExponentialFamily: the families PyTorch 1.13 derives from it, and only those", () => {
  const classes = fixtures.classes as Record<
    string,
    { exponential_family: boolean; has_enumerate_support: boolean }
  >;
  for (const [name, info] of Object.entries(classes)) {
    const C = (D as unknown as Record<string, { prototype: object }>)[name];
    assert.ok(C, `distributions.${name} exists`);
    assert.equal(C.prototype instanceof D.ExponentialFamily, info.exponential_family, name);
  }
});

/** Exponential-family members with their closed-form entropies (checked against PyTorch elsewhere). */
function members(device: Device): D.ExponentialFamily[] {
  const dtype = dtypeOf(device);
  const t = (v: FixtureValues) => fixtureTensor(v, device, { dtype });
  return [
    new D.Normal(t([0.5, -1, 3]), t([1, 2, 0.1])),
    new D.Exponential(t([0.5, 2, 7])),
    new D.Gamma(t([2, 0.7, 9]), t([1, 2.5, 0.3])),
    new D.Chi2(t([1, 2, 7.5])),
    new D.Beta(t([2, 0.7, 5]), t([1, 2.5, 0.9])),
    new D.Bernoulli({ probs: t([0.2, 0.7, 0.5]) }),
    new D.Bernoulli({ logits: t([-3, 0.4, 2]) }),
    new D.ContinuousBernoulli({ probs: t([0.2, 0.7, 0.9]) }),
    new D.Dirichlet(t([[1, 2, 3], [0.5, 0.5, 2]])),
    new D.Wishart(t([3, 4.5]), { covarianceMatrix: t([[2, 0.5], [0.5, 1]]) }),
  ];
}

backendTest(
  "ExponentialFamily: the Bregman entropy equals each family's closed form",
  async (device) => {
    const bregman = D.ExponentialFamily.prototype.entropy;
    for (const d of members(device)) {
      const got = bregman.call(d);
      assert.deepEqual(got.shape, d.batchShape, d.name);
      const loose = device.backend === "cpu"
        ? { atol: 1e-9, rtol: 1e-9 }
        : { atol: 1e-4, rtol: 1e-4 };
      assertClose(await values(got), await values(d.entropy()), {
        ...loose,
        what: `${d.name} entropy`,
      });
    }
  },
);

backendTest(
  "ExponentialFamily: entropy of expanded members, and Poisson's missing carrier measure",
  async (device) => {
    const bregman = D.ExponentialFamily.prototype.entropy;
    for (const d of members(device)) {
      const e = d.expand([2, ...d.batchShape]);
      const loose = device.backend === "cpu"
        ? { atol: 1e-9, rtol: 1e-9 }
        : { atol: 1e-4, rtol: 1e-4 };
      assertClose(await values(bregman.call(e)), await values(e.entropy()), {
        ...loose,
        what: d.name,
      });
    }
    const poisson = new D.Poisson(fixtureTensor([1, 2], device, { dtype: dtypeOf(device) }));
    assert.ok(poisson instanceof D.ExponentialFamily);
    assert.throws(() => poisson.entropy(), /Poisson\.meanCarrierMeasure: not implemented/);
  },
);

backendTest(
  "ExponentialFamily: Wishart KL by the Bregman divergence as PyTorch, per batch element",
  async (device) => {
    const dtype = dtypeOf(device);
    const k = fixtures.kl_wishart;
    const t = (v: FixtureValues) => fixtureTensor(v, device, { dtype });
    const p = new D.Wishart(k.p.df, { covarianceMatrix: t(k.p.matrix) });
    const q = new D.Wishart(k.q.df, { covarianceMatrix: t(k.q.matrix) });
    const kl = D.klDivergence(p, q);
    assert.deepEqual(kl.shape, []);
    const loose = device.backend === "cpu"
      ? { atol: 1e-9, rtol: 1e-8 }
      : { atol: 1e-4, rtol: 1e-4 };
    assertClose(await values(kl), [k.kl], { ...loose, what: "KL(Wishart, Wishart)" });
    // A batch of two: each element is its own KL (PyTorch 1.13 sums df's term over the batch).
    const pb = new D.Wishart(t([k.p.df, 6]), { covarianceMatrix: t(k.p.matrix) });
    const qb = new D.Wishart(t([k.q.df, k.q.df]), { covarianceMatrix: t(k.q.matrix) });
    const second = D.klDivergence(
      new D.Wishart(6, { covarianceMatrix: t(k.p.matrix) }),
      new D.Wishart(k.q.df, { covarianceMatrix: t(k.q.matrix) }),
    );
    assertClose(await values(D.klDivergence(pb, qb)), [k.kl, ...(await values(second))], loose);
    assert.ok((await values(second))[0] > 0);
    // KL(p, p) = 0.
    assertClose(await values(D.klDivergence(p, p)), [0], { atol: 1e-4, rtol: 0 });
  },
);

backendTest(
  "ExponentialFamily: KL of two different families without a pair is a TypeError naming both",
  (device) => {
    const dtype = dtypeOf(device);
    const p = new D.Gamma(fixtureTensor([1, 2], device, { dtype }), 1);
    const q = new D.Poisson(fixtureTensor([0.2, 0.7], device, { dtype }));
    assert.throws(
      () => D.klDivergence(p, q),
      /no KL divergence is registered for Gamma and Poisson, and the Bregman form needs two members of one exponential family/,
    );
  },
);

Deno.test("ExponentialFamily: the Bregman KL is differentiable in q's parameters", async () => {
  const t = (v: FixtureValues, requiresGrad = false) =>
    fixtureTensor(v, REF, { dtype: "float64", requiresGrad });
  const p = new D.Wishart(3, { covarianceMatrix: t([[2, 0.5], [0.5, 1]]) });
  const kl = (df: Tensor) =>
    D.klDivergence(p, new D.Wishart(df, { covarianceMatrix: t([[1, 0.2], [0.2, 3]]) }));
  const df = t(4.5, true);
  kl(df).backward();
  const h = 1e-5;
  const numeric = ((await values(kl(t(4.5 + h))))[0] - (await values(kl(t(4.5 - h))))[0]) / (2 * h);
  assertClose(await values(df.grad!), [numeric], { atol: 1e-6, rtol: 1e-6 });
});

backendTest("Beta.mode as PyTorch (vertices, ties and NaN)", async (device) => {
  const dtype = dtypeOf(device);
  const m = fixtures.beta_mode;
  const d = new D.Beta(
    fixtureTensor(m.concentration1, device, { dtype }),
    fixtureTensor(m.concentration0, device, { dtype }),
  );
  assertClose(await values(d.mode), decodeFixture(m.mode as FixtureValues), tol(device));
});

const camel = (name: string) => name.replace(/_([a-z])/g, (_, ch: string) => ch.toUpperCase());

Deno.test("argConstraints: PyTorch's parameter names (camelCase) for every family", () => {
  const classes = fixtures.classes as Record<string, { arg_constraints: Record<string, string> }>;
  for (const [name, info] of Object.entries(classes)) {
    const C = (D as unknown as Record<string, { prototype: D.Distribution }>)[name];
    const sample = fixtures.expand.find((c) => c.type === name);
    assert.ok(sample, name);
    const d = build(sample.kind, sample.params as unknown as Params, REF);
    assert.ok(d instanceof (C as unknown as typeof D.Distribution));
    const expected = Object.keys(info.arg_constraints).map(camel).sort();
    assert.deepEqual(Object.keys(d.argConstraints).sort(), expected, `${name}.argConstraints`);
  }
});

backendTest(
  "argConstraints: each family's parameters satisfy their constraints",
  async (device) => {
    let checked = 0;
    for (const c of fixtures.expand) {
      const d = build(c.kind, c.params as unknown as Params, device).expand(c.expand);
      for (const [key, constraint] of Object.entries(d.argConstraints)) {
        if (constraint.name === "dependent") continue;
        let value: unknown;
        try {
          value = (d as unknown as Record<string, unknown>)[key];
        } catch {
          continue; // a matrix the distribution was not given and cannot form here
        }
        if (value === undefined || typeof value === "number") continue;
        const ok = await values(constraint.check(value as Tensor));
        assert.ok(ok.every((v) => v === 1), `${c.kind}.${key} satisfies ${constraint.name}`);
        checked++;
      }
    }
    assert.ok(checked > 60, `${checked} parameters checked`);
  },
);

Deno.test("expand: a subclass that names no parameters says it cannot expand", () => {
  class Coin extends D.Distribution {
    constructor() {
      super([2], []);
    }
    get support() {
      return D.constraints.boolean;
    }
    get mean(): Tensor {
      throw new TypeError("no mean");
    }
    get variance(): Tensor {
      throw new TypeError("no variance");
    }
    logProb(value: Tensor): Tensor {
      return value;
    }
    protected params(): Record<string, Tensor> {
      return {};
    }
  }
  assert.throws(() => new Coin().expand([3, 2]), /Coin\.expand: not implemented for Coin/);
  assert.throws(
    () => new Coin().expand([3]),
    /Coin\.expand: the batch shape \[2\] cannot be expanded to \[3\]/,
  );
});

backendTest("perplexity as PyTorch", async (device) => {
  const dtype = dtypeOf(device);
  const p = fixtures.perplexity;
  const cat = new D.Categorical({ probs: fixtureTensor(p.probs, device, { dtype }) });
  assertClose(await values(cat.perplexity()), decodeFixture(p.categorical), tol(device));
  const normal = new D.Normal(
    fixtureTensor(p.loc, device, { dtype }),
    fixtureTensor(p.scale, device, { dtype }),
  );
  assertClose(await values(normal.perplexity()), decodeFixture(p.normal), tol(device));
  assert.throws(() => new D.VonMises(0, 1).perplexity(), /VonMises\.entropy: not implemented/);
});

Deno.test("setDefaultValidateArgs: turns the parameter checks off and on, as PyTorch", () => {
  assert.throws(() => new D.Normal(0, -1), /Normal: scale must satisfy x > 0, got -1/);
  D.Distribution.setDefaultValidateArgs(false);
  try {
    const d = new D.Normal(0, -1);
    assert.equal(d.validateArgs, false);
    assert.equal(new D.Exponential(-2).validateArgs, false);
    assert.equal(new D.Normal(0, 1, { validateArgs: true }).validateArgs, true);
    assert.throws(() => new D.Normal(0, -1, { validateArgs: true }), /scale must satisfy/);
  } finally {
    D.Distribution.setDefaultValidateArgs(true);
  }
  assert.equal(new D.Normal(0, 1).validateArgs, true);
  assert.throws(
    () => D.Distribution.setDefaultValidateArgs(0 as unknown as boolean),
    /value must be a boolean, got number/,
  );
});
