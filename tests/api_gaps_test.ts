/**
 * Small public-API gaps against PyTorch 1.13 (fixture: tests/fixtures/torch_api_gaps.py):
 * `linalg.norm` over a grid of shapes, ords, dims and keepdim (values, gradients, refusals),
 * `linalg.diagonal`, `linalg.matmul`, `linalg.LinAlgError`, `nn.RNNBase` / `nn.RNNCellBase`,
 * `F.multiHeadAttentionForward` (against PyTorch and against `nn.MultiheadAttention`),
 * `F.convTbc`, `F.nativeChannelShuffle` and the fractional max pools with indices.
 * Run it with DENO_WEBGPU_BACKEND=vulkan and =gl.
 * @module
 */

import assert from "node:assert/strict";
import { choleskyInverse, type Device, linalg, nn, type Tensor, tensor } from "../mod.ts";
import {
  assertClose,
  assertNear,
  backendTest,
  decodeFixture,
  fixtureTensor,
  type FixtureValues,
  shapeOf,
} from "./harness.ts";
import { CPU0, gradcheck, values } from "./gradcheck.ts";

const F = nn.functional;

type Ord = number | "fro" | "nuc" | null;
interface NormCase {
  shape: number[];
  x: FixtureValues;
  ord: number | string | null;
  dim: number | number[] | null;
  keepdim: boolean;
  error?: string;
  y64?: FixtureValues;
  y32?: FixtureValues;
  outShape?: number[];
  grad64?: FixtureValues;
}
interface MaskFixture {
  bool: boolean;
  values: FixtureValues;
}
interface MhaCase {
  name: string;
  E: number;
  H: number;
  kdim: number;
  vdim: number;
  bias: boolean;
  addBiasKv: boolean;
  addZeroAttn: boolean;
  selfAttention: boolean;
  needWeights: boolean;
  average: boolean;
  state: Record<string, FixtureValues>;
  q: FixtureValues;
  k: FixtureValues;
  v: FixtureValues;
  out: FixtureValues;
  weights: FixtureValues | null;
  attnMask: MaskFixture | null;
  keyPaddingMask: MaskFixture | null;
  staticK: MaskFixture | null;
  staticV: MaskFixture | null;
}
const FIX = JSON.parse(
  await Deno.readTextFile(new URL("./fixtures/torch_api_gaps.json", import.meta.url)),
) as {
  norm: NormCase[];
  normDtype: { x: FixtureValues; ord: Ord; dim: number | null; y: FixtureValues }[];
  mha: MhaCase[];
  convTbc: {
    x: FixtureValues;
    w: FixtureValues;
    b: FixtureValues;
    pad: number;
    y: FixtureValues;
  }[];
  fractional: {
    dims: 2 | 3;
    x: FixtureValues;
    samples: FixtureValues;
    kernel: number[];
    outputSize: number[];
    y: FixtureValues;
    indices: FixtureValues;
  }[];
};

const ordOf = (o: number | string | null): Ord =>
  o === null || o === "fro" || o === "nuc" ? o : Number(o);

// ---- linalg.norm ----

backendTest("linalg.norm matches PyTorch over shapes, ords, dims and keepdim", async (d) => {
  const dtypes = d.backend === "cpu" ? (["float32", "float64"] as const) : (["float32"] as const);
  let compared = 0;
  let refused = 0;
  for (const dtype of dtypes) {
    const pending: Promise<void>[] = [];
    for (const c of FIX.norm) {
      const x = fixtureTensor(c.x, d, { dtype });
      const ord = ordOf(c.ord);
      const what = `linalg.norm(${JSON.stringify(c.shape)}, ${String(ord)}, ${
        JSON.stringify(c.dim)
      }, keepdim ${c.keepdim}) ${dtype}`;
      if (c.error !== undefined) {
        assert.throws(() => linalg.norm(x, ord, c.dim, { keepdim: c.keepdim }), Error, what);
        refused++;
        continue;
      }
      const y = linalg.norm(x, ord, c.dim, { keepdim: c.keepdim });
      assert.deepEqual([...y.shape], c.outShape, `${what}: shape`);
      assert.equal(y.dtype, dtype, `${what}: dtype`);
      pending.push(
        y.data().then((got) => {
          if (dtype === "float64") {
            assertClose(got, decodeFixture(c.y64!), { atol: 1e-12, rtol: 1e-10, what });
          } else assertNear(got, c.y32!, c.y64!, { atol: 1e-5, rtol: 3e-5, what });
        }),
      );
      compared++;
    }
    await Promise.all(pending);
  }
  assert.ok(compared > 500 && refused > 100, `${compared} compared, ${refused} refused`);
});

