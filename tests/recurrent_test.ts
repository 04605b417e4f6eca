/**
 * Recurrent cells (RNNCell, LSTMCell, GRUCell) and packed sequences
 * (PackedSequence, packPaddedSequence, padPackedSequence, packSequence,
 * unpadSequence, unpackSequence; RNN/LSTM/GRU on a PackedSequence) against
 * PyTorch 1.13 (tests/fixtures/torch_recurrent.json: outputs, final states
 * and gradients of the input, the states and every weight; unsorted lengths
 * with ties, bidirectional and 2-layer LSTM, GRU and RNN, batch-first) on
 * every backend; reprs and state-dict keys; cells against the layers;
 * errors naming the bad value; float64 gradient checks on cpu; the packing
 * helpers free their intermediates without tidy.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, manualSeed, nn, noGrad, type Tensor, tensor, tidy } from "../mod.ts";
import {
  assertFixture,
  assertTensor,
  backendTest,
  fixtureTensor,
  type FixtureValues,
} from "./harness.ts";
import { check, inp, values } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_recurrent.json" with { type: "json" };

const U = nn.utils;

function tol(device: Device) {
  return device.backend === "cpu" ? { atol: 2e-6, rtol: 1e-5 } : { atol: 1e-4, rtol: 1e-4 };
}

function expectFixture(
  t: Tensor | null,
  expected: FixtureValues,
  device: Device,
  what: string,
): Promise<void> {
  return assertFixture(t, expected, { ...tol(device), what });
}

/** Loads PyTorch's state dict into `m` on `device`. */
function load(m: nn.Module, params: object, device: Device): void {
  const sd: Record<string, Tensor> = {};
  for (const [k, v] of Object.entries(params as Record<string, FixtureValues>)) {
    sd[k] = fixtureTensor(v, device);
  }
  m.loadStateDict(sd);
}

// ---- cells ----

type Cell = nn.RNNCell | nn.LSTMCell | nn.GRUCell;

function makeCell(module: string, i: number, h: number, options: object, device?: Device): Cell {
  const o = { ...options, device };
  switch (module) {
    case "RNNCell":
      return new nn.RNNCell(i, h, o);
    case "LSTMCell":
      return new nn.LSTMCell(i, h, o);
    case "GRUCell":
      return new nn.GRUCell(i, h, o);
  }
  throw new Error(`unknown cell ${module}`);
}

/** `[h', c' or null]` of one cell step. */
function stepCell(
  m: Cell,
  x: Tensor,
  hx: Tensor | null,
  cx: Tensor | null,
): [Tensor, Tensor | null] {
  if (m instanceof nn.LSTMCell) return m.forward(x, hx && cx ? [hx, cx] : null);
  return [m.forward(x, hx), null];
}

for (const c of fixtures.cells) {
  backendTest(`${c.name}: PyTorch's repr, keys, outputs and gradients`, async (device) => {
    const m = makeCell(c.module, c.input_size, c.hidden_size, c.options, device);
    assert.equal(m.toString(), c.repr);
    assert.deepEqual(Object.keys(m.stateDict()), c.keys);
    load(m, c.params, device);
    const x = fixtureTensor(c.input, device, { requiresGrad: true });
    const hx = "hx" in c
      ? fixtureTensor(c.hx as FixtureValues, device, { requiresGrad: true })
      : null;
    const cx = "cx" in c
      ? fixtureTensor(c.cx as FixtureValues, device, { requiresGrad: true })
      : null;
    const [h, cn] = stepCell(m, x, hx, cx);
    await expectFixture(h, c.h, device, "h");
    let loss = h.mul(fixtureTensor(c.g_h, device)).sum();
    if ("c" in c) {
      assert.ok(cn);
      await expectFixture(cn, c.c as FixtureValues, device, "c");
      loss = loss.add(cn.mul(fixtureTensor(c.g_c as FixtureValues, device)).sum());
    }
    loss.backward();
    const grads = c.grads as unknown as Record<string, FixtureValues>;
    await expectFixture(x.grad!, grads.input, device, "input grad");
    if (hx) await expectFixture(hx.grad!, grads.hx, device, "hx grad");
    if (cx) await expectFixture(cx.grad!, grads.cx, device, "cx grad");
    for (const [name, p] of m.namedParameters()) {
      await expectFixture(p.grad!, grads[name], device, `${name} grad`);
    }
  });
}

