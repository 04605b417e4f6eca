/**
 * The in-place variants (trailing-underscore methods) against PyTorch 1.13
 * (tests/fixtures/torch_inplace_variants.json: the tensor after the op, its version,
 * and the gradients through the op recorded on a non-leaf) on every
 * backend; addcmul/addcdiv; the autograd rules (a saved tensor changed in
 * place makes backward raise, a leaf that requires grad is refused, an
 * aliased view is refused while recording, allowed under noGrad); random
 * fills (moments, seeding, refusals); float64 gradient checks on cpu; errors
 * naming the bad value.
 * @module
 */

import assert from "node:assert/strict";
import {
  addcdiv,
  addcmul,
  type Device,
  type DType,
  manualSeed,
  nn,
  noGrad,
  type Tensor,
  tensor,
  zeros,
} from "../mod.ts";
import { assertFixture, backendTest, fixtureTensor, type FixtureValues } from "./harness.ts";
import { check, inp } from "./gradcheck.ts";
import fixtures from "./fixtures/torch_inplace_variants.json" with { type: "json" };

type TensorArg = { t: FixtureValues; dtype: DType; grad: boolean };
type Arg = number | string | TensorArg | { list: TensorArg[] } | { opts: Record<string, unknown> };

interface Case {
  name: string;
  method: string;
  dtype: DType;
  x: FixtureValues;
  args: Arg[];
  output: FixtureValues;
  version: number;
  g?: FixtureValues;
  grads?: (FixtureValues | null)[];
}

const CASES = fixtures.cases as unknown as Case[];

function tol(device: Device) {
  return device.backend === "cpu" ? { atol: 2e-5, rtol: 1e-4 } : { atol: 2e-4, rtol: 1e-3 };
}

type Methods = Record<string, (...args: unknown[]) => Tensor>;

/** Calls `method` on `t` by name (the fixtures name the methods). */
const call = (t: Tensor, method: string, args: unknown[]): Tensor =>
  (t as unknown as Methods)[method](...args);

function buildArg(arg: Arg, device: Device, tracked: Tensor[]): unknown {
  if (typeof arg !== "object") return arg;
  if ("opts" in arg) return arg.opts;
  if ("list" in arg) return arg.list.map((a) => buildArg(a, device, tracked));
  const t = fixtureTensor(arg.t, device, { dtype: arg.dtype, requiresGrad: arg.grad });
  if (arg.grad) tracked.push(t);
  return t;
}

backendTest("in-place variants match PyTorch 1.13", async (device) => {
  for (const c of CASES) {
    const what = `${c.name} on ${device}`;
    const x0 = fixtureTensor(c.x, device, { dtype: c.dtype, requiresGrad: c.grads !== undefined });
    const x1 = c.grads ? x0.mul(1) : x0.clone();
    assert.equal(x1.version, 0, what);
    const tracked: Tensor[] = [];
    const args = c.args.map((a) => buildArg(a, device, tracked));
    const y = call(x1, c.method, args);
    assert.equal(y, x1, `${what}: returns the tensor itself`);
    assert.equal(y.dtype, c.dtype, `${what}: dtype`);
    // One write per op (PyTorch's wrapping fill_diagonal_ counts two).
    assert.equal(x1.version, 1, `${what}: version`);
    await assertFixture(y, c.output, { ...tol(device), what });
    if (!c.grads) continue;
    y.mul(fixtureTensor(c.g!, device)).sum().backward();
    const inputs = [x0, ...tracked];
    assert.equal(inputs.length, c.grads.length, `${what}: gradients`);
    for (const [i, t] of inputs.entries()) {
      const expected = c.grads[i];
      if (expected === null) continue;
      await assertFixture(t.grad, expected, { ...tol(device), what: `${what}: grad ${i}` });
    }
  }
});

