/**
 * The backends' optional `eigh`, `svd` and `qr` kernels (the cpu backend's:
 * LAPACK's algorithms in float64 on the host) against the composed Jacobi
 * and Householder paths every other backend runs (a cpu device with the
 * kernels taken out: eigenvalues and singular values equal, vectors equal
 * up to one sign per vector or singular pair, QR equal with LAPACK's signs),
 * and against the identities PyTorch's results satisfy: A = VΛVᵀ and
 * A = U·diag(S)·Vh to rounding, orthonormal vectors, eigenvalues ascending
 * and singular values descending, repeated eigenvalues, zero and 1×1
 * matrices, batches, tall and wide and rank-deficient matrices, sizes across
 * the kernels' 32-column blocks, float32 input computed in float64, and
 * PyTorch's refusal of NaN or ±inf input (eigh and svd; qr gives NaN as
 * PyTorch does). Also that the cpu backend has the kernels, so a regression
 * to the slow paths is caught. PyTorch's own values and gradients are in
 * tests/linalg_test.ts, which runs on the kernels on cpu.
 * @module
 */

import assert from "node:assert/strict";
import {
  type Backend,
  backendNames,
  cpuBackend,
  type Device,
  type DType,
  eye,
  type KernelTable,
  linalg,
  registerBackend,
  requestDevices,
  type Tensor,
  tensor,
} from "../mod.ts";
import { hasKernel } from "../src/ops/util.ts";
import { assertTensor, floats } from "./harness.ts";

/** The cpu backend without its linalg kernels: the composed paths, as on webgpu. */
function composedBackend(): Backend {
  const cpu = cpuBackend({ threads: 1 });
  return {
    async createDevice(index: number) {
      const device = await cpu.createDevice(index);
      const { eigh: _e, svd: _s, qr: _q, ...kernels } = device.kernels;
      return { ...device, kernels: kernels as KernelTable };
    },
  };
}

if (!backendNames().includes("cpu-composed")) {
  registerBackend("cpu-composed", composedBackend, { priority: -10 });
}
const [composed] = await requestDevices({ backend: "cpu-composed", count: 1 });
const [cpu] = await requestDevices({ backend: "cpu", count: 1 });

/** Seeded [..., m, n] matrices in `dtype` on `device`. */
function random(shape: number[], seed: number, dtype: DType = "float64", device: Device = cpu) {
  return tensor(floats(shape, seed), { shape, dtype, device });
}

const mT = (x: Tensor) => x.transpose(-1, -2);

/** Each matrix's largest |entry| of `XᵀX - I` (X's columns orthonormal). */
async function orthogonality(x: Tensor): Promise<number> {
  const k = x.shape.at(-1)!;
  return await mT(x).matmul(x).sub(eye(k, { dtype: x.dtype, device: x.device })).abs().amax()
    .item();
}

/** ‖a - b‖ / ‖a‖ over the whole tensor (0 for a zero `a` equal to `b`). */
async function relative(a: Tensor, b: Tensor): Promise<number> {
  const diff = await a.sub(b).square().sum().sqrt().item();
  const size = await a.square().sum().sqrt().item();
  return size === 0 ? diff : diff / size;
}

/** Whether every row of `x` ([..., k]) is sorted (`descending` or not). */
async function sorted(x: Tensor, descending: boolean): Promise<boolean> {
  const k = x.shape.at(-1)!;
  const v = Array.from(await x.data());
  return v.every((value, i) => i % k === 0 || (descending ? v[i - 1] >= value : v[i - 1] <= value));
}

/** `|diag(XᵀY)|` is 1 for columns equal up to sign: the signs, asserted ±1 within `tol`. */
async function sameUpToSign(x: Tensor, y: Tensor, tol: number, what: string): Promise<number[]> {
  const dots = Array.from(await x.mul(y).sum(-2).data());
  dots.forEach((d, i) => assert.ok(Math.abs(Math.abs(d) - 1) < tol, `${what} ${i}: |dot| = ${d}`));
  return dots.map(Math.sign);
}

/** A symmetric A = (B + Bᵀ)/2. */
const symmetric = (b: Tensor) => b.add(mT(b)).mul(0.5);

