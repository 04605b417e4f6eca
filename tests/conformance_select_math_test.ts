/**
 * Conformance of the selection ops (`where`, `maskedFill`, `gather`,
 * `select`) and the extra elementwise math (`sin cos floor ceil round sign
 * log1p expm1 rsqrt reciprocal square`) on every backend against the cpu
 * reference, NaN and infinity included, plus hand-computed values.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, gather, maskedFill, select, type Tensor, tensor, where } from "../mod.ts";
import {
  assertClose,
  assertTensor,
  backendTest,
  floats,
  ints,
  matchesCpu,
  on,
  REF,
} from "./harness.ts";

const MATH = [
  "sin",
  "cos",
  "floor",
  "ceil",
  "round",
  "sign",
  "log1p",
  "expm1",
  "rsqrt",
  "reciprocal",
  "square",
] as const;

/** NaN, infinities, signed zeros, halves, tiny and large values. */
const SPECIAL = [
  NaN,
  Infinity,
  -Infinity,
  -0,
  0,
  0.5,
  -0.5,
  1.5,
  -1.5,
  2.5,
  -2.5,
  1e-7,
  -1e-6,
  3e-4,
  -1,
  -2,
  -0.75,
  0.9,
  30,
  100,
  -100,
];

for (const op of MATH) {
  backendTest(`math ${op} float32: NaN, inf, zeros, halves, tiny, wide`, async (d) => {
    await matchesCpu(d, (dev) => on(dev, [SPECIAL.length], SPECIAL)[op](), { what: op });
    await matchesCpu(d, (dev) => on(dev, [4, 5, 6], floats([4, 5, 6], 300, -10, 10))[op](), {
      what: op,
      atol: 2e-6,
    });
    // Tiny magnitudes: relative accuracy where a naive formula cancels.
    await matchesCpu(d, (dev) => on(dev, [64], floats([64], 301, -1e-3, 1e-3))[op](), {
      what: `${op} near 0`,
      atol: 0,
      rtol: 2e-6,
    });
  });
}

backendTest(
  "math hand-computed: round half to even, sign of NaN, log1p/expm1 accuracy",
  async (d) => {
    await assertTensor(on(d, [8], [0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, 2.4999998]).round(), [
      0,
      2,
      2,
      4,
      -0,
      -2,
      -2,
      2,
    ], { what: "round" });
    await assertTensor(on(d, [5], [NaN, -3, -0, 0, 7]).sign(), [0, -1, 0, 0, 1], { what: "sign" });
    await assertTensor(on(d, [4], [-1.5, -0.5, 0.5, 1.5]).floor(), [-2, -1, 0, 1], {
      what: "floor",
    });
    await assertTensor(on(d, [4], [-1.5, -0.5, 0.5, 1.5]).ceil(), [-1, -0, 1, 2], { what: "ceil" });
    const tiny = [1e-10, -1e-8, 1e-5, 0.25];
    await assertTensor(on(d, [4], tiny).log1p(), tiny.map(Math.log1p), {
      what: "log1p",
      atol: 0,
      rtol: 1e-6,
    });
    await assertTensor(on(d, [4], tiny).expm1(), tiny.map(Math.expm1), {
      what: "expm1",
      atol: 0,
      rtol: 1e-6,
    });
    await assertTensor(on(d, [4], [-1, -2, 0, Infinity]).log1p(), [-Infinity, NaN, 0, Infinity], {
      what: "log1p edges",
    });
    await assertTensor(on(d, [4], [4, 0, -1, Infinity]).rsqrt(), [0.5, Infinity, NaN, 0], {
      what: "rsqrt edges",
    });
    await assertTensor(on(d, [3], [4, -0.5, 0]).reciprocal(), [0.25, -2, Infinity], {
      what: "reciprocal",
    });
    await assertTensor(on(d, [3], [Infinity, -Infinity, NaN]).sin(), [NaN, NaN, NaN], {
      what: "sin of inf",
    });
    await assertTensor(on(d, [2], [0, Math.PI / 3]).cos(), [1, 0.5], { what: "cos", atol: 1e-6 });
  },
);

backendTest("math int32: floor ceil round sign square keep int32, exact", async (d) => {
  const v = [-46341, -7, -1, 0, 1, 9, 46341];
  const out = await matchesCpu(d, (dev) => {
    const x = on(dev, [v.length], v, "int32");
    return [x.floor(), x.ceil(), x.round(), x.sign(), x.square()];
  }, { exact: true });
  for (const t of out) assert.equal(t.dtype, "int32");
  // 46341^2 = 2147488281 wraps past 2^31 as int32 arithmetic does.
  await assertTensor(out[4], [-2147479015, 49, 1, 0, 1, 81, -2147479015], { what: "square wraps" });
  assert.throws(() => on(d, [1], [1], "int32").sin(), /floating-point/);
});

