/**
 * Embedding and `unbind`: PyTorch 1.13's lookups and weight gradients
 * (padding rows get none, repeated rows accumulate) on every backend, every
 * backend against cpu, maxNorm/normType (in-place renorm) and
 * scaleGradByFreq, PyTorch's N(0, 1) initialisation, float64 gradient
 * checks on cpu, and the errors.
 * @module
 */

import assert from "node:assert/strict";
import { cat, manualSeed, nn, tensor, unbind } from "../mod.ts";
import { assertTensor, backendTest, matchesCpu } from "./harness.ts";
import { check, inp, values } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_layers.json" with { type: "json" };

const F = nn.functional;

for (const c of fixtures.embedding) {
  backendTest(
    `Embedding(${c.num_embeddings}, ${c.embedding_dim}, paddingIdx ${c.padding_idx}) matches PyTorch`,
    async (device) => {
      const emb = new nn.Embedding(c.num_embeddings, c.embedding_dim, {
        paddingIdx: c.padding_idx,
        device,
      });
      assert.equal(emb.paddingIdx, c.resolved_padding_idx);
      assert.equal(emb.toString(), c.repr);
      emb.loadStateDict({ weight: tensor(c.weight, { device }) });
      const out = emb.forward(tensor(c.input, { device, dtype: "int32" }));
      await assertTensor(out, c.output, { shape: [2, 4, c.embedding_dim], what: "output" });
      out.mul(tensor(c.g, { device })).sum().backward();
      await assertTensor(emb.weight.grad!, c.grads.weight, {
        atol: 1e-6,
        rtol: 1e-6,
        what: "weight grad",
      });
    },
  );
}

backendTest("Embedding starts N(0, 1) with the padding row zero", async (device) => {
  manualSeed(7);
  const emb = new nn.Embedding(400, 50, { paddingIdx: 3, device });
  const w = await emb.weight.data();
  const rest = [...w].filter((_, i) => Math.floor(i / 50) !== 3);
  const mean = rest.reduce((a, b) => a + b, 0) / rest.length;
  const std = Math.sqrt(rest.reduce((a, b) => a + (b - mean) ** 2, 0) / rest.length);
  assert.ok(Math.abs(mean) < 0.02, `mean ${mean}`);
  assert.ok(Math.abs(std - 1) < 0.02, `std ${std}`);
  assert.deepEqual([...w.slice(150, 200)], new Array(50).fill(0));
  assert.deepEqual(Object.keys(emb.stateDict()), ["weight"]);
});

backendTest("Embedding.fromPretrained copies, freezes, and keeps the padding row", async (d) => {
  const table = tensor([[1, 2], [3, 4], [5, 6]], { device: d });
  const frozen = nn.Embedding.fromPretrained(table, { paddingIdx: 1 });
  assert.equal(frozen.weight.requiresGrad, false);
  await assertTensor(frozen.forward(tensor([1, 2], { device: d, dtype: "int32" })), [3, 4, 5, 6]);
  const trainable = nn.Embedding.fromPretrained(table, { freeze: false });
  assert.equal(trainable.weight.requiresGrad, true);
  assert.notEqual(trainable.weight.storage, table.storage);
});

interface EmbeddingOptionsFixture {
  maxNorm?: number;
  normType?: number | string;
  paddingIdx?: number;
  scaleGradByFreq?: boolean;
}

for (const c of fixtures.embedding_options) {
  backendTest(
    `Embedding ${c.name}: renorm in place, lookups and gradients match PyTorch`,
    async (device) => {
      const raw = c.options as EmbeddingOptionsFixture;
      const options = {
        ...raw,
        normType: raw.normType === "Infinity" ? Infinity : raw.normType as number | undefined,
      };
      const emb = new nn.Embedding(c.num_embeddings, c.embedding_dim, { ...options, device });
      assert.equal(emb.toString(), c.repr);
      emb.loadStateDict({ weight: tensor(c.weight, { device }) });
      const version = emb.weight.version;
      const out = emb.forward(tensor(c.input, { device, dtype: "int32" }));
      const close = { atol: 1e-6, rtol: 1e-5 };
      await assertTensor(out, c.output, { ...close, what: "output" });
      await assertTensor(emb.weight, c.weight_after, {
        ...close,
        what: "weight after the forward",
      });
      if (options.maxNorm !== undefined) {
        assert.ok(emb.weight.version > version, "renorm is in place");
      }
      out.mul(tensor(c.g, { device })).sum().backward();
      await assertTensor(emb.weight.grad!, c.grads.weight, { ...close, what: "weight grad" });
    },
  );
}

backendTest("Embedding.fromPretrained takes maxNorm, normType and scaleGradByFreq", async (d) => {
  const table = tensor([[3, 4], [0.3, 0.4], [6, 8]], { device: d });
  const emb = nn.Embedding.fromPretrained(table, {
    maxNorm: 1,
    scaleGradByFreq: true,
    freeze: false,
  });
  assert.equal(emb.toString(), "Embedding(3, 2, max_norm=1.0, scale_grad_by_freq=True)");
  const out = emb.forward(tensor([0, 1, 1], { device: d, dtype: "int32" }));
  // Row 0 (norm 5) is scaled to norm 1; row 1 (norm 0.5) stays; row 2 is not looked up.
  await assertTensor(out, [0.6, 0.8, 0.3, 0.4, 0.3, 0.4], { atol: 1e-6 });
  await assertTensor(emb.weight, [0.6, 0.8, 0.3, 0.4, 6, 8], { atol: 1e-6 });
  await assertTensor(table, [3, 4, 0.3, 0.4, 6, 8], { what: "the pretrained tensor is untouched" });
  out.sum().backward();
  await assertTensor(emb.weight.grad!, [1, 1, 1, 1, 0, 0], { what: "row 1: 2 lookups / 2" });
});

