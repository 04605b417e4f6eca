/**
 * MultiheadAttention and scaledDotProductAttention: PyTorch 1.13's state
 * dicts load unchanged and give its outputs, head-averaged (or per-head)
 * weights and gradients, with boolean and float masks (-inf included),
 * batch-first, unbatched, kdim/vdim and no-bias variants, on every backend;
 * every backend against cpu; float64 gradient checks on cpu; errors.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, manualSeed, nn, type Tensor, tensor } from "../mod.ts";
import {
  assertTensor,
  backendTest,
  decodeFixture,
  fixtureTensor,
  type FixtureValues,
  matchesCpu,
  shapeOf,
} from "./harness.ts";
import { check, inp, values } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_layers.json" with { type: "json" };

/**
 * Puts a plain tensor (a gradcheck input) where a parameter was, as PyTorch's
 * `del m.weight; m.weight = t`: a parameter field refuses a plain tensor until it is deleted.
 */
function replaceWithTensor(m: nn.Module, name: string, t: Tensor): void {
  const fields = m as unknown as Record<string, unknown>;
  delete fields[name];
  fields[name] = t;
}

const F = nn.functional;

interface MaskFixture {
  dtype: string;
  values: FixtureValues;
}

function tol(device: Device) {
  return device.backend === "cpu" ? { atol: 2e-6, rtol: 1e-5 } : { atol: 1e-4, rtol: 1e-4 };
}

function mask(m: MaskFixture | null | undefined, device: Device): Tensor | null {
  if (!m) return null;
  return fixtureTensor(m.values, device, { dtype: m.dtype as "int32" | "float32" });
}

async function expectValues(t: Tensor, want: FixtureValues, device: Device, what: string) {
  assert.deepEqual([...t.shape], shapeOf(want), `${what}: shape`);
  await assertTensor(t, decodeFixture(want), { ...tol(device), what });
}

for (const c of fixtures.multihead_attention) {
  backendTest(`MultiheadAttention ${c.name}: PyTorch's outputs, weights and grads`, async (d) => {
    const m = new nn.MultiheadAttention(c.embed_dim, c.num_heads, { ...c.options, device: d });
    assert.deepEqual(Object.keys(m.stateDict()), c.keys, "state-dict keys in PyTorch's order");
    const sd: Record<string, Tensor> = {};
    for (const [k, v] of Object.entries(c.params)) sd[k] = fixtureTensor(v, d);
    m.loadStateDict(sd);
    const q = fixtureTensor(c.query, d, { requiresGrad: true });
    const k = c.self_attention ? q : fixtureTensor(c.key!, d, { requiresGrad: true });
    const v = c.self_attention ? q : fixtureTensor(c.value!, d, { requiresGrad: true });
    const [out, w] = m.forward(q, k, v, {
      ...c.forward,
      attnMask: mask(c.attn_mask, d),
      keyPaddingMask: mask(c.key_padding_mask, d),
    });
    await expectValues(out, c.output, d, "output");
    let loss = out.mul(fixtureTensor(c.g, d)).sum();
    if (c.weights) {
      await expectValues(w!, c.weights, d, "weights");
      loss = loss.add(w!.mul(fixtureTensor(c.g_weights!, d)).sum());
    } else assert.equal(w, null);
    loss.backward();
    const grads = c.grads as unknown as Record<string, FixtureValues>;
    await expectValues(q.grad!, grads.query, d, "query grad");
    if (!c.self_attention) {
      await expectValues(k.grad!, grads.key, d, "key grad");
      await expectValues(v.grad!, grads.value, d, "value grad");
    }
    for (const [name, p] of m.namedParameters()) {
      await expectValues(p.grad!, grads[name], d, `${name} grad`);
    }
  });
}

