/**
 * Review of `Distribution.expand`: a subclass keeps its class through
 * `expand` (as PyTorch's `type(self).__new__`), and a subclass whose
 * constructor takes other arguments is a clear error (as PyTorch's
 * NotImplementedError) instead of a confusing one or a distribution of
 * another class; gradients of the original parameters through an expanded
 * distribution match PyTorch 1.13
 * (tests/fixtures/torch_distributions_expand_review.json).
 * @module
 */

import assert from "node:assert/strict";
import { distributions as D, ones, type Tensor, tensor, zeros } from "../mod.ts";
import { assertClose, decodeFixture, fixtureTensor, type FixtureValues, REF } from "./harness.ts";
import fixtures from "./fixtures/torch_distributions_expand_review.json" with { type: "json" };

const t = (v: number[] | number[][]) => tensor(v as number[], { dtype: "float64" });

Deno.test("expand: a subclass without a constructor of its own keeps its class", () => {
  class MyBernoulli extends D.Bernoulli {}
  class MyCategorical extends D.Categorical {}
  class MyBinomial extends D.Binomial {}
  class MyGeometric extends D.Geometric {}
  class MyNegativeBinomial extends D.NegativeBinomial {}
  class MyContinuousBernoulli extends D.ContinuousBernoulli {}
  class MyChi2 extends D.Chi2 {}
  class MyMultinomial extends D.Multinomial {}
  class MyMVN extends D.MultivariateNormal {}
  class MyWishart extends D.Wishart {}
  class MyLKJ extends D.LKJCholesky {}
  class MyIndependent extends D.Independent {}
  class MyMixture extends D.MixtureSameFamily {}
  const spd = t([[2, 0.5], [0.5, 1]]);
  const cases: D.Distribution[] = [
    new MyBernoulli({ probs: t([0.2, 0.7]) }),
    new MyCategorical({ logits: t([[0.2, 0.7]]) }),
    new MyBinomial(3, { logits: t([0.2, 0.7]) }),
    new MyGeometric({ probs: t([0.2, 0.7]) }),
    new MyNegativeBinomial(t([2, 3]), { probs: t([0.2, 0.7]) }),
    new MyContinuousBernoulli({ probs: t([0.2, 0.7]) }),
    new MyChi2(t([2, 3])),
    new MyMultinomial(3, { probs: t([[0.2, 0.8]]) }),
    new MyMVN(t([[0, 1]]), { precisionMatrix: spd }),
    new MyWishart(t([3]), { covarianceMatrix: spd }),
    new MyLKJ(2, t([0.5])),
    new MyIndependent(new D.Normal(t([[0, 1]]), t([[1, 2]])), 1),
    new MyMixture(new D.Categorical({ probs: t([0.3, 0.7]) }), new D.Normal(t([0, 1]), 1)),
  ];
  for (const d of cases) {
    const e = d.expand([4, ...d.batchShape]);
    assert.equal(e.constructor, d.constructor, `${d.name}.expand keeps the class`);
    assert.deepEqual(e.batchShape, [4, ...d.batchShape], d.name);
  }
});

Deno.test("expand: a subclass whose constructor takes other arguments says to override expanded", () => {
  class StandardNormal extends D.Normal {
    constructor(shape: number[]) {
      super(zeros(shape), ones(shape));
    }
  }
  class Coin extends D.Bernoulli {
    constructor(p: number) {
      super({ probs: tensor([p, p]) });
    }
  }
  for (const d of [new StandardNormal([2]), new Coin(0.3)]) {
    assert.throws(
      () => d.expand([3, 2]),
      (e: Error) =>
        e instanceof TypeError &&
        e.message.startsWith(`${d.name}.expand: cannot remake ${d.name} from its parameters`) &&
        /override expanded/.test(e.message),
      d.name,
    );
  }
});

interface GradCase {
  kind: string;
  params: Record<string, FixtureValues>;
  expand: number[];
  value: FixtureValues;
  log_prob: FixtureValues;
  grads: Record<string, FixtureValues>;
}