backendTest("linalg.norm gradients match PyTorch's", async (d) => {
  const dtypes = d.backend === "cpu" ? (["float32", "float64"] as const) : (["float32"] as const);
  let compared = 0;
  for (const dtype of dtypes) {
    const pending: Promise<void>[] = [];
    for (const c of FIX.norm) {
      if (c.grad64 === undefined) continue;
      const x = fixtureTensor(c.x, d, { dtype, requiresGrad: true });
      const y = linalg.norm(x, ordOf(c.ord), c.dim, { keepdim: c.keepdim });
      const n = y.numel();
      const w = tensor(Array.from({ length: n }, (_, i) => i + 1), {
        shape: [...y.shape],
        dtype,
        device: d,
      });
      y.mul(w).sum().backward();
      const what = `grad of linalg.norm(${JSON.stringify(c.shape)}, ${c.ord}, ${
        JSON.stringify(c.dim)
      }, ${c.keepdim}) ${dtype}`;
      const tol = dtype === "float64" ? { atol: 1e-10, rtol: 1e-8 } : { atol: 2e-4, rtol: 2e-3 };
      pending.push(
        x.grad!.data().then((g) => {
          assertClose(g, decodeFixture(c.grad64!), { ...tol, what });
        }),
      );
      compared++;
    }
    await Promise.all(pending);
  }
  assert.ok(compared > 300, `${compared} gradients compared`);
});

const GRAD_ORDS: [Ord, number | number[] | null, number[]][] = [
  [null, null, [2, 3, 2]],
  [null, [0, 2], [2, 3, 2]],
  [3, 1, [3, 4]],
  [-1.5, -1, [3, 4]],
  [0.5, null, [5]],
  ["fro", null, [3, 4]],
  ["nuc", null, [3, 4]],
  [2, null, [4, 3]],
  [-2, [1, 0], [3, 4]],
  [1, null, [3, 4]],
  [-Infinity, [0, 1], [3, 3]],
];
for (const [ord, dim, shape] of GRAD_ORDS) {
  Deno.test(`linalg.norm ord ${String(ord)} dim ${JSON.stringify(dim)}: float64 gradcheck`, async () => {
    const n = shape.reduce((a, b) => a * b, 1);
    // Distinct magnitudes away from 0: no ties for the max / min sums, no kinks of |x|.
    const vals = values([n], 4242 + n, 0.3, 2).map((v, i) => (i % 3 === 1 ? -v : v));
    await gradcheck((x) => linalg.norm(x, ord, dim), [{ shape, values: vals }], {
      eps: 1e-6,
      tol: 1e-5,
    });
  });
}

Deno.test("linalg.norm: dtype widens as PyTorch's, and refuses narrowing", async () => {
  for (const c of FIX.normDtype) {
    const x = fixtureTensor(c.x, CPU0);
    const y = linalg.norm(x, ordOf(c.ord), c.dim, { dtype: "float64" });
    assert.equal(y.dtype, "float64");
    assertClose(await y.data(), decodeFixture(c.y), { atol: 1e-12, rtol: 1e-10 });
  }
  const x64 = tensor([[1, 2], [3, 4]], { dtype: "float64", device: CPU0 });
  assert.throws(
    () => linalg.norm(x64, null, null, { dtype: "float32" }),
    /linalg.vector_norm: the dtype of the input \(float64\) should be convertible without narrowing to the specified dtype \(float32\)/,
  );
  assert.throws(
    () => linalg.norm(x64, "nuc", null, { dtype: "float32" }),
    /linalg.matrix_norm: the dtype of the input \(float64\)/,
  );
  assert.throws(
    () =>
      linalg.norm(tensor([1, 2], { dtype: "int32", device: CPU0 }), null, null, {
        dtype: "float32",
      }),
    /Expected a floating point tensor as input. Got int32/,
  );
  assert.throws(
    () => linalg.norm(tensor([[[1]]], { device: CPU0 }), 2),
    /linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got 3D./,
  );
  assert.throws(
    () => linalg.norm(tensor([[1]], { device: CPU0 }), null, [0, 1, 0]),
    /linalg.norm: If dim is specified, it must be of length 1 or 2. Got \[0,1,0\]/,
  );
  assert.throws(
    () => linalg.norm(tensor([[1]], { device: CPU0 }), "max" as "fro"),
    /linalg.norm: Order max not supported./,
  );
});