backendTest("addcmul and addcdiv match PyTorch 1.13 (function and method)", async (device) => {
  for (const c of fixtures.addc) {
    for (const form of ["function", "method"]) {
      const what = `${c.name} (${form}) on ${device}`;
      const [x, a, b] = [c.input, c.tensor1, c.tensor2].map((v) =>
        fixtureTensor(v, device, { requiresGrad: true })
      );
      const options = { value: c.value };
      const y = c.name === "addcmul"
        ? (form === "function" ? addcmul(x, a, b, options) : x.addcmul(a, b, options))
        : (form === "function" ? addcdiv(x, a, b, options) : x.addcdiv(a, b, options));
      await assertFixture(y, c.output, { ...tol(device), what });
      y.mul(fixtureTensor(c.g, device)).sum().backward();
      for (const [i, t] of [x, a, b].entries()) {
        await assertFixture(t.grad, c.grads[i], { ...tol(device), what: `${what}: grad ${i}` });
      }
    }
  }
});

backendTest("in-place ops bump the version, so a saved tensor makes backward raise", (device) => {
  const x = tensor([0.5, 1, 2], { device, requiresGrad: true });
  const a = x.mul(1);
  const saved = a.sin(); // sin saves its input
  a.sqrt_();
  assert.equal(a.version, 1);
  assert.throws(() => saved.sum().backward(), /sin backward: .*modified in place.*version 1/);
  // An op that saves its output (sigmoid) is not affected by a later change of its input.
  const b = x.mul(1);
  const s = b.sigmoid();
  b.exp_().add_(1);
  assert.equal(b.version, 2);
  s.sum().backward();
});

backendTest("chained in-place ops on a non-leaf give PyTorch's gradient", async (device) => {
  // torch: x = [0.5, 1, 2]; y = (x * 2); y.exp_().mul_(x).clamp_(max=20); grad of sum
  const x = tensor([0.5, 1, 2], { device, requiresGrad: true });
  const y = x.mul(2);
  y.exp_().mul_(x).clamp_(undefined, 20);
  await assertFixture(y, [1.3591409, 7.3890562, 20], { ...tol(device), what: "values" });
  y.sum().backward();
  // d/dx (x e^{2x}) = e^{2x} (1 + 2x), 0 where clamped
  await assertFixture(x.grad, [5.4365635, 22.1671677, 0], { ...tol(device), what: "grad" });
});

backendTest(
  "an operand that requires grad makes a plain tensor's in-place op recorded",
  async (device) => {
    // torch: t = zeros(2, 3); t.addcmul_(a, b, value=2).scatter_(0, index, src); grads of sum(t * g)
    const t = zeros([2, 3], { device });
    const a = tensor([1, 2, 3], { device, requiresGrad: true });
    const b = tensor([[0.5], [-1]], { device, requiresGrad: true });
    const src = tensor([[10, 20, 30]], { device, requiresGrad: true });
    const index = tensor([[1, 0, 1]], { dtype: "int32", device });
    t.addcmul_(a, b, { value: 2 }).scatter_(0, index, src);
    assert.ok(t.requiresGrad && !t.isLeaf);
    assert.deepEqual(await t.toArray(), [[1, 20, 3], [10, -4, 30]]);
    t.mul(tensor([[1, 2, 3], [4, 5, 6]], { device })).sum().backward();
    // Overwritten places pass nothing back to a and b.
    assert.deepEqual(await a.grad!.toArray(), [1, -10, 3]);
    assert.deepEqual(await b.grad!.toArray(), [[20], [20]]);
    assert.deepEqual(await src.grad!.toArray(), [[4, 2, 6]]);
  },
);

backendTest("in-place refusals: leaves that require grad, aliased views, bad types", (device) => {
  const leaf = tensor([1, 2, 3], { device, requiresGrad: true });
  assert.throws(
    () => leaf.exp_(),
    /exp_: a leaf tensor \(shape \[3\], float32\) that requires grad/,
  );
  assert.throws(() => leaf.clamp_(0, 1), /clamp_: a leaf tensor/);
  assert.throws(() => leaf.scatter_(0, tensor([0], { dtype: "int32", device }), 1), /scatter_/);
  assert.throws(() => leaf.uniform_(), /uniform_: a leaf tensor/);
  assert.equal(leaf.version, 0);
  // Under noGrad (as optimizers and nn.init) the leaf changes and stays a leaf.
  noGrad(() => leaf.mul_(2).sub_(1));
  assert.ok(leaf.isLeaf);
  assert.equal(leaf.version, 2);
  // A reshape view shares its base's memory: recording a change to it is refused.
  const base = leaf.mul(1);
  const view = base.reshape([3, 1]);
  assert.throws(() => view.relu_(), /relu_: .*shares its memory/);
  // Unrecorded, the change reaches the base through the shared memory.
  const plain = tensor([[-1, 2], [3, -4]], { device });
  plain.reshape([4]).relu_();
  return plain.toArray().then((v) => assert.deepEqual(v, [[0, 2], [3, 0]]));
});

