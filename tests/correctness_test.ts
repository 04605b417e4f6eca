/**
 * Silently wrong numbers and wrong messages found by review, each against PyTorch 1.13 (the
 * fixture `torch_correctness.json`): fills that overflow the tensor's dtype, in place on results
 * whose backward may read them, the pivot `linalg.inv` names for a singular matrix, and
 * Wishart's gradient for `scaleTril`.
 * @module
 */

import assert from "node:assert/strict";
import * as mg from "../mod.ts";
import type { Device, Tensor } from "../mod.ts";
import fx from "./fixtures/torch_correctness.json" with { type: "json" };
import { assertClose, backendTest, floats, on } from "./harness.ts";

const overflow = /cannot be stored as (float32|int32) without overflow/;

/** Each fill of the fixture on `d`; the 0-d float64 values need a float64 device. */
function fills(d: Device): Record<string, () => unknown> {
  const z = () => mg.zeros([3, 3], { device: d });
  const zi = () => mg.zeros([3, 3], { dtype: "int32", device: d });
  const m = on(d, [3, 3], [1, 0, 0, 1, 0, 0, 1, 0, 0]).gt(0);
  const i = on(d, [1], [0], "int32");
  const f64 = d.backendDevice.dtypes.includes("float64");
  const big = (v: number) => mg.tensor(v, { dtype: "float64", device: d });
  const cases: Record<string, () => unknown> = {
    "fill_": () => z().fill_(1e40),
    "fill_ 0-d inf": () => z().fill_(on(d, [], [Infinity])),
    "maskedFill": () => z().maskedFill(m, 1e40),
    "maskedFill_": () => z().maskedFill_(m, 1e40),
    "maskedFill -inf": () => z().maskedFill(m, -Infinity),
    "indexFill": () => z().indexFill(0, i, 1e40),
    "indexFill_": () => z().indexFill_(0, i, 1e40),
    "fillDiagonal_": () => z().fillDiagonal_(1e40),
    "newFull": () => z().newFull([2], 1e40),
    "full": () => mg.full([2], 1e40, { device: d }),
    "fullLike": () => mg.fullLike(z(), 1e40),
    "clamp": () => z().clamp(-1e40, 1e40),
    "clamp max": () => z().clamp(undefined, 1e40),
    "where number": () => mg.where(m, z(), 1e40),
    "where -inf": () => mg.where(m, z(), -Infinity),
    "scatter number": () => z().scatter(0, mg.zeros([1, 3], { dtype: "int32", device: d }), 1e40),
    "add number": () => z().add(1e40),
    "int32 fill_": () => zi().fill_(1e10),
    "int32 maskedFill": () => zi().maskedFill(m, 1e10),
    "int32 indexFill": () => zi().indexFill(0, i, 1e10),
    "int32 fillDiagonal_": () => zi().fillDiagonal_(1e10),
    "int32 newFull": () => zi().newFull([2], 1e10),
  };
  if (f64) {
    cases["fill_ 0-d float64"] = () => z().fill_(big(1e40));
    cases["maskedFill 0-d float64"] = () => z().maskedFill(m, big(1e40));
    cases["int32 maskedFill 0-d float64"] = () => zi().maskedFill(m, big(1e10));
    cases["float64 fill_ 1e300"] = () => z().double().fill_(1e300);
  }
  return cases;
}

backendTest("fills that overflow the dtype raise where PyTorch's do", async (d) => {
  const cases = fills(d);
  for (const [name, f] of Object.entries(cases)) {
    const torch = (fx.fills as Record<string, string>)[name];
    assert.ok(torch !== undefined, `${name}: in the fixture`);
    if (torch === "ok") {
      const r = f() as Tensor;
      assert.ok(!(await r.data()).some(Number.isNaN), name);
    } else {
      assert.match(torch, /without overflow/);
      assert.throws(f, overflow, name);
    }
  }
  const expected = d.backendDevice.dtypes.includes("float64") ? 26 : 22;
  assert.equal(Object.keys(cases).length, expected);
});

