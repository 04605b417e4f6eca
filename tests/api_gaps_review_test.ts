/**
 * Review of the small API gaps (fixture: tests/fixtures/torch_api_gaps_review.py):
 * `F.multiHeadAttentionForward` and `nn.MultiheadAttention` against PyTorch 1.13 over 40 random
 * configurations (values in float64 and float32, gradients of query, key, value and the input
 * projection in float64), the pairing of static keys with values, and `linalg.norm`'s values
 * and gradients where the norm is not differentiable (zero vectors, ties of ±inf norms, NaN, inf).
 * Run it with DENO_WEBGPU_BACKEND=vulkan and =gl.
 * @module
 */

import assert from "node:assert/strict";
import { autograd, type Device, type DType, linalg, nn, type Tensor, tensor } from "../mod.ts";
import {
  assertClose,
  backendTest,
  decodeFixture,
  fixtureTensor,
  type FixtureValues,
  shapeOf,
} from "./harness.ts";
import { CPU0, values } from "./gradcheck.ts";

const F = nn.functional;

interface Mask {
  bool: boolean;
  values: FixtureValues;
}
interface MhaCase {
  E: number;
  H: number;
  separate: boolean;
  addZeroAttn: boolean;
  selfAttention: boolean;
  needWeights: boolean;
  average: boolean;
  batchFirst: boolean;
  options: { bias: boolean; addBiasKv: boolean; kdim: number; vdim: number };
  state: Record<string, FixtureValues>;
  q: FixtureValues;
  k: FixtureValues;
  v: FixtureValues;
  staticK: FixtureValues | null;
  staticV: FixtureValues | null;
  attnMask: Mask | null;
  keyPaddingMask: Mask | null;
  seed: FixtureValues;
  out: FixtureValues;
  weights: FixtureValues | null;
  gq: FixtureValues;
  gk: FixtureValues | null;
  gv: FixtureValues | null;
  gProj: FixtureValues;
}
interface NormCase {
  name: string;
  x: FixtureValues;
  ord: number | string | null;
  dim: number | number[] | null;
  y: FixtureValues;
  grad: FixtureValues;
}
const FIX = JSON.parse(
  await Deno.readTextFile(new URL("./fixtures/torch_api_gaps_review.json", import.meta.url)),
) as { mha: MhaCase[]; norm: NormCase[] };

/** The case's tensors on `d` in `dtype`, the inputs differentiable. */
function inputsOf(c: MhaCase, d: Device, dtype: DType) {
  const t = (v: FixtureValues, requiresGrad = false) =>
    fixtureTensor(v, d, { dtype, requiresGrad });
  const mask = (m: Mask | null) =>
    m === null ? null : fixtureTensor(m.values, d, { dtype: m.bool ? "int32" : dtype });
  const state = Object.fromEntries(Object.entries(c.state).map(([k, v]) => [k, t(v, true)]));
  const q = t(c.q, true);
  const [k, v] = c.selfAttention ? [q, q] : [t(c.k, true), t(c.v, true)];
  return {
    state,
    q,
    k,
    v,
    attnMask: mask(c.attnMask),
    keyPaddingMask: mask(c.keyPaddingMask),
    staticK: c.staticK === null ? null : t(c.staticK),
    staticV: c.staticV === null ? null : t(c.staticV),
  };
}

function functional(c: MhaCase, d: Device, dtype: DType) {
  const i = inputsOf(c, d, dtype);
  const s = i.state;
  const [out, weights] = F.multiHeadAttentionForward(
    i.q,
    i.k,
    i.v,
    c.E,
    c.H,
    s.in_proj_weight ?? null,
    s.in_proj_bias ?? null,
    s.bias_k ?? null,
    s.bias_v ?? null,
    c.addZeroAttn,
    0.5, // not applied: training is false
    s["out_proj.weight"],
    s["out_proj.bias"] ?? null,
    {
      training: false,
      keyPaddingMask: i.keyPaddingMask,
      attnMask: i.attnMask,
      needWeights: c.needWeights,
      averageAttnWeights: c.average,
      useSeparateProjWeight: c.separate,
      qProjWeight: s.q_proj_weight ?? null,
      kProjWeight: s.k_proj_weight ?? null,
      vProjWeight: s.v_proj_weight ?? null,
      staticK: i.staticK,
      staticV: i.staticV,
    },
  );
  return { ...i, out, weights };
}

async function assertFixture(t: Tensor | null, want: FixtureValues | null, what: string, tol = {
  atol: 1e-10,
  rtol: 1e-9,
}) {
  if (want === null) return assert.equal(t, null, what);
  assert.ok(t !== null, `${what}: null`);
  assert.deepEqual([...t.shape], shapeOf(want), `${what}: shape`);
  assertClose(await t.data(), decodeFixture(want), { ...tol, what });
}

