/**
 * Wave s14 area E against PyTorch 1.13 (tests/fixtures/torch_stats_linalg.json)
 * on every backend: cov, corrcoef, renorm, dist, trapezoid,
 * cumulativeTrapezoid, gradient; logspace and the windows; linalg's
 * luFactorEx, lu, luSolve, luUnpack, invEx, solveEx, choleskyEx,
 * householderProduct, matrixExp, vecdot, vander, cond, tensorinv,
 * tensorsolve, lstsq and the torch.* logdet, inverse, pinverse,
 * choleskySolve, choleskyInverse, triangularSolve, luSolve, svd (outputs and
 * input gradients). Also float64 gradient checks on cpu, the dtype queries
 * (finfo, iinfo, promoteTypes, resultType, canCast), empty, emptyLike,
 * scalarTensor, asTensor, the Tensor methods, and errors naming the bad
 * value or shape.
 * @module
 */

import assert from "node:assert/strict";
import * as mg from "../mod.ts";
import { type Device, type DType, linalg, type Tensor, tensor } from "../mod.ts";
import { assertClose, backendTest, decodeFixture, REF } from "./harness.ts";
import { check, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_stats_linalg.json" with { type: "json" };

type Value = number | string | Value[];
interface FixtureTensor {
  values: Value;
  dtype: string;
  shape: number[];
}
type Arg = FixtureTensor | number;
type Options = Record<string, unknown>;
interface Case {
  name: string;
  fn: string;
  args: Arg[];
  options: Options;
  outputs: FixtureTensor[];
  g?: (Value | null)[];
  grads?: (Value | null)[];
  /** Outputs whose values PyTorch leaves unspecified (a singular matrix's inverse). */
  skip_outputs?: number[];
}

const isTensorArg = (a: Arg): a is FixtureTensor => typeof a === "object" && a !== null;

function load(a: FixtureTensor, device: Device, requiresGrad = false): Tensor {
  return tensor(decodeFixture(a.values), {
    shape: a.shape,
    dtype: a.dtype as DType,
    device,
    requiresGrad: requiresGrad && a.dtype !== "int32",
  });
}

const num = (v: unknown) => typeof v === "string" ? Number(v) : v as number;

/** Calls multigrad's function for a fixture case (tensor args as given, then options). */
function call(fn: string, args: (Tensor | number)[], o: Options): Tensor[] {
  const t = (i: number) => args[i] as Tensor;
  const n = (i: number) => args[i] as number;
  const list = (out: Tensor | readonly Tensor[]) => Array.isArray(out) ? [...out] : [out as Tensor];
  switch (fn) {
    case "cov":
      return [mg.cov(t(0), {
        correction: o.correction as number | undefined,
        fweights: o.fweights === undefined ? undefined : t(o.fweights as number),
        aweights: o.aweights === undefined ? undefined : t(o.aweights as number),
      })];
    case "corrcoef":
      return [mg.corrcoef(t(0))];
    case "renorm":
      return [mg.renorm(t(0), o.p as number, o.dim as number, o.maxnorm as number)];
    case "dist":
      return [mg.dist(t(0), t(1), num(o.p))];
    case "trapezoid":
    case "cumulativeTrapezoid": {
      const f = fn === "trapezoid" ? mg.trapezoid : mg.cumulativeTrapezoid;
      return [args.length > 1 ? f(t(0), t(1), o) : f(t(0), o)];
    }
    case "gradient": {
      const spacing = o.spacing === "tensors" ? args.slice(1) as Tensor[] : o.spacing;
      return mg.gradient(t(0), { ...o, spacing } as mg.GradientOptions);
    }
    case "logspace":
      return [mg.logspace(n(0), n(1), n(2), { ...o, device: REF } as mg.LogspaceOptions)];
    case "luFactorEx":
      return list(linalg.luFactorEx(t(0)));
    case "lu":
      return list(linalg.lu(t(0)));
    case "luSolve":
      return [linalg.luSolve(t(0), t(1), t(2), o)];
    case "luUnpack":
      return list(mg.luUnpack(t(0), t(1)));
    case "torch.luSolve":
      return [mg.luSolve(t(0), t(1), t(2))];
    case "invEx":
      return list(linalg.invEx(t(0)));
    case "solveEx":
      return list(linalg.solveEx(t(0), t(1), o));
    case "choleskyEx":
      return list(linalg.choleskyEx(t(0), o));
    case "luFactor":
      return list(linalg.luFactor(t(0)));
    case "ldlFactor":
      return list(linalg.ldlFactor(t(0)));
    case "ldlFactorEx":
      return list(linalg.ldlFactorEx(t(0)));
    case "ldlSolve":
      return [linalg.ldlSolve(t(0), t(1), t(2))];
    case "householderProduct":
      return [linalg.householderProduct(t(0), t(1))];
    case "matrixExp":
      return [linalg.matrixExp(t(0))];
    case "vecdot":
      return [linalg.vecdot(t(0), t(1), o)];
    case "vander":
      return [linalg.vander(t(0), o)];
    case "cond":
      return [linalg.cond(t(0), o.p === "fro" || o.p === "nuc" ? o.p : num(o.p ?? 2))];
    case "tensorinv":
      return [linalg.tensorinv(t(0), o)];
    case "tensorsolve":
      return [linalg.tensorsolve(t(0), t(1), o as { dims?: number[] })];
    case "lstsq": {
      const r = linalg.lstsq(t(0), t(1), o as linalg.LstsqOptions);
      return [r.solution, r.residuals, r.rank, r.singularValues];
    }
    case "logdet":
      return [mg.logdet(t(0))];
    case "inverse":
      return [mg.inverse(t(0))];
    case "pinverse":
      return [mg.pinverse(t(0))];
    case "choleskySolve":
      return [mg.choleskySolve(t(0), t(1), o)];
    case "choleskyInverse":
      return [mg.choleskyInverse(t(0))];
    case "triangularSolve":
      return list(mg.triangularSolve(t(0), t(1), o));
    case "svd.usv": {
      const [u, s, v] = mg.svd(t(0), o);
      return [s, u.narrow(-1, 0, 3).mul(s).matmul(v.narrow(-1, 0, 3).transpose(0, 1))];
    }
  }
  const windows: Record<string, (n: number, o: Options) => Tensor> = {
    hannWindow: mg.hannWindow,
    hammingWindow: mg.hammingWindow,
    blackmanWindow: mg.blackmanWindow,
    bartlettWindow: mg.bartlettWindow,
    kaiserWindow: mg.kaiserWindow,
  };
  if (fn in windows) return [windows[fn](n(0), o)];
  throw new Error(`no dispatcher for ${fn}`);
}

function tol(device: Device, what: "out" | "grad", name: string) {
  const loose = /matrix_exp|cond|lstsq|pinverse|tensorinv|tensorsolve|cholesky_inverse/.test(name);
  if (device.backend === "cpu") {
    return what === "out" && !loose ? { atol: 1e-5, rtol: 1e-4 } : { atol: 1e-4, rtol: 1e-3 };
  }
  return loose || what === "grad" ? { atol: 2e-3, rtol: 2e-3 } : { atol: 2e-4, rtol: 1e-3 };
}

async function runCase(c: Case, device: Device): Promise<void> {
  const withGrad = c.grads !== undefined;
  const leaves: Tensor[] = [];
  const args = c.args.map((a) => {
    if (!isTensorArg(a)) return a;
    const t = load(a, a.dtype === "int32" || c.fn === "logspace" ? device : device, withGrad);
    if (t.requiresGrad) leaves.push(t);
    return t;
  });
  const outputs = call(c.fn, args, { ...c.options, device } as Options);
  assert.equal(outputs.length, c.outputs.length, `${c.name}: number of outputs`);
  for (let i = 0; i < outputs.length; i++) {
    const [out, want] = [outputs[i], c.outputs[i]];
    if (c.skip_outputs?.includes(i)) continue;
    assert.deepEqual([...out.shape], want.shape, `${c.name}: output ${i} shape`);
    assert.equal(out.dtype, want.dtype, `${c.name}: output ${i} dtype`);
    assertClose(await out.data(), decodeFixture(want.values), {
      ...tol(device, "out", c.name),
      what: `${c.name}: output ${i}`,
    });
  }
  if (!withGrad) return;
  let loss: Tensor | null = null;
  c.g!.forEach((g, i) => {
    if (g === null) return;
    const w = tensor(decodeFixture(g), { shape: c.outputs[i].shape, device });
    const term = outputs[i].mul(w).sum();
    loss = loss === null ? term : loss.add(term);
  });
  if (loss === null) return;
  (loss as Tensor).backward();
  assert.equal(leaves.length, c.grads!.length, `${c.name}: number of gradients`);
  for (let j = 0; j < leaves.length; j++) {
    const want = c.grads![j];
    const grad = leaves[j].grad;
    if (want === null) {
      if (grad !== null) assertClose(await grad.data(), new Array(grad.numel()).fill(0));
      continue;
    }
    assert.ok(grad, `${c.name}: gradient ${j} missing`);
    assertClose(await grad.data(), decodeFixture(want), {
      ...tol(device, "grad", c.name),
      what: `${c.name}: gradient ${j}`,
    });
  }
}

const sections = fixtures as unknown as Record<"stats" | "factories" | "linalg", Case[]>;
for (const section of ["stats", "factories", "linalg"] as const) {
  backendTest(`${section}: outputs and gradients equal PyTorch's`, async (device) => {
    const failures: string[] = [];
    for (const c of sections[section]) {
      await runCase(c, device).catch((e: Error) => failures.push(e.message.split("; actual")[0]));
    }
    assert.deepEqual(failures, [], `${failures.length} cases differ from PyTorch`);
  });
}

// ---- float64 gradient checks on cpu ----

const spdOf = (a: Tensor) =>
  a.matmul(a.transpose(-1, -2)).add(
    mg.eye(a.shape.at(-1)!, { dtype: "float64", device: a.device }).mul(3),
  );
const cat = (ts: Tensor[]) =>
  mg.cat(ts.filter((t) => t.dtype !== "int32").map((t) => t.reshape([t.numel()])), 0);

check("cov", (x) => mg.cov(x), [inp([3, 5], 1)]);
check(
  "cov aweights and fweights",
  (x, a) =>
    mg.cov(x, {
      aweights: a.abs().add(0.1),
      fweights: tensor([1, 2, 0, 3, 1], { dtype: "int32" }),
      correction: 2,
    }),
  [inp([3, 5], 2), inp([5], 3)],
);
check("corrcoef", (x) => mg.corrcoef(x), [inp([3, 6], 4)]);
check("renorm", (x) => mg.renorm(x, 2, 0, 1), [inp([3, 4], 5)]);
check("renorm some slices below maxnorm", (x) => mg.renorm(x, 2, 0, 2.2), [inp([4, 4], 52)]);
check("renorm p 3 dim 1", (x) => mg.renorm(x, 3, 1, 0.8), [inp([3, 4, 2], 6)]);
check("dist p 2", (a, b) => mg.dist(a, b), [inp([3, 4], 7), inp([4], 8)]);
check("dist p 1 and 3", (a, b) => mg.dist(a, b, 1).add(mg.dist(a, b, 3)), [
  inp([2, 3], 9),
  inp([2, 3], 10),
]);
check("trapezoid dx", (y) => mg.trapezoid(y, { dx: 0.3, dim: 0 }), [inp([4, 3], 11)]);
check("trapezoid x", (y, x) => mg.trapezoid(y, x), [inp([3, 5], 12), inp([5], 13)]);
check("cumulativeTrapezoid x full", (y, x) => mg.cumulativeTrapezoid(y, x), [
  inp([3, 5], 14),
  inp([3, 5], 15),
]);
check("gradient edge 2", (f) => cat(mg.gradient(f, { spacing: [0.5, 2], edgeOrder: 2 })), [
  inp([4, 5], 16),
]);
check(
  "gradient coordinates",
  (f, c) => cat(mg.gradient(f, { spacing: [c.abs().add(0.5).cumsum(0)], dim: 1, edgeOrder: 2 })),
  [inp([3, 5], 17), inp([5], 18)],
);
check("luFactor", (a) => linalg.luFactor(a)[0], [inp([4, 3], 19)]);
check("lu L and U", (a) => cat(linalg.lu(a).slice(1)), [inp([2, 3, 3], 20)]);
check("luSolve adjoint", (a, b) => {
  const [LU, piv] = linalg.luFactor(a);
  return linalg.luSolve(LU, piv, b, { adjoint: true });
}, [inp([3, 3], 21), inp([3, 2], 22)]);
check("luSolve right", (a, b) => {
  const [LU, piv] = linalg.luFactor(a);
  return linalg.luSolve(LU, piv, b, { left: false });
}, [inp([3, 3], 23), inp([2, 3], 24)]);
check("invEx", (a) => linalg.invEx(a)[0], [inp([3, 3], 25)]);
check("solveEx", (a, b) => linalg.solveEx(a, b)[0], [inp([2, 3, 3], 26), inp([3, 2], 27)]);
check("choleskyEx", (a) => linalg.choleskyEx(spdOf(a))[0], [inp([3, 3], 28)]);
check("householderProduct", (a, t) => linalg.householderProduct(a, t), [
  inp([4, 3], 29),
  inp([2], 30),
]);
check("matrixExp", (a) => linalg.matrixExp(a), [inp([3, 3], 31)]);
check("matrixExp scaled", (a) => linalg.matrixExp(a.mul(4)), [inp([2, 2, 2], 32)], { tol: 1e-5 });
check("vecdot", (a, b) => linalg.vecdot(a, b), [inp([3, 4], 33), inp([4], 34)]);
check("vander", (x) => linalg.vander(x, { N: 4 }), [inp([2, 3], 35)]);
check("cond", (a) => linalg.cond(a), [inp([3, 3], 36)]);
check("cond fro", (a) => linalg.cond(a, "fro"), [inp([3, 3], 37)]);
check("tensorinv", (a) => linalg.tensorinv(a), [inp([2, 3, 6], 38)]);
check("tensorsolve", (a, b) => linalg.tensorsolve(a, b), [inp([2, 3, 6], 39), inp([2, 3], 40)]);
check("lstsq", (a, b) => linalg.lstsq(a, b).solution, [inp([5, 3], 41), inp([5, 2], 42)]);
check("logdet", (a) => mg.logdet(spdOf(a)), [inp([3, 3], 43)]);
check("inverse", (a) => mg.inverse(a), [inp([3, 3], 44)]);
check("pinverse", (a) => mg.pinverse(a), [inp([4, 3], 45)]);
check("choleskySolve", (b, a) => mg.choleskySolve(b, linalg.cholesky(spdOf(a))), [
  inp([3, 2], 46),
  inp([3, 3], 47),
]);
check(
  "choleskyInverse upper",
  (a) => mg.choleskyInverse(linalg.cholesky(spdOf(a), { upper: true }), { upper: true }),
  [inp([3, 3], 48)],
);
check(
  "triangularSolve",
  (b, a) =>
    mg.triangularSolve(b, a.add(mg.eye(3, { dtype: "float64" }).mul(3)), { transpose: true })[0],
  [inp([3, 2], 49), inp([3, 3], 50)],
);
check("svd singular values", (a) => mg.svd(a)[1], [inp([4, 3], 51)]);

// ---- dtype queries and factories ----

Deno.test("finfo, iinfo, promoteTypes, resultType and canCast are PyTorch's", () => {
  const f = mg.finfo("float32");
  assert.deepEqual(
    [f.bits, f.eps, f.max, f.min, f.tiny, f.smallestNormal, f.resolution],
    [
      32,
      1.1920928955078125e-7,
      3.4028234663852886e38,
      -3.4028234663852886e38,
      1.1754943508222875e-38,
      1.1754943508222875e-38,
      1e-6,
    ],
  );
  assert.equal(mg.finfo().dtype, "float32");
  const d = mg.finfo("float64");
  assert.deepEqual([d.bits, d.eps, d.max, d.tiny, d.resolution], [
    64,
    2.220446049250313e-16,
    1.7976931348623157e308,
    2.2250738585072014e-308,
    1e-15,
  ]);
  assert.deepEqual(mg.iinfo("int32"), {
    dtype: "int32",
    bits: 32,
    max: 2147483647,
    min: -2147483648,
  });
  assert.throws(() => mg.finfo("int32"), /finfo: expected a floating-point dtype, got int32/);
  assert.throws(() => mg.iinfo("float32"), /iinfo: expected an integer dtype, got float32/);
  assert.throws(() => mg.finfo("float16" as DType), /float16/);
  assert.equal(mg.promoteTypes("int32", "float32"), "float32");
  assert.equal(mg.promoteTypes("float64", "float32"), "float64");
  const ints = tensor([1, 2], { dtype: "int32" });
  const f64 = tensor(1, { dtype: "float64" });
  assert.equal(mg.resultType(ints, 1.5), "float32");
  assert.equal(mg.resultType(ints, 2), "int32");
  assert.equal(mg.resultType(ints, f64), "float64");
  assert.equal(mg.resultType(tensor([1, 2]), f64), "float32");
  assert.equal(mg.resultType(tensor(1, { dtype: "int32" }), f64), "float64");
  assert.equal(mg.resultType(2, 3.5), "float32");
  assert.throws(
    () => mg.resultType("a" as unknown as number, 1),
    /resultType: expected a Tensor or a number, got string/,
  );
  assert.equal(mg.canCast("float64", "float32"), true);
  assert.equal(mg.canCast("int32", "float32"), true);
  assert.equal(mg.canCast("float32", "int32"), false);
});

backendTest("empty, emptyLike, scalarTensor and asTensor", async (device) => {
  const e = mg.empty([2, 3], { device, dtype: "int32" });
  assert.deepEqual([e.shape, e.dtype, e.device], [[2, 3], "int32", device]);
  const like = mg.emptyLike(tensor([[1, 2]], { device }));
  assert.deepEqual([like.shape, like.dtype, like.device], [[1, 2], "float32", device]);
  assert.equal(mg.emptyLike(like, { dtype: "int32" }).dtype, "int32");
  const s = mg.scalarTensor(3, { device });
  assert.deepEqual([s.shape, s.dtype, await s.item()], [[], "float32", 3]);
  assert.equal(await mg.scalarTensor(true, { device }).item(), 1);
  const x = tensor([1, 2], { device, requiresGrad: true });
  assert.equal(mg.asTensor(x), x);
  assert.equal(mg.asTensor(x, { dtype: "float32", device }), x);
  const y = mg.asTensor(x, { dtype: "int32" });
  assert.deepEqual([y.dtype, await y.toArray()], ["int32", [1, 2]]);
  const z = mg.asTensor([[1, 2]], { device });
  assert.deepEqual([z.shape, z.device], [[1, 2], device]);
  assert.throws(() => mg.empty([2, -1]), /-1/);
  assert.throws(
    () => mg.scalarTensor("3" as unknown as number),
    /scalarTensor: value must be a number, got string/,
  );
});

backendTest("Tensor methods delegate to the functions", async (device) => {
  const x = tensor([[1, 5, 2, NaN], [4, 3, 3, 0]], { device });
  const same = async (a: Tensor, b: Tensor) => assertClose(await a.data(), await b.data());
  await same(x.median(), mg.median(x));
  await same(x.nanmedian(1).values, mg.nanmedian(x, 1).values);
  await same(x.mode(1).values, mg.mode(x, 1).values);
  await same(x.quantile(0.3, { dim: 1 }), mg.quantile(x, 0.3, { dim: 1 }));
  await same(x.nanquantile(0.3), mg.nanquantile(x, 0.3));
  await same(x.nansum(1), mg.nansum(x, 1));
  await same(x.nanmean(), mg.nanmean(x));
  await same(x.countNonzero(0), mg.countNonzero(x, 0));
  const y = tensor([[1, 5, 2], [4, 3, 3]], { device });
  await same(y.cov({ correction: 0 }), mg.cov(y, { correction: 0 }));
  await same(y.corrcoef(), mg.corrcoef(y));
  await same(mg.trapz(y, { dx: 0.5 }), mg.trapezoid(y, { dx: 0.5 }));
  await same(
    mg.trapz(y, tensor([0, 1, 3], { device }), { dim: 1 }),
    mg.trapezoid(y, tensor([0, 1, 3], { device })),
  );
  await same(y.renorm(2, 0, 1), mg.renorm(y, 2, 0, 1));
  const z = y.clone();
  assert.equal(z.renorm_(2, 0, 1), z);
  await same(z, mg.renorm(y, 2, 0, 1));
  const leaf = tensor([[1, 2]], { device, requiresGrad: true });
  assert.throws(() => leaf.renorm_(2, 0, 1), /leaf/);
  const w = tensor([[3, 4], [0.1, 0.2]], { device, requiresGrad: true });
  const v = w.mul(1);
  v.renorm_(2, 0, 1).sum().backward();
  const direct = w.detach().clone();
  direct.requiresGrad = true;
  mg.renorm(direct, 2, 0, 1).sum().backward();
  await same(w.grad!, direct.grad!);
  await same(y.dist(x.narrow(1, 0, 3), 1), mg.dist(y, x.narrow(1, 0, 3), 1));
  const a = tensor([[4, 1], [2, 3]], { device });
  await same(a.inverse(), mg.inverse(a));
  await same(a.logdet(), mg.logdet(a));
  await same(a.pinverse(), mg.pinverse(a));
  await same(a.matrixExp(), linalg.matrixExp(a));
  const l = linalg.cholesky(a.matmul(a.transpose(0, 1)));
  await same(a.choleskySolve(l), mg.choleskySolve(a, l));
  await same(l.choleskyInverse(), mg.choleskyInverse(l));
  await same(a.triangularSolve(a.triu())[0], mg.triangularSolve(a, a.triu())[0]);
  await same(a.svd()[1], mg.svd(a)[1]);
  const [LU, piv] = a.lu();
  await same(a.luSolve(LU, piv), mg.luSolve(a, LU, piv));
});

backendTest("cov's weight checks on the device reject at the next read", async (device) => {
  const x = tensor([[1, 2, 3]], { device });
  const c = mg.cov(x, { fweights: tensor([1, -2, 1], { dtype: "int32", device }) });
  await assert.rejects(() => c.data(), /cov\(\): fweights cannot be negative/);
  const d = mg.cov(x, { aweights: tensor([1, -0.5, 1], { device }) });
  await assert.rejects(() => d.data(), /cov\(\): aweights cannot be negative/);
});

backendTest(
  "*Ex functions report info without failing; checkErrors fails at the next read",
  async (device) => {
    const sing = tensor([[1, 2], [2, 4]], { device });
    const [, info] = linalg.invEx(sing);
    assert.deepEqual([info.dtype, await info.item()], ["int32", 2]);
    const [, info2] = linalg.solveEx(sing, tensor([1, 2], { device }));
    assert.equal(await info2.item(), 2);
    const [, info3] = linalg.choleskyEx(tensor([[1, 2], [2, 1]], { device }));
    assert.equal(await info3.item(), 2);
    const [inverse] = linalg.invEx(sing, { checkErrors: true });
    await assert.rejects(() => inverse.data(), /linalg.inv_ex: The diagonal element 2 is zero/);
    const [, , info4] = linalg.ldlFactorEx(mg.zeros([2, 2], { device }));
    assert.equal(await info4.item(), 1);
    const [ld] = linalg.ldlFactor(mg.zeros([2, 2], { device }));
    await assert.rejects(
      () => ld.data(),
      /ldl_factor: The factorization could not be completed because the input is singular \(D\[1, 1\] is zero\)/,
    );
    const [l] = linalg.choleskyEx(tensor([[1, 2], [2, 1]], { device }), { checkErrors: true });
    await assert.rejects(() => l.data(), /leading minor of order 2 is not positive-definite/);
  },
);

// ---- errors naming the bad value or shape ----

Deno.test("bad input is refused with PyTorch's reasons", () => {
  const x = tensor([[1, 2], [3, 4]]);
  const cases: [() => unknown, RegExp][] = [
    [
      () => mg.cov(mg.zeros([2, 2, 2])),
      /cov\(\): expected input to have two or fewer dimensions but got an input with 3 dimensions \(shape \[2, 2, 2\]\)/,
    ],
    [
      () => mg.cov(x, { fweights: tensor([1, 2]) }),
      /fweights to have integral dtype but got float32/,
    ],
    [
      () => mg.cov(x, { fweights: tensor([1, 2, 3], { dtype: "int32" }) }),
      /same numel as there are observations in the input but got 3 != 2/,
    ],
    [
      () => mg.cov(x, { aweights: tensor([1, 2], { dtype: "int32" }) }),
      /aweights to have floating point dtype but got int32/,
    ],
    [
      () => mg.cov(x, { aweights: mg.ones([2, 1]) }),
      /aweights to have one or fewer dimensions but got aweights with shape \[2, 1\]/,
    ],
    [
      () => mg.corrcoef(mg.zeros([1, 1, 1])),
      /corrcoef\(\): expected input to have two or fewer dimensions/,
    ],
    [
      () => mg.renorm(tensor([1, 2]), 2, 0, 1),
      /renorm: input needs at least 2 dimensions, got 1 dimensions/,
    ],
    [() => mg.renorm(x, -1, 0, 1), /renorm: non-positive-norm not supported, got p=-1/],
    [() => mg.renorm(x, 2, 0, -1), /renorm: expected maxnorm to be >= 0 but got -1/],
    [() => mg.renorm(x, 2, 2, 1), /renorm/],
    [
      () => mg.renorm(tensor([[1]], { dtype: "int32" }), 2, 0, 1),
      /renorm: expected a floating-point tensor, got int32/,
    ],
    [
      () => mg.dist(tensor([1], { dtype: "int32" }), tensor([1])),
      /dist: expected a floating-point tensor, got int32/,
    ],
    [
      () => mg.trapezoid(tensor([1, 2, 4]), tensor([1, 2])),
      /trapezoid: There must be one `x` value for each sample point \(x has 2, y has 3 along dim 0\)/,
    ],
    [
      () => mg.trapezoid(tensor([1, 2]), tensor([1, 2]), { dx: 2 }),
      /trapezoid: give either x or dx, not both/,
    ],
    [() => mg.trapezoid(tensor(1)), /trapezoid: y must have at least one dim/],
    [() => mg.cumulativeTrapezoid(tensor([1, 2]), { dim: 3 }), /cumulative_trapezoid/],
    [
      () => mg.gradient(tensor([1, 2, 4]), { edgeOrder: 3 as 1 }),
      /torch.gradient only supports edge_order=1 and edge_order=2, got 3/,
    ],
    [
      () => mg.gradient(tensor([1, 2]), { edgeOrder: 2 }),
      /at least edge_order\+1 \(dim 0 of shape \[2\] with edge_order 2\)/,
    ],
    [
      () => mg.gradient(x, { spacing: [1, 2, 3] }),
      /spacing argument of length 3 and a dim argument of length 2/,
    ],
    [
      () => mg.gradient(x, { spacing: [tensor([1, 2, 3])], dim: 0 }),
      /spacing 0 has shape \[3\], dim 0 has size 2/,
    ],
    [() => mg.logspace(0, 1, -1), /logspace: steps must be a non-negative integer, got -1/],
    [
      () => mg.hannWindow(5, { dtype: "int32" }),
      /hann_window expects floating point dtypes, got int32/,
    ],
    [
      () => mg.kaiserWindow(-1),
      /kaiser_window requires non-negative window_length, got window_length=-1/,
    ],
    [
      () => mg.kaiserWindow(3, { beta: NaN }),
      /kaiser_window: beta must be a finite number, got NaN/,
    ],
    [
      () => linalg.luFactor(tensor([1, 2])),
      /linalg.lu_factor_ex: The input tensor A must have at least 2 dimensions \(got shape \[2\]\)/,
    ],
    [() => linalg.luFactor(x, { pivot: false }), /LU without pivoting is not implemented/],
    [
      () => linalg.lu(tensor([[1]], { dtype: "int32" })),
      /Expected a floating point tensor as input. Got int32/,
    ],
    [
      () => mg.luUnpack(x, tensor([1, 2])),
      /LU_pivots is expected to be an int32 tensor, got float32/,
    ],
    [
      () => mg.luUnpack(x, tensor([1], { dtype: "int32" })),
      /LU_pivots \(shape \[1\]\) does not fit LU_data \(shape \[2, 2\]\)/,
    ],
    [
      () => linalg.luSolve(x, tensor([1, 2], { dtype: "int32" }), mg.ones([3, 1])),
      /Incompatible shapes of A and B for the equation AX = B \(2x2 and 3x1\)/,
    ],
    [() => linalg.solveEx(x, mg.ones([3])), /linalg.solve_ex: Incompatible shapes/],
    [
      () => linalg.invEx(mg.ones([2, 3])),
      /must be batches of square matrices, but they are 2 by 3 matrices/,
    ],
    [
      () => linalg.ldlFactor(mg.ones([2, 3])),
      /torch.linalg.ldl_factor: A must be batches of square matrices/,
    ],
    [
      () => linalg.ldlSolve(x, tensor([1, 2]), mg.ones([2, 1])),
      /ldl_solve: pivots must be an int32 tensor, got float32/,
    ],
    [
      () => linalg.ldlSolve(x, tensor([1], { dtype: "int32" }), mg.ones([2, 1])),
      /pivots \(shape \[1\]\) do not fit LD \(shape \[2, 2\]\)/,
    ],
    [
      () => linalg.ldlSolve(x, tensor([1, 2], { dtype: "int32" }), mg.ones([3, 1])),
      /B must be a batch of matrices with 2 rows, got shape \[3, 1\]/,
    ],
    [
      () => linalg.householderProduct(mg.ones([2, 3]), mg.ones([2])),
      /input.shape\[-2\] must be greater than or equal to input.shape\[-1\] \(shape \[2, 3\]\)/,
    ],
    [
      () => linalg.householderProduct(mg.ones([3, 2]), mg.ones([3])),
      /input.shape\[-1\] must be greater than or equal to tau.shape\[-1\] \(2 < 3\)/,
    ],
    [
      () => linalg.matrixExp(mg.ones([2, 3])),
      /linalg.matrix_exp: A must be batches of square matrices/,
    ],
    [
      () => linalg.vecdot(tensor([1], { dtype: "int32" }), tensor([1], { dtype: "int32" })),
      /Expected a floating point or complex tensor as input. Got int32/,
    ],
    [
      () => linalg.vecdot(tensor([1]), tensor([1], { dtype: "float64" })),
      /found x of type float32 and y of type float64/,
    ],
    [() => linalg.vander(tensor([1]), { N: 1 }), /N must be greater than 1, got 1/],
    [() => linalg.cond(x, 3), /linalg.cond: Order 3 not supported/],
    [() => linalg.cond(mg.ones([2, 3]), "fro"), /must be batches of square matrices/],
    [
      () => linalg.tensorinv(mg.ones([2, 3, 4]), { ind: 1 }),
      /prod\(self.shape\[ind:\]\) == prod\(self.shape\[:ind\]\), but got 12 != 2/,
    ],
    [
      () => linalg.tensorinv(mg.ones([2, 2]), { ind: 0 }),
      /Expected a strictly positive integer for 'ind', but got 0/,
    ],
    [() => linalg.tensorsolve(mg.ones([2, 3, 4]), mg.ones([2, 3])), /but got 4 != 6/],
    [
      () => linalg.lstsq(x, mg.ones([2, 1], { dtype: "float64" })),
      /input's dtype float32 and other's dtype float64/,
    ],
    [() => linalg.lstsq(x, mg.ones([3, 1])), /input.size\(-2\) should match other.size\(-2\)/],
    [
      () => linalg.lstsq(x, mg.ones([1, 1, 2, 1])),
      /input.dim\(\) must be greater or equal to other.dim\(\)/,
    ],
    [
      () => linalg.lstsq(x, mg.ones([2, 1]), { driver: "foo" as "gels" }),
      /driver` should be one of \(gels, gelsy, gelsd, gelss\), got foo/,
    ],
    [
      () => mg.choleskySolve(mg.ones([3]), x),
      /cholesky_solve: b should have at least 2 dimensions, but has 1 dimensions instead/,
    ],
    [
      () => mg.choleskySolve(mg.ones([3, 1]), x),
      /each A matrix is 2 by 2 but each b matrix is 3 by 1/,
    ],
    [
      () => mg.triangularSolve(mg.ones([2]), x),
      /triangular_solve: b should have at least 2 dimensions/,
    ],
    [() => mg.logdet(mg.ones([2, 3])), /logdet: A must be batches of square matrices/],
    [() => mg.svd(tensor([1, 2])), /svd: The input tensor input must have at least 2 dimensions/],
  ];
  for (const [fn, message] of cases) assert.throws(fn, message);
});

// ---- review s14: regressions found by random comparison with PyTorch 1.13 ----

backendTest("review: cov rejects weights that sum to zero, as PyTorch", async (device) => {
  const x = tensor([[1, 2, 3]], { device });
  const zero = mg.cov(x, { fweights: tensor([0, 0, 0], { dtype: "int32", device }) });
  await assert.rejects(() => zero.data(), /cov\(\): weights sum to zero, can't be normalized/);
  const product = mg.cov(x, {
    fweights: tensor([1, 0, 0], { dtype: "int32", device }),
    aweights: tensor([0, 1, 1], { device }),
  });
  await assert.rejects(() => product.data(), /weights sum to zero/);
  const empty = mg.cov(mg.zeros([2, 0], { device }), {
    fweights: mg.zeros([0], { dtype: "int32", device }),
  });
  await assert.rejects(() => empty.data(), /weights sum to zero/);
  assertClose(await mg.cov(x, { fweights: tensor([0, 2, 1], { dtype: "int32", device }) }).data(), [
    1 / 3,
  ]);
});

backendTest(
  "review: logspace with int32 truncates start and end first, as PyTorch",
  async (device) => {
    const at = (s: number, e: number, n: number, base: number) =>
      mg.logspace(s, e, n, { base, dtype: "int32", device }).toArray();
    // torch.logspace(2.5, 30, 3, 3.5, dtype=torch.int32): exponents 2, 16, 30; overflow is INT_MIN.
    assert.deepEqual(await at(2.5, 30, 3, 3.5), [12, 507094277, -2147483648]);
    assert.deepEqual(await at(-1.3, 5, 5, 2), [0, 1, 4, 11, 32]);
    assert.deepEqual(await at(2.5, -1, 8, 10), [100, 37, 13, 5, 1, 0, 0, 0]);
    // float32: PyTorch's exponents are float start + double step (no float rounding of either).
    assert.deepEqual(await mg.logspace(0.1, 7.3, 7, { device }).toArray(), [
      1.258925437927246,
      19.952625274658203,
      316.22784423828125,
      5011.873046875,
      79432.84375,
      1258925.875,
      19952632.0,
    ]);
  },
);

backendTest(
  "review: linalg.luFactor fails at the next read on a zero pivot, as PyTorch's",
  async (device) => {
    const [LU] = linalg.luFactor(tensor([[1, 2], [2, 4]], { device }));
    await assert.rejects(
      () => LU.data(),
      /torch.linalg.lu_factor: U\[2,2\] is zero and using it on lu_solve would result in a division by zero/,
    );
    const [batched] = linalg.luFactor(mg.zeros([3, 2, 1], { device }));
    await assert.rejects(() => batched.data(), /\(Batch element 0\): U\[1,1\] is zero/);
    // lu_factor_ex, lu and torch.lu do not fail.
    const [, , info] = linalg.luFactorEx(tensor([[1, 2], [2, 4]], { device }));
    assert.equal(await info.item(), 2);
  },
);

backendTest(
  "review: lstsq ignores rcond for gels and keeps the vector residuals' dim",
  async (device) => {
    const a = tensor([[1, 0], [0, 1e-3], [1, 1]], { device });
    const b = tensor([[1], [2], [3]], { device });
    // torch.linalg.lstsq(a, b, rcond=0.5, driver="gels").solution
    const gels = linalg.lstsq(a, b, { rcond: 0.5, driver: "gels" });
    assertClose(await gels.solution.data(), [0.9980016350746155, 2.0039963722229004], {
      rtol: 1e-4,
    });
    const v = linalg.lstsq(a, tensor([1, 2, 3], { device }), { driver: "gelsd" });
    assert.deepEqual(v.residuals.shape, [1]);
    assert.deepEqual(
      linalg.lstsq(a, tensor([1, 2, 3], { device }), { driver: "gels" }).residuals.shape,
      [
        1,
      ],
    );
  },
);

backendTest("review: invEx and cond never return a finite non-inverse", async (device) => {
  // float32 rank 2: Gauss–Jordan meets an exact zero pivot, LAPACK (on Aᵀ) does not.
  const a = tensor([
    0.23138785362243652,
    -0.20697225630283356,
    -0.29585543274879456,
    -0.10790461301803589,
    -0.13539975881576538,
    -0.3534807562828064,
    0.12653246521949768,
    -0.008472124114632607,
    0.06009828671813011,
  ], { shape: [3, 3], device });
  const [inverse] = linalg.invEx(a);
  const values = await inverse.data();
  // PyTorch's inverse is ~1e8 here; a small finite "inverse" would be silently wrong.
  assert.ok(values.every((v) => !Number.isFinite(v) || Math.abs(v) > 1e6), `${values}`);
  const c = await linalg.cond(a, "nuc").item();
  assert.ok(c > 1e6, `cond ${c}`);
  const [solved] = linalg.solveEx(a, tensor([[1], [2], [3]], { device }));
  const s = await solved.data();
  assert.ok(s.every((v) => !Number.isFinite(v) || Math.abs(v) > 1e6), `${s}`);
});

backendTest("review: trapezoid's empty cases keep PyTorch's dtype and graph", (device) => {
  const yi = mg.zeros([2, 0], { dtype: "int32", device });
  assert.equal(mg.trapezoid(yi).dtype, "int32");
  assert.equal(mg.trapezoid(yi, mg.zeros([0], { device })).dtype, "int32");
  assert.equal(mg.cumulativeTrapezoid(yi).dtype, "float32");
  const y = mg.zeros([2, 0], { device, requiresGrad: true });
  const c = mg.cumulativeTrapezoid(y, { dx: 0.5 });
  assert.deepEqual(c.shape, [2, 0]);
  c.sum().backward();
  assert.deepEqual(y.grad?.shape, [2, 0]);
  // cumulative_trapezoid checks x even with no samples (trapezoid returns 0 first), as PyTorch.
  assert.throws(
    () =>
      mg.cumulativeTrapezoid(mg.zeros([4, 0, 2], { device }), mg.ones([1], { device }), { dim: 1 }),
    /cumulative_trapezoid: There must be one `x` value for each sample point \(x has 1, y has 0/,
  );
  const ye = mg.zeros([1, 0], { device, requiresGrad: true });
  const xe = mg.zeros([0], { device, requiresGrad: true });
  mg.cumulativeTrapezoid(ye, xe).sum().backward();
  assert.deepEqual(xe.grad?.shape, [0]);
});

backendTest(
  "review: householderProduct with no reflectors is differentiable (zeros)",
  async (device) => {
    const a = mg.ones([3, 2], { device, requiresGrad: true });
    const tau = mg.zeros([0], { device, requiresGrad: true });
    const q = linalg.householderProduct(a, tau);
    assertClose(await q.data(), [1, 0, 0, 1, 0, 0]);
    q.sum().backward();
    assertClose(await a.grad!.data(), [0, 0, 0, 0, 0, 0]);
    assert.deepEqual(tau.grad?.shape, [0]);
    // tau's batch dims must equal A's (PyTorch does not broadcast them).
    for (const batch of [[1], [3]]) {
      assert.throws(
        () =>
          linalg.householderProduct(
            mg.ones([2, 4, 3], { device }),
            mg.ones([...batch, 2], { device }),
          ),
        new RegExp(
          `Expected batch dimensions of tau to be equal to input.shape\\[:-2\\], but got \\[${
            batch[0]
          }\\]`,
        ),
      );
    }
  },
);

backendTest(
  "review: luUnpack rejects pivots out of range at the next read, as PyTorch",
  async (device) => {
    const LU = mg.ones([2, 3, 3], { device });
    for (const bad of [[1, 2, 7], [1, 0, 3]]) {
      const [P] = mg.luUnpack(LU, tensor([[1, 2, 3], bad], { dtype: "int32", device }));
      await assert.rejects(
        () => P.data(),
        /pivots passed to lu_unpack must be between 1 and LU.size\(-2\) inclusive/,
      );
    }
    const [P] = mg.luUnpack(LU, tensor([[3, 3, 3], [2, 2, 3]], { dtype: "int32", device }));
    assert.deepEqual(await P.toArray(), [
      [[0, 1, 0], [0, 0, 1], [1, 0, 0]],
      [[0, 1, 0], [1, 0, 0], [0, 0, 1]],
    ]);
  },
);

backendTest(
  "review: triangularSolve's cloned coefficient has the broadcast batch, as PyTorch",
  (device) => {
    const [x, a] = mg.triangularSolve(mg.ones([2, 3, 2], { device }), mg.eye(3, { device }));
    assert.deepEqual([x.shape, a.shape], [[2, 3, 2], [2, 3, 3]]);
  },
);

backendTest(
  "review: blackmanWindow's ends are exactly 0, as PyTorch's (its order of terms)",
  async (device) => {
    const w = await mg.blackmanWindow(6, { periodic: false, device }).data();
    assert.deepEqual([w[0], w[5]], [0, 0]);
  },
);

backendTest(
  "review: LU's row interchanges are exact (rows of very different scale)",
  async (device) => {
    // A swap as row + (other - row) loses the small row to rounding: U[0, 1] came out 0.
    const a = tensor([[1e-3, 1e10], [1, 1]], { device });
    const [LU, pivots] = linalg.luFactor(a);
    assert.deepEqual(await pivots.toArray(), [2, 2]);
    assertClose(await LU.data(), [1, 1, 1e-3, 1e10], { rtol: 1e-6 });
    assertClose(await linalg.lu(a)[2].data(), [1, 1, 0, 1e10], { rtol: 1e-6 });
    // L's multipliers are stored, not computed as column + (l - column): 0.5 came out 0.
    const big = linalg.luFactor(tensor([[2e10, 1], [1e10, 3]], { device }))[0];
    assertClose(await big.data(), [2e10, 1, 0.5, 2.5], { rtol: 1e-6 });
    // torch.linalg.solve(a, [1, 1]) = [1, 9.99e-11]; the inexact swap gave 5.96e-8.
    assertClose(await linalg.solve(a, tensor([1, 1], { device })).data(), [1, 9.99e-11], {
      rtol: 1e-4,
      atol: 0,
    });
    assertClose(await linalg.solveEx(a, tensor([1, 1], { device }))[0].data(), [1, 9.99e-11], {
      rtol: 1e-4,
      atol: 0,
    });
  },
);

backendTest("review: cond of empty matrices is 0 for p ±2, as PyTorch", async (device) => {
  for (const shape of [[0, 0], [2, 0, 0], [3, 0], [2, 0, 3]]) {
    for (const p of [2, -2]) {
      const c = linalg.cond(mg.zeros(shape, { device }), p);
      assert.deepEqual(c.shape, shape.slice(0, -2));
      assert.deepEqual(Array.from(await c.data()), new Array(c.numel()).fill(0));
    }
  }
});

Deno.test("review: cov and gradient promote to float64 weights and coordinates, as PyTorch", () => {
  const x = mg.randn([2, 4]);
  const aw = mg.rand([4], { dtype: "float64" });
  assert.equal(mg.cov(x, { aweights: aw }).dtype, "float64");
  assert.equal(mg.cov(x.to("int32"), { aweights: aw }).dtype, "float64");
  assert.equal(mg.cov(x.to("float64"), { aweights: mg.rand([4]) }).dtype, "float64");
  const coords = [mg.arange(2, { dtype: "float64" }), mg.arange(4)];
  assert.deepEqual(mg.gradient(x, { spacing: coords }).map((g) => g.dtype), ["float64", "float32"]);
  const ints = mg.arange(4, { dtype: "int32" });
  assert.equal(
    mg.gradient(ints, { spacing: [mg.arange(4, { dtype: "float64" })] })[0].dtype,
    "float64",
  );
});

backendTest(
  "review: an inf in LU's input stays where LAPACK keeps it (no NaN spread)",
  async (device) => {
    // torch.linalg.lu_factor_ex([[2, inf], [1, 1]]): LU [[2, inf], [0.5, -inf]], pivots [1, 2].
    const [LU, pivots] = linalg.luFactorEx(tensor([[2, Infinity], [1, 1]], { device }));
    assert.deepEqual(await LU.toArray(), [[2, Infinity], [0.5, -Infinity]]);
    assert.deepEqual(await pivots.toArray(), [1, 2]);
  },
);
