/**
 * `special`'s Bessel, Airy and orthogonal-polynomial functions (besselJ0 …
 * legendrePolynomialP) against PyTorch 1.13
 * (tests/fixtures/torch_special_more.json: every branch of PyTorch's
 * algorithms, ±0, ±1, ±inf, NaN, poles, n < 0, fractional n, a tensor of
 * degrees broadcast against x) on every backend in float32 and on cpu in
 * float64; int32 promotion; no gradient (as PyTorch 1.13); errors naming
 * the bad value.
 * @module
 */

import assert from "node:assert/strict";
import type * as mg from "../mod.ts";
import { special, type Tensor, tensor } from "../mod.ts";
import {
  assertClose,
  assertNear,
  backendTest,
  decodeFixture,
  type FixtureValues,
  REF,
} from "./harness.ts";
import fixtures from "./fixtures/torch_special_more.json" with { type: "json" };

const UNARY: Record<string, (x: Tensor) => Tensor> = {
  besselJ0: special.besselJ0,
  besselJ1: special.besselJ1,
  besselY0: special.besselY0,
  besselY1: special.besselY1,
  modifiedBesselI0: special.modifiedBesselI0,
  modifiedBesselI1: special.modifiedBesselI1,
  modifiedBesselK0: special.modifiedBesselK0,
  modifiedBesselK1: special.modifiedBesselK1,
  scaledModifiedBesselK0: special.scaledModifiedBesselK0,
  scaledModifiedBesselK1: special.scaledModifiedBesselK1,
  sphericalBesselJ0: special.sphericalBesselJ0,
  airyAi: special.airyAi,
};

const POLYNOMIALS: Record<string, special.PolynomialFunction> = {
  chebyshevPolynomialT: special.chebyshevPolynomialT,
  chebyshevPolynomialU: special.chebyshevPolynomialU,
  chebyshevPolynomialV: special.chebyshevPolynomialV,
  chebyshevPolynomialW: special.chebyshevPolynomialW,
  shiftedChebyshevPolynomialT: special.shiftedChebyshevPolynomialT,
  shiftedChebyshevPolynomialU: special.shiftedChebyshevPolynomialU,
  shiftedChebyshevPolynomialV: special.shiftedChebyshevPolynomialV,
  shiftedChebyshevPolynomialW: special.shiftedChebyshevPolynomialW,
  hermitePolynomialH: special.hermitePolynomialH,
  hermitePolynomialHe: special.hermitePolynomialHe,
  laguerrePolynomialL: special.laguerrePolynomialL,
  legendrePolynomialP: special.legendrePolynomialP,
};

interface UnaryCase {
  name: string;
  x: FixtureValues;
  out: FixtureValues;
  out64: FixtureValues;
  requires_grad: boolean;
}

interface PolynomialCase {
  name: string;
  x: FixtureValues;
  n: FixtureValues;
  out: FixtureValues;
  out64: FixtureValues;
}

const shapeOf = (v: FixtureValues): number[] =>
  Array.isArray(v) ? [v.length, ...shapeOf(v[0])] : [];

/**
 * float32 within a few ulp of PyTorch's float32 on the cpu (same algorithm,
 * same operation order); the GPU's exp/log/sin/cos are looser.
 */
function tol32(device: mg.Device) {
  return device.backend === "cpu" ? { atol: 1e-6, rtol: 1e-5 } : { atol: 2e-5, rtol: 2e-4 };
}

for (const c of fixtures.unary as UnaryCase[]) {
  backendTest(`special more fixture: ${c.name} float32`, async (device) => {
    const x = tensor(decodeFixture(c.x), { device, requiresGrad: true });
    const out = UNARY[c.name](x);
    assert.equal(out.dtype, "float32");
    assert.equal(out.requiresGrad, c.requires_grad, `${c.name}: requiresGrad as PyTorch`);
    assertNear(await out.data(), c.out, c.out64, { ...tol32(device), what: c.name });
  });
}

