/**
 * nn.init against PyTorch 1.13 (tests/fixtures/torch_toolkit.json `init`):
 * gains and fans exactly; for the random initialisations, the statistics of
 * the draw (bounds, mean, standard deviation) against PyTorch's formula and
 * against the statistics of PyTorch's own draw, on every backend. The
 * numbers themselves come from multigrad's generator and differ from
 * PyTorch's.
 */

import assert from "node:assert/strict";
import { full, manualSeed, nn, type Tensor, zeros } from "../mod.ts";
import { assertClose, backendTest } from "./harness.ts";
import fixtures from "./fixtures/torch_toolkit.json" with { type: "json" };

const { init } = nn;

Deno.test("calculateGain equals PyTorch's for every nonlinearity", () => {
  for (const c of fixtures.init.gains) {
    const gain = init.calculateGain(c.nonlinearity as nn.init.Nonlinearity, c.param ?? undefined);
    assertClose(gain, c.gain, { atol: 0, rtol: 1e-15, what: `${c.nonlinearity}(${c.param})` });
  }
  assert.equal(init.calculateGain("leakyRelu", 0.2), init.calculateGain("leaky_relu", 0.2));
  assert.equal(init.calculateGain("convTranspose2d"), 1);
  assert.throws(
    () => init.calculateGain("swish" as nn.init.Nonlinearity),
    /unsupported nonlinearity "swish"/,
  );
  assert.throws(() => init.calculateGain("leaky_relu", NaN), /negative_slope NaN/);
});

Deno.test("calculateFanInAndFanOut: channels times the receptive field, as PyTorch", () => {
  for (const c of fixtures.init.fans) {
    assert.deepEqual(init.calculateFanInAndFanOut(zeros(c.shape)), [c.fan_in, c.fan_out]);
  }
  assert.throws(
    () => init.calculateFanInAndFanOut(zeros([5])),
    /fewer than 2 dimensions \(got shape \[5\]\)/,
  );
});

async function statistics(t: Tensor) {
  const values = Array.from(await t.data());
  const n = values.length;
  const mean = values.reduce((a, v) => a + v, 0) / n;
  // Unbiased, as torch.std.
  const variance = values.reduce((a, v) => a + (v - mean) ** 2, 0) / (n - 1);
  return {
    n,
    mean,
    std: Math.sqrt(variance),
    min: values.reduce((a, v) => Math.min(a, v), Infinity),
    max: values.reduce((a, v) => Math.max(a, v), -Infinity),
  };
}

const initFunctions: Record<string, (t: Tensor, options: Record<string, unknown>) => Tensor> = {
  uniform_: init.uniform_,
  normal_: init.normal_,
  xavierUniform_: init.xavierUniform_,
  xavierNormal_: init.xavierNormal_,
  kaimingUniform_: init.kaimingUniform_,
  kaimingNormal_: init.kaimingNormal_,
};
const camel = (name: string) => name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

for (const c of fixtures.init.cases) {
  backendTest(`init.${camel(c.function)} ${c.name}: PyTorch's distribution`, async (device) => {
    manualSeed(800);
    const t = full(c.shape, 7, { device });
    const fn = initFunctions[camel(c.function)];
    assert.equal(fn(t, c.options), t, "returns its argument");
    const s = await statistics(t);
    const torchStats = c.observed;
    // The spread of a standard deviation estimate is about std / √(2n): 2% is many of those.
    assertClose(s.std, c.std, { atol: 0, rtol: 0.02, what: "std vs PyTorch's formula" });
    assertClose(s.std, torchStats.std, { atol: 0, rtol: 0.02, what: "std vs PyTorch's draw" });
    assertClose(s.mean, c.mean, { atol: 6 * c.std / Math.sqrt(s.n), rtol: 0, what: "mean" });
    if (c.distribution === "uniform") {
      const range = c.high! - c.low!;
      assert.ok(s.min >= c.low! && s.max <= c.high!, `[${s.min}, ${s.max}] outside bounds`);
      // Uniform over the whole interval: the extremes come close to the bounds, as PyTorch's do.
      assertClose(s.min, torchStats.min, { atol: 0.002 * range, rtol: 0, what: "min" });
      assertClose(s.max, torchStats.max, { atol: 0.002 * range, rtol: 0, what: "max" });
    } else {
      // A normal draw of this size reaches past 3.5 std on both sides.
      assert.ok(s.min < c.mean - 3.5 * c.std && s.max > c.mean + 3.5 * c.std, "tails");
    }
    assert.ok(!t.requiresGrad && t.isLeaf);
  });
}

