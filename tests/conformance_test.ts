/**
 * The ops conformance suite, written once and run against every backend that
 * starts here. Each case runs the same op on the cpu reference and on the
 * backend's device and compares them; key cases also check hand-computed
 * values (which is what checks the cpu backend itself).
 * @module
 */

import assert from "node:assert/strict";
import {
  add,
  arange,
  cat,
  chunk,
  type Device,
  div,
  exp,
  eye,
  full,
  linear,
  linspace,
  manualSeed,
  matmul,
  maximum,
  minimum,
  ones,
  pow,
  rand,
  randn,
  split,
  stack,
  sub,
  type Tensor,
  tensor,
  uniform,
  zeros,
} from "../mod.ts";
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

// ---- factories and reading ----

backendTest("factories: full/zeros/ones/arange/tensor in float32 and int32", async (d) => {
  await assertTensor(full([2, 3], 7, { device: d }), [7, 7, 7, 7, 7, 7], { shape: [2, 3] });
  await assertTensor(full([2], -3, { device: d, dtype: "int32" }), [-3, -3]);
  await assertTensor(zeros([3], { device: d }), [0, 0, 0]);
  await assertTensor(ones([2, 2], { device: d, dtype: "int32" }), [1, 1, 1, 1]);
  const r = arange(5, undefined, 1, { device: d });
  assert.equal(r.dtype, "int32");
  await assertTensor(r, [0, 1, 2, 3, 4]);
  await assertTensor(arange(0, 1, 0.25, { device: d }), [0, 0.25, 0.5, 0.75]);
  const t = tensor([[1, 2], [3, 4]], { device: d, dtype: "int32" });
  assert.equal(t.device, d);
  assert.deepEqual(await t.toArray(), [[1, 2], [3, 4]]);
  assert.ok((await t.data()) instanceof Int32Array);
  assert.ok((await tensor([1.5], { device: d }).data()) instanceof Float32Array);
  const s = tensor(3, { device: d });
  assert.equal(s.ndim, 0);
  assert.equal(await s.item(), 3);
  assert.equal(await s.toArray(), 3);
});

// ---- elementwise binary ----

const A_SHAPE = [3, 1, 5];
const B_SHAPE = [4, 1];
const A = floats(A_SHAPE, 1);
const B = floats(B_SHAPE, 2);
/** Denominators away from zero. */
const B_DIV = floats(B_SHAPE, 3, 0.5, 2).map((v, i) => (i % 2 ? -v : v));

for (const op of ["add", "sub", "mul", "div", "maximum", "minimum"] as const) {
  backendTest(`binary ${op} float32 broadcast [3,1,5] with [4,1] (both orders)`, async (d) => {
    const right = op === "div" ? B_DIV : B;
    const out = await matchesCpu(d, (dev) => {
      const a = on(dev, A_SHAPE, A);
      const b = on(dev, B_SHAPE, right);
      return [a[op](b), b[op](a)];
    });
    assert.deepEqual([...out[0].shape], [3, 4, 5]);
    // Hand-computed at one position: a[2, 0, 3] op b[1, 0].
    const x = A[2 * 5 + 3];
    const y = right[1];
    const want = {
      add: x + y,
      sub: x - y,
      mul: x * y,
      div: x / y,
      maximum: Math.max(x, y),
      minimum: Math.min(x, y),
    }[op];
    assertClose([(await out[0].data())[2 * 20 + 1 * 5 + 3]], [want], { what: `${op} element` });
  });
}

backendTest("binary ops with numbers (scalars) on either side", async (d) => {
  const x = [-2, -0.5, 0.25, 1, 3];
  await matchesCpu(d, (dev) => {
    const t = on(dev, [5], x);
    return [
      t.add(2),
      sub(2, t),
      t.mul(-1.5),
      div(1, t),
      t.div(4),
      t.pow(2),
      maximum(t, 0.5),
      minimum(0.5, t),
    ];
  });
  const t = on(d, [5], x);
  await assertTensor(t.add(2), [0, 1.5, 2.25, 3, 5]);
  await assertTensor(sub(2, t), [4, 2.5, 1.75, 1, -1]);
  await assertTensor(t.mul(-1.5), [3, 0.75, -0.375, -1.5, -4.5]);
  await assertTensor(div(1, t), [-0.5, -2, 4, 1, 1 / 3]);
  await assertTensor(maximum(t, 0.5), [0.5, 0.5, 0.5, 1, 3]);
  await assertTensor(minimum(0.5, t), [-2, -0.5, 0.25, 0.5, 0.5]);
  // A 0-d tensor broadcasts like a number.
  await assertTensor(t.mul(tensor(2, { device: d })), [-4, -1, 0.5, 2, 6]);
});

backendTest(
  "binary broadcast shapes: [5] with [3,4,5], [2,1] with [1,3], 0-d with [2,3]",
  async (d) => {
    await matchesCpu(d, (dev) => {
      const v = on(dev, [5], floats([5], 4));
      const m = on(dev, [3, 4, 5], floats([3, 4, 5], 5));
      const c = on(dev, [2, 1], floats([2, 1], 6));
      const r = on(dev, [1, 3], floats([1, 3], 7));
      const s = on(dev, [], [1.25]);
      return [v.add(m), m.sub(v), c.mul(r), r.sub(c), s.mul(on(dev, [2, 3], floats([2, 3], 8)))];
    });
  },
);

backendTest(
  "pow: integer exponents of negative bases, 0^0, fractional, tensor exponents",
  async (d) => {
    const x = on(d, [5], [-2, -1.5, 0, 1.5, 2]);
    await assertTensor(x.pow(2), [4, 2.25, 0, 2.25, 4], { what: "x^2" });
    await assertTensor(x.pow(3), [-8, -3.375, 0, 3.375, 8], { what: "x^3" });
    await assertTensor(x.pow(0), [1, 1, 1, 1, 1], { what: "x^0" });
    await assertTensor(x.pow(-1).narrow(0, 3, 2), [1 / 1.5, 0.5], { what: "x^-1" });
    await assertTensor(on(d, [3], [0.25, 4, 9]).pow(0.5), [0.5, 2, 3], { what: "x^0.5" });
    await assertTensor(pow(2, on(d, [3], [-1, 0, 10])), [0.5, 1, 1024], { what: "2^x" });
    await matchesCpu(d, (dev) => {
      const base = on(dev, [3, 1, 5], floats([3, 1, 5], 9, 0.1, 3));
      const e = on(dev, [4, 1], floats([4, 1], 10, -2, 2));
      return [base.pow(e), base.pow(1.7)];
    }, { rtol: 1e-4 });
  },
);

