/**
 * WGSL helper functions shared by several kernels (erf-based normal CDF, sin/cos).
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
 * `sinCos(x, cosine)`: sin or cos of a finite x (the caller maps NaN and
 * ±inf to NaN) within 1.4 ulp for every float32 (measured on llvmpipe over
 * 2e7 log-uniform |x| up to 3.4e38), -0 kept by sin. WGSL's own sin and cos
 * promise only an absolute 2^-11 on [-pi, pi] and nothing outside: llvmpipe
 * is off by more than 1 past |x| ~ 1.5e7, NVIDIA's loses about 1e-3 at
 * |x| = 1e4, and positional encodings and rotary embeddings take sin/cos of
 * 1e3..1e5. Every kernel that needs sin or cos includes this one.
 *
 * |x| below 2^-12 (subnormals included) gives x or 1 straight from x's bits,
 * as a flushing GPU would otherwise lose subnormals. Larger x is reduced to
 * r + low = |x| - n pi/2 (|r| <= pi/4, low a correction
 * below r's ulp), then Cephes' sinf/cosf minimax polynomials on
 * [-pi/4, pi/4] give sin(r) or cos(r) with low added to first order, picked
 * and signed by the quadrant n mod 4 (cos(x) = sin(|x| + pi/2)).
 * - Up to |x| = 8192, Cody–Waite: pi/2 split in three 10-bit constants
 *   (n c is exact for n < 2^14; the first two differences are exact), the
 *   third difference's rounding error recovered exactly (Fast2Sum) and the
 *   fourth, full-precision constant's product put into low.
 * - Beyond, those products stop being exact (measured: past 2^14 multiples
 *   of pi/2 the reduced argument is off by millions of its ulps), so
 *   Payne–Hanek: |x| = m 2^e (m a 24-bit integer), and |x| (2/pi) mod 4 is
 *   m times the 96 bits of 2/pi from bit e - 1 on (earlier bits only add
 *   multiples of 4), in u32 limbs with 32x32->64 products from 16-bit
 *   halves. Its 94 bits of fraction, normalized, times pi/4 in 64 bits
 *   (integers again) give r rounded to 24 bits and low.
 * Mesa's shader compiler reassociates float sums, which folds the error term
 * (r2 - r) - t to 0 and adds low to r before the polynomial's terms; like
 * random.ts's opq, trigOpaque passes those values through an XOR with a
 * zero (n >> 31, as n < 2^14) that the compiler cannot prove to be zero.
 */