backendTest("in-place on a copy where PyTorch has a view is refused, not lost", async (device) => {
  // PyTorch writes these through to w; here they are copies, so the change would be lost.
  const w = tensor([[1, 2, 3], [4, 5, 6]], { device });
  const refused = /is a copy made by (narrow|permute|expand).* would not reach the tensor it/;
  assert.throws(() => noGrad(() => w.narrow(0, 0, 1).zero_()), refused);
  assert.throws(() => w.select(0, 1).fill_(7), refused);
  assert.throws(() => w.t().mul_(2), refused);
  assert.throws(() => w.transpose(0, 1).exp_(), refused);
  assert.throws(() => w.unbind(0)[0].add_(1), refused);
  assert.throws(() => w.split(1, 1)[2].copy_(tensor([0, 0], { device })), refused);
  assert.throws(() => w.diagonal().clamp_(0, 1), refused);
  assert.throws(() => w.narrow(1, 0, 1).expand([2, 4]).uniform_(), refused);
  // Recorded on a non-leaf: PyTorch would change `a` and its gradient.
  const x = tensor([[1, 2], [3, 4]], { device, requiresGrad: true });
  const a = x.mul(1);
  assert.throws(() => a.t().exp_(), refused);
  assert.deepEqual(await w.toArray(), [[1, 2, 3], [4, 5, 6]]);
  // A copy asked for as one (clone) changes freely, and so does a parameter made from a copy.
  assert.deepEqual(await w.t().clone().mul_(2).toArray(), [[2, 8], [4, 10], [6, 12]]);
  const p = new nn.Parameter(w.t());
  noGrad(() => p.mul_(2));
  assert.deepEqual(await p.toArray(), [[2, 8], [4, 10], [6, 12]]);
});

backendTest("unrecorded in-place ops free their intermediates at once", async (device) => {
  // An optimizer-style loop under noGrad must not hold one temporary per step until GC.
  const p = tensor([[0.5, -2, 3], [1, 0.25, -1]], { device });
  const m = tensor([1, 2, 3], { device });
  const step = () =>
    noGrad(() => p.clamp_(-1, 1).lerp_(m, 0.5).addcmul_(m, m, { value: -0.1 }).normal_());
  step(); // a first step may make what later ones reuse
  await p.data();
  const before = device.memory().bytesInUse;
  for (let i = 0; i < 20; i++) step();
  await p.data();
  assert.equal(device.memory().bytesInUse, before);
});