/** `Q diag(values) Qᵀ` for an orthogonal Q (float64 on cpu). */
function spectral(values: number[], seed: number): Tensor {
  const n = values.length;
  const [q] = linalg.qr(random([n, n], seed));
  return q.mul(tensor(values, { dtype: "float64" })).matmul(mT(q));
}

Deno.test("the cpu backend has the eigh, svd and qr kernels; the composed device has none", () => {
  for (const name of ["eigh", "svd", "qr"] as const) {
    assert.ok(hasKernel(cpu, name), `cpu lacks ${name}`);
    assert.ok(!hasKernel(composed, name), `cpu-composed has ${name}`);
  }
});

for (const shape of [[1, 1], [2, 2], [5, 5], [2, 3, 9, 9], [33, 33]]) {
  Deno.test(`eigh kernel equals the composed Jacobi path, float64 ${JSON.stringify(shape)}`, async () => {
    const a = symmetric(random(shape, shape.at(-1)! + 7));
    const [l, v] = linalg.eigh(a);
    const [l2, v2] = linalg.eigh(a.to(composed));
    await assertTensor(l, Array.from(await l2.data()), {
      atol: 1e-12,
      rtol: 1e-12,
      what: "values",
    });
    await sameUpToSign(v, v2.to(cpu), 1e-9, "eigenvector");
    assert.ok(await sorted(l, false), "ascending");
  });
}

for (const shape of [[1, 1], [7, 3], [3, 7], [2, 6, 6], [40, 34], [34, 40]]) {
  Deno.test(`svd kernel equals the composed one-sided Jacobi path, float64 ${JSON.stringify(shape)}`, async () => {
    const a = random(shape, shape.at(-1)! * 3 + shape.at(-2)!);
    const [u, s, vh] = linalg.svd(a, { fullMatrices: false });
    const [u2, s2, vh2] = linalg.svd(a.to(composed), { fullMatrices: false });
    await assertTensor(s, Array.from(await s2.data()), { atol: 1e-12, rtol: 1e-12, what: "S" });
    const us = await sameUpToSign(u, u2.to(cpu), 1e-9, "U column");
    const vs = await sameUpToSign(mT(vh), mT(vh2.to(cpu)), 1e-9, "Vh row");
    assert.deepEqual(us, vs, "a singular pair's vectors change sign together");
  });
}

for (const shape of [[1, 1], [5, 3], [3, 5], [2, 4, 4], [70, 40], [40, 70], [66, 66]]) {
  Deno.test(`qr kernel equals the composed Householder path (LAPACK's signs), float64 ${JSON.stringify(shape)}`, async () => {
    const a = random(shape, shape.at(-1)! + 2 * shape.at(-2)!);
    for (const mode of ["reduced", "complete"] as const) {
      const [q, r] = linalg.qr(a, { mode });
      const [q2, r2] = linalg.qr(a.to(composed), { mode });
      await assertTensor(q, Array.from(await q2.data()), {
        atol: 1e-12,
        rtol: 0,
        what: `${mode} Q`,
      });
      await assertTensor(r, Array.from(await r2.data()), {
        atol: 1e-12,
        rtol: 0,
        what: `${mode} R`,
      });
    }
  });
}

for (const dtype of ["float64", "float32"] as const) {
  const tol = dtype === "float64" ? 1e-13 : 3e-6;
  Deno.test(`eigh, svd and qr kernels: PyTorch's identities at sizes across the 32-column blocks, ${dtype}`, async () => {
    for (const n of [17, 32, 33, 64, 100]) {
      const a = symmetric(random([n, n], n, dtype));
      const [l, v] = linalg.eigh(a);
      assert.ok(await orthogonality(v) < tol, `eigh ${n}: VᵀV = I`);
      assert.ok(
        await relative(a, v.mul(l.unsqueeze(-2)).matmul(mT(v))) < tol,
        `eigh ${n}: A = VΛVᵀ`,
      );
      assert.ok(await sorted(l, false), `eigh ${n}: ascending`);
      for (const [m, k] of [[n, n], [n + 37, n], [n, n + 37]]) {
        const b = random([m, k], m + 3 * k, dtype);
        const [u, s, vh] = linalg.svd(b, { fullMatrices: false });
        assert.ok(await orthogonality(u) < tol, `svd ${m}x${k}: UᵀU = I`);
        assert.ok(await orthogonality(mT(vh)) < tol, `svd ${m}x${k}: VhVhᵀ = I`);
        assert.ok(
          await relative(b, u.mul(s.unsqueeze(-2)).matmul(vh)) < tol,
          `svd ${m}x${k}: A = USVh`,
        );
        assert.ok(await sorted(s, true), `svd ${m}x${k}: descending`);
        assert.ok((await s.amin().item()) >= 0, `svd ${m}x${k}: S ≥ 0`);
        const [q, r] = linalg.qr(b);
        assert.ok(await orthogonality(q) < tol, `qr ${m}x${k}: QᵀQ = I`);
        assert.ok(await relative(b, q.matmul(r)) < tol, `qr ${m}x${k}: A = QR`);
        assert.equal(await r.sub(r.triu()).abs().amax().item(), 0, `qr ${m}x${k}: R upper`);
      }
    }
  });
}

