/**
 * einsum, meshgrid, cartesianProd, diag, trace, kron, rot90, cdist,
 * logcumsumexp, atan2, hypot, logaddexp, logaddexp2, fmod, floorDivide,
 * indexAdd, indexCopy, indexFill, searchsorted and bucketize against
 * PyTorch 1.13 (tests/fixtures/torch_ops_more.json: values and gradients,
 * 100 random einsum equations, zeros of both signs, ±inf, NaN, empty dims,
 * ties) on every backend; float64 gradient checks on cpu; errors naming the
 * bad equation, shape, dim or value.
 * @module
 */

import assert from "node:assert/strict";
import {
  atan2,
  bucketize,
  cartesianProd,
  cdist,
  type Device,
  diag,
  type DType,
  einsum,
  floorDivide,
  fmod,
  hypot,
  indexAdd,
  indexCopy,
  indexFill,
  kron,
  logaddexp,
  logaddexp2,
  logcumsumexp,
  meshgrid,
  rot90,
  searchsorted,
  stack,
  type Tensor,
  tensor,
  trace,
  zeros,
} from "../mod.ts";
import fixtures from "./fixtures/torch_ops_more.json" with { type: "json" };
import { assertClose, backendTest, decodeFixture, type FixtureValues } from "./harness.ts";
import { check, CPU0, inp } from "./gradcheck.ts";

interface EinsumCase {
  name: string;
  equation: string;
  inputs: FixtureValues[];
  shapes: number[][];
  output: FixtureValues;
  shape: number[];
  g: FixtureValues | null;
  grads: FixtureValues[] | null;
}

interface Case {
  name: string;
  op: string;
  dtype: string;
  out_dtype: string;
  args: Record<string, unknown>;
  inputs: Record<string, FixtureValues>;
  input_shapes: Record<string, number[]>;
  output: FixtureValues;
  shape: number[];
  g: FixtureValues | null;
  grads: Record<string, FixtureValues | null> | null;
}

const EINSUM = fixtures.einsum as unknown as EinsumCase[];
const CASES = fixtures.cases as unknown as Case[];

/** A number argument: JSON spells NaN and infinities as strings. */
const num = (v: unknown): number => (typeof v === "string" ? Number(v) : v as number);

function tol(d: Device, dtype: string) {
  if (dtype === "int32") return { atol: 0, rtol: 0 };
  if (dtype === "float64") return { atol: 1e-12, rtol: 1e-12 };
  return d.backend === "cpu" ? { atol: 2e-5, rtol: 2e-5 } : { atol: 1e-4, rtol: 1e-4 };
}

async function runEinsum(d: Device, c: EinsumCase): Promise<void> {
  const xs = c.inputs.map((v, i) =>
    tensor(decodeFixture(v), { shape: c.shapes[i], device: d, requiresGrad: true })
  );
  const out = einsum(c.equation, ...xs);
  const what = `einsum("${c.equation}") (${c.name}) on ${d}`;
  assert.deepEqual([...out.shape], c.shape, `${what}: shape`);
  const close = { atol: 1e-4, rtol: 1e-4 };
  assertClose(await out.data(), decodeFixture(c.output), { ...close, what: `${what}: output` });
  const g = tensor(decodeFixture(c.g!), { shape: c.shape, device: d });
  out.mul(g).sum().backward();
  for (const [i, x] of xs.entries()) {
    const expected = decodeFixture(c.grads![i]);
    // An operand every label of which is summed away still gets g broadcast.
    const grad = x.grad ? await x.grad.data() : new Float32Array(expected.length);
    assertClose(grad, expected, { ...close, what: `${what}: grad of operand ${i}` });
  }
}

for (const c of EINSUM.filter((c) => !c.name.startsWith("random_"))) {
  backendTest(`ops more: einsum ${c.name}`, (d) => runEinsum(d, c));
}

backendTest("ops more: einsum, 100 random equations", async (d) => {
  const random = EINSUM.filter((c) => c.name.startsWith("random_"));
  assert.equal(random.length, 100);
  for (const c of random) await runEinsum(d, c);
});

type Inputs = Record<string, Tensor>;
type Run = (t: Inputs, a: Record<string, unknown>) => Tensor;