backendTest("in-place errors name the bad dtype, shape or value", async (device) => {
  const ints = tensor([1, 2, 3], { dtype: "int32", device });
  assert.throws(() => ints.sqrt_(), /sqrt: expected a floating-point tensor, got int32/);
  assert.throws(() => ints.div_(2), /div_: the result type float32 cannot be stored in the int32/);
  assert.throws(() => ints.clamp_(0.5), /clamp_: the result type float32 .* int32/);
  // 0.5 · alpha 2 is an integer, but PyTorch's result type is float all the same.
  assert.throws(
    () => ints.sub_(0.5, { alpha: 2 }),
    /sub_: the result type float32 cannot be stored in the int32 tensor/,
  );
  assert.throws(() => ints.clamp_(), /clamp_: at least one of min or max must be given/);
  assert.throws(() => ints.clip_(undefined, undefined), /clip_: at least one of min or max/);
  assert.throws(() => ints.uniform_(), /uniform_: needs a floating-point tensor, got int32/);
  const x = tensor([1, 2, 3], { device });
  assert.throws(
    () => x.sub_(tensor([[1, 2, 3], [4, 5, 6]], { device })),
    /sub_: the result of shape \[2, 3\] does not fit the tensor's shape \[3\]/,
  );
  // Refused before any work: a division by zero in the refused op must not surface at a later read.
  const zeroDivisor = tensor([[1, 0, 1], [1, 1, 1]], { dtype: "int32", device });
  assert.throws(
    () => ints.floorDivide_(zeroDivisor),
    /floorDivide_: the result of shape \[2, 3\] does not fit the tensor's shape \[3\]/,
  );
  assert.throws(() => x.lerp_(x, tensor([[0.5], [1]], { device })), /lerp_: the result of shape/);
  assert.throws(
    () => x.clamp_(undefined, zeros([2, 1], { device })),
    /clamp_: the result of shape/,
  );
  assert.throws(() => x.maskedFill_(zeroDivisor, 1), /maskedFill_: the result of shape \[2, 3\]/);
  assert.throws(() => x.addcmul_(x, zeros([2, 1], { device })), /addcmul_: the result of shape/);
  assert.deepEqual(await tensor([5, 6], { device }).add(1).toArray(), [6, 7]);
  assert.throws(
    () => x.addcdiv_(ints, ints),
    /addcdiv: integer division is not supported \(tensor1 and tensor2 are int32 and int32\)/,
  );
  assert.throws(() => ints.addcmul_(ints, ints, { value: 0.5 }), /value 0.5 must be an integer/);
  assert.throws(() => zeros([3], { device }).fillDiagonal_(1), /at least 2 dims, got shape \[3\]/);
  assert.throws(
    () => zeros([2, 3, 3], { device }).fillDiagonal_(1),
    /all dims must have the same length .* got shape \[2, 3, 3\]/,
  );
  assert.throws(() => x.uniform_({ from: 2, to: 1 }), /from=2 > to=1/);
  assert.throws(() => x.uniform_({ from: -Infinity, to: 0 }), /from must be finite, got -Infinity/);
  assert.throws(() => x.uniform_({ to: Infinity }), /to must be finite, got Infinity/);
  assert.throws(() => x.normal_({ std: -1 }), /std >= 0, but found std=-1/);
  assert.throws(() => x.logNormal_({ std: 0 }), /std > 0, but found std=0/);
  assert.throws(() => x.bernoulli_(1.5), /p in \[0, 1\], but got p=1.5/);
  assert.throws(() => x.exponential_(-1), /lambd >= 0, but found lambd=-1/);
  assert.throws(() => x.geometric_(1), /p in \(0, 1\), but got p=1/);
  assert.throws(() => x.random_(3, 3), /from=3 >= to=3/);
  assert.throws(() => x.random_(-5), /from=0 >= to=-5/);
  assert.throws(() => x.random_(0.5), /to must be an integer, got 0.5/);
  assert.equal(x.version, 0, "a refused op changes nothing");
});

/** Mean and variance of the values of `t`. */
async function moments(t: Tensor): Promise<[number, number, number[]]> {
  const v = Array.from(await t.data());
  const mean = v.reduce((a, b) => a + b, 0) / v.length;
  const variance = v.reduce((a, b) => a + (b - mean) ** 2, 0) / (v.length - 1);
  return [mean, variance, v];
}

