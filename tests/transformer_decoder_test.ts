/**
 * TransformerDecoderLayer / TransformerDecoder / Transformer against PyTorch
 * 1.13 (tests/fixtures/torch_transformer.py): its state dicts load unchanged
 * (same keys, same order) and give its outputs and the gradients of the
 * inputs and of every parameter, post-norm and pre-norm, batch-first and
 * sequence-first, eval (dropout 0.1 turned off) and train (dropout 0), with
 * bool and float masks, on every backend; `generateSquareSubsequentMask`;
 * PyTorch's xavier initialisation; a copy task trained with SGD gives
 * PyTorch's losses; the causal hints; errors; float64 gradient check on cpu.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, nn, noGrad, optim, type Tensor, tensor } from "../mod.ts";
import {
  assertClose,
  assertTensor,
  backendTest,
  fixtureTensor,
  type FixtureValues,
  REF,
} from "./harness.ts";
import { check, CPU0, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_transformer.json" with { type: "json" };

type Values = FixtureValues;
type Mask = { dtype: string; values: Values };
type Masks = Record<string, Mask | undefined>;

function tolerance(device: Device) {
  return device.backend === "cpu" ? { atol: 1e-5, rtol: 1e-5 } : { atol: 1e-4, rtol: 1e-4 };
}

function loadState(model: nn.Module, state: Record<string, unknown>, device: Device): void {
  const sd: Record<string, Tensor> = {};
  for (const [k, v] of Object.entries(state)) sd[k] = fixtureTensor(v as Values, device);
  model.loadStateDict(sd);
}

/** The fixture's masks as forward options (int32 stands for PyTorch's bool). */
function masksOf(masks: Masks, device: Device): Record<string, Tensor> {
  const out: Record<string, Tensor> = {};
  for (const [k, m] of Object.entries(masks)) {
    if (!m) continue;
    out[k] = fixtureTensor(m.values, device, { dtype: m.dtype as "int32" | "float32" });
  }
  return out;
}

async function assertGrads(
  model: nn.Module,
  grads: Record<string, unknown>,
  tol: { atol: number; rtol: number },
): Promise<void> {
  const named = model.namedParameters();
  assert.deepEqual(named.map(([k]) => k), Object.keys(grads), "every parameter has a gradient");
  for (const [name, p] of named) {
    await assertTensor(p.grad!, grads[name] as number[], { ...tol, what: `${name} gradient` });
  }
}

type DecoderCase = (typeof fixtures.decoder_layer)[number];

async function checkDecoder(
  model: nn.TransformerDecoderLayer | nn.TransformerDecoder,
  c: DecoderCase | typeof fixtures.decoder,
  device: Device,
): Promise<void> {
  assert.deepEqual(Object.keys(model.stateDict()), c.keys, "PyTorch's keys, in order");
  loadState(model, c.state, device);
  if (c.mode === "eval") model.eval();
  const tgt = fixtureTensor(c.tgt, device, { requiresGrad: true });
  const memory = fixtureTensor(c.memory, device, { requiresGrad: true });
  const out = model.forward(tgt, memory, masksOf(c.masks as Masks, device));
  const tol = tolerance(device);
  await assertTensor(out, c.out, { ...tol, what: "output", shape: c.shape });
  out.mul(fixtureTensor(c.g, device)).sum().backward();
  await assertTensor(tgt.grad!, c.tgt_grad, { ...tol, what: "tgt gradient" });
  await assertTensor(memory.grad!, c.memory_grad, { ...tol, what: "memory gradient" });
  await assertGrads(model, c.grads, tol);
}

function layerOptions(o: DecoderCase["options"], device: Device) {
  return {
    dimFeedforward: o.dimFeedforward,
    dropout: o.dropout,
    activation: o.activation as "relu" | "gelu",
    normFirst: o.normFirst,
    batchFirst: o.batchFirst,
    device,
  };
}

