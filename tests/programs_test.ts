/**
 * Three ordinary PyTorch programs ported line by line (a CNN classifier, an
 * LSTM/GRU sequence classifier over padded batches, a tiny Transformer
 * language model with masks), run from the state dict PyTorch 1.13 saved
 * (its keys, unchanged) on every backend: each step's loss, the final
 * parameters and buffers and the eval-mode output equal PyTorch's
 * (tests/fixtures/torch_programs.py).
 * @module
 */

import assert from "node:assert/strict";
import { type Device, nn, noGrad, ones, optim, type Tensor } from "../mod.ts";
import {
  assertClose,
  assertTensor,
  backendTest,
  decodeFixture,
  fixtureTensor,
  type FixtureValues,
} from "./harness.ts";
import fixtures from "./fixtures/torch_programs.json" with { type: "json" };

type Values = FixtureValues;

/** PyTorch's state dict as tensors (0-dimensional integers are int32 counters). */
function stateDict(values: Record<string, unknown>, device: Device): Record<string, Tensor> {
  const sd: Record<string, Tensor> = {};
  for (const [key, v] of Object.entries(values)) {
    sd[key] = fixtureTensor(v as Values, device, {
      dtype: key.endsWith("num_batches_tracked") ? "int32" : "float32",
    });
  }
  return sd;
}

/**
 * Compares the state dict with PyTorch's, skipping entries `skip` names by
 * key with the [start, end) ranges of elements not compared.
 */
async function assertState(
  model: nn.Module,
  expected: Record<string, unknown>,
  tol: { atol: number; rtol: number },
  skip: Record<string, [number, number]> = {},
): Promise<void> {
  const got = model.stateDict();
  assert.deepEqual(Object.keys(got), Object.keys(expected), "state-dict keys in PyTorch's order");
  for (const [key, v] of Object.entries(expected)) {
    const values = decodeFixture(v as Values);
    const actual = Array.from(await got[key].data());
    const [from, to] = skip[key] ?? [0, 0];
    const keep = (_: number, i: number) => i < from || i >= to;
    assertClose(actual.filter(keep), values.filter(keep), { ...tol, what: key });
  }
}

function tolerance(device: Device, loose = 1) {
  return device.backend === "cpu"
    ? { atol: 2e-5 * loose, rtol: 2e-5 * loose }
    : { atol: 2e-4 * loose, rtol: 2e-4 * loose };
}

// ---- a CNN: Conv2d, BatchNorm2d, MaxPool2d, AdaptiveAvgPool2d, train/eval ----

class CNN extends nn.Module {
  features: nn.Sequential;
  classifier: nn.Sequential;
  constructor(device: Device) {
    super();
    this.features = new nn.Sequential(
      new nn.Conv2d(1, 4, 3, { padding: 1, device }),
      new nn.BatchNorm2d(4, { device }),
      new nn.ReLU(),
      new nn.MaxPool2d(2),
      new nn.Conv2d(4, 8, 3, { padding: "same", bias: false, device }),
      new nn.BatchNorm2d(8, { device }),
      new nn.ReLU(),
      new nn.AdaptiveAvgPool2d(1),
    );
    this.classifier = new nn.Sequential(
      new nn.Flatten(),
      new nn.Dropout(0),
      new nn.Linear(8, 3, { device }),
    );
  }
  override forward(x: Tensor): Tensor {
    return this.classifier.forward(this.features.forward(x));
  }
}

backendTest("program: a CNN trained from PyTorch's state dict equals PyTorch", async (device) => {
  const c = fixtures.cnn;
  const model = new CNN(device);
  model.loadStateDict(stateDict(c.init, device));
  const x = fixtureTensor(c.x, device);
  const y = fixtureTensor(c.y, device, { dtype: "int32" });
  const opt = new optim.SGD(model.parameters(), { lr: 0.1, momentum: 0.9, weightDecay: 1e-4 });
  const sched = new optim.lrScheduler.StepLR(opt, 2, { gamma: 0.5 });
  const losses: number[] = [];
  const norms: number[] = [];
  model.train();
  for (let step = 0; step < 4; step++) {
    opt.zeroGrad();
    const loss = nn.functional.crossEntropy(model.forward(x), y, { labelSmoothing: 0.1 });
    loss.backward();
    norms.push(await nn.utils.clipGradNorm_(model.parameters(), 2.0).item());
    opt.step();
    sched.step();
    losses.push(await loss.item());
  }
  const tol = tolerance(device, 5);
  await assertTensor(fixtureTensor(losses, device), c.losses, { ...tol, what: "losses" });
  await assertTensor(fixtureTensor(norms, device), c.norms, { ...tol, what: "gradient norms" });
  await assertState(model, c.final, tol);
  model.eval();
  const out = noGrad(() => model.forward(x));
  await assertTensor(out, c.eval_out, { ...tol, what: "eval output", shape: [4, 3] });
});

// ---- an LSTM / GRU classifier over padded sequences (no packing) ----

class SeqClassifier extends nn.Module {
  embed: nn.Embedding;
  rnn: nn.LSTM | nn.GRU;
  head: nn.Linear;
  constructor(kind: "lstm" | "gru", device: Device) {
    super();
    this.embed = new nn.Embedding(12, 6, { paddingIdx: 0, device });
    const Rnn = kind === "lstm" ? nn.LSTM : nn.GRU;
    this.rnn = new Rnn(6, 8, { numLayers: 2, batchFirst: true, bidirectional: true, device });
    this.head = new nn.Linear(16, 3, { device });
  }
  override forward(tokens: Tensor, lengths: Tensor): Tensor {
    const [out] = this.rnn.forward(this.embed.forward(tokens)); // [B, T, 16]
    // The output at each sequence's last real token (no packing).
    const idx = lengths.sub(1).view([-1, 1, 1]).expand([-1, 1, out.size(2)]);
    const last = out.gather(1, idx).squeeze(1);
    // Plus the mean over real tokens.
    const mask = tokens.ne(0).unsqueeze(-1).to("float32");
    const mean = out.mul(mask).sum(1).div(mask.sum(1));
    return this.head.forward(last.add(mean));
  }
}