/** Each op called as a PyTorch user would, from the case's args and inputs. */
const RUN: Record<string, Run> = {
  meshgrid: (t, a) => stack(meshgrid(Object.values(t), { indexing: a.indexing as "ij" | "xy" })),
  cartesianProd: (t) => cartesianProd(...Object.values(t)),
  diag: (t, a) => diag(t.x, a.diagonal as number),
  trace: (t) => trace(t.x),
  kron: (t) => kron(t.x, t.other),
  rot90: (t, a) => rot90(t.x, a.k as number, a.dims as number[]),
  cdist: (t, a) => cdist(t.x, t.other, { p: num(a.p) }),
  atan2: (t) => atan2(t.x, t.other),
  hypot: (t) => hypot(t.x, t.other),
  logaddexp: (t) => logaddexp(t.x, t.other),
  logaddexp2: (t) => logaddexp2(t.x, t.other),
  fmod: (t, a) => fmod(t.x, t.other ?? num(a.other)),
  floorDivide: (t, a) => floorDivide(t.x, t.other ?? num(a.other)),
  logcumsumexp: (t, a) => logcumsumexp(t.x, a.dim as number),
  indexAdd: (t, a) => indexAdd(t.x, a.dim as number, t.index, t.source, { alpha: num(a.alpha) }),
  indexCopy: (t, a) => indexCopy(t.x, a.dim as number, t.index, t.source),
  indexFill: (t, a) => indexFill(t.x, a.dim as number, t.index, num(a.value)),
  searchsorted: (t, a) => searchsorted(t.x, t.values, { right: a.right as boolean }),
  bucketize: (t, a) => bucketize(t.x, t.boundaries, { right: a.right as boolean }),
};

for (const c of CASES) {
  backendTest(`ops more: ${c.name}`, async (d) => {
    if (c.dtype === "float64" && d.backend !== "cpu") return; // WGSL has no f64
    const inputs: Inputs = {};
    for (const [name, values] of Object.entries(c.inputs)) {
      const dtype = (name === "index" ? "int32" : c.dtype) as DType;
      inputs[name] = tensor(decodeFixture(values), {
        shape: c.input_shapes[name],
        device: d,
        dtype,
        requiresGrad: c.grads !== null && dtype !== "int32",
      });
    }
    const out = RUN[c.op](inputs, c.args);
    const what = `${c.name} on ${d}`;
    assert.deepEqual([...out.shape], c.shape, `${what}: shape`);
    assert.equal(out.dtype, c.out_dtype, `${what}: dtype`);
    assertClose(await out.data(), decodeFixture(c.output), {
      ...tol(d, out.dtype),
      what: `${what}: output`,
    });
    if (!c.grads) return;
    const g = tensor(decodeFixture(c.g!), { shape: c.shape, device: d, dtype: out.dtype });
    out.mul(g).sum().backward();
    for (const [name, expected] of Object.entries(c.grads)) {
      if (expected === null) continue;
      const grad = inputs[name].grad;
      const want = decodeFixture(expected);
      const got = grad ? await grad.data() : new Float32Array(want.length);
      assertClose(got, want, { ...tol(d, c.dtype), what: `${what}: grad of ${name}` });
    }
  });
}

backendTest("ops more: floorDivide is not differentiable", (d) => {
  const x = tensor([5, -3], { device: d, requiresGrad: true });
  assert.equal(floorDivide(x, 2).requiresGrad, false);
});

// ------------------------------------------------------- float64 gradchecks