backendTest("binary int32: add sub mul maximum minimum broadcast, exact", async (d) => {
  const a = ints(A_SHAPE, 11);
  const b = ints(B_SHAPE, 12);
  const out = await matchesCpu(d, (dev) => {
    const ta = on(dev, A_SHAPE, a, "int32");
    const tb = on(dev, B_SHAPE, b, "int32");
    return [
      ta.add(tb),
      ta.sub(tb),
      ta.mul(tb),
      ta.maximum(tb),
      tb.minimum(ta),
      ta.mul(3),
      ta.add(-2),
    ];
  }, { exact: true });
  for (const t of out) assert.equal(t.dtype, "int32");
  const x = on(d, [4], [-7, -1, 2, 9], "int32");
  await assertTensor(x.mul(x), [49, 1, 4, 81]);
  await assertTensor(sub(0, x), [7, 1, -2, -9]);
});

backendTest("int32 division is true division (float32), int32 and float promote", async (d) => {
  const a = on(d, [4], [7, -7, 1, 0], "int32");
  const b = on(d, [4], [2, 2, 3, 5], "int32");
  const q = a.div(b);
  assert.equal(q.dtype, "float32");
  await assertTensor(q, [3.5, -3.5, 1 / 3, 0]);
  const f = on(d, [4], [0.5, 0.5, 0.5, 0.5]);
  const s = a.add(f);
  assert.equal(s.dtype, "float32");
  await assertTensor(s, [7.5, -6.5, 1.5, 0.5]);
  const h = a.mul(0.5);
  assert.equal(h.dtype, "float32");
  await assertTensor(h, [3.5, -3.5, 0.5, 0]);
  assert.equal(a.mul(2).dtype, "int32");
});

for (const dtype of ["float32", "int32"] as const) {
  backendTest(`comparisons ${dtype} with ties and broadcasting`, async (d) => {
    const a = [1, 2, 3, 2, 1, 0];
    const b = [2, 2, 2];
    const expected = {
      eq: [0, 1, 0, 1, 0, 0],
      ne: [1, 0, 1, 0, 1, 1],
      lt: [1, 0, 0, 0, 1, 1],
      le: [1, 1, 0, 1, 1, 1],
      gt: [0, 0, 1, 0, 0, 0],
      ge: [0, 1, 1, 1, 0, 0],
    };
    for (const op of ["eq", "ne", "lt", "le", "gt", "ge"] as const) {
      const out = on(d, [2, 3], a, dtype)[op](on(d, [3], b, dtype));
      assert.equal(out.dtype, dtype, `${op} dtype`);
      await assertTensor(out, expected[op], { what: op, shape: [2, 3] });
    }
    const x = on(d, [3], [1, 2, 3], dtype);
    await assertTensor(x.gt(2), [0, 0, 1], { what: "gt number" });
    await assertTensor(x.eq(2), [0, 1, 0], { what: "eq number" });
    await matchesCpu(d, (dev) => {
      const p = on(dev, A_SHAPE, ints(A_SHAPE, 13, -2, 3), dtype);
      const q = on(dev, B_SHAPE, ints(B_SHAPE, 14, -2, 3), dtype);
      return [p.eq(q), p.ne(q), p.lt(q), p.le(q), p.gt(q), p.ge(q)];
    }, { exact: true });
  });
}

// ---- unary ----

const WIDE = [-1000, -100, -20, -3.5, -1, -1e-3, 0, 1e-3, 0.5, 1, 2, 3.5, 20, 88, 100, 1000];
const POSITIVE = [0, 1e-3, 0.5, 1, 2, 100, 1e6, 1e30];

for (const op of ["neg", "exp", "abs", "relu", "sigmoid", "tanh", "gelu"] as const) {
  backendTest(`unary ${op} float32 incl. large and negative inputs`, async (d) => {
    await matchesCpu(d, (dev) => on(dev, [WIDE.length], WIDE)[op](), { what: op });
    await matchesCpu(d, (dev) => on(dev, [4, 5, 6], floats([4, 5, 6], 20, -6, 6))[op](), {
      what: op,
    });
  });
}
for (const op of ["log", "sqrt"] as const) {
  backendTest(`unary ${op} float32 over positive inputs and 0`, async (d) => {
    await matchesCpu(d, (dev) => on(dev, [POSITIVE.length], POSITIVE)[op](), { what: op });
    await matchesCpu(d, (dev) => on(dev, [100], floats([100], 21, 0.01, 50))[op](), { what: op });
  });
}

backendTest("unary hand-computed values", async (d) => {
  const x = on(d, [5], [-2, -1, 0, 1, 2]);
  await assertTensor(x.neg(), [2, 1, 0, -1, -2], { what: "neg" });
  await assertTensor(x.abs(), [2, 1, 0, 1, 2], { what: "abs" });
  await assertTensor(x.relu(), [0, 0, 0, 1, 2], { what: "relu" });
  await assertTensor(exp(x), [Math.exp(-2), Math.exp(-1), 1, Math.E, Math.exp(2)], { what: "exp" });
  await assertTensor(x.sigmoid(), [-2, -1, 0, 1, 2].map((v) => 1 / (1 + Math.exp(-v))), {
    what: "sigmoid",
  });
  await assertTensor(x.tanh(), [-2, -1, 0, 1, 2].map(Math.tanh), { what: "tanh" });
  // gelu(x) = x Φ(x): Φ(1) = 0.8413447460685429, Φ(2) = 0.9772498680518208.
  await assertTensor(x.gelu(), [
    -2 * 0.0227501319481792,
    -0.15865525393145707,
    0,
    0.8413447460685429,
    1.9544997361036416,
  ], {
    what: "gelu",
  });
  await assertTensor(on(d, [3], [1, 4, 0.25]).sqrt(), [1, 2, 0.5], { what: "sqrt" });
  await assertTensor(on(d, [3], [1, Math.E, 0]).log(), [0, 1, -Infinity], { what: "log" });
  // Saturation: no NaN at large magnitudes.
  await assertTensor(on(d, [4], [-1000, 1000, -100, 100]).sigmoid(), [0, 1, 0, 1], {
    what: "sigmoid saturates",
  });
  await assertTensor(on(d, [4], [-1000, 1000, -100, 100]).tanh(), [-1, 1, -1, 1], {
    what: "tanh saturates",
  });
  await assertTensor(on(d, [2], [-1000, 1000]).gelu(), [0, 1000], { what: "gelu saturates" });
  await assertTensor(on(d, [2], [-1000, 1000]).exp(), [0, Infinity], {
    what: "exp overflows to inf",
  });
});