backendTest(
  "cells stepped over a sequence equal the one-layer RNN, LSTM and GRU",
  async (device) => {
    const xs = values([4, 2, 3], 4401).map(Math.fround);
    const pairs: [nn.RNN | nn.LSTM | nn.GRU, Cell][] = [
      [
        new nn.RNN(3, 5, { nonlinearity: "relu", device }),
        new nn.RNNCell(3, 5, { nonlinearity: "relu", device }),
      ],
      [new nn.LSTM(3, 5, { device }), new nn.LSTMCell(3, 5, { device })],
      [new nn.GRU(3, 5, { bias: false, device }), new nn.GRUCell(3, 5, { bias: false, device })],
    ];
    for (const [layer, cell] of pairs) {
      const sd = layer.stateDict();
      cell.loadStateDict(
        Object.fromEntries(Object.entries(sd).map(([k, v]) => [k.replace("_l0", ""), v])),
      );
      const x = tensor(xs, { shape: [4, 2, 3], device });
      const [out] = layer.forward(x);
      let h: Tensor | null = null;
      let c: Tensor | null = null;
      const steps: number[] = [];
      for (const xt of x.unbind(0)) {
        [h, c] = stepCell(cell, xt, h, c);
        steps.push(...await h.data());
      }
      await assertTensor(out, steps, { ...tol(device), what: `${cell.constructor.name} steps` });
    }
  },
);

Deno.test("cells start in U(-1/sqrt(hidden), 1/sqrt(hidden)) and take hiddenSize 0", async () => {
  manualSeed(7);
  const m = new nn.GRUCell(40, 16);
  const bound = 1 / Math.sqrt(16);
  assert.deepEqual(Object.values(m.stateDict()).map((p) => [...p.shape]), [[48, 40], [48, 16], [
    48,
  ], [48]]);
  for (const [name, p] of m.namedParameters()) {
    const max = Math.max(...(await p.data()).map(Math.abs));
    assert.ok(max <= bound && max > 0.9 * bound, `${name}: max |w| ${max}, bound ${bound}`);
  }
  const empty = new nn.LSTMCell(3, 0);
  const [h, c] = empty.forward(tensor(values([2, 3], 1), { shape: [2, 3] }));
  assert.deepEqual([[...h.shape], [...c.shape]], [[2, 0], [2, 0]]);
  assert.deepEqual(Object.keys(new nn.RNNCell(2, 3, { bias: false }).stateDict()), [
    "weight_ih",
    "weight_hh",
  ]);
});