Deno.test("eigh kernel: repeated eigenvalues (n = 24, three values 8 times) and a 1e8 spread", async () => {
  const values = Array.from({ length: 24 }, (_, i) => Math.floor(i / 8) - 1);
  const a = spectral(values, 42);
  const [l, v] = linalg.eigh(a);
  await assertTensor(l, values, { atol: 1e-14, rtol: 0 });
  assert.ok(await orthogonality(v) < 1e-14);
  assert.ok(await relative(a, v.mul(l.unsqueeze(-2)).matmul(mT(v))) < 1e-14);
  const spread = Array.from({ length: 12 }, (_, i) => (i % 2 ? 1 : -1) * 10 ** (i - 4));
  const [l2] = linalg.eigh(spectral(spread, 7));
  // Absolute accuracy: a few ulps of the largest |λ| (1e7), as LAPACK's; A itself is only that exact.
  await assertTensor(l2, [...spread].sort((x, y) => x - y), { atol: 1e-8, rtol: 1e-12 });
});

Deno.test("eigh kernel: graded matrices (entries 1 down to 1e-180, either way round) converge", async () => {
  // A[i][j] = f·10^(-9(i+j)): QL chasing from the tiny end lost its bulge to underflow before
  // reaching the large end, so no sweep changed anything and eigh gave NaN (LAPACK's steqr
  // turns such a block round first). PyTorch's eigenvalues, to absolute accuracy ‖A‖·eps.
  const n = 11;
  const f = floats([n, n], 3);
  const entries: number[] = [];
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      entries.push(f[Math.max(i, j) * n + Math.min(i, j)] * 10 ** (-9 * (i + j)));
    }
  }
  const graded = tensor(entries, { shape: [n, n], dtype: "float64" });
  const expected = [
    -6.940961131603217e-36,
    -9.21190829075886e-72,
    0,
    0,
    0,
    0,
    0,
    0,
    5.161699573073357e-54,
    3.235346288898112e-19,
    2.566577434539795,
  ];
  for (const a of [graded, graded.flip([0, 1])]) {
    const [l, v] = linalg.eigh(a);
    const values = Array.from(await l.data());
    assert.ok(values.every(Number.isFinite), `eigenvalues ${values}`);
    await assertTensor(l.sort().values, expected.sort((x, y) => x - y), { atol: 1e-15, rtol: 0 });
    assert.ok(await orthogonality(v) < 1e-14);
    assert.ok(await relative(a, v.mul(l.unsqueeze(-2)).matmul(mT(v))) < 1e-14);
  }
  // Entries 1 down to 1e-290: turned round, the block deflates at its far end for more than 30
  // sweeps before its first eigenvalue does (LAPACK's budget is 30n sweeps in all).
  const m = 40;
  const g = floats([m, m], 4);
  const deep: number[] = [];
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < m; j++) {
      deep.push(g[Math.max(i, j) * m + Math.min(i, j)] * 10 ** (-3.7 * (i + j)));
    }
  }
  const a = tensor(deep, { shape: [m, m], dtype: "float64" });
  const [l, v] = linalg.eigh(a);
  assert.ok(Array.from(await l.data()).every(Number.isFinite), "40 x 40: finite eigenvalues");
  assert.ok(await orthogonality(v) < 1e-14);
  assert.ok(await relative(a, v.mul(l.unsqueeze(-2)).matmul(mT(v))) < 1e-14);
  // All ones: the reflectors of rounding noise leave subnormal off-diagonals, negligible below
  // √(smallest normal) as in steqr (QL on them stalled).
  for (const k of [42, 44]) {
    const [lo, vo] = linalg.eigh(
      tensor(new Array(k * k).fill(1), { shape: [k, k], dtype: "float64" }),
    );
    const expected = new Array(k).fill(0);
    expected[k - 1] = k;
    await assertTensor(lo, expected, { atol: 1e-13, rtol: 0 });
    assert.ok(await orthogonality(vo) < 1e-14, `ones ${k}: orthogonal`);
  }
  // Subnormal off-diagonals beside an entry of 1 (their rotations gave NaN).
  for (const t of [1e-320, 3e-310]) {
    const sub = [[1, 0, 0, 0], [0, 0, t, 0], [0, t, 0, 2 * t], [0, 0, 2 * t, t / 2]];
    const [ls, vs] = linalg.eigh(tensor(sub, { dtype: "float64" }));
    await assertTensor(ls, [0, 0, 0, 1], { atol: 1e-15, rtol: 0 });
    assert.ok(await orthogonality(vs) < 1e-15, `${t}: orthogonal`);
  }
});