Deno.test("special more fixture: float64 outputs (cpu)", async () => {
  for (const c of fixtures.unary as UnaryCase[]) {
    const x = tensor(decodeFixture(c.x), { device: REF, dtype: "float64" });
    const out = UNARY[c.name](x);
    assert.equal(out.dtype, "float64");
    assertClose(await out.data(), decodeFixture(c.out64), {
      atol: 1e-14,
      rtol: 1e-12,
      what: `${c.name} float64`,
    });
  }
});

const polyLabel = (c: PolynomialCase) =>
  `${c.name}(n = ${Array.isArray(c.n) ? "tensor" : JSON.stringify(c.n)})`;

async function evaluatePolynomial(
  c: PolynomialCase,
  device: mg.Device,
  dtype: "float32" | "float64",
): Promise<Tensor> {
  const fn = POLYNOMIALS[c.name];
  const x = tensor(decodeFixture(c.x), { shape: shapeOf(c.x), device, dtype });
  if (!Array.isArray(c.n)) return fn(x, decodeFixture(c.n)[0]);
  return await fn(x, tensor(decodeFixture(c.n), { device, dtype }));
}

/**
 * A forward error bound of PyTorch's float32 algorithm at (x, n), in units
 * of float32's ε (2⁻²⁴), not counting the result's own rounding: the
 * recurrence's (n + 1)·Sₙ, where Sₙ is the same recurrence run on |x| with
 * every term added (so it measures the cancellation), and, for the
 * Chebyshev polynomials inside (-1, 1), at most (n + 1)·π/d: the rounding
 * of the closed forms' phase (n + 1)θ or (n + ½)θ over their denominator d
 * (1, sin θ, cos θ/2, sin θ/2). On 300k random (x, n) PyTorch's own
 * float32 error stayed within 7.5 of these units and ours within 6.4
 * (review); unlike a multiple of PyTorch's error at the same point, this
 * does not depend on where PyTorch's rounding happened to be lucky.
 */
function errorUnits(name: string, x: number, degree: number): number {
  const n = Number.isFinite(degree) && Math.abs(degree) < 2 ** 63 ? Math.trunc(degree) : -1;
  if (n < 0) return 0;
  const shifted = name.startsWith("shifted");
  const y = shifted ? 2 * x - 1 : x;
  const [a, ay] = [Math.abs(x), Math.abs(y)];
  const steps: Record<string, [number, (k: number, q: number, p: number) => number]> = {
    hermitePolynomialH: [2 * a, (k, q, p) => 2 * a * q + 2 * k * p],
    hermitePolynomialHe: [a, (k, q, p) => a * q + k * p],
    laguerrePolynomialL: [1 + a, (k, q, p) => ((2 * k + 1 + a) * q + k * p) / (k + 1)],
    legendrePolynomialP: [a, (k, q, p) => ((2 * k + 1) * a * q + k * p) / (k + 1)],
  };
  const [p1, next] = steps[name] ?? [2 * ay + 1, (_k, q, p) => 2 * ay * q + p];
  let [p, q] = [1, n === 0 ? 1 : p1];
  for (let k = 1; k < n; k++) [p, q] = [q, next(k, q, p)];
  const recurrence = (n + 1) * q;
  if (!name.toLowerCase().includes("chebyshev") || !(ay < 1)) return recurrence;
  const theta = Math.acos(y);
  const kind = name.at(-1);
  const d = kind === "U"
    ? Math.sin(theta)
    : kind === "V"
    ? Math.cos(theta / 2)
    : kind === "W"
    ? Math.sin(theta / 2)
    : 1;
  return Math.min(recurrence, (n + 1) * Math.PI / Math.abs(d));
}