backendTest("cells name bad inputs and states", (device) => {
  const m = new nn.LSTMCell(3, 4, { device });
  const x = tensor(values([2, 3], 4402), { shape: [2, 3], device });
  assert.throws(
    () => m.forward(tensor(values([2, 2, 3], 1), { shape: [2, 2, 3], device })),
    /LSTMCell: expected input of 1 \(unbatched \[inputSize\]\) or 2 dims \(\[batch, inputSize\]\), got shape \[2, 2, 3\]/,
  );
  assert.throws(
    () =>
      new nn.RNNCell(3, 4, { device }).forward(
        tensor(values([2, 5], 1), { shape: [2, 5], device }),
      ),
    /RNNCell: input of shape \[2, 5\] has 5 features, expected inputSize 3/,
  );
  const state = (shape: number[]) => tensor(values(shape, 2), { shape, device });
  assert.throws(
    () => m.forward(x, [state([3, 4]), state([2, 4])]),
    /LSTMCell: hx of shape \[3, 4\] does not match \[2, 4\] \(batch, hiddenSize\)/,
  );
  assert.throws(
    () => m.forward(x, [state([2, 4]), state([2, 5])]),
    /LSTMCell: cx of shape \[2, 5\] does not match \[2, 4\]/,
  );
  assert.throws(
    () => new nn.GRUCell(3, 4, { device }).forward(tensor([1, 2, 3], { device }), state([1, 4])),
    /GRUCell: hx of shape \[1, 4\] does not match \[4\] \(unbatched input: hiddenSize\) for input of shape \[3\]/,
  );
  assert.throws(() => m.forward(x, [state([2, 4])] as unknown as [Tensor, Tensor]), /\[h, c\]/);
  assert.throws(
    () => new nn.RNNCell(3, 4, { nonlinearity: "gelu" as "relu" }),
    /RNNCell: nonlinearity must be "tanh" or "relu", got "gelu"/,
  );
  assert.throws(
    () => new nn.GRUCell(3, -1),
    /GRUCell: hiddenSize must be a non-negative integer, got -1/,
  );
  assert.throws(
    () => m.forward(tensor([1, 2, 3], { dtype: "int32", device })),
    /LSTMCell: expected a floating-point input, got int32/,
  );
  if (device.backend === "cpu") {
    assert.throws(
      () => m.forward(x.to("float64")),
      /LSTMCell: input is float64 but the weights are float32/,
    );
  }
});

// ---- packing ----

for (const c of fixtures.pack.filter((p) => p.name !== "pack_sequence")) {
  backendTest(
    `packPaddedSequence and padPackedSequence (${c.name}): PyTorch's layout, padding and gradients`,
    async (device) => {
      const x = fixtureTensor(c.input as FixtureValues, device, { requiresGrad: true });
      const p = U.packPaddedSequence(x, c.lengths as number[], {
        batchFirst: c.batch_first as boolean,
        enforceSorted: c.enforce_sorted as boolean,
      });
      assert.deepEqual(p.batchSizes, c.batch_sizes);
      assert.deepEqual(p.sortedIndices, c.sorted_indices);
      assert.deepEqual(p.unsortedIndices, c.unsorted_indices);
      await expectFixture(p.data, c.data, device, "data");
      const [padded, lengths] = U.padPackedSequence(p, {
        batchFirst: c.batch_first as boolean,
        paddingValue: c.padding_value as number,
        totalLength: (c.total_length ?? undefined) as number | undefined,
      });
      assert.deepEqual(lengths, c.padded_lengths);
      await expectFixture(padded, c.padded as FixtureValues, device, "padded");
      p.data.mul(fixtureTensor(c.g_data as FixtureValues, device)).sum()
        .add(padded.mul(fixtureTensor(c.g_padded as FixtureValues, device)).sum())
        .backward();
      await expectFixture(
        x.grad!,
        (c.grads as Record<string, FixtureValues>).input,
        device,
        "input grad",
      );
    },
  );
}

