/**
 * RNN, LSTM and GRU: a PyTorch 1.13 state dict loads unchanged (same keys, in
 * the same order) and gives PyTorch's outputs, final states and gradients of
 * the input, the initial states and every parameter (multi-layer,
 * bidirectional, batch-first, unbatched, without bias), on every backend;
 * every backend against cpu; float64 gradient checks on cpu; PyTorch's
 * initialisation bound; dropout between layers; errors.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, manualSeed, nn, type Tensor, tensor } from "../mod.ts";
import { assertTensor, backendTest, matchesCpu, shapeOf } from "./harness.ts";
import { check, inp, values } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_layers.json" with { type: "json" };

type Nested = number | Nested[];
type RecurrentClass = typeof nn.RNN | typeof nn.LSTM | typeof nn.GRU;

const CLASSES: Record<string, RecurrentClass> = { RNN: nn.RNN, LSTM: nn.LSTM, GRU: nn.GRU };

function t(values: Nested, device: Device, requiresGrad = false): Tensor {
  return tensor(values as number[], { device, requiresGrad });
}

function tol(device: Device) {
  return device.backend === "cpu" ? { atol: 2e-6, rtol: 1e-5 } : { atol: 1e-4, rtol: 1e-4 };
}

/** Runs a recurrent module; gives output, h_n and (LSTM) c_n. */
function run(
  m: nn.RNN | nn.LSTM | nn.GRU,
  x: Tensor,
  h0: Tensor | null,
  c0: Tensor | null,
): [Tensor, Tensor, Tensor | null] {
  if (m instanceof nn.LSTM) {
    const [out, [h, c]] = m.forward(x, h0 && c0 ? [h0, c0] : null);
    return [out, h, c];
  }
  const [out, h] = m.forward(x, h0);
  return [out, h, null];
}

for (const c of fixtures.rnn) {
  backendTest(`${c.name}: PyTorch's state dict, outputs and gradients`, async (device) => {
    const Cls = CLASSES[c.module];
    const m = new Cls(c.input_size, c.hidden_size, { ...(c.options as nn.RNNOptions), device });
    assert.equal(m.toString(), c.repr);
    assert.deepEqual(Object.keys(m.stateDict()), c.keys, "state-dict keys in PyTorch's order");
    const sd: Record<string, Tensor> = {};
    for (const [k, v] of Object.entries(c.params)) sd[k] = t(v as Nested, device);
    m.loadStateDict(sd);
    const x = t(c.input, device, true);
    const h0 = "h0" in c ? t(c.h0 as Nested, device, true) : null;
    const c0 = "c0" in c ? t(c.c0 as Nested, device, true) : null;
    const [out, h, cn] = run(m, x, h0, c0);
    const close = tol(device);
    await assertTensor(out, c.output, { ...close, what: "output" });
    assert.deepEqual([...out.shape], shapeOf(c.output), "output shape");
    assert.deepEqual([...h.shape], shapeOf(c.h_n), "h_n shape");
    await assertTensor(h, c.h_n, { ...close, what: "h_n" });
    let loss = out.mul(t(c.g_output, device)).sum().add(h.mul(t(c.g_h, device)).sum());
    if (cn) {
      await assertTensor(cn, (c as { c_n: Nested }).c_n as number[], { ...close, what: "c_n" });
      loss = loss.add(cn.mul(t((c as { g_c: Nested }).g_c, device)).sum());
    }
    loss.backward();
    const grads = c.grads as Record<string, Nested>;
    await assertTensor(x.grad!, grads.input as number[], { ...close, what: "input grad" });
    if (h0) await assertTensor(h0.grad!, grads.h0 as number[], { ...close, what: "h0 grad" });
    if (c0) await assertTensor(c0.grad!, grads.c0 as number[], { ...close, what: "c0 grad" });
    for (const [name, p] of m.namedParameters()) {
      await assertTensor(p.grad!, grads[name] as number[], { ...close, what: `${name} grad` });
    }
  });
}

const SHAPES: [string, RecurrentClass, nn.RNNOptions][] = [
  ["RNN relu 2 layers", nn.RNN, { nonlinearity: "relu", numLayers: 2 }],
  ["LSTM bidirectional batch-first", nn.LSTM, { bidirectional: true, batchFirst: true }],
  ["GRU 2 layers bidirectional", nn.GRU, { numLayers: 2, bidirectional: true }],
  [
    "LSTM projSize 2 layers bidirectional",
    nn.LSTM,
    { numLayers: 2, bidirectional: true, projSize: 3 } as nn.LSTMOptions,
  ],
];

for (const [name, Cls, options] of SHAPES) {
  backendTest(`${name}: outputs and gradients equal cpu's`, async (device) => {
    const xs = values([4, 3, 5], 1501).map(Math.fround);
    await matchesCpu(device, (d) => {
      manualSeed(11);
      const m = new Cls(5, 6, { ...options, device: d });
      const x = tensor(xs, { shape: [4, 3, 5], device: d, requiresGrad: true });
      const [out, h, c] = run(m, x, null, null);
      (c ? out.sum().add(h.sum().mul(c.sum())) : out.mul(out).sum().add(h.sum())).backward();
      return [out, h, x.grad!, ...m.parameters().map((p) => p.grad!)];
    }, { atol: 2e-5, rtol: 1e-4 });
  });
}