// ---- where and maskedFill ----

backendTest("where: broadcast of all three, numbers, float and int32 conditions", async (d) => {
  await matchesCpu(d, (dev) => {
    const cond = on(dev, [3, 1, 5], ints([3, 1, 5], 310, 0, 2));
    const a = on(dev, [4, 1], floats([4, 1], 311));
    const b = on(dev, [5], floats([5], 312));
    const intCond = on(dev, [4, 5], ints([4, 5], 313, -1, 2), "int32");
    const ia = on(dev, [4, 5], ints([4, 5], 314, -9, 9), "int32");
    return [
      where(cond, a, b),
      where(cond.gt(0.5), b, a),
      where(intCond, ia, 7),
      where(intCond.eq(0), -1.5, a),
      where(cond, 1, 0),
      a.where(b.gt(0), 0),
    ];
  }, { exact: true });
  const c = on(d, [5], [NaN, -0, 0, 2, -Infinity]);
  await assertTensor(where(c, 1, 2), [1, 2, 2, 1, 1], { what: "NaN is true, -0 false" });
  const out = where(on(d, [2], [1, 0], "int32"), on(d, [2], [1, 2], "int32"), 0.5);
  assert.equal(out.dtype, "float32", "int32 and a fractional number promote");
  await assertTensor(out, [1, 0.5]);
  assert.equal(where(c, 1, 0).dtype, "int32");
  // A large strided case (general kernel path, several workgroups).
  await matchesCpu(d, (dev) => {
    const x = on(dev, [7, 33, 20], floats([7, 33, 20], 315));
    const y = on(dev, [7, 1, 20], floats([7, 1, 20], 316));
    return where(x.gt(y), x, y.neg());
  }, { exact: true });
  assert.throws(() => where(c, on(d, [3], [1, 2, 3]), 0), /broadcast|shape/);
});

backendTest("where gradients go to the selected side, summed over broadcasts", async (d) => {
  const grads = (dev: Device): Tensor[] => {
    const a = on(dev, [4, 1], floats([4, 1], 320));
    const b = on(dev, [3, 4, 5], floats([3, 4, 5], 321));
    a.requiresGrad = true;
    b.requiresGrad = true;
    where(b.gt(a), a, b).mul(b).sum().backward();
    return [a.grad!, b.grad!];
  };
  const want = grads(REF);
  const got = grads(d);
  for (let i = 0; i < 2; i++) {
    assertClose(await got[i].data(), await want[i].data(), { what: `grad ${i}`, rtol: 1e-5 });
  }
});

backendTest("maskedFill with -inf gives a correct softmax and gradient", async (d) => {
  const scores = [[1, 2, 3, 4], [5, 1, 0, -2], [0, 0, 0, 0]];
  const mask = [[0, 0, 1, 1], [1, 0, 1, 0], [0, 0, 0, 1]];
  const x = on(d, [3, 4], scores.flat());
  const m = on(d, [3, 4], mask.flat());
  const p = x.maskedFill(m.gt(0), -Infinity).softmax(-1);
  const want = scores.flatMap((row, i) => {
    const e = row.map((v, j) => (mask[i][j] ? 0 : Math.exp(v - 5)));
    const s = e.reduce((u, v) => u + v, 0);
    return e.map((v) => v / s);
  });
  await assertTensor(p, want, { what: "masked softmax", atol: 1e-6 });
  // A causal mask broadcast over a batch, gradients vs cpu.
  const grads = (dev: Device): Tensor[] => {
    const s = on(dev, [2, 5, 5], floats([2, 5, 5], 330));
    s.requiresGrad = true;
    const i = tensor([0, 1, 2, 3, 4], { dtype: "int32", device: dev });
    const causal = i.reshape([1, 5]).gt(i.reshape([5, 1]));
    const probs = maskedFill(s, causal, -Infinity).softmax(2);
    probs.mul(on(dev, [2, 5, 5], floats([2, 5, 5], 331))).sum().backward();
    return [probs, s.grad!];
  };
  const [wp, wg] = grads(REF);
  const [gp, gg] = grads(d);
  assertClose(await gp.data(), await wp.data(), { what: "causal probs", atol: 1e-6 });
  assertClose(await gg.data(), await wg.data(), { what: "causal grads", atol: 1e-6 });
  const probs = await gp.data();
  assert.ok(probs.every((v) => !Number.isNaN(v)), "no NaN in a masked softmax");
  assert.equal(probs[1], 0, "masked above the diagonal");
  // Int32 tensors take integer fills; a mask must broadcast to the tensor.
  await assertTensor(on(d, [3], [1, 2, 3], "int32").maskedFill(on(d, [3], [1, 0, 1]), -7), [
    -7,
    2,
    -7,
  ]);
  assert.throws(() => x.maskedFill(on(d, [2, 3, 4], new Array(24).fill(1)), 0), /broadcast/);
  // A fraction truncates toward zero, as PyTorch's (tests/int_fill_test.ts).
  await assertTensor(on(d, [1], [1], "int32").maskedFill(on(d, [1], [1]), -0.5), [0]);
});