const f64 = { tol: 1e-6 };
const eq = (equation: string) => (...xs: Tensor[]) => einsum(equation, ...xs);
check("einsum bmm", eq("bij,bjk->bik"), [inp([2, 3, 4], 1), inp([2, 4, 2], 2)], f64);
check("einsum trace", eq("ii"), [inp([3, 3], 3)], f64);
check("einsum diagonal 3", eq("iij->ji"), [inp([3, 3, 2], 4)], f64);
check("einsum chain", eq("ij,jk,kl->li"), [inp([2, 3], 5), inp([3, 2], 6), inp([2, 4], 7)], f64);
check("einsum ellipsis", eq("...ij,...j->...i"), [inp([2, 1, 3, 4], 8), inp([3, 4], 9)], f64);
check("einsum broadcast 1", eq("ij,jk"), [inp([2, 1], 10), inp([3, 4], 11)], f64);
check("diag vector", (x) => diag(x, -1), [inp([3], 12)], f64);
check("diag matrix", (x) => diag(x, 1), [inp([3, 4], 13)], f64);
check("trace", (x) => trace(x), [inp([3, 4], 14)], f64);
check("kron", kron, [inp([2, 3], 15), inp([2, 1, 2], 16)], f64);
check("rot90", (x) => rot90(x, 3, [1, 0]), [inp([2, 3], 17)], f64);
check("meshgrid xy", (x, y) => stack(meshgrid([x, y], { indexing: "xy" })).square(), [
  inp([3], 18),
  inp([2], 19),
], f64);
check("cartesianProd", (x, y) => cartesianProd(x, y).square(), [inp([3], 20), inp([2], 21)], f64);
for (const p of [2, 1, 3, 0.5, Infinity]) {
  check(
    `cdist p=${p}`,
    (a, b) => cdist(a, b, { p }),
    [inp([2, 3, 2], 22), inp([2, 4, 2], 23)],
    f64,
  );
}
check("logcumsumexp", (x) => logcumsumexp(x, 1), [inp([2, 5], 24, -4, 4)], f64);
check("atan2", atan2, [inp([3, 4], 25), inp([4], 26)], f64);
check("hypot", hypot, [inp([3, 4], 27), inp([4], 28)], f64);
check("logaddexp", logaddexp, [inp([3, 4], 29), inp([4], 30)], f64);
check("logaddexp2", logaddexp2, [inp([3, 4], 31), inp([4], 32)], f64);
check("fmod", fmod, [
  { shape: [4], values: [5.2, -5.2, 0.7, 3.1] },
  { shape: [4], values: [3, 3, -2, 2] },
], f64);
const at = (values: number[]) => tensor(values, { dtype: "int32", device: CPU0 });
check("indexAdd", (x, s) => indexAdd(x, 0, at([0, 2, 0]), s, { alpha: 2 }), [
  inp([3, 2], 33),
  inp([3, 2], 34),
], f64);
check(
  "indexCopy",
  (x, s) => indexCopy(x, 1, at([2, 0]), s),
  [inp([2, 3], 35), inp([2, 2], 36)],
  f64,
);
check("indexFill", (x) => indexFill(x, 1, at([1]), 7), [inp([2, 3], 37)], f64);

// ------------------------------------------------------------------- errors

backendTest("ops more: einsum errors name the equation and shapes", (d) => {
  const a = zeros([2, 3], { device: d });
  const b = zeros([4, 5], { device: d });
  const bad: [() => unknown, RegExp][] = [
    [
      () => einsum("ij,jk", a),
      /einsum\("ij,jk"\) with operand shapes \[2, 3\].*2 operand terms, got 1/,
    ],
    [() => einsum("ij,jk", a, b), /subscript j has size 4 for operand 1.*size 3/],
    [() => einsum("ijk", a), /operand 0 has 2 dims but its term "ijk" names 3/],
    [
      () => einsum("ii", a),
      /with operand shapes \[2, 3\]: subscript i is repeated for operand 0 but the sizes differ, 2 vs 3/,
    ],
    [() => einsum("ij->ii", a), /output subscript i appears more than once/],
    [() => einsum("ij->k", a), /output subscript k does not appear/],
    [() => einsum("i1", a), /invalid subscript "1" at index 1/],
    [() => einsum("i.j", a), /'\.' for operand 0 that is not part of an ellipsis/],
    [() => einsum("...i...", a), /second ellipsis/],
    [() => einsum("i->i->i", a), /more than one '->'/],
    [() => einsum("ij"), /no operands/],
  ];
  for (const [fn, message] of bad) assert.throws(fn, message);
  assert.throws(
    () => einsum("ij,jk", a, zeros([3, 2], { device: d, dtype: "int32" })),
    /operand 1 is int32.*\[3, 2\].*operand 0 float32/,
  );
});