/**
 * Each element equal to PyTorch's float32 value or within 8·{@link errorUnits}·ε
 * (plus a few ulp and, on the GPU, {@link tol32}'s allowance for its looser
 * transcendental functions) of the true value, PyTorch's
 * float64 result of the same input. PyTorch's float32 kernels fuse a·b - c
 * into one rounding (FMA) and ours cannot, so the two float32 results are
 * different roundings of equal quality, not the same bits.
 */
function assertWithinErrorBound(
  actual: ArrayLike<number>,
  torch32: FixtureValues,
  torch64: FixtureValues,
  options: { name: string; xs: number[]; ns: number[]; device: mg.Device; what: string },
): void {
  const [a, e32, e64] = [Array.from(actual), decodeFixture(torch32), decodeFixture(torch64)];
  // The GPU's sin, cos and acos may be looser than the cpu's (WGSL allows 2⁻¹¹ absolute).
  const gpu = options.device.backend === "cpu" ? { atol: 0, rtol: 0 } : tol32(options.device);
  a.forEach((v, i) => {
    const [t32, t64] = [e32[i], Math.fround(e64[i])];
    if (Object.is(v, t32) || (Number.isNaN(v) && Number.isNaN(t32))) return;
    // An infinite reference makes the tolerance below infinite: exact there.
    if (Math.abs(t64) === Infinity && v !== t64) {
      assert.fail(
        `${options.what}: element ${i} is ${v}, PyTorch float32 ${t32}, float64 ${e64[i]}`,
      );
    }
    const units = errorUnits(options.name, options.xs[i], options.ns[i]);
    const tol = 2 ** -24 * (8 * units + 4 * Math.abs(t64)) + gpu.atol + gpu.rtol * Math.abs(t64);
    if (!(Math.abs(v - e64[i]) <= tol)) {
      assert.fail(
        `${options.what}: element ${i} (x = ${options.xs[i]}, n = ${options.ns[i]}) is ${v}, ` +
          `PyTorch float32 ${t32}, float64 ${e64[i]} (tolerance ${tol})`,
      );
    }
  });
}

for (const name of Object.keys(POLYNOMIALS)) {
  backendTest(`special more fixture: ${name} float32`, async (device) => {
    for (const c of (fixtures.polynomial as PolynomialCase[]).filter((p) => p.name === name)) {
      const out = await evaluatePolynomial(c, device, "float32");
      assert.equal(out.dtype, "float32");
      assert.deepEqual([...out.shape], shapeOf(c.out), polyLabel(c));
      // Each element's x and n: x [k] with a number n, or x [k, 1] against n [m].
      const [x, n] = [decodeFixture(c.x), decodeFixture(c.n)];
      const xs = Array.isArray(c.n) ? x.flatMap((v) => n.map(() => v)) : x;
      const ns = Array.isArray(c.n) ? x.flatMap(() => n) : x.map(() => n[0]);
      assertWithinErrorBound(await out.data(), c.out, c.out64, {
        name,
        xs,
        ns,
        device,
        what: polyLabel(c),
      });
    }
  });
}

Deno.test("special more fixture: polynomials float64 (cpu)", async () => {
  for (const c of fixtures.polynomial as PolynomialCase[]) {
    const out = await evaluatePolynomial(c, REF, "float64");
    assert.equal(out.dtype, "float64");
    assertClose(await out.data(), decodeFixture(c.out64), {
      atol: 1e-12,
      rtol: 1e-12,
      what: `${polyLabel(c)} float64`,
    });
  }
});