backendTest("unary int32: neg abs relu", async (d) => {
  const v = [-7, -1, 0, 1, 9];
  await matchesCpu(d, (dev) => {
    const x = on(dev, [5], v, "int32");
    return [x.neg(), x.abs(), x.relu()];
  }, { exact: true });
  const x = on(d, [5], v, "int32");
  assert.equal(x.neg().dtype, "int32");
  await assertTensor(x.neg(), [7, 1, 0, -1, -9]);
  await assertTensor(x.abs(), [7, 1, 0, 1, 9]);
  await assertTensor(x.relu(), [0, 0, 0, 1, 9]);
});

backendTest("clamp float32 and int32", async (d) => {
  const x = on(d, [5], [-2, -0.5, 0, 0.5, 2]);
  await assertTensor(x.clamp(-1, 1), [-1, -0.5, 0, 0.5, 1]);
  await assertTensor(x.clamp(0), [0, 0, 0, 0.5, 2]);
  await assertTensor(x.clamp(undefined, 0), [-2, -0.5, 0, 0, 0]);
  const i = on(d, [5], [-7, -1, 0, 3, 9], "int32").clamp(-2, 4);
  assert.equal(i.dtype, "int32");
  await assertTensor(i, [-2, -1, 0, 3, 4]);
});

backendTest("NaN propagates as in PyTorch: maximum minimum clamp relu ne max argmax", async (d) => {
  const x = on(d, [4], [NaN, 1, -2, 3]);
  await assertTensor(maximum(x, 0), [NaN, 1, 0, 3], { what: "maximum(x, 0)" });
  await assertTensor(maximum(0, x), [NaN, 1, 0, 3], { what: "maximum(0, x)" });
  await assertTensor(minimum(x, 0), [NaN, 0, -2, 0], { what: "minimum(x, 0)" });
  await assertTensor(x.clamp(0, 2), [NaN, 1, 0, 2], { what: "clamp" });
  await assertTensor(x.relu(), [NaN, 1, 0, 3], { what: "relu" });
  await assertTensor(x.eq(x), [0, 1, 1, 1], { what: "eq" });
  await assertTensor(x.ne(x), [1, 0, 0, 0], { what: "ne" });
  await assertTensor(x.max(), [NaN], { what: "max" });
  await assertTensor(x.min(), [NaN], { what: "min" });
  await assertTensor(x.argmax(), [0], { what: "argmax" });
  const late = on(d, [3], [1, 5, NaN]);
  await assertTensor(late.max(), [NaN], { what: "max of a late NaN" });
  await assertTensor(late.min(), [NaN], { what: "min of a late NaN" });
  await assertTensor(late.argmax(), [2], { what: "argmax of a late NaN" });
  await assertTensor(late.argmin(), [2], { what: "argmin of a late NaN" });
  await assertTensor(x.exp().narrow(0, 0, 1), [NaN], { what: "exp" });
});

/** `values` with NaN written at `positions`. */
function withNan(values: number[], positions: number[]): number[] {
  const out = [...values];
  for (const p of positions) out[p] = NaN;
  return out;
}