for (const kind of ["lstm", "gru"] as const) {
  backendTest(`program: a ${kind} sequence classifier equals PyTorch`, async (device) => {
    const c = fixtures[kind];
    const model = new SeqClassifier(kind, device);
    model.loadStateDict(stateDict(c.init, device));
    const tokens = fixtureTensor(c.tokens, device, { dtype: "int32" });
    const lengths = fixtureTensor(c.lengths, device, { dtype: "int32" });
    const y = fixtureTensor(c.y, device, { dtype: "int32" });
    const opt = new optim.Adam(model.parameters(), { lr: 0.01 });
    const losses: number[] = [];
    for (let step = 0; step < 3; step++) {
      opt.zeroGrad();
      const loss = nn.functional.crossEntropy(model.forward(tokens, lengths), y);
      loss.backward();
      nn.utils.clipGradNorm_(model.parameters(), 1.0);
      opt.step();
      losses.push(await loss.item());
    }
    const tol = tolerance(device, 5);
    await assertTensor(fixtureTensor(losses, device), c.losses, { ...tol, what: "losses" });
    await assertState(model, c.final, tol);
    // The padding row never moved.
    await assertTensor(model.embed.weight.select(0, 0), [0, 0, 0, 0, 0, 0], { what: "pad row" });
    model.eval();
    const out = noGrad(() => model.forward(tokens, lengths));
    await assertTensor(out, c.eval_out, { ...tol, what: "eval output", shape: [4, 3] });
  });
}

// ---- a tiny pre-norm Transformer LM: MultiheadAttention, LayerNorm, masks ----

class Block extends nn.Module {
  ln1: nn.LayerNorm;
  attn: nn.MultiheadAttention;
  ln2: nn.LayerNorm;
  ff: nn.Sequential;
  constructor(dim: number, heads: number, device: Device) {
    super();
    this.ln1 = new nn.LayerNorm(dim, { device });
    this.attn = new nn.MultiheadAttention(dim, heads, { batchFirst: true, device });
    this.ln2 = new nn.LayerNorm(dim, { device });
    this.ff = new nn.Sequential(
      new nn.Linear(dim, 4 * dim, { device }),
      new nn.GELU(),
      new nn.Linear(4 * dim, dim, { device }),
    );
  }
  override forward(x: Tensor, pad: Tensor): [Tensor, Tensor] {
    const t = x.size(1);
    const causal = ones([t, t], { dtype: "int32", device: x.device }).triu(1);
    const h = this.ln1.forward(x);
    const [a, w] = this.attn.forward(h, h, h, { attnMask: causal, keyPaddingMask: pad });
    x = x.add(a);
    return [x.add(this.ff.forward(this.ln2.forward(x))), w!];
  }
}

class TinyLM extends nn.Module {
  tok: nn.Embedding;
  pos: nn.Parameter;
  block: Block;
  norm: nn.LayerNorm;
  out: nn.Linear;
  constructor(device: Device) {
    super();
    this.tok = new nn.Embedding(10, 8, { device });
    this.pos = new nn.Parameter(ones([6, 8], { device }).mul(0.1));
    this.block = new Block(8, 2, device);
    this.norm = new nn.LayerNorm(8, { device });
    this.out = new nn.Linear(8, 10, { device });
  }
  override forward(tokens: Tensor, pad: Tensor): [Tensor, Tensor] {
    const x = this.tok.forward(tokens).add(this.pos.narrow(0, 0, tokens.size(1)));
    const [h, w] = this.block.forward(x, pad);
    return [this.out.forward(this.norm.forward(h)), w];
  }
}

backendTest("program: a tiny Transformer LM with masks equals PyTorch", async (device) => {
  const c = fixtures.transformer;
  const model = new TinyLM(device);
  model.loadStateDict(stateDict(c.init, device));
  const tokens = fixtureTensor(c.tokens, device, { dtype: "int32" });
  const pad = fixtureTensor(c.pad, device, { dtype: "int32" });
  const targets = fixtureTensor(c.targets, device, { dtype: "int32" });
  const opt = new optim.AdamW(model.parameters(), { lr: 0.01, weightDecay: 0.1 });
  const sched = new optim.lrScheduler.CosineAnnealingLR(opt, 3);
  const losses: number[] = [];
  for (let step = 0; step < 3; step++) {
    opt.zeroGrad();
    const [logits] = model.forward(tokens, pad);
    const loss = nn.functional.crossEntropy(logits.reshape([-1, 10]), targets.reshape([-1]));
    loss.backward();
    opt.step();
    sched.step();
    losses.push(await loss.item());
  }
  const tol = tolerance(device, 5);
  await assertTensor(fixtureTensor(losses, device), c.losses, { ...tol, what: "losses" });
  // The key projection's bias gets an exactly zero gradient (it adds the same
  // number to every logit of a softmax row): PyTorch's and ours are rounding
  // noise, which Adam's normalisation blows up to a full step. Not compared.
  await assertState(model, c.final, tol, { "block.attn.in_proj_bias": [8, 16] });
  model.eval();
  const [out, weights] = noGrad(() => model.forward(tokens, pad));
  await assertTensor(out, c.eval_out, { ...tol, what: "eval logits", shape: [2, 6, 10] });
  await assertTensor(weights, c.eval_weights, { ...tol, what: "attention weights" });
});