backendTest(
  "packSequence, unpackSequence and unpadSequence: PyTorch's layout and a round trip",
  async (device) => {
    const c = fixtures.pack.find((p) => p.name === "pack_sequence")!;
    const seqs = (c.sequences as FixtureValues[]).map((s) => fixtureTensor(s, device));
    const p = U.packSequence(seqs, { enforceSorted: false });
    assert.deepEqual(p.batchSizes, c.batch_sizes);
    assert.deepEqual(p.sortedIndices, c.sorted_indices);
    assert.deepEqual(p.unsortedIndices, c.unsorted_indices);
    await expectFixture(p.data, c.data, device, "data");
    assert.equal(
      p.toString(),
      "PackedSequence(data=Tensor[7, 3], batchSizes=[3, 2, 1, 1], sortedIndices=[1, 0, 2], unsortedIndices=[1, 0, 2])",
    );
    const back = U.unpackSequence(p);
    assert.equal(back.length, 3);
    for (const [i, s] of back.entries()) {
      await expectFixture(s, (c.sequences as FixtureValues[])[i], device, `sequence ${i}`);
    }
    const padded = U.padSequence(seqs, { batchFirst: true });
    const parts = U.unpadSequence(padded, [2, 4, 1], { batchFirst: true });
    assert.deepEqual(parts.map((s) => [...s.shape]), [[2, 3], [4, 3], [1, 3]]);
    await expectFixture(parts[1], (c.sequences as FixtureValues[])[1], device, "unpadded");
    // Sorted input packs without a permutation.
    const sorted = U.packSequence([seqs[1], seqs[0], seqs[2]]);
    assert.equal(sorted.sortedIndices, null);
    assert.equal(sorted.unsortedIndices, null);
    assert.equal(nn.utils.rnn.PackedSequence, nn.utils.PackedSequence);
    if (device.backend === "cpu") {
      const wide = p.to("float64");
      assert.equal(wide.data.dtype, "float64");
      assert.deepEqual([wide.batchSizes, wide.sortedIndices], [p.batchSizes, p.sortedIndices]);
    }
  },
);

// ---- recurrent layers on packed sequences ----

type Recurrent = nn.RNN | nn.LSTM | nn.GRU;

function makeLayer(
  module: string,
  i: number,
  h: number,
  options: object,
  device?: Device,
): Recurrent {
  const o = { ...options, device };
  switch (module) {
    case "RNN":
      return new nn.RNN(i, h, o);
    case "LSTM":
      return new nn.LSTM(i, h, o);
    case "GRU":
      return new nn.GRU(i, h, o);
  }
  throw new Error(`unknown layer ${module}`);
}

/** Runs `m` on a packed batch: output, h_n and (LSTM) c_n. */
function runPacked(
  m: Recurrent,
  p: nn.utils.PackedSequence,
  h0: Tensor | null,
  c0: Tensor | null,
): [nn.utils.PackedSequence, Tensor, Tensor | null] {
  if (m instanceof nn.LSTM) {
    const [out, [h, c]] = m.forward(p, h0 && c0 ? [h0, c0] : null);
    return [out, h, c];
  }
  const [out, h] = m.forward(p, h0);
  return [out, h, null];
}

for (const c of fixtures.packed_rnn) {
  backendTest(
    `${c.name} on a PackedSequence: PyTorch's outputs, final states and gradients`,
    async (device) => {
      const m = makeLayer(c.module, c.input_size, c.hidden_size, c.options, device);
      assert.equal(m.toString(), c.repr);
      load(m, c.params, device);
      const x = fixtureTensor(c.input, device, { requiresGrad: true });
      const batchFirst = (c.options as nn.RNNOptions).batchFirst ?? false;
      const p = U.packPaddedSequence(x, c.lengths, { batchFirst, enforceSorted: c.enforce_sorted });
      const h0 = "h0" in c
        ? fixtureTensor(c.h0 as FixtureValues, device, { requiresGrad: true })
        : null;
      const c0 = "c0" in c
        ? fixtureTensor(c.c0 as FixtureValues, device, { requiresGrad: true })
        : null;
      const [out, h, cn] = runPacked(m, p, h0, c0);
      assert.ok(out instanceof nn.utils.PackedSequence);
      assert.deepEqual(out.batchSizes, c.batch_sizes);
      assert.deepEqual(out.sortedIndices, c.sorted_indices);
      await expectFixture(out.data, c.data, device, "output data");
      await expectFixture(
        U.padPackedSequence(out, { batchFirst })[0],
        c.padded,
        device,
        "padded output",
      );
      await expectFixture(h, c.h_n, device, "h_n");
      let loss = out.data.mul(fixtureTensor(c.g_data, device)).sum()
        .add(h.mul(fixtureTensor(c.g_h, device)).sum());
      if ("c_n" in c) {
        assert.ok(cn);
        await expectFixture(cn, c.c_n as FixtureValues, device, "c_n");
        loss = loss.add(cn.mul(fixtureTensor(c.g_c as FixtureValues, device)).sum());
      }
      loss.backward();
      const grads = c.grads as unknown as Record<string, FixtureValues>;
      await expectFixture(x.grad!, grads.input, device, "input grad");
      if (h0) await expectFixture(h0.grad!, grads.h0, device, "h0 grad");
      if (c0) await expectFixture(c0.grad!, grads.c0, device, "c0 grad");
      for (const [name, prm] of m.namedParameters()) {
        await expectFixture(prm.grad!, grads[name], device, `${name} grad`);
      }
    },
  );
}

