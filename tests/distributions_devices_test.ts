/**
 * `distributions` across devices and dtypes: number parameters behave as
 * PyTorch's 0-dim cpu tensors (a distribution of numbers only combines with
 * tensors on any device, in klDivergence and as logProb/cdf/icdf's
 * argument), float64 tensor parameters keep float64 next to numbers, and
 * tensors on two devices are a TypeError naming both. The expected numbers
 * are PyTorch 1.13's (inline) or the same distribution built from tensors on
 * the same device (whose values tests/distributions_test.ts checks against
 * PyTorch).
 * @module
 */

import assert from "node:assert/strict";
import { type Device, distributions as D, type DType, full, type Tensor, tensor } from "../mod.ts";
import { assertClose, assertTensor, backendTest } from "./harness.ts";

/** A device other than the default one: cpu:1 on cpu, the backend's first device elsewhere. */
function away(device: Device, devices: Device[]): Device {
  return device.backend === "cpu" ? devices[1] : device;
}

function t(values: number[], device: Device, dtype: DType = "float32"): Tensor {
  return tensor(values, { device, dtype });
}

function s(value: number, device: Device): Tensor {
  return full([], value, { device });
}

interface Kind {
  name: string;
  /** Tensor parameters on `d`. */
  tensors: (d: Device) => D.Distribution;
  /** The number-only distribution. */
  numbers: () => D.Distribution;
  /** The same as 0-dim tensors on `d`. */
  scalars: (d: Device) => D.Distribution;
  /** logProb's (and cdf's) argument. */
  value: number[];
  cdf: boolean;
}

const KINDS: Kind[] = [
  {
    name: "Normal",
    tensors: (d) => new D.Normal(t([0.5, -1], d), t([1, 2], d)),
    numbers: () => new D.Normal(0.25, 1.5),
    scalars: (d) => new D.Normal(s(0.25, d), s(1.5, d)),
    value: [0.5, -1],
    cdf: true,
  },
  {
    name: "Laplace",
    tensors: (d) => new D.Laplace(t([0.5, -1], d), t([1, 2], d)),
    numbers: () => new D.Laplace(0.25, 1.5),
    scalars: (d) => new D.Laplace(s(0.25, d), s(1.5, d)),
    value: [0.5, -1],
    cdf: true,
  },
  {
    name: "Uniform",
    tensors: (d) => new D.Uniform(t([0.5, -1], d), t([1, 2], d)),
    numbers: () => new D.Uniform(-2, 3),
    scalars: (d) => new D.Uniform(s(-2, d), s(3, d)),
    value: [0.5, -1],
    cdf: true,
  },
  {
    name: "Exponential",
    tensors: (d) => new D.Exponential(t([0.5, 2], d)),
    numbers: () => new D.Exponential(1.5),
    scalars: (d) => new D.Exponential(s(1.5, d)),
    value: [0.5, 1],
    cdf: true,
  },
  {
    name: "Bernoulli(probs)",
    tensors: (d) => new D.Bernoulli({ probs: t([0.5, 0.75], d) }),
    numbers: () => new D.Bernoulli({ probs: 0.25 }),
    scalars: (d) => new D.Bernoulli({ probs: s(0.25, d) }),
    value: [0, 1],
    cdf: false,
  },
  {
    name: "Bernoulli(logits)",
    tensors: (d) => new D.Bernoulli({ logits: t([0.5, -2], d) }),
    numbers: () => new D.Bernoulli({ logits: 1.5 }),
    scalars: (d) => new D.Bernoulli({ logits: s(1.5, d) }),
    value: [0, 1],
    cdf: false,
  },
  {
    name: "Gamma",
    tensors: (d) => new D.Gamma(t([2, 3], d), t([1, 0.5], d)),
    numbers: () => new D.Gamma(2, 1),
    scalars: (d) => new D.Gamma(s(2, d), s(1, d)),
    value: [0.5, 3],
    cdf: false,
  },
  {
    name: "Beta",
    tensors: (d) => new D.Beta(t([2, 3], d), t([1, 0.5], d)),
    numbers: () => new D.Beta(2, 1.5),
    scalars: (d) => new D.Beta(s(2, d), s(1.5, d)),
    value: [0.5, 0.25],
    cdf: false,
  },
  {
    name: "Independent(Normal)",
    tensors: (d) => new D.Independent(new D.Normal(t([0.5, -1], d), t([1, 2], d)), 0),
    numbers: () => new D.Independent(new D.Normal(0.25, 1.5), 0),
    scalars: (d) => new D.Independent(new D.Normal(s(0.25, d), s(1.5, d)), 0),
    value: [0.5, -1],
    cdf: false,
  },
];