for (const c of fixtures.decoder_layer) {
  backendTest(`TransformerDecoderLayer (${c.name}) equals PyTorch`, async (device) => {
    const layer = new nn.TransformerDecoderLayer(8, 2, layerOptions(c.options, device));
    await checkDecoder(layer, c, device);
  });
}

backendTest(`TransformerDecoder (${fixtures.decoder.name}) equals PyTorch`, async (device) => {
  const c = fixtures.decoder;
  const layer = new nn.TransformerDecoderLayer(8, 2, layerOptions(c.options, device));
  const model = new nn.TransformerDecoder(layer, c.num_layers, {
    norm: new nn.LayerNorm(8, { device }),
  });
  await checkDecoder(model, c, device);
});

for (const c of fixtures.transformer) {
  backendTest(`Transformer (${c.name}) equals PyTorch`, async (device) => {
    const o = c.options;
    const model = new nn.Transformer({
      ...o,
      activation: o.activation as "relu" | "gelu",
      device,
    });
    assert.deepEqual(Object.keys(model.stateDict()), c.keys, "PyTorch's keys, in order");
    loadState(model, c.state, device);
    if (c.mode === "eval") model.eval();
    const src = fixtureTensor(c.src, device, { requiresGrad: true });
    const tgt = fixtureTensor(c.tgt, device, { requiresGrad: true });
    const out = model.forward(src, tgt, masksOf(c.masks as Masks, device));
    const tol = tolerance(device);
    await assertTensor(out, c.out, { ...tol, what: "output", shape: c.shape });
    out.mul(fixtureTensor(c.g, device)).sum().backward();
    await assertTensor(src.grad!, c.src_grad, { ...tol, what: "src gradient" });
    await assertTensor(tgt.grad!, c.tgt_grad, { ...tol, what: "tgt gradient" });
    await assertGrads(model, c.grads, tol);
  });
}

backendTest("Transformer.generateSquareSubsequentMask equals PyTorch's", async (device) => {
  for (const { size, values } of fixtures.subsequent_mask) {
    const mask = nn.Transformer.generateSquareSubsequentMask(size, { device });
    assert.equal(mask.dtype, "float32");
    assert.equal(mask.device, device);
    assert.deepEqual(mask.shape, [size, size]);
    const expected = (values as Values[]).map((row) =>
      (row as Values[]).map((v) => v === "-Infinity" ? -Infinity : v)
    );
    assert.deepEqual(await mask.toArray(), size === 0 ? [] : expected, `size ${size}`);
  }
});

Deno.test("Transformer.generateSquareSubsequentMask: float64, and errors", async () => {
  const m = nn.Transformer.generateSquareSubsequentMask(2, { device: CPU0, dtype: "float64" });
  assert.equal(m.dtype, "float64");
  assert.deepEqual(await m.toArray(), [[0, -Infinity], [0, 0]]);
  assert.throws(
    () => nn.Transformer.generateSquareSubsequentMask(3, { dtype: "int32" }),
    /Transformer.generateSquareSubsequentMask: the mask holds -Infinity, so dtype must be floating-point, got int32/,
  );
  assert.throws(
    () => nn.Transformer.generateSquareSubsequentMask(-1),
    /Transformer.generateSquareSubsequentMask: size must be a non-negative integer, got -1/,
  );
});