Deno.test("a packed batch equals each sequence run alone (bidirectional 2-layer LSTM)", async () => {
  manualSeed(13);
  const m = new nn.LSTM(3, 4, { numLayers: 2, bidirectional: true });
  const lengths = [2, 5, 3, 5];
  const seqs = lengths.map((n, i) => tensor(values([n, 3], 4410 + i), { shape: [n, 3] }));
  const [out, [h, c]] = m.forward(U.packSequence(seqs, { enforceSorted: false }));
  const [padded] = U.padPackedSequence(out, { batchFirst: true });
  for (const [i, s] of seqs.entries()) {
    const [alone, [hAlone, cAlone]] = m.forward(s);
    const n = lengths[i];
    await assertTensor(padded.select(0, i).narrow(0, 0, n), [...await alone.data()], {
      what: `sequence ${i} output`,
    });
    await assertTensor(h.select(1, i), [...await hAlone.data()], { what: `sequence ${i} h_n` });
    await assertTensor(c.select(1, i), [...await cAlone.data()], { what: `sequence ${i} c_n` });
  }
});

backendTest("packing and packed layers name bad lengths, sizes and states", (device) => {
  const x = tensor(values([5, 4, 2], 4420), { shape: [5, 4, 2], device });
  assert.throws(
    () => U.packPaddedSequence(x, [3, 5, 3, 1]),
    /packPaddedSequence: lengths \[3, 5, 3, 1\] must be sorted in decreasing order when enforceSorted is true \(length 5 of sequence 1 follows 3\); pass \{ enforceSorted: false \}/,
  );
  assert.throws(
    () => U.packPaddedSequence(x, [5, 3, 0, 1], { enforceSorted: false }),
    /packPaddedSequence: length 0 of sequence 2 must be an integer from 1 to 5 \(the time dim of input of shape \[5, 4, 2\]\); lengths \[5, 3, 0, 1\]/,
  );
  assert.throws(
    () => U.packPaddedSequence(x, [6, 3, 3, 1]),
    /length 6 of sequence 0 must be an integer from 1 to 5/,
  );
  assert.throws(
    () => U.packPaddedSequence(x, [4, 3, 2.5, 1]),
    /length 2.5 of sequence 2 must be an integer/,
  );
  assert.throws(
    () => U.packPaddedSequence(x, [5, 3, 3]),
    /packPaddedSequence: expected one length per sequence, got 3 lengths \[5, 3, 3\] for batch size 4 \(input of shape \[5, 4, 2\]\)/,
  );
  assert.throws(
    () => U.packPaddedSequence(x, [5, 2, 2, 2, 1], { batchFirst: true }),
    /length 5 of sequence 0 must be an integer from 1 to 4 \(the time dim of input of shape \[5, 4, 2\]\)/,
  );
  assert.throws(
    () => U.packPaddedSequence(tensor([1, 2, 3], { device }), [3]),
    /packPaddedSequence: expected input of at least 2 dims \(\[seq, batch, \*\]\), got shape \[3\]/,
  );
  assert.throws(
    () => U.packPaddedSequence(tensor([], { shape: [0, 0, 2], device }), []),
    /cannot pack empty tensors \(input of shape \[0, 0, 2\]\)/,
  );
  assert.throws(
    () => U.packPaddedSequence(x, tensor([5, 3, 3, 1]) as unknown as number[]),
    /lengths must be an array of numbers .* got a Tensor/,
  );
  assert.throws(
    () =>
      U.packSequence([
        tensor(values([2, 3], 1), { shape: [2, 3], device }),
        tensor(values([4, 3], 2), { shape: [4, 3], device }),
      ]),
    /packSequence: lengths \[2, 4\] must be sorted in decreasing order/,
  );
  const p = U.packPaddedSequence(x, [5, 3, 3, 1]);
  assert.throws(
    () => U.padPackedSequence(p, { totalLength: 4 }),
    /padPackedSequence: expected totalLength to be an integer at least the length of the longest sequence, got totalLength=4 and max sequence length 5/,
  );
  assert.throws(
    () => new U.PackedSequence(p.data, [4, 3, 4, 1]),
    /batchSizes must be a non-empty, non-increasing list of positive integers, got \[4, 3, 4, 1\]/,
  );
  assert.throws(
    () => new U.PackedSequence(p.data, [4, 3, 3, 1]),
    /PackedSequence: data of shape \[12, 2\] must have sum\(batchSizes\) = 11 rows/,
  );
  assert.throws(
    () => new U.PackedSequence(p.data, [4, 3, 3, 1, 1], [0, 1, 1, 3]),
    /sortedIndices must be a permutation of 0 to 3 \(batchSizes\[0\] is 4\), got \[0, 1, 1, 3\]/,
  );
  assert.throws(
    () => new U.PackedSequence(p.data, [4, 3, 3, 1, 1], [1, 0, 2, 3], [0, 1, 2, 3]),
    /unsortedIndices \[0, 1, 2, 3\] must be the inverse of sortedIndices \[1, 0, 2, 3\]/,
  );
  assert.throws(
    () => U.unpadSequence(x, [5, 6, 1, 1]),
    /unpadSequence: length 6 of sequence 1 must be an integer from 0 to 5/,
  );
  const m = new nn.GRU(2, 3, { numLayers: 2, device });
  const h0 = tensor(values([2, 3, 3], 3), { shape: [2, 3, 3], device });
  assert.throws(
    () => m.forward(p, h0),
    /GRU: h0 of shape \[2, 3, 3\] does not match \[2, 4, 3\] \(layers \* directions, batch, hiddenSize\)/,
  );
  assert.throws(
    () => new nn.GRU(3, 3, { device }).forward(p),
    /GRU: packed data of shape \[12, 2\] has 2 features, expected inputSize 3/,
  );
});

