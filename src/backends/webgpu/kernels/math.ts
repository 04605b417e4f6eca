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