backendTest("ops more: errors of the other functions name the bad value", (d) => {
  const m = zeros([2, 3], { device: d });
  const v = zeros([3], { device: d });
  const idx = (values: number[]) => tensor(values, { dtype: "int32", device: d });
  const bad: [() => unknown, RegExp][] = [
    [
      () => diag(zeros([2, 2, 2], { device: d })),
      /diag: expected a 1-D or 2-D tensor, got shape \[2, 2, 2\]/,
    ],
    [() => diag(v, 0.5), /diag: diagonal must be an integer, got 0.5/],
    [() => trace(v), /trace: expected a 2-D tensor, got shape \[3\]/],
    [() => meshgrid([m]), /meshgrid: expected 0-D or 1-D tensors, got shape \[2, 3\] for tensor 0/],
    [() => meshgrid([v], { indexing: "yx" as "xy" }), /indexing must be "ij" or "xy", got "yx"/],
    [() => cartesianProd(m), /expected 1-D tensors, got shape \[2, 3\]/],
    [() => rot90(v), /rot90: expected at least 2 dims, got shape \[3\]/],
    [() => rot90(m, 1, [0, 0]), /rot90: the two dims must differ/],
    [() => rot90(m, 1, [0, 2]), /rot90/],
    [() => cdist(m, zeros([4, 2], { device: d })), /cdist: the last dims .* \[2, 3\] and \[4, 2\]/],
    [() => cdist(m, m, { p: -1 }), /cdist: p must be a number ≥ 0, got -1/],
    [() => cdist(v, m), /cdist: expected at least 2-D tensors.*\[3\]/],
    [() => logcumsumexp(idx([1, 2]), 0), /logcumsumexp/],
    [() => logcumsumexp(m, 2), /logcumsumexp/],
    [() => atan2(idx([1]), idx([2])), /atan2: expected float operands, got int32/],
    [() => hypot(m, zeros([4], { device: d })), /hypot/],
    [
      () => indexAdd(m, 0, idx([0]), zeros([2, 3], { device: d })),
      /indexAdd: source of shape \[2, 3\] does not fit the input of shape \[2, 3\] with 1 indices along dim 0 \(expected \[1, 3\]\)/,
    ],
    [
      () => indexAdd(m, 0, idx([5]), zeros([1, 3], { device: d })),
      /indexAdd: index 5 is out of range for dim 0 of size 2/,
    ],
    [
      () => indexAdd(m, 0, v, zeros([3, 3], { device: d })),
      /index must be a 0-D or 1-D int32 tensor, got float32/,
    ],
    [() => indexCopy(m, 2, idx([0]), m), /indexCopy/],
    [
      () => indexFill(m, 1, idx([-1]), 0),
      /indexFill: index -1 is out of range for dim 1 of size 3/,
    ],
    [
      () => searchsorted(m, zeros([3, 2], { device: d })),
      /searchsorted: the sorted tensor \(shape \[2, 3\]\) must be 1-D or share/,
    ],
    [
      () => searchsorted(v, idx([1])),
      /searchsorted: the sorted tensor is float32.*the values int32/,
    ],
    [() => bucketize(v, m), /bucketize: boundaries must be 1-D, got shape \[2, 3\]/],
  ];
  for (const [fn, message] of bad) assert.throws(fn, message);
});

backendTest(
  "ops more: repeated indexCopy positions and int32 zero divisors fail at the read",
  async (d) => {
    const m = zeros([3, 2], { device: d });
    const index = tensor([1, 1], { dtype: "int32", device: d });
    await assert.rejects(
      indexCopy(m, 0, index, zeros([2, 2], { device: d })).data(),
      /indexCopy: index repeats a position along dim 0/,
    );
    const ints = tensor([4, 5], { dtype: "int32", device: d });
    await assert.rejects(
      fmod(ints, tensor([2, 0], { dtype: "int32", device: d })).data(),
      /fmod: integer division by zero/,
    );
    await assert.rejects(
      floorDivide(ints, tensor([0, 1], { dtype: "int32", device: d })).data(),
      /floorDivide: integer division by zero/,
    );
  },
);

backendTest("ops more: einsum of int32, operands as one list, and matmul's numbers", async (d) => {
  const a = tensor([[1, -2, 3], [4, 5, -6]], { dtype: "int32", device: d });
  const b = tensor([[2, 0], [1, -1], [3, 7]], { dtype: "int32", device: d });
  const ab = einsum("ij,jk", a, b);
  assert.equal(ab.dtype, "int32");
  assert.deepEqual(await ab.toArray(), [[9, 23], [-5, -47]]);
  assert.deepEqual(await einsum("ii", b.narrow(0, 0, 2)).toArray(), 1);
  const x = tensor([[1, 2], [3, 4]], { device: d });
  const listed = einsum("ij,jk->ik", [x, x] as unknown as Tensor);
  assert.deepEqual(await listed.toArray(), [[7, 10], [15, 22]]);
  // The batched contraction is the batched matmul itself: the same numbers, bit for bit.
  const p = tensor(Array.from({ length: 2 * 3 * 5 }, (_, i) => Math.sin(i)), {
    shape: [2, 3, 5],
    device: d,
  });
  const q = tensor(Array.from({ length: 2 * 5 * 4 }, (_, i) => Math.cos(i)), {
    shape: [2, 5, 4],
    device: d,
  });
  assert.deepEqual(await einsum("bij,bjk->bik", p, q).data(), await p.matmul(q).data());
});

