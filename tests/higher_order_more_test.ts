/**
 * Second derivatives of the ops whose backward used to be first-order only:
 * cumprod and prod (inputs with no, one, two and three zeros), logcumsumexp,
 * and linalg's solve, solveTriangular, inv, det, slogdet, cholesky, qr,
 * eigh, eigvalsh, svd, svdvals, pinv, and embeddingBag (PyTorch's through
 * its composition from embedding, as PyTorch has no double backward for
 * embedding_bag). Against PyTorch 1.13
 * (tests/fixtures/torch_higher_order_more.json: the output, the gradient of
 * Σ out·u made with createGraph, and the gradients of Σ g·v with respect to
 * every input and to u) on every backend in float32 and on cpu in float64;
 * float64 second-order checks (gradgradcheck) on cpu, with zeros, and of
 * ctcLoss and embeddingBag's modes (against differences of first
 * derivatives: PyTorch 1.13 refuses their second ones); a third
 * derivative through a zero; qr's mode "r", still first order only; and det at singular
 * matrices whose zero pivot comes early (the adjugate, and det's own second derivative).
 * @module
 */

import assert from "node:assert/strict";
import {
  autograd,
  cat,
  type Device,
  type DType,
  eye,
  linalg,
  logcumsumexp,
  manualSeed,
  nn,
  randn,
  type Tensor,
  tensor,
} from "../mod.ts";
import { assertClose, backendTest, decodeFixture, type FixtureValues, shapeOf } from "./harness.ts";
import { CPU0, gradcheck, gradgradcheck, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_higher_order_more.json" with { type: "json" };

const F = nn.functional;
const shift = (x: Tensor, s = 3) =>
  x.add(eye(x.shape.at(-1)!, { dtype: x.dtype, device: x.device }).mul(s));
const spd = (x: Tensor) => shift(x.matmul(x.transpose(-1, -2)), 1);
const sym = (x: Tensor) => x.add(x.transpose(-1, -2));
const flat = (ts: Tensor[]) => cat(ts.map((t) => t.reshape([t.numel()])), 0);
const bags = (d: Device) => tensor([[0, 2, 4], [1, 3, 1]], { dtype: "int32", device: d });

/** Each fixture case's function, as torch_higher_order_more.py writes it. */
const CASES: Record<string, (...xs: Tensor[]) => Tensor> = {
  "cumprod, rows with 0, 1, 2, 3 zeros": (x) => x.cumprod(1),
  "cumprod dim 0, no zero": (x) => x.cumprod(0),
  "prod over a dim, rows with 0, 1, 2, 3 zeros": (x) => x.prod(1),
  "prod over a dim, no zero, keepdim": (x) => x.prod(-1, true),
  "prod of all, no zero": (x) => x.prod(),
  "prod of all, one zero": (x) => x.prod(),
  "prod of all, two zeros": (x) => x.prod(),
  "logcumsumexp": (x) => logcumsumexp(x, 1),
  "logcumsumexp dim 0, wide range": (x) => logcumsumexp(x.mul(8), 0),
  "solve": (a, b) => linalg.solve(shift(a), b),
  "solve left false": (a, b) => linalg.solve(shift(a), b, { left: false }),
  "solveTriangular lower": (a, b) => linalg.solveTriangular(shift(a), b, { upper: false }),
  "solveTriangular upper right unit": (a, b) =>
    linalg.solveTriangular(shift(a), b, { upper: true, left: false, unitriangular: true }),
  "inv": (a) => linalg.inv(shift(a)),
  "det": (a) => linalg.det(a),
  "slogdet logabsdet": (a) => linalg.slogdet(a)[1],
  "cholesky": (a) => linalg.cholesky(spd(a)),
  "cholesky upper": (a) => linalg.cholesky(spd(a), { upper: true }),
  "qr tall": (a) => flat(linalg.qr(a)),
  "qr wide": (a) => flat(linalg.qr(a)),
  "eigh (values, squared vectors)": (a) => {
    const [l, v] = linalg.eigh(sym(a));
    return flat([l, v.square()]);
  },
  "eigvalsh": (a) => linalg.eigvalsh(sym(a)),
  "svd tall (S, squared U and Vh)": (a) => {
    const [u, s, vh] = linalg.svd(a, { fullMatrices: false });
    return flat([s, u.square(), vh.square()]);
  },
  "svdvals": (a) => linalg.svdvals(a),
  "pinv": (a) => linalg.pinv(a),
  "embeddingBag sum, squared": (w) =>
    F.embeddingBag(bags(w.device), w, null, { mode: "sum" }).square(),
  "embeddingBag max, squared": (w) =>
    F.embeddingBag(bags(w.device), w, null, { mode: "max" }).square(),
  "embeddingBag sum, perSampleWeights, squared": (w, p) =>
    F.embeddingBag(bags(w.device), w, null, { mode: "sum", perSampleWeights: p }).square(),
};

type Fixture = {
  inputs: FixtureValues[];
  u: FixtureValues;
  v: FixtureValues[];
  out: FixtureValues;
  g: FixtureValues[];
  hv: FixtureValues[];
  hu: FixtureValues;
};
const cases = fixtures.cases as Record<string, Fixture>;

Deno.test("the fixture and the test list the same cases", () => {
  assert.deepEqual(Object.keys(cases).sort(), Object.keys(CASES).sort());
});

const make = (values: FixtureValues, d: Device, dtype: DType, requiresGrad = false) =>
  tensor(decodeFixture(values), { shape: shapeOf(values), device: d, dtype, requiresGrad });

/** Checks `got` (null: PyTorch's zeros) against `want`. */
async function expect(
  got: Tensor | null,
  want: FixtureValues,
  tol: { atol: number; rtol: number },
  what: string,
) {
  const values = decodeFixture(want);
  if (got === null) {
    assert.ok(values.every((x) => x === 0), `${what}: null, PyTorch's is nonzero`);
    return;
  }
  assert.deepEqual([...got.shape], shapeOf(want), `${what}: shape`);
  assertClose(await got.data(), values, { ...tol, what });
}

/** Every case's output, first and second derivatives against PyTorch's. */
async function compare(d: Device, dtype: DType, tol: { atol: number; rtol: number }) {
  for (const [name, c] of Object.entries(cases)) {
    const xs = c.inputs.map((x) => make(x, d, dtype, true));
    const u = make(c.u, d, dtype, true);
    const out = CASES[name](...xs);
    await expect(out, c.out, tol, `${name}: output`);
    const gs = autograd.grad(out, xs, { gradOutputs: u, createGraph: true });
    for (const [i, g] of gs.entries()) await expect(g, c.g[i], tol, `${name}: g ${i}`);
    const s = gs.map((g, i) => g!.mul(make(c.v[i], d, dtype)).sum()).reduce((a, b) => a.add(b));
    const second = s.requiresGrad
      ? autograd.grad(s, [...xs, u], { allowUnused: true })
      : [...xs, u].map(() => null);
    for (const [i, h] of second.slice(0, -1).entries()) {
      await expect(h, c.hv[i], tol, `${name}: Hv ${i}`);
    }
    await expect(second.at(-1)!, c.hu, tol, `${name}: gradient in u`);
  }
}

backendTest("second derivatives, float32: PyTorch's", async (d) => {
  const tol = d.backend === "cpu" ? { atol: 2e-4, rtol: 2e-4 } : { atol: 1e-3, rtol: 1e-3 };
  await compare(d, "float32", tol);
});

Deno.test("second derivatives, float64 on cpu: PyTorch's", async () => {
  await compare(CPU0, "float64", { atol: 1e-9, rtol: 1e-8 });
});

// ---- float64 second-order checks against differences of first derivatives (cpu) ----

const ROWS = [
  [0.9, -1.3, 1.1, 0.7, -0.8, 1.2],
  [1.2, 0, -0.9, 1.4, 0.6, -1.1],
  [0, 1.5, -0.7, 0, 1.1, 0.8],
  [1.3, 0, 0, -1.2, 0, 0.9],
  [0, 0, 0, 0.5, 1.5, -0.6],
].flat();
const zeros = { shape: [5, 6], values: ROWS };
const CHECKED: [string, (...xs: Tensor[]) => Tensor, ReturnType<typeof inp>[]][] = [
  ["cumprod, rows with 0 to 4 zeros", (x) => x.cumprod(1), [zeros]],
  ["cumprod along dim 0 of the same", (x) => x.cumprod(0), [zeros]],
  ["prod over a dim, rows with 0 to 4 zeros", (x) => x.prod(1), [zeros]],
  ["prod of all, three zeros", (x) => x.prod(), [{ shape: [5], values: [0, 2, 0, -1, 0] }]],
  ["prod of all, one zero, 2-D", (x) => x.prod(), [{
    shape: [2, 3],
    values: [2, 1, -3, 0, 1.5, 0.5],
  }]],
  ["logcumsumexp, dim 0", (x) => logcumsumexp(x, 0), [inp([4, 3], 71, -6, 6)]],
  ["qr complete, square", (x) => flat(linalg.qr(x, { mode: "complete" })), [inp([3, 3], 72)]],
  ["qr complete, wide", (x) => flat(linalg.qr(x, { mode: "complete" })), [inp([2, 4], 73)]],
  ["svd, full matrices, tall", (x) => {
    const [u, s, vh] = linalg.svd(x);
    return flat([s, u.narrow(-1, 0, 2).square(), vh.square()]);
  }, [inp([3, 2], 74)]],
  ["svd, full matrices, wide", (x) => {
    const [u, s, vh] = linalg.svd(x);
    return flat([s, u.square(), vh.narrow(-2, 0, 2).square()]);
  }, [inp([2, 3], 75)]],
  ["svdvals, wide batch", (x) => linalg.svdvals(x), [inp([2, 2, 3], 76)]],
  ["eigvalsh, UPLO L", (x) => linalg.eigvalsh(sym(x)), [inp([2, 3, 3], 77)]],
  ["cholesky, batch, upper", (x) => linalg.cholesky(spd(x), { upper: true }), [inp([2, 3, 3], 78)]],
  ["det of a matrix that needs pivoting", (x) => linalg.det(x), [{
    shape: [3, 3],
    values: [0, 2, 1, 1, 0.5, -1, 3, 1, 0.2],
  }]],
];
// ctcLoss and embeddingBag: PyTorch 1.13 has no double backward for them (an error); here
// their second derivatives are checked against differences of the first (PyTorch's).
const ctcTargets = tensor([[1, 1, 3], [0, 0, 0], [3, 1, 0]], { dtype: "int32", device: CPU0 });
const bagIndex = tensor([0, 2, 1, 2, 3, 3, 0], { dtype: "int32", device: CPU0 });
const bagOffsets = tensor([0, 3, 3, 5], { dtype: "int32", device: CPU0 });
CHECKED.push(
  // Raw log-probabilities: PyTorch's extra exp(lp)·g term does not cancel.
  [
    "ctcLoss on raw log-probabilities, none",
    (x) =>
      F.ctcLoss(x.sub(1.5), ctcTargets, [6, 4, 5], [3, 0, 2], {
        blank: 2,
        reduction: "none",
      }),
    [inp([6, 3, 4], 82, -1, 1)],
  ],
  [
    "ctcLoss through logSoftmax, sum, an impossible sample zeroed",
    (x) =>
      F.ctcLoss(x.logSoftmax(2), ctcTargets, [3, 2, 5], [3, 0, 2], {
        reduction: "sum",
        zeroInfinity: true,
      }),
    [inp([6, 3, 4], 83)],
  ],
  [
    "embeddingBag mean, an empty bag, padding, squared",
    (w) => F.embeddingBag(bagIndex, w, bagOffsets, { mode: "mean", paddingIdx: 2 }).square(),
    [
      inp([4, 3], 84),
    ],
  ],
  [
    "embeddingBag max, squared",
    (w) => F.embeddingBag(bagIndex, w, bagOffsets, { mode: "max" }).square(),
    [{
      shape: [4, 3],
      values: [0.3, -1.2, 0.9, 1.1, 0.2, -0.4, -0.7, 1.5, 0.1, 0.6, -0.1, 1.3],
    }],
  ],
  [
    "embeddingBag sum, perSampleWeights, squared",
    (w, p) =>
      F.embeddingBag(bagIndex, w, bagOffsets, { mode: "sum", perSampleWeights: p }).square(),
    [
      inp([4, 3], 85),
      inp([7], 86),
    ],
  ],
);
for (const [name, fn, inputs] of CHECKED) {
  Deno.test(`gradgradcheck ${name}`, () => gradgradcheck(fn, inputs, { tol: 1e-5 }));
}

Deno.test("a third derivative through cumprod and prod at zeros: the polynomial's", async () => {
  // The same polynomials written as products of slices: every derivative is exact there.
  const byProducts = (x: Tensor) => {
    const cols = Array.from({ length: 4 }, (_, i) => x.narrow(1, i, 1));
    const running = cols.map((_, j) => cols.slice(0, j + 1).reduce((a, b) => a.mul(b)));
    return cat(running, 1).sin().sum().add(running[3].square().sum());
  };
  const viaOps = (x: Tensor) => x.cumprod(1).sin().sum().add(x.prod(1, true).square().sum());
  const third = async (f: (x: Tensor) => Tensor) => {
    const x = tensor([[0, 1.5, -0.7, 0], [1.2, 0, -0.9, 1.4], [0.8, -1.1, 0.6, 1.3]], {
      dtype: "float64",
      device: CPU0,
      requiresGrad: true,
    });
    const [g1] = autograd.grad(f(x), x, { createGraph: true });
    const [g2] = autograd.grad(g1!.square().sum(), x, { createGraph: true });
    const [g3] = autograd.grad(g2!.sin().sum(), x);
    return [await g1!.data(), await g2!.data(), await g3!.data()];
  };
  const [want, got] = [await third(byProducts), await third(viaOps)];
  for (const [i, what] of ["first", "second", "third"].entries()) {
    assertClose(got[i], want[i], { atol: 1e-12, rtol: 1e-10, what: `${what} derivative` });
  }
});

backendTest("under createGraph the first derivatives are the plain ones", async (d) => {
  for (const [name, c] of Object.entries(cases)) {
    const run = async (createGraph: boolean) => {
      const xs = c.inputs.map((x) => make(x, d, "float32", true));
      const gs = autograd.grad(CASES[name](...xs), xs, {
        gradOutputs: make(c.u, d, "float32"),
        createGraph,
      });
      assert.equal(gs[0]!.requiresGrad, createGraph, `${name}: a graph only with createGraph`);
      return await Promise.all(gs.map((g) => g!.data()));
    };
    const [plain, recorded] = [await run(false), await run(true)];
    for (const [i, g] of recorded.entries()) {
      assertClose(g, plain[i], { atol: 1e-5, rtol: 1e-5, what: `${name}: g ${i}` });
    }
  }
});

backendTest("qr's mode 'r' (no Q returned to carry a graph) stays first order only", async (d) => {
  manualSeed(81);
  const x = randn([4, 3], { device: d });
  x.requiresGrad = true;
  const [plain] = autograd.grad(linalg.qr(x, { mode: "r" })[1].sum(), x);
  const [g] = autograd.grad(linalg.qr(x, { mode: "r" })[1].sum(), x, { createGraph: true });
  assertClose(await g!.data(), await plain!.data(), { atol: 1e-6, rtol: 1e-6, what: "qr r" });
  assert.throws(
    () => autograd.grad(g!.square().sum(), x),
    (e: Error) => e.message === "linalg.qr's backward is not differentiable (createGraph)",
  );
});

// ---- review: det at singular matrices whose zero pivot is not the last one ----

/**
 * Singular matrices on which elimination with row pivoting meets a zero pivot before the last
 * (a zero first column; rank n - 2, whose adjugate is zero but whose Hessian is not), where the
 * gradient of det is its adjugate (PyTorch 1.13's under createGraph) and the second
 * derivative det's own.
 */
const SINGULAR: [string, number[], number[]][] = [
  ["a zero first column", [3, 3], [0, -9, 3, 0, -8, 4, 0, -6, 2]],
  ["rank 1 of 3", [3, 3], [-2, -3, 3, 6, 9, -9, -2, -3, 3]],
  ["a zero middle column", [3, 3], [1, 0, 3, 2, 0, 1, 4, 0, 2]],
  [
    "rank 2 of 4, and a regular matrix",
    [2, 4, 4],
    [
      [1, 2, 0, 1, 2, 4, 0, 2, 0, 1, 1, 0, 1, 3, 1, 1],
      [2, -1, 0, 1, 1, 3, -2, 0, 0, 1, 1, 4, 2, 0, 1, -1],
    ].flat(),
  ],
];

backendTest("det at singular matrices with an early zero pivot: the adjugate", async (d) => {
  // Each cofactor of [[0, -9, 3], [0, -8, 4], [0, -6, 2]]: only the first column's are nonzero.
  const a = tensor(SINGULAR[0][2], { shape: [3, 3], device: d, requiresGrad: true });
  linalg.det(a).backward();
  assertClose(await a.grad!.data(), [8, 0, 0, 0, 0, 0, -12, 0, 0], {
    atol: 1e-5,
    rtol: 1e-5,
    what: "adjugate",
  });
});

for (const [name, shape, values] of SINGULAR) {
  Deno.test(`det at a singular matrix, ${name}: first and second derivatives`, async () => {
    await gradcheck((x) => linalg.det(x), [{ shape, values }]);
    await gradgradcheck((x) => linalg.det(x), [{ shape, values }], { tol: 1e-5 });
  });
}