Deno.test("recurrent weights start in U(-1/sqrt(hidden), 1/sqrt(hidden)), all of them", async () => {
  manualSeed(3);
  const m = new nn.LSTM(30, 16, { numLayers: 2, bidirectional: true });
  assert.equal(m.parameters().length, 16);
  const bound = 1 / Math.sqrt(16);
  for (const [name, p] of m.namedParameters()) {
    const v = await p.data();
    const max = Math.max(...v.map(Math.abs));
    assert.ok(max <= bound && max > 0.9 * bound, `${name}: max |w| ${max}, bound ${bound}`);
  }
  assert.deepEqual([...m.stateDict().weight_ih_l1.shape], [64, 32]);
  assert.deepEqual([...m.stateDict().weight_hh_l1_reverse.shape], [64, 16]);
});

Deno.test("dropout applies between layers in training only", async () => {
  manualSeed(5);
  const m = new nn.GRU(4, 8, { numLayers: 2, dropout: 0.5 });
  const x = tensor(values([6, 2, 4], 1502), { shape: [6, 2, 4] });
  const [a] = m.forward(x);
  const [b] = m.forward(x);
  assert.notDeepEqual([...await a.data()], [...await b.data()], "two training runs differ");
  m.eval();
  const [c] = m.forward(x);
  const [d] = m.forward(x);
  assert.deepEqual([...await c.data()], [...await d.data()], "evaluation is deterministic");
  const plain = new nn.GRU(4, 8, { numLayers: 2 });
  plain.loadStateDict(m.stateDict());
  await assertTensor(plain.forward(x)[0], [...await c.data()], { what: "eval = no dropout" });
});

Deno.test("a zero-length sequence gives empty outputs and the initial state", async () => {
  const m = new nn.LSTM(3, 2);
  const h0 = tensor(values([1, 4, 2], 1503), { shape: [1, 4, 2] });
  const c0 = tensor(values([1, 4, 2], 1504), { shape: [1, 4, 2] });
  const [out, [h, c]] = m.forward(tensor([], { shape: [0, 4, 3] }), [h0, c0]);
  assert.deepEqual([...out.shape], [0, 4, 2]);
  await assertTensor(h, [...await h0.data()]);
  await assertTensor(c, [...await c0.data()]);
});

backendTest("recurrent layers name bad inputs and states", (device) => {
  const m = new nn.LSTM(3, 4, { numLayers: 2, device });
  const x = tensor(values([5, 2, 3], 1505), { shape: [5, 2, 3], device });
  assert.throws(
    () => m.forward(tensor([1, 2, 3], { device })),
    /LSTM: expected input of 2 \(unbatched \[seq, feature\]\) or 3 dims \(\[seq, batch, feature\]\), got shape \[3\]/,
  );
  assert.throws(
    () => m.forward(tensor(values([5, 2, 4], 1), { shape: [5, 2, 4], device })),
    /has 4 features, expected inputSize 3/,
  );
  const bad = tensor(values([1, 2, 4], 2), { shape: [1, 2, 4], device });
  assert.throws(
    () => m.forward(x, [bad, bad]),
    /LSTM: h0 of shape \[1, 2, 4\] does not match \[2, 2, 4\]/,
  );
  assert.throws(() => m.forward(x, [bad] as unknown as [Tensor, Tensor]), /\[h0, c0\]/);
  if (device.backend === "cpu") {
    assert.throws(
      () => new nn.GRU(3, 4, { device }).forward(x.to("float64")),
      /GRU: input is float64 but the weights are float32/,
    );
  }
  assert.throws(() => new nn.RNN(3, 0), /hiddenSize must be a positive integer/);
  assert.throws(
    () => new nn.RNN(3, 4, { nonlinearity: "gelu" as "relu" }),
    /nonlinearity must be "tanh" or "relu"/,
  );
  assert.throws(() => new nn.GRU(3, 4, { dropout: 2 }), /dropout must be a number between 0 and 1/);
});