Deno.test("Transformer: a copy task trained with SGD gives PyTorch's losses, decreasing", async () => {
  const c = fixtures.training;
  const device = REF;
  class Copier extends nn.Module {
    embed = new nn.Embedding(c.vocab, 8, { device });
    transformer = new nn.Transformer({
      dModel: 8,
      nhead: 2,
      numEncoderLayers: 1,
      numDecoderLayers: 1,
      dimFeedforward: 16,
      dropout: 0,
      batchFirst: true,
      device,
    });
    out = new nn.Linear(8, c.vocab, { device });
    override forward(src: Tensor, tgt: Tensor, tgtMask: Tensor): Tensor {
      const y = this.transformer.forward(this.embed.forward(src), this.embed.forward(tgt), {
        tgtMask,
      });
      return this.out.forward(y);
    }
  }
  const model = new Copier();
  assert.deepEqual(Object.keys(model.stateDict()), c.keys);
  loadState(model, c.init, device);
  const src = tensor(c.src, { dtype: "int32", device });
  const tgtIn = tensor(c.tgt_in, { dtype: "int32", device });
  const mask = nn.Transformer.generateSquareSubsequentMask(4, { device });
  const opt = new optim.SGD(model.parameters(), { lr: c.lr });
  const lossOf = () =>
    nn.functional.crossEntropy(
      model.forward(src, tgtIn, mask).reshape([-1, c.vocab]),
      src.reshape([-1]),
    );
  const losses: number[] = [];
  for (let step = 0; step < c.steps; step++) {
    opt.zeroGrad();
    const loss = lossOf();
    loss.backward();
    opt.step();
    losses.push(await loss.item());
  }
  const final = await noGrad(lossOf).item();
  assertClose(losses, c.losses, { atol: 1e-5, rtol: 1e-5, what: "losses per step" });
  assertClose([final], [c.final_loss], { atol: 1e-5, rtol: 1e-5, what: "final loss" });
  for (let i = 1; i < losses.length; i++) assert.ok(losses[i] < losses[i - 1], `step ${i}`);
  assert.ok(final < 0.6 * losses[0], `${final} < 0.6 * ${losses[0]}`);
});

Deno.test("Transformer: PyTorch's _reset_parameters (xavier-uniform where dim > 1)", async () => {
  const model = new nn.Transformer({
    dModel: 8,
    nhead: 2,
    numEncoderLayers: 2,
    numDecoderLayers: 2,
    dimFeedforward: 32,
    device: CPU0,
  });
  assert.equal(model.dModel, 8);
  assert.equal(model.nhead, 2);
  assert.equal(model.batchFirst, false);
  const sd = model.stateDict();
  const maxAbs = async (k: string) => Math.max(...Array.from(await sd[k].data(), Math.abs));
  // xavier bound √(6 / (fanIn + fanOut)) against Linear's own 1/√fanIn.
  for (
    const [key, bound, linearBound] of [
      ["encoder.layers.0.self_attn.out_proj.weight", Math.sqrt(6 / 16), 1 / Math.sqrt(8)],
      ["decoder.layers.1.multihead_attn.out_proj.weight", Math.sqrt(6 / 16), 1 / Math.sqrt(8)],
      ["encoder.layers.1.linear2.weight", Math.sqrt(6 / 40), 1 / Math.sqrt(32)],
      ["decoder.layers.0.linear1.weight", Math.sqrt(6 / 40), 1 / Math.sqrt(8)],
    ] as const
  ) {
    const m = await maxAbs(key);
    assert.ok(m <= bound && m > linearBound, `${key}: max |w| ${m} in (${linearBound}, ${bound}]`);
  }
  // Parameters of one dim keep their initialisation: zero attention biases,
  // LayerNorm ones, Linear's U(-1/√fanIn, 1/√fanIn) biases.
  assert.ok((await sd["decoder.layers.1.self_attn.in_proj_bias"].data()).every((v) => v === 0));
  assert.ok((await sd["decoder.norm.weight"].data()).every((v) => v === 1));
  assert.ok(await maxAbs("encoder.layers.0.linear1.bias") <= 1 / Math.sqrt(8));
  // Each layer drew its own values (the copies started equal).
  assert.notDeepEqual(
    await sd["encoder.layers.0.linear1.weight"].toArray(),
    await sd["encoder.layers.1.linear1.weight"].toArray(),
  );
  const layers = [...(model.decoder as nn.TransformerDecoder).layers];
  assert.equal(layers.length, 2);
  assert.ok(layers.every((l) => l instanceof nn.TransformerDecoderLayer));
  assert.ok((model.encoder as nn.TransformerEncoder).norm instanceof nn.LayerNorm);
});