// ---- linalg.diagonal, linalg.matmul ----

backendTest("linalg.diagonal takes the last two dims by default, with offsets", async (d) => {
  // A[b, i, j] = 100 b + 10 i + j.
  const vals: number[] = [];
  for (let b = 0; b < 2; b++) {
    for (let i = 0; i < 3; i++) for (let j = 0; j < 4; j++) vals.push(100 * b + 10 * i + j);
  }
  const A = tensor(vals, { shape: [2, 3, 4], device: d, requiresGrad: true });
  const main = linalg.diagonal(A);
  assert.deepEqual([...main.shape], [2, 3]);
  assert.deepEqual(await main.toArray(), [[0, 11, 22], [100, 111, 122]]);
  assert.deepEqual(await linalg.diagonal(A, { offset: 2 }).toArray(), [[2, 13], [102, 113]]);
  assert.deepEqual(await linalg.diagonal(A, { offset: -1 }).toArray(), [[10, 21], [110, 121]]);
  // dims 0 and 2: [3, 2] planes of size [2, 4] (b, j), the diagonal b = j last.
  assert.deepEqual(await linalg.diagonal(A, { dim1: 0, dim2: 2 }).toArray(), [
    [0, 101],
    [10, 111],
    [20, 121],
  ]);
  assert.deepEqual([...linalg.diagonal(A, { offset: 9 }).shape], [2, 0]);
  linalg.diagonal(A, { offset: 1 }).sum().backward();
  const g = await A.grad!.data();
  const expected = vals.map((_, k) => (k % 12 % 4) === Math.floor((k % 12) / 4) + 1 ? 1 : 0);
  assert.deepEqual([...g], expected);
  assert.throws(() => linalg.diagonal(A, { dim1: 1, dim2: 1 }), /diagonal/);
});

backendTest("linalg.matmul is matmul", async (d) => {
  const a = tensor(values([2, 3, 4], 1), { shape: [2, 3, 4], device: d });
  const b = tensor(values([4, 2], 2), { shape: [4, 2], device: d });
  assertClose(await linalg.matmul(a, b).data(), await a.matmul(b).data(), { atol: 0, rtol: 0 });
  const v = tensor(values([4], 3), { device: d });
  assert.deepEqual([...linalg.matmul(a, v).shape], [2, 3]);
  assert.throws(() => linalg.matmul(a, a), /matmul/);
});

// ---- LinAlgError ----

/** The error the next read of `t` rejects with. */
async function readError(t: Tensor): Promise<Error> {
  try {
    await t.data();
  } catch (error) {
    return error as Error;
  }
  assert.fail("the read did not reject");
}