backendTest("NaN in every NaN-sensitive kernel, on every kernel path, as PyTorch", async (d) => {
  // Unary: vec4 (8 elements) and scalar (7) paths; PyTorch's values at NaN.
  for (const n of [8, 7]) {
    const x = on(d, [n], [NaN, 1, -2, 3, 0, -0.5, NaN, 2].slice(0, n));
    const nan = (v: number[]) => v.slice(0, n);
    await assertTensor(x.relu(), nan([NaN, 1, 0, 3, 0, 0, NaN, 2]), { what: `relu ${n}` });
    for (const op of ["sigmoid", "tanh", "gelu", "exp", "abs", "neg", "sqrt", "log"] as const) {
      const got = await x[op]().data();
      assert.ok(Number.isNaN(got[0]) && Number.isNaN(got[6]), `${op}(NaN) ${n}: ${got}`);
    }
    // sign(NaN) is 0 in PyTorch; it is the gradient of abs.
    const leaf = on(d, [n], [NaN, 1, -2, 3, 0, -0.5, NaN, 2].slice(0, n));
    leaf.requiresGrad = true;
    leaf.abs().sum().backward();
    await assertTensor(leaf.grad!, nan([0, 1, -1, 1, 0, -1, 0, 1]), { what: `sign ${n}` });
    await matchesCpu(d, (dev) => {
      const v = on(dev, [n], [NaN, 1, -2, 3, 0, -0.5, NaN, 2].slice(0, n));
      return [v.relu(), v.sigmoid(), v.tanh(), v.gelu(), v.clamp(-1, 1)];
    }, { what: `unary ${n}` });
  }
  // Comparisons: every one is false with a NaN operand, except ne. Same
  // shapes (vec4 and scalar), a scalar operand, a broadcast row, a strided view.
  const a = [NaN, 1, -2, 3, NaN, 0, 5, NaN];
  const b = [0, NaN, 0, 0, NaN, 1, 1, 2];
  const cmp = {
    eq: (x: number, y: number) => x === y,
    ne: (x: number, y: number) => x !== y,
    lt: (x: number, y: number) => x < y,
    le: (x: number, y: number) => x <= y,
    gt: (x: number, y: number) => x > y,
    ge: (x: number, y: number) => x >= y,
  };
  for (const [op, f] of Object.entries(cmp) as [keyof typeof cmp, typeof cmp.eq][]) {
    for (const n of [8, 7]) {
      const want = a.slice(0, n).map((x, i) => f(x, b[i]) ? 1 : 0);
      await assertTensor(on(d, [n], a.slice(0, n))[op](on(d, [n], b.slice(0, n))), want, {
        what: `${op} ${n}`,
      });
      await assertTensor(
        on(d, [n], a.slice(0, n))[op](0),
        a.slice(0, n).map((x) => f(x, 0) ? 1 : 0),
        {
          what: `${op} scalar ${n}`,
        },
      );
    }
    const row = [NaN, 0, 1, NaN];
    await assertTensor(
      on(d, [2, 4], a)[op](on(d, [4], row)),
      a.map((x, i) => f(x, row[i % 4]) ? 1 : 0),
      { what: `${op} row broadcast` },
    );
    const t = on(d, [2, 4], a).t();
    await assertTensor(
      t[op](on(d, [4, 2], b)),
      b.map((y, i) => f(a[(i % 2) * 4 + (i >> 1)], y) ? 1 : 0),
      { what: `${op} strided` },
    );
  }
  // maximum / minimum with NaN on either side and both sides, every path.
  await matchesCpu(d, (dev) => {
    const x = on(dev, [8], a);
    const y = on(dev, [8], b);
    const r = on(dev, [4], [NaN, 0, 1, NaN]);
    return [
      maximum(x, y),
      minimum(x, y),
      maximum(x.narrow(0, 0, 7), y.narrow(0, 0, 7)),
      maximum(x.reshape([2, 4]), r),
      minimum(r, x.reshape([2, 4])),
      maximum(x.reshape([2, 4]).t(), y.reshape([4, 2])),
    ];
  }, { exact: true, what: "maximum/minimum" });
  await assertTensor(maximum(on(d, [3], [NaN, 1, NaN]), on(d, [3], [NaN, NaN, 2])), [
    NaN,
    NaN,
    NaN,
  ], { what: "maximum of NaNs" });
  // pow: pow(x, 0) = pow(1, y) = 1 even for NaN; any other NaN operand gives NaN.
  await assertTensor(
    pow(on(d, [5], [NaN, 1, 2, NaN, -2]), on(d, [5], [0, NaN, NaN, 2, NaN])),
    [1, 1, NaN, NaN, NaN],
    { what: "pow with NaN" },
  );
  // Reductions: NaN wins max/min, argmax/argmin give the first NaN's index,
  // over short rows, long rows (tree, several passes), columns and long
  // columns (chunked), as PyTorch.
  for (const [rows, cols] of [[3, 5], [2, 5000], [1200, 3]]) {
    const values = floats([rows, cols], rows + cols);
    const nanAt = [1, cols - 1, Math.floor(cols / 2) + cols, rows * cols - 2];
    const data = withNan(values, nanAt);
    const built = (dev: Device) => on(dev, [rows, cols], data);
    const outs = await matchesCpu(d, (dev) => {
      const x = built(dev);
      return [
        x.max(1),
        x.min(1),
        x.argmax(1),
        x.argmin(1),
        x.max(0),
        x.min(0),
        x.argmax(0),
        x.argmin(0),
      ];
    }, { exact: true, what: `reductions [${rows}, ${cols}]` });
    // Row 0 holds NaN at 1 and cols - 1: the first NaN wins.
    assert.equal((await outs[2].data())[0], 1, `argmax row 0 [${rows}, ${cols}]`);
    assert.equal((await outs[3].data())[0], 1, `argmin row 0 [${rows}, ${cols}]`);
    assert.ok(Number.isNaN((await outs[0].data())[0]), `max row 0 [${rows}, ${cols}]`);
    await assertTensor(built(d).max(), [NaN], { what: `max of all [${rows}, ${cols}]` });
    await assertTensor(built(d).argmin(), [1], { what: `argmin of all [${rows}, ${cols}]` });
  }
  await assertTensor(on(d, [4], [1, NaN, 5, NaN]).argmax(), [1], {
    what: "argmax [1, NaN, 5, NaN]",
  });
  await assertTensor(on(d, [4], [1, NaN, 5, NaN]).argmin(), [1], {
    what: "argmin [1, NaN, 5, NaN]",
  });
  // softmax / logSoftmax: a row or column with a NaN is NaN everywhere, the
  // others are untouched. Short rows (serial), long rows (workgroup), columns.
  for (const [rows, cols] of [[3, 5], [3, 300]]) {
    const values = floats([rows, cols], 7 * cols);
    const data = withNan(values, [cols - 1]);
    const outs = await matchesCpu(d, (dev) => {
      const x = on(dev, [rows, cols], data);
      return [x.softmax(1), x.logSoftmax(1), x.softmax(0), x.logSoftmax(0)];
    }, { what: `softmax [${rows}, ${cols}]` });
    const soft = await outs[0].data();
    assert.ok(soft.slice(0, cols).every(Number.isNaN), `softmax NaN row [${rows}, ${cols}]`);
    assert.ok(!soft.slice(cols).some(Number.isNaN), `softmax other rows [${rows}, ${cols}]`);
  }
});

// ---- casts ----

backendTest("cast float32 -> int32 truncates toward zero; int32 -> float32", async (d) => {
  const f = on(d, [8], [-2.7, -0.5, 0.5, 2.7, 3, -3, 123456.75, -99.99]);
  const i = f.to("int32");
  assert.equal(i.dtype, "int32");
  await assertTensor(i, [-2, 0, 0, 2, 3, -3, 123456, -99]);
  const back = i.to("float32");
  assert.equal(back.dtype, "float32");
  await assertTensor(back, [-2, 0, 0, 2, 3, -3, 123456, -99]);
  await matchesCpu(d, (dev) => on(dev, [200], floats([200], 30, -1000, 1000)).to("int32"), {
    exact: true,
  });
  await matchesCpu(
    d,
    (dev) => on(dev, [50], ints([50], 31, -100000, 100000), "int32").to("float32"),
    {
      exact: true,
    },
  );
});

// ---- reductions ----

const R_SHAPE = [3, 4, 5];
const R = floats(R_SHAPE, 40);
const R_INT = ints(R_SHAPE, 41, -20, 20);

backendTest(
  "reductions float32: sum/mean/max/min/argmax/argmin over each axis and all",
  async (d) => {
    for (const dim of [0, 1, 2, -1, undefined]) {
      for (const keepdim of [false, true]) {
        await matchesCpu(d, (dev) => {
          const x = on(dev, R_SHAPE, R);
          return [
            x.sum(dim, keepdim),
            x.mean(dim, keepdim),
            x.max(dim, keepdim),
            x.min(dim, keepdim),
            x.argmax(dim, keepdim),
            x.argmin(dim, keepdim),
          ];
        }, { what: `dim ${dim} keepdim ${keepdim}` });
      }
    }
    await matchesCpu(d, (dev) => {
      const x = on(dev, R_SHAPE, R);
      return [x.sum([0, 2]), x.mean([0, 1], true), x.sum([2, 0], true)];
    }, { what: "several dims" });
  },
);

backendTest("reductions int32: sum/max/min/argmax/argmin exact", async (d) => {
  for (const dim of [0, 1, 2, undefined]) {
    const out = await matchesCpu(d, (dev) => {
      const x = on(dev, R_SHAPE, R_INT, "int32");
      return [x.sum(dim), x.max(dim), x.min(dim), x.argmax(dim), x.argmin(dim)];
    }, { exact: true, what: `dim ${dim}` });
    assert.equal(out[0].dtype, "int32");
    assert.equal(out[1].dtype, "int32");
  }
});

