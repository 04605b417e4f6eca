/**
 * The per-dim resampling matrices of `interpolate`'s `"bicubic"` and
 * `"area"` modes, and of `"bilinear"`/`"bicubic"` with `antialias`. All
 * separate into one [out, in] matrix per spatial dim (a bicubic tap is the
 * product of one cubic weight per dim; an adaptive average box is the
 * product of one 1-D box per dim; the antialiasing filters are separable by
 * construction), which `interpolate` applies with `matmul` as it does the
 * linear modes, so every backend runs them and autograd gives PyTorch's
 * backward (the transposed matrices).
 * @module
 */

/** PyTorch's cubic convolution constant (`upsample_bicubic2d`'s A). */
const A = -0.75;

/** The cubic convolution kernel at |x| < 1 (PyTorch's `cubic_convolution1`). */
function cubicNear(x: number, a: number): number {
  return ((a + 2) * x - (a + 3)) * x * x + 1;
}

/**
 * What every one-dim resampling matrix starts from: rounding to the dtype
 * (PyTorch's float32 kernels round positions and weights), a zero [out, in]
 * matrix, and PyTorch's source step: (in - 1) / (out - 1) with
 * `alignCorners`, else 1 / factor when a factor was given, else in / out.
 */
export function resampleSetup(
  inSize: number,
  out: number,
  factor: number | undefined,
  alignCorners: boolean,
  dtype: string,
): { round: (v: number) => number; values: number[]; scale: number } {
  const round = dtype === "float32" ? Math.fround : (v: number) => v;
  const scale = alignCorners
    ? (out > 1 ? round((inSize - 1) / (out - 1)) : 0)
    : round(factor !== undefined ? 1 / factor : inSize / out);
  return { round, values: new Array<number>(out * inSize).fill(0), scale };
}

/** The cubic convolution kernel at 1 <= |x| < 2 (PyTorch's `cubic_convolution2`). */
function cubicFar(x: number, a: number): number {
  return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
}

/**
 * PyTorch 1.13's four cubic convolution weights of the neighbours at -1, 0,
 * 1 and 2 of a source position with fractional part `t`.
 */
function cubicWeights(t: number): [number, number, number, number] {
  return [cubicFar(t + 1, A), cubicNear(t, A), cubicNear(1 - t, A), cubicFar(2 - t, A)];
}

/**
 * The [out, in] matrix, row-major, of PyTorch 1.13's bicubic interpolation
 * along one dim: source position scale · i with `alignCorners` (scale =
 * (in - 1) / (out - 1)), else scale · (i + 0.5) - 0.5 with no clamp (scale
 * = 1 / factor, or in / out); the four taps around it get the cubic weights
 * (A = -0.75), and a tap outside [0, in) reads the nearest border element,
 * as PyTorch's clamped access. Positions and weights round to the dtype as
 * PyTorch's float32 kernels compute them.
 */
export function bicubicMatrix(
  inSize: number,
  out: number,
  factor: number | undefined,
  alignCorners: boolean,
  dtype: string,
): number[] {
  const { round, values, scale } = resampleSetup(inSize, out, factor, alignCorners, dtype);
  for (let i = 0; i < out; i++) {
    const src = alignCorners ? round(scale * i) : round(round(scale * (i + 0.5)) - 0.5);
    const i0 = Math.floor(src);
    const weights = cubicWeights(round(src - i0));
    for (const [k, w] of weights.entries()) {
      const j = Math.min(Math.max(i0 - 1 + k, 0), inSize - 1);
      values[i * inSize + j] += round(w);
    }
  }
  return values;
}

/**
 * The [out, in] matrix, row-major, of adaptive average pooling along one
 * dim (PyTorch's `"area"` mode): output element i averages the inputs
 * [floor(i · in / out), ceil((i + 1) · in / out)).
 */
export function areaMatrix(inSize: number, out: number): number[] {
  const values = new Array<number>(out * inSize).fill(0);
  for (let i = 0; i < out; i++) {
    const start = Math.floor((i * inSize) / out);
    const end = Math.ceil(((i + 1) * inSize) / out);
    for (let j = start; j < end; j++) values[i * inSize + j] = 1 / (end - start);
  }
  return values;
}

/**
 * PIL's filters that PyTorch 1.13's antialiasing kernels use: the triangle
 * for `"bilinear"` and the cubic with A = -0.5 (not -0.75) for `"bicubic"`.
 */
function antialiasFilter(mode: "bilinear" | "bicubic", x: number): number {
  const t = Math.abs(x);
  if (mode === "bilinear") return t < 1 ? 1 - t : 0;
  if (t < 1) return cubicNear(t, -0.5);
  return t < 2 ? cubicFar(t, -0.5) : 0;
}

/**
 * The [out, in] matrix, row-major, of PyTorch 1.13's antialiased
 * `"bilinear"`/`"bicubic"` interpolation along one dim (`_upsample_*_aa`,
 * PIL's separable resampling). Output element i is centred on
 * c = scale · (i + 0.5) (scale = (in - 1) / (out - 1) with `alignCorners`,
 * else 1 / factor, or in / out); when downsampling (scale >= 1) the filter
 * is stretched by scale, its support (1 for bilinear, 2 for bicubic) with
 * it, so every input element inside contributes; the taps
 * [trunc(c - support + 0.5), trunc(c + support + 0.5)) that fall inside the
 * input get filter((j - c + 0.5) / scale), normalized to sum to 1 (the
 * border has no clamped taps: the weights that remain are rescaled). The
 * scale, centre and weights round to the dtype as PyTorch's float32 kernels
 * compute them.
 */
export function antialiasMatrix(
  mode: "bilinear" | "bicubic",
  inSize: number,
  out: number,
  factor: number | undefined,
  alignCorners: boolean,
  dtype: string,
): number[] {
  const { round, values, scale } = resampleSetup(inSize, out, factor, alignCorners, dtype);
  const taps = mode === "bilinear" ? 2 : 4;
  const support = round(scale >= 1 ? taps * 0.5 * scale : taps * 0.5);
  const invScale = scale >= 1 ? round(1 / scale) : 1;
  for (let i = 0; i < out; i++) {
    const center = round(scale * (i + 0.5));
    const start = Math.max(Math.trunc(center - support + 0.5), 0);
    const end = Math.min(Math.trunc(center + support + 0.5), inSize);
    const weights: number[] = [];
    let total = 0;
    for (let j = start; j < end; j++) {
      const w = round(antialiasFilter(mode, round(round(j - center + 0.5) * invScale)));
      weights.push(w);
      total = round(total + w);
    }
    for (const [k, w] of weights.entries()) {
      values[i * inSize + start + k] = total !== 0 ? round(w / total) : w;
    }
  }
  return values;
}
