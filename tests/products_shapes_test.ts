/**
 * The products (mm, bmm, mv, dot, vdot, inner, tensordot, addmm, addmv,
 * addbmm, baddbmm, addr, ger, chainMatmul) and shape operations (movedim,
 * swapaxes, broadcastTo/Tensors/Shapes, atleast*, the stacks, tensorSplit,
 * h/v/dsplit, unflatten, ravel, flips, diagonal, diagEmbed, diagflat,
 * blockDiag, tril/triuIndices, combinations, vander, diff,
 * repeatInterleave, take, takeAlongDim, the scatters, and the methods of
 * kron/diag/trace/rot90) against PyTorch 1.13
 * (tests/fixtures/torch_products_shapes.json) on every backend, as
 * functions and as Tensor methods; float64 gradient checks on cpu; errors
 * naming the bad shapes and values.
 * @module
 */

import assert from "node:assert/strict";
import * as mg from "../mod.ts";
import { type Device, type DType, type Tensor, tensor } from "../mod.ts";
import { assertClose, backendTest, decodeFixture, type FixtureValues } from "./harness.ts";
import { check, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_products_shapes.json" with { type: "json" };

type Args = Record<string, unknown>;
type Run = (xs: Tensor[], a: Args, method: boolean, device: Device) => Tensor | Tensor[];

const num = (v: unknown) => v as number;
const nums = (v: unknown) => v as number[];
const opt = <T>(a: Args) => a as T;

/** Each fixture `fn` as multigrad's function, or (with `method`) the Tensor method where there is one. */
const RUN: Record<string, Run> = {
  mm: ([a, b], _, m) => (m ? a.mm(b) : mg.mm(a, b)),
  bmm: ([a, b], _, m) => (m ? a.bmm(b) : mg.bmm(a, b)),
  mv: ([a, b], _, m) => (m ? a.mv(b) : mg.mv(a, b)),
  dot: ([a, b], _, m) => (m ? a.dot(b) : mg.dot(a, b)),
  vdot: ([a, b], _, m) => (m ? a.vdot(b) : mg.vdot(a, b)),
  inner: ([a, b], _, m) => (m ? a.inner(b) : mg.inner(a, b)),
  tensordot: ([a, b], o) => mg.tensordot(a, b, o.dims as [number[], number[]]),
  addmm: ([i, a, b], o, m) => (m ? i.addmm(a, b, o) : mg.addmm(i, a, b, o)),
  addmv: ([i, a, b], o, m) => (m ? i.addmv(a, b, o) : mg.addmv(i, a, b, o)),
  addr: ([i, a, b], o, m) => (m ? i.addr(a, b, o) : mg.addr(i, a, b, o)),
  addbmm: ([i, a, b], o, m) => (m ? i.addbmm(a, b, o) : mg.addbmm(i, a, b, o)),
  baddbmm: ([i, a, b], o, m) => (m ? i.baddbmm(a, b, o) : mg.baddbmm(i, a, b, o)),
  ger: ([a, b], _, m) => (m ? a.ger(b) : mg.ger(a, b)),
  chainMatmul: (xs) => mg.chainMatmul(...xs),
  movedim: ([x], o, m) =>
    m
      ? x.moveaxis(o.source as number, o.destination as number)
      : mg.movedim(x, o.source as number, o.destination as number),
  swapaxes: ([x], o, m) =>
    m ? x.swapdims(num(o.dim0), num(o.dim1)) : mg.swapaxes(x, num(o.dim0), num(o.dim1)),
  broadcastTo: ([x], o, m) => (m ? x.broadcastTo(nums(o.shape)) : mg.broadcastTo(x, nums(o.shape))),
  broadcastTensors: (xs) => mg.broadcastTensors(...xs),
  atleast1d: (xs, _, m) => (m ? mg.atleast1d(xs) : mg.atleast1d(...xs)),
  atleast2d: (xs, _, m) => (m ? mg.atleast2d(xs) : mg.atleast2d(...xs)),
  atleast3d: (xs, _, m) => (m ? mg.atleast3d(xs) : mg.atleast3d(...xs)),
  hstack: (xs) => mg.hstack(xs),
  vstack: (xs) => mg.vstack(xs),
  rowStack: (xs) => mg.rowStack(xs),
  dstack: (xs) => mg.dstack(xs),
  columnStack: (xs) => mg.columnStack(xs),
  concat: (xs, o, m) => (m ? mg.concatenate(xs, num(o.dim)) : mg.concat(xs, num(o.dim))),
  tensorSplit: ([x], o, m) =>
    m
      ? x.tensorSplit(o.split as number, num(o.dim))
      : mg.tensorSplit(x, o.split as number, num(o.dim)),
  hsplit: ([x], o, m) => (m ? x.hsplit(o.split as number) : mg.hsplit(x, o.split as number)),
  vsplit: ([x], o, m) => (m ? x.vsplit(o.split as number) : mg.vsplit(x, o.split as number)),
  dsplit: ([x], o, m) => (m ? x.dsplit(o.split as number) : mg.dsplit(x, o.split as number)),
  unflatten: ([x], o, m) =>
    m ? x.unflatten(num(o.dim), nums(o.sizes)) : mg.unflatten(x, num(o.dim), nums(o.sizes)),
  ravel: ([x], _, m) => (m ? x.ravel() : mg.ravel(x)),
  flipud: ([x], _, m) => (m ? x.flipud() : mg.flipud(x)),
  fliplr: ([x], _, m) => (m ? x.fliplr() : mg.fliplr(x)),
  diagonal: ([x], o, m) =>
    m
      ? x.diagonal(num(o.offset), num(o.dim1), num(o.dim2))
      : mg.diagonal(x, num(o.offset), num(o.dim1), num(o.dim2)),
  diagEmbed: ([x], o, m) =>
    m
      ? x.diagEmbed(num(o.offset), num(o.dim1), num(o.dim2))
      : mg.diagEmbed(x, num(o.offset), num(o.dim1), num(o.dim2)),
  diagflat: ([x], o, m) => (m ? x.diagflat(num(o.offset)) : mg.diagflat(x, num(o.offset))),
  blockDiag: (xs) => mg.blockDiag(...xs),
  trilIndices: (_, o, __, device) =>
    mg.trilIndices(num(o.row), num(o.col), num(o.offset), { device }),
  triuIndices: (_, o, __, device) =>
    mg.triuIndices(num(o.row), num(o.col), num(o.offset), { device }),
  combinations: ([x], o) => mg.combinations(x, opt<mg.CombinationsOptions>(o)),
  vander: ([x], o) => mg.vander(x, opt<mg.VanderOptions>(o)),
  diff: ([x, prepend, append], o, m) => {
    const n = (o.n as number | undefined) ?? 1;
    const dim = (o.dim as number | undefined) ?? -1;
    return m ? x.diff(n, dim, { prepend, append }) : mg.diff(x, n, dim, { prepend, append });
  },
  repeatInterleave: ([x], o, m) => {
    const repeats = o.repeatsTensor
      ? tensor(nums(o.repeatsTensor), { dtype: "int32", device: x.device })
      : o.repeats as number;
    const dim = o.dim as number | undefined;
    const options = { outputSize: o.outputSize as number | undefined };
    return m
      ? x.repeatInterleave(repeats, dim, options)
      : mg.repeatInterleave(x, repeats, dim, options);
  },
  take: ([x, i], _, m) => (m ? x.take(i) : mg.take(x, i)),
  takeAlongDim: ([x, i], o, m) =>
    m ? x.takeAlongDim(i, o.dim as number | undefined) : mg.takeAlongDim(x, i, o.dim as number),
  selectScatter: ([x, s], o, m) =>
    m
      ? x.selectScatter(s, num(o.dim), num(o.index))
      : mg.selectScatter(x, s, num(o.dim), num(o.index)),
  sliceScatter: ([x, s], o, m) =>
    m
      ? x.sliceScatter(s, opt<mg.SliceScatterOptions>(o))
      : mg.sliceScatter(x, s, opt<mg.SliceScatterOptions>(o)),
  diagonalScatter: ([x, s], o, m) =>
    m
      ? x.diagonalScatter(s, num(o.offset), num(o.dim1), num(o.dim2))
      : mg.diagonalScatter(x, s, num(o.offset), num(o.dim1), num(o.dim2)),
  kron: ([a, b], _, m) => (m ? a.kron(b) : mg.kron(a, b)),
  diag: ([x], o, m) => (m ? x.diag(num(o.diagonal)) : mg.diag(x, num(o.diagonal))),
  trace: ([x], _, m) => (m ? x.trace() : mg.trace(x)),
  rot90: ([x], o, m) => (m ? x.rot90(num(o.k), nums(o.dims)) : mg.rot90(x, num(o.k), nums(o.dims))),
};

interface FixtureInput {
  values: FixtureValues;
  shape: number[];
  dtype: string;
  grad: boolean;
}

function input(i: FixtureInput, device: Device): Tensor {
  const dtype = i.dtype as DType;
  return tensor(decodeFixture(i.values), {
    shape: i.shape,
    dtype,
    device,
    requiresGrad: i.grad,
  });
}

const tol = (device: Device) =>
  device.backend === "cpu" ? { atol: 1e-5, rtol: 1e-5 } : { atol: 1e-4, rtol: 1e-4 };

const counts = new Map<string, number>();
for (const c of fixtures.cases) {
  const n = (counts.get(c.fn) ?? 0) + 1;
  counts.set(c.fn, n);
  for (const method of [false, true]) {
    backendTest(
      `${c.fn} #${n}${method ? " (method)" : ""}: output and gradients equal PyTorch's`,
      async (device) => {
        const run = RUN[c.fn];
        assert.ok(run, `no runner for ${c.fn}`);
        const xs = (c.inputs as FixtureInput[]).map((i) => input(i, device));
        const result = run(xs, c.args as Args, method, device);
        const outs = Array.isArray(result) ? result : [result];
        const expected = (c.list ? c.output : [c.output]) as FixtureValues[];
        assert.equal(Array.isArray(result), c.list, "returns an array");
        assert.equal(outs.length, expected.length, "number of outputs");
        for (const [k, out] of outs.entries()) {
          assert.equal(out.dtype, c.dtype, `output ${k} dtype`);
          assert.equal(out.device, device);
          assert.deepEqual([...out.shape], c.shapes[k], `output ${k} shape`);
          assertClose(await out.data(), decodeFixture(expected[k]), {
            ...tol(device),
            what: `output ${k}`,
          });
        }
        const gs = c.g as (FixtureValues | null)[];
        const wanted = outs.flatMap((o, k) =>
          gs[k] !== null && o.requiresGrad
            ? [
              o.mul(tensor(decodeFixture(gs[k]!), {
                shape: [...o.shape],
                device,
              })).sum(),
            ]
            : []
        );
        if (wanted.length === 0) {
          assert.ok(gs.every((g) => g === null), "PyTorch's output has a gradient, ours none");
          return;
        }
        wanted.reduce((p, q) => p.add(q)).backward();
        for (const [k, x] of xs.entries()) {
          const g = (c.grads as (FixtureValues | null)[])[k];
          if (g === null) continue;
          assert.ok(x.grad, `gradient of input ${k}: missing`);
          assert.deepEqual([...x.grad.shape], [...x.shape], `gradient of input ${k}: shape`);
          assertClose(await x.grad.data(), decodeFixture(g), {
            ...tol(device),
            what: `gradient of input ${k}`,
          });
        }
      },
    );
  }
}

// ---- float64 gradient checks on cpu ----

check("mm", (a, b) => mg.mm(a, b), [inp([3, 4], 1), inp([4, 2], 2)]);
check("bmm", (a, b) => mg.bmm(a, b), [inp([2, 3, 4], 3), inp([2, 4, 2], 4)]);
check("mv", (a, v) => mg.mv(a, v), [inp([3, 4], 5), inp([4], 6)]);
check("dot", (a, b) => mg.dot(a, b), [inp([5], 7), inp([5], 8)]);
check("vdot", (a, b) => mg.vdot(a, b), [inp([5], 9), inp([5], 10)]);
check("inner", (a, b) => mg.inner(a, b), [inp([2, 3], 11), inp([4, 3], 12)]);
check(
  "tensordot",
  (a, b) => mg.tensordot(a, b, [[0, 2], [1, 0]]),
  [inp([2, 3, 4], 13), inp([4, 2, 2], 14)],
);
check(
  "addmm",
  (i, a, b) => mg.addmm(i, a, b, { beta: 0.5, alpha: 2 }),
  [inp([3], 15), inp([2, 4], 16), inp([4, 3], 17)],
);
check("addmv", (i, a, v) => mg.addmv(i, a, v, { beta: -1 }), [
  inp([3], 18),
  inp([3, 2], 19),
  inp([2], 20),
]);
check("addr", (i, a, b) => mg.addr(i, a, b, { alpha: 3 }), [
  inp([2, 3], 21),
  inp([2], 22),
  inp([3], 23),
]);
check("addbmm", (i, a, b) => mg.addbmm(i, a, b, { beta: 2, alpha: 0.5 }), [
  inp([1, 3], 24),
  inp([3, 2, 2], 25),
  inp([3, 2, 3], 26),
]);
check("baddbmm", (i, a, b) => mg.baddbmm(i, a, b, { beta: 0 }), [
  inp([2, 2, 3], 27),
  inp([2, 2, 4], 28),
  inp([2, 4, 3], 29),
]);
check("ger", (a, b) => mg.ger(a, b), [inp([3], 30), inp([2], 31)]);
check("chainMatmul", (a, b, c) => mg.chainMatmul(a, b, c), [
  inp([2, 3], 32),
  inp([3, 4], 33),
  inp([4, 2], 34),
]);
check("movedim", (x) => mg.movedim(x, [0, 2], [1, 0]), [inp([2, 3, 4], 35)]);
check("broadcastTensors", (a, b) => {
  const [x, y] = mg.broadcastTensors(a, b);
  return x.mul(y);
}, [inp([3, 1], 36), inp([2, 1, 4], 37)]);
check("hstack/vstack/dstack/columnStack", (a, b) =>
  mg.cat([
    mg.hstack([a, b]).reshape([-1]),
    mg.vstack([a, b]).reshape([-1]),
    mg.dstack([a, b]).reshape([-1]),
    mg.columnStack([a, b]).reshape([-1]),
  ]), [inp([3], 38), inp([3], 39)]);
check("swapaxes/broadcastTo/atleast3d/concat/ravel/h/v/dsplit", (x) => {
  const flat = (t: Tensor) => t.reshape([-1]);
  const parts = [
    mg.swapaxes(x, 0, 2),
    mg.swapdims(x, 1, 0).mul(2),
    mg.broadcastTo(x, [3, 2, 2, 2]),
    mg.atleast3d(x.sum(0)),
    mg.concat([x, x.mul(3)], 1),
    mg.ravel(x).mul(-1),
    ...mg.hsplit(x, [1]).map((p, i) => p.mul(i + 2)),
    ...mg.vsplit(x, 2).map((p, i) => p.mul(i + 4)),
    ...mg.dsplit(x, [1]).map((p, i) => p.mul(i + 6)),
    mg.moveaxis(x, 0, -1),
  ];
  return mg.cat(parts.map(flat));
}, [inp([2, 2, 2], 61)]);
check("tensorSplit", (x) => {
  const parts = mg.tensorSplit(x, [1, 3], 1);
  return mg.cat(parts.map((p, i) => p.mul(i + 1)), 1);
}, [inp([2, 5], 40)]);
check("unflatten/fliplr/flipud", (x) => mg.flipud(mg.fliplr(mg.unflatten(x, 0, [2, 3]))), [
  inp([6, 2], 41),
]);
check("diagonal", (x) => mg.diagonal(x, -1, 2, 0), [inp([3, 2, 4], 42)]);
check("diagEmbed", (x) => mg.diagEmbed(x, 2, 0, 2), [inp([2, 3], 43)]);
check("diagflat", (x) => mg.diagflat(x, 1), [inp([2, 2], 44)]);
check("blockDiag", (a, b) => mg.blockDiag(a, b), [inp([2, 2], 45), inp([3], 46)]);
check("combinations", (x) => mg.combinations(x, { r: 3, withReplacement: true }), [inp([3], 47)]);
check("vander", (x) => mg.vander(x, { N: 4 }), [{ shape: [3], values: [0, -1.5, 0.7] }]);
check("diff", (x, p, a) => mg.diff(x, 2, 0, { prepend: p, append: a }), [
  inp([3, 2], 48),
  inp([1, 2], 49),
  inp([2, 2], 50),
]);
check("repeatInterleave", (x) => mg.repeatInterleave(x, [2, 0, 1], 1), [inp([2, 3], 51)]);
check(
  "repeatInterleave (tensor repeats)",
  (x) => mg.repeatInterleave(x, tensor([1, 3], { dtype: "int32" }), 0, { outputSize: 4 }),
  [inp([2, 2], 52)],
);
check("take", (x) => mg.take(x, tensor([[0, -1], [2, 2]], { dtype: "int32" })), [
  inp([2, 3], 53),
]);
check(
  "takeAlongDim",
  (x) => mg.takeAlongDim(x, tensor([[[1], [0]]], { dtype: "int32" }), 2),
  [inp([2, 2, 3], 54)],
);
check("selectScatter", (x, s) => mg.selectScatter(x, s, 0, 1), [inp([3, 2], 55), inp([2], 56)]);
check(
  "sliceScatter",
  (x, s) => mg.sliceScatter(x, s, { dim: 1, start: 1, step: 2 }),
  [inp([2, 5], 57), inp([2, 2], 58)],
);
check("diagonalScatter", (x, s) => mg.diagonalScatter(x, s, 1, 1, 0), [
  inp([4, 3], 59),
  inp([3], 60),
]);

// ---- values and errors not covered by the fixture ----

backendTest("broadcastShapes and atleast return PyTorch's shapes", (device) => {
  assert.deepEqual(mg.broadcastShapes(2, [3, 1], [1, 1, 1]), [1, 3, 2]);
  assert.deepEqual(mg.broadcastShapes(), []);
  const s = tensor(2, { device });
  assert.deepEqual([...mg.atleast3d(s).shape], [1, 1, 1]);
  const v = tensor([1, 2], { device });
  assert.equal(mg.atleast1d(v), v);
  assert.ok(Array.isArray(mg.atleast2d([v])));
});

backendTest(
  "addmm_ and the other in-place products equal the out-of-place ones, with gradients",
  async (device) => {
    const t = (shape: number[], seed: number) =>
      tensor(
        Array.from({ length: shape.reduce((p, q) => p * q, 1) }, (_, i) => ((i * seed) % 7) - 3),
        {
          shape,
          device,
          requiresGrad: true,
        },
      );
    const cases: [number[], Tensor[], (x: Tensor, a: Tensor, b: Tensor) => Tensor, string][] = [
      [
        [2, 3],
        [t([2, 4], 3), t([4, 3], 5)],
        (x, a, b) => x.addmm_(a, b, { beta: 2, alpha: 0.5 }),
        "addmm",
      ],
      [[2], [t([2, 3], 2), t([3], 4)], (x, a, b) => x.addmv_(a, b, { beta: -1 }), "addmv"],
      [[2, 3], [t([2], 3), t([3], 2)], (x, a, b) => x.addr_(a, b, { alpha: 3 }), "addr"],
      [[2, 3], [t([4, 2, 2], 5), t([4, 2, 3], 3)], (x, a, b) => x.addbmm_(a, b), "addbmm"],
      [
        [4, 2, 3],
        [t([4, 2, 2], 5), t([4, 2, 3], 3)],
        (x, a, b) => x.baddbmm_(a, b, { beta: 0 }),
        "baddbmm",
      ],
    ];
    for (const [shape, [a, b], inPlace, name] of cases) {
      const w = t(shape, 1);
      const expected = (mg as unknown as Record<string, (...xs: unknown[]) => Tensor>)[name];
      const options = name === "addmm"
        ? { beta: 2, alpha: 0.5 }
        : name === "addmv"
        ? { beta: -1 }
        : name === "addr"
        ? { alpha: 3 }
        : name === "baddbmm"
        ? { beta: 0 }
        : {};
      const want = expected(w, a, b, options);
      const y = w.mul(1);
      const returned = inPlace(y, a, b);
      assert.equal(returned, y, `${name}_ returns the tensor itself`);
      assertClose(await y.data(), await want.data(), { what: `${name}_ values` });
      want.sum().backward();
      const grads = [w.grad!, a.grad!, b.grad!].map((g) => g.clone());
      for (const x of [w, a, b]) x.grad = null;
      y.sum().backward();
      for (const [k, x] of [w, a, b].entries()) {
        assertClose(await x.grad!.data(), await grads[k].data(), {
          what: `${name}_ gradient ${k}`,
        });
      }
    }
    // A leaf that requires grad is refused, as PyTorch.
    assert.throws(
      () => t([2, 3], 1).addmm_(t([2, 4], 3), t([4, 3], 5)),
      /a leaf tensor .*requires grad cannot be changed in place/,
    );
  },
);

Deno.test("products reject bad shapes and dtypes, naming them", () => {
  const m = (shape: number[], dtype: DType = "float32") => mg.zeros(shape, { dtype });
  assert.throws(() => mg.mm(m([2, 3]), m([2, 3])), /\[2, 3\] and \[2, 3\]/);
  assert.throws(() => mg.mm(m([2]), m([2, 3])), /mm: the first argument must be 2-D.*\[2\]/);
  assert.throws(() => mg.bmm(m([2, 2, 3]), m([3, 3, 2])), /bmm: batch sizes differ \(2 vs 3\)/);
  assert.throws(() => mg.bmm(m([2, 3]), m([2, 3, 2])), /batch1 must be 3-D.*\[2, 3\]/);
  assert.throws(() => mg.mv(m([2, 3]), m([2])), /cannot be multiplied \(3 vs 2\)/);
  assert.throws(() => mg.dot(m([3]), m([4])), /dot: the vectors have different sizes \(3 and 4\)/);
  assert.throws(
    () => mg.dot(m([3]), m([3], "int32")),
    /dot: expected one dtype, got float32 and int32/,
  );
  assert.throws(
    () => mg.inner(m([2, 3]), m([2])),
    /inner: the last dims differ.*\[2, 3\] and \[2\]/,
  );
  assert.throws(
    () => mg.tensordot(m([2, 3]), m([4, 2]), 1),
    /tensordot: contracted dims differ in size: dim 1 of a.*has 3, dim 0 of b.*has 4/,
  );
  assert.throws(() => mg.tensordot(m([2]), m([2]), 2), /cannot contract 2 dims/);
  assert.throws(
    () => mg.addmm(m([3, 3]), m([2, 2]), m([2, 2])),
    /addmm: input of shape \[3, 3\] does not broadcast to the product's shape \[2, 2\]/,
  );
  assert.throws(
    () => mg.addmm(m([2, 2], "float64"), m([2, 2]), m([2, 2])),
    /addmm: expected one dtype, got float64 and float32/,
  );
  assert.throws(() => mg.addbmm(m([2, 2]), m([2, 2, 3]), m([3, 3, 2])), /addbmm: batch1 of shape/);
  assert.throws(() => mg.chainMatmul(m([2, 2]), m([2])), /chainMatmul: matrix 1 must be 2-D/);
  assert.throws(() => mg.chainMatmul(), /at least one matrix/);
  assert.throws(
    () => mg.chainMatmul(m([2, 3]), m([2, 2])),
    /chainMatmul: matrix 0 of shape \[2, 3\] and matrix 1 of shape \[2, 2\] cannot be multiplied/,
  );
  assert.throws(() => mg.mm(m([2, 2], "int32"), m([2, 2], "int32")), /floating-point.*int32/);
});

Deno.test("shape ops reject bad dims, sizes and sections, naming them", () => {
  const x = mg.zeros([2, 3, 4]);
  assert.throws(() => mg.movedim(x, [0, 1], [2]), /same number of dims \(2 vs 1\)/);
  assert.throws(() => mg.movedim(x, [0, 0], [1, 2]), /repeated dim in source \[0,0\]/);
  assert.throws(() => mg.movedim(x, 3, 0), /RangeError|out of range|3/);
  assert.throws(() => mg.broadcastTo(x, [3, 4]), /expand/);
  assert.throws(() => mg.broadcastShapes([2, 3], [4]), /\[2, 3\] and \[4\] cannot be broadcast/);
  assert.throws(() => mg.broadcastShapes([2, -1]), /shape 0 must be a non-negative integer/);
  assert.throws(() => mg.hstack([]), /hstack: expected a non-empty array/);
  assert.throws(() => mg.tensorSplit(x, 0), /number of sections must be a positive integer, got 0/);
  assert.throws(() => mg.tensorSplit(mg.zeros([]), 2), /at least a 1-dimensional/);
  assert.throws(() => mg.hsplit(x, 2), /hsplit: dim 1 of size 3.*cannot be split into 2/);
  assert.throws(
    () => mg.vsplit(mg.zeros([4]), 2),
    /vsplit: expected a tensor with at least 2 dims/,
  );
  assert.throws(() => mg.dsplit(mg.zeros([2, 2]), 2), /at least 3 dims, got shape \[2, 2\]/);
  assert.throws(
    () => mg.unflatten(x, 1, [2, 2]),
    /sizes \[2,2\] do not multiply to dim 1's size 3/,
  );
  assert.throws(() => mg.unflatten(x, 2, [-1, -1]), /do not multiply/);
  assert.throws(() => mg.fliplr(mg.zeros([3])), /fliplr: expected a tensor with at least 2 dims/);
  assert.throws(() => mg.flipud(mg.zeros([])), /flipud/);
});

Deno.test("structure ops reject bad input, naming it", () => {
  const x = mg.zeros([2, 3]);
  assert.throws(() => mg.diagonal(x, 0, 1, 1), /dim1 and dim2 cannot be the same dim/);
  assert.throws(() => mg.diagonal(x, 0.5), /offset must be an integer, got 0.5/);
  assert.throws(
    () => mg.diagEmbed(mg.zeros([])),
    /diagEmbed: expected a tensor with at least 1 dim/,
  );
  assert.throws(() => mg.blockDiag(mg.zeros([1, 1, 1])), /blockDiag: tensor 0 has 3 dims/);
  assert.throws(() => mg.trilIndices(-1, 3), /row must be a non-negative integer, got -1/);
  assert.throws(
    () => mg.combinations(x),
    /combinations: expected a 1-D tensor, got shape \[2, 3\]/,
  );
  assert.throws(
    () => mg.combinations(mg.zeros([3]), { r: -1 }),
    /r must be a non-negative integer/,
  );
  assert.throws(() => mg.vander(x), /vander: x must be a 1-D tensor/);
  assert.throws(
    () => mg.vander(mg.zeros([3]), { N: -1 }),
    /N must be a non-negative integer, got -1/,
  );
  assert.throws(() => mg.diff(x, -1), /order n must be a non-negative integer, got -1/);
  assert.throws(() => mg.diff(x, 1, -1, { prepend: mg.zeros([3]) }), /prepend of shape \[3\]/);
  assert.throws(() => mg.repeatInterleave(x, [1, 2], 1), /2 repeats for dim 1 of size 3/);
  assert.throws(() => mg.repeatInterleave(x, -1), /non-negative integer, got -1/);
  assert.throws(
    () => mg.repeatInterleave(x, tensor([1, 2, 3], { dtype: "int32" }), 1),
    /outputSize \(their sum\) is required/,
  );
  assert.throws(
    () => mg.take(x, tensor([0.5])),
    /take: the index must be an int32 tensor, got float32/,
  );
  assert.throws(
    () => mg.take(x, tensor([6], { dtype: "int32" })),
    /take: index 6 is out of range for a tensor of 6 elements/,
  );
  assert.throws(
    () => mg.takeAlongDim(x, tensor([0], { dtype: "int32" }), 0),
    /same number of dims/,
  );
  assert.throws(
    () => mg.selectScatter(x, mg.zeros([3]), 0, 2),
    /index 2 is out of range for dim 0 of size 2/,
  );
  assert.throws(
    () => mg.selectScatter(x, mg.zeros([2]), 0, 1),
    /src of shape \[2\] must have shape \[3\]/,
  );
  assert.throws(
    () => mg.selectScatter(x, [0, 0, 0] as unknown as Tensor, 0, 1),
    /selectScatter: src must be a Tensor, got object/,
  );
  assert.throws(
    () => mg.sliceScatter(x, mg.zeros([2, 2]), { dim: 1, step: 0 }),
    /step must be a positive integer, got 0/,
  );
  assert.throws(
    () => mg.sliceScatter(x, mg.zeros([2, 3]), { dim: 1, start: 1, step: 1 }),
    /sliceScatter: src of shape \[2, 3\] must have shape \[2, 2\]/,
  );
  assert.throws(
    () => mg.diagonalScatter(x, mg.zeros([3])),
    /src of shape \[3\] must have shape \[2\]/,
  );
});

backendTest(
  "take rejects an out-of-range index computed on the device at the next read",
  async (device) => {
    const x = mg.zeros([2, 3], { device });
    const i = tensor([1], { dtype: "int32", device }).add(6);
    await assert.rejects(() => mg.take(x, i).data(), /index .* out of range/);
  },
);

// ---- review s14: cases found against PyTorch 1.13 ----

backendTest(
  "diff with n = 0 returns the input, ignoring prepend and append, as PyTorch",
  async (device) => {
    const x = tensor([1, 4, 9], { device });
    const y = mg.diff(x, 0, -1, {
      prepend: tensor([5, 6], { device }),
      append: tensor([7], { device }),
    });
    assert.deepEqual([...y.shape], [3]);
    assertClose(await y.data(), [1, 4, 9]);
    // They are still checked (torch: "diff expects prepend or append to be the same dimension").
    assert.throws(
      () => mg.diff(x, 0, -1, { prepend: mg.zeros([2, 2], { device }) }),
      /prepend of shape \[2, 2\]/,
    );
  },
);

backendTest("tensordot contracts a size-1 dim against a size-0 one, as PyTorch", async (device) => {
  const a = mg.ones([0], { device, requiresGrad: true });
  const b = mg.ones([1, 4], { device });
  const y = mg.tensordot(a, b, [[0], [0]]);
  assert.deepEqual([...y.shape], [4]);
  assertClose(await y.data(), [0, 0, 0, 0]);
  const z = mg.tensordot(mg.ones([1], { device }), mg.ones([0, 4], { device }), [[0], [0]]);
  assert.deepEqual([...z.shape], [4]);
  assertClose(await z.data(), [0, 0, 0, 0]);
});

backendTest(
  "repeatInterleave refuses negative tensor repeats and a wrong outputSize",
  async (device) => {
    const x = mg.zeros([2, 3], { device });
    const counts = (v: number[]) => tensor(v, { dtype: "int32", device });
    assert.throws(
      () => mg.repeatInterleave(x, counts([1, -1]), 0, { outputSize: 0 }),
      /repeatInterleave: repeats must not be negative, got -1/,
    );
    // Counts the device computed are checked at the next read.
    const computed = counts([1, 1]).sub(counts([0, 2]));
    await assert.rejects(
      () => mg.repeatInterleave(x, computed, 0, { outputSize: 0 }).data(),
      /repeats must not be negative, got -1/,
    );
    await assert.rejects(
      () => mg.repeatInterleave(x, counts([1, 2]), 0, { outputSize: 2 }).data(),
      /outputSize 2 is not the sum of the repeats \(3\)/,
    );
  },
);

Deno.test("addr of int32 tensors refuses a fractional alpha or beta, as PyTorch", () => {
  const i = (shape: number[]) => mg.ones(shape, { dtype: "int32" });
  assert.throws(
    () => mg.addr(i([2, 2]), i([2]), i([2]), { alpha: 0.5 }),
    /addr: for int32 tensors, alpha and beta must be integers, got beta 1 and alpha 0.5/,
  );
  assert.throws(() => mg.addr(i([2, 2]), i([2]), i([2]), { beta: 0.5 }), /beta 0.5/);
});

backendTest(
  "blockDiag's dtype follows PyTorch's result type (0-d tensors do not widen)",
  async (device) => {
    if (device.backend === "cpu") {
      const f64 = (v: number) => tensor(v, { dtype: "float64", device });
      const y = mg.blockDiag(f64(2), tensor([1, 3], { device }));
      assert.equal(y.dtype, "float32");
      assertClose(await y.data(), [2, 0, 0, 0, 1, 3]);
      assert.equal(mg.blockDiag(f64(2), tensor(1, { device })).dtype, "float64");
    }
    const z = mg.blockDiag(tensor([1, 2], { dtype: "int32", device }), tensor(0.5, { device }));
    assert.equal(z.dtype, "float32");
    assertClose(await z.data(), [1, 2, 0, 0, 0, 0.5]);
  },
);

backendTest("the scatters cast src to the input's dtype, as PyTorch", async (device) => {
  const ints = mg.zeros([2, 2], { dtype: "int32", device });
  const half = (shape: number[]) => mg.full(shape, 1.5, { device });
  const s = mg.sliceScatter(ints, half([2, 1]), { dim: 1, start: 0, end: 1 });
  assert.equal(s.dtype, "int32");
  assertClose(await s.data(), [1, 0, 1, 0]);
  const d = mg.diagonalScatter(ints, half([2]));
  assert.equal(d.dtype, "int32");
  assertClose(await d.data(), [1, 0, 0, 1]);
  const x = mg.zeros([2, 2], { device, requiresGrad: true });
  const t = mg.selectScatter(x, tensor([3, 4], { dtype: "int32", device }), 1, 0);
  assert.equal(t.dtype, "float32");
  assertClose(await t.data(), [3, 0, 4, 0]);
});

Deno.test("selectScatter of a float64 src into float32 gives float32 and a float64 gradient", async () => {
  const x = mg.zeros([2, 2], { requiresGrad: true });
  const src = tensor([1, 2], { dtype: "float64", requiresGrad: true });
  const y = mg.selectScatter(x, src, 1, 0);
  assert.equal(y.dtype, "float32");
  y.mul(tensor([[1, 2], [3, 4]])).sum().backward();
  assert.equal(src.grad!.dtype, "float64");
  assertClose(await src.grad!.data(), [1, 3]);
  assertClose(await x.grad!.data(), [0, 2, 0, 4]);
});

backendTest("take from an empty tensor is an error at once, as PyTorch's", (device) => {
  // An index computed on the device (no host-known range) is refused all the same.
  const index = tensor([1], { dtype: "int32", device }).sub(1);
  assert.throws(
    () => mg.take(mg.zeros([2, 0], { device }), index),
    /take: cannot take 1 elements from an empty tensor \(shape \[2, 0\]\)/,
  );
});

Deno.test("unflatten and repeatInterleave along a dim of a 0-d tensor name the problem", () => {
  assert.throws(() => mg.unflatten(mg.zeros([]), 0, [1]), /unflatten: .*0-d/);
  assert.throws(
    () => mg.repeatInterleave(mg.zeros([]), 2, 0),
    /repeatInterleave: dim 0 given for a 0-d tensor/,
  );
  const counts = tensor([2], { dtype: "int32" });
  assert.throws(
    () => mg.repeatInterleave(mg.zeros([]), counts, -1, { outputSize: 2 }),
    /repeatInterleave: dim -1 given for a 0-d tensor/,
  );
  // Without a dim, the 0-d tensor is flattened first, as PyTorch.
  assert.deepEqual([...mg.repeatInterleave(mg.zeros([]), 2).shape], [2]);
});