backendTest("reductions hand-computed, shapes and dtypes", async (d) => {
  const x = on(d, [2, 3], [1, 2, 3, 4, 5, 6]);
  await assertTensor(x.sum(), [21], { shape: [] });
  await assertTensor(x.sum(0), [5, 7, 9], { shape: [3] });
  await assertTensor(x.sum(1, true), [6, 15], { shape: [2, 1] });
  await assertTensor(x.mean(), [3.5], { shape: [] });
  await assertTensor(x.mean(0), [2.5, 3.5, 4.5]);
  await assertTensor(x.max(), [6], { shape: [] });
  await assertTensor(x.max(1), [3, 6], { shape: [2] });
  await assertTensor(x.min(0, true), [1, 2, 3], { shape: [1, 3] });
  const am = x.argmax(1);
  assert.equal(am.dtype, "int32");
  await assertTensor(am, [2, 2], { shape: [2] });
  await assertTensor(x.argmin(), [0], { shape: [] });
  await assertTensor(x.argmax(0, true), [1, 1, 1], { shape: [1, 3] });
});

backendTest("argmax/argmin/max/min with ties give the first index", async (d) => {
  const x = on(d, [2, 5], [1, 3, 3, 2, 3, 0, 0, -1, -1, 0]);
  await assertTensor(x.argmax(1), [1, 0]);
  await assertTensor(x.argmin(1), [0, 2]);
  await assertTensor(x.argmax(), [1]);
  await assertTensor(x.argmin(), [7]);
  await assertTensor(x.argmax(0), [0, 0, 0, 0, 0]);
  await assertTensor(on(d, [4], [5, 5, 5, 5], "int32").argmax(), [0]);
  await assertTensor(on(d, [4], [5, 5, 5, 5]).argmin(), [0]);
  // Ties far apart in a long dim (across workgroups on a GPU).
  const n = 20000;
  const v = new Array<number>(n).fill(0).map((_, i) => (i % 97) / 100);
  for (const at of [7001, 12000, 19999]) v[at] = 5;
  for (const at of [5003, 9000, 15000]) v[at] = -5;
  const long = on(d, [n], v);
  await assertTensor(long.argmax(), [7001], { what: "argmax" });
  await assertTensor(long.argmin(), [5003], { what: "argmin" });
  await assertTensor(long.max(), [5], { what: "max" });
  await assertTensor(long.min(), [-5], { what: "min" });
  const longInt = on(d, [n], v.map((a) => Math.round(a * 100)), "int32");
  await assertTensor(longInt.argmax(), [7001], { what: "int32 argmax" });
  await assertTensor(longInt.argmin(), [5003], { what: "int32 argmin" });
  // The same along a strided (non-last) dim.
  const strided = on(d, [n, 2], v.flatMap((a) => [a, -a]));
  await assertTensor(strided.argmax(0), [7001, 5003], { what: "argmax dim 0" });
});

backendTest("reductions over long and strided dims match cpu", async (d) => {
  await matchesCpu(d, (dev) => {
    const x = on(dev, [3, 3000], floats([3, 3000], 42, -1, 1));
    return [x.sum(1), x.max(1), x.min(1), x.argmax(1), x.argmin(1), x.sum(0), x.mean()];
  }, { atol: 1e-4, rtol: 1e-5 });
  await matchesCpu(d, (dev) => {
    const x = on(dev, [1000, 7], floats([1000, 7], 43, -1, 1));
    return [x.sum(0), x.max(0), x.argmin(0), x.mean(0, true)];
  }, { atol: 1e-4, rtol: 1e-5 });
});

backendTest("sum over 4M elements vs a float64 host sum: relative error < 1e-6", async (d) => {
  const n = 4 * 1024 * 1024;
  manualSeed(2024);
  const x = rand([n], { device: d });
  const total = await x.sum().item();
  const host = await x.data();
  let exact = 0;
  for (let i = 0; i < n; i++) exact += host[i];
  const rel = Math.abs(total - exact) / Math.abs(exact);
  assert.ok(
    rel < 1e-6,
    `sum of ${n} elements on ${d}: ${total}, float64 sum ${exact}, relative error ${rel}`,
  );
  const meanRel = Math.abs((await x.mean().item()) - exact / n) / (exact / n);
  assert.ok(meanRel < 1e-6, `mean relative error ${meanRel}`);
  x.dispose();
});

// ---- matmul ----

backendTest("matmul hand-computed 2-D, 1-D cases", async (d) => {
  const a = on(d, [2, 2], [1, 2, 3, 4]);
  const b = on(d, [2, 2], [5, 6, 7, 8]);
  await assertTensor(a.matmul(b), [19, 22, 43, 50], { shape: [2, 2] });
  const v = on(d, [2], [1, -1]);
  await assertTensor(a.matmul(v), [-1, -1], { shape: [2] });
  await assertTensor(v.matmul(a), [-2, -2], { shape: [2] });
  await assertTensor(matmul(v, v), [2], { shape: [] });
  const batch = on(d, [2, 2, 2], [1, 2, 3, 4, 0, 1, 1, 0]);
  await assertTensor(batch.matmul(v), [-1, -1, -1, 1], { shape: [2, 2] });
  await assertTensor(v.matmul(batch), [-2, -2, -1, 1], { shape: [2, 2] });
});

const MM_TOL = { atol: 1e-4, rtol: 1e-4 };

backendTest("matmul odd sizes 37x61 @ 61x29", async (d) => {
  await matchesCpu(
    d,
    (dev) =>
      on(dev, [37, 61], floats([37, 61], 50)).matmul(on(dev, [61, 29], floats([61, 29], 51))),
    MM_TOL,
  );
});

backendTest("matmul batched [3,37,61] @ [3,61,29]", async (d) => {
  await matchesCpu(
    d,
    (dev) =>
      on(dev, [3, 37, 61], floats([3, 37, 61], 52)).matmul(
        on(dev, [3, 61, 29], floats([3, 61, 29], 53)),
      ),
    MM_TOL,
  );
});

backendTest(
  "matmul broadcast batch [2,1,4,5] @ [3,5,6], batched @ 2-D, 2-D @ batched",
  async (d) => {
    const out = await matchesCpu(d, (dev) => {
      const a = on(dev, [2, 1, 4, 5], floats([2, 1, 4, 5], 54));
      const b = on(dev, [3, 5, 6], floats([3, 5, 6], 55));
      const c = on(dev, [5, 6], floats([5, 6], 56));
      const e = on(dev, [4, 5], floats([4, 5], 57));
      return [a.matmul(b), b.transpose(1, 2).matmul(c), e.matmul(b)];
    }, MM_TOL);
    assert.deepEqual([...out[0].shape], [2, 3, 4, 6]);
    assert.deepEqual([...out[1].shape], [3, 6, 6]);
    assert.deepEqual([...out[2].shape], [3, 4, 6]);
  },
);