backendTest("ops more: meshgrid defaults to ij; searchsorted of a 0-d value", async (d) => {
  const [gx, gy] = meshgrid([tensor([1, 2, 3], { device: d }), tensor([4, 5], { device: d })]);
  assert.deepEqual([...gx.shape], [3, 2]);
  assert.deepEqual(await gy.toArray(), [[4, 5], [4, 5], [4, 5]]);
  const s = searchsorted(tensor([1, 2, 2, 3], { device: d }), tensor(2, { device: d }));
  assert.deepEqual([...s.shape], []);
  assert.equal(await s.item(), 1);
  assert.equal(
    await searchsorted(tensor([1, 2, 2, 3], { device: d }), tensor(2, { device: d }), {
      right: true,
    }).item(),
    3,
  );
});

// ------------------------------------------------- review regressions (07:20)

/** Elementwise equality that tells -0 from 0 and NaN equals NaN. */
function assertSame(actual: ArrayLike<number>, expected: number[], what: string): void {
  const show = (v: number) => (Object.is(v, -0) ? "-0" : String(v));
  const a = Array.from(actual);
  assert.equal(a.length, expected.length, `${what}: length`);
  expected.forEach((e, i) =>
    assert.ok(
      Object.is(a[i], e) || (a[i] === e && e !== 0),
      `${what}: element ${i} is ${show(a[i])}, expected ${show(e)} (all: ${a.map(show)})`,
    )
  );
}

backendTest("ops more: atan2 keeps the zero's sign and NaN beside an infinity", async (d) => {
  // PyTorch 1.13: atan2(-0, inf) = -0, atan2(-0, -inf) = -π, NaN beside ±inf is NaN.
  const y = tensor([-0, -0, Infinity, -Infinity, NaN, NaN, 0], { device: d });
  const x = tensor([Infinity, -Infinity, NaN, NaN, Infinity, -Infinity, -Infinity], { device: d });
  const pi = Math.fround(Math.PI);
  assertSame(await atan2(y, x).data(), [-0, -pi, NaN, NaN, NaN, NaN, pi], `atan2 on ${d}`);
});

for (const dtype of ["float32", "float64"] as DType[]) {
  backendTest(
    `ops more: fmod and floorDivide are exact near integer quotients (${dtype})`,
    async (d) => {
      if (dtype === "float64" && d.backend !== "cpu") return;
      const r = (v: number) => (dtype === "float32" ? Math.fround(v) : v);
      const x = tensor([1, 2.5, -1, 3.9283960819356884e-20, -0, -2, 5, 3.4e38, 0], {
        device: d,
        dtype,
      });
      const y = tensor([0.1, 0.001, 0.1, -1.3404663465185645e-26, 1, 1, 0.1, -3.4e38, -1], {
        device: d,
        dtype,
      });
      // PyTorch 1.13's values: fmod(1, 0.1) is 0.1 less an ulp-sized bit, not 0; -2 % 1 is -0.
      const mod = dtype === "float32"
        ? [0.09999998658895493, 0.0009998813038691878, -0.09999998658895493]
        : [0.09999999999999995, 0.000999999999999948, -0.09999999999999995];
      const last = dtype === "float32" ? 0.09999992698431015 : 0.09999999999999973;
      assertSame(
        await fmod(x, y).data(),
        [...mod, 1.2784341459769938e-26, -0, -0, last, 0, 0].map(r),
        `fmod on ${d}`,
      );
      assertSame(
        await floorDivide(x, y).data(),
        [9, 2499, -10, -2930619, -0, -2, 49, -1, -0],
        `floorDivide on ${d}`,
      );
    },
  );
}

