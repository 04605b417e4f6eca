/**
 * CTCLoss, MultiMarginLoss, MultiLabelMarginLoss, HingeEmbeddingLoss and
 * TripletMarginWithDistanceLoss, and NLLLoss / CrossEntropyLoss on
 * K-dimensional inputs: PyTorch 1.13's values and gradients
 * (tests/fixtures/torch_losses_more.json: repeated labels, a blank that is
 * not 0, impossible alignments, hinges hit exactly, label lists ended by -1)
 * on every backend, float64 gradient checks on cpu, and the errors for bad
 * shapes, lengths and options.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, nn, type Tensor, tensor } from "../mod.ts";
import {
  assertClose,
  assertTensor,
  backendTest,
  decodeFixture,
  type FixtureValues,
} from "./harness.ts";
import { check, inp, values } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_losses_more.json" with { type: "json" };

const F = nn.functional;
type Kwargs = Record<string, unknown>;

function tol(device: Device) {
  return device.backend === "cpu" ? { atol: 1e-5, rtol: 1e-5 } : { atol: 1e-4, rtol: 1e-4 };
}

const DISTANCES: Record<string, (a: Tensor, b: Tensor) => Tensor> = {
  l1: (a, b) => a.sub(b).abs().sum(-1),
  cosine: (a, b) => F.cosineSimilarity(a, b, { dim: -1 }).neg().add(1),
};

function makeLoss(module: string, options: Kwargs, device: Device): nn.Module {
  const o: Kwargs = { ...options };
  if (o.weight) o.weight = tensor(o.weight as number[], { device });
  if (o.distance) o.distanceFunction = DISTANCES[o.distance as string];
  delete o.distance;
  switch (module) {
    case "MultiMarginLoss":
      return new nn.MultiMarginLoss(o);
    case "MultiLabelMarginLoss":
      return new nn.MultiLabelMarginLoss(o);
    case "HingeEmbeddingLoss":
      return new nn.HingeEmbeddingLoss(o);
    case "TripletMarginWithDistanceLoss":
      return new nn.TripletMarginWithDistanceLoss(o);
    case "NLLLoss":
      return new nn.NLLLoss(o);
    case "CrossEntropyLoss":
      return new nn.CrossEntropyLoss(o);
  }
  throw new Error(`unknown loss ${module}`);
}

interface LossCase {
  name: string;
  module: string;
  options: unknown;
  order: string[];
  inputs: unknown;
  int_inputs: unknown;
  input_shapes: unknown;
  grad_inputs: string[];
  output: unknown;
  shape: number[];
  g: unknown;
  grads: unknown;
  repr: string;
}

function lossTest(c: LossCase) {
  backendTest(`${c.name}: value and gradients match PyTorch`, async (device) => {
    const loss = makeLoss(c.module, c.options as Kwargs, device);
    const shapes = c.input_shapes as Record<string, number[]>;
    const floats = c.inputs as Record<string, FixtureValues>;
    const ints = c.int_inputs as Record<string, FixtureValues>;
    const xs: Record<string, Tensor> = {};
    for (const k of c.order) {
      xs[k] = k in floats
        ? tensor(decodeFixture(floats[k]), {
          shape: shapes[k],
          device,
          requiresGrad: c.grad_inputs.includes(k),
        })
        : tensor(decodeFixture(ints[k]), { shape: shapes[k], dtype: "int32", device });
    }
    const out = loss.forward(...c.order.map((k) => xs[k])) as Tensor;
    await assertTensor(out, [decodeFixture(c.output as FixtureValues)].flat(), {
      ...tol(device),
      shape: c.shape,
      what: "loss",
    });
    out.mul(tensor(decodeFixture(c.g as FixtureValues), { shape: c.shape, device })).sum()
      .backward();
    for (const [k, g] of Object.entries(c.grads as Record<string, FixtureValues>)) {
      await assertTensor(xs[k].grad!, decodeFixture(g), { ...tol(device), what: `${k} grad` });
    }
  });
}

for (const c of fixtures.losses) lossTest(c as LossCase);
// NLLLoss and CrossEntropyLoss already take [N, C, d1, d2]: checked, not rewritten.
for (const c of fixtures.kdim) lossTest(c as LossCase);

for (const c of fixtures.ctc) {
  backendTest(`${c.name}: CTC loss and gradient match PyTorch`, async (device) => {
    const lp = tensor(decodeFixture(c.log_probs as FixtureValues), {
      shape: c.log_probs_shape,
      device,
      requiresGrad: true,
    });
    const targets = tensor(decodeFixture(c.targets as FixtureValues), {
      shape: c.targets_shape,
      dtype: "int32",
      device,
    });
    const asTensor = c.lengths_as === "tensor";
    const lengths = (v: number[]) => asTensor ? tensor(v, { dtype: "int32", device }) : v;
    const loss = new nn.CTCLoss(c.options as nn.functional.CTCLossOptions);
    assert.equal(loss.toString(), c.repr);
    const out = loss.forward(lp, targets, lengths(c.input_lengths), lengths(c.target_lengths));
    await assertTensor(out, [decodeFixture(c.output as FixtureValues)].flat(), {
      ...tol(device),
      shape: c.shape,
      what: "loss",
    });
    out.mul(tensor(decodeFixture(c.g as FixtureValues), { shape: c.shape, device })).sum()
      .backward();
    await assertTensor(lp.grad!, decodeFixture(c.grad as FixtureValues), {
      ...tol(device),
      what: "logProbs grad",
    });
  });
}

Deno.test("new loss modules print PyTorch's repr and keep weights as buffers", () => {
  for (const c of fixtures.losses) {
    assert.equal(makeLoss(c.module, c.options as Kwargs, tensor(0).device).toString(), c.repr);
  }
  const m = new nn.MultiMarginLoss({ weight: tensor([1, 2, 3]) });
  assert.deepEqual(Object.keys(m.stateDict()), ["weight"]);
  assert.deepEqual(m.parameters(), []);
  assert.deepEqual(Object.keys(new nn.MultiMarginLoss().stateDict()), []);
  // A module as the distance is a submodule, as in PyTorch.
  class L1 extends nn.Module {
    override forward(a: Tensor, b: Tensor): Tensor {
      return a.sub(b).abs().sum(-1);
    }
  }
  const t = new nn.TripletMarginWithDistanceLoss({ distanceFunction: new L1() });
  assert.equal(t.toString(), "TripletMarginWithDistanceLoss(\n  (distance_function): L1()\n)");
});

backendTest("ctcLoss: tensor lengths computed on the device give the same loss", async (d) => {
  // No known range: the checks run on the device and S is bounded by the targets' size.
  const lp = tensor(values([6, 2, 4], 1600), { shape: [6, 2, 4], device: d }).logSoftmax(2);
  const targets = tensor([1, 1, 2, 3], { dtype: "int32", device: d });
  const il = tensor([6, 5], { dtype: "int32", device: d }).add(0);
  const tl = tensor([3, 1], { dtype: "int32", device: d }).add(0);
  assert.equal(il.storage.knownRange, null);
  const fromDevice = await F.ctcLoss(lp, targets, il, tl, { reduction: "none" }).toArray();
  const fromHost = await F.ctcLoss(lp, targets, [6, 5], [3, 1], { reduction: "none" }).toArray();
  assert.deepEqual(fromDevice, fromHost);
  // Bad lengths from the device are reported by the next read.
  const bad = F.ctcLoss(lp, targets, tensor([7, 5], { dtype: "int32", device: d }).add(0), tl);
  await assert.rejects(() => bad.item(), /ctcLoss: input length 7 exceeds the 6 time steps/);
  const short = F.ctcLoss(lp, targets, il, tensor([2, 1], { dtype: "int32", device: d }).add(0));
  await assert.rejects(
    () => short.item(),
    /concatenated targets of shape \[4\] must hold the sum of the target lengths, 3/,
  );
});

backendTest("ctcLoss: an input of length 0 aligns only the empty target", async (d) => {
  // PyTorch 1.13 reads before the first frame there (5.96 and -8.8e5 for these); the
  // mathematical answer is 0 for an empty target and inf otherwise.
  const lp = tensor(values([4, 3, 5], 1606), { shape: [4, 3, 5], device: d }).logSoftmax(2);
  const targets = tensor([[1, 2], [0, 0], [1, 0]], { dtype: "int32", device: d });
  const out = [...await F.ctcLoss(lp, targets, [4, 0, 0], [2, 0, 1], { reduction: "none" }).data()];
  assert.ok(Number.isFinite(out[0]) && out[0] > 0);
  assert.deepEqual(out.slice(1), [0, Infinity]);
});

backendTest("ctcLoss: a label outside the classes is reported by the next read", async (d) => {
  const lp = tensor(values([4, 1, 3], 1601), { shape: [4, 1, 3], device: d }).logSoftmax(2);
  const loss = F.ctcLoss(lp, tensor([[1, 5, -1]], { dtype: "int32", device: d }), [4], [2]);
  await assert.rejects(() => loss.item(), /ctcLoss: class index 5 is out of range for 3 classes/);
  // Padding past a target's length is never read (PyTorch ignores it too).
  const ok = F.ctcLoss(lp, tensor([[1, 2, -7]], { dtype: "int32", device: d }), [4], [2]);
  assert.ok(Number.isFinite(await ok.item()));
});

backendTest("new losses name bad shapes, lengths and options", (device) => {
  const t = (v: number[], shape?: number[]) => tensor(v, { shape, device });
  const i32 = (v: number[], shape?: number[]) => tensor(v, { shape, dtype: "int32", device });
  const lp = t(values([5, 2, 4], 1602), [5, 2, 4]);
  const tg = i32([1, 2, 3, 1], [2, 2]);
  assert.throws(
    () => F.ctcLoss(t([1, 2, 3, 4], [4]), tg, [1], [1]),
    /ctcLoss: expected logProbs of shape \[T, N, C\] or \[T, C\] \(unbatched\), got \[4\]/,
  );
  assert.throws(
    () => F.ctcLoss(lp, tg, [5, 5], [2, 2], { blank: 4 }),
    /ctcLoss: blank must be a class in \[0, 4\) \(C = 4\), got 4/,
  );
  assert.throws(
    () => F.ctcLoss(lp, t([1, 2, 3, 1], [2, 2]), [5, 5], [2, 2]),
    /ctcLoss: targets must be int32, padded \[N, S\] or concatenated .* got float32 of shape \[2, 2\]/,
  );
  assert.throws(
    () => F.ctcLoss(lp, i32([1, 2, 3], [3, 1]), [5, 5], [1, 1]),
    /padded targets of shape \[3, 1\] need one row per sample \(N = 2/,
  );
  assert.throws(
    () => F.ctcLoss(lp, tg, [6, 5], [2, 2]),
    /ctcLoss: input length 6 exceeds the 5 time steps of logProbs \(shape \[5, 2, 4\]\)/,
  );
  assert.throws(
    () => F.ctcLoss(lp, tg, [5, 5], [3, 2]),
    /ctcLoss: target length 3 exceeds the 2 columns of the padded targets/,
  );
  assert.throws(
    () => F.ctcLoss(lp, tg, [5, 5, 5], [2, 2]),
    /ctcLoss: inputLengths must be 2 non-negative integer\(s\) \(one per sample\), got \[5,5,5\]/,
  );
  assert.throws(
    () => F.ctcLoss(lp, tg, [5, -1], [2, 2]),
    /inputLengths must be 2 non-negative integer\(s\).*\[5,-1\]/,
  );
  assert.throws(
    () => F.ctcLoss(lp, tg, [5, 5], t([2, 2])),
    /targetLengths must hold 2 int32 length\(s\) \(one per sample\), got float32 of shape \[2\]/,
  );
  assert.throws(
    () => F.ctcLoss(lp, i32([1, 2, 3, 1, 2]), [5, 5], [2, 2]),
    /concatenated targets of shape \[5\] must hold the sum of the target lengths, 4/,
  );
  assert.throws(
    () => F.ctcLoss(lp, tg, [5, 5], [2, 2], { reduction: "avg" as "mean" }),
    /ctcLoss: reduction must be/,
  );
  assert.throws(() => new nn.CTCLoss({ blank: -1 }), /blank must be a non-negative integer/);

  const x = t(values([2, 3], 1603), [2, 3]);
  assert.throws(
    () => F.multiMarginLoss(x, i32([0, 1]), { p: 3 }),
    /multiMarginLoss: p must be 1 or 2, got 3/,
  );
  assert.throws(
    () => F.multiMarginLoss(x, i32([0, 1, 2])),
    /multiMarginLoss: target must hold 2 int32 class index\(es\) for input of shape \[2, 3\], got int32 of shape \[3\]/,
  );
  assert.throws(
    () => F.multiMarginLoss(t(values([2, 3, 1], 1604), [2, 3, 1]), i32([0, 1])),
    /multiMarginLoss: expected a non-empty vector \[C\] or a matrix \[N, C\] of class scores, got shape \[2, 3, 1\]/,
  );
  assert.throws(
    () => F.multiMarginLoss(x, i32([0, 1]), { weight: t([1, 2]) }),
    /weight of shape \[2\] does not match the 3 classes of input of shape \[2, 3\]/,
  );
  assert.throws(() => new nn.MultiMarginLoss({ p: 0 }), /MultiMarginLoss: p must be 1 or 2/);
  assert.throws(
    () => F.multilabelMarginLoss(x, i32([0, 1, -1])),
    /multilabelMarginLoss: target must be int32 labels of the input's shape \[2, 3\], got int32 of shape \[3\]/,
  );
  assert.throws(
    () => F.hingeEmbeddingLoss(x, t([1, -1])),
    /hingeEmbeddingLoss \(input and target\)/,
  );
  assert.throws(
    () => F.hingeEmbeddingLoss(x, t([1, -1, 1]), { margin: NaN }),
    /hingeEmbeddingLoss: margin/,
  );
  assert.throws(
    () =>
      F.tripletMarginWithDistanceLoss(x, x, x, {
        distanceFunction: "l2" as unknown as nn.functional.DistanceFunction,
      }),
    /tripletMarginWithDistanceLoss: distanceFunction must be a function \(a, b\) => Tensor, got string/,
  );
  assert.throws(
    () =>
      F.tripletMarginWithDistanceLoss(x, x, x, {
        distanceFunction: () => 3 as unknown as Tensor,
      }),
    /distanceFunction\(anchor, positive\) returned number, not a Tensor/,
  );
});

backendTest("multi-margin losses report class indices out of range at the next read", async (d) => {
  const x = tensor(values([2, 3], 1605), { shape: [2, 3], device: d });
  const mm = F.multiMarginLoss(x, tensor([0, 3], { dtype: "int32", device: d }));
  await assert.rejects(() => mm.item(), /multiMarginLoss: class index 3 is out of range for 3/);
  const ml = F.multilabelMarginLoss(
    x,
    tensor([[0, 2, -1], [1, -1, 9]], { dtype: "int32", device: d }),
  );
  // PyTorch checks every entry, those after the -1 that ends a list too.
  await assert.rejects(
    () => ml.item(),
    /multilabelMarginLoss: target entry 9 is out of range: labels are in \[0, 3\) and -1 ends a list/,
  );
  // Only -1 ends a list: PyTorch rejects -2 as out of range.
  const below = F.multilabelMarginLoss(
    x,
    tensor([[0, -2, 1], [1, -1, 0]], { dtype: "int32", device: d }),
  );
  await assert.rejects(() => below.item(), /multilabelMarginLoss: target entry -2 is out of range/);
  const ok = F.multilabelMarginLoss(
    x,
    tensor([[0, 2, -1], [1, -1, 2]], { dtype: "int32", device: d }),
  );
  assert.ok(Number.isFinite(await ok.item()));
});

backendTest(
  "multilabelMarginLoss takes C entries of at most one dim for a vector input",
  async (d) => {
    // PyTorch 1.13: an input of at most one dim takes any target of C entries and at most one dim.
    const i32 = (v: number | number[] | number[][]) => tensor(v, { dtype: "int32", device: d });
    const one = F.multilabelMarginLoss(tensor([0.5], { device: d }), i32(0), { reduction: "none" });
    assert.deepEqual(one.shape, []);
    assert.equal(await one.item(), 0);
    const scalar = F.multilabelMarginLoss(tensor(0.5, { device: d }), i32([0]));
    assert.equal(await scalar.item(), 0);
    assert.throws(
      () => F.multilabelMarginLoss(tensor([0.5, 1], { device: d }), i32([[0, 1]])),
      /target must be int32 labels of the input's shape \[2\], got int32 of shape \[1, 2\]/,
    );
  },
);

backendTest("the margin losses free their intermediates at backward, with no await", async (d) => {
  const x = tensor(values([4, 6], 1620), { shape: [4, 6], device: d, requiresGrad: true });
  const a = tensor(values([4, 6], 1621), { shape: [4, 6], device: d, requiresGrad: true });
  const n = tensor(values([4, 6], 1622), { shape: [4, 6], device: d, requiresGrad: true });
  const i32 = (v: number[][] | number[]) => tensor(v, { dtype: "int32", device: d });
  const y = i32([0, 5, 2, 3]);
  const labels = i32([[0, 1, -1, 0, 0, 0], [5, -1, 0, 0, 0, 0], [1, 2, 3, 4, 5, 0], [
    -1,
    0,
    0,
    0,
    0,
    0,
  ]]);
  const signs = tensor([1, -1, 1, -1, 1, -1], { device: d });
  const w = tensor([1, 2, 3, 4, 5, 6], { device: d });
  const losses: Record<string, () => Tensor> = {
    multiMarginLoss: () => F.multiMarginLoss(x, y, { p: 2, weight: w }),
    multilabelMarginLoss: () => F.multilabelMarginLoss(x, labels),
    hingeEmbeddingLoss: () => F.hingeEmbeddingLoss(x, signs),
    tripletMarginWithDistanceLoss: () => F.tripletMarginWithDistanceLoss(x, a, n, { swap: true }),
  };
  for (const [name, loss] of Object.entries(losses)) {
    // A first step makes the gradients (accumulated in place after it) and cached constants.
    const first = loss();
    first.backward();
    await first.data();
    first.dispose();
    const base = d.memory().bytesInUse;
    const out = loss();
    out.backward();
    out.dispose();
    assert.equal(d.memory().bytesInUse, base, `${name} left memory behind`);
  }
  // A user's distance runs outside the scope: what it keeps stays usable.
  let cached: Tensor | null = null;
  const l1 = (u: Tensor, v: Tensor) => {
    cached ??= tensor(0.5, { device: d });
    return u.sub(v).abs().sum(-1).add(cached);
  };
  for (let k = 0; k < 2; k++) {
    assert.ok(
      Number.isFinite(
        await F.tripletMarginWithDistanceLoss(x, a, n, { distanceFunction: l1 }).item(),
      ),
    );
  }
});

backendTest("ctcLoss never reads logProbs past an input's length", async (d) => {
  // Padding past the lengths (NaN here) changes neither the loss nor the gradient before it.
  const T = 9, N = 3, C = 5;
  const clean = values([T, N, C], 1623);
  const lengths = [9, 4, 6];
  const padded = clean.map((v, i) =>
    Math.floor(i / (N * C)) >= lengths[Math.floor(i / C) % N] ? NaN : v
  );
  const targets = tensor([[1, 2, 2], [3, 0, 0], [4, 4, 1]], { dtype: "int32", device: d });
  const run = async (data: number[]) => {
    const x = tensor(data, { shape: [T, N, C], device: d, requiresGrad: true });
    const loss = F.ctcLoss(x.logSoftmax(2), targets, lengths, [3, 1, 3], { reduction: "sum" });
    loss.backward();
    const grad = [...await x.grad!.data()].map((g, i) => Number.isNaN(padded[i]) ? 0 : g);
    return [await loss.item(), ...grad];
  };
  const want = await run(clean);
  const got = await run(padded);
  assert.ok(want.every(Number.isFinite));
  assertClose(got, want, { atol: 1e-6, rtol: 1e-6, what: "loss and gradient" });
});

// ---- float64 gradient checks (cpu) ----

// Through logSoftmax: PyTorch's extra exp(lp) term cancels there, so the
// gradient is the loss's own. Repeated labels, blank 2, unequal lengths, an
// empty target and an impossible sample zeroed by zeroInfinity.
const ctcTargets = tensor([[1, 1, 3], [0, 0, 0], [3, 1, 0], [1, 1, 1]], { dtype: "int32" });
check(
  "ctcLoss through logSoftmax (mean, zeroInfinity)",
  (x) =>
    F.ctcLoss(x.logSoftmax(2), ctcTargets, [7, 5, 6, 4], [3, 0, 2, 3], {
      blank: 2,
      zeroInfinity: true,
    }),
  [inp([7, 4, 4], 1700)],
  { tol: 1e-5 },
);
check(
  "ctcLoss unbatched, a label equal to the blank",
  (x) => F.ctcLoss(x.logSoftmax(1), tensor([2, 2, 0], { dtype: "int32" }), 6, 3),
  [inp([6, 3], 1701)],
  { tol: 1e-5 },
);
check(
  "multiMarginLoss p=1",
  (x) => F.multiMarginLoss(x, tensor([0, 2, 3], { dtype: "int32" }), { reduction: "none" }),
  [inp([3, 4], 1702)],
);
check(
  "multiMarginLoss p=2 weight margin",
  (x, w) =>
    F.multiMarginLoss(x, tensor([1, 0, 3], { dtype: "int32" }), { p: 2, margin: 0.6, weight: w }),
  [inp([3, 4], 1703), inp([4], 1704, 0.5, 2)],
);
check(
  "multilabelMarginLoss",
  (x) =>
    F.multilabelMarginLoss(
      x,
      tensor([[3, 0, -1, 1], [2, 2, 1, 0], [-1, 0, 0, 0]], { dtype: "int32" }),
      { reduction: "sum" },
    ),
  [inp([3, 4], 1705)],
);
check(
  "hingeEmbeddingLoss",
  (x) => F.hingeEmbeddingLoss(x, tensor([[1, -1, -1], [-1, 1, 0]]), { margin: 1.5 }),
  [inp([2, 3], 1706)],
);
check(
  "tripletMarginWithDistanceLoss default",
  (a, p, n) => F.tripletMarginWithDistanceLoss(a, p, n, { margin: 3, reduction: "none" }),
  [inp([3, 4], 1707), inp([3, 4], 1708), inp([3, 4], 1709)],
);
check(
  "tripletMarginWithDistanceLoss custom swap",
  (a, p, n) =>
    F.tripletMarginWithDistanceLoss(a, p, n, {
      distanceFunction: (u, v) => u.sub(v).square().sum(-1),
      margin: 4,
      swap: true,
    }),
  [inp([3, 4], 1710), inp([3, 4], 1711), inp([3, 4], 1712)],
);