backendTest("matmul 1-D cases with odd sizes, linear (transposed weight)", async (d) => {
  await matchesCpu(d, (dev) => {
    const v = on(dev, [61], floats([61], 58));
    const m = on(dev, [61, 29], floats([61, 29], 59));
    const mt = on(dev, [37, 61], floats([37, 61], 60));
    const bt = on(dev, [3, 37, 61], floats([3, 37, 61], 61));
    const w = on(dev, [29, 61], floats([29, 61], 62));
    const bias = on(dev, [29], floats([29], 63));
    return [
      v.matmul(v),
      v.matmul(m),
      mt.matmul(v),
      bt.matmul(v),
      v.matmul(bt.transpose(1, 2)),
      linear(mt, w, bias),
      linear(bt, w),
    ];
  }, MM_TOL);
});

backendTest("matmul gradients (transposed kernels) match cpu", async (d) => {
  const ga = floats([37, 61], 64);
  const gb = floats([61, 29], 65);
  const grads = (dev: Device): Tensor[] => {
    const a = on(dev, [37, 61], ga);
    const b = on(dev, [61, 29], gb);
    a.requiresGrad = true;
    b.requiresGrad = true;
    a.matmul(b).tanh().sum().backward();
    return [a.grad!, b.grad!];
  };
  const want = grads(REF);
  const got = grads(d);
  for (let i = 0; i < 2; i++) {
    assertClose(await got[i].data(), await want[i].data(), { ...MM_TOL, what: `grad ${i}` });
  }
});

// ---- shape ops ----

for (const dtype of ["float32", "int32"] as const) {
  backendTest(
    `shape ops ${dtype}: transpose permute expand narrow reshape squeeze unsqueeze flatten`,
    async (d) => {
      const vals = ints([2, 3, 4], 70, -50, 50);
      await matchesCpu(d, (dev) => {
        const x = on(dev, [2, 3, 4], vals, dtype);
        return [
          x.transpose(0, 2),
          x.transpose(-1, -2),
          x.permute([1, 2, 0]),
          x.permute([2, 0, 1]),
          x.narrow(2, 1, 2),
          x.narrow(1, -1, 1),
          x.reshape([4, -1]),
          x.view([24]),
          x.unsqueeze(1).expand([2, 5, 3, 4]),
          x.narrow(0, 0, 1).expand([3, 3, 4]),
          x.narrow(1, 0, 1).squeeze(1),
          x.unsqueeze(-1),
          x.flatten(1),
          x.reshape([6, 4]).t(),
        ];
      }, { exact: true });
      const m = on(d, [2, 3], [1, 2, 3, 4, 5, 6], dtype);
      await assertTensor(m.transpose(0, 1), [1, 4, 2, 5, 3, 6], { shape: [3, 2] });
      await assertTensor(m.narrow(1, 1, 2), [2, 3, 5, 6], { shape: [2, 2] });
      await assertTensor(m.narrow(0, 1, 1).expand([3, 3]), [4, 5, 6, 4, 5, 6, 4, 5, 6], {
        shape: [3, 3],
      });
      await assertTensor(on(d, [3, 1], [1, 2, 3], dtype).expand([2, 3, 2]), [
        1,
        1,
        2,
        2,
        3,
        3,
        1,
        1,
        2,
        2,
        3,
        3,
      ], {
        shape: [2, 3, 2],
      });
      const p = on(d, [2, 1, 3], [1, 2, 3, 4, 5, 6], dtype).permute([2, 0, 1]);
      await assertTensor(p, [1, 4, 2, 5, 3, 6], { shape: [3, 2, 1] });
      assert.deepEqual([...on(d, [1, 3, 1], [1, 2, 3], dtype).squeeze().shape], [3]);
    },
  );

  backendTest(`cat stack chunk split indexSelect ${dtype}`, async (d) => {
    const va = ints([2, 3], 71, -9, 9);
    const vb = ints([2, 2], 72, -9, 9);
    const vc = ints([1, 3], 73, -9, 9);
    await matchesCpu(d, (dev) => {
      const a = on(dev, [2, 3], va, dtype);
      const b = on(dev, [2, 2], vb, dtype);
      const c = on(dev, [1, 3], vc, dtype);
      const idx = tensor([2, 0, 0, 1], { dtype: "int32", device: dev });
      return [
        cat([a, b], 1),
        cat([a, c, a], 0),
        stack([a, a.neg()], 0),
        stack([a, a.neg()], 2),
        ...chunk(on(dev, [7, 2], ints([7, 2], 74), dtype), 3, 0),
        ...split(on(dev, [2, 5], ints([2, 5], 75), dtype), [1, 3, 1], 1),
        ...on(dev, [5, 2], ints([5, 2], 76), dtype).split(2),
        a.indexSelect(1, idx.narrow(0, 0, 3)),
        a.indexSelect(0, tensor([1, 1, 0], { dtype: "int32", device: dev })),
        on(dev, [2, 3, 4], ints([2, 3, 4], 77), dtype).indexSelect(1, idx.narrow(0, 0, 3)),
      ];
    }, { exact: true });
    const a = on(d, [2, 2], [1, 2, 3, 4], dtype);
    const b = on(d, [2, 1], [9, 8], dtype);
    await assertTensor(cat([a, b], 1), [1, 2, 9, 3, 4, 8], { shape: [2, 3] });
    await assertTensor(cat([a, a], 0), [1, 2, 3, 4, 1, 2, 3, 4], { shape: [4, 2] });
    await assertTensor(stack([a, a], 1), [1, 2, 1, 2, 3, 4, 3, 4], { shape: [2, 2, 2] });
    const pieces = on(d, [5], [0, 1, 2, 3, 4], dtype).chunk(2);
    assert.deepEqual(pieces.map((p) => [...p.shape]), [[3], [2]]);
    await assertTensor(pieces[1], [3, 4]);
    const parts = on(d, [5], [0, 1, 2, 3, 4], dtype).split([2, 0, 3]);
    assert.deepEqual(parts.map((p) => [...p.shape]), [[2], [0], [3]]);
    await assertTensor(parts[2], [2, 3, 4]);
    const sel = on(d, [3, 2], [1, 2, 3, 4, 5, 6], dtype).indexSelect(
      0,
      tensor([2, 2, 0], { dtype: "int32", device: d }),
    );
    await assertTensor(sel, [5, 6, 5, 6, 1, 2], { shape: [3, 2] });
  });
}