function build(kind: string, g: Record<string, Tensor>): D.Distribution {
  switch (kind) {
    case "Bernoulli(logits)":
      return new D.Bernoulli({ logits: g.logits });
    case "Bernoulli(probs)":
      return new D.Bernoulli({ probs: g.probs });
    case "Categorical(logits)":
      return new D.Categorical({ logits: g.logits });
    case "Categorical(probs)":
      return new D.Categorical({ probs: g.probs });
    case "Binomial(logits)":
      return new D.Binomial(5, { logits: g.logits });
    case "ContinuousBernoulli(logits)":
      return new D.ContinuousBernoulli({ logits: g.logits });
    case "MultivariateNormal(cov)":
      return new D.MultivariateNormal(g.loc, { covarianceMatrix: g.matrix });
    case "MultivariateNormal(precision)":
      return new D.MultivariateNormal(g.loc, { precisionMatrix: g.matrix });
    case "MultivariateNormal(tril)":
      return new D.MultivariateNormal(g.loc, { scaleTril: g.matrix });
    case "LowRankMultivariateNormal":
      return new D.LowRankMultivariateNormal(g.loc, g.cov_factor, g.cov_diag);
    case "Wishart(precision)":
      return new D.Wishart(g.df, { precisionMatrix: g.matrix });
    case "Dirichlet":
      return new D.Dirichlet(g.concentration);
    case "RelaxedOneHotCategorical(logits)":
      return new D.RelaxedOneHotCategorical(g.temperature, { logits: g.logits });
    case "MixtureSameFamily":
      return new D.MixtureSameFamily(
        new D.Categorical({ logits: g.mix }),
        new D.Normal(g.loc, g.scale),
      );
  }
  throw new Error(`no builder for ${kind}`);
}

for (const c of fixtures.grads as unknown as GradCase[]) {
  Deno.test(`expand: ${c.kind} logProb and its gradients through expand as PyTorch`, async () => {
    const g = Object.fromEntries(
      Object.entries(c.params).map((
        [k, v],
      ) => [k, fixtureTensor(v, REF, { dtype: "float64", requiresGrad: true })]),
    );
    const e = build(c.kind, g).expand(c.expand);
    const integer = c.kind.startsWith("Categorical");
    const value = fixtureTensor(c.value, REF, { dtype: integer ? "int32" : "float64" });
    const lp = e.logProb(value);
    assertClose(Array.from(await lp.data(), Number), decodeFixture(c.log_prob), {
      atol: 1e-9,
      rtol: 1e-8,
      what: `${c.kind} logProb`,
    });
    const n = lp.shape.reduce((a, b) => a * b, 1);
    const w = tensor(Array.from({ length: n }, (_, i) => 0.5 + i / n), {
      shape: [...lp.shape],
      dtype: "float64",
    });
    lp.mul(w).sum().backward();
    for (const [k, expected] of Object.entries(c.grads)) {
      assert.ok(g[k].grad, `${c.kind}: ${k} has a gradient`);
      assertClose(Array.from(await g[k].grad!.data(), Number), decodeFixture(expected), {
        atol: 1e-8,
        rtol: 1e-7,
        what: `${c.kind} d/d${k}`,
      });
    }
  });
}

Deno.test("expand: the matrix families expand their factors instead of factoring every copy", async () => {
  // PyTorch's expand copies `_unbroadcasted_scale_tril` / `_capacitance_tril`; factoring the
  // expanded matrix again cost one Cholesky (and for a precision matrix one inverse) per copy
  // (15 s for a 32-dim MultivariateNormal expanded to [1000]). A marked factor on the original
  // shows which one the expanded distribution holds.
  const spd = t([[2, 0.5], [0.5, 1]]);
  const tril = t([[1, 0], [0.5, 2]]);
  const marker = t([[7, 0], [3, 5]]);
  const kinds = ["covarianceMatrix", "precisionMatrix", "scaleTril"] as const;
  const cases: [string, D.Distribution, "scaleTril" | "capacitanceTril"][] = [
    ...kinds.map((k): [string, D.Distribution, "scaleTril"] => [
      `MultivariateNormal(${k})`,
      new D.MultivariateNormal(t([0, 1]), { [k]: k === "scaleTril" ? tril : spd }),
      "scaleTril",
    ]),
    ...kinds.map((k): [string, D.Distribution, "scaleTril"] => [
      `Wishart(${k})`,
      new D.Wishart(3, { [k]: k === "scaleTril" ? tril : spd }),
      "scaleTril",
    ]),
    [
      "LowRankMultivariateNormal",
      new D.LowRankMultivariateNormal(t([0, 1]), t([[1, 0], [0.5, 1]]), t([1, 2])),
      "capacitanceTril",
    ],
  ];
  for (const [name, d, key] of cases) {
    (d as unknown as Record<string, Tensor>)[key] = marker;
    const factor = (d.expand([3]) as unknown as Record<string, Tensor>)[key];
    assert.deepEqual(factor.shape, [3, 2, 2], name);
    assert.deepEqual(Array.from(await factor.data()), [7, 0, 3, 5, 7, 0, 3, 5, 7, 0, 3, 5], name);
  }
});