Deno.test("F.multiHeadAttentionForward: random configurations, float64 values and gradients", async () => {
  for (const [n, c] of FIX.mha.entries()) {
    const r = functional(c, CPU0, "float64");
    await assertFixture(r.out, c.out, `case ${n}: output`);
    await assertFixture(r.weights, c.weights, `case ${n}: weights`);
    let loss = r.out.mul(fixtureTensor(c.seed, CPU0, { dtype: "float64" })).sum();
    if (r.weights) loss = loss.add(r.weights.sum().mul(0.7));
    const proj = r.state.in_proj_weight ?? r.state.q_proj_weight;
    const [gq, gk, gv, gProj] = autograd.grad(loss, [r.q, r.k, r.v, proj], { allowUnused: true });
    await assertFixture(gq, c.gq, `case ${n}: query gradient`);
    if (c.gk) await assertFixture(gk, c.gk, `case ${n}: key gradient`);
    if (c.gv) await assertFixture(gv, c.gv, `case ${n}: value gradient`);
    await assertFixture(gProj, c.gProj, `case ${n}: projection gradient`);
  }
});

const TOL32 = { atol: 2e-5, rtol: 2e-4 };

backendTest(
  "F.multiHeadAttentionForward and nn.MultiheadAttention: random configurations",
  async (d) => {
    for (const [n, c] of FIX.mha.entries()) {
      const r = functional(c, d, "float32");
      await assertFixture(r.out, c.out, `case ${n}: output`, TOL32);
      await assertFixture(r.weights, c.weights, `case ${n}: weights`, TOL32);
      if (c.staticK !== null) continue; // the module has no static keys, as PyTorch's
      const m = new nn.MultiheadAttention(c.E, c.H, {
        ...c.options,
        addZeroAttn: c.addZeroAttn,
        batchFirst: c.batchFirst,
        dropout: 0.5,
        device: d,
      });
      m.loadStateDict(r.state);
      m.eval();
      const t = (x: Tensor) => c.batchFirst ? x.transpose(0, 1) : x;
      const q = t(r.q);
      const [out, weights] = m.forward(
        q,
        c.selfAttention ? q : t(r.k),
        c.selfAttention ? q : t(r.v),
        {
          keyPaddingMask: r.keyPaddingMask,
          attnMask: r.attnMask,
          needWeights: c.needWeights,
          averageAttnWeights: c.average,
        },
      );
      await assertFixture(t(out), c.out, `case ${n}: module output`, TOL32);
      await assertFixture(weights, c.weights, `case ${n}: module weights`, TOL32);
    }
  },
);

backendTest("F.multiHeadAttentionForward: static keys and values must pair up", (d) => {
  const [E, H, L, S, N] = [4, 2, 3, 5, 2];
  const t = (shape: number[], seed: number) =>
    tensor(values([shape.reduce((a, b) => a * b, 1)], seed), { shape, device: d });
  const q = t([L, N, E], 1);
  const k = t([S, N, E], 2);
  const call = (staticK: Tensor | null, staticV: Tensor | null) =>
    F.multiHeadAttentionForward(
      q,
      k,
      k,
      E,
      H,
      t([3 * E, E], 3),
      null,
      null,
      null,
      false,
      0,
      t([E, E], 4),
      null,
      {
        staticK,
        staticV,
      },
    );
  // A static key of another length than the (projected) values: named, not a matmul's shapes.
  assert.throws(
    () => call(t([N * H, 3, E / H], 5), null),
    /the values \(value, 5 positions\) must have the keys' source length 3 \(staticK of shape \[4, 3, 2\]\)/,
  );
  assert.throws(
    () => call(null, t([N * H, 3, E / H], 6)),
    /the values \(staticV of shape \[4, 3, 2\]\) must have the keys' source length 5 \(key, 5 positions\)/,
  );
  assert.throws(
    () => call(t([N * H, 2, E / H], 7), t([N * H, 3, E / H], 8)),
    /staticV of shape \[4, 3, 2\]\) must have the keys' source length 2 \(staticK of shape \[4, 2, 2\]\)/,
  );
  // Static keys and values of one length, other than key's, are fine.
  const [out] = call(t([N * H, 3, E / H], 9), t([N * H, 3, E / H], 10));
  assert.deepEqual(out.shape, [L, N, E]);
});

const ordOf = (o: number | string | null) =>
  o === null || o === "fro" || o === "nuc" ? o : Number(o);

backendTest(
  "linalg.norm at zeros, ties, NaN and inf: PyTorch's values and gradients",
  async (d) => {
    const dtypes: DType[] = d.backend === "cpu" ? ["float64", "float32"] : ["float32"];
    for (const dtype of dtypes) {
      const tol = dtype === "float64" ? { atol: 1e-12, rtol: 1e-12 } : { atol: 1e-5, rtol: 1e-5 };
      for (const c of FIX.norm) {
        const what = `${c.name}, ord ${c.ord}, dim ${JSON.stringify(c.dim)} (${dtype})`;
        const x = fixtureTensor(c.x, d, { dtype, requiresGrad: true });
        const y = linalg.norm(x, ordOf(c.ord) as number | "fro" | null, c.dim);
        await assertFixture(y, c.y, what, tol);
        const w = tensor(Array.from({ length: y.numel() }, (_, i) => i + 1), {
          shape: [...y.shape],
          dtype,
          device: d,
        });
        const [g] = autograd.grad(y.mul(w).sum(), x, { allowUnused: true }); // ord 0: none, as PyTorch
        await assertFixture(g, c.grad, `${what}: gradient`, tol);
      }
    }
  },
);
