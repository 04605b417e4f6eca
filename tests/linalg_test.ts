/**
 * The `linalg` namespace against PyTorch 1.13 (tests/fixtures/torch_linalg.json:
 * batched well-conditioned, singular, pivoting-needing, tall, wide and
 * rank-deficient matrices; values and gradients, eigen- and singular vectors
 * up to sign) on every backend in float32 and on cpu in float64; float64
 * gradient checks on cpu for every differentiable function; errors naming
 * the bad shape, value or batch element (the singular and
 * not-positive-definite ones found by the device, at the next read).
 * @module
 */

import assert from "node:assert/strict";
import { cat, type Device, type DType, eye, linalg, type Tensor, tensor } from "../mod.ts";
import {
  assertTensor,
  backendTest,
  decodeFixture,
  fixtureTensor,
  type FixtureValues,
  floats,
  shapeOf,
} from "./harness.ts";
import { check, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_linalg.json" with { type: "json" };
import more from "./fixtures/torch_stats_linalg.json" with { type: "json" };

type Args = Record<string, unknown>;
type Case = {
  name: string;
  args: Args;
  inputs: FixtureValues[];
  shapes: number[][];
  outShapes: number[][];
  outputs: FixtureValues[];
  abs: boolean[];
  weights: (FixtureValues | null)[];
  grads: (FixtureValues | null)[] | null;
};

const num = (v: unknown): number => (typeof v === "string" ? Number(v) : v as number);

/** The multigrad call a fixture case names, its outputs as a list. */
function run(c: Case, xs: Tensor[]): Tensor[] {
  const a = c.args;
  const list = (t: Tensor | Tensor[]) => (Array.isArray(t) ? t : [t]);
  switch (c.name) {
    case "vectorNorm":
      return [linalg.vectorNorm(xs[0], {
        ord: num(a.ord),
        dim: a.dim as number | number[] | undefined ?? undefined,
        keepdim: a.keepdim as boolean,
      })];
    case "matrixNorm": {
      const ord = a.ord === "fro" || a.ord === "nuc" ? a.ord : num(a.ord);
      const dim = a.dim as [number, number] | undefined;
      return [linalg.matrixNorm(xs[0], { ord, dim, keepdim: a.keepdim as boolean | undefined })];
    }
    case "det":
      return [linalg.det(xs[0])];
    case "slogdet":
      return linalg.slogdet(xs[0]);
    case "inv":
      return [linalg.inv(xs[0])];
    case "solve":
      return [linalg.solve(xs[0], xs[1], a as linalg.SolveOptions)];
    case "cholesky":
      return [linalg.cholesky(xs[0], a as linalg.CholeskyOptions)];
    case "solveTriangular":
      return [linalg.solveTriangular(xs[0], xs[1], a as unknown as linalg.SolveTriangularOptions)];
    case "qr":
      return linalg.qr(xs[0], a as linalg.QrOptions);
    case "eigh":
      return linalg.eigh(xs[0], a as linalg.EighOptions);
    case "eigvalsh":
      return [linalg.eigvalsh(xs[0], a as linalg.EighOptions)];
    case "svd":
      return linalg.svd(xs[0], a as linalg.SvdOptions);
    case "svdvals":
      return [linalg.svdvals(xs[0])];
    case "pinv":
      return [linalg.pinv(xs[0], a as linalg.PinvOptions)];
    case "matrixRank":
      return [linalg.matrixRank(xs[0], a as linalg.PinvOptions)];
    case "matrixPower":
      return [linalg.matrixPower(xs[0], a.n as number)];
    case "multiDot":
      return [linalg.multiDot(xs)];
    case "cross":
      return list(linalg.cross(xs[0], xs[1], a as { dim?: number }));
  }
  throw new Error(`unknown case ${c.name}`);
}

function tolerance(device: Device, dtype: DType) {
  if (dtype === "float64") return { atol: 1e-9, rtol: 1e-8 };
  return device.backend === "cpu" ? { atol: 2e-4, rtol: 2e-3 } : { atol: 5e-4, rtol: 5e-3 };
}

async function compare(c: Case, device: Device, dtype: DType): Promise<void> {
  const grad = c.grads !== null;
  const xs = c.inputs.map((v, i) =>
    tensor(decodeFixture(v), { shape: c.shapes[i], device, dtype, requiresGrad: grad })
  );
  const outs = run(c, xs);
  const tol = tolerance(device, dtype);
  const label = `${c.name} ${JSON.stringify(c.args)}`;
  assert.equal(outs.length, c.outputs.length, `${label}: number of outputs`);
  let loss: Tensor | null = null;
  for (let [i, out] of outs.entries()) {
    let expected = decodeFixture(c.outputs[i]);
    let shape = c.outShapes[i];
    if (c.name === "svd" && c.args.fullMatrices !== false && i !== 1) {
      // Full U's (Vh's) completing columns (rows) may be any orthonormal complement: check that
      // the matrix is orthogonal, then compare the first k columns of U (rows of Vh).
      const cols = i === 0 ? out : out.transpose(-1, -2);
      const size = cols.shape.at(-1)!;
      const k = outs[1].shape.at(-1)!;
      const gram = cols.transpose(-1, -2).matmul(cols);
      const identity = eye(size, { dtype, device }).expand([...gram.shape]);
      await assertTensor(gram, Array.from(await identity.data()), {
        ...tol,
        what: `${label} orthogonal ${i}`,
      });
      const last = shapeOf(c.outputs[i]).at(-1)!;
      const kept = (e: number) => (i === 0 ? e % last : Math.floor(e / last) % last) < k;
      expected = expected.filter((_, e) => kept(e));
      out = i === 0 ? cols.narrow(-1, 0, k) : cols.narrow(-1, 0, k).transpose(-1, -2);
      shape = shape.map((s, d) => (d === shape.length - (i === 0 ? 1 : 2) ? k : s));
    }
    assert.deepEqual([...out.shape], shape, `${label}: output ${i} shape`);
    await assertTensor(c.abs[i] ? out.abs() : out, expected, {
      ...tol,
      what: `${label} output ${i}`,
    });
    const w = c.weights[i];
    if (w !== null && grad) {
      const term = (c.abs[i] ? out.square() : out).mul(fixtureTensor(w, device, { dtype })).sum();
      loss = loss === null ? term : loss.add(term);
    }
  }
  if (!grad || loss === null) return;
  loss.backward();
  for (const [i, g] of c.grads!.entries()) {
    if (g === null) continue;
    await assertTensor(xs[i].grad!, decodeFixture(g), { ...tol, what: `${label} grad ${i}` });
  }
}

const cases = fixtures.cases as unknown as Case[];
for (const [k, c] of cases.entries()) {
  backendTest(`linalg.${c.name} #${k} equals PyTorch's (values and gradients)`, async (device) => {
    await compare(c, device, "float32");
    if (device.backend === "cpu") await compare(c, device, "float64");
  });
}

Deno.test("every linalg function has fixture cases", () => {
  // The functions added in wave s14 have theirs in torch_stats_linalg.json (tests/stats_linalg_test.ts).
  // norm, diagonal and matmul have theirs in torch_api_gaps.json (tests/api_gaps_test.ts), and
  // LinAlgError is the error class, not a function.
  const names = new Set([
    ...cases.map((c) => c.name),
    ...more.linalg.map((c) => c.fn),
    ...["norm", "diagonal", "matmul", "LinAlgError"],
  ]);
  for (const name of Object.keys(linalg)) {
    assert.ok(names.has(name), `no fixture case for linalg.${name}`);
  }
});

// ---------------------------------------------------------------- gradchecks (float64, cpu)

const shift = (x: Tensor, s = 3) => x.add(eye(x.shape.at(-1)!, { dtype: x.dtype }).mul(s));
const spdOf = (x: Tensor) => shift(x.matmul(x.transpose(-1, -2)), 1);
const symOf = (x: Tensor) => x.add(x.transpose(-1, -2));
const flat = (ts: Tensor[]) => cat(ts.map((t) => t.reshape([t.numel()])), 0);

check("vectorNorm ord 2", (x) => linalg.vectorNorm(x), [inp([2, 3], 1)]);
check("vectorNorm ord 3 dim -1", (x) => linalg.vectorNorm(x, { ord: 3, dim: -1 }), [
  inp([2, 3], 2),
]);
check("matrixNorm fro", (x) => linalg.matrixNorm(x), [inp([2, 2, 3], 3)]);
check(
  "matrixNorm 1 / inf",
  (x) => flat([linalg.matrixNorm(x, { ord: 1 }), linalg.matrixNorm(x, { ord: -Infinity })]),
  [
    inp([2, 3, 3], 4),
  ],
);
check("matrixNorm nuc / 2 / -2", (x) =>
  flat([
    linalg.matrixNorm(x, { ord: "nuc" }),
    linalg.matrixNorm(x, { ord: 2 }),
    linalg.matrixNorm(x, { ord: -2 }),
  ]), [inp([2, 3, 2], 5)]);
check("det", (x) => linalg.det(x), [inp([2, 3, 3], 6)]);
check("det at a singular matrix (rank n-1)", (x) => linalg.det(x), [
  { shape: [3, 3], values: [1, 2, 3, 2, 4, 6, 1, 0, 0] },
]);
check("slogdet logabsdet", (x) => linalg.slogdet(x)[1], [inp([2, 3, 3], 7)]);
check("inv", (x) => linalg.inv(shift(x)), [inp([2, 3, 3], 8)]);
check("solve (A and B, broadcast batch)", (a, b) => linalg.solve(shift(a), b), [
  inp([3, 3], 9),
  inp([2, 3, 2], 10),
]);
check(
  "solve left false, vector",
  (a, b) =>
    flat([
      linalg.solve(shift(a), b, { left: false }),
      linalg.solve(shift(a), b.narrow(-2, 0, 1).squeeze(-2)),
    ]),
  [
    inp([2, 3, 3], 11),
    inp([2, 2, 3], 12),
  ],
);
check("cholesky", (x) => linalg.cholesky(spdOf(x)), [inp([2, 3, 3], 13)]);
check("cholesky upper", (x) => linalg.cholesky(spdOf(x), { upper: true }), [inp([3, 3], 14)]);
for (const upper of [false, true]) {
  for (const left of [true, false]) {
    for (const unitriangular of [false, true]) {
      check(
        `solveTriangular upper ${upper} left ${left} unit ${unitriangular}`,
        (a, b) => linalg.solveTriangular(shift(a), b, { upper, left, unitriangular }),
        [inp([2, 3, 3], 15), inp(left ? [2, 3, 2] : [2, 2, 3], 16)],
      );
    }
  }
}
check("qr tall", (x) => flat(linalg.qr(x)), [inp([2, 4, 3], 17)]);
check("qr wide", (x) => flat(linalg.qr(x)), [inp([3, 4], 18)]);
check("eigh (values, squared vectors)", (x) => {
  const [l, v] = linalg.eigh(symOf(x));
  return flat([l, v.square()]);
}, [inp([2, 3, 3], 19)]);
check("eigvalsh UPLO U", (x) => linalg.eigvalsh(symOf(x), { UPLO: "U" }), [inp([4, 4], 20)]);
check("svd tall (S, squared U and Vh)", (x) => {
  const [u, s, vh] = linalg.svd(x, { fullMatrices: false });
  return flat([s, u.square(), vh.square()]);
}, [inp([2, 4, 3], 21)]);
check("svd wide", (x) => {
  const [u, s, vh] = linalg.svd(x, { fullMatrices: false });
  return flat([s, u.square(), vh.square()]);
}, [inp([3, 4], 22)]);
check("svdvals", (x) => linalg.svdvals(x), [inp([3, 2], 23)]);
check("pinv", (x) => linalg.pinv(x), [inp([2, 4, 3], 24)]);
check("pinv hermitian", (x) => linalg.pinv(spdOf(x), { hermitian: true }), [inp([3, 3], 25)]);
check(
  "matrixPower 3 and -2",
  (x) => flat([linalg.matrixPower(x, 3), linalg.matrixPower(shift(x), -2)]),
  [inp([2, 3, 3], 26)],
);
check("multiDot", (a, b, c) => linalg.multiDot([a, b, c]), [
  inp([3], 27),
  inp([3, 4], 28),
  inp([4, 2], 29),
]);
check("cross", (a, b) => linalg.cross(a, b), [inp([2, 3], 30), inp([1, 3], 31)]);

// ---------------------------------------------------------------- errors

backendTest(
  "inv / solve / cholesky: a singular or indefinite batch element is reported at the next read",
  async (device) => {
    const A = tensor([[[1, 0], [0, 1]], [[1, 2], [2, 4]]], { device });
    await assert.rejects(
      () => linalg.inv(A).data(),
      /linalg\.inv: \(Batch element 1\): The diagonal element 2 is zero, the inversion could not be completed because the input matrix is singular/,
    );
    await assert.rejects(
      () => linalg.inv(A.select(0, 1)).data(),
      // A LinAlgError (a RangeError subclass), as PyTorch's torch.linalg.LinAlgError.
      /^LinAlgError: linalg\.inv: The diagonal element 2 is zero/,
    );
    await assert.rejects(
      () => linalg.solve(A, tensor([[1, 1], [1, 1]], { device })).data(),
      /linalg\.solve: \(Batch element 1\): The solver failed because the input matrix is singular/,
    );
    await assert.rejects(
      () => linalg.cholesky(A).data(),
      /linalg\.cholesky: \(Batch element 1\): The factorization could not be completed because the input is not positive-definite \(the leading minor of order 2 is not positive-definite\)/,
    );
    await assert.rejects(
      () => linalg.cholesky(tensor([[-1, 0], [0, 1]], { device })).data(),
      /the leading minor of order 1 is not positive-definite/,
    );
    // A good matrix after a failed read reads fine.
    await assertTensor(linalg.inv(A.select(0, 0)), [1, 0, 0, 1]);
  },
);

Deno.test("linalg: shapes, dtypes and options are checked up front", () => {
  const rect = tensor([[1, 2, 3], [4, 5, 6]]);
  const square = tensor([[1, 0], [0, 1]]);
  for (
    const [name, fn] of [
      ["linalg.inv", () => linalg.inv(rect)],
      ["linalg.det", () => linalg.det(rect)],
      ["linalg.slogdet", () => linalg.slogdet(rect)],
      ["linalg.cholesky", () => linalg.cholesky(rect)],
      ["linalg.eigh", () => linalg.eigh(rect)],
      ["linalg.matrix_power", () => linalg.matrixPower(rect, 2)],
    ] as const
  ) {
    assert.throws(fn, {
      name: "RangeError",
      message: new RegExp(
        `^${name}: A must be batches of square matrices, but they are 2 by 3 matrices`,
      ),
    });
  }
  assert.throws(
    () => linalg.inv(tensor([1, 2])),
    /linalg\.inv: The input tensor A must have at least 2 dimensions \(got shape \[2\]\)/,
  );
  assert.throws(
    () => linalg.qr(tensor([1, 2])),
    /linalg\.qr: The input tensor A must have at least 2 dimensions/,
  );
  assert.throws(
    () => linalg.inv(tensor([[1, 0], [0, 1]], { dtype: "int32" })),
    {
      name: "TypeError",
      message: /linalg\.inv: Expected a floating point tensor as input\. Got int32/,
    },
  );
  assert.throws(
    () => linalg.solve(square, tensor([[1, 2, 3]])),
    /linalg\.solve: Incompatible shapes of A and B for the equation AX = B \(2x2 and 1x3\)/,
  );
  assert.throws(
    () => linalg.solve(square, tensor([[1, 2, 3]]), { left: false }),
    /linalg\.solve: Incompatible shapes of A and B for the equation XA = B \(2x2 and 1x3\)/,
  );
  assert.throws(
    () => linalg.solve(square, tensor([[1, 2]], { dtype: "float64" })),
    /linalg\.solve: Expected A and B to have the same dtype, got float32 and float64/,
  );
  assert.throws(
    () => linalg.solveTriangular(square, tensor([[1, 2, 3]]), { upper: true }),
    /linalg\.solve_triangular: Incompatible shapes of A and B for the equation AX = B \(2x2 and 1x3\)/,
  );
  assert.throws(
    () => linalg.solveTriangular(square, square, {} as linalg.SolveTriangularOptions),
    /linalg\.solve_triangular: the upper option is required/,
  );
  assert.throws(
    () => linalg.matrixNorm(square, { ord: 3 }),
    /linalg\.matrix_norm: Order 3 not supported/,
  );
  assert.throws(
    () => linalg.matrixNorm(square, { dim: [1, -1] }),
    /linalg\.matrix_norm: dims must be different\. Got \(1, -1\)/,
  );
  assert.throws(() => linalg.matrixNorm(tensor([1, 2])), /at least 2 dimensions/);
  assert.throws(
    () => linalg.vectorNorm(tensor([1, 2], { dtype: "int32" })),
    /linalg\.vector_norm: Expected a floating point tensor as input\. Got int32/,
  );
  assert.throws(
    () => linalg.matrixPower(square, 1.5),
    /linalg\.matrix_power: n must be an integer, got 1\.5/,
  );
  assert.throws(
    () => linalg.qr(rect, { mode: "full" as "r" }),
    /linalg\.qr: qr received unrecognized mode 'full'/,
  );
  assert.throws(
    () => linalg.eigh(square, { UPLO: "X" as "L" }),
    /linalg\.eigh: Expected UPLO argument to be 'L' or 'U', but got X/,
  );
  assert.throws(
    () => linalg.multiDot([square]),
    /multi_dot\(\): expected at least 2 tensors but got 1/,
  );
  assert.throws(
    () => linalg.multiDot([rect, square]),
    /multi_dot\(\): tensors 0 and 1 with shapes \[2, 3\] and \[2, 2\] cannot be multiplied/,
  );
  assert.throws(
    () => linalg.multiDot([square, tensor([[[1]]]), square]),
    /multi_dot\(\): tensor 1 must be 2D but got 3D/,
  );
  assert.throws(
    () => linalg.multiDot([tensor([[[1]]]), square]),
    /multi_dot\(\): the first tensor must be 1D or 2D but got 3D/,
  );
  assert.throws(
    () => linalg.cross(square, square),
    /linalg\.cross: inputs dimension -1 must have length 3\. Got 2 and 2/,
  );
  assert.throws(
    () => linalg.cross(rect, tensor([1, 2, 3])),
    /linalg\.cross: inputs must have the same number of dimensions, got shapes \[2, 3\] and \[3\]/,
  );
});

Deno.test("det: the gradient at a singular matrix is the adjugate (PyTorch 1.13 gives 0)", async () => {
  const A = tensor([[1, 2], [2, 4]], { dtype: "float64", requiresGrad: true });
  linalg.det(A).backward();
  await assertTensor(A.grad!, [4, -2, -2, 1], { atol: 0, rtol: 0 });
  const [sign, logabsdet] = linalg.slogdet(A.detach());
  await assertTensor(sign, [0]);
  await assertTensor(logabsdet, [-Infinity]);
});

// ---------------------------------------------------------------- review regressions

/** `Q diag(values) Qᵀ` (or `Q diag(values) Pᵀ` with `other`) for orthogonal Q, P from seeded QRs, in float64 on cpu. */
function spectral(values: number[], seed: number, other = false): Tensor {
  const n = values.length;
  const orth = (s: number) =>
    linalg.qr(tensor(floats([n, n], s), { shape: [n, n], dtype: "float64" }))[0];
  const q = orth(seed);
  const p = other ? orth(seed + 1) : q;
  return q.mul(tensor(values, { dtype: "float64" })).matmul(p.transpose(0, 1));
}

/** The largest |entry| of `XᵀX - I` and the residual `‖AX - XD‖ / ‖A‖`. */
async function eigenErrors(a: Tensor, l: Tensor, v: Tensor): Promise<[number, number]> {
  const n = v.shape.at(-1)!;
  const orth = v.transpose(-1, -2).matmul(v).sub(eye(n, { dtype: v.dtype, device: v.device }))
    .abs().amax();
  const res = a.matmul(v).sub(v.mul(l.unsqueeze(-2))).square().sum().sqrt()
    .div(a.square().sum().sqrt());
  return [await orth.item(), await res.item()];
}

backendTest(
  "eigh: eigenvectors stay orthogonal on a clustered spectrum in float32 (rotations from a symmetric G)",
  async (device) => {
    // Eight eigenvalues 1e-4 apart: once G's off-diagonal is at rounding level, g_pq ≠ g_qp
    // used to give the two ends of a pair different angles, and V drifted 1e-3 off orthogonal.
    const n = 16;
    const values = Array.from({ length: n }, (_, i) => (i < 8 ? 1 + i * 1e-4 : 2 + (i - 8) / 7));
    const a = spectral(values, 40).to("float32").to(device);
    const [l, v] = linalg.eigh(a);
    const [orth, res] = await eigenErrors(a, l, v);
    assert.ok(orth < 1e-5, `‖VᵀV - I‖max = ${orth}`);
    assert.ok(res < 1e-5, `‖AV - VΛ‖/‖A‖ = ${res}`);
    await assertTensor(l, values.map(Math.fround), { atol: 2e-5, rtol: 0 });
  },
);

Deno.test("svd: one-sided Jacobi converges on a graded float64 matrix (n = 24, condition 1e6)", async () => {
  const n = 24;
  const values = Array.from({ length: n }, (_, i) => Math.pow(10, (-6 * i) / (n - 1)));
  const a = spectral(values, 41, true);
  const [u, s, vh] = linalg.svd(a, { fullMatrices: false });
  const rec = await u.mul(s.unsqueeze(-2)).matmul(vh).sub(a).square().sum().sqrt()
    .div(a.square().sum().sqrt()).item();
  assert.ok(rec < 1e-13, `‖U diag(S) Vh - A‖/‖A‖ = ${rec}`);
  await assertTensor(s, values, { atol: 1e-13, rtol: 1e-9 });
});

backendTest("cholesky: upper: true reads the upper triangle, as PyTorch", async (device) => {
  // The lower triangle is garbage (100 would make the matrix indefinite).
  const A = tensor([[4, 2], [100, 3]], { device, requiresGrad: true });
  const U = linalg.cholesky(A, { upper: true });
  await assertTensor(U, [2, 1, 0, Math.SQRT2], { rtol: 1e-6 });
  U.square().sum().backward();
  // PyTorch 1.13's gradient here: the identity (symmetric, through both triangles).
  await assertTensor(A.grad!, [1, 0, 0, 1], { atol: 1e-6 });
  await assert.rejects(
    () => linalg.cholesky(A.detach()).data(),
    /leading minor of order 2 is not positive-definite/,
  );
});

backendTest(
  "svd / svdvals / qr: matrices near either end of the float range (squared entries scaled first)",
  async (device) => {
    const base = [[3, 1, -2], [1, 4, 0], [-1, 2, 5], [2, 0, 1]];
    const ref = tensor(base, { dtype: "float64" });
    const s0 = Array.from(await linalg.svdvals(ref).data());
    const r0 = Array.from(await linalg.qr(ref)[1].data());
    const scales: [DType, number][] = [["float32", 1e20], ["float32", 1e-25]];
    if (device.backend === "cpu") scales.push(["float64", 1e160], ["float64", 1e-160]);
    for (const [dtype, k] of scales) {
      const a = tensor(base, { dtype, device }).mul(k);
      const close = { rtol: 1e-5, atol: 0 };
      await assertTensor(linalg.svdvals(a), s0.map((v) => v * k), close);
      const [u, s, vh] = linalg.svd(a, { fullMatrices: false });
      await assertTensor(s, s0.map((v) => v * k), close);
      // A = U diag(S) Vh, checked on A / k (its own squares would overflow).
      await assertTensor(u.mul(s.div(k).unsqueeze(-2)).matmul(vh), base.flat(), { atol: 1e-4 });
      await assertTensor(linalg.qr(a)[1], r0.map((v) => v * k), close);
    }
  },
);

Deno.test("eigh: converges in float64 with eigenvalues of high multiplicity (n = 24, three values 8 times)", async () => {
  const values = Array.from({ length: 24 }, (_, i) => Math.floor(i / 8) - 1);
  const a = spectral(values, 42);
  const [l, v] = linalg.eigh(a);
  const [orth, res] = await eigenErrors(a, l, v);
  assert.ok(orth < 1e-13, `‖VᵀV - I‖max = ${orth}`);
  assert.ok(res < 1e-13, `‖AV - VΛ‖/‖A‖ = ${res}`);
  await assertTensor(l, values, { atol: 1e-13, rtol: 0 });
});

backendTest(
  "eigvalsh: float32 eigenvalues within a few ulps (Rayleigh quotients, not the rotated diagonal)",
  async (device) => {
    // The diagonal after (n-1)·sweeps rotations had drifted 4e-6 on webgpu (6e-7 on cpu);
    // now 3e-7 (1e-7).
    const n = 24;
    const x = tensor(floats([n, n], 43), { shape: [n, n], dtype: "float64" });
    const a = x.add(x.transpose(0, 1));
    const exact = Array.from(await linalg.eigvalsh(a).data());
    const l = Array.from(await linalg.eigvalsh(a.to("float32").to(device)).data());
    const scale = Math.max(...exact.map(Math.abs));
    const err = Math.max(...l.map((v, i) => Math.abs(v - exact[i]))) / scale;
    assert.ok(err < 1e-6, `max |λ - λ₆₄| / max |λ| = ${err}`);
  },
);

backendTest(
  "svd: float32 singular values and V from A·V at the end (not the rotated columns)",
  async (device) => {
    // Before: 5e-7 (cpu) and 1.4e-6 (webgpu) in σ, 3e-6 in Vh's orthogonality on webgpu;
    // now 4e-8 and 1e-7, 5e-7.
    const [m, n] = [30, 24];
    const a = tensor(floats([m, n], 44), { shape: [m, n], dtype: "float64" });
    const exact = Array.from(await linalg.svdvals(a).data());
    const [, s, vh] = linalg.svd(a.to("float32").to(device), { fullMatrices: false });
    const err = Math.max(...Array.from(await s.data()).map((v, i) => Math.abs(v - exact[i]))) /
      exact[0];
    const orth = await vh.matmul(vh.transpose(0, 1)).sub(eye(n, { device })).abs().amax().item();
    assert.ok(err < 4e-7, `max |σ - σ₆₄| / σ₁ = ${err}`);
    assert.ok(orth < 2e-6, `‖VhVhᵀ - I‖max = ${orth}`);
  },
);