Deno.test("Transformer: a custom decoder, bias: false; the decoder layer's defaults", async () => {
  const small = { dModel: 4, nhead: 2, dimFeedforward: 4, device: CPU0 };
  // Linear's own bound is 1/√4 = 0.5; PyTorch resets custom modules too: √(6 / 68).
  const custom = new nn.Linear(4, 64, { bias: false, device: CPU0 });
  const withCustom = new nn.Transformer({ ...small, numEncoderLayers: 1, customDecoder: custom });
  assert.equal(withCustom.decoder, custom);
  assert.ok(Object.keys(withCustom.stateDict()).includes("decoder.weight"));
  const customMax = Math.max(...Array.from(await custom.weight.data(), Math.abs));
  assert.ok(customMax <= Math.sqrt(6 / 68), `custom decoder reset: max |w| ${customMax}`);
  const noBias = new nn.Transformer({
    ...small,
    numEncoderLayers: 1,
    numDecoderLayers: 1,
    bias: false,
  });
  assert.deepEqual(Object.keys(noBias.stateDict()), [
    "encoder.layers.0.self_attn.in_proj_weight",
    "encoder.layers.0.self_attn.out_proj.weight",
    "encoder.layers.0.linear1.weight",
    "encoder.layers.0.linear2.weight",
    "encoder.layers.0.norm1.weight",
    "encoder.layers.0.norm2.weight",
    "encoder.norm.weight",
    "decoder.layers.0.self_attn.in_proj_weight",
    "decoder.layers.0.self_attn.out_proj.weight",
    "decoder.layers.0.multihead_attn.in_proj_weight",
    "decoder.layers.0.multihead_attn.out_proj.weight",
    "decoder.layers.0.linear1.weight",
    "decoder.layers.0.linear2.weight",
    "decoder.layers.0.norm1.weight",
    "decoder.layers.0.norm2.weight",
    "decoder.layers.0.norm3.weight",
    "decoder.norm.weight",
  ]);
  const defaults = new nn.TransformerDecoderLayer(16, 4, { device: CPU0 });
  assert.deepEqual(defaults.linear1.weight.shape, [2048, 16]);
  assert.equal(defaults.dropout.p, 0.1);
  assert.equal(defaults.norm3.eps, 1e-5);
  assert.equal(defaults.normFirst, false);
  assert.equal(defaults.self_attn.batchFirst, false);
  assert.equal(defaults.multihead_attn.dropout, 0.1);
});

Deno.test("TransformerDecoder: each layer is an independent copy of the one given", async () => {
  const layer = new nn.TransformerDecoderLayer(4, 2, { dimFeedforward: 8, device: CPU0 });
  const model = new nn.TransformerDecoder(layer, 3);
  const layers = [...model.layers] as nn.TransformerDecoderLayer[];
  assert.equal(layers.length, 3);
  assert.equal(model.norm, null);
  assert.equal(model.parameters().length, 3 * layer.parameters().length);
  const weights = [layer, ...layers].map((l) => l.multihead_attn.in_proj_weight!);
  assert.equal(new Set(weights.map((w) => w.storage)).size, 4, "own storage each");
  for (const w of weights.slice(1)) {
    assert.deepEqual(await w.toArray(), await weights[0].toArray());
  }
});