backendTest(
  "special more: a tensor of degrees with a number x, and int32 input",
  async (device) => {
    const n = tensor([0, 1, 2, 3, -1], { device, dtype: "int32" });
    const t = await special.chebyshevPolynomialT(0.5, n);
    assert.equal(t.dtype, "float32");
    assertClose(await t.data(), [1, 0.5, -0.5, -1, 0], { atol: 1e-6, what: "T_n(0.5)" });
    const h = special.hermitePolynomialH(tensor([0, 1, 2], { device, dtype: "int32" }), 3);
    assert.equal(h.dtype, "float32");
    // H_3(x) = 8x³ - 12x
    assertClose(await h.data(), [0, -4, 40], { what: "H_3 of int32" });
    const j = special.besselJ0(tensor([0, 1], { device, dtype: "int32" }));
    assert.equal(j.dtype, "float32");
    assertClose(await j.data(), [1, 0.7651976865579666], { atol: 1e-6, what: "J0 of int32" });
    // A float64 degree tensor widens float32 x, as PyTorch's promotion.
    if (device.backend === "cpu") {
      const wide = await special.legendrePolynomialP(
        tensor([0.5], { device }),
        tensor([2], { device, dtype: "float64" }),
      );
      assert.equal(wide.dtype, "float64");
      assertClose(await wide.data(), [-0.125], { atol: 1e-15, what: "P_2(0.5)" });
    }
  },
);

Deno.test("special more: no gradient, as PyTorch 1.13 (backward raises)", () => {
  const x = tensor([0.5, 1.5], { requiresGrad: true });
  for (const [name, fn] of Object.entries(UNARY)) {
    const out = fn(x);
    assert.equal(out.requiresGrad, false, name);
    assert.throws(() => out.sum().backward(), /does not require grad/, name);
  }
  for (const [name, fn] of Object.entries(POLYNOMIALS)) {
    const out = fn(x, 3);
    assert.equal(out.requiresGrad, false, name);
    assert.throws(() => out.sum().backward(), /does not require grad/, name);
  }
  assert.equal(x.grad, null);
});

Deno.test("special more: errors name the bad value", async () => {
  assert.throws(
    () => special.hermitePolynomialH(tensor([1]), 5000),
    (e: Error) =>
      e instanceof RangeError && /hermitePolynomialH/.test(e.message) && /5000/.test(e.message),
  );
  await assert.rejects(
    () => special.legendrePolynomialP(tensor([1]), tensor([1, 9000.5])),
    (e: Error) =>
      e instanceof RangeError && /legendrePolynomialP/.test(e.message) && /9000/.test(e.message),
  );
  assert.throws(
    () => special.chebyshevPolynomialT(0.5 as unknown as Tensor, 3),
    (e: Error) => e instanceof TypeError && /0\.5/.test(e.message) && /\b3\b/.test(e.message),
  );
  assert.throws(
    () => special.laguerrePolynomialL(tensor([1, 2, 3]), tensor([1, 2]) as unknown as number),
    (e: Error) => /\[3\]/.test(e.message) && /\[2\]/.test(e.message),
  );
});

Deno.test("special more: degrees outside int64 (NaN, ±inf, 1e30) give 0, as PyTorch on x86", async () => {
  const x = tensor([0.5, 2]);
  for (const n of [Infinity, NaN, 1e30, -Infinity]) {
    assert.deepEqual([...await special.hermitePolynomialH(x, n).data()], [0, 0], `n = ${n}`);
  }
  const t = await special.chebyshevPolynomialT(x, tensor([1e30, 2]));
  assert.deepEqual([...await t.data()], [0, 7]);
});

