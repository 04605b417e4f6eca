/**
 * Counter-based random numbers, exactly the contract's lowbias32 scheme.
 *
 * `uniform` evaluates `low + (high - low) * u` in double-float arithmetic
 * (error-free products and sums of f32 pairs) before the final rounding, so
 * the result matches a CPU that computes the formula in float64 and rounds
 * once to float32, not merely to within an ulp.
 * @module
 */

import { lowbias32, type RandomArgs } from "../../backend.ts";
import { f32Bits, groups2d, type Runtime } from "../runtime.ts";
import { main1d, PARAMS_WGSL, storage, wgslType } from "../wgsl.ts";
import { SIN_COS_WGSL } from "./math.ts";

const WG = 256;

const COMMON = `
fn h(x0: u32) -> u32 {
  var x = x0;
  x ^= x >> 16u;
  x *= 0x7feb352du;
  x ^= x >> 15u;
  x *= 0x846ca68bu;
  x ^= x >> 16u;
  return x;
}
fn uni(j: u32, key: u32) -> f32 {
  return f32(h(j ^ key) >> 8u) * 5.9604644775390625e-8;
}
`;

// Shader compilers may simplify (a + b) - a to b, which erases the rounding
// errors these functions exist to capture; opq() passes a value through an
// XOR with a runtime zero (parameter 6), which no optimiser can see through.
// cos(2πu) for u in [0, 1), folded with exact subtractions (u is a multiple
// of 2^-24) to an argument of at most π/4, where sin and cos keep their
// relative accuracy; cos(2πu) itself loses it near its zeros, where a 1-ulp
// error in 2πu is a large relative error in the result. WGSL's builtins
// promise only an absolute 2^-11 even there, so math.ts's sinCos does it.
const COS_2PI = SIN_COS_WGSL + `
fn cos2pi(u: f32) -> f32 {
  var x = select(u, 1.0 - u, u > 0.5);
  var sgn = 1.0;
  if (x > 0.25) { x = 0.5 - x; sgn = -1.0; }
  if (x > 0.125) { return sgn * sinCos(6.283185307179586 * (0.25 - x), false); }
  return sgn * sinCos(6.283185307179586 * x, true);
}
`;

const DOUBLE_FLOAT = `
fn opq(x: f32) -> f32 { return bitcast<f32>(bitcast<u32>(x) ^ pu(6u)); }
fn split(a: f32) -> vec2<f32> {
  let c = opq(4097.0 * a);
  let hi = opq(c - (c - a));
  return vec2<f32>(hi, a - hi);
}
fn twoProd(a: f32, b: f32) -> vec2<f32> {
  let p = opq(a * b);
  let sa = split(a);
  let sb = split(b);
  let e = ((sa.x * sb.x - p) + sa.x * sb.y + sa.y * sb.x) + sa.y * sb.y;
  return vec2<f32>(p, e);
}
fn twoSum(a: f32, b: f32) -> vec2<f32> {
  let s = opq(a + b);
  let bb = opq(s - a);
  return vec2<f32>(s, (a - (s - bb)) + (b - bb));
}
`;

/** Records `out = random(layout)`. */
export function random(rt: Runtime, layout: RandomArgs<GPUBuffer>): void {
  const out = layout.out;
  if (wgslType(layout.dtype) !== "f32") {
    throw new Error(`webgpu random does not support dtype ${layout.dtype}`);
  }
  const { numel, kind, a, b } = layout;
  if (numel === 0) return;
  const key = lowbias32(layout.seed);
  let params: number[];
  let body: string;
  if (kind === "uniform") {
    // low and (high - low) as f32 pairs (hi + lo) carrying ~48 bits each.
    const range = b - a;
    const lowHi = Math.fround(a);
    const rangeHi = Math.fround(range);
    params = [
      numel,
      key,
      f32Bits(lowHi),
      f32Bits(a - lowHi),
      f32Bits(rangeHi),
      f32Bits(range - rangeHi),
      0,
    ];
    body = `  let uu = uni(idx, pu(1u));
  let p = twoProd(pf(4u), uu);
  let s = twoSum(pf(2u), p.x);
  out[idx] = s.x + (s.y + (p.y + (pf(5u) * uu + pf(3u))));`;
  } else {
    params = [numel, key, f32Bits(a), f32Bits(b)];
    body = `  let u1 = uni(2u * idx, pu(1u));
  let u2 = uni(2u * idx + 1u, pu(1u));
  out[idx] = pf(2u) + pf(3u) * sqrt(-2.0 * log(1.0 - u1)) * cos2pi(u2);`;
  }
  rt.dispatch({
    name: kind === "uniform" ? "random.uniform" : "random.normal",
    key: `random_${kind}`,
    wgsl: () =>
      PARAMS_WGSL + storage(1, "out", "f32", true) + COMMON +
      (kind === "uniform" ? DOUBLE_FLOAT : COS_2PI) + main1d(WG) +
      `${body}
}
`,
    signature: "w",
    buffers: [out],
    params,
    groups: groups2d(Math.ceil(numel / WG)),
  });
}