backendTest("LinAlgError where PyTorch raises it, with PyTorch's messages", async (d) => {
  const z = tensor([[0, 0], [0, 0]], { device: d });
  const notPd = tensor([[-1, 0], [0, 1]], { device: d });
  const nan = tensor([[NaN, 0], [0, 1]], { device: d });
  const cases: [string, () => Tensor, RegExp][] = [
    [
      "inv",
      () => linalg.inv(z),
      /^linalg.inv: The diagonal element 1 is zero, the inversion could not be completed because the input matrix is singular.$/,
    ],
    [
      "solve",
      () => linalg.solve(z, tensor([1, 1], { device: d })),
      /The solver failed because the input matrix is singular/,
    ],
    ["invEx", () => linalg.invEx(z, { checkErrors: true })[0], /input matrix is singular/],
    [
      "solveEx",
      () => linalg.solveEx(z, tensor([1, 1], { device: d }), { checkErrors: true })[0],
      /The solver failed because the input matrix is singular/,
    ],
    [
      "cholesky",
      () => linalg.cholesky(notPd),
      /^linalg.cholesky: The factorization could not be completed because the input is not positive-definite \(the leading minor of order 1 is not positive-definite\).$/,
    ],
    ["choleskyEx", () => linalg.choleskyEx(notPd, { checkErrors: true })[0], /positive-definite/],
    ["svdvals", () => linalg.svdvals(nan), /failed to converge.*non-finite/],
    ["matrixPower", () => linalg.matrixPower(z, -1), /input matrix is singular/],
    [
      "choleskyInverse",
      () => choleskyInverse(tensor([[[1, 0], [2, 3]], [[1, 0], [1, 0]]], { device: d })),
      /^cholesky_inverse: \(Batch element 1\): The diagonal element 2 is zero, the inversion could not be completed because the input matrix is singular.$/,
    ],
    [
      "batched inv",
      () => linalg.inv(tensor([[[1, 0], [0, 1]], [[0, 0], [0, 0]]], { device: d })),
      /^linalg.inv: \(Batch element 1\): The diagonal element 1 is zero/,
    ],
  ];
  for (const [name, make, message] of cases) {
    const error = await readError(make());
    assert.ok(error instanceof linalg.LinAlgError, `${name}: ${error?.constructor.name}`);
    assert.ok(error instanceof RangeError && error instanceof Error, `${name}: still a RangeError`);
    assert.equal(error.name, "LinAlgError", name);
    assert.match(error.message, message, name);
  }
  // PyTorch raises a plain RuntimeError for these: they stay plain RangeErrors.
  const lu = await readError(linalg.luFactor(z)[0]);
  assert.ok(lu instanceof RangeError && !(lu instanceof linalg.LinAlgError), lu.message);
  assert.match(lu.message, /U\[1,1\] is zero and using it on lu_solve/);
  // The failure is reported once; the device reads normally afterwards.
  assert.deepEqual(await linalg.inv(tensor([[2, 0], [0, 4]], { device: d })).toArray(), [
    [0.5, 0],
    [0, 0.25],
  ]);
});

// ---- RNNBase, RNNCellBase ----

Deno.test("nn.RNNBase and nn.RNNCellBase are the bases of the recurrent modules", () => {
  for (const m of [new nn.RNN(2, 3), new nn.LSTM(2, 3), new nn.GRU(2, 3, { numLayers: 2 })]) {
    assert.ok(m instanceof nn.RNNBase && m instanceof nn.Module, m.constructor.name);
    assert.ok(!(m instanceof nn.RNNCellBase), m.constructor.name);
    assert.equal(m.hiddenSize, 3);
  }
  for (const m of [new nn.RNNCell(2, 3), new nn.LSTMCell(2, 3), new nn.GRUCell(2, 3)]) {
    assert.ok(m instanceof nn.RNNCellBase && m instanceof nn.Module, m.constructor.name);
    assert.ok(!(m instanceof nn.RNNBase), m.constructor.name);
  }
  assert.ok(!(new nn.Linear(2, 3) instanceof nn.RNNBase));
  const modes = [new nn.RNN(2, 3, { nonlinearity: "relu" }), new nn.LSTM(2, 3), new nn.GRU(2, 3)]
    .map((m) => m.mode);
  assert.deepEqual(modes, ["RNN_RELU", "LSTM", "GRU"]);
});

// ---- multiHeadAttentionForward ----

function maskOf(m: MaskFixture | null, d: Device): Tensor | null {
  if (m === null) return null;
  return fixtureTensor(m.values, d, { dtype: m.bool ? "int32" : "float32" });
}

function stateOf(c: MhaCase, d: Device): Record<string, Tensor> {
  return Object.fromEntries(
    Object.entries(c.state).map(([k, v]) => [k, fixtureTensor(v, d)]),
  );
}