for (const c of fixtures.scaled_dot_product_attention) {
  backendTest(`scaledDotProductAttention ${c.name} matches PyTorch`, async (d) => {
    const q = fixtureTensor(c.query, d, { requiresGrad: true });
    const k = fixtureTensor(c.key, d, { requiresGrad: true });
    const v = fixtureTensor(c.value, d, { requiresGrad: true });
    const out = F.scaledDotProductAttention(q, k, v, {
      attnMask: mask((c as { attn_mask?: MaskFixture }).attn_mask, d),
      isCausal: c.is_causal,
      scale: c.scale,
    });
    await expectValues(out, c.output, d, "output");
    out.mul(fixtureTensor(c.g, d)).sum().backward();
    await expectValues(q.grad!, c.grads.query, d, "query grad");
    await expectValues(k.grad!, c.grads.key, d, "key grad");
    await expectValues(v.grad!, c.grads.value, d, "value grad");
  });
}

backendTest(
  "MultiheadAttention: outputs and gradients equal cpu's (masks, dropout off)",
  async (d) => {
    const xs = values([3, 5, 8], 1610).map(Math.fround);
    await matchesCpu(d, (dev) => {
      manualSeed(21);
      const m = new nn.MultiheadAttention(8, 4, { batchFirst: true, device: dev });
      const x = tensor(xs, { shape: [3, 5, 8], device: dev, requiresGrad: true });
      const padding = tensor([[0, 0, 0, 0, 1], [0, 0, 0, 0, 0], [0, 1, 1, 0, 0]], {
        device: dev,
        dtype: "int32",
      });
      const [out, w] = m.forward(x, x, x, { keyPaddingMask: padding });
      out.sum().add(w!.mul(w!).sum()).backward();
      return [out, w!, x.grad!, ...m.parameters().map((p) => p.grad!)];
    }, { atol: 2e-5, rtol: 1e-4 });
  },
);

backendTest(
  "MultiheadAttention addBiasKv + addZeroAttn: outputs, weights, grads equal cpu's",
  async (d) => {
    const xs = values([4, 2, 8], 1615).map(Math.fround);
    await matchesCpu(d, (dev) => {
      manualSeed(22);
      const m = new nn.MultiheadAttention(8, 2, {
        addBiasKv: true,
        addZeroAttn: true,
        device: dev,
      });
      const x = tensor(xs, { shape: [4, 2, 8], device: dev, requiresGrad: true });
      const padding = tensor([[0, 0, 1, 1], [0, 0, 0, 0]], { device: dev, dtype: "int32" });
      const [out, w] = m.forward(x, x, x, { keyPaddingMask: padding });
      assert.deepEqual([...w!.shape], [2, 4, 6], "two extra source positions");
      out.sum().add(w!.mul(w!).sum()).backward();
      return [out, w!, x.grad!, ...m.parameters().map((p) => p.grad!)];
    }, { atol: 2e-5, rtol: 1e-4 });
  },
);

Deno.test("MultiheadAttention addBiasKv: bias_k/bias_v keys in PyTorch's order, xavier-normal", async () => {
  manualSeed(6);
  const m = new nn.MultiheadAttention(64, 4, { addBiasKv: true, kdim: 3, vdim: 5 });
  assert.deepEqual(Object.keys(m.stateDict()), [
    "q_proj_weight",
    "k_proj_weight",
    "v_proj_weight",
    "in_proj_bias",
    "bias_k",
    "bias_v",
    "out_proj.weight",
    "out_proj.bias",
  ]);
  assert.deepEqual([...m.bias_k!.shape], [1, 1, 64]);
  // xavier-normal of [1, 1, 64]: fan_in = fan_out = 64, std = sqrt(2 / 128).
  const v = [...await m.bias_k!.data()];
  const std = Math.sqrt(v.reduce((a: number, x: number) => a + x * x, 0) / v.length);
  assert.ok(Math.abs(std - 0.125) < 0.04, `std ${std}, expected about 0.125`);
  assert.equal(new nn.MultiheadAttention(8, 2, { addZeroAttn: true }).parameters().length, 4);
});

