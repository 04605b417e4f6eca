/**
 * ParameterList, ParameterDict, Bilinear (and functional bilinear),
 * EmbeddingBag (and functional embeddingBag), CosineSimilarity,
 * PairwiseDistance (and functional pairwiseDistance), and nn.utils'
 * parametersToVector, vectorToParameters, weightNorm and removeWeightNorm
 * against PyTorch 1.13 (tests/fixtures/torch_nn_extra.json: reprs,
 * state-dict keys, outputs, gradients, SGD steps through the containers and
 * through a weight-normed layer, empty bags, padding, an infinite row) on
 * every backend; errors naming the bad value or shape; float64 gradient
 * checks on cpu.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, manualSeed, nn, noGrad, optim, type Tensor, tensor, zeros } from "../mod.ts";
import {
  assertTensor,
  backendTest,
  decodeFixture,
  fixtureTensor,
  type FixtureValues,
  shapeOf,
} from "./harness.ts";
import { check, CPU0, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_nn_extra.json" with { type: "json" };

const F = nn.functional;

function tol(device: Device) {
  return device.backend === "cpu" ? { atol: 1e-5, rtol: 1e-5 } : { atol: 1e-4, rtol: 1e-4 };
}

type Values = Record<string, FixtureValues>;

function stateOf(values: Values, device: Device): Record<string, Tensor> {
  return Object.fromEntries(
    Object.entries(values).map(([k, v]) => [k, fixtureTensor(v, device)]),
  );
}

async function assertState(
  m: nn.Module,
  expected: Values,
  device: Device,
  what: string,
): Promise<void> {
  const sd = m.stateDict();
  assert.deepEqual(Object.keys(sd), Object.keys(expected), `${what}: keys`);
  for (const [key, value] of Object.entries(expected)) {
    await assertTensor(sd[key], decodeFixture(value), {
      ...tol(device),
      what: `${what}: ${key}`,
      shape: shapeOf(value),
    });
  }
}

function ints(values: unknown, device: Device): Tensor {
  const v = values as FixtureValues;
  return tensor(decodeFixture(v), { shape: shapeOf(v), dtype: "int32", device });
}

// ------------------------------------------------------- parameter containers

Deno.test("ParameterList and ParameterDict: reprs, state-dict keys and names as PyTorch's", () => {
  const c = fixtures.containers;
  const f64 = (shape: number[]) => zeros(shape, { dtype: "float64" });
  const pl = new nn.ParameterList([
    new nn.Parameter(zeros([3, 4])),
    zeros([3]),
    new nn.Parameter(f64([2])),
  ]);
  assert.equal(pl.toString(), c.reprs.list);
  assert.deepEqual(Object.keys(pl.stateDict()), c.keys.list);
  assert.ok(pl.at(1) instanceof nn.Parameter, "a plain tensor becomes a Parameter");
  assert.ok(pl.at(1).requiresGrad);
  assert.equal(new nn.ParameterList([zeros([2])]).toString(), c.reprs.list_one);
  assert.equal(new nn.ParameterList().toString(), c.reprs.list_empty);

  // A plain object is added in sorted key order, pairs in theirs.
  const sorted = new nn.ParameterDict({ beta: zeros([2]), alpha: zeros([3, 1]) });
  assert.equal(sorted.toString(), c.reprs.dict_sorted);
  assert.deepEqual(Object.keys(sorted.stateDict()), c.keys.dict_sorted);
  const pairs = new nn.ParameterDict([["zeta", zeros([1])], ["eta", f64([2, 2])]]);
  assert.equal(pairs.toString(), c.reprs.dict_pairs);
  assert.deepEqual(Object.keys(pairs.stateDict()), c.keys.dict_pairs);
  assert.equal(new nn.ParameterDict().toString(), c.reprs.dict_empty);

  class Holder extends nn.Module {
    lin = new nn.Linear(2, 2);
    pl = new nn.ParameterList([zeros([2])]);
    pd = new nn.ParameterDict({ x: zeros([1]) });
  }
  const holder = new Holder();
  assert.equal(holder.toString(), c.reprs.holder);
  assert.deepEqual(Object.keys(holder.stateDict()), c.keys.holder);
  assert.deepEqual(holder.namedParameters().map(([k]) => k), c.keys.holder_named_parameters);
});

Deno.test("ParameterList: at, set, append, extend, length, iteration", () => {
  const [a, b, c] = [zeros([1]), zeros([2]), zeros([3])].map((t) => new nn.Parameter(t));
  const pl = new nn.ParameterList([a]).append(b);
  assert.equal(pl.length, 2);
  assert.equal(pl.at(-1), b);
  pl.extend([c]);
  assert.deepEqual([...pl], [a, b, c]);
  pl.set(0, c);
  assert.equal(pl.at(0), c);
  assert.deepEqual(pl.parameters(), [c, b], "a parameter held twice is listed once");
  assert.deepEqual(Object.keys(pl.stateDict()), ["0", "1", "2"]);
  assert.throws(() => pl.at(3), /index 3 is out of range for 3 parameters/);
  assert.throws(() => pl.set(-4, a), /index -4 is out of range for 3 parameters/);
  assert.throws(() => pl.append(5 as unknown as Tensor), /value 3 must be a Tensor.*got number/);
  assert.throws(() => pl.extend(null as unknown as Tensor[]), /expected an iterable.*got null/);
  // A field holding a parameter takes only Parameters afterwards, as every module's.
  assert.throws(
    () => ((pl as unknown as Record<string, unknown>)["0"] = zeros([1])),
    /cannot assign a Tensor of shape \[1\] as parameter "0"/,
  );
});

Deno.test("ParameterDict: get, set, has, pop, delete, clear, update, keys, values, entries", () => {
  const [a, b, c] = [zeros([1]), zeros([2]), zeros([3])].map((t) => new nn.Parameter(t));
  const pd = new nn.ParameterDict([["b", b], ["a", a]]);
  assert.deepEqual(pd.keys(), ["b", "a"]);
  assert.deepEqual(pd.values(), [b, a]);
  assert.deepEqual(pd.entries(), [["b", b], ["a", a]]);
  assert.deepEqual([...pd], [["b", b], ["a", a]]);
  assert.equal(pd.length, 2);
  assert.ok(pd.has("a") && !pd.has("z"));
  assert.equal(pd.pop("b"), b);
  assert.deepEqual(pd.keys(), ["a"]);
  pd.set("b", c); // deleted then added again: last, as in PyTorch's OrderedDict
  const [d, e] = [zeros([4]), zeros([5])].map((t) => new nn.Parameter(t));
  pd.update({ "10": d, "2": e });
  assert.deepEqual(pd.keys(), ["a", "b", "10", "2"]);
  // (A state dict is a plain object, which lists integer-like keys first whatever the order.)
  assert.deepEqual(pd.namedParameters().map(([k]) => k), ["a", "b", "10", "2"]);
  assert.equal(pd.get("b"), c);
  assert.ok(pd.delete("10"));
  assert.ok(!pd.delete("10"));
  assert.deepEqual(pd.parameters(), [a, c, e]);
  pd.clear();
  assert.equal(pd.length, 0);
  assert.deepEqual(pd.parameters(), []);
  assert.throws(() => pd.get("x"), /no parameter "x"/);
  for (const key of ["training", "forward", "keys", "a.b", ""]) {
    assert.throws(() => pd.set(key, zeros([1])), new RegExp(`key ${JSON.stringify(key)}`));
  }
  assert.throws(() => pd.set("w", [1] as unknown as Tensor), /value for "w" must be a Tensor/);
  assert.throws(() => pd.update(zeros([1]) as unknown as []), /got a Tensor/);
});

backendTest(
  "ParameterList and ParameterDict: moved by to(), trained by SGD as PyTorch's",
  async (device) => {
    const t = fixtures.containers.training;
    class Affine extends nn.Module {
      mats = new nn.ParameterList([zeros([4, 3]), zeros([3, 2])]);
      extra = new nn.ParameterDict({ shift: zeros([2]), scale: zeros([2]) });
      override forward(x: Tensor): Tensor {
        const h = x.matmul(this.mats.at(0)).tanh().matmul(this.mats.at(1));
        return h.mul(this.extra.get("scale")).add(this.extra.get("shift"));
      }
    }
    const model = new Affine();
    model.loadStateDict(stateOf(t.initial, CPU0));
    model.to(device);
    for (const p of model.parameters()) assert.equal(p.device, device);
    // PyTorch marks a parameter outside host memory with its GPU index.
    const gpu = device.backend === "cpu" ? "" : ` (GPU ${device.index})`;
    assert.ok(model.mats.toString().includes(`[torch.float32 of size 4x3${gpu}]`));
    const type = gpu ? "torch.cuda.FloatTensor" : "torch.FloatTensor";
    assert.ok(
      model.extra.toString().includes(`(scale): Parameter containing: [${type} of size 2${gpu}]`),
    );
    assert.deepEqual(Object.keys(model.stateDict()), t.keys);
    assert.deepEqual(model.namedParameters().map(([k]) => k), t.named_parameters);
    const opt = new optim.SGD(model.parameters(), { lr: t.lr, momentum: t.momentum });
    const x = fixtureTensor(t.input, device);
    const g = fixtureTensor(t.g, device);
    for (const expected of t.losses) {
      opt.zeroGrad();
      const loss = model.forward(x).mul(g).sum();
      assert.ok(Math.abs(await loss.item() - expected) <= 1e-4 * (1 + Math.abs(expected)));
      loss.backward();
      opt.step();
    }
    await assertState(model, t.final, device, "after two steps");
  },
);

// Review: a replica holds its broadcast copies, plain tensors, which ParameterDict.get refused.
backendTest(
  "ParameterList and ParameterDict: DataParallel over two devices",
  async (_d, devices) => {
    class Scaled extends nn.Module {
      mats = new nn.ParameterList([tensor([1, 2, 3, 4, 5, 6], { shape: [3, 2] })]);
      extra = new nn.ParameterDict({ scale: tensor([2, -1]), shift: tensor([0.5, 0]) });
      override forward(x: Tensor): Tensor {
        return x.matmul(this.mats.at(0)).mul(this.extra.get("scale")).add(this.extra.get("shift"));
      }
    }
    const model = new Scaled().to(devices[0]);
    const x = tensor([1, 0, 2, -1, 1, 1, 0, 3, 1, 2, 2, 2], { shape: [4, 3], device: devices[0] });
    const expected = await model.forward(x).data();
    const dp = new nn.DataParallel(model, { devices: devices.slice(0, 2) });
    const y = dp.forward(x);
    await assertTensor(y, Array.from(expected), { what: "output" });
    y.sum().backward();
    // d/d scale_j = Σ_rows (x · mats)_j; (x · mats) rows: [11 14] [7 8] [14 18] [18 24].
    await assertTensor(model.extra.get("scale").grad!, [50, 64], { what: "scale grad" });
    await assertTensor(model.extra.get("shift").grad!, [4, 4], { what: "shift grad" });
  },
);

// ------------------------------------------------------------------ Bilinear

for (const c of fixtures.bilinear) {
  backendTest(`Bilinear ${c.name}: output and gradients equal PyTorch's`, async (device) => {
    const m = new nn.Bilinear(c.in1, c.in2, c.out, { bias: c.bias, device });
    assert.equal(m.toString(), c.repr);
    assert.deepEqual(Object.keys(m.stateDict()), c.keys);
    m.loadStateDict(stateOf(c.params as Values, device));
    const x1 = fixtureTensor(c.input1, device, { requiresGrad: true });
    const x2 = fixtureTensor(c.input2, device, { requiresGrad: true });
    const y = m.forward(x1, x2);
    await assertTensor(y, decodeFixture(c.output), {
      ...tol(device),
      what: "output",
      shape: shapeOf(c.output),
    });
    y.mul(fixtureTensor(c.g, device)).sum().backward();
    const grads = c.grads as Values;
    const got: [string, Tensor | null][] = [
      ["input1", x1.grad],
      ["input2", x2.grad],
      ["weight", m.weight.grad],
      ["bias", m.bias?.grad ?? null],
    ];
    for (const [name, grad] of got) {
      if (!(name in grads)) continue;
      await assertTensor(grad!, decodeFixture(grads[name]), { ...tol(device), what: name });
    }
  });
}

Deno.test("Bilinear: parameters drawn from U(-1/√in1, 1/√in1), as PyTorch's init", async () => {
  const c = fixtures.bilinear_init;
  // Seeded: unseeded, the 7 biases all fall within half the bound once in 128 runs.
  manualSeed(5210);
  const m = new nn.Bilinear(c.in1, c.in2, c.out);
  assert.deepEqual([...m.weight.shape], [c.out, c.in1, c.in2]);
  for (const p of [m.weight, m.bias!]) {
    const v = Array.from(await p.data());
    const largest = Math.max(...v.map(Math.abs));
    assert.ok(largest <= c.bound, `|value| ${largest} within ${c.bound}`);
    assert.ok(largest > c.bound * 0.5, `spread over the bound: largest ${largest}`);
  }
  assert.ok(c.weight_max_abs <= c.bound);
});

Deno.test("bilinear: shape, dtype and argument errors name the bad value", () => {
  const w = zeros([5, 3, 4]);
  assert.throws(
    () => F.bilinear(zeros([2, 3]), zeros([3, 4]), w),
    /batch dimensions do not match at dim 0.*\[2, 3\].*\[3, 4\]/,
  );
  assert.throws(() => F.bilinear(zeros([2, 3]), zeros([2, 5]), w), /input2 of shape \[2, 5\]/);
  assert.throws(() => F.bilinear(zeros([2, 2]), zeros([2, 4]), w), /input1 of shape \[2, 2\]/);
  assert.throws(
    () => F.bilinear(zeros([2, 3]), zeros([2, 4]), w, zeros([4])),
    /bias of shape \[4\].*expected \[5\]/,
  );
  assert.throws(() => F.bilinear(zeros([2, 3]), zeros([2, 4]), zeros([5, 12])), /\[5, 12\]/);
  assert.throws(
    () => F.bilinear(zeros([2, 3]), zeros([2, 2, 4]), w),
    /\[2, 3\].*\[2, 2, 4\] must have the same number of dims/,
  );
  assert.throws(
    () => F.bilinear(zeros([2, 3]), zeros([2, 4], { dtype: "float64" }), w),
    /input2 is float64, input1 float32/,
  );
  assert.throws(
    () => F.bilinear(zeros([2, 3], { dtype: "int32" }), zeros([2, 4]), w),
    /floating-point input1, got int32/,
  );
  assert.throws(() => new nn.Bilinear(0, 2, 3), /in1Features must be a positive integer, got 0/);
  assert.throws(() => new nn.Bilinear(2, -1, 3), /in2Features must be a non-negative/);
});

// --------------------------------------------------------------- EmbeddingBag

type BagOptions = {
  mode?: "sum" | "mean" | "max";
  includeLastOffset?: boolean;
  paddingIdx?: number;
  maxNorm?: number;
  normType?: number;
};

for (const c of fixtures.embedding_bag) {
  backendTest(
    `EmbeddingBag ${c.name}: output and gradients equal PyTorch's`,
    async (device) => {
      const options = c.options as BagOptions;
      const m = new nn.EmbeddingBag(10, 4, { ...options, device });
      assert.equal(m.toString(), c.repr);
      assert.deepEqual(Object.keys(m.stateDict()), c.keys);
      noGrad(() => m.weight.copy_(fixtureTensor(c.weight, device)));
      const input = ints(c.input, device);
      const offsets = c.offsets === null ? null : ints(c.offsets, device);
      const psw = "per_sample_weights" in c
        ? fixtureTensor(c.per_sample_weights as FixtureValues, device, { requiresGrad: true })
        : null;
      const y = m.forward(input, offsets, psw);
      await assertTensor(y, decodeFixture(c.output), {
        ...tol(device),
        what: "output",
        shape: shapeOf(c.output),
      });
      y.mul(fixtureTensor(c.g, device)).sum().backward();
      await assertTensor(m.weight.grad!, decodeFixture(c.grads.weight), {
        ...tol(device),
        what: "weight grad",
      });
      if (psw) {
        const expected = (c.grads as Values).per_sample_weights;
        await assertTensor(psw.grad!, decodeFixture(expected), {
          ...tol(device),
          what: "perSampleWeights grad",
        });
      }
      // maxNorm renormalises the looked-up rows in place.
      await assertTensor(m.weight, decodeFixture(c.weight_after), {
        ...tol(device),
        what: "weight after the forward",
      });
    },
  );
}

backendTest("embeddingBag: an infinite or NaN row stays in its own bag", async (device) => {
  const c = fixtures.embedding_bag_inf;
  const w = fixtureTensor(c.weight, device);
  for (const mode of ["sum", "mean"] as const) {
    const y = F.embeddingBag(ints(c.input, device), w, ints(c.offsets, device), { mode });
    await assertTensor(y, decodeFixture(c.outputs[mode]), { ...tol(device), what: mode });
  }
});

backendTest("embeddingBag: no bags, or bags of no index, give zeros", async (device) => {
  const w = zeros([5, 3], { device, requiresGrad: true });
  for (const mode of ["sum", "mean", "max"] as const) {
    const empty = F.embeddingBag(ints([], device), w, ints([0, 0], device), { mode });
    assert.deepEqual([...empty.shape], [2, 3]);
    await assertTensor(empty, [0, 0, 0, 0, 0, 0], { what: `${mode}: empty input` });
    const none = F.embeddingBag(ints([1, 2], device), w, ints([], device), { mode });
    assert.deepEqual([...none.shape], [0, 3]);
    const none2d = F.embeddingBag(ints([], device).reshape([0, 4]), w, null, { mode });
    assert.deepEqual([...none2d.shape], [0, 3]);
    const closing = F.embeddingBag(ints([1, 2], device), w, ints([0], device), {
      mode,
      includeLastOffset: true,
    });
    assert.deepEqual([...closing.shape], [0, 3]);
    empty.sum().backward();
    await assertTensor(w.grad!, new Array(15).fill(0), { what: `${mode}: weight grad` });
    w.grad = null;
  }
});

// Review: the lookup's gradient went through indexSelect's, a product with a one-hot [n, num]
// matrix: 4100 x 8200 float32 is over WebGPU's 128 MiB binding limit (and n · num time on cpu).
backendTest(
  "embeddingBag: the weight gradient of a large table is a scatter, not a one-hot product",
  async (device) => {
    const [num, n, per] = [8200, 4100, 16];
    const index = Int32Array.from({ length: n }, (_, i) => (i * 7919) % num);
    const w = zeros([num, 2], { device, requiresGrad: true });
    const x = tensor(index, { dtype: "int32", device });
    const offsets = tensor(Int32Array.from({ length: n / per }, (_, b) => b * per), {
      dtype: "int32",
      device,
    });
    F.embeddingBag(x, w, offsets, { mode: "sum", paddingIdx: 0 }).sum().backward();
    const expected = new Array<number>(num * 2).fill(0);
    for (const r of index) if (r !== 0) expected[2 * r] = expected[2 * r + 1] += 1;
    await assertTensor(w.grad!, expected, { what: "weight grad (lookup counts)" });
  },
);

Deno.test("EmbeddingBag: reprs, padding row, fromPretrained as PyTorch's", async () => {
  const c = fixtures.embedding_bag_modules;
  for (const spec of c.modules) {
    const m = new nn.EmbeddingBag(10, 3, spec.options as BagOptions);
    assert.equal(m.toString(), spec.repr);
    assert.deepEqual(Object.keys(m.stateDict()), spec.keys);
    if (m.paddingIdx !== null) {
      const row = await m.weight.select(0, m.paddingIdx).data();
      assert.deepEqual(Array.from(row), [0, 0, 0], "the padding row starts at zeros");
    }
  }
  const p = c.from_pretrained;
  const emb = fixtureTensor(p.embeddings, CPU0);
  const frozen = nn.EmbeddingBag.fromPretrained(emb, { mode: "sum" });
  assert.equal(frozen.toString(), p.repr);
  assert.equal(frozen.weight.requiresGrad, p.requires_grad);
  await assertTensor(frozen.weight, decodeFixture(p.embeddings), { what: "copied table" });
  const open = nn.EmbeddingBag.fromPretrained(emb, { freeze: false });
  assert.equal(open.toString(), p.unfrozen_repr);
  assert.equal(open.weight.requiresGrad, p.unfrozen_requires_grad);
  assert.throws(() => nn.EmbeddingBag.fromPretrained(zeros([4])), /\[num, dim\], got shape \[4\]/);
});

Deno.test("embeddingBag: bad arguments are errors naming them", async () => {
  const w = zeros([5, 3]);
  const i32 = (v: number[]) => tensor(v, { dtype: "int32" });
  const x = i32([1, 2, 3]);
  assert.throws(() => F.embeddingBag(tensor([1, 2]), w, i32([0])), /int32, got float32/);
  assert.throws(
    () => F.embeddingBag(x.reshape([1, 3]), w, i32([0])),
    /2-D input \(shape \[1, 3\]\).*offsets must be null/,
  );
  assert.throws(() => F.embeddingBag(x, w), /1-D input \(shape \[3\]\) needs 1-D int32 offsets/);
  assert.throws(() => F.embeddingBag(x.reshape([1, 1, 3]), w), /got shape \[1, 1, 3\]/);
  assert.throws(
    () => F.embeddingBag(x, w, i32([0]).reshape([1, 1])),
    /offsets must be a 1-D int32 tensor, got int32 of shape \[1, 1\]/,
  );
  assert.throws(
    () => F.embeddingBag(x, w, i32([0]), { mode: "max", perSampleWeights: zeros([3]) }),
    /only supported for mode "sum" \(got mode "max"\)/,
  );
  assert.throws(
    () => F.embeddingBag(x, w, i32([0]), { mode: "sum", perSampleWeights: zeros([4]) }),
    /perSampleWeights of shape \[4\] must have the shape of the input \[3\]/,
  );
  assert.throws(
    () => F.embeddingBag(x, w, i32([0]), { mode: "prod" as "sum" }),
    /mode must be "sum", "mean" or "max", got "prod"/,
  );
  assert.throws(() => F.embeddingBag(x, w, i32([0]), { paddingIdx: 5 }), /paddingIdx 5/);
  assert.throws(
    () => F.embeddingBag(x, w, i32([]), { includeLastOffset: true }),
    /at least 1 entry, got shape \[0\]/,
  );
  assert.throws(
    () => F.embeddingBag(zeros([2, 0], { dtype: "int32" }), w),
    /2-D input of shape \[2, 0\] has bags of no index/,
  );
  assert.throws(() => new nn.EmbeddingBag(5, 3, { mode: "min" as "sum" }), /got "min"/);
  // Values only the device knows: the next read rejects.
  await assert.rejects(
    () => F.embeddingBag(x, w, i32([1, 2])).data(),
    /offsets\[0\] has to be 0.*got 1/,
  );
  await assert.rejects(
    () => F.embeddingBag(x, w, i32([0, 2, 1])).data(),
    /offsets must not decrease/,
  );
  await assert.rejects(
    () => F.embeddingBag(x, w, i32([0, 4])).data(),
    /offsets\[-1\] can not be greater than the input's length 3, got 4/,
  );
  await assert.rejects(
    async () => await F.embeddingBag(i32([1, 7]), w, i32([0])).data(),
    /index 7 is out of range/,
  );
});

// ---------------------------------------------- PairwiseDistance, CosineSimilarity

type DistanceOptions = { p?: number | string; eps?: number; keepdim?: boolean };

for (const c of fixtures.pairwise_distance) {
  backendTest(
    `PairwiseDistance ${c.name}: output and gradients equal PyTorch's`,
    async (device) => {
      const o = c.options as DistanceOptions;
      const p = typeof o.p === "string" ? Number(o.p) : o.p;
      const m = new nn.PairwiseDistance({ p, eps: o.eps, keepdim: o.keepdim });
      assert.equal(m.toString(), c.repr);
      const x1 = fixtureTensor(c.x1, device, { requiresGrad: true });
      const x2 = fixtureTensor(c.x2, device, { requiresGrad: true });
      const y = m.forward(x1, x2);
      await assertTensor(y, decodeFixture(c.output), {
        ...tol(device),
        what: "output",
        shape: shapeOf(c.output),
      });
      y.mul(fixtureTensor(c.g, device)).sum().backward();
      for (const [name, x] of [["x1", x1], ["x2", x2]] as const) {
        const grad = x.grad ?? zeros([...x.shape], { device });
        await assertTensor(grad, decodeFixture(c.grads[name]), { ...tol(device), what: name });
      }
    },
  );
}

for (const c of fixtures.cosine_similarity) {
  backendTest(
    `CosineSimilarity ${c.name}: output and gradients equal PyTorch's`,
    async (device) => {
      const m = new nn.CosineSimilarity(c.options);
      assert.equal(m.toString(), c.repr);
      const x1 = fixtureTensor(c.x1, device, { requiresGrad: true });
      const x2 = fixtureTensor(c.x2, device, { requiresGrad: true });
      const y = m.forward(x1, x2);
      await assertTensor(y, decodeFixture(c.output), {
        ...tol(device),
        what: "output",
        shape: shapeOf(c.output),
      });
      y.mul(fixtureTensor(c.g, device)).sum().backward();
      await assertTensor(x1.grad!, decodeFixture(c.grads.x1), { ...tol(device), what: "x1" });
      await assertTensor(x2.grad!, decodeFixture(c.grads.x2), { ...tol(device), what: "x2" });
    },
  );
}

// Review: a norm over no elements is 0 in PyTorch for every p; a negative p gave inf (0^(1/p)).
backendTest("pairwiseDistance over an empty last dim is 0 for every p", async (device) => {
  for (const p of [2, 1, 0.5, 0, Infinity, -Infinity, -1, -2.5]) {
    for (const keepdim of [false, true]) {
      const x1 = zeros([3, 0], { device, requiresGrad: true });
      const y = F.pairwiseDistance(x1, zeros([3, 0], { device }), { p, keepdim });
      await assertTensor(y, [0, 0, 0], { what: `p=${p}`, shape: keepdim ? [3, 1] : [3] });
      y.sum().backward();
      assert.deepEqual([...x1.grad!.shape], [3, 0]);
    }
  }
});

Deno.test("pairwiseDistance, PairwiseDistance, CosineSimilarity: errors name the bad value", async () => {
  assert.throws(() => F.pairwiseDistance(zeros([2, 3]), zeros([2, 4])), /\[2, 3\].*\[2, 4\]/);
  // Review: PyTorch promotes mixed float dtypes (this refused them).
  const mixed = F.pairwiseDistance(zeros([2, 3]), tensor([3, 4, 0], { dtype: "float64" }));
  assert.equal(mixed.dtype, "float64");
  await assertTensor(mixed, [5, 5], { rtol: 1e-5, what: "float32 and float64" });
  assert.throws(() => F.pairwiseDistance(zeros([3]), zeros([3]), { p: NaN }), /got NaN/);
  assert.throws(() => new nn.PairwiseDistance({ eps: Infinity }), /eps must be a finite/);
  assert.throws(() => new nn.CosineSimilarity({ dim: 0.5 }), /dim must be an integer, got 0.5/);
  assert.throws(
    () => F.pairwiseDistance(zeros([3], { dtype: "int32" }), zeros([3])),
    /floating-point x1, got int32/,
  );
});

// ----------------------------------------------------------------- nn.utils

backendTest(
  "parametersToVector and vectorToParameters: PyTorch's order and values",
  async (device) => {
    const c = fixtures.convert_parameters;
    const lin = new nn.Linear(3, 2, { device });
    lin.loadStateDict(stateOf(c.params, device));
    const vec = nn.utils.parametersToVector(lin.parameters());
    await assertTensor(vec, decodeFixture(c.vector), { what: "vector", shape: shapeOf(c.vector) });
    vec.sum().backward();
    await assertTensor(lin.weight.grad!, new Array(6).fill(1), { what: "differentiable" });
    nn.utils.vectorToParameters(fixtureTensor(c.new_vector, device), lin.parameters());
    await assertState(lin, c.after, device, "after vectorToParameters");
  },
);

Deno.test("parametersToVector and vectorToParameters: errors name the sizes", () => {
  const ps = [new nn.Parameter(zeros([2, 3])), new nn.Parameter(zeros([4]))];
  assert.throws(
    () => nn.utils.vectorToParameters(zeros([11]), ps),
    /vec has 11 elements but the 2 parameters have 10 \(shapes \[2, 3\], \[4\]\)/,
  );
  assert.throws(() => nn.utils.vectorToParameters(zeros([9]), ps), /vec has 9 elements/);
  assert.throws(() => nn.utils.vectorToParameters(zeros([2, 5]), ps), /1-dimensional.*\[2, 5\]/);
  assert.throws(
    () => nn.utils.vectorToParameters([1] as unknown as Tensor, ps),
    /vec must be a Tensor, got object/,
  );
  assert.throws(() => nn.utils.parametersToVector([]), /at least one parameter, got none/);
  assert.throws(
    () => nn.utils.parametersToVector([zeros([1]), 3 as unknown as Tensor]),
    /parameter 1 is not a Tensor \(got number\)/,
  );
  const v = nn.utils.parametersToVector([zeros([2]), zeros([1], { dtype: "float64" })]);
  assert.equal(v.dtype, "float64", "dtypes promote as PyTorch's cat");
});

type NormOptions = { name?: string; dim?: number | null };

function makeNormed(c: (typeof fixtures.weight_norm)[number], device: Device): nn.Module {
  return c.module === "Linear"
    ? new nn.Linear(4, 3, { device })
    : new nn.Conv2d(2, 3, 2, { device });
}

for (const c of fixtures.weight_norm) {
  backendTest(
    `weightNorm ${c.name}: parameters, forward, gradients, SGD steps and removal as PyTorch's`,
    async (device) => {
      const m = makeNormed(c, device);
      m.loadStateDict(stateOf(c.params as Values, device));
      assert.equal(nn.utils.weightNorm(m, c.options as NormOptions), m);
      assert.deepEqual(Object.keys(m.stateDict()), c.keys);
      assert.deepEqual(m.namedParameters().map(([k]) => k), c.named_parameters);
      assert.equal(m.toString(), c.repr);
      await assertState(m, c.state as unknown as Values, device, "after weightNorm");
      const x = fixtureTensor(c.input, device, { requiresGrad: true });
      const y = m.forward(x) as Tensor;
      await assertTensor(y, decodeFixture(c.output), { ...tol(device), what: "output" });
      const g = fixtureTensor(c.g, device);
      y.mul(g).sum().backward();
      const grads = c.grads as unknown as Values;
      for (const [name, p] of m.namedParameters()) {
        await assertTensor(p.grad!, decodeFixture(grads[name]), { ...tol(device), what: name });
      }
      await assertTensor(x.grad!, decodeFixture(grads.input), { ...tol(device), what: "input" });
      const opt = new optim.SGD(m.parameters(), { lr: c.lr });
      for (const [i, expected] of c.step_outputs.entries()) {
        opt.zeroGrad();
        const out = m.forward(x.detach()) as Tensor;
        await assertTensor(out, decodeFixture(expected), { ...tol(device), what: `step ${i}` });
        out.mul(g).sum().backward();
        opt.step();
      }
      await assertState(m, c.trained as unknown as Values, device, "after two steps");
      const computed = (m as unknown as Record<string, Tensor>)[c.param];
      await assertTensor(computed, decodeFixture(c.computed_after_training), {
        ...tol(device),
        what: `${c.param} recomputed`,
        shape: shapeOf(c.computed_after_training),
      });
      nn.utils.removeWeightNorm(m, c.param);
      assert.ok((m as unknown as Record<string, Tensor>)[c.param] instanceof nn.Parameter);
      await assertState(m, c.after_remove as Values, device, "after removeWeightNorm");
      assert.ok(m instanceof (c.module === "Linear" ? nn.Linear : nn.Conv2d));
      assert.equal(m.toString(), c.repr);
    },
  );
}

backendTest("weightNorm: inside a Sequential, moved by to() afterwards", async (device) => {
  const c = fixtures.weight_norm[0];
  const lin = new nn.Linear(4, 3);
  lin.loadStateDict(stateOf(c.params as unknown as Values, CPU0));
  const seq = new nn.Sequential(nn.utils.weightNorm(lin), new nn.Identity()).to(device);
  assert.deepEqual(Object.keys(seq.stateDict()), c.keys.map((k) => `0.${k}`));
  for (const p of seq.parameters()) assert.equal(p.device, device);
  const y = seq.forward(fixtureTensor(c.input, device));
  await assertTensor(y, decodeFixture(c.output), { ...tol(device), what: "output" });
});

Deno.test("weightNorm: a replica computes its weight from its own g and v", async () => {
  const lin = nn.utils.weightNorm(new nn.Linear(3, 2));
  const x = tensor([1, 2, 3, -1, 0, 2], { shape: [2, 3] });
  const doubled = lin._replicateWith((t, _kind, name) => (name === "weight_g" ? t.mul(2) : t));
  const [a, b] = [lin.forward(x), doubled.forward(x)];
  const bias = await lin.bias!.data();
  const [da, db] = [await a.data(), await b.data()];
  for (let i = 0; i < 4; i++) {
    const expected = 2 * (da[i] - bias[i % 2]) + bias[i % 2];
    assert.ok(Math.abs(db[i] - expected) < 1e-5, `replica output ${i}`);
  }
  // The original is untouched, and a second weightNorm on another parameter stacks.
  nn.utils.weightNorm(lin, { name: "bias", dim: null });
  assert.deepEqual(Object.keys(lin.stateDict()), ["weight_g", "weight_v", "bias_g", "bias_v"]);
  await assertTensor(lin.forward(x), Array.from(da), { what: "two weight norms" });
  nn.utils.removeWeightNorm(lin, "weight");
  assert.deepEqual(Object.keys(lin.stateDict()), ["bias_g", "bias_v", "weight"]);
  await assertTensor(lin.forward(x), Array.from(da), { what: "one removed" });
  nn.utils.removeWeightNorm(lin, "bias");
  assert.deepEqual(Object.keys(lin.stateDict()), ["weight", "bias"]);
  assert.equal(Object.getPrototypeOf(lin), nn.Linear.prototype);
});

// Review: with two weight norms, removing the inner one rewired a prototype the copies share.
Deno.test("removeWeightNorm leaves the copies of a module (TransformerEncoder layers) normed", async () => {
  const layer = new nn.TransformerEncoderLayer(4, 2, { dimFeedforward: 6, dropout: 0 });
  nn.utils.weightNorm(nn.utils.weightNorm(layer.linear1), { name: "bias", dim: null });
  const stack = new nn.TransformerEncoder(layer, 2);
  const [first, second] = [0, 1].map((i) =>
    (stack.layers.at(i) as nn.TransformerEncoderLayer).linear1
  );
  const x = tensor(Array.from({ length: 12 }, (_, i) => Math.sin(i)), { shape: [3, 1, 4] });
  const before = await stack.forward(x).data();
  nn.utils.removeWeightNorm(first, "weight");
  assert.deepEqual(Object.keys(first.stateDict()), ["bias_g", "bias_v", "weight"]);
  assert.deepEqual(Object.keys(second.stateDict()), ["weight_g", "weight_v", "bias_g", "bias_v"]);
  assert.deepEqual(second.weight.shape, [6, 4], "the other copy still computes its weight");
  assert.deepEqual(layer.linear1.weight.shape, [6, 4], "and so does the original");
  await assertTensor(stack.forward(x), Array.from(before), { what: "same outputs" });
  nn.utils.removeWeightNorm(second, "bias");
  assert.deepEqual(Object.keys(first.stateDict()), ["bias_g", "bias_v", "weight"]);
});

Deno.test("weightNorm and removeWeightNorm: errors name the module and parameter", () => {
  const lin = nn.utils.weightNorm(new nn.Linear(3, 2));
  assert.throws(() => nn.utils.weightNorm(lin), /already has weightNorm on the parameter "weight"/);
  assert.throws(
    () => ((lin as unknown as Record<string, unknown>).weight = zeros([2, 3])),
    /Linear.weight is computed by weightNorm from weight_g and weight_v/,
  );
  assert.throws(
    () => nn.utils.removeWeightNorm(lin, "bias"),
    /weightNorm of "bias" not found in Linear/,
  );
  assert.throws(() => nn.utils.weightNorm(new nn.ReLU()), /ReLU has no parameter "weight"/);
  assert.throws(
    () => nn.utils.weightNorm(new nn.Linear(2, 2), { dim: 5 }),
    /dim|out of range/i,
  );
  assert.throws(() => nn.utils.weightNorm({} as nn.Module), /expected an nn.Module/);
});

// ------------------------------------------------------- float64 gradchecks

const f64 = { dtype: "float64" as const, device: CPU0 };
check("bilinear (both inputs, weight and bias)", (x1, x2, w, b) => F.bilinear(x1, x2, w, b), [
  inp([2, 3], 5701),
  inp([2, 2], 5702),
  inp([4, 3, 2], 5703),
  inp([4], 5704),
]);
check("bilinear, 3-D inputs, no bias", (x1, x2, w) => F.bilinear(x1, x2, w), [
  inp([2, 2, 3], 5705),
  inp([2, 2, 1], 5706),
  inp([2, 3, 1], 5707),
]);
const bagIndex = tensor([1, 4, 2, 4, 0, 3, 3], { dtype: "int32", device: CPU0 });
const bagOffsets = tensor([0, 3, 3, 5], { dtype: "int32", device: CPU0 });
for (const mode of ["sum", "mean"] as const) {
  check(
    `embeddingBag ${mode}, empty bag and padding (weight)`,
    (w) => F.embeddingBag(bagIndex, w, bagOffsets, { mode, paddingIdx: 2 }),
    [inp([5, 3], 5710)],
  );
}
check(
  "embeddingBag max (weight; distinct values)",
  (w) => F.embeddingBag(bagIndex, w, bagOffsets, { mode: "max" }),
  [{
    shape: [5, 3],
    values: Array.from({ length: 15 }, (_, i) => ((i * 7) % 15) * 0.37 - 2),
  }],
);
check(
  "embeddingBag max with padding, a bag of padding only (weight)",
  (w) => F.embeddingBag(bagIndex, w, bagOffsets, { mode: "max", paddingIdx: 3 }),
  [{
    shape: [5, 3],
    values: Array.from({ length: 15 }, (_, i) => ((i * 4) % 15) * 0.29 - 2),
  }],
);
check(
  "embeddingBag sum with perSampleWeights (weight and weights)",
  (w, psw) => F.embeddingBag(bagIndex, w, bagOffsets, { mode: "sum", perSampleWeights: psw }),
  [
    inp([5, 3], 5711),
    inp([7], 5712),
  ],
);
check(
  "embeddingBag 2-D mean",
  (w) => F.embeddingBag(bagIndex.narrow(0, 0, 6).reshape([2, 3]), w, null, { mode: "mean" }),
  [
    inp([5, 2], 5713),
  ],
);
for (const p of [2, 1.5, 3, Infinity]) {
  check(`pairwiseDistance p=${p}`, (a, b) => F.pairwiseDistance(a, b, { p }), [
    inp([3, 4], 5720),
    inp([4], 5721),
  ]);
}
check(
  "cosineSimilarity module, dim 0",
  (a, b) => new nn.CosineSimilarity({ dim: 0 }).forward(a, b),
  [
    inp([4, 2], 5722),
    inp([4, 2], 5723),
  ],
);
{
  const lin = nn.utils.weightNorm(new nn.Linear(3, 2, f64));
  check(
    "weightNorm Linear (weight_g, weight_v, input)",
    (g, v, x) =>
      lin._replicateWith((t, _k, name) => (name === "weight_g" ? g : name === "weight_v" ? v : t))
        .forward(x),
    [inp([2, 1], 5730, 0.5, 2), inp([2, 3], 5731), inp([4, 3], 5732)],
  );
  const conv = nn.utils.weightNorm(new nn.Conv2d(2, 2, 2, f64), { dim: null });
  check(
    "weightNorm Conv2d whole-tensor norm (weight_g, weight_v)",
    (g, v) =>
      conv._replicateWith((t, _k, name) => (name === "weight_g" ? g : name === "weight_v" ? v : t))
        .forward(
          tensor(Array.from({ length: 18 }, (_, i) => Math.sin(i)), {
            shape: [1, 2, 3, 3],
            ...f64,
          }),
        ) as Tensor,
    [inp([], 5733, 0.5, 2), inp([2, 2, 2, 2], 5734)],
  );
}