// ---- gather and select ----

backendTest(
  "gather along each dim, smaller index, repeats, int32; gradient scatter-adds",
  async (d) => {
    const x = floats([3, 4, 5], 340);
    const idx = (shape: number[], seed: number, size: number) => ints(shape, seed, 0, size);
    await matchesCpu(d, (dev) => {
      const t = on(dev, [3, 4, 5], x);
      const it = on(dev, [3, 4, 5], x.map((v) => Math.round(v * 10)), "int32");
      const i0 = on(dev, [6, 4, 5], idx([6, 4, 5], 341, 3), "int32");
      const i1 = on(dev, [2, 7, 3], idx([2, 7, 3], 342, 4), "int32");
      const i2 = on(dev, [3, 4, 1], idx([3, 4, 1], 343, 5), "int32");
      return [t.gather(0, i0), t.gather(1, i1), gather(t, -1, i2), it.gather(1, i1)];
    }, { exact: true });
    const m = on(d, [2, 3], [1, 2, 3, 4, 5, 6]);
    await assertTensor(m.gather(1, on(d, [2, 2], [2, 0, 1, 1], "int32")), [3, 1, 5, 5], {
      shape: [2, 2],
    });
    await assertTensor(m.gather(0, on(d, [1, 3], [1, 0, 1], "int32")), [4, 2, 6], {
      shape: [1, 3],
    });
    const grads = (dev: Device): Tensor => {
      const t = on(dev, [3, 4, 5], x);
      t.requiresGrad = true;
      const i1 = on(dev, [2, 9, 3], idx([2, 9, 3], 344, 4), "int32");
      t.gather(1, i1).mul(on(dev, [2, 9, 3], floats([2, 9, 3], 345))).sum().backward();
      return t.grad!;
    };
    assertClose(await grads(d).data(), await grads(REF).data(), {
      what: "gather grad",
      rtol: 1e-5,
    });
    // Hand-computed scatter-add: index [[0, 0, 2]] sends 1+2 to column 0 and 3 to column 2.
    const v = on(d, [1, 4], [0, 0, 0, 0]);
    v.requiresGrad = true;
    v.gather(1, on(d, [1, 3], [0, 0, 2], "int32")).mul(on(d, [1, 3], [1, 2, 3])).sum().backward();
    await assertTensor(v.grad!, [3, 0, 3, 0]);
    assert.throws(() => m.gather(1, on(d, [2, 2], [0, 1, 0, 1])), /int32/);
    assert.throws(() => m.gather(1, on(d, [3, 1], [0, 1, 0], "int32")), /does not fit/);
  },
);

backendTest("select removes the dim; comparison results work as masks", async (d) => {
  await matchesCpu(d, (dev) => {
    const t = on(dev, [3, 4, 5], floats([3, 4, 5], 350));
    return [t.select(0, 1), t.select(1, -1), select(t, 2, 4), t.select(2, 0).select(0, 2)];
  }, { exact: true });
  const m = on(d, [2, 3], [1, 2, 3, 4, 5, 6]);
  await assertTensor(m.select(1, 2), [3, 6], { shape: [2] });
  await assertTensor(m.select(0, -1), [4, 5, 6], { shape: [3] });
  assert.throws(() => m.select(1, 3), /out of range/);
  // relu written with a comparison mask, on every backend.
  await assertTensor(where(m.gt(3), m, 0), [0, 0, 0, 4, 5, 6]);
  await assertTensor(m.mul(m.le(2)), [1, 2, 0, 0, 0, 0]);
});