// ---- float64 gradient checks (cpu) ----

function cellWith(module: string, options: object) {
  const lstm = module === "LSTMCell";
  return (x: Tensor, hx: Tensor, ...rest: Tensor[]): Tensor => {
    const cx = lstm ? rest[0] : null;
    const weights = rest.slice(lstm ? 1 : 0);
    const m = makeCell(module, 3, 4, { ...options, dtype: "float64" });
    const fields = m as unknown as Record<string, Tensor>;
    Object.keys(m.stateDict()).forEach((name, i) => {
      delete fields[name];
      fields[name] = weights[i];
    });
    const [h, c] = stepCell(m, x, hx, cx);
    return c ? h.mul(c) : h.mul(h);
  };
}

for (
  const [module, options] of [
    ["RNNCell", {}],
    ["RNNCell", { nonlinearity: "relu" }],
    ["LSTMCell", {}],
    ["GRUCell", {}],
    ["GRUCell", { bias: false }],
  ] as [string, object][]
) {
  const shapes = Object.values(makeCell(module, 3, 4, options).stateDict()).map((
    w,
  ) => [...w.shape]);
  check(
    `${module} ${JSON.stringify(options)}: input, hx, cx and weights`,
    cellWith(module, options),
    [
      inp([2, 3], 4430),
      inp([2, 4], 4431),
      ...(module === "LSTMCell" ? [inp([2, 4], 4432)] : []),
      ...shapes.map((s, i) => inp(s, 4433 + i, -0.8, 0.8)),
    ],
  );
}