Deno.test("TransformerDecoderLayer: the causal hints, unbatched inputs", async () => {
  const layer = new nn.TransformerDecoderLayer(4, 2, {
    dimFeedforward: 8,
    dropout: 0,
    batchFirst: true,
    device: CPU0,
  });
  const tgt = tensor([...Array(2 * 3 * 4).keys()].map((i) => Math.sin(i)), {
    shape: [2, 3, 4],
    device: CPU0,
  });
  const memory = tensor([...Array(2 * 5 * 4).keys()].map((i) => Math.cos(i)), {
    shape: [2, 5, 4],
    device: CPU0,
  });
  const causal = (rows: number, cols: number) =>
    tensor([...Array(rows * cols).keys()].map((i) => (i % cols > Math.floor(i / cols) ? 1 : 0)), {
      shape: [rows, cols],
      dtype: "int32",
      device: CPU0,
    });
  const explicit = await layer.forward(tgt, memory, {
    tgtMask: causal(3, 3),
    memoryMask: causal(3, 5),
  }).toArray();
  const hinted = await layer.forward(tgt, memory, { tgtIsCausal: true, memoryIsCausal: true })
    .toArray();
  assert.deepEqual(hinted, explicit);
  const plain = await layer.forward(tgt, memory).toArray();
  assert.notDeepEqual(plain, explicit, "the masks matter for these inputs");
  // With a mask given the hint does not replace it.
  const noneMasked = tensor([0, 0, 0, 0, 0, 0, 0, 0, 0], {
    shape: [3, 3],
    dtype: "int32",
    device: CPU0,
  });
  assert.deepEqual(
    await layer.forward(tgt, memory, { tgtMask: noneMasked, tgtIsCausal: true }).toArray(),
    plain,
  );
  // Unbatched [T, E] / [S, E]: as a batch of one.
  const one = layer.forward(tgt.select(0, 1), memory.select(0, 1), {
    tgtIsCausal: true,
    memoryIsCausal: true,
  });
  assert.deepEqual(one.shape, [3, 4]);
  assertClose(await one.toArray(), (hinted as number[][][])[1], { what: "unbatched layer" });
  const model = new nn.Transformer({
    dModel: 4,
    nhead: 2,
    numEncoderLayers: 1,
    numDecoderLayers: 1,
    dimFeedforward: 8,
    dropout: 0,
    device: CPU0,
  });
  const seqFirst = model.forward(memory.transpose(0, 1), tgt.transpose(0, 1));
  assertClose(
    await model.forward(memory.select(0, 0), tgt.select(0, 0)).data(),
    await seqFirst.select(1, 0).data(),
    { what: "unbatched Transformer" },
  );
});