/** Each op of the fixture's in-place sweep (PyTorch's expression in the fixture script). */
const INPLACE: Record<string, [number[], (x: Tensor) => Tensor]> = {
  "logsumexp": [[3, 4], (x) => x.logsumexp(1)],
  "std": [[3, 4], (x) => x.std(1)],
  "var": [[3, 4], (x) => x.var(1)],
  "det": [[4, 4], (x) => x.det()],
  "slogdet": [[4, 4], (x) => mg.linalg.slogdet(x)[1]],
  "exp": [[3, 4], (x) => x.exp()],
  "exp2": [[3, 4], (x) => x.exp2()],
  "expm1": [[3, 4], (x) => x.expm1()],
  "tanh": [[3, 4], (x) => x.tanh()],
  "sigmoid": [[3, 4], (x) => x.sigmoid()],
  "sqrt": [[3, 4], (x) => x.abs().add(0.5).sqrt()],
  "rsqrt": [[3, 4], (x) => x.abs().add(0.5).rsqrt()],
  "reciprocal": [[3, 4], (x) => x.abs().add(0.5).reciprocal()],
  "softmax": [[3, 4], (x) => x.softmax(1)],
  "logSoftmax": [[3, 4], (x) => x.logSoftmax(1)],
  "pow tensor exponent": [[3, 4], (x) => x.abs().add(0.5).pow(x)],
  "pow number base": [[3, 4], (x) => mg.pow(2, x)],
  "norm": [[3, 4], (x) => x.norm()],
  "norm dim": [[3, 4], (x) => x.norm(2, 1)],
  "vectorNorm": [[3, 4], (x) => mg.linalg.vectorNorm(x, { dim: 1 })],
  "matrixNorm": [[4, 4], (x) => mg.linalg.matrixNorm(x)],
  "dist": [[3, 4], (x) => x.dist(x.mul(2))],
  "cdist": [[3, 4], (x) => mg.cdist(x, x.mul(2))],
  "cumprod": [[3, 4], (x) => x.cumprod(1)],
  "prod": [[3, 4], (x) => x.prod(1)],
  "prod all": [[3, 4], (x) => x.prod()],
  "logcumsumexp": [[3, 4], (x) => x.logcumsumexp(1)],
  "amax": [[3, 4], (x) => x.amax(1)],
  "max": [[3, 4], (x) => x.max()],
  "cummax": [[3, 4], (x) => x.cummax(1).values],
  "sort": [[3, 4], (x) => x.sort(1).values],
  "inverse": [[4, 4], (x) => x.add(mg.eye(4, { device: x.device }).mul(4)).inverse()],
  "matrixExp": [[4, 4], (x) => x.matrixExp()],
  "cholesky": [
    [4, 4],
    (x) => mg.linalg.cholesky(x.matmul(x.mT).add(mg.eye(4, { device: x.device }))),
  ],
  "pinverse": [[3, 4], (x) => x.pinverse()],
  "qr Q": [[4, 4], (x) => mg.linalg.qr(x)[0]],
  "eigh values": [[4, 4], (x) => mg.linalg.eigh(x.add(x.mT))[0]],
  "svdvals": [[4, 4], (x) => mg.linalg.svdvals(x)],
  "logdet": [[4, 4], (x) => x.matmul(x.mT).add(mg.eye(4, { device: x.device })).logdet()],
  "relu": [[3, 4], (x) => x.relu()],
  "elu": [[3, 4], (x) => mg.nn.functional.elu(x)],
  "selu": [[3, 4], (x) => mg.nn.functional.selu(x)],
  "silu": [[3, 4], (x) => mg.nn.functional.silu(x)],
  "gelu": [[3, 4], (x) => mg.nn.functional.gelu(x)],
  "mish": [[3, 4], (x) => mg.nn.functional.mish(x)],
  "softplus": [[3, 4], (x) => mg.nn.functional.softplus(x)],
  "logsigmoid": [[3, 4], (x) => mg.nn.functional.logsigmoid(x)],
  "normalize": [[3, 4], (x) => mg.nn.functional.normalize(x)],
  "atan": [[3, 4], (x) => x.atan()],
  "sinh": [[3, 4], (x) => x.sinh()],
  "erf": [[3, 4], (x) => x.erf()],
  "erfinv": [[3, 4], (x) => x.mul(0.2).erfinv()],
  "lgamma": [[3, 4], (x) => x.abs().add(0.5).lgamma()],
  "sinc": [[3, 4], (x) => x.sinc()],
  "div by tensor": [[3, 4], (x) => mg.ones([3, 4], { device: x.device }).div(x.abs().add(0.5))],
  "hypot": [[3, 4], (x) => x.hypot(x.mul(2))],
  "logaddexp": [[3, 4], (x) => x.logaddexp(x.mul(2))],
};

/**
 * Where multigrad allows in place on the result and PyTorch refuses at backward: these ops are
 * composed of others, none of whose backward reads the result, so the gradient is the one
 * without the change (checked below), not PyTorch's error.
 */
const PERMISSIVE = ["det", "eigh values", "logsumexp", "std", "svdvals"];
/** Where multigrad refuses and PyTorch allows: a composed op's step saves what was changed. */
const STRICTER = ["erfinv"];