backendTest("embedding maxNorm and scaleGradByFreq equal cpu's on [3, 5] indices", async (d) => {
  const weights = values([7, 4], 1405).map((v) => Math.fround(v * 2));
  const idx = [0, 3, 3, 6, 1, 2, 2, 2, 0, 5, 4, 3, 6, 6, 1];
  await matchesCpu(d, (dev) => {
    const w = tensor(weights, { shape: [7, 4], device: dev, requiresGrad: true });
    const y = F.embedding(tensor(idx, { shape: [3, 5], device: dev, dtype: "int32" }), w, {
      maxNorm: 1.2,
      normType: 1.5,
      scaleGradByFreq: true,
      paddingIdx: 4,
    });
    y.mul(y).sum().backward();
    return [y, w, w.grad!];
  }, { atol: 1e-6, rtol: 1e-5 });
});

backendTest("embedding gradient equals cpu's (repeats, padding) on [3, 5] indices", async (d) => {
  const weights = values([7, 4], 1401).map(Math.fround);
  const idx = [0, 3, 3, 6, 1, 2, 2, 2, 0, 5, 4, 3, 6, 6, 1];
  await matchesCpu(d, (dev) => {
    const w = tensor(weights, { shape: [7, 4], device: dev, requiresGrad: true });
    const y = F.embedding(tensor(idx, { shape: [3, 5], device: dev, dtype: "int32" }), w, {
      paddingIdx: 2,
    });
    y.mul(y).sum().backward();
    return [y, w.grad!];
  });
});

backendTest(
  "a large table's gradient is a scatter of the lookups (no [lookups, rows] matrix)",
  async (d) => {
    // 4100 lookups of 8200 rows: a one-hot product would need 134 MB, past WebGPU's binding limit.
    const rows = 8200, lookups = 4100;
    const ids = Array.from({ length: lookups }, (_, i) => (i * 7919) % rows);
    const emb = new nn.Embedding(rows, 4).to(d);
    emb.forward(tensor(ids, { dtype: "int32", device: d })).sum().backward();
    const counts = new Array(rows).fill(0);
    for (const i of ids) counts[i]++;
    const grad = (await emb.weight.grad!.toArray()) as number[][];
    assert.deepEqual(grad.map((row) => row[0]), counts);
    assert.deepEqual(grad.map((row) => row[3]), counts);
  },
);

backendTest("embedding names bad indices, tables and padding", (device) => {
  const w = tensor([[1, 2], [3, 4]], { device });
  assert.throws(
    () => F.embedding(tensor([0.5], { device }), w),
    /embedding: indices must be int32, got float32/,
  );
  assert.throws(
    () => F.embedding(tensor([0], { device, dtype: "int32" }), tensor([1, 2], { device })),
    /weight must be 2-dimensional \[num, dim\], got shape \[2\]/,
  );
  assert.throws(
    () => new nn.Embedding(4, 2, { paddingIdx: 4 }),
    /paddingIdx 4 must be within the 4 embeddings \(-4 to 3\)/,
  );
  assert.throws(() => new nn.Embedding(4, -1), /embeddingDim must be a non-negative integer/);
  assert.throws(
    () => new nn.Embedding(4, 2, { maxNorm: -1 }),
    /Embedding: maxNorm must be a finite non-negative number, got -1/,
  );
  assert.throws(
    () => F.embedding(tensor([0], { device, dtype: "int32" }), w, { maxNorm: 1, normType: 0 }),
    /embedding: normType must be a positive number or Infinity, got 0/,
  );
  assert.throws(
    () => nn.Embedding.fromPretrained(w, { maxNorm: NaN }),
    /maxNorm must be a finite non-negative number, got NaN/,
  );
});

backendTest("unbind gives the slices and one gradient for all of them", async (d) => {
  const xs = values([3, 4, 2], 1402).map(Math.fround);
  await matchesCpu(d, (dev) => {
    const x = tensor(xs, { shape: [3, 4, 2], device: dev, requiresGrad: true });
    const parts = x.unbind(1);
    assert.equal(parts.length, 4);
    assert.deepEqual([...parts[0].shape], [3, 2]);
    // Parts 0 and 3 unused: their gradient is zero.
    const y = cat([parts[1].mul(2), parts[2].exp()], 0);
    y.sum().backward();
    return [y, x.grad!];
  }, { exact: d.backend === "cpu" });
  assert.deepEqual(unbind(tensor([[1, 2]], { device: d }), 0).length, 1);
  assert.deepEqual(tensor([[], []], { device: d }).unbind(1), []);
});

// The padding row's zero gradient, scaleGradByFreq's division and maxNorm's
// renorm (no gradient through it) are conventions, not derivatives: the
// fixtures check them; here the table is looked up without them.
check(
  "embedding with repeated rows",
  (w) => F.embedding(tensor([[1, 0, 3], [3, 2, 1]], { dtype: "int32" }), w).exp(),
  [
    inp([4, 3], 1403),
  ],
);
check("unbind with unused slices", (x) => {
  const [a, , c] = x.unbind(2);
  return a.mul(c).add(a);
}, [inp([2, 3, 3], 1404)]);
