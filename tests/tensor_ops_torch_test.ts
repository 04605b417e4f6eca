/**
 * The tensor ops of issue 12 against PyTorch 1.13's numbers
 * (tests/fixtures/torch_reference.json, key `tensor_ops`) on every backend:
 * elementwise math (NaN and infinities included), where, masked softmax and
 * gather, forward and gradient.
 * @module
 */

import { type Device, gather, type Tensor, where } from "../mod.ts";
import fixtures from "./fixtures/torch_reference.json" with { type: "json" };
import {
  assertTensor,
  backendTest,
  decodeFixture,
  fixtureTensor,
  type FixtureValues,
  shapeOf,
} from "./harness.ts";

const F = fixtures.tensor_ops;
type Nested = FixtureValues;

/** A tensor of fixture values on `d`. */
function t(
  d: Device,
  values: Nested,
  requiresGrad = false,
  dtype: "float32" | "int32" = "float32",
): Tensor {
  return fixtureTensor(values, d, { requiresGrad, dtype });
}

const TOL = { atol: 1e-5, rtol: 1e-5 };

for (const c of F.unary) {
  const op = c.op as
    | "sin"
    | "cos"
    | "floor"
    | "ceil"
    | "round"
    | "sign"
    | "log1p"
    | "expm1"
    | "rsqrt"
    | "reciprocal"
    | "square";
  backendTest(`torch ${op}: special values, values and gradient`, async (d) => {
    await assertTensor(t(d, F.special)[op](), decodeFixture(c.special_output), {
      ...TOL,
      what: `${op} of NaN/inf/±0/halves`,
    });
    const x = t(d, c.input, true);
    const y = x[op]();
    await assertTensor(y, decodeFixture(c.output), { ...TOL, what: op });
    y.mul(t(d, F.g)).sum().backward();
    await assertTensor(x.grad!, decodeFixture(c.grad), { ...TOL, what: `${op} grad` });
  });
}

backendTest("torch where: broadcast forward and gradients", async (d) => {
  const w = F.where;
  const a = t(d, w.a, true);
  const b = t(d, w.b, true);
  const out = where(t(d, w.cond), a, b);
  await assertTensor(out, decodeFixture(w.output), { ...TOL, shape: shapeOf(w.output) });
  out.mul(t(d, w.g)).sum().backward();
  await assertTensor(a.grad!, decodeFixture(w.grad_a), TOL);
  await assertTensor(b.grad!, decodeFixture(w.grad_b), TOL);
});

backendTest("torch masked_fill(-inf) + softmax: forward and gradient", async (d) => {
  const m = F.masked_softmax;
  const scores = t(d, m.scores, true);
  const probs = scores.maskedFill(t(d, m.mask), -Infinity).softmax(-1);
  await assertTensor(probs, decodeFixture(m.output), TOL);
  probs.mul(t(d, m.g)).sum().backward();
  await assertTensor(scores.grad!, decodeFixture(m.grad), TOL);
});

backendTest("torch gather: forward and scatter-add gradient", async (d) => {
  const g = F.gather;
  const x = t(d, g.input, true);
  const out = gather(x, g.dim, t(d, g.index, false, "int32"));
  await assertTensor(out, decodeFixture(g.output), { atol: 0, rtol: 0, shape: shapeOf(g.output) });
  out.mul(t(d, g.g)).sum().backward();
  await assertTensor(x.grad!, decodeFixture(g.grad), TOL);
});