backendTest("a fully masked query row gives NaN, as PyTorch; others stay finite", async (d) => {
  const q = tensor(values([2, 3, 4], 1611), { shape: [2, 3, 4], device: d });
  const k = tensor(values([2, 3, 4], 1612), { shape: [2, 3, 4], device: d });
  const attend = tensor([[1, 1, 1], [0, 0, 0], [1, 0, 0]], { device: d, dtype: "int32" });
  const out = await F.scaledDotProductAttention(q, k, k, { attnMask: attend }).data();
  for (let b = 0; b < 2; b++) {
    for (let i = 0; i < 3; i++) {
      const row = [...out.slice((b * 3 + i) * 4, (b * 3 + i) * 4 + 4)];
      assert.equal(row.every(Number.isNaN), i === 1, `batch ${b} row ${i}: ${row}`);
      if (i !== 1) assert.ok(row.every(Number.isFinite));
    }
  }
  // Row 2 attends to key 0 only: its output is value 0 exactly.
  await assertTensor(
    F.scaledDotProductAttention(q, k, k, { attnMask: attend }).narrow(1, 2, 1),
    [...(await k.narrow(1, 0, 1).data())],
  );
});

Deno.test("MultiheadAttention initialisation: xavier-uniform in_proj, zero biases", async () => {
  manualSeed(4);
  const m = new nn.MultiheadAttention(16, 4);
  const w = await m.in_proj_weight!.data();
  const bound = Math.sqrt(6 / (16 + 48));
  const max = Math.max(...w.map(Math.abs));
  assert.ok(max <= bound && max > 0.9 * bound, `max ${max}, bound ${bound}`);
  assert.deepEqual([...await m.in_proj_bias!.data()], new Array(48).fill(0));
  assert.deepEqual([...await m.out_proj.bias!.data()], new Array(16).fill(0));
  const sep = new nn.MultiheadAttention(8, 2, { kdim: 3, vdim: 5, bias: false });
  assert.deepEqual(Object.keys(sep.stateDict()), [
    "q_proj_weight",
    "k_proj_weight",
    "v_proj_weight",
    "out_proj.weight",
  ]);
});

Deno.test("MultiheadAttention dropout acts in training only", async () => {
  manualSeed(8);
  const m = new nn.MultiheadAttention(4, 2, { dropout: 0.5 });
  const x = tensor(values([3, 2, 4], 1613), { shape: [3, 2, 4] });
  const [, w1] = m.forward(x, x, x);
  const dropped = [...await w1!.data()];
  assert.ok(dropped.some((p) => p === 0), "some weights dropped");
  m.eval();
  const [, w2] = m.forward(x, x, x);
  const sums = await w2!.sum(-1).data();
  for (const s of sums) assert.ok(Math.abs(s - 1) < 1e-6, `rows sum to 1 in eval, got ${s}`);
});

backendTest("attention names bad shapes and masks", (d) => {
  const m = new nn.MultiheadAttention(4, 2, { device: d });
  const x = tensor(values([3, 2, 4], 1614), { shape: [3, 2, 4], device: d });
  assert.throws(
    () => new nn.MultiheadAttention(6, 4),
    /embedDim 6 must be divisible by numHeads 4/,
  );
  assert.throws(
    () => m.forward(x, tensor(values([3, 2, 5], 1), { shape: [3, 2, 5], device: d }), x),
    /expected query, key and value as \[seq, batch, feature\] with 4, 4 and 4 features/,
  );
  assert.throws(
    () => m.forward(x, x, x, { attnMask: tensor([[0, 1]], { device: d, dtype: "int32" }) }),
    /attnMask of shape \[1, 2\] must be \[3, 3\] or \[4, 3, 3\]/,
  );
  assert.throws(
    () => m.forward(x, x, x, { keyPaddingMask: tensor([0, 1, 0], { device: d, dtype: "int32" }) }),
    /keyPaddingMask of shape \[3\] must be \[2, 3\]/,
  );
  // Masks are given for the S keys, not for the positions addBiasKv adds.
  const withBias = new nn.MultiheadAttention(4, 2, { addBiasKv: true, device: d });
  assert.throws(
    () =>
      withBias.forward(x, x, x, {
        attnMask: tensor(values([3, 4], 3), { shape: [3, 4], device: d }),
      }),
    /attnMask of shape \[3, 4\] must be \[3, 3\] or \[4, 3, 3\]/,
  );
  const q = tensor(values([2, 3], 2), { shape: [2, 3], device: d });
  assert.throws(
    () => F.scaledDotProductAttention(q, tensor([1, 2, 3], { device: d }), q),
    /expected query \[..., L, E\], key \[..., S, E\] and value \[..., S, Ev\]/,
  );
  assert.throws(
    () =>
      F.scaledDotProductAttention(q, q, q, {
        isCausal: true,
        attnMask: tensor([[1, 1], [1, 1]], { device: d }),
      }),
    /either attnMask or isCausal/,
  );
  assert.throws(
    () => F.scaledDotProductAttention(q, q, q, { attnMask: tensor([1, 1, 1], { device: d }) }),
    /float mask of shape \[3\] does not broadcast to the attention scores of shape \[2, 2\]/,
  );
});