Deno.test("qr and svd kernels: columns of 1e-158 beside ones of 1 keep the reflectors orthogonal", async () => {
  // A reflector's ‖x‖² of entries below 1e-154 is subnormal (a few bits) or 0: the reflector
  // was then not orthogonal, and Q·R missed A by 1e-7. LAPACK's larfg scales the norm.
  for (const [m, n] of [[4, 6], [6, 4], [5, 5], [40, 40]]) {
    const f = floats([m, n], 5);
    const scaled = f.map((x, i) => x * 10 ** (i % n === 0 ? -158 : i % n === 1 ? -150 : 0));
    const a = tensor(scaled, { shape: [m, n], dtype: "float64" });
    const [q, r] = linalg.qr(a, { mode: "complete" });
    assert.ok(await orthogonality(q) < 1e-14, `${m}x${n}: Q orthogonal`);
    assert.ok(await relative(a, q.matmul(r)) < 1e-15, `${m}x${n}: A = QR`);
    const [u, s, vh] = linalg.svd(a);
    assert.ok(await orthogonality(u) < 1e-14 && await orthogonality(mT(vh)) < 1e-14, `${m}x${n}`);
    const k = Math.min(m, n);
    const rebuilt = u.narrow(-1, 0, k).mul(s.unsqueeze(-2)).matmul(vh.narrow(-2, 0, k));
    assert.ok(await relative(a, rebuilt) < 1e-14, `${m}x${n}: A = USVh`);
  }
});

Deno.test("eigh, svd and qr kernels: zero matrices, 1x1, and the unread triangle of eigh", async () => {
  const zero = tensor(new Array(12).fill(0), { shape: [3, 4], dtype: "float64" });
  const [l, v] = linalg.eigh(zero.narrow(-1, 0, 3));
  await assertTensor(l, [0, 0, 0], { atol: 0 });
  assert.ok(await orthogonality(v) < 1e-15);
  const [u, s, vh] = linalg.svd(zero, { fullMatrices: false });
  await assertTensor(s, [0, 0, 0], { atol: 0 });
  assert.ok(await orthogonality(u) < 1e-15 && await orthogonality(mT(vh)) < 1e-15);
  // PyTorch (LAPACK): Q = I, R = 0 for a zero matrix (no reflection where a column is zero).
  const [q, r] = linalg.qr(zero, { mode: "complete" });
  await assertTensor(q, [1, 0, 0, 0, 1, 0, 0, 0, 1], { atol: 0 });
  await assertTensor(r, new Array(12).fill(0), { atol: 0 });
  const [l1, v1] = linalg.eigh(tensor([[-2.5]], { dtype: "float32" }));
  await assertTensor(l1, [-2.5], { atol: 0 });
  await assertTensor(v1.abs(), [1], { atol: 0 });
  const [u1, s1, vh1] = linalg.svd(tensor([[-3]], { dtype: "float64" }));
  await assertTensor(s1, [3], { atol: 0 });
  await assertTensor(u1.mul(vh1), [-1], { atol: 0 });
  // Only the triangle UPLO names is read (PyTorch): garbage, even NaN, in the other is ignored.
  const lower = tensor([[2, NaN], [1, 2]], { dtype: "float64" });
  await assertTensor(linalg.eigvalsh(lower), [1, 3], { atol: 1e-15 });
  await assertTensor(linalg.eigvalsh(mT(lower), { UPLO: "U" }), [1, 3], { atol: 1e-15 });
});