backendTest("random fills: distributions, seeding, int tensors", async (device) => {
  const n = 20000;
  // Tolerances: 5 standard errors of the mean (sd / sqrt(n)), 10% on variances.
  const near = (got: number, want: number, sd: number, what: string) =>
    assert.ok(Math.abs(got - want) <= 5 * sd / Math.sqrt(n), `${what}: ${got}, expected ${want}`);
  manualSeed(11);
  let [m, v, vals] = await moments(zeros([n], { device }).uniform_({ from: -1, to: 3 }));
  near(m, 1, Math.sqrt(16 / 12), "uniform_ mean");
  assert.ok(vals.every((u) => u >= -1 && u < 3), "uniform_ range");
  [m, v] = await moments(zeros([n], { device }).normal_({ mean: 2, std: 0.5 }));
  near(m, 2, 0.5, "normal_ mean");
  assert.ok(Math.abs(v - 0.25) < 0.025, `normal_ variance ${v}`);
  [m, v, vals] = await moments(zeros([n], { device }).exponential_(2));
  near(m, 0.5, 0.5, "exponential_ mean");
  assert.ok(vals.every((u) => u >= 0 && Number.isFinite(u)), "exponential_ support");
  [m, v, vals] = await moments(zeros([n], { device }).geometric_(0.25));
  near(m, 4, Math.sqrt(0.75) / 0.25, "geometric_ mean");
  assert.ok(vals.every((u) => u >= 1 && Number.isInteger(u)), "geometric_ support");
  [m, v, vals] = await moments(zeros([n], { device }).logNormal_({ mean: 0, std: 0.25 }));
  near(m, Math.exp(0.25 ** 2 / 2), 0.26, "logNormal_ mean");
  assert.ok(vals.every((u) => u > 0), "logNormal_ support");
  // Cauchy has no mean: its median and quartiles instead.
  [, , vals] = await moments(zeros([n], { device }).cauchy_(1, 2));
  vals.sort((a, b) => a - b);
  const q = (p: number) => vals[Math.floor(p * n)];
  assert.ok(Math.abs(q(0.5) - 1) < 0.1 && Math.abs(q(0.75) - 3) < 0.15, "cauchy_ quartiles");
  [m, , vals] = await moments(zeros([n], { device }).bernoulli_(0.3));
  near(m, 0.3, Math.sqrt(0.21), "bernoulli_ mean");
  assert.ok(vals.every((u) => u === 0 || u === 1), "bernoulli_ values");
  const probs = tensor([0, 1, 0, 1], { device });
  assert.deepEqual(await zeros([2, 4], { device }).bernoulli_(probs).toArray(), [
    [0, 1, 0, 1],
    [0, 1, 0, 1],
  ]);
  const ints = zeros([n], { dtype: "int32", device }).random_(-3, 4);
  [m, , vals] = await moments(ints);
  near(m, 0, 2, "random_ mean");
  assert.deepEqual([...new Set(vals)].sort((a, b) => a - b), [-3, -2, -1, 0, 1, 2, 3]);
  [, , vals] = await moments(zeros([1000], { device }).random_());
  assert.ok(vals.every((u) => Number.isInteger(u) && u >= 0 && u <= 2 ** 24), "random_()");
  // Ranges wider than a float32 draw's 24 bits still reach every integer (odd ones too).
  [m, , vals] = await moments(zeros([n], { dtype: "int32", device }).random_());
  near(m, 2 ** 30, 2 ** 31 / Math.sqrt(12), "int32 random_() mean");
  const odd = vals.filter((u) => u % 2 !== 0).length / n;
  assert.ok(Math.abs(odd - 0.5) < 0.02, `int32 random_() odd fraction ${odd}`);
  assert.ok(vals.every((u) => u >= 0 && u <= 2 ** 31 - 1), "int32 random_() range");
  [, , vals] = await moments(zeros([n], { dtype: "int32", device }).random_(-5, 2 ** 30));
  assert.ok(Math.abs(vals.filter((u) => u % 2 !== 0).length / n - 0.5) < 0.02, "odd, wide range");
  assert.ok(vals.every((u) => u >= -5 && u < 2 ** 30), "random_(-5, 2^30) range");
  // manualSeed makes the fills repeat.
  manualSeed(5);
  const first = await zeros([6], { device }).normal_().exponential_().data();
  manualSeed(5);
  const second = await zeros([6], { device }).normal_().exponential_().data();
  assert.deepEqual(Array.from(first), Array.from(second));
});

backendTest("a fill recorded on a non-leaf gives the old values no gradient", async (device) => {
  const x = tensor([1, 2, 3], { device, requiresGrad: true });
  const y = x.mul(3);
  y.normal_();
  y.mul(x).sum().backward();
  // d/dx sum(y_new · x) = y_new (the fill cut y's history)
  assert.deepEqual(Array.from(await x.grad!.data()), Array.from(await y.data()));
});

backendTest(
  "logical ops in place cut the gradient, as comparisons do",
  async (device) => {
    // PyTorch 1.13's logical_not_ and logical_and_ pass the old gradient through
    // unchanged (they record nothing); multigrad gives 0, as PyTorch does for eq_.
    const x = tensor([0, 1.5, -2], { device, requiresGrad: true });
    const y = x.mul(1);
    y.logicalNot_();
    assert.deepEqual(await y.toArray(), [1, 0, 0]);
    const z = x.mul(1).logicalAnd_(tensor([1, 0, 1], { device }));
    assert.deepEqual(await z.toArray(), [0, 0, 1]);
    y.add(z).mul(tensor([1, 2, 3], { device })).sum().backward();
    assert.deepEqual(await x.grad!.toArray(), [0, 0, 0]);
  },
);