function runFunctional(
  c: MhaCase,
  d: Device,
  options: { training?: boolean; dropoutP?: number } = {},
) {
  const s = stateOf(c, d);
  const q = fixtureTensor(c.q, d);
  const [k, v] = c.selfAttention ? [q, q] : [fixtureTensor(c.k, d), fixtureTensor(c.v, d)];
  const separate = c.kdim !== c.E || c.vdim !== c.E;
  return F.multiHeadAttentionForward(
    q,
    k,
    v,
    c.E,
    c.H,
    s.in_proj_weight ?? null,
    s.in_proj_bias ?? null,
    s.bias_k ?? null,
    s.bias_v ?? null,
    c.addZeroAttn,
    options.dropoutP ?? 0,
    s["out_proj.weight"],
    s["out_proj.bias"] ?? null,
    {
      training: options.training ?? false,
      keyPaddingMask: maskOf(c.keyPaddingMask, d),
      attnMask: maskOf(c.attnMask, d),
      needWeights: c.needWeights,
      averageAttnWeights: c.average,
      useSeparateProjWeight: separate,
      qProjWeight: s.q_proj_weight ?? null,
      kProjWeight: s.k_proj_weight ?? null,
      vProjWeight: s.v_proj_weight ?? null,
      staticK: maskOf(c.staticK, d),
      staticV: maskOf(c.staticV, d),
    },
  );
}

const TOL = { atol: 2e-5, rtol: 2e-4 };

backendTest("F.multiHeadAttentionForward matches PyTorch over its options", async (d) => {
  for (const c of FIX.mha) {
    const [out, weights] = runFunctional(c, d);
    assert.deepEqual([...out.shape], shapeOf(c.out), `${c.name}: output shape`);
    assertClose(await out.data(), decodeFixture(c.out), { ...TOL, what: `${c.name}: output` });
    if (c.weights === null) assert.equal(weights, null, c.name);
    else {
      assert.deepEqual([...weights!.shape], shapeOf(c.weights), `${c.name}: weights shape`);
      assertClose(await weights!.data(), decodeFixture(c.weights), {
        ...TOL,
        what: `${c.name}: weights`,
      });
    }
  }
});

backendTest("nn.MultiheadAttention gives what the functional form gives", async (d) => {
  for (const c of FIX.mha) {
    if (c.staticK !== null) continue; // the module has no static keys, as PyTorch's
    const m = new nn.MultiheadAttention(c.E, c.H, {
      kdim: c.kdim,
      vdim: c.vdim,
      bias: c.bias,
      addBiasKv: c.addBiasKv,
      addZeroAttn: c.addZeroAttn,
      device: d,
    });
    m.loadStateDict(stateOf(c, d));
    m.eval();
    const q = fixtureTensor(c.q, d);
    const [k, v] = c.selfAttention ? [q, q] : [fixtureTensor(c.k, d), fixtureTensor(c.v, d)];
    const [out, weights] = m.forward(q, k, v, {
      keyPaddingMask: maskOf(c.keyPaddingMask, d),
      attnMask: maskOf(c.attnMask, d),
      needWeights: c.needWeights,
      averageAttnWeights: c.average,
    });
    const [fOut, fWeights] = runFunctional(c, d);
    assertClose(await out.data(), await fOut.data(), { atol: 0, rtol: 0, what: c.name });
    assertClose(await out.data(), decodeFixture(c.out), { ...TOL, what: `${c.name}: output` });
    if (fWeights) assertClose(await weights!.data(), await fWeights.data(), { atol: 0, rtol: 0 });
    else assert.equal(weights, null);
    // Batch first: the module transposes around the same computation.
    if (q.ndim === 3) {
      const bf = new nn.MultiheadAttention(c.E, c.H, {
        kdim: c.kdim,
        vdim: c.vdim,
        bias: c.bias,
        addBiasKv: c.addBiasKv,
        addZeroAttn: c.addZeroAttn,
        batchFirst: true,
        device: d,
      });
      bf.loadStateDict(stateOf(c, d));
      bf.eval();
      const t = (x: Tensor) => x.transpose(0, 1);
      const [bOut] = bf.forward(
        t(q),
        c.selfAttention ? t(q) : t(k),
        c.selfAttention ? t(q) : t(v),
        {
          keyPaddingMask: maskOf(c.keyPaddingMask, d),
          attnMask: maskOf(c.attnMask, d),
        },
      );
      assertClose(await t(bOut).data(), decodeFixture(c.out), { ...TOL, what: `${c.name} (bf)` });
    }
  }
});