backendTest(
  "in place on a result: refused, or the gradient without the change (never a wrong one)",
  async (d) => {
    const permissive: string[] = [];
    const stricter: string[] = [];
    const sweep = fx.inplace as Record<string, Record<string, boolean>>;
    assert.deepEqual(Object.keys(INPLACE).sort(), Object.keys(sweep).sort());
    for (const [name, [shape, op]] of Object.entries(INPLACE)) {
      for (const mod of ["add_", "relu_"] as const) {
        const values = floats(shape, 5);
        const leaf = on(d, shape, values).requiresGrad_();
        let refused = false;
        try {
          const y = op(leaf.mul(1));
          if (mod === "add_") y.add_(1);
          else y.relu_();
          y.sum().backward();
        } catch (e) {
          assert.match(String(e), /modified in place|shares its memory/, `${name} ${mod}`);
          refused = true;
        }
        if (!refused) {
          const ref = on(d, shape, values).requiresGrad_();
          const y = op(ref.mul(1));
          (mod === "add_" ? y.add(1) : y.relu()).sum().backward();
          const [a, b] = [await leaf.grad!.data(), await ref.grad!.data()];
          assertClose(Array.from(a), Array.from(b), { atol: 1e-5, rtol: 1e-5 });
        }
        const torchAllows = sweep[name][mod];
        if (!refused && !torchAllows && !permissive.includes(name)) permissive.push(name);
        if (refused && torchAllows && !stricter.includes(name)) stricter.push(name);
      }
    }
    assert.deepEqual(permissive.sort(), PERMISSIVE);
    assert.deepEqual(stricter.sort(), STRICTER);
  },
);

backendTest(
  "linalg.inv names PyTorch's zero pivot; invEx and solveEx info as PyTorch's",
  async (d) => {
    for (const [name, c] of Object.entries(fx.inv)) {
      const a = mg.tensor(c.matrix as number[][], { device: d });
      await assert.rejects(() => mg.linalg.inv(a).data(), (e: Error) => {
        assert.equal(e.message, c.inv, name);
        return true;
      });
      const [, info] = mg.linalg.invEx(a);
      assert.deepEqual(Array.from(await info.data()), c.invExInfo, `${name}: invEx info`);
      const ones = mg.ones([...a.shape.slice(0, -1), 1], { device: d });
      const [, solveInfo] = mg.linalg.solveEx(a, ones);
      assert.deepEqual(Array.from(await solveInfo.data()), c.solveExInfo, `${name}: solveEx info`);
    }
  },
);

backendTest("Wishart's scaleTril gradient reaches above the diagonal, as PyTorch's", async (d) => {
  const w = fx.wishart;
  const make = () => on(d, [3, 3], w.L.flat()).requiresGrad_();
  const df = on(d, [], [4]);
  const l1 = make();
  new mg.distributions.Wishart(df, { scaleTril: l1 }).logProb(on(d, [3, 3], w.X.flat()))
    .backward();
  assertClose(Array.from(await l1.grad!.data()), w.logProb.flat(), { atol: 1e-4, rtol: 1e-4 });
  assert.notEqual(w.logProb[0][1], 0); // the fixture's gradient is nonzero above the diagonal
  const l2 = make();
  new mg.distributions.Wishart(df, { scaleTril: l2 }).precisionMatrix.sum().backward();
  assertClose(Array.from(await l2.grad!.data()), w.precisionSum.flat(), {
    atol: 1e-4,
    rtol: 1e-4,
  });
});

backendTest("fmod and remainder are exact at any quotient (C's fmod), as PyTorch's", async (d) => {
  const f = fx.fmod;
  const [xs, ys] = [f.x.map(Math.fround), f.y.map(Math.fround)];
  // C's fmod of the float32 values, exact in float64 and so in float32 (|r| < |y|, on y's grid).
  const cFmod = xs.map((x, i) => x % ys[i]);
  const cRem = cFmod.map((r, i) => (r !== 0 && r < 0 !== ys[i] < 0 ? Math.fround(r + ys[i]) : r));
  // PyTorch's vectorized float32 loop gives NaN (null here) where x/y overflows float32 and
  // C's fmod everywhere else: the reference is C's.
  f.fmod.forEach((v, i) => v === null || assert.equal(v, cFmod[i], `PyTorch fmod ${i}`));
  f.remainder.forEach((v, i) => v === null || assert.equal(v, cRem[i], `PyTorch remainder ${i}`));
  assert.ok(f.fmod.filter((v) => v === null).length < 8);
  const x = on(d, [xs.length], xs);
  const y = on(d, [ys.length], ys);
  const fmod = Array.from(await x.fmod(y).data());
  const rem = Array.from(await x.remainder(y).data());
  for (let i = 0; i < xs.length; i++) {
    assert.ok(
      Object.is(fmod[i], cFmod[i]),
      `fmod(${xs[i]}, ${ys[i]}) = ${fmod[i]}, not ${cFmod[i]}`,
    );
    assert.ok(
      Object.is(rem[i], cRem[i]),
      `remainder(${xs[i]}, ${ys[i]}) = ${rem[i]}, not ${cRem[i]}`,
    );
  }
  // Signs and specials as C's: -0 for a zero remainder of a negative dividend, x for an
  // infinite divisor, NaN for a zero divisor or an infinite dividend.
  const sx = on(d, [6], [-6, 6, 5, Infinity, -0, 1e30]);
  const sy = on(d, [6], [3, -3, Infinity, 2, 5, 0]);
  const got = Array.from(await sx.fmod(sy).data());
  const want = [-0, 0, 5, NaN, -0, NaN];
  want.forEach((w, i) => assert.ok(Object.is(got[i], w), `special ${i}: ${got[i]}, not ${w}`));
});
