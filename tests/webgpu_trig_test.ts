/**
 * webgpu `sin` and `cos` against the cpu backend (float64 `Math.sin`/`Math.cos` rounded to
 * float32) over the whole float32 range: WGSL's builtins promise only an absolute 2^-11 on
 * [-π, π] and nothing outside (llvmpipe's are off by more than 1 past |x| ~ 1.5e7), so the kernel
 * reduces the argument itself (Cody–Waite, then Payne–Hanek past 8192). Every result must be
 * within 2 float32 ulps of the reference, near the functions' zeros too (the reduction keeps r's
 * relative accuracy), NaN and ±inf give NaN and sin(-0) is -0. Run it with
 * DENO_WEBGPU_BACKEND=vulkan and =gl.
 * @module
 */

import assert from "node:assert/strict";
import { type Device, seededRandom, tensor } from "../mod.ts";
import { backendTest, REF } from "./harness.ts";

const F32 = new Float32Array(1);
const U32 = new Uint32Array(F32.buffer);

function bitsOf(v: number): number {
  F32[0] = v;
  return U32[0];
}

function fromBits(b: number): number {
  U32[0] = b >>> 0;
  return F32[0];
}

/** The float32s ordered as integers, so that the difference of two is their distance in ulps. */
function ordinal(v: number): number {
  const b = bitsOf(v);
  return b >= 0x80000000 ? -(b & 0x7fffffff) : b;
}

/** `count` values with |x| log-uniform in [1e-30, 3.4e38] and either sign, as float32. */
function logUniform(count: number, seed: number): number[] {
  const next = seededRandom(seed);
  const lo = Math.log(1e-30);
  const hi = Math.log(3.4e38);
  return Array.from({ length: count }, () => {
    const x = Math.fround(Math.exp(lo + (hi - lo) * next()));
    return next() < 0.5 ? -x : x;
  });
}

/**
 * The float32s nearest to multiples of π/2 among the 20,000 from `start` up: those with the
 * smallest |sin| or |cos| (float64 `Math.sin` reduces exactly), where the reduction cancels most.
 */
function nearMultiples(start: number, keep: number): number[] {
  const first = bitsOf(start);
  const candidates: [number, number][] = [];
  for (let i = 0; i < 20000; i++) {
    const x = fromBits(first + i);
    candidates.push([Math.min(Math.abs(Math.sin(x)), Math.abs(Math.cos(x))), x]);
  }
  candidates.sort((a, b) => a[0] - b[0]);
  return candidates.slice(0, keep).flatMap(([, x]) => [x, -x]);
}

const SPECIAL = [
  0,
  -0,
  Infinity,
  -Infinity,
  NaN,
  3.4028234663852886e38,
  -3.4028234663852886e38,
  1.1754943508222875e-38,
  1e-30,
  // Either side of the kernel's branches: π/4 (no reduction), 8192 (Cody–Waite / Payne–Hanek).
  fromBits(bitsOf(Math.PI / 4) - 1),
  Math.fround(Math.PI / 4),
  fromBits(bitsOf(Math.PI / 4) + 1),
  fromBits(bitsOf(8192) - 1),
  8192,
  fromBits(bitsOf(8192) + 1),
  // Transformer positional encodings and rotary embeddings: positions times frequencies.
  1000,
  4095.5,
  12345.678,
  65535,
  99999.5,
  // Exact multiples of π/2 rounded to float32, and the floats nearest to multiples near
  // 1e4, 1e6, 1e20 and 1e30.
  ...[1, 2, 3, 4, 100, 6366, 6367, 636620, 636621].map((k) => Math.fround(k * Math.PI / 2)),
  ...nearMultiples(1e4, 6),
  ...nearMultiples(1e6, 6),
  ...nearMultiples(1e20, 6),
  ...nearMultiples(1e30, 6),
  // The float32s nearest to a multiple of π/2 in their binades (an exhaustive search per
  // binade), the first two the closest of all: |x| - nπ/2 is about 1.6e-9 and 2.0e-9.
  ...[
    7.729178919452902e28,
    21999384576,
    1.5458357838905804e29,
    43998769152,
    252.89820861816406,
    4.638183382783466e25,
    1522788990976,
    8.11762663906456e22,
    4.3865578967101227e33,
  ].flatMap((x) => [x, -x]),
];

function show(v: number): string {
  return Object.is(v, -0) ? "-0" : String(v);
}

