/**
 * The per-dim resampling matrices of `interpolate`'s `"bicubic"` and
 * `"area"` modes. Both separate into one [out, in] matrix per spatial dim
 * (a bicubic tap is the product of one cubic weight per dim; an adaptive
 * average box is the product of one 1-D box per dim), which `interpolate`
 * applies with `matmul` as it does the linear modes, so every backend runs
 * them and autograd gives PyTorch's backward (the transposed matrices).
 * @module
 */

/** PyTorch's cubic convolution constant (`upsample_bicubic2d`'s A). */
const A = -0.75;

/**
 * PyTorch 1.13's four cubic convolution weights of the neighbours at -1, 0,
 * 1 and 2 of a source position with fractional part `t`.
 */
function cubicWeights(t: number): [number, number, number, number] {
  const near = (x: number) => ((A + 2) * x - (A + 3)) * x * x + 1;
  const far = (x: number) => ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
  return [far(t + 1), near(t), near(1 - t), far(2 - t)];
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
  const round = dtype === "float32" ? Math.fround : (v: number) => v;
  const values = new Array<number>(out * inSize).fill(0);
  const scale = alignCorners
    ? (out > 1 ? round((inSize - 1) / (out - 1)) : 0)
    : round(factor !== undefined ? 1 / factor : inSize / out);
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
