/**
 * WGSL helper functions shared by several kernels (erf-based normal CDF).
 * @module
 */

/**
 * `erfc1(x)` and `phi(x)` (the standard normal CDF). The Chebyshev-fitted
 * erfc below has a relative error under 1.2e-7 everywhere, so Φ keeps full
 * float32 relative accuracy in the far left tail where `0.5 * (1 + erf)`
 * would cancel to nothing.
 */
export const NORMAL_CDF_WGSL = `
fn erfc1(x: f32) -> f32 {
  let z = abs(x);
  let t = 1.0 / (1.0 + 0.5 * z);
  let p = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
    t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
    t * (-0.82215223 + t * 0.17087277))))))));
  let r = t * exp(-z * z + p);
  return select(2.0 - r, r, x >= 0.0);
}
fn phi(x: f32) -> f32 {
  return 0.5 * erfc1(-0.7071067811865476 * x);
}
`;

/**
 * `erf(x)`: the Taylor series below |x| = 0.5 (where `1 - erfc` would lose
 * the leading digits), `1 - erfc1(x)` beyond; relative error under 2e-7.
 */
export const ERF_WGSL = NORMAL_CDF_WGSL + `
fn erf(x: f32) -> f32 {
  if (abs(x) < 0.5) {
    let z = x * x;
    return x * (1.1283791670955126 + z * (-0.37612638903183754 + z * (0.11283791670955126 +
      z * (-0.026866170645131252 + z * (0.005223977625442188 + z * -0.0008548327023450852)))));
  }
  return 1.0 - erfc1(x);
}
`;

/**
 * `geluDerivative(x)`: `Φ(x) + x φ(x)` (NaN stays NaN); needs
 * {@link NORMAL_CDF_WGSL} and `isNan`.
 */
export const GELU_DERIVATIVE_WGSL = NORMAL_CDF_WGSL + `
fn geluDerivative(x: f32) -> f32 {
  if (isNan(x)) { return x; }
  return phi(x) + x * 0.3989422804014327 * exp(-0.5 * x * x);
}
`;

/**
 * `sinCos(x, cosine)`: sin or cos of a finite x to about 1 ulp for
 * |x| <= 8192 (Cephes' sinf: x reduced by a multiple of pi/4 split in three
 * parts whose products with the multiple are exact, then a degree-7 sine
 * or degree-8 cosine polynomial on [-pi/4, pi/4]). WGSL's own sin and cos
 * promise only an absolute 2^-11 on [-pi, pi]: NVIDIA's Vulkan driver
 * gives sin(1e-5) with under 3 correct digits. Beyond 8192 the reduction
 * loses bits, so the driver's functions take over there.
 */
export const SIN_COS_WGSL = `
fn sinCos(x: f32, cosine: bool) -> f32 {
  let a = abs(x);
  if (a > 8192.0) { return select(sin(x), cos(x), cosine); }
  var j = u32(a * 1.2732395447351628);
  var y = f32(j);
  if ((j & 1u) == 1u) { j = j + 1u; y = y + 1.0; }
  j = j & 7u;
  var negative = x < 0.0 && !cosine;
  if (j > 3u) { negative = !negative; j = j - 4u; }
  if (cosine && j > 1u) { negative = !negative; }
  let z = ((a - y * 0.78515625) - y * 2.4187564849853515625e-4) - y * 3.77489497744594108e-8;
  let zz = z * z;
  let sinPoly = ((-1.9515295891e-4 * zz + 8.3321608736e-3) * zz - 1.6666654611e-1) * zz * z + z;
  let cosPoly = ((2.443315711809948e-5 * zz - 1.388731625493765e-3) * zz + 4.166664568298827e-2) *
    zz * zz - 0.5 * zz + 1.0;
  let useCos = select(j == 1u || j == 2u, j == 0u || j == 3u, cosine);
  let r = select(sinPoly, cosPoly, useCos);
  return select(r, -r, negative);
}
`;