backendTest("cat promotes int32 with float32", async (d) => {
  const out = cat([on(d, [2], [1, 2], "int32"), on(d, [1], [0.5])]);
  assert.equal(out.dtype, "float32");
  await assertTensor(out, [1, 2, 0.5]);
});

// ---- softmax ----

backendTest("softmax/logSoftmax with values of 1000 (hand-computed)", async (d) => {
  const rows = [[1000, 1000, 999], [-1000, 0, 1000], [1, 2, 3], [-1000, -1000, -1000]];
  const soft = (r: number[]) => {
    const m = Math.max(...r);
    const e = r.map((v) => Math.exp(v - m));
    const s = e.reduce((a, b) => a + b, 0);
    return e.map((v) => v / s);
  };
  const logSoft = (r: number[]) => {
    const m = Math.max(...r);
    const lse = m + Math.log(r.reduce((a, v) => a + Math.exp(v - m), 0));
    return r.map((v) => v - lse);
  };
  const x = on(d, [4, 3], rows.flat());
  await assertTensor(x.softmax(1), rows.flatMap(soft), { what: "softmax dim 1" });
  await assertTensor(x.softmax(-1), rows.flatMap(soft), { what: "softmax dim -1" });
  await assertTensor(x.logSoftmax(1), rows.flatMap(logSoft), { what: "logSoftmax dim 1" });
  // Along dim 0: the columns.
  const cols = [0, 1, 2].map((j) => rows.map((r) => r[j]));
  const byCol = (f: (r: number[]) => number[]) => {
    const c = cols.map(f);
    return rows.flatMap((_, i) => [0, 1, 2].map((j) => c[j][i]));
  };
  await assertTensor(x.softmax(0), byCol(soft), { what: "softmax dim 0" });
  await assertTensor(x.logSoftmax(0), byCol(logSoft), { what: "logSoftmax dim 0" });
});

backendTest("softmax/logSoftmax over long, short and strided dims match cpu", async (d) => {
  await matchesCpu(d, (dev) => {
    const x = on(dev, [4, 3000], floats([4, 3000], 80, -20, 20));
    const y = on(dev, [3, 5, 7], floats([3, 5, 7], 81, -20, 20));
    return [
      x.softmax(1),
      x.logSoftmax(1),
      y.softmax(1),
      y.logSoftmax(0),
      y.softmax(2),
      x.softmax(0),
    ];
  }, { atol: 1e-5, rtol: 1e-4 });
});

// ---- random ----

backendTest(
  "random: same seed gives the same numbers as cpu (uniform bit-identical)",
  async (d) => {
    const draw = (dev: Device) => {
      manualSeed(1234);
      return [
        rand([4099], { device: dev }),
        randn([3001], { device: dev }),
        uniform([257], -2, 5, { device: dev }),
      ];
    };
    const want = draw(REF);
    const got = draw(d);
    assertClose(await got[0].data(), await want[0].data(), { atol: 0, rtol: 0, what: "rand" });
    assertClose(await got[1].data(), await want[1].data(), {
      atol: 1e-5,
      rtol: 1e-5,
      what: "randn",
    });
    assertClose(await got[2].data(), await want[2].data(), {
      atol: 1e-6,
      rtol: 0,
      what: "uniform",
    });
    const u = await got[0].data();
    assert.ok(u.every((v) => v >= 0 && v < 1), "rand in [0, 1)");
    const r = await got[2].data();
    assert.ok(r.every((v) => v >= -2 && v < 5), "uniform in [low, high)");
  },
);

// ---- zero-size tensors ----

backendTest("zero-size tensors", async (d) => {
  const e = zeros([0, 3], { device: d });
  assert.equal(e.numel(), 0);
  assert.equal((await e.data()).length, 0);
  assert.deepEqual(await e.toArray(), []);
  await assertTensor(e.add(ones([0, 3], { device: d })), [], { shape: [0, 3] });
  await assertTensor(e.add(ones([3], { device: d })), [], { shape: [0, 3] });
  await assertTensor(e.exp(), [], { shape: [0, 3] });
  await assertTensor(e.sum(0), [0, 0, 0], { shape: [3] });
  await assertTensor(e.sum(1), [], { shape: [0] });
  await assertTensor(e.sum(), [0], { shape: [] });
  await assertTensor(e.transpose(0, 1), [], { shape: [3, 0] });
  await assertTensor(e.reshape([3, 0, 5]), [], { shape: [3, 0, 5] });
  await assertTensor(e.softmax(1), [], { shape: [0, 3] });
  await assertTensor(e.matmul(ones([3, 2], { device: d })), [], { shape: [0, 2] });
  await assertTensor(ones([2, 0], { device: d }).matmul(ones([0, 3], { device: d })), [
    0,
    0,
    0,
    0,
    0,
    0,
  ], {
    shape: [2, 3],
  });
  const x = on(d, [2, 3], [1, 2, 3, 4, 5, 6]);
  await assertTensor(cat([x, e]), [1, 2, 3, 4, 5, 6], { shape: [2, 3] });
  await assertTensor(cat([e, x, e]), [1, 2, 3, 4, 5, 6], { shape: [2, 3] });
  await assertTensor(x.narrow(0, 1, 0), [], { shape: [0, 3] });
  await assertTensor(x.indexSelect(0, tensor([], { dtype: "int32", device: d })), [], {
    shape: [0, 3],
  });
  await assertTensor(on(d, [1, 0], []).expand([4, 0]), [], { shape: [4, 0] });
  await assertTensor(rand([0], { device: d }), [], { shape: [0] });
  await assertTensor(full([0, 2], 5, { device: d, dtype: "int32" }), [], { shape: [0, 2] });
  await assertTensor(tensor([], { device: d }), [], { shape: [0] });
  await assertTensor(e.to("int32"), [], { shape: [0, 3] });
  await assertTensor(e.to(REF), [], { shape: [0, 3] });
  await assertTensor(zeros([0, 3]).to(d), [], { shape: [0, 3] });
  // Gradients of and through zero-size tensors.
  const ez = zeros([0, 3], { device: d, requiresGrad: true });
  ez.narrow(0, 0, 0).exp().sum().add(ez.sum(0).sum()).backward();
  await assertTensor(ez.grad!, [], { shape: [0, 3] });
  const w = on(d, [2, 3], [1, 2, 3, 4, 5, 6]);
  w.requiresGrad = true;
  cat([w, e]).sum().add(w.narrow(1, 0, 0).sum()).backward();
  await assertTensor(w.grad!, [1, 1, 1, 1, 1, 1]);
});

// ---- cross-device ----