export const SIN_COS_WGSL = `
fn trigMulWide(a: u32, b: u32) -> vec2<u32> {
  let a0 = a & 0xffffu;
  let a1 = a >> 16u;
  let b0 = b & 0xffffu;
  let b1 = b >> 16u;
  let p00 = a0 * b0;
  let p01 = a0 * b1;
  let p10 = a1 * b0;
  let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
  return vec2<u32>((mid << 16u) | (p00 & 0xffffu), a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}
// v itself (zero is 0), hidden from the compiler's float reassociation.
fn trigOpaque(v: f32, zero: u32) -> f32 {
  return bitcast<f32>(bitcast<u32>(v) ^ zero);
}
fn trigWindow(hi: u32, lo: u32, shift: u32) -> u32 {
  return select((hi << shift) | (lo >> (32u - shift)), hi, shift == 0u);
}
// (r, r's low part, n) for a = |x| > 8192: r + low = a - n pi/2.
fn trigReduceLarge(a: f32) -> vec3<f32> {
  let bits = bitcast<u32>(a);
  let m = (bits & 0x7fffffu) | 0x800000u;
  // Bit e - 1 of 2/pi (e = biased exponent - 150) is bit e + 30 of its 32-bit words preceded by
  // a zero word; four words from word s / 32 hold the 96 bits after a shift. Selects rather
  // than an indexed array: llvmpipe runs both sides of a branch, and a local array made every
  // sin 3 times slower even with no |x| > 8192.
  let s = (bits >> 23u) - 120u;
  let w = s >> 5u;
  var v = vec4<u32>(0u, 0xa2f9836eu, 0x4e441529u, 0xfc2757d1u);
  v = select(v, vec4<u32>(0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u), w == 1u);
  v = select(v, vec4<u32>(0x4e441529u, 0xfc2757d1u, 0xf534ddc0u, 0xdb629599u), w == 2u);
  v = select(v, vec4<u32>(0xfc2757d1u, 0xf534ddc0u, 0xdb629599u, 0x3c439041u), w == 3u);
  v = select(v, vec4<u32>(0xf534ddc0u, 0xdb629599u, 0x3c439041u, 0xfe5163abu), w == 4u);
  let sh = s & 31u;
  let w0 = trigWindow(v.x, v.y, sh);
  let w1 = trigWindow(v.y, v.z, sh);
  let w2 = trigWindow(v.z, v.w, sh);
  // The low 96 bits of m * (w0 w1 w2): 2 bits of quadrant, 94 of fraction.
  let p2 = trigMulWide(m, w2);
  let p1 = trigMulWide(m, w1);
  let r1 = p2.y + p1.x;
  let r2 = p1.y + m * w0 + select(0u, 1u, r1 < p1.x);
  var n = r2 >> 30u;
  var f2 = r2 & 0x3fffffffu;
  var f1 = r1;
  var f0 = p2.x;
  // A fraction of at least 1/2 rounds n up; its complement (off by 2^-94) is the distance.
  let negative = f2 >= 0x20000000u;
  if (negative) {
    n = n + 1u;
    f2 = ~f2 & 0x3fffffffu;
    f1 = ~f1;
    f0 = ~f0;
  }
  // Bits 1..96 of the fraction in hi, lo, g, then normalized so hi's top bit is set.
  var hi = (f2 << 2u) | (f1 >> 30u);
  var lo = (f1 << 2u) | (f0 >> 30u);
  var g = f0 << 2u;
  if (hi == 0u && lo == 0u) { return vec3<f32>(0.0, 0.0, f32(n & 3u)); }
  var k = countLeadingZeros(hi);
  if (hi == 0u) {
    k = 32u + countLeadingZeros(lo);
    hi = lo;
    lo = g;
    g = 0u;
  }
  let k32 = k & 31u;
  hi = trigWindow(hi, lo, k32);
  lo = trigWindow(lo, g, k32);
  // r = (hi lo) 2^(-64-k) pi/2, in integers too: the top 64 bits of (hi lo) (pi/4 2^64).
  let qh = 0xc90fdaa2u;
  let ql = 0x2168c235u;
  let a1 = trigMulWide(hi, qh);
  let b1 = trigMulWide(hi, ql).y;
  let c1 = trigMulWide(lo, qh).y;
  let u = a1.x + b1;
  var t0 = u + c1;
  var t1 = a1.y + select(0u, 1u, u < b1) + select(0u, 1u, t0 < c1);
  var e = -23 - i32(k);
  if (t1 < 0x80000000u) {
    t1 = (t1 << 1u) | (t0 >> 31u);
    t0 = t0 << 1u;
    e = e - 1;
  }
  // r = (t1 t0) 2^(e-8): its top 24 bits rounded to nearest, and the signed rest.
  let rest = ((t1 & 0xffu) << 24u) | (t0 >> 8u);
  let up = rest >= 0x80000000u;
  let rh = ldexp(f32((t1 >> 8u) + select(0u, 1u, up)), e);
  let rl = ldexp(f32(rest) - select(0.0, 4294967296.0, up), e - 32);
  let sign = select(1.0, -1.0, negative);
  return vec3<f32>(sign * rh, sign * rl, f32(n & 3u));
}
fn sinCos(x: f32, cosine: bool) -> f32 {
  let bits = bitcast<u32>(x);
  // |x| < 2^-12: sin(x) rounds to x and cos(x) to 1 in float32 (x^2/6 and x^2/2 are below half
  // an ulp), so the polynomials would give the same. Decided on the bits and returned from them:
  // a GPU that flushes subnormals in arithmetic (real ones do) would make sin of a subnormal x
  // ±0 through r + r zz P, where PyTorch returns x.
  if ((bits & 0x7fffffffu) < 0x39800000u) { return select(bitcast<f32>(bits), 1.0, cosine); }
  let a = bitcast<f32>(bits & 0x7fffffffu);
  var n = 0u;
  var r = a;
  var low = 0.0;
  if (a > 8192.0) {
    let reduced = trigReduceLarge(a);
    r = reduced.x;
    low = reduced.y;
    n = u32(reduced.z);
  } else if (a > 0.7853981633974483) {
    let q = floor(a * 0.6366197723675814 + 0.5);
    n = u32(q);
    let r2 = (a - q * 1.5703125) - q * 0.0004839897155761719;
    let t = q * -1.6298145055770874e-7;
    r = trigOpaque(r2 - t, n >> 31u);
    low = ((r2 - r) - t) - q * 6.07710062827671e-11;
  }
  if (cosine) { n = n + 1u; }
  let zz = r * r;
  let sinR = r + trigOpaque(low * (1.0 - 0.5 * zz) +
    r * zz * ((-1.9515295891e-4 * zz + 8.3321608736e-3) * zz - 1.6666654611e-1), n >> 31u);
  // Horner down to the 1: Cephes' 1 - zz/2 + zz^2 P came out 1.7 ulp off on llvmpipe, this 1.1.
  let cosR = trigOpaque((((2.443315711809948e-5 * zz - 1.388731625493765e-3) * zz +
    4.166664568298827e-2) * zz - 0.5) * zz - r * (1.0 - 0.16666667 * zz) * low, n >> 31u) + 1.0;
  let y = select(sinR, cosR, (n & 1u) == 1u);
  // sin is odd (sin(-0) = -0), cos even; quadrants 2 and 3 flip the sign.
  let negative = ((n & 2u) != 0u) != (!cosine && (bits >> 31u) == 1u);
  return select(y, -y, negative);
}
`;