backendTest("requiresGrad_ sets the flag and returns the tensor", (device) => {
  const x = tensor([1, 2], { device });
  assert.equal(x.requiresGrad_(), x);
  assert.ok(x.requiresGrad);
  x.requiresGrad_(false);
  assert.ok(!x.requiresGrad);
  assert.throws(
    () => tensor([1], { dtype: "int32", device }).requiresGrad_(),
    /only floating-point tensors can require grad, got int32/,
  );
  const y = tensor([1], { device, requiresGrad: true }).mul(2);
  assert.throws(() => y.requiresGrad_(false), /cannot turn off on a non-leaf/);
});

// ---- float64 gradient checks through the in-place forms on a non-leaf ----

const unaryChecks: [string, number, number][] = [
  ["neg_", -2, 2],
  ["exp_", -2, 2],
  ["log_", 0.2, 3],
  ["sqrt_", 0.2, 3],
  ["abs_", 0.1, 2],
  ["sigmoid_", -2, 2],
  ["tanh_", -2, 2],
  ["sin_", -2, 2],
  ["cos_", -2, 2],
  ["tan_", -1, 1],
  ["asin_", -0.9, 0.9],
  ["acos_", -0.9, 0.9],
  ["atan_", -2, 2],
  ["sinh_", -2, 2],
  ["cosh_", -2, 2],
  ["asinh_", -2, 2],
  ["acosh_", 1.1, 3],
  ["atanh_", -0.9, 0.9],
  ["erf_", -2, 2],
  ["erfc_", -2, 2],
  ["erfinv_", -0.9, 0.9],
  ["reciprocal_", 0.3, 3],
  ["rsqrt_", 0.3, 3],
  ["square_", -2, 2],
  ["log1p_", 0.2, 3],
  ["expm1_", -2, 2],
  ["log2_", 0.2, 3],
  ["log10_", 0.2, 3],
  ["exp2_", -2, 2],
  ["lgamma_", 0.2, 3],
  ["digamma_", 0.5, 3],
  ["i0_", -2, 2],
  ["sinc_", 0.1, 2],
  ["deg2rad_", -2, 2],
  ["rad2deg_", -2, 2],
  ["relu_", 0.1, 2],
  ["frac_", 0.1, 0.9],
];
for (const [method, low, high] of unaryChecks) {
  check(`${method} on a non-leaf`, (x) => call(x.mul(1), method, []), [
    inp([2, 3], 9100 + method.length, low, high),
  ]);
}
check("polygamma_(1)", (x) => x.mul(1).polygamma_(1), [inp([2, 3], 9201, 0.5, 3)]);
check("mvlgamma_(2)", (x) => x.mul(1).mvlgamma_(2), [inp([2, 3], 9202, 0.8, 3)]);
check("logit_", (x) => x.mul(1).logit_(), [inp([2, 3], 9203, 0.1, 0.9)]);
check("sub_ with alpha", (x, y) => x.mul(1).sub_(y, { alpha: 2 }), [
  inp([2, 3], 9204),
  inp([3], 9205),
]);
check("div_", (x, y) => x.mul(1).div_(y), [inp([2, 3], 9206), inp([2, 3], 9207, 0.5, 2)]);
check("pow_ tensor exponent", (x, y) => x.mul(1).pow_(y), [
  inp([2, 3], 9208, 0.5, 2),
  inp([3], 9209),
]);
check("atan2_", (x, y) => x.mul(1).atan2_(y), [inp([2, 3], 9210), inp([2, 3], 9211, 0.5, 2)]);
check("hypot_", (x, y) => x.mul(1).hypot_(y), [inp([2, 3], 9212), inp([2, 3], 9213)]);
check("xlogy_", (x, y) => x.mul(1).xlogy_(y), [inp([2, 3], 9214), inp([2, 3], 9215, 0.5, 2)]);
check("copysign_", (x, y) => x.mul(1).copysign_(y), [
  inp([2, 3], 9216, 0.2, 2),
  inp([2, 3], 9217, 0.2, 2),
]);
check("remainder_ and fmod_", (x) => x.mul(1).remainder_(0.7).fmod_(0.3), [
  inp([2, 3], 9218, 0.05, 0.25),
]);
check("clamp_ with tensor bounds", (x, lo, hi) => x.mul(1).clamp_(lo, hi), [
  { shape: [2, 3], values: [-2, -0.5, 0.05, 0.55, 1.5, 2] },
  { shape: [3], values: [-1, -0.2, 0.1] },
  { shape: [2, 1], values: [0.5, 1.6] },
]);
check("clampMin_ and clampMax_", (x) => x.mul(1).clampMin_(-0.5).clampMax_(0.5), [
  { shape: [2, 3], values: [-2, -0.4, 0.05, 0.45, 1.5, 2] },
]);
check("lerp_ with tensor weight", (x, e, w) => x.mul(1).lerp_(e, w), [
  inp([2, 3], 9219),
  inp([2, 3], 9220),
  inp([3], 9221, 0, 1),
]);
check("maskedFill_ with a 0-d value", (x, v) => {
  const mask = tensor([1, 0, 1], { dtype: "int32", device: x.device });
  return x.mul(1).maskedFill_(mask, v.reshape([]));
}, [inp([2, 3], 9222), inp([1], 9223)]);
check("tril_ and triu_", (x) => x.mul(1).tril_(1).triu_(-1), [inp([3, 4], 9224)]);
check("addcmul_", (x, a, b) => x.mul(1).addcmul_(a, b, { value: -2 }), [
  inp([2, 3], 9225),
  inp([3], 9226),
  inp([2, 1], 9227),
]);
check("addcdiv_", (x, a, b) => x.mul(1).addcdiv_(a, b, { value: 0.5 }), [
  inp([2, 3], 9228),
  inp([3], 9229),
  inp([2, 1], 9230, 0.5, 2),
]);
check("addcmul (input broadcast)", (x, a, b) => addcmul(x, a, b, { value: 1.5 }), [
  inp([3], 9231),
  inp([2, 3], 9232),
  inp([2, 1], 9233),
]);
check("addcdiv (input broadcast)", (x, a, b) => x.addcdiv(a, b, { value: 1.5 }), [
  inp([3], 9234),
  inp([2, 3], 9235),
  inp([2, 1], 9236, 0.5, 2),
]);
const idx = (values: number[], shape: number[], x: Tensor) =>
  tensor(values, { shape, dtype: "int32", device: x.device });