backendTest("init on a parameter: in place, no graph, same storage", async (device) => {
  const p = new nn.Parameter(zeros([4, 3], { device }));
  const storage = p.storage;
  init.constant_(p, 0.25);
  assert.equal(p.storage, storage);
  assert.ok(p.isLeaf && p.requiresGrad && p.gradFn === null);
  assert.deepEqual(Array.from(await p.data()), new Array(12).fill(0.25));
  init.ones_(p);
  assert.deepEqual(Array.from(await p.data()), new Array(12).fill(1));
  init.zeros_(p);
  assert.deepEqual(Array.from(await p.data()), new Array(12).fill(0));
  manualSeed(3);
  init.kaimingUniform_(p, { a: Math.sqrt(5) });
  const first = Array.from(await p.data());
  manualSeed(3);
  init.kaimingUniform_(p, { a: Math.sqrt(5) });
  assert.deepEqual(Array.from(await p.data()), first, "seeded");
  // fanIn 3 and a = √5: bound 1/√3.
  for (const v of first) assert.ok(Math.abs(v) <= 1 / Math.sqrt(3));
  // constant_ works on int32 tensors too.
  const ints = zeros([3], { device, dtype: "int32" });
  init.constant_(ints, 4);
  assert.deepEqual(Array.from(await ints.data()), [4, 4, 4]);
});

Deno.test("init: zero-element tensors are left alone by kaiming, as PyTorch", () => {
  const t = zeros([0, 3]);
  assert.equal(init.kaimingUniform_(t), t);
  assert.equal(init.kaimingNormal_(t, { mode: "fan_out" }), t);
});

Deno.test("init: errors name the function, the value and the shape", () => {
  assert.throws(() => init.uniform_(zeros([2]), { a: 2, b: 1 }), /uniform_: expects a <= b/);
  assert.throws(() => init.normal_(zeros([2]), { std: -1 }), /normal_: expects std >= 0/);
  assert.throws(
    () => init.kaimingUniform_(zeros([3, 2]), { mode: "fan_avg" as nn.init.FanMode }),
    /mode "fan_avg" not supported/,
  );
  assert.throws(() => init.xavierUniform_(zeros([4])), /fewer than 2 dimensions/);
  assert.throws(
    () => init.normal_(zeros([2], { dtype: "int32" })),
    /normal_: needs a floating-point tensor, got int32 of shape \[2\]/,
  );
  assert.throws(
    () => init.zeros_([1, 2] as unknown as Tensor),
    /zeros_|constant_: expected a Tensor/,
  );
  const gone = zeros([2]);
  gone.dispose();
  assert.throws(() => init.ones_(gone), /was disposed/);
});

backendTest("Linear's default init is PyTorch's reset_parameters", async (device) => {
  manualSeed(11);
  const layer = new nn.Linear(200, 300, { device });
  const w = await statistics(layer.weight);
  const b = await statistics(layer.bias!);
  const bound = 1 / Math.sqrt(200);
  assert.ok(w.min >= -bound && w.max <= bound && b.min >= -bound && b.max <= bound);
  assertClose(w.std, bound / Math.sqrt(3), { atol: 0, rtol: 0.02, what: "weight std" });
  assertClose(b.std, bound / Math.sqrt(3), { atol: 0, rtol: 0.15, what: "bias std" });
  // resetParameters draws again from the stream.
  const before = Array.from(await layer.bias!.data());
  layer.resetParameters();
  assert.notDeepEqual(Array.from(await layer.bias!.data()), before);
});