// ---- float64 gradient checks (cpu) ----

check(
  "scaledDotProductAttention with a float mask",
  (q, k, v, m) => F.scaledDotProductAttention(q, k, v, { attnMask: m }),
  [
    inp([2, 3, 4], 1620),
    inp([2, 5, 4], 1621),
    inp([2, 5, 3], 1622),
    inp([3, 5], 1623),
  ],
);
check(
  "scaledDotProductAttention causal with scale",
  (q, k, v) => F.scaledDotProductAttention(q, k, v, { isCausal: true, scale: 0.7 }),
  [
    inp([2, 4, 3], 1624),
    inp([2, 4, 3], 1625),
    inp([2, 4, 2], 1626),
  ],
);
check(
  "MultiheadAttention (inputs and every parameter, padding mask)",
  (q, k, v, inW, inB, outW, outB) => {
    const m = new nn.MultiheadAttention(4, 2, { dtype: "float64" });
    replaceWithTensor(m, "in_proj_weight", inW);
    replaceWithTensor(m, "in_proj_bias", inB);
    replaceWithTensor(m.out_proj, "weight", outW);
    replaceWithTensor(m.out_proj, "bias", outB);
    const padding = tensor([[0, 0, 1], [0, 0, 0]], { dtype: "int32" });
    const [out, w] = m.forward(q, k, v, { keyPaddingMask: padding, averageAttnWeights: false });
    return out.sum().add(w!.mul(w!).sum());
  },
  [
    inp([2, 2, 4], 1630),
    inp([3, 2, 4], 1631),
    inp([3, 2, 4], 1632),
    inp([12, 4], 1633, -0.7, 0.7),
    inp([12], 1634, -0.3, 0.3),
    inp([4, 4], 1635, -0.7, 0.7),
    inp([4], 1636, -0.3, 0.3),
  ],
);
check(
  "MultiheadAttention addBiasKv + addZeroAttn (inputs, bias_k, bias_v, float mask)",
  (q, k, v, inW, biasK, biasV, mask) => {
    manualSeed(30); // out_proj keeps its (seeded) initialisation
    const m = new nn.MultiheadAttention(4, 2, {
      dtype: "float64",
      addBiasKv: true,
      addZeroAttn: true,
    });
    replaceWithTensor(m, "in_proj_weight", inW);
    replaceWithTensor(m, "bias_k", biasK);
    replaceWithTensor(m, "bias_v", biasV);
    const [out, w] = m.forward(q, k, v, { attnMask: mask, averageAttnWeights: false });
    return out.sum().add(w!.mul(w!).sum());
  },
  [
    inp([2, 2, 4], 1640),
    inp([3, 2, 4], 1641),
    inp([3, 2, 4], 1642),
    inp([12, 4], 1643, -0.7, 0.7),
    inp([1, 1, 4], 1644),
    inp([1, 1, 4], 1645),
    inp([2, 3], 1646),
  ],
);