backendTest(
  "F.multiHeadAttentionForward: dropout only when training; gradients flow",
  async (d) => {
    const c = FIX.mha[1];
    const [evalOut] = runFunctional(c, d, { training: false, dropoutP: 0.5 });
    assertClose(await evalOut.data(), decodeFixture(c.out), TOL);
    const [trainOut, trainWeights] = runFunctional(c, d, { training: true, dropoutP: 0.5 });
    const w = [...await trainWeights!.data()];
    // Dropout zeroes some weights and scales the rest by 2: rows no longer sum to 1.
    assert.ok(w.some((x) => x === 0), "some weights dropped");
    assert.notDeepEqual([...await trainOut.data()], [...await evalOut.data()]);
    // Gradients reach the query and the projection weights.
    const q = fixtureTensor(c.q, d, { requiresGrad: true });
    const s = stateOf(c, d);
    const inW = s.in_proj_weight.detach();
    inW.requiresGrad = true;
    const [out] = F.multiHeadAttentionForward(
      q,
      fixtureTensor(c.k, d),
      fixtureTensor(c.v, d),
      c.E,
      c.H,
      inW,
      s.in_proj_bias,
      null,
      null,
      false,
      0,
      s["out_proj.weight"],
      s["out_proj.bias"],
    );
    out.sum().backward();
    assert.ok(q.grad && inW.grad);
    assert.ok([...await inW.grad.data()].some((x) => x !== 0));
  },
);

Deno.test("F.multiHeadAttentionForward: float64 gradcheck against finite differences", async () => {
  const [E, H, L, S, N] = [4, 2, 3, 2, 2];
  const vals = (n: number, seed: number) => values([n], seed, -1, 1);
  await gradcheck(
    (q, k, v, wIn, bIn, wOut) =>
      F.multiHeadAttentionForward(q, k, v, E, H, wIn, bIn, null, null, true, 0, wOut, null, {
        training: false,
        averageAttnWeights: false,
      })[0],
    [
      { shape: [L, N, E], values: vals(L * N * E, 1) },
      { shape: [S, N, E], values: vals(S * N * E, 2) },
      { shape: [S, N, E], values: vals(S * N * E, 3) },
      { shape: [3 * E, E], values: vals(3 * E * E, 4) },
      { shape: [3 * E], values: vals(3 * E, 5) },
      { shape: [E, E], values: vals(E * E, 6) },
    ],
    { tol: 1e-6 },
  );
});

