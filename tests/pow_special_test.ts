/**
 * pow at special bases and exponents (±0, ±1, ±inf, NaN, ±0.5, -2.5, 2, 3) against PyTorch 1.13
 * (`torch_pow_special.json`): pow(-1, ±inf) = 1, pow(x, 0) = 1 and pow(1, y) = 1 even for NaN,
 * C's rules for zeros and infinities (signs of zeros included), on cpu float32/float64 and on
 * WebGPU float32, and the gradients of both operands where PyTorch defines them.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, type DType, type Tensor, tensor } from "../mod.ts";
import fixture from "./fixtures/torch_pow_special.json" with { type: "json" };
import { backendTest, decodeFixture, type FixtureValues } from "./harness.ts";

/** Equal as IEEE values: the same zero sign, NaN for NaN, else within `rtol`. */
function assertSame(actual: ArrayLike<number>, expected: FixtureValues, what: string): void {
  const e = decodeFixture(expected);
  const bases = decodeFixture(fixture.bases);
  const exps = decodeFixture(fixture.exponents);
  const bad: string[] = [];
  Array.from(actual).forEach((v, i) => {
    const ok = Object.is(v, e[i]) || (Number.isNaN(v) && Number.isNaN(e[i])) ||
      (Number.isFinite(e[i]) && e[i] !== 0 && Math.abs(v - e[i]) <= 1e-6 * Math.abs(e[i]));
    if (!ok) bad.push(`pow(${bases[i % bases.length]}, ${exps[i % exps.length]}): ${v} vs ${e[i]}`);
  });
  assert.deepEqual(bad, [], `${what}: differs from PyTorch at ${bad.length} points`);
}

const dtypesOf = (device: Device): DType[] =>
  device.backend === "cpu" ? ["float32", "float64"] : ["float32"];

backendTest("pow of special values: as PyTorch", async (d) => {
  for (const dtype of dtypesOf(d)) {
    const x = tensor(decodeFixture(fixture.bases), { dtype, device: d });
    const y = tensor(decodeFixture(fixture.exponents), { dtype, device: d });
    assertSame(await x.pow(y).data(), fixture[dtype as "float32" | "float64"], `${d} ${dtype}`);
  }
});

backendTest("pow of special values: gradients of base and exponent as PyTorch", async (d) => {
  const dtype: DType = d.backend === "cpu" ? "float64" : "float32";
  const x = tensor(decodeFixture(fixture.bases), { dtype, device: d, requiresGrad: true });
  const y = tensor(decodeFixture(fixture.exponents), { dtype, device: d, requiresGrad: true });
  x.pow(y).sum().backward();
  assertSame(await (x.grad as Tensor).data(), fixture.gradBase, `${d} d/dbase`);
  assertSame(await (y.grad as Tensor).data(), fixture.gradExponent, `${d} d/dexponent`);
});

backendTest(
  "pow of special bases by a number exponent: values and gradients as PyTorch",
  async (d) => {
    const dtype: DType = d.backend === "cpu" ? "float64" : "float32";
    const specials = decodeFixture(fixture.bases).filter((_, i) => i % 12 === 0);
    for (const [key, ref] of Object.entries(fixture.scalar)) {
      const x = tensor(specials, { dtype, device: d, requiresGrad: true });
      const r = x.pow(Number(key));
      r.sum().backward();
      const check = (actual: ArrayLike<number>, expected: FixtureValues, what: string) => {
        const e = decodeFixture(expected);
        if (key === "0.5" || key === "-0.5") {
          // A deliberate difference: PyTorch computes a number exponent ±0.5 as sqrt / rsqrt, so
          // its pow(-inf, ±0.5) is NaN and pow(-0, ±0.5) has -0's sign, where its tensor-exponent
          // pow (and C's) give |x|^y. multigrad gives the tensor-exponent answer for both forms.
          const j = specials.indexOf(Number(key));
          for (
            const i of [
              specials.indexOf(-Infinity),
              specials.findIndex((v) => Object.is(v, -0)),
            ]
          ) {
            const tensorForm = what === "value" ? fixture.float64 : fixture.gradBase;
            e[i] = decodeFixture(tensorForm)[i * specials.length + j];
          }
        }
        const bad = Array.from(actual).flatMap((v, i) =>
          Object.is(v, e[i]) || (Number.isNaN(v) && Number.isNaN(e[i])) ||
            (Number.isFinite(e[i]) && e[i] !== 0 && Math.abs(v - e[i]) <= 1e-6 * Math.abs(e[i]))
            ? []
            : [`pow(${specials[i]}, ${key}) ${what}: ${v} vs ${e[i]}`]
        );
        assert.deepEqual(bad, []);
      };
      check(await r.data(), ref.value, "value");
      check(await (x.grad as Tensor).data(), ref.grad, "gradient");
    }
  },
);
