/**
 * Review of the scalar-fill overflow checks, `linalg.inv` through the transpose and Wishart's
 * `choleskySolve` form, against PyTorch 1.13 (the fixture `torch_correctness_review.json`).
 * @module
 */

import assert from "node:assert/strict";
import * as mg from "../mod.ts";
import type { Device, DType, Tensor } from "../mod.ts";
import fx from "./fixtures/torch_correctness_review.json" with { type: "json" };
import { assertClose, backendTest, decodeFixture, fixtureTensor, on } from "./harness.ts";

const refused = /without overflow|cannot fill/;

/** The fixture's fills on `d`; a 0-d value is a tensor on `d` (a GPU buffer on webgpu). */
function fills(d: Device): Record<string, () => Tensor> {
  const z = () => mg.zeros([3, 3], { device: d });
  const zi = () => mg.zeros([3, 3], { dtype: "int32", device: d });
  const m = on(d, [3, 3], [1, 0, 0, 0, 1, 0, 0, 0, 1]).gt(0);
  const i = on(d, [1], [0], "int32");
  // Computed on the device, so no host copy of it exists.
  const t = (v: number) => on(d, [], [v]).mul(1);
  return {
    "int32 fill_ 0-d 1e10": () => zi().fill_(t(1e10)),
    "int32 fill_ 0-d inf": () => zi().fill_(t(Infinity)),
    "int32 fill_ 0-d nan": () => zi().fill_(t(NaN)),
    "int32 fill_ 0-d 1.5": () => zi().fill_(t(1.5)),
    "int32 fill_ 0-d -2147483648": () => zi().fill_(t(-2147483648)),
    "int32 maskedFill 0-d 1e10": () => zi().maskedFill(m, t(1e10)),
    "int32 maskedFill 0-d nan": () => zi().maskedFill(m, t(NaN)),
    "int32 maskedFill_ 0-d -inf": () => zi().maskedFill_(m, t(-Infinity)),
    "float32 fill_ 0-d inf": () => z().fill_(t(Infinity)),
    "int32 maskedFill inf": () => zi().maskedFill(m, Infinity),
    "int32 indexFill inf": () => zi().indexFill(0, i, Infinity),
    "int32 indexFill nan": () => zi().indexFill(0, i, NaN),
    "int32 fillDiagonal_ -inf": () => zi().fillDiagonal_(-Infinity),
    "float32 clamp nan": () => z().clamp(undefined, NaN),
    "float32 clamp -inf inf": () => z().clamp(-Infinity, Infinity),
    "int32 clamp inf": () => zi().clamp(undefined, Infinity),
    "float32 where nan": () => mg.where(m, z(), NaN),
    "float32 indexFill -inf": () => z().indexFill(0, i, -Infinity),
  };
}

backendTest(
  "non-finite and 0-d device fills: refused where PyTorch's are, never a wrong number",
  async (d) => {
    const cases = fills(d);
    assert.deepEqual(Object.keys(cases).sort(), Object.keys(fx.fills).sort());
    for (const [name, f] of Object.entries(cases)) {
      const torch = (fx.fills as Record<string, string>)[name];
      if (torch === "ok") {
        await f().data();
        continue;
      }
      // A GPU value cannot be read without waiting: its verdict comes with the next read.
      let error: unknown = null;
      try {
        await f().data();
      } catch (e) {
        error = e;
      }
      assert.ok(error instanceof Error, `${name} on ${d}: PyTorch says "${torch}", no error here`);
      assert.match(error.message, refused, name);
      await mg.zeros([1], { device: d }).data(); // the verdict was raised once, not again
    }
  },
);

backendTest(
  "indexFill of an int32 tensor with a fraction truncates toward zero, as fill_ and maskedFill",
  async (d) => {
    // PyTorch truncates (the fixture's 1); see tests/int_fill_test.ts for every fill.
    assert.equal(fx.truncates["int32 indexFill 1.5"], 1);
    const zi = () => mg.zeros([3, 3], { dtype: "int32", device: d });
    const i = on(d, [1], [0], "int32");
    const row = [1, 1, 1, 0, 0, 0, 0, 0, 0];
    for (const t of [zi().indexFill(0, i, 1.5), zi().indexFill_(0, i, 1.5)]) {
      assert.equal(t.dtype, "int32");
      assert.deepEqual(Array.from(await t.data()), row);
    }
    const masked = zi().maskedFill(on(d, [3, 1], [1, 0, 0]).gt(0), 1.5);
    assert.deepEqual(Array.from(await masked.data()), row);
    assert.equal(zi().indexFill(0, i, 7).dtype, "int32");
  },
);

const float64 = (d: Device): DType =>
  d.backendDevice.dtypes.includes("float64") ? "float64" : "float32";

backendTest("linalg.inv of random batched matrices: PyTorch's values and gradients", async (d) => {
  for (const [dtype, c] of Object.entries(fx.inv)) {
    if (dtype === "float64" && float64(d) !== "float64") continue;
    const tol = dtype === "float64" ? 1e-12 : 1e-5;
    const a = fixtureTensor(c.a, d, { dtype: dtype as DType, requiresGrad: true });
    const x = mg.linalg.inv(a);
    assert.deepEqual(x.shape, [2, 3, 4, 4]);
    assertClose(await x.data(), decodeFixture(c.inv), { atol: tol, rtol: tol, what: dtype });
    x.mul(fixtureTensor(c.w, d, { dtype: dtype as DType })).sum().backward();
    assertClose(await a.grad!.data(), decodeFixture(c.grad), { atol: tol, rtol: tol });
    const [xe, info] = mg.linalg.invEx(a.detach());
    assertClose(await xe.data(), decodeFixture(c.inv), { atol: tol, rtol: tol });
    assert.deepEqual(Array.from(await info.data()), [0, 0, 0, 0, 0, 0]);
  }
});

backendTest(
  "Wishart logProb, entropy, mean, variance and their gradients, as PyTorch's",
  async (d) => {
    const dtype = float64(d);
    const tol = dtype === "float64" ? { atol: 1e-9, rtol: 1e-9 } : { atol: 2e-3, rtol: 2e-3 };
    const kinds = { scale_tril: "scaleTril", covariance_matrix: "covarianceMatrix" } as const;
    const all = { ...kinds, precision_matrix: "precisionMatrix" } as const;
    for (const [kind, c] of Object.entries(fx.wishart)) {
      for (const what of ["logProb", "entropy", "mean", "variance"] as const) {
        const p = fixtureTensor(c.param, d, { dtype, requiresGrad: true });
        const df = on(d, [2], [4, 5.5], dtype).requiresGrad_();
        const w = new mg.distributions.Wishart(df, { [all[kind as keyof typeof all]]: p });
        const v = what === "logProb"
          ? w.logProb(fixtureTensor(fx.X, d, { dtype }))
          : what === "entropy"
          ? w.entropy()
          : w[what];
        const ref = c[what];
        const where = `${kind} ${what} on ${d}`;
        assertClose(await v.data(), decodeFixture(ref.value), { ...tol, what: where });
        const n = v.numel();
        const weights = mg.linspace(0.5, 1.5, n, { dtype, device: d }).reshape(v.shape);
        v.mul(weights).sum().backward();
        assertClose(await p.grad!.data(), decodeFixture(ref.grad), {
          ...tol,
          what: `${where} grad`,
        });
        assertClose(await df.grad!.data(), ref.dfGrad, { ...tol, what: `${where} df grad` });
      }
    }
    assert.equal(Object.keys(kinds).length + 1, Object.keys(fx.wishart).length);
  },
);