Deno.test("special more: a long recurrence keeps a few steps in memory, not all n (review)", async () => {
  // Each step's tensors used to stay until the whole polynomial returned:
  // P_1000 of 10⁴ float32 values peaked at ~160 MB (n·numel·4 bytes·4).
  const backend = REF.backendDevice;
  const x = tensor(Array.from({ length: 10_000 }, (_, i) => i / 5_000 - 1), { device: REF });
  const degrees = (top: number) =>
    tensor(Array.from({ length: 10_000 }, (_, i) => i % (top + 1)), { device: REF });
  /** The most bytes in use above the start while `run` computes. */
  async function peakOf(run: () => Tensor | Promise<Tensor>): Promise<number> {
    const allocate = backend.allocate;
    const base = REF.memory().bytesInUse;
    let peak = base;
    backend.allocate = (numel, dtype) => {
      const buffer = allocate.call(backend, numel, dtype);
      peak = Math.max(peak, REF.memory().bytesInUse);
      return buffer;
    };
    try {
      (await run()).dispose();
    } finally {
      backend.allocate = allocate;
    }
    return peak - base;
  }
  const [n10, n1000] = [degrees(10), degrees(1000)];
  const cases: [string, () => Tensor | Promise<Tensor>, () => Tensor | Promise<Tensor>][] = [
    ["P_n", () => special.legendrePolynomialP(x, 10), () => special.legendrePolynomialP(x, 1000)],
    [
      "U_n",
      () => special.chebyshevPolynomialU(x, n10),
      () => special.chebyshevPolynomialU(x, n1000),
    ],
  ];
  for (const [what, short, long] of cases) {
    const [a, b] = [await peakOf(short), await peakOf(long)];
    // The same few tensors of x's size (40 kB each) whatever the degree.
    assert.ok(b <= a + 4 * 4 * 10_000, `${what}: peak ${b} bytes at n = 1000, ${a} at n = 10`);
  }
});

backendTest(
  "special more: I₀ and I₁ overflow where PyTorch's e^|x| does (review)",
  async (device) => {
    // PyTorch computes e^|x|·(series)/√|x|: ±inf once e^|x| overflows (|x| > ln(max)).
    const x32 = [88.72283172607422, 88.72283935546875, -88.72283935546875, 90, -700];
    const x = tensor(x32, { device });
    assertClose(await special.modifiedBesselI0(x).data(), [
      1.443257857582666e+37,
      Infinity,
      Infinity,
      Infinity,
      Infinity,
    ], { rtol: 1e-4, what: "I0 float32" });
    assertClose(await special.modifiedBesselI1(x).data(), [
      1.4351011597954974e+37,
      Infinity,
      -Infinity,
      Infinity,
      -Infinity,
    ], { rtol: 1e-4, what: "I1 float32" });
    if (device.backend !== "cpu") return;
    const x64 = tensor([709.78, 709.79, -709.79], { device, dtype: "float64" });
    assertClose(
      await special.modifiedBesselI0(x64).data(),
      [2.685110050671326e+306, Infinity, Infinity],
      { rtol: 1e-12, what: "I0 float64" },
    );
    assertClose(
      await special.modifiedBesselI1(x64).data(),
      [2.6832178748278178e+306, Infinity, -Infinity],
      { rtol: 1e-12, what: "I1 float64" },
    );
  },
);

Deno.test("special more: K₀ of subnormal float32 x, as PyTorch's log(0.5·x) in double (review)", async () => {
  // (GPUs may flush subnormals to 0, so cpu only.)
  const x = tensor([1.401298464324817e-45, 4.203895392974451e-45, 1e-40, 1.2e-38], { device: REF });
  assertClose(
    await special.modifiedBesselK0(x).data(),
    [103.39485168457031, 102.2962417602539, 92.2193374633789, 87.43183898925781],
    { atol: 0, rtol: 1e-6, what: "K0 float32" },
  );
  // float64: 0.5·x underflows to 0 at the smallest subnormal there too (+inf, as PyTorch).
  const x64 = tensor([5e-324], { device: REF, dtype: "float64" });
  assert.deepEqual([...await special.modifiedBesselK0(x64).data()], [Infinity]);
});

backendTest("special more: J₁(-0) is -0, as PyTorch's x·(…) near 0 (review)", async (device) => {
  const out = [...await special.besselJ1(tensor([-0, 0, -1e-30], { device })).data()];
  assert.ok(Object.is(out[0], -0), `J1(-0) = ${out[0]}`);
  assert.ok(Object.is(out[1], 0), `J1(0) = ${out[1]}`);
  assertClose(out.slice(2), [-5.000000015855384e-31], { atol: 0, rtol: 1e-6, what: "J1(-1e-30)" });
});