backendTest(
  "ops more: searchsorted of rows sorted with NaN last is PyTorch's search",
  async (d) => {
    // As torch.sort leaves them (NaN last); PyTorch 1.13's binary search gives these.
    const s = [-2, -1, 0.5, 1, NaN, NaN, NaN];
    const v = [-2, 1, 2, NaN, -3, 0];
    const sorted = tensor(s, { device: d });
    const values = tensor(v, { device: d });
    const read = async (t: Tensor) => Array.from(await t.data());
    assert.deepEqual(await read(searchsorted(sorted, values)), [0, 3, 7, 7, 0, 2]);
    assert.deepEqual(await read(searchsorted(sorted, values, { right: true })), [1, 7, 7, 7, 0, 2]);
    const rows = tensor([...s, 0, 0, 0, 1, 1, 2, NaN], { shape: [2, 7], device: d });
    const both = tensor([...v, ...v], { shape: [2, 6], device: d });
    assert.deepEqual(await read(searchsorted(rows, both)), [0, 3, 7, 7, 0, 2, 0, 3, 5, 7, 0, 0]);
    assert.deepEqual(
      await read(searchsorted(rows, both, { right: true })),
      [1, 7, 7, 7, 0, 2, 0, 5, 7, 7, 0, 3],
    );
  },
);

backendTest("ops more: indexAdd into a 0-d input adds every indexed source element", async (d) => {
  // PyTorch 1.13: index_add(tensor(1.5), 0, [0, 0], [2, 3], alpha=2.5) is 14.
  const x = tensor(1.5, { device: d, requiresGrad: true });
  const source = tensor([2, 3], { device: d, requiresGrad: true });
  const index = tensor([0, 0], { dtype: "int32", device: d });
  const out = indexAdd(x, 0, index, source, { alpha: 2.5 });
  assert.deepEqual([...out.shape], []);
  assertClose(await out.data(), [14]);
  out.backward();
  assertClose(await x.grad!.data(), [1]);
  assertClose(await source.grad!.data(), [2.5, 2.5]);
  assert.throws(
    () => indexAdd(x, 0, index, tensor([2], { device: d })),
    /indexAdd: source of shape \[1\] does not fit the input of shape \[\] with 2 indices along dim 0 \(expected \[2\]\)/,
  );
});

backendTest("ops more: no-graph results free their intermediates at once, not at GC", (d) => {
  const x = tensor([0.5, -2, 3, -0, 7], { device: d });
  const y = tensor([1, 0.1, -2, 4, -3], { device: d });
  const sorted = tensor([-1, 0, 1, 2], { device: d });
  const index = tensor([0, 4, 4], { dtype: "int32", device: d });
  const source = tensor([1, 2, 3], { device: d });
  const one = tensor([4], { dtype: "int32", device: d });
  const first = tensor([1], { device: d });
  const run = () => {
    for (const f of [atan2, hypot, logaddexp, logaddexp2, fmod, floorDivide]) f(x, y).dispose();
    searchsorted(sorted, x).dispose();
    bucketize(x, sorted, { right: true }).dispose();
    indexAdd(x, 0, index, source, { alpha: 2 }).dispose();
    indexFill(x, 0, index, 1).dispose();
    // (One index: with more, the repeat check holds its count until the next read.)
    indexCopy(x, 0, one, first).dispose();
  };
  run(); // caches the scalar constants
  const base = d.memory().bytesInUse;
  // No await in between: finalizers cannot run, so whatever is left is held.
  run();
  assert.ok(
    d.memory().bytesInUse <= base,
    `${d.memory().bytesInUse - base} bytes left in use on ${d}`,
  );
});

backendTest("ops more: cdist p=inf gives each tied coordinate the whole gradient", async (d) => {
  // PyTorch 1.13 (its _cdist_backward): (1, 1) - (0, 0) ties, and both coordinates get g.
  const a = [[0, 0], [1, 1], [1, 2], [3, 0]].flat();
  const x1 = tensor([...a, ...a], { shape: [2, 4, 2], device: d, requiresGrad: true });
  const x2 = tensor([0, 0, 1, 2, 2, 1], { shape: [1, 3, 2], device: d, requiresGrad: true });
  const out = cdist(x1, x2, { p: Infinity });
  const row = [0, 2, 2, 1, 1, 1, 2, 0, 1, 3, 2, 1];
  assertClose(await out.data(), [...row, ...row]);
  out.sum().backward();
  const g1 = [-1, -1, 0, 0, -1, 2, 3, -2];
  assertClose(await x1.grad!.data(), [...g1, ...g1], { what: "grad of x1" });
  assertClose(await x2.grad!.data(), [-4, -4, -2, 6, 4, 0], { what: "grad of x2" });
});