backendTest("F.multiHeadAttentionForward names bad arguments", (d) => {
  const c = FIX.mha[0];
  const s = stateOf(c, d);
  const q = fixtureTensor(c.q, d);
  const call = (over: Partial<Record<string, unknown>>) =>
    F.multiHeadAttentionForward(
      (over.query as Tensor) ?? q,
      (over.key as Tensor) ?? q,
      (over.value as Tensor) ?? q,
      (over.embed as number) ?? c.E,
      (over.heads as number) ?? c.H,
      over.inProj === undefined ? s.in_proj_weight : over.inProj as Tensor | null,
      s.in_proj_bias,
      (over.biasK as Tensor) ?? null,
      (over.biasV as Tensor) ?? null,
      false,
      0,
      s["out_proj.weight"],
      s["out_proj.bias"],
      (over.options as Record<string, Tensor | boolean>) ?? {},
    );
  assert.throws(() => call({ embed: 6 }), /was expecting embedding dimension of 6, but got 8/);
  assert.throws(() => call({ heads: 3 }), /embed_dim 8 not divisible by num_heads 3/);
  assert.throws(
    () => call({ key: q.narrow(0, 0, 2) }),
    /key shape \[2, 2, 8\] does not match value shape \[3, 2, 8\]/,
  );
  assert.throws(
    () => call({ inProj: null }),
    /useSeparateProjWeight is false but inProjWeight is null/,
  );
  assert.throws(
    () => call({ options: { useSeparateProjWeight: true } }),
    /useSeparateProjWeight is true but qProjWeight is null/,
  );
  const bk = tensor(values([8], 1), { shape: [1, 1, 8], device: d });
  assert.throws(() => call({ biasK: bk }), /biasK and biasV must be given together/);
  const sk = tensor(values([4 * 5 * 4], 2), { shape: [4, 5, 4], device: d });
  assert.throws(
    () => call({ biasK: bk, biasV: bk, options: { staticK: sk } }),
    /bias cannot be added to static key/,
  );
  assert.throws(
    () => call({ options: { staticK: sk.narrow(2, 0, 3) } }),
    /staticK of shape \[4, 5, 3\] must be \[4, S, 4\]/,
  );
  assert.throws(
    () => call({ options: { attnMask: tensor([[0, 1]], { device: d, dtype: "int32" }) } }),
    /multiHeadAttentionForward: attnMask of shape \[1, 2\] must be \[3, 3\] or \[4, 3, 3\]/,
  );
  assert.throws(
    () => call({ query: q.to("int32") }),
    /expected a floating-point query, got int32/,
  );
});

// ---- convTbc, nativeChannelShuffle, fractional max pools with indices ----

backendTest("F.convTbc matches PyTorch's conv_tbc", async (d) => {
  for (const c of FIX.convTbc) {
    const y = F.convTbc(fixtureTensor(c.x, d), fixtureTensor(c.w, d), fixtureTensor(c.b, d), c.pad);
    assert.deepEqual([...y.shape], shapeOf(c.y));
    assertClose(await y.data(), decodeFixture(c.y), { atol: 1e-5, rtol: 1e-5 });
  }
  const c = FIX.convTbc[0];
  const x = fixtureTensor(c.x, d);
  assert.throws(
    () => F.convTbc(x, fixtureTensor(c.w, d).narrow(1, 0, 2), fixtureTensor(c.b, d)),
    /convTbc: input \[6, 2, 3\] has 3 channels, weight \[3, 2, 4\] takes 2/,
  );
  assert.throws(
    () => F.convTbc(x.reshape([12, 3]), fixtureTensor(c.w, d), fixtureTensor(c.b, d)),
    /expected input \[T, B, Cin\] \(3-D\)/,
  );
});

backendTest("F.nativeChannelShuffle is channelShuffle", async (d) => {
  const x = tensor(Array.from({ length: 16 }, (_, i) => i + 1), { shape: [1, 4, 2, 2], device: d });
  const y = F.nativeChannelShuffle(x, 2);
  // PyTorch's docstring example.
  assert.deepEqual(await y.toArray(), [[
    [[1, 2], [3, 4]],
    [[9, 10], [11, 12]],
    [[5, 6], [7, 8]],
    [[13, 14], [15, 16]],
  ]]);
});

backendTest("F.fractionalMaxPool{2,3}dWithIndices match PyTorch", async (d) => {
  for (const c of FIX.fractional) {
    const x = fixtureTensor(c.x, d);
    const randomSamples = fixtureTensor(c.samples, d);
    const [y, i] = c.dims === 2
      ? F.fractionalMaxPool2dWithIndices(x, c.kernel as [number, number], {
        outputSize: c.outputSize as [number, number],
        randomSamples,
      })
      : F.fractionalMaxPool3dWithIndices(x, c.kernel as [number, number, number], {
        outputSize: c.outputSize as [number, number, number],
        randomSamples,
      });
    assert.deepEqual([...y.shape], shapeOf(c.y));
    assertClose(await y.data(), decodeFixture(c.y), { atol: 0, rtol: 0 });
    assert.equal(i.dtype, "int32");
    assert.deepEqual([...await i.data()], decodeFixture(c.indices));
  }
});