backendTest(
  "cross-device chains dev0 -> dev1 -> dev0 and dev -> cpu -> dev are ordered",
  async (_d, devices) => {
    const [d0, d1] = devices;
    for (let i = 0; i < 20; i++) {
      const x = on(d0, [64], floats([64], 90 + i));
      const y = x.to(d1).mul(2).add(1).to(d0).sub(x);
      const z = x.to(REF).mul(3).to(d0).sub(x);
      const n = on(d0, [3], [i, -i, 7], "int32").to(d1).add(1).to(REF).mul(2).to(d0);
      await assertTensor(n, [2 * i + 2, 2 - 2 * i, 16], { what: `int32 round ${i}` });
      const host = await x.data();
      await assertTensor(y, Array.from(host, (v) => v + 1), { what: `round ${i} via ${d1}` });
      await assertTensor(z, Array.from(host, (v) => 2 * v), { what: `round ${i} via cpu` });
    }
    const g = on(d0, [3], [1, 2, 3]);
    g.requiresGrad = true;
    g.to(d1).mul(g.to(d1)).sum().backward();
    assert.equal(g.grad!.device, d0);
    await assertTensor(g.grad!, [2, 4, 6]);
  },
);

// ---- a small MLP: gradients agree with cpu ----

backendTest("small MLP gradients match cpu within 1e-4", async (d) => {
  const shapes: Record<string, number[]> = { w1: [16, 10], b1: [16], w2: [4, 16], b2: [4] };
  const init = Object.fromEntries(
    Object.entries(shapes).map(([k, s], i) => [k, floats(s, 100 + i, -0.5, 0.5)]),
  );
  const input = floats([8, 10], 110, -2, 2);
  const targets = [0, 3, 1, 2, 2, 0, 3, 1];
  const run = async (dev: Device) => {
    const p = Object.fromEntries(Object.entries(shapes).map(([k, s]) => [k, on(dev, s, init[k])]));
    for (const t of Object.values(p)) t.requiresGrad = true;
    const x = on(dev, [8, 10], input);
    const h = linear(x, p.w1, p.b1).relu();
    const h2 = add(h.mul(h.sigmoid()), h.tanh()).gelu();
    const logits = linear(h2, p.w2, p.b2);
    const onehot = tensor(targets, { dtype: "int32", device: dev })
      .reshape([8, 1])
      .eq(arange(4, undefined, 1, { device: dev }).reshape([1, 4]))
      .to("float32");
    const loss = logits.logSoftmax(1).mul(onehot).sum(1).mean().neg()
      .add(logits.softmax(0).pow(2).mean())
      .add(div(p.w2.pow(2).sum(), 100));
    loss.backward();
    return {
      loss: await loss.item(),
      grads: Object.fromEntries(Object.entries(p).map(([k, t]) => [k, t.grad!])),
    };
  };
  const want = await run(REF);
  const got = await run(d);
  assertClose([got.loss], [want.loss], { atol: 1e-4, rtol: 1e-4, what: "loss" });
  for (const k of Object.keys(shapes)) {
    assert.deepEqual([...got.grads[k].shape], shapes[k]);
    assertClose(await got.grads[k].data(), await want.grads[k].data(), {
      atol: 1e-4,
      rtol: 1e-4,
      what: `grad ${k}`,
    });
  }
});

// ---- composite ops (src/ops_composite/): values, indices and gradients agree with cpu ----

backendTest("composite ops: hand-computed values", async (d) => {
  const x = tensor([[3, 0, 2], [1, -4, 5]], { device: d });
  await assertTensor(x.cumsum(1), [3, 3, 5, 1, -3, 2]);
  await assertTensor(x.cumprod(0), [3, 0, 2, 3, -0, 10]);
  await assertTensor(x.prod(1), [0, -20]);
  await assertTensor(x.flip(1), [2, 0, 3, 5, -4, 1]);
  await assertTensor(x.roll(1), [5, 3, 0, 2, 1, -4]);
  await assertTensor(x.amax(0), [3, 0, 5]);
  await assertTensor(x.norm(1, 1), [5, 10]);
  const [values, indices] = x.sort(1, true);
  await assertTensor(values, [3, 2, 0, 5, 1, -4]);
  assert.deepEqual([...await indices.data()], [0, 2, 1, 2, 0, 1]);
  await assertTensor(x.all(1), [0, 1]);
});

for (const dtype of ["float32", "int32"] as const) {
  backendTest(`composite ops ${dtype}: forward (and gradients) match cpu`, async (d) => {
    const shape = [3, 4, 5];
    const float = dtype === "float32";
    // Zeros for cumprod's and prod's gradients; repeats for the sort's ties.
    const vals = float
      ? floats(shape, 120).map((v, i) => (i % 7 === 0 ? 0 : i % 11 === 0 ? 1.5 : v))
      : ints(shape, 121);
    const got = await matchesCpu(d, (dev) => {
      const x = on(dev, shape, vals, dtype);
      if (float) x.requiresGrad = true;
      const outs = [
        x.flip([0, 2]),
        x.roll([1, -2], [1, 2]),
        x.repeat([1, 2, 1, 1]),
        x.tile([2]),
        x.cumsum(1),
        x.cumprod(-1),
        x.prod(2),
        x.amax([0, 2]),
        x.amin(1, true),
        x.sort(1).values,
        x.topk(2, 0, false).values,
      ];
      if (float) {
        outs.push(x.prod(), x.norm(2, 1), x.norm(Infinity), x.norm(3, [0, 2]), x.trunc());
        outs.push(x.frac(), x.erf(), x.lerp(x.flip(0), 0.3), x.nanToNum());
        outs.push(x.select(0, 0).select(0, 1).outer(x.select(0, 2).select(0, 3)));
        outs.map((o, i) => o.mul(i + 1).sum()).reduce((a, b) => a.add(b)).backward();
      }
      const masks = [x.all(1), x.any(2), x.isnan(), x.isfinite()];
      const indices = [x.sort(2, true).indices, x.argsort(0), x.topk(3).indices];
      return [...outs, ...masks, ...indices, ...(float ? [x.grad!] : [])];
    }, float ? { atol: 1e-4, rtol: 1e-4 } : { exact: true });
    assert.equal(got.length, float ? 29 : 18);
  });
}

backendTest("composite factories: eye and linspace match cpu exactly", async (d) => {
  await matchesCpu(d, (dev) => [
    eye(3, 4, { device: dev }),
    eye(2, { dtype: "int32", device: dev }),
    linspace(-3.3, 7.1, 50, { device: dev }),
    linspace(0, 10, 7, { dtype: "int32", device: dev }),
  ], { exact: true });
});