for (const k of KINDS) {
  backendTest(
    `distributions ${k.name}: number parameters follow the other device (klDivergence)`,
    async (device, devices) => {
      const d = away(device, devices);
      const p = k.tensors(d);
      for (
        const [kl, ref] of [
          [D.klDivergence(p, k.numbers()), D.klDivergence(p, k.scalars(d))],
          [D.klDivergence(k.numbers(), p), D.klDivergence(k.scalars(d), p)],
        ]
      ) {
        assert.equal(kl.device, d);
        assert.equal(kl.dtype, "float32");
        assertClose(await kl.data(), await ref.data(), { what: `${k.name} kl` });
      }
    },
  );

  backendTest(
    `distributions ${k.name}: a value on another device moves number parameters`,
    async (device, devices) => {
      const d = away(device, devices);
      const value = t(k.value, d);
      const q = k.numbers();
      const methods: ["logProb" | "cdf" | "icdf", Tensor][] = [["logProb", value]];
      if (k.cdf) methods.push(["cdf", value], ["icdf", t([0.25, 0.5], d)]);
      for (const [method, arg] of methods) {
        const out = q[method](arg);
        assert.equal(out.device, d, `${k.name}.${method} device`);
        const ref = k.scalars(d)[method](arg);
        assertClose(await out.data(), await ref.data(), { what: `${k.name}.${method}` });
      }
      // The distribution itself stays where it was made.
      assert.notEqual(q.mean.device, d);
    },
  );

  backendTest(
    `distributions ${k.name}: tensors on two devices are an error naming both`,
    (_device, devices) => {
      const [a, b] = devices;
      if (a === b) return;
      const p = k.tensors(a);
      const q = k.tensors(b);
      assert.throws(
        () => D.klDivergence(p, q),
        (e: Error) =>
          e instanceof TypeError && e.message.includes(`${a}`) &&
          e.message.includes(`${b}`),
      );
      assert.throws(
        () => p.logProb(t(k.value, b)),
        (e: Error) =>
          e instanceof TypeError && e.message.includes(`${a}`) &&
          e.message.includes(`${b}`),
      );
    },
  );
}

backendTest("distributions klDivergence with numbers matches PyTorch", async (device, devices) => {
  const d = away(device, devices);
  const p = new D.Normal(t([0.5, -1], d), t([1, 2], d));
  await assertTensor(D.klDivergence(p, new D.Normal(0, 1)), [0.125, 1.3068528175354004]);
  await assertTensor(D.klDivergence(new D.Normal(0, 1), p), [0.125, 0.4431471824645996]);
  await assertTensor(new D.Normal(0, 2).logProb(t([0.5, -1], d)), [
    -1.6433357000350952,
    -1.7370857000350952,
  ]);
  await assertTensor(new D.Bernoulli({ probs: 0.25 }).logProb(t([0, 1], d)), [
    -0.28768202662467957,
    -1.3862943649291992,
  ]);
  const g = new D.Gamma(t([2, 3], d), t([1, 0.5], d));
  await assertTensor(D.klDivergence(g, new D.Gamma(2, 1)), [0, 1.843342661857605]);
  await assertTensor(new D.Uniform(0, 2).cdf(t([0.5], d)), [0.25]);
  await assertTensor(new D.Uniform(0, 2).icdf(t([0.5], d)), [1]);
});

backendTest(
  "distributions two number-only distributions on two devices",
  async (device, devices) => {
    const d = away(device, devices);
    // One remade on d (through a value there) meets one on the default device.
    const p = new D.Independent(new D.Normal(0.5, 1), 0).withNumbersOn(d);
    assert.equal(p.paramDevice, d);
    const kl = D.klDivergence(p, new D.Independent(new D.Normal(0, 1), 0));
    assert.equal(kl.device, d);
    await assertTensor(kl, 0.125);
    const back = D.klDivergence(new D.Normal(0, 1), new D.Normal(0.5, 1).withNumbersOn(d));
    await assertTensor(back, 0.125);
  },
);

Deno.test("distributions float64 tensors with numbers stay float64 (as PyTorch)", async () => {
  const loc = t([0.5, -1], devicesCpu(), "float64");
  const scale = t([1, 2], devicesCpu(), "float64");
  const p = new D.Normal(loc, 1);
  assert.equal(p.scale.dtype, "float64");
  const kl = D.klDivergence(new D.Normal(loc, scale), new D.Normal(0, 1));
  assert.equal(kl.dtype, "float64");
  assertClose(await kl.data(), [0.125, 0.5 * (4 + 1 - 1 - Math.log(4))], { atol: 1e-12 });
  const lp = new D.Normal(0, 1).logProb(t([0.5], devicesCpu(), "float64"));
  assert.equal(lp.dtype, "float64");
  assertClose(await lp.data(), [-0.125 - 0.5 * Math.log(2 * Math.PI)], { atol: 1e-12 });
  // Mixed tensor dtypes in one distribution stay an error naming both.
  assert.throws(
    () => new D.Normal(loc, t([1, 2], devicesCpu())),
    /loc and scale must have the same dtype, got float64 and float32/,
  );
});

function devicesCpu(): Device {
  return tensor([0]).device;
}

backendTest("distributions Categorical and MultivariateNormal name both devices", (_d, devices) => {
  const [a, b] = devices;
  if (a === b) return;
  const c = new D.Categorical({ probs: t([0.25, 0.75], a) });
  assert.throws(
    () => c.logProb(tensor([1], { dtype: "int32", device: b })),
    (e: Error) =>
      e instanceof TypeError && e.message.includes(`${a}`) && e.message.includes(`${b}`),
  );
  const o = new D.OneHotCategorical({ probs: t([0.25, 0.75], a) });
  assert.throws(
    () => o.logProb(t([0, 1], b)),
    (e: Error) =>
      e instanceof TypeError && e.message.includes(`${a}`) && e.message.includes(`${b}`),
  );
  const m = new D.MultivariateNormal(t([0, 1], a), {
    scaleTril: tensor([[1, 0], [0.5, 2]], { device: a }),
  });
  assert.throws(
    () => m.logProb(t([0, 1], b)),
    (e: Error) =>
      e instanceof TypeError && e.message.includes(`${a}`) && e.message.includes(`${b}`),
  );
  const mb = new D.MultivariateNormal(t([0, 1], b), {
    scaleTril: tensor([[1, 0], [0.5, 2]], { device: b }),
  });
  assert.throws(
    () => D.klDivergence(m, mb),
    (e: Error) =>
      e instanceof TypeError && e.message.includes(`${a}`) && e.message.includes(`${b}`),
  );
});