async function compareWithCpu(d: Device, op: "sin" | "cos", xs: number[]): Promise<void> {
  const run = (device: Device) => {
    const t = tensor(xs, { device });
    return (op === "sin" ? t.sin() : t.cos()).data();
  };
  const [got, want] = await Promise.all([run(d), run(REF)]);
  const bad: string[] = [];
  for (let i = 0; i < xs.length; i++) {
    const g = got[i] as number;
    const w = want[i] as number;
    const ok = Number.isNaN(w)
      ? Number.isNaN(g)
      : w === 0
      ? Object.is(g, w)
      : !Number.isNaN(g) && Math.abs(ordinal(g) - ordinal(w)) <= 2;
    if (!ok) bad.push(`${op}(${show(xs[i])}) = ${show(g)}, cpu ${show(w)}`);
  }
  assert.equal(
    bad.length,
    0,
    `${bad.length} of ${xs.length} over 2 ulps on ${d}: ${bad.slice(0, 8).join("; ")}`,
  );
}

for (const op of ["sin", "cos"] as const) {
  backendTest(`${op} within 2 ulps of cpu for |x| log-uniform up to 3.4e38`, async (d) => {
    if (d.backend === "cpu") return;
    // A multiple of 4 (the vec4 path) and an odd length (the scalar path).
    await compareWithCpu(d, op, logUniform(8192, op === "sin" ? 1 : 2));
    await compareWithCpu(d, op, logUniform(1001, op === "sin" ? 3 : 4));
  });

  backendTest(`${op} of special values and near multiples of π/2`, async (d) => {
    if (d.backend === "cpu") return;
    await compareWithCpu(d, op, SPECIAL);
  });
}

backendTest("sin keeps -0 and maps NaN and ±inf to NaN", async (d) => {
  if (d.backend === "cpu") return;
  const x = tensor([-0, 0, NaN, Infinity, -Infinity], { device: d });
  const s = [...await x.sin().data()];
  const c = [...await x.cos().data()];
  assert.ok(Object.is(s[0], -0) && Object.is(s[1], 0), `sin(-0), sin(0) = ${s.slice(0, 2)}`);
  assert.deepEqual(c.slice(0, 2), [1, 1]);
  assert.ok([...s.slice(2), ...c.slice(2)].every(Number.isNaN), `non-finite: ${s} ${c}`);
});

backendTest(
  "sin(x) = x and cos(x) = 1 exactly for |x| below 2^-12, subnormals included",
  async (d) => {
    if (d.backend === "cpu") return;
    const limit = 2 ** -12;
    // Subnormals (the smallest, a middle one, the largest), the smallest normal, tiny normals, and
    // the float32s either side of 2^-12, where the guard hands over to the polynomials.
    const tiny = [
      fromBits(1),
      fromBits(0x00012345),
      fromBits(0x007fffff),
      fromBits(0x00800000),
      1e-30,
      1e-10,
      fromBits(bitsOf(limit) - 1),
    ].flatMap((x) => [Math.fround(x), -Math.fround(x)]);
    const edge = [limit, fromBits(bitsOf(limit) + 1)].flatMap((x) => [x, -x]);
    const x = tensor([...tiny, ...edge], { device: d });
    const [s, c] = await Promise.all([x.sin().data(), x.cos().data()]);
    for (let i = 0; i < tiny.length; i++) {
      assert.ok(Object.is(s[i], tiny[i]), `sin(${tiny[i]}) = ${s[i]}, expected x exactly`);
      assert.equal(c[i], 1, `cos(${tiny[i]}) = ${c[i]}, expected 1`);
    }
    // At and past 2^-12 the polynomials run: sin(x) is still x to within an ulp, cos(x) is 1 - x²/2.
    for (let i = tiny.length; i < tiny.length + edge.length; i++) {
      const xi = [...tiny, ...edge][i];
      assert.ok(Math.abs(ordinal(s[i] as number) - ordinal(Math.fround(Math.sin(xi)))) <= 1);
      assert.ok(
        Math.abs(ordinal(c[i] as number) - ordinal(Math.fround(Math.cos(xi)))) <= 1,
        `cos(${xi}) = ${c[i]}`,
      );
    }
    // The cpu reference agrees: PyTorch's sin of a subnormal is the subnormal itself.
    const ref = await tensor(tiny, { device: REF }).sin().data();
    assert.deepEqual([...ref], tiny);
  },
);