check("scatter_ and scatterAdd_", (x, s) => {
  const index = idx([0, 2, 1, 0, 2, 0, 0, 1], [2, 4], x);
  return x.mul(1).scatter_(0, index, s).scatterAdd_(0, index, s.mul(2));
}, [inp([3, 4], 9237), inp([2, 4], 9238)]);
check("scatterReduce_ amax", (x, s) => {
  const index = idx([0, 2, 1, 0, 2, 0, 0, 1], [2, 4], x);
  return x.mul(1).scatterReduce_(0, index, s, "amax", { includeSelf: false });
}, [inp([3, 4], 9239), inp([2, 4], 9240)]);
check("indexAdd_, indexCopy_, indexFill_", (x, s) => {
  const index = idx([2, 0], [2], x);
  return x.mul(1).indexAdd_(0, index, s, { alpha: 2 }).indexCopy_(
    0,
    idx([1], [1], x),
    s.narrow(0, 0, 1),
  )
    .indexFill_(1, idx([3], [1], x), -1);
}, [inp([3, 4], 9241), inp([2, 4], 9242)]);
check("indexPut_ accumulate, put_, maskedScatter_", (x, v, s) => {
  const mask = tensor([1, 0, 0, 1, 0, 1, 0, 0, 1, 1, 0, 0], {
    shape: [3, 4],
    dtype: "int32",
    device: x.device,
  });
  return x.mul(1).indexPut_([idx([0, 0, 2], [3], x), idx([1, 1, 3], [3], x)], v, {
    accumulate: true,
  }).put_(idx([1, 11], [2], x), v.narrow(0, 0, 2)).maskedScatter_(mask, s);
}, [inp([3, 4], 9243), inp([3], 9244), inp([2, 4], 9245)]);
check("fillDiagonal_ (wrap)", (x) => x.mul(1).fillDiagonal_(2.5, { wrap: true }), [
  inp([7, 3], 9246),
]);
