/**
 * `fmod` and `remainder` against PyTorch 1.13 (the fixture `torch_fmod.json`): random float32
 * pairs over the whole exponent range with every special value, int32 pairs, int32/float32
 * promotion with broadcasting, and the gradients for both arguments, on every backend.
 * @module
 */

import assert from "node:assert/strict";
import * as mg from "../mod.ts";
import fx from "./fixtures/torch_fmod.json" with { type: "json" };
import { assertClose, backendTest, decodeFixture, fixtureTensor, on } from "./harness.ts";

const xs = decodeFixture(fx.x);
const ys = decodeFixture(fx.y);

/**
 * PyTorch's answer, or C's where PyTorch's vectorized float32 loop gives NaN because x/y
 * overflows float32 (multigrad's documented difference: the exact remainder there too).
 */
function expected(torch: number[], c: (i: number) => number): number[] {
  return torch.map((t, i) => {
    const q = Math.abs(Math.fround(xs[i] / ys[i]));
    return Number.isNaN(t) && q === Infinity && Number.isFinite(xs[i]) ? c(i) : t;
  });
}
const cFmod = (i: number) => xs[i] % ys[i];
const cRem = (i: number) => {
  const r = cFmod(i);
  return r !== 0 && r < 0 !== ys[i] < 0 ? Math.fround(r + ys[i]) : r;
};

function assertSame(got: ArrayLike<number>, want: number[], what: string): void {
  assert.equal(got.length, want.length, `${what}: length`);
  const bad: string[] = [];
  for (let i = 0; i < want.length; i++) {
    if (!Object.is(got[i], want[i])) bad.push(`(${xs[i]}, ${ys[i]}) = ${got[i]}, not ${want[i]}`);
  }
  assert.deepEqual(bad.slice(0, 8), [], `${what}: ${bad.length} of ${want.length} differ`);
}

backendTest("fmod and remainder of random float32 pairs: PyTorch's, bit for bit", async (d) => {
  const fmod = expected(decodeFixture(fx.fmod), cFmod);
  const rem = expected(decodeFixture(fx.remainder), cRem);
  // The fixture's NaNs where x/y overflows are the only differences from C's fmod.
  const overflowed = decodeFixture(fx.fmod).filter((t, i) => !Object.is(t, fmod[i])).length;
  assert.ok(overflowed > 100 && overflowed < xs.length / 8, `${overflowed} overflowed`);
  const x = on(d, [xs.length], xs);
  const y = on(d, [ys.length], ys);
  assertSame(await x.fmod(y).data(), fmod, `fmod on ${d}`);
  assertSame(await x.remainder(y).data(), rem, `remainder on ${d}`);
});

backendTest("fmod and remainder of int32 pairs and of int32 with float32, broadcast", async (d) => {
  const x = fixtureTensor(fx.ints.x, d, { dtype: "int32" });
  const y = fixtureTensor(fx.ints.y, d, { dtype: "int32" });
  const f = x.fmod(y);
  assert.equal(f.dtype, "int32");
  assert.deepEqual(Array.from(await f.data()), fx.ints.fmod);
  assert.deepEqual(Array.from(await x.remainder(y).data()), fx.ints.remainder);
  const m = fx.mixed;
  const mx = fixtureTensor(m.x, d, { dtype: "int32" });
  const my = fixtureTensor(m.y, d);
  const mf = mx.fmod(my);
  assert.equal(`torch.${mf.dtype}`, m.dtype);
  assert.deepEqual(mf.shape, [3, 4]);
  assertClose(await mf.data(), decodeFixture(m.fmod), { atol: 0, rtol: 0 });
  assertClose(await mx.remainder(my).data(), decodeFixture(m.remainder), { atol: 0, rtol: 0 });
  const scalar = mx.fmod(2.5);
  assert.equal(`torch.${scalar.dtype}`, m.scalarDtype);
  assertClose(await scalar.data(), decodeFixture(m.scalarFmod), { atol: 0, rtol: 0 });
  const intScalar = mx.fmod(3);
  assert.equal(`torch.${intScalar.dtype}`, m.intScalarDtype);
  assert.deepEqual(Array.from(await intScalar.data()), decodeFixture(m.intScalar));
});

backendTest("fmod and remainder gradients for both arguments, as PyTorch's", async (d) => {
  const g = fx.grad;
  for (const name of ["fmod", "remainder"] as const) {
    const x = fixtureTensor(g.x, d, { requiresGrad: true });
    const y = fixtureTensor(g.y, d, { requiresGrad: true });
    mg[name](x, y).mul(fixtureTensor(g.w, d)).sum().backward();
    assertClose(await x.grad!.data(), decodeFixture(g[name].x), { atol: 1e-6, what: `${name} x` });
    assertClose(await y.grad!.data(), decodeFixture(g[name].y), { atol: 1e-5, what: `${name} y` });
  }
});

backendTest(
  "fmod of random float32 bit patterns (subnormals, huge gaps): C's, bit for bit",
  async (d) => {
    // Every exponent pair, subnormals and specials included: the WebGPU kernel works on the bits.
    const next = mg.seededRandom(7);
    const bits = new Uint32Array(1 << 15);
    for (let i = 0; i < bits.length; i++) bits[i] = Math.floor(next() * 2 ** 32) >>> 0;
    const f = Array.from(new Float32Array(bits.buffer));
    const [a, b] = [f.slice(0, f.length / 2), f.slice(f.length / 2)];
    const got = await on(d, [a.length], a).fmod(on(d, [b.length], b)).data();
    const bad = a.map((x, i) => [x, b[i], got[i], x % b[i]]).filter(([, , g, c]) =>
      !Object.is(g, c)
    );
    assert.deepEqual(bad.slice(0, 5), [], `${bad.length} of ${a.length} differ`);
  },
);