Deno.test("Transformer and its decoder: errors name the shapes", () => {
  const small = {
    dModel: 4,
    nhead: 2,
    numEncoderLayers: 1,
    numDecoderLayers: 1,
    dimFeedforward: 8,
    device: CPU0,
  };
  const z = (shape: number[]) =>
    tensor(new Float32Array(shape.reduce((a, b) => a * b)), { shape, device: CPU0 });
  const seqFirst = new nn.Transformer(small);
  assert.throws(
    () => seqFirst.forward(z([5, 2, 4]), z([3, 3, 4])),
    /Transformer: the batch number of src and tgt must be equal \(dim 1\), got src \[5, 2, 4\] and tgt \[3, 3, 4\]/,
  );
  const batchFirst = new nn.Transformer({ ...small, batchFirst: true });
  assert.throws(
    () => batchFirst.forward(z([2, 5, 4]), z([3, 2, 4])),
    /Transformer: the batch number of src and tgt must be equal \(dim 0 with batchFirst\), got src \[2, 5, 4\] and tgt \[3, 2, 4\]/,
  );
  batchFirst.forward(z([2, 5, 4]), z([2, 3, 4])); // different lengths are fine
  assert.throws(
    () => seqFirst.forward(z([5, 2, 4]), z([3, 2, 6])),
    /Transformer: the feature number of src and tgt must be equal to dModel 4, got src \[5, 2, 4\] and tgt \[3, 2, 6\]/,
  );
  assert.throws(
    () => seqFirst.forward(z([5, 4]), z([3, 2, 4])),
    /Transformer: src and tgt must both be batched \(3 dims\) or both unbatched \(2 dims\), got src \[5, 4\] and tgt \[3, 2, 4\]/,
  );
  assert.throws(
    () => new nn.Transformer({ ...small, nhead: 3 }),
    /MultiheadAttention: embedDim 4 must be divisible by numHeads 3/,
  );
  assert.throws(
    () => new nn.Transformer({ ...small, dModel: 0 }),
    /Transformer: dModel must be a positive integer, got 0/,
  );
  // No decoder layers, as PyTorch allows: the decoder is its final norm alone.
  const normOnly = new nn.Transformer({ ...small, numDecoderLayers: 0 });
  assert.equal((normOnly.decoder as nn.TransformerDecoder).layers.length, 0);

  const layer = new nn.TransformerDecoderLayer(4, 2, {
    dimFeedforward: 8,
    batchFirst: true,
    device: CPU0,
  });
  assert.throws(
    () => layer.forward(z([2, 3, 4]), z([3, 5, 4])),
    /TransformerDecoderLayer: tgt and memory must have the same batch size \(dim 0 of \[batch, seq, feature\]\), got tgt \[2, 3, 4\] and memory \[3, 5, 4\]/,
  );
  assert.throws(
    () => layer.forward(z([2, 3, 4]), z([2, 5, 8])),
    /TransformerDecoderLayer: tgt and memory must have dModel = 4 features, got tgt \[2, 3, 4\] and memory \[2, 5, 8\]/,
  );
  assert.throws(
    () => layer.forward(z([2, 3, 4]), z([5, 4])),
    /TransformerDecoderLayer: tgt and memory must both be \[batch, seq, feature\] or both unbatched \[seq, feature\], got tgt \[2, 3, 4\] and memory \[5, 4\]/,
  );
  assert.throws(
    () => layer.forward(z([2, 3, 4]), z([2, 5, 4]), { tgtMask: z([3, 5]) }),
    /MultiheadAttention: attnMask of shape \[3, 5\] must be \[3, 3\]/,
  );
  assert.throws(
    () => new nn.TransformerDecoderLayer(4, 2, { activation: "tanh" as "relu" }),
    /TransformerDecoderLayer: activation must be "relu", "gelu" or a function, got "tanh"/,
  );
  assert.throws(
    () => new nn.TransformerDecoderLayer(4, 2, { dimFeedforward: 0 }),
    /TransformerDecoderLayer: dimFeedforward must be a positive integer, got 0/,
  );
  assert.throws(
    () => new nn.TransformerDecoder({} as nn.TransformerDecoderLayer, 2),
    /TransformerDecoder: decoderLayer must be an nn.Module/,
  );
  assert.throws(
    () => new nn.TransformerDecoder(layer, 1.5),
    /TransformerDecoder: numLayers must be a non-negative integer, got 1.5/,
  );
});

const layer64 = new nn.TransformerDecoderLayer(4, 2, {
  dimFeedforward: 6,
  dropout: 0,
  activation: "gelu",
  dtype: "float64",
  device: CPU0,
});
const layer64Pre = new nn.TransformerDecoderLayer(4, 2, {
  dimFeedforward: 6,
  dropout: 0,
  normFirst: true,
  batchFirst: true,
  dtype: "float64",
  device: CPU0,
});
check(
  "TransformerDecoderLayer (post-norm, gelu, causal) tgt and memory gradients",
  (tgt: Tensor, memory: Tensor) => layer64.forward(tgt, memory, { tgtIsCausal: true }),
  [inp([3, 2, 4], 1540), inp([5, 2, 4], 1541)],
);
check(
  "TransformerDecoderLayer (pre-norm, batch-first) tgt and memory gradients",
  (tgt: Tensor, memory: Tensor) => layer64Pre.forward(tgt, memory),
  [inp([2, 3, 4], 1542), inp([2, 5, 4], 1543)],
);