Deno.test("svd kernel: rank-deficient tall and wide matrices keep orthonormal U and Vh", async () => {
  for (const [m, n] of [[30, 20], [20, 30], [45, 45]]) {
    const a = random([m, 5], m).matmul(random([5, n], n)); // rank 5
    const [u, s, vh] = linalg.svd(a);
    const values = Array.from(await s.data());
    assert.ok(
      values.slice(5).every((x) => x < 1e-13 * values[0]),
      `${m}x${n}: ${values.slice(4, 8)}`,
    );
    assert.ok(await orthogonality(u) < 1e-13, `${m}x${n}: full U orthogonal`);
    assert.ok(await orthogonality(mT(vh)) < 1e-13, `${m}x${n}: full Vh orthogonal`);
    const k = Math.min(m, n);
    const rebuilt = u.narrow(-1, 0, k).mul(s.unsqueeze(-2)).matmul(vh.narrow(-2, 0, k));
    assert.ok(await relative(a, rebuilt) < 1e-13, `${m}x${n}: A = USVh`);
    assert.equal(await linalg.matrixRank(a).item(), 5);
  }
});

Deno.test("eigh and svd kernels compute float32 input in float64 (results within float32 rounding of float64's)", async () => {
  const a = symmetric(random([48, 48], 5, "float32"));
  const exact = Array.from(await linalg.eigvalsh(a.to("float64")).data());
  const l = Array.from(await linalg.eigvalsh(a).data());
  const top = Math.max(...exact.map(Math.abs));
  l.forEach((x, i) =>
    assert.ok(Math.abs(x - exact[i]) <= 2 ** -23 * top, `λ${i}: ${x} vs ${exact[i]}`)
  );
  const b = random([40, 24], 6, "float32");
  const sExact = Array.from(await linalg.svdvals(b.to("float64")).data());
  const s = Array.from(await linalg.svdvals(b).data());
  s.forEach((x, i) => assert.ok(Math.abs(x - sExact[i]) <= 2 ** -23 * sExact[0], `σ${i}`));
});

for (const device of [cpu, composed]) {
  Deno.test(`eigh and svd refuse NaN and ±inf input as PyTorch does; qr gives NaN [${device}]`, async () => {
    const bad = random([3, 4, 4], 9).to(device);
    const values = Array.from(await bad.data());
    values[16 + 2 * 4 + 1] = NaN; // matrix 1, lower triangle
    const withNan = tensor(values, { shape: [3, 4, 4], dtype: "float64", device });
    await assert.rejects(
      () => linalg.eigh(withNan)[0].data(),
      /linalg\.eigh: \(Batch element 1\): The algorithm failed to converge because the input matrix contained non-finite values/,
    );
    await assert.rejects(
      () => linalg.eigvalsh(withNan).data(),
      /linalg\.eigh: \(Batch element 1\)/,
    );
    const inf = tensor([[1, 2], [Infinity, 4]], { dtype: "float64", device });
    await assert.rejects(
      () => linalg.svd(inf)[1].data(),
      /^LinAlgError: linalg\.svd: The algorithm failed to converge because the input matrix contained non-finite values\.$/m,
    );
    await assert.rejects(() => linalg.svdvals(inf).data(), /linalg\.svd: The algorithm failed/);
    await assert.rejects(() => linalg.pinv(inf).data(), /linalg\.svd: The algorithm failed/);
    const [q, r] = linalg.qr(withNan);
    assert.ok(Array.from(await q.data()).some(Number.isNaN), "Q has NaN");
    assert.ok(Array.from(await r.data()).some(Number.isNaN), "R has NaN");
  });
}