check(
  "packPaddedSequence then padPackedSequence (unsorted, batch first, padding 2)",
  (x) => {
    const p = U.packPaddedSequence(x, [2, 4, 1], { batchFirst: true, enforceSorted: false });
    const [padded] = U.padPackedSequence(p, { paddingValue: 2, totalLength: 5 });
    return p.data.sum().add(padded.mul(padded).sum());
  },
  [inp([3, 4, 2], 4440)],
);

function packedWith(module: string, options: object, lengths: number[]) {
  const lstm = module === "LSTM";
  return (x: Tensor, h0: Tensor, ...rest: Tensor[]): Tensor => {
    const c0 = lstm ? rest[0] : null;
    const weights = rest.slice(lstm ? 1 : 0);
    const m = makeLayer(module, 2, 3, { ...options, dtype: "float64" });
    const fields = m as unknown as Record<string, Tensor>;
    Object.keys(m.stateDict()).forEach((name, i) => {
      delete fields[name];
      fields[name] = weights[i];
    });
    const p = U.packPaddedSequence(x, lengths, { enforceSorted: false });
    const [out, h, c] = runPacked(m, p, h0, c0);
    const loss = out.data.sum().add(h.mul(h).sum());
    return c ? loss.add(c.mul(h).sum()) : loss;
  };
}

for (
  const [module, options] of [
    ["LSTM", { numLayers: 2, bidirectional: true }],
    ["GRU", { bidirectional: true }],
    ["RNN", { numLayers: 2 }],
  ] as [string, nn.RNNOptions][]
) {
  const layers = (options.numLayers ?? 1) * (options.bidirectional ? 2 : 1);
  const shapes = Object.values(makeLayer(module, 2, 3, options).stateDict()).map((
    w,
  ) => [...w.shape]);
  check(
    `${module} ${
      JSON.stringify(options)
    } on a PackedSequence (lengths [2, 4, 1, 2]): input, h0, c0 and weights`,
    packedWith(module, options, [2, 4, 1, 2]),
    [
      inp([4, 4, 2], 4450),
      inp([layers, 4, 3], 4451),
      ...(module === "LSTM" ? [inp([layers, 4, 3], 4452)] : []),
      ...shapes.map((s, i) => inp(s, 4460 + i, -0.8, 0.8)),
    ],
  );
}

// ---- memory ----

backendTest(
  "packSequence, padSequence, unpadSequence and unpackSequence free their intermediates",
  async (device) => {
    const seqs = [4, 2, 3].map((n, i) =>
      tensor(values([n, 2], 4470 + i), { shape: [n, 2], device, requiresGrad: true })
    );
    // Each returns only what the caller holds; the padded batch, the padding
    // and the row copies inside are freed (or handed to the graph and freed
    // by backward), with no tidy and no garbage collection.
    const uses: [string, () => Tensor[]][] = [
      ["packSequence", () => [U.packSequence(seqs, { enforceSorted: false }).data]],
      ["padSequence", () => [U.padSequence(seqs)]],
      ["unpadSequence", () => U.unpadSequence(seqs[0].reshape([2, 2, 2]), [2, 1])],
      ["unpackSequence", () => {
        const packed = U.packSequence(seqs, { enforceSorted: false });
        return [packed.data, ...U.unpackSequence(packed)];
      }],
    ];
    for (const [what, use] of uses) {
      // Once first, so that the gradients exist and later accumulate in place.
      for (const [i, withGrad] of [true, true, false].entries()) {
        const base = device.memory().bytesInUse;
        const held = withGrad ? use() : noGrad(use);
        if (withGrad) {
          const loss = tidy(() => held.map((t) => t.sum()).reduce((a, b) => a.add(b)));
          loss.backward();
          loss.dispose();
        }
        for (const t of held) t.dispose();
        if (i > 0) assert.equal(device.memory().bytesInUse, base, `${what}, grad ${withGrad}`);
      }
    }
    await seqs[0].grad!.data();
  },
);