backendTest("LSTM with projSize: state shapes, and bad projSize or states named", (device) => {
  const m = new nn.LSTM(3, 4, { projSize: 2, numLayers: 2, device });
  assert.equal(m.outputSize, 2);
  const x = tensor(values([5, 2, 3], 1506), { shape: [5, 2, 3], device });
  const [out, [h, c]] = m.forward(x);
  assert.deepEqual([out.shape, h.shape, c.shape].map((s) => [...s]), [[5, 2, 2], [2, 2, 2], [
    2,
    2,
    4,
  ]]);
  const state = (features: number) =>
    tensor(values([2, 2, features], 3), { shape: [2, 2, features], device });
  assert.throws(
    () => m.forward(x, [state(4), state(4)]),
    /LSTM: h0 of shape \[2, 2, 4\] does not match \[2, 2, 2\] \(layers \* directions, batch, projSize\)/,
  );
  assert.throws(
    () => m.forward(x, [state(2), state(2)]),
    /LSTM: c0 of shape \[2, 2, 2\] does not match \[2, 2, 4\] \(layers \* directions, batch, hiddenSize\)/,
  );
  assert.throws(
    () => new nn.LSTM(3, 4, { projSize: 4 }),
    /LSTM: projSize 4 must be smaller than hiddenSize 4 \(weight_hr would be \[4, 4\]\)/,
  );
  assert.throws(
    () => new nn.LSTM(3, 4, { projSize: -1 }),
    /projSize must be a non-negative integer/,
  );
  assert.throws(
    () => new nn.LSTM(3, 4, { projSize: 1.5 }),
    /projSize must be a non-negative integer/,
  );
  assert.throws(
    () => new nn.GRU(3, 4, { projSize: 2 } as nn.RNNBaseOptions),
    /GRU: projSize is only supported by LSTM, got 2/,
  );
  assert.throws(
    () => new nn.RNN(3, 4, { projSize: 2 } as nn.RNNOptions),
    /RNN: projSize is only supported by LSTM/,
  );
});

// ---- float64 gradient checks (cpu): input, states and every weight ----

function withWeights(
  Cls: RecurrentClass,
  options: nn.RNNOptions,
  fn: (m: nn.RNN | nn.LSTM | nn.GRU, x: Tensor, h0: Tensor, rest: Tensor[]) => Tensor,
): (...xs: Tensor[]) => Tensor {
  return (x, h0, ...weights) => {
    const m = new Cls(2, 3, { ...options, dtype: "float64" });
    const fields = m as unknown as Record<string, Tensor>;
    const names = Object.keys(m.stateDict());
    // The checked tensors become the module's weights, as PyTorch's `del m.w; m.w = t`.
    names.forEach((name, i) => {
      delete fields[name];
      fields[name] = weights[i];
    });
    return fn(m, x, h0, weights.slice(names.length));
  };
}

function weightInputs(Cls: RecurrentClass, options: nn.RNNOptions, seed: number) {
  const shapes = Object.values(new Cls(2, 3, options).stateDict()).map((w) => [...w.shape]);
  return shapes.map((shape, i) => inp(shape, seed + i, -0.8, 0.8));
}

for (
  const [name, Cls, options] of [
    ["RNN tanh bidirectional", nn.RNN, { bidirectional: true }],
    ["RNN relu 2 layers", nn.RNN, { nonlinearity: "relu", numLayers: 2 }],
    ["GRU 2 layers", nn.GRU, { numLayers: 2 }],
    ["GRU bidirectional batch-first", nn.GRU, { bidirectional: true, batchFirst: true }],
  ] as [string, RecurrentClass, nn.RNNOptions][]
) {
  const layers = (options.numLayers ?? 1) * (options.bidirectional ? 2 : 1);
  check(
    name,
    withWeights(Cls, options, (m, x, h0) => {
      const [out, h] = run(m, x, h0, null);
      return out.sum().add(h.mul(h).sum());
    }),
    [
      inp([3, 2, 2], 1510),
      inp([layers, options.batchFirst ? 3 : 2, 3], 1511),
      ...weightInputs(Cls, options, 1520),
    ],
  );
}
check(
  "LSTM 2 layers bidirectional with [h0, c0]",
  withWeights(nn.LSTM, { numLayers: 2, bidirectional: true }, (m, x, h0, [c0]) => {
    const [out, h, c] = run(m, x, h0, c0);
    return out.sum().add(h.mul(c!).sum());
  }),
  [
    inp([3, 2, 2], 1530),
    inp([4, 2, 3], 1531),
    ...weightInputs(nn.LSTM, { numLayers: 2, bidirectional: true }, 1540),
    inp([4, 2, 3], 1532),
  ],
);
check(
  "LSTM unbatched without bias",
  withWeights(nn.LSTM, { bias: false }, (m, x) => run(m, x, null, null)[0]),
  [inp([4, 2], 1550), inp([1, 3], 1551), ...weightInputs(nn.LSTM, { bias: false }, 1560)],
);
check(
  "LSTM projSize 2 layers bidirectional with [h0, c0]",
  withWeights(
    nn.LSTM,
    { numLayers: 2, bidirectional: true, projSize: 2 } as nn.RNNOptions,
    (m, x, h0, [c0]) => {
      const [out, h, c] = run(m, x, h0, c0);
      return out.sum().add(h.sum()).add(c!.mul(c!).sum());
    },
  ),
  [
    inp([3, 2, 2], 1570),
    inp([4, 2, 2], 1571),
    ...weightInputs(
      nn.LSTM,
      { numLayers: 2, bidirectional: true, projSize: 2 } as nn.RNNOptions,
      1580,
    ),
    inp([4, 2, 3], 1572),
  ],
);
