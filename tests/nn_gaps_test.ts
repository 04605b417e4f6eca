/**
 * The nn gaps of wave s14 against PyTorch 1.13 (tests/fixtures/torch_nn_gaps.json)
 * on every backend: RReLU, FeatureAlphaDropout, FractionalMaxPool2d/3d
 * (fixed random samples, ties, NaN), MaxUnpool3d, the max pools with
 * indices, AdaptiveLogSoftmaxWithLoss, CrossMapLRN2d, pdist, the deprecated
 * upsample functions, the fusion utilities and the weight-norm
 * parametrization; plus skipInit and transferParametrizationsAndParams,
 * errors naming the bad value, and float64 gradient checks on cpu.
 * @module
 */

import assert from "node:assert/strict";
import {
  type Device,
  manualSeed,
  nn,
  noGrad,
  pdist,
  rand,
  randn,
  type Tensor,
  tensor,
} from "../mod.ts";
import { assertTensor, backendTest, decodeFixture, fixtureTensor, shapeOf } from "./harness.ts";
import { check, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_nn_gaps.json" with { type: "json" };

const F = nn.functional;

function tol(device: Device) {
  return device.backend === "cpu" ? { atol: 1e-5, rtol: 1e-5 } : { atol: 1e-4, rtol: 1e-4 };
}

type Values = Parameters<typeof decodeFixture>[0];

async function expectFixture(t: Tensor, expected: Values, device: Device, what: string) {
  await assertTensor(t, decodeFixture(expected), {
    ...tol(device),
    what,
    shape: shapeOf(expected),
  });
}

// ---------------------------------------------------------------- RReLU, FeatureAlphaDropout

for (const c of fixtures.rrelu) {
  backendTest(`RReLU(${c.lower}, ${c.upper}) in eval mode equals PyTorch's`, async (device) => {
    const m = new nn.RReLU({ lower: c.lower, upper: c.upper }).to(device).eval();
    assert.equal(m.toString(), c.repr);
    assert.deepEqual(Object.keys(m.stateDict()), []);
    const x = fixtureTensor(c.input, device, { requiresGrad: true });
    const out = m.forward(x);
    await expectFixture(out, c.output, device, "output");
    out.mul(fixtureTensor(c.g, device)).sum().backward();
    await expectFixture(x.grad!, c.grad, device, "grad");
  });
}

backendTest("rrelu in training draws slopes in [lower, upper] per element", async (device) => {
  manualSeed(5);
  const x = randn([64, 32], { device }).sub(0.5).detach();
  x.requiresGrad = true;
  const out = F.rrelu(x, { lower: 0.1, upper: 0.3, training: true });
  out.sum().backward();
  const [xs, ys, gs] = [await x.data(), await out.data(), await x.grad!.data()];
  const slopes = new Set<number>();
  for (let i = 0; i < xs.length; i++) {
    if (xs[i] > 0) {
      assert.equal(ys[i], xs[i]);
      assert.equal(gs[i], 1);
    } else {
      assert.ok(gs[i] >= 0.1 - 1e-7 && gs[i] <= 0.3 + 1e-7, `slope ${gs[i]}`);
      assert.ok(Math.abs(ys[i] - xs[i] * gs[i]) <= 1e-6 * (1 + Math.abs(ys[i])));
      slopes.add(gs[i]);
    }
  }
  assert.ok(slopes.size > 100, "each negative element draws its own slope");
});

backendTest(
  "FeatureAlphaDropout: reprs, eval identity, p = 1, one draw per channel",
  async (device) => {
    const c = fixtures.feature_alpha_dropout;
    assert.equal(new nn.FeatureAlphaDropout(0.2).toString(), c.repr);
    assert.equal(new nn.FeatureAlphaDropout().toString(), c.repr_default);
    const x = fixtureTensor(c.input, device);
    await expectFixture(F.featureAlphaDropout(x, 1, true), c.p1, device, "p = 1");
    const x1 = fixtureTensor(c.input1d, device);
    await expectFixture(F.featureAlphaDropout(x1, 1, true), c.p1_1d, device, "p = 1, 1-D");
    const m = new nn.FeatureAlphaDropout(0.5).eval();
    assert.equal(m.forward(x), x);
    manualSeed(3);
    const big = rand([8, 16, 3, 5], { device }).add(1);
    const y = await F.featureAlphaDropout(big, 0.4, true).data();
    const xs = await big.data();
    const alpha = 1.7580993408473766;
    const a = 1 / Math.sqrt((alpha * alpha * 0.4 + 1) * 0.6);
    let dropped = 0;
    for (let ch = 0; ch < 8 * 16; ch++) {
      const base = ch * 15;
      const isDropped = Math.abs(y[base] - -alpha * a * 0.6) < 1e-5;
      if (isDropped) dropped++;
      for (let j = 0; j < 15; j++) {
        const want = isDropped ? -alpha * a * 0.6 : xs[base + j] * a + alpha * a * 0.4;
        assert.ok(Math.abs(y[base + j] - want) < 1e-4, `channel ${ch}: ${y[base + j]} vs ${want}`);
      }
    }
    assert.ok(dropped > 25 && dropped < 80, `dropped ${dropped} of 128 channels`);
  },
);

// ---------------------------------------------------------------- pooling

for (const [k, c] of fixtures.fractional.cases.entries()) {
  backendTest(
    `fractionalMaxPool${c.dims}d case ${k}: output, indices, gradient`,
    async (device) => {
      const x = fixtureTensor(c.input, device, { requiresGrad: true });
      const randomSamples = fixtureTensor(c.samples, device);
      const options = {
        outputSize: c.outputSize as number | [number, number, number] | null,
        outputRatio: c.outputRatio as number | [number, number, number] | null,
        returnIndices: true as const,
        randomSamples,
      };
      const [out, indices] = c.dims === 2
        ? F.fractionalMaxPool2d(x, c.kernel as number | [number, number], {
          ...options,
          outputSize: options.outputSize as number | [number, number] | null,
          outputRatio: options.outputRatio as number | [number, number] | null,
        })
        : F.fractionalMaxPool3d(x, c.kernel as number | [number, number, number], options);
      await expectFixture(out, c.output, device, "output");
      assert.equal(indices.dtype, "int32");
      await expectFixture(indices, c.indices, device, "indices");
      out.mul(fixtureTensor(c.g, device)).sum().backward();
      await expectFixture(x.grad!, c.grad, device, "grad");
    },
  );
}

backendTest("FractionalMaxPool2d/3d modules: repr, _random_samples buffer", async (device) => {
  const f = fixtures.fractional;
  const m = new nn.FractionalMaxPool2d(2, { outputSize: 3, randomSamples: rand([1, 1, 2]) });
  assert.equal(m.toString(), f.repr2d);
  assert.deepEqual(Object.keys(m.stateDict()), f.keys2d);
  const m3 = new nn.FractionalMaxPool3d(2, { outputRatio: 0.5 });
  assert.equal(m3.toString(), f.repr3d);
  assert.deepEqual(Object.keys(m3.stateDict()), f.keys3d);
  const c = f.cases[0];
  const pool = new nn.FractionalMaxPool2d(c.kernel as [number, number], {
    outputSize: c.outputSize as [number, number],
    randomSamples: fixtureTensor(c.samples, device),
  }).to(device);
  await expectFixture(
    pool.forward(fixtureTensor(c.input, device)) as Tensor,
    c.output,
    device,
    "module",
  );
  // Without samples: new windows per call, always the right shape and values from the input.
  const y = new nn.FractionalMaxPool3d(2, { outputSize: [3, 4, 4] }).forward(
    randn([2, 3, 5, 9, 9], { device }),
  ) as Tensor;
  assert.deepEqual(y.shape, [2, 3, 3, 4, 4]);
  // The module's returnIndices, unbatched, and seeded draws: the same windows again.
  const c2 = f.cases[2];
  const [out, indices] = new nn.FractionalMaxPool2d(2, {
    outputSize: 5,
    returnIndices: true,
    randomSamples: fixtureTensor(c2.samples, device),
  }).forward(fixtureTensor(c2.input, device)) as [Tensor, Tensor];
  await expectFixture(out, c2.output, device, "unbatched module output");
  await expectFixture(indices, c2.indices, device, "unbatched module indices");
  const draw = () => {
    manualSeed(21);
    return F.fractionalMaxPool2d(fixtureTensor(c2.input, device), 2, { outputSize: 4 }).data();
  };
  assert.deepEqual([...await draw()], [...await draw()]);
});

Deno.test("fractionalMaxPool3d: output + kernel - 1 must stay below the input, as 1.13", () => {
  // 1.13's 3-d check is strict where its 2-d one allows equality.
  for (const c of fixtures.fractional.errors3d) {
    assert.ok(c.error, "PyTorch rejects every case");
    const [n, ch, d, h, w] = c.shape;
    assert.throws(
      () =>
        F.fractionalMaxPool3d(randn([n, ch, d, h, w]), c.kernel as number, {
          outputSize: c.outputSize as [number, number, number],
          randomSamples: rand([n, ch, 3]),
        }),
      /too large for input of shape .*output \+ kernel - 1 = \d+ >= \d+/,
    );
  }
  const x = randn([1, 1, 4, 5, 6]);
  assert.deepEqual(F.fractionalMaxPool3d(x, 2, { outputSize: [2, 3, 4] }).shape, [1, 1, 2, 3, 4]);
});

backendTest(
  "fractionalMaxPool2d/3d accept what PyTorch's functional form accepts",
  async (device) => {
    // outputSize wins over outputRatio, a ratio of 1 and an output size of 0 pass.
    for (const c of fixtures.fractional.lenient) {
      const x = fixtureTensor(c.input, device);
      const options = {
        outputSize: c.outputSize as [number, number, number] | null,
        outputRatio: c.outputRatio,
        returnIndices: true as const,
        randomSamples: fixtureTensor(c.samples, device),
      };
      const [out, indices] = c.dims === 2
        ? F.fractionalMaxPool2d(x, c.kernel, {
          ...options,
          outputSize: options.outputSize as [number, number] | null,
        })
        : F.fractionalMaxPool3d(x, c.kernel, options);
      assert.deepEqual(out.shape, c.outShape);
      assert.deepEqual(indices.shape, c.outShape);
      assert.equal(indices.dtype, "int32");
      await assertTensor(out, decodeFixture(c.output), { ...tol(device), what: "output" });
      await assertTensor(indices, decodeFixture(c.indices), { what: "indices" });
    }
  },
);

Deno.test("fractionalMaxPool2d: an empty non-batch dim is an error, as PyTorch", () => {
  for (const c of fixtures.fractional.empty) {
    const run = () => F.fractionalMaxPool2d(randn(c.shape), 1, { outputSize: [1, 3] });
    if (c.error) {
      const dim = c.shape.findIndex((s, i) => i > 0 && s === 0);
      assert.throws(run, new RegExp(`non-zero size .*\\[${c.shape.join(", ")}\\].* dim ${dim}`));
    } else assert.deepEqual(run().shape, c.outShape);
  }
});

for (const [k, c] of fixtures.with_indices.entries()) {
  backendTest(`${c.fn} case ${k}: output, indices, gradient`, async (device) => {
    const x = fixtureTensor(c.input, device, { requiresGrad: true });
    const fn = (F as unknown as Record<string, (...a: unknown[]) => [Tensor, Tensor]>)[c.fn];
    const [out, indices] = fn(x, ...c.args, ...(c.fn.startsWith("adaptive") ? [] : [c.options]));
    await expectFixture(out, c.output, device, "output");
    assert.equal(indices.dtype, "int32");
    await expectFixture(indices, c.indices, device, "indices");
    out.mul(fixtureTensor(c.g, device)).sum().backward();
    await expectFixture(x.grad!, c.grad, device, "grad");
  });
}

for (const [k, c] of fixtures.max_unpool3d.entries()) {
  backendTest(`MaxUnpool3d case ${k}: output and gradient`, async (device) => {
    const m = new nn.MaxUnpool3d(
      c.kernel as number | [number, number, number],
      c.options as { stride?: [number, number, number]; padding?: number },
    );
    assert.equal(m.toString(), c.repr);
    const x = fixtureTensor(c.input, device, { requiresGrad: true });
    const indices = fixtureTensor(c.indices, device, { dtype: "int32" });
    const out = m.forward(x, indices, c.outputSize);
    await expectFixture(out, c.output, device, "output");
    out.mul(fixtureTensor(c.g, device)).sum().backward();
    await expectFixture(x.grad!, c.grad, device, "grad");
  });
}

// ---------------------------------------------------------------- AdaptiveLogSoftmaxWithLoss

for (const [k, c] of fixtures.adaptive_softmax.entries()) {
  backendTest(
    `AdaptiveLogSoftmaxWithLoss case ${k}: forward, gradients, logProb, predict`,
    async (device) => {
      const m = new nn.AdaptiveLogSoftmaxWithLoss(c.inFeatures, c.nClasses, c.cutoffs, {
        divValue: c.divValue,
        headBias: c.headBias,
      });
      assert.equal(m.toString(), c.repr);
      assert.deepEqual(Object.keys(m.stateDict()), c.keys);
      m.loadStateDict(
        Object.fromEntries(
          Object.entries(c.params).map((
            [name, v],
          ) => {
            // A zero-size weight comes as [] (shape [0]): take the model's shape.
            const shape = m.stateDict()[name].shape;
            return [name, fixtureTensor(v as Values, m.head.weight.device).reshape(shape)];
          }),
        ),
      );
      m.to(device);
      const x = fixtureTensor(c.input, device, { requiresGrad: true });
      const target = fixtureTensor(c.target, device, { dtype: "int32" });
      const { output, loss } = m.forward(x, target);
      await expectFixture(output, c.output, device, "output");
      await assertTensor(loss, decodeFixture([c.loss]), { ...tol(device), what: "loss" });
      output.mul(fixtureTensor(c.g, device)).sum().add(loss.mul(0.5)).backward();
      await expectFixture(x.grad!, c.grad_input, device, "input grad");
      for (const [name, p] of m.namedParameters()) {
        if (p.numel() === 0) {
          assert.deepEqual(p.grad?.shape, p.shape, `${name} grad shape`);
          continue;
        }
        await expectFixture(
          p.grad!,
          (c.grad_params as Record<string, Values>)[name],
          device,
          `${name} grad`,
        );
      }
      const batched = x.ndim === 1 ? x.detach().unsqueeze(0) : x.detach();
      await expectFixture(m.logProb(batched), c.log_prob, device, "logProb");
      const predicted = m.predict(batched);
      assert.equal(predicted.dtype, "int32");
      await expectFixture(predicted, c.predict, device, "predict");
    },
  );
}

backendTest(
  "AdaptiveLogSoftmaxWithLoss: a target out of range rejects naming it",
  async (device) => {
    const m = new nn.AdaptiveLogSoftmaxWithLoss(4, 6, [2]).to(device);
    // Host-known indices throw at once; ones the device computed reject at the next read.
    const computed = tensor([1, 3], { dtype: "int32", device }).mul(2);
    await assert.rejects(async () => {
      const { loss } = m.forward(randn([2, 4], { device }), computed);
      await loss.data();
    }, /target value 6 is outside \[0, 5\]/);
    assert.throws(
      () => m.forward(randn([2, 4], { device }), tensor([-1, 0], { dtype: "int32", device })),
      /target value -1 is outside \[0, 5\]/,
    );
  },
);

Deno.test("AdaptiveLogSoftmaxWithLoss: bad cutoffs, shapes and dtypes name the value", () => {
  assert.throws(() => new nn.AdaptiveLogSoftmaxWithLoss(4, 6, [3, 2]), /cutoffs .*\[3,2\]/);
  assert.throws(
    () => new nn.AdaptiveLogSoftmaxWithLoss(4, 6, [6]),
    /between 1 and nClasses-1 \(5\)/,
  );
  const m = new nn.AdaptiveLogSoftmaxWithLoss(4, 6, [2]);
  assert.throws(
    () => m.forward(randn([3, 4]), tensor([1, 2], { dtype: "int32" })),
    /\[2\].*\[3, 4\]/,
  );
  assert.throws(() => m.forward(randn([2, 4]), tensor([1, 2])), /int32 class indices, got float32/);
  assert.throws(() => m.logProb(randn([2, 5])), /\[2, 5\] does not end in inFeatures 4/);
});

// ---------------------------------------------------------------- CrossMapLRN2d, pdist, upsample

for (const c of fixtures.cross_map_lrn) {
  backendTest(`CrossMapLRN2d(${c.size}) forward equals PyTorch's`, async (device) => {
    const m = new nn.CrossMapLRN2d(c.size, { alpha: c.alpha, beta: c.beta, k: c.k });
    assert.equal(m.toString(), c.repr);
    await expectFixture(m.forward(fixtureTensor(c.input, device)), c.output, device, "output");
  });
}

for (const c of fixtures.pdist) {
  const rows = `rows ${shapeOf(c.input)[0]}${"special" in c ? ", inf and NaN" : ""}`;
  backendTest(`pdist p=${c.p} (${rows}) equals PyTorch's`, async (device) => {
    const x = fixtureTensor(c.input, device, { requiresGrad: true });
    const p = Number(c.p);
    const out = F.pdist(x, { p });
    await expectFixture(out, c.output, device, "output");
    if (out.numel() === 0) return;
    out.mul(fixtureTensor(c.g, device)).sum().backward();
    await expectFixture(x.grad!, c.grad as Values, device, "grad");
    await expectFixture(pdist(x.detach(), { p }), c.output, device, "torch.pdist");
  });
}

backendTest("upsample, upsampleNearest, upsampleBilinear equal PyTorch's", async (device) => {
  const c = fixtures.upsample;
  const x = fixtureTensor(c.input, device);
  await expectFixture(
    F.upsample(x, { scaleFactor: 2, mode: "bilinear", alignCorners: false }),
    c.upsample,
    device,
    "upsample",
  );
  await expectFixture(F.upsampleNearest(x, { size: [5, 7] }), c.nearest, device, "nearest");
  await expectFixture(F.upsampleBilinear(x, { scaleFactor: 2 }), c.bilinear, device, "bilinear");
});

// ---------------------------------------------------------------- utils

for (const c of fixtures.fusion) {
  backendTest(
    `fuse ${c.kind} (bias ${c.bias}, affine ${c.affine}) with a batch norm`,
    async (device) => {
      const layer = c.kind === "Conv2d"
        ? new nn.Conv2d(3, 4, 3, { bias: c.bias })
        : c.kind === "ConvTranspose2d"
        ? new nn.ConvTranspose2d(3, 4, 2, { bias: c.bias })
        : new nn.Linear(5, 4, { bias: c.bias });
      const bn = c.kind === "Linear"
        ? new nn.BatchNorm1d(4)
        : new nn.BatchNorm2d(4, { affine: c.affine });
      const load = (m: nn.Module, values: Record<string, Values>) =>
        m.loadStateDict(
          Object.fromEntries(
            Object.entries(values).map((
              [n, v],
            ) => [n, fixtureTensor(v, m.parameters()[0]?.device ?? device)]),
          ),
          { strict: false },
        );
      load(layer, c.layer as Record<string, Values>);
      load(bn, c.bn as Record<string, Values>);
      layer.to(device).eval();
      bn.to(device).eval();
      const fused = c.kind === "Linear"
        ? nn.utils.fuseLinearBnEval(layer, bn)
        : nn.utils.fuseConvBnEval(layer, bn, { transpose: c.kind === "ConvTranspose2d" });
      assert.notEqual(fused, layer);
      const f = fused as unknown as { weight: Tensor; bias: Tensor };
      await expectFixture(f.weight, c.fused_weight, device, "fused weight");
      await expectFixture(f.bias, c.fused_bias, device, "fused bias");
      const x = fixtureTensor(c.input, device);
      await expectFixture(fused.forward(x) as Tensor, c.fused_output, device, "fused output");
      await expectFixture(bn.forward(layer.forward(x) as Tensor), c.expected, device, "unfused");
    },
  );
}

Deno.test("fusion: training modules and mismatched shapes are errors", () => {
  const conv = new nn.Conv2d(3, 4, 3);
  const bn = new nn.BatchNorm2d(4);
  assert.throws(() => nn.utils.fuseConvBnEval(conv, bn), /fusion only for eval/);
  const w = randn([5, 3, 3, 3]);
  assert.throws(
    () => nn.utils.fuseConvBnWeights(w, null, randn([4]), rand([4]), 1e-5, null, null),
    /\[5, 3, 3, 3\] does not have the 4 output channels/,
  );
  assert.throws(
    () =>
      nn.utils.fuseLinearBnWeights(
        randn([3, 2]),
        null,
        randn([4]),
        rand([4]),
        1e-5,
        randn([4]),
        randn([4]),
      ),
    /\[3, 2\] does not have the 4 output features/,
  );
});

for (const [k, c] of fixtures.weight_norm.entries()) {
  backendTest(`parametrizations.weightNorm case ${k} (dim ${c.dim})`, async (device) => {
    const m = c.shape.length === 2
      ? new nn.Linear(c.shape[1], c.shape[0], { bias: false })
      : new nn.Conv2d(c.shape[1], c.shape[0], 2, { bias: false });
    noGrad(() => (m as nn.Linear).weight.copy_(fixtureTensor(c.weight, m.parameters()[0].device)));
    m.to(device);
    const p = nn.utils.parametrizations.weightNorm(m, "weight", { dim: c.dim });
    assert.deepEqual(Object.keys(p.stateDict()), [
      "parametrizations.weight.original0",
      "parametrizations.weight.original1",
    ]);
    assert.ok(p.toString().includes("(0): _WeightNorm()"));
    const list = p.parametrizations.get("weight") as nn.utils.parametrize.ParametrizationList;
    const [g, v] = list.originals();
    await expectFixture(g, c.original0, device, "original0");
    await expectFixture(v, c.original1, device, "original1");
    const out = p.forward(fixtureTensor(c.input, device)) as Tensor;
    await expectFixture(out, c.output, device, "output");
    out.mul(fixtureTensor(c.g, device)).sum().backward();
    await expectFixture(g.grad!, c.grad0 as Values, device, "grad original0");
    await expectFixture(v.grad!, c.grad1 as Values, device, "grad original1");
  });
}

Deno.test("skipInit builds the module and leaves the random stream where it was", async () => {
  manualSeed(11);
  const before = await rand([4]).data();
  manualSeed(11);
  const m = nn.utils.skipInit(nn.Linear, 5, 3, { bias: true });
  assert.ok(m instanceof nn.Linear);
  assert.deepEqual(m.weight.shape, [3, 5]);
  const after = await rand([4]).data();
  assert.deepEqual([...after], [...before]);
  assert.throws(
    () => nn.utils.skipInit(Object as unknown as typeof nn.Linear, 1, 1),
    /expected a Module class/,
  );
});

Deno.test("transferParametrizationsAndParams shares parametrizations and originals", async () => {
  const P = nn.utils.parametrize;
  const from = nn.utils.parametrizations.weightNorm(new nn.Linear(3, 4));
  const to = new nn.Linear(3, 4);
  const out = P.transferParametrizationsAndParams(from, to);
  assert.equal(out, to);
  assert.ok(P.isParametrized(to, "weight"));
  assert.equal(P.typeBeforeParametrizations(to), nn.Linear);
  assert.deepEqual(Object.keys(to.stateDict()), Object.keys(from.stateDict()));
  const a = from.parametrizations.get("weight") as nn.utils.parametrize.ParametrizationList;
  const b = (to as unknown as { parametrizations: nn.ModuleDict }).parametrizations.get(
    "weight",
  ) as nn.utils.parametrize.ParametrizationList;
  assert.equal(b.originals()[0], a.originals()[0]);
  assert.equal(b.originals()[1], a.originals()[1]);
  assert.equal(b.at(0), a.at(0));
  assert.deepEqual([...await (to as nn.Linear).weight.data()], [
    ...await (from as nn.Linear).weight.data(),
  ]);
  // A module without the tensor gets it; an unknown name is an error naming it.
  const bare = new nn.Identity();
  P.transferParametrizationsAndParams(from, bare, "weight");
  assert.deepEqual((bare as unknown as { weight: Tensor }).weight.shape, [4, 3]);
  assert.throws(
    () => P.transferParametrizationsAndParams(from, new nn.Linear(3, 4), "bias"),
    /"bias"/,
  );
  // Not parametrized: nothing happens.
  const plain = new nn.Linear(3, 4);
  assert.equal(P.transferParametrizationsAndParams(new nn.Linear(3, 4), plain), plain);
  assert.ok(!P.isParametrized(plain));
});

// ---------------------------------------------------------------- errors

Deno.test("nn gaps: bad input is an error naming the value", () => {
  const x = randn([1, 2, 5, 5]);
  assert.throws(() => F.rrelu(x, { lower: 0.5, upper: 0.1 }), /lower bound 0.5 .* upper bound 0.1/);
  assert.throws(() => new nn.RReLU({ lower: 0.5, upper: 0.1 }), /0.5.*0.1/);
  assert.throws(() => F.featureAlphaDropout(x, 1.5, true), /between 0 and 1, but got 1.5/);
  assert.throws(() => F.featureAlphaDropout(randn([4]), 0.5, true), /at least 2 dimensions.*\[4\]/);
  assert.throws(
    () => F.fractionalMaxPool2d(x, 2, { outputSize: 5 }),
    /output \+ kernel - 1 = 6 > 5/,
  );
  assert.throws(() => F.fractionalMaxPool2d(x, 2, {}), /outputSize or outputRatio, got neither/);
  assert.throws(() => F.fractionalMaxPool2d(x, 2, { outputRatio: 1.5 }), /= 8 > 5/);
  assert.throws(() => F.fractionalMaxPool2d(x, 2, { outputRatio: -0.5 }), /outputRatio .*-0.5/);
  assert.throws(() => F.fractionalMaxPool2d(x, 2, { outputSize: -1 }), /outputSize .*-1/);
  assert.throws(
    () => new nn.FractionalMaxPool2d(2, { outputSize: 2, outputRatio: 0.5 }),
    /exactly one of/,
  );
  assert.throws(() => new nn.FractionalMaxPool2d(2, { outputRatio: 1 }), /between 0 and 1, got 1/);
  assert.throws(
    () => F.fractionalMaxPool2d(x, 2, { outputSize: 2, randomSamples: rand([1, 2, 3]) }),
    /randomSamples of shape \[1, 2, 3\] must be \[1, 2, 2\]/,
  );
  assert.throws(() => new nn.FractionalMaxPool2d(2, {}), /exactly one of/);
  assert.throws(() => F.maxPool3dWithIndices(randn([2, 3]), 2), /shape \[2, 3\]/);
  assert.throws(() => F.adaptiveMaxPool2dWithIndices(x, [0, 2]), /outputSize .*\[0,2\]/);
  assert.throws(
    () => F.maxUnpool3d(randn([1, 1, 2, 2, 2]), tensor([0], { dtype: "int32" }), 2),
    /indices of shape \[1\]/,
  );
  assert.throws(() => new nn.CrossMapLRN2d(3).forward(randn([2, 3, 4])), /4-D input .*\[2, 3, 4\]/);
  assert.throws(() => F.pdist(randn([2, 3, 4])), /2D tensors .*\[2, 3, 4\]/);
  assert.throws(() => F.pdist(randn([2, 3]), { p: -1 }), /non-negative p values, got -1/);
  assert.throws(() => pdist(tensor([[1, 2]], { dtype: "int32" })), /int32/);
  const W = nn.utils.parametrizations.weightNorm;
  assert.throws(() => W(new nn.Linear(2, 2), "nope"), /no parameter or buffer named 'nope'/);
  assert.throws(() => W(new nn.Linear(2, 2), "weight", { dim: 2 }), /2/);
});

// ---------------------------------------------------------------- float64 gradient checks

check("rrelu (eval)", (x) => F.rrelu(x, { lower: 0.1, upper: 0.3 }), [inp([3, 5], 601)]);
check(
  "featureAlphaDropout (p = 0, identity)",
  (x) => F.featureAlphaDropout(x, 0, true).mul(1),
  [inp([2, 3, 2], 602)],
);
for (const p of [2, 1, 3, 0.7, Infinity]) {
  check(`pdist p=${p}`, (x) => F.pdist(x, { p }), [inp([4, 3], 603)]);
}
check(
  "CrossMapLRN2d(3)",
  (x) => new nn.CrossMapLRN2d(3, { alpha: 0.5, k: 2 }).to("float64").forward(x),
  [
    inp([2, 5, 2, 2], 604),
  ],
);
check("CrossMapLRN2d(2)", (x) => new nn.CrossMapLRN2d(2, { alpha: 0.5, k: 2 }).forward(x), [
  inp([1, 4, 2, 1], 605),
]);
check(
  "fractionalMaxPool2d",
  (x) =>
    F.fractionalMaxPool2d(x, 2, {
      outputSize: [3, 3],
      randomSamples: tensor([[[0.3, 0.7], [0.9, 0.1]]], { dtype: "float64", device: x.device }),
    }),
  [inp([1, 2, 5, 6], 606)],
);
check(
  "fractionalMaxPool3d",
  (x) =>
    F.fractionalMaxPool3d(x, 2, {
      outputSize: [2, 2, 3],
      randomSamples: tensor([[[0.3, 0.7, 0.5]]], { dtype: "float64", device: x.device }),
    }),
  [inp([1, 1, 4, 4, 5], 607)],
);
check("maxPool3dWithIndices", (x) => F.maxPool3dWithIndices(x, 2, { padding: 1 })[0], [
  inp([1, 2, 3, 4, 3], 608),
]);
check("adaptiveMaxPool3dWithIndices", (x) => F.adaptiveMaxPool3dWithIndices(x, [2, 3, 2])[0], [
  inp([1, 2, 3, 4, 5], 609),
]);
check("adaptiveMaxPool1dWithIndices", (x) => F.adaptiveMaxPool1dWithIndices(x, 3)[0], [
  inp([2, 7], 610),
]);
check(
  "maxUnpool3d",
  (x) => {
    const idx = tensor([0, 3, 9, 15], { dtype: "int32", device: x.device }).reshape([
      1,
      1,
      1,
      2,
      2,
    ]);
    return F.maxUnpool3d(x, idx, [1, 2, 2], { outputSize: [1, 4, 4] });
  },
  [inp([1, 1, 1, 2, 2], 611)],
);
check(
  "AdaptiveLogSoftmaxWithLoss output and loss",
  (x) => {
    manualSeed(7);
    const m = new nn.AdaptiveLogSoftmaxWithLoss(4, 7, [2, 4], { divValue: 2, dtype: "float64" });
    const { output, loss } = m.forward(x, tensor([0, 3, 6], { dtype: "int32" }));
    return output.add(loss);
  },
  [inp([3, 4], 612)],
);
check(
  "AdaptiveLogSoftmaxWithLoss.logProb",
  (x) => {
    manualSeed(8);
    return new nn.AdaptiveLogSoftmaxWithLoss(4, 7, [2, 4], { dtype: "float64" }).logProb(x);
  },
  [inp([2, 4], 613)],
);
check(
  "parametrizations.weightNorm",
  (g, v) => {
    const w = new nn.utils.parametrizations._WeightNorm(0).forward(g, v);
    return w;
  },
  [inp([3, 1], 614, 0.5, 2), inp([3, 4], 615)],
);
