/**
 * Parameter initialisation, as `torch.nn.init`: each function overwrites a
 * tensor in place (without recording gradients) and returns it. Fans and
 * gains follow PyTorch's rules, so a layer initialised here has PyTorch's
 * distribution; the random numbers come from the global seeded stream
 * (`manualSeed`).
 *
 * @example
 * ```ts
 * import { nn, zeros } from "@multigrad/core";
 * const w = zeros([64, 3, 3, 3]);
 * nn.init.kaimingNormal_(w, { mode: "fan_out", nonlinearity: "relu" }); // std √2 / √(64·9)
 * ```
 * @module
 */

import { noGrad } from "../autograd.ts";
import { isFloat } from "../dtype.ts";
import {
  full,
  nextSeed,
  normal as normalTensor,
  tensor as tensorFrom,
  uniform as uniformTensor,
} from "../ops/factory.ts";
import { formatShape } from "../shape.ts";
import { tidy } from "../storage.ts";
import { device } from "../device.ts";
import { qr } from "../linalg/qr.ts";
import { eye } from "../ops_composite/mod.ts";
import { Tensor } from "../tensor.ts";

/**
 * A nonlinearity {@link calculateGain} knows, by PyTorch's name (the
 * camelCase spellings `leakyRelu`, `convTranspose2d` are accepted too).
 */
export type Nonlinearity =
  | "linear"
  | "conv1d"
  | "conv2d"
  | "conv3d"
  | "conv_transpose1d"
  | "conv_transpose2d"
  | "conv_transpose3d"
  | "convTranspose1d"
  | "convTranspose2d"
  | "convTranspose3d"
  | "sigmoid"
  | "tanh"
  | "relu"
  | "leaky_relu"
  | "leakyRelu"
  | "selu";

/** Which fan the Kaiming initialisations scale by: PyTorch's `"fan_in"` / `"fan_out"` (or camelCase). */
export type FanMode = "fan_in" | "fan_out" | "fanIn" | "fanOut";

const LINEAR_GAIN = new Set([
  "linear",
  "conv1d",
  "conv2d",
  "conv3d",
  "conv_transpose1d",
  "conv_transpose2d",
  "conv_transpose3d",
  "convTranspose1d",
  "convTranspose2d",
  "convTranspose3d",
  "sigmoid",
]);

/**
 * The recommended gain for `nonlinearity`, as `torch.nn.init.calculate_gain`:
 * 1 for linear, convolutions and sigmoid, 5/3 for tanh, √2 for relu,
 * √(2 / (1 + slope²)) for leaky_relu (`param` is the negative slope, default
 * 0.01) and 3/4 for selu.
 */
export function calculateGain(nonlinearity: Nonlinearity, param?: number): number {
  if (LINEAR_GAIN.has(nonlinearity)) return 1;
  switch (nonlinearity) {
    case "tanh":
      return 5 / 3;
    case "relu":
      return Math.sqrt(2);
    case "leaky_relu":
    case "leakyRelu": {
      if (param !== undefined && (typeof param !== "number" || !Number.isFinite(param))) {
        throw new TypeError(`calculateGain: negative_slope ${String(param)} is not a valid number`);
      }
      const slope = param ?? 0.01;
      return Math.sqrt(2 / (1 + slope ** 2));
    }
    case "selu":
      return 3 / 4;
    default:
      throw new RangeError(
        `calculateGain: unsupported nonlinearity ${
          JSON.stringify(nonlinearity)
        } (expected one of linear, conv1d, conv2d, conv3d, conv_transpose1d..3d, sigmoid, tanh, relu, leaky_relu, selu)`,
      );
  }
}

function checkTensor(op: string, t: unknown, float: boolean): asserts t is Tensor {
  if (!(t instanceof Tensor)) {
    throw new TypeError(
      `${op}: expected a Tensor, got ${t === null ? "null" : typeof t}`,
    );
  }
  if (t.storage.disposed) {
    throw new Error(`${op}: the tensor of shape ${formatShape(t.shape)} was disposed`);
  }
  if (float && !isFloat(t.dtype)) {
    throw new TypeError(
      `${op}: needs a floating-point tensor, got ${t.dtype} of shape ${formatShape(t.shape)}`,
    );
  }
}

/**
 * `[fanIn, fanOut]` of a weight, as PyTorch's `_calculate_fan_in_and_fan_out`:
 * dim 1 (input channels) and dim 0 (output channels), each times the
 * receptive field (the product of dims 2..). Layers use `fanIn` for their
 * bias bound.
 */
export function calculateFanInAndFanOut(tensor: Tensor): [number, number] {
  checkTensor("calculateFanInAndFanOut", tensor, false);
  const shape = tensor.shape;
  if (shape.length < 2) {
    throw new RangeError(
      `calculateFanInAndFanOut: fan in and fan out can not be computed for a tensor with fewer than 2 dimensions (got shape ${
        formatShape(shape)
      })`,
    );
  }
  const receptiveField = shape.slice(2).reduce((a, b) => a * b, 1);
  return [shape[1] * receptiveField, shape[0] * receptiveField];
}

/** Overwrites `t` with `make()`'s values, without recording a graph; the temporary is freed. */
function fill(t: Tensor, make: () => Tensor): Tensor {
  noGrad(() => tidy(() => t._assign(make())));
  return t;
}

function checkFinite(op: string, what: string, value: number): void {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new RangeError(`${op}: ${what} must be a finite number, got ${String(value)}`);
  }
}

/** Options of {@link uniform_}. */
export interface UniformOptions {
  /** Lower bound (default 0). */
  a?: number;
  /** Upper bound (default 1). */
  b?: number;
}

/** Fills `tensor` with U(a, b), as `torch.nn.init.uniform_`. */
export function uniform_(tensor: Tensor, options: UniformOptions = {}): Tensor {
  checkTensor("uniform_", tensor, true);
  const a = options.a ?? 0;
  const b = options.b ?? 1;
  checkFinite("uniform_", "a", a);
  checkFinite("uniform_", "b", b);
  if (a > b) throw new RangeError(`uniform_: expects a <= b, got a=${a}, b=${b}`);
  return fill(
    tensor,
    () => uniformTensor([...tensor.shape], a, b, { dtype: tensor.dtype, device: tensor.device }),
  );
}

/** Options of {@link normal_}. */
export interface NormalOptions {
  /** Mean (default 0). */
  mean?: number;
  /** Standard deviation (default 1). */
  std?: number;
}

/** Fills `tensor` with N(mean, std²), as `torch.nn.init.normal_`. */
export function normal_(tensor: Tensor, options: NormalOptions = {}): Tensor {
  checkTensor("normal_", tensor, true);
  const mean = options.mean ?? 0;
  const std = options.std ?? 1;
  checkFinite("normal_", "mean", mean);
  checkFinite("normal_", "std", std);
  if (std < 0) throw new RangeError(`normal_: expects std >= 0, got ${std}`);
  return fill(
    tensor,
    () =>
      normalTensor([...tensor.shape], mean, std, { dtype: tensor.dtype, device: tensor.device }),
  );
}

/** Fills `tensor` with `value`, as `torch.nn.init.constant_`. */
export function constant_(tensor: Tensor, value: number): Tensor {
  checkTensor("constant_", tensor, false);
  if (typeof value !== "number") {
    throw new TypeError(`constant_: value must be a number, got ${typeof value}`);
  }
  return fill(
    tensor,
    () => full([...tensor.shape], value, { dtype: tensor.dtype, device: tensor.device }),
  );
}

/** Fills `tensor` with zeros, as `torch.nn.init.zeros_`. */
export function zeros_(tensor: Tensor): Tensor {
  return constant_(tensor, 0);
}

/** Fills `tensor` with ones, as `torch.nn.init.ones_`. */
export function ones_(tensor: Tensor): Tensor {
  return constant_(tensor, 1);
}

/** Options of {@link xavierUniform_} and {@link xavierNormal_}. */
export interface XavierOptions {
  /** Scaling factor (default 1; see {@link calculateGain}). */
  gain?: number;
}

function xavierStd(op: string, tensor: Tensor, gain: number): number {
  checkTensor(op, tensor, true);
  checkFinite(op, "gain", gain);
  const [fanIn, fanOut] = calculateFanInAndFanOut(tensor);
  if (fanIn + fanOut === 0) {
    throw new RangeError(`${op}: tensor of shape ${formatShape(tensor.shape)} has no fan`);
  }
  return gain * Math.sqrt(2 / (fanIn + fanOut));
}

/**
 * Glorot initialisation: U(−a, a) with a = gain·√(6 / (fanIn + fanOut)), as
 * `torch.nn.init.xavier_uniform_`.
 */
export function xavierUniform_(tensor: Tensor, options: XavierOptions = {}): Tensor {
  const bound = Math.sqrt(3) * xavierStd("xavierUniform_", tensor, options.gain ?? 1);
  return uniform_(tensor, { a: -bound, b: bound });
}

/**
 * Glorot initialisation: N(0, std²) with std = gain·√(2 / (fanIn + fanOut)),
 * as `torch.nn.init.xavier_normal_`.
 */
export function xavierNormal_(tensor: Tensor, options: XavierOptions = {}): Tensor {
  return normal_(tensor, { mean: 0, std: xavierStd("xavierNormal_", tensor, options.gain ?? 1) });
}

/** Options of {@link kaimingUniform_} and {@link kaimingNormal_}. */
export interface KaimingOptions {
  /** Negative slope of the rectifier that follows (leaky_relu only; default 0). */
  a?: number;
  /** `"fan_in"` (default) keeps the forward pass's variance, `"fan_out"` the backward's. */
  mode?: FanMode;
  /** The nonlinearity that follows (default `"leaky_relu"`). */
  nonlinearity?: Nonlinearity;
}

/** std = gain / √fan, or null for a zero-element tensor (which PyTorch leaves untouched). */
function kaimingStd(op: string, tensor: Tensor, options: KaimingOptions): number | null {
  checkTensor(op, tensor, true);
  const mode = options.mode ?? "fan_in";
  if (!["fan_in", "fan_out", "fanIn", "fanOut"].includes(mode)) {
    throw new RangeError(
      `${op}: mode ${JSON.stringify(mode)} not supported, please use one of "fan_in", "fan_out"`,
    );
  }
  const a = options.a ?? 0;
  checkFinite(op, "a", a);
  if (tensor.shape.includes(0)) return null;
  const [fanIn, fanOut] = calculateFanInAndFanOut(tensor);
  const fan = mode === "fan_in" || mode === "fanIn" ? fanIn : fanOut;
  return calculateGain(options.nonlinearity ?? "leaky_relu", a) / Math.sqrt(fan);
}

/**
 * He initialisation: U(−bound, bound) with bound = gain·√(3 / fan), as
 * `torch.nn.init.kaiming_uniform_`. `Linear` and convolutions use it with
 * `a = √5`, which gives bound 1/√fanIn. A zero-element tensor is left as it
 * is, as in PyTorch.
 */
export function kaimingUniform_(tensor: Tensor, options: KaimingOptions = {}): Tensor {
  const std = kaimingStd("kaimingUniform_", tensor, options);
  if (std === null) return tensor;
  const bound = Math.sqrt(3) * std;
  return uniform_(tensor, { a: -bound, b: bound });
}

/**
 * He initialisation: N(0, std²) with std = gain / √fan, as
 * `torch.nn.init.kaiming_normal_`. A zero-element tensor is left as it is.
 */
export function kaimingNormal_(tensor: Tensor, options: KaimingOptions = {}): Tensor {
  const std = kaimingStd("kaimingNormal_", tensor, options);
  if (std === null) return tensor;
  return normal_(tensor, { mean: 0, std });
}

// ---- initialisations computed on the host ----
//
// orthogonal_, truncNormal_ and sparse_ need a QR, an inverse normal CDF or per-column draws:
// they draw in float64 on the host, from a generator seeded by the global stream (so manualSeed
// repeats them), then copy the values to the tensor's device and dtype.

/** Uniform doubles in [0, 1) (mulberry32, two draws for 53 bits), seeded from the global stream. */
function hostUniform(): () => number {
  let state = nextSeed() >>> 0;
  const next32 = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 15), z | 1);
    z ^= z + Math.imul(z ^ (z >>> 7), z | 61);
    return (z ^ (z >>> 14)) >>> 0;
  };
  return () => ((next32() >>> 5) * 67108864 + (next32() >>> 6)) / 9007199254740992;
}

/** Standard normal doubles (Box-Muller) from {@link hostUniform}. */
function hostNormal(): () => number {
  const u = hostUniform();
  let spare: number | null = null;
  return () => {
    if (spare !== null) {
      const out = spare;
      spare = null;
      return out;
    }
    const r = Math.sqrt(-2 * Math.log(1 - u()));
    const theta = 2 * Math.PI * u();
    spare = r * Math.sin(theta);
    return r * Math.cos(theta);
  };
}

function fromHostValues(tensor: Tensor, values: Float64Array): Tensor {
  return fill(
    tensor,
    () =>
      tensorFrom(values, { shape: [...tensor.shape], dtype: tensor.dtype, device: tensor.device }),
  );
}

function numelOf(tensor: Tensor): number {
  return tensor.shape.reduce((a, b) => a * b, 1);
}

/** Options of {@link orthogonal_}. */
export interface OrthogonalOptions {
  /** Scaling factor (default 1). */
  gain?: number;
}

/**
 * Fills `tensor` with a (semi-)orthogonal matrix, as `torch.nn.init.orthogonal_`: the tensor is
 * viewed as [size(0), numel / size(0)], and its rows (when fewer than its columns) or its columns
 * are orthonormal, times `gain`. The matrix is uniformly distributed over the orthogonal ones
 * (Haar), as PyTorch's QR of a normal matrix with the signs of R's diagonal; the normal matrix is
 * drawn in float64 on the host and decomposed on the cpu device, so the numbers differ from
 * PyTorch's.
 */
export function orthogonal_(tensor: Tensor, options: OrthogonalOptions = {}): Tensor {
  checkTensor("orthogonal_", tensor, true);
  const gain = options.gain ?? 1;
  checkFinite("orthogonal_", "gain", gain);
  if (tensor.ndim < 2) {
    throw new RangeError(
      `orthogonal_: only tensors with 2 or more dimensions are supported, got shape ${
        formatShape(tensor.shape)
      }`,
    );
  }
  const numel = numelOf(tensor);
  if (numel === 0) return tensor;
  const rows = tensor.shape[0];
  const cols = numel / rows;
  // Orthonormal columns of a [n, k] matrix with n >= k, transposed at the end when rows < cols.
  const n = Math.max(rows, cols);
  const k = Math.min(rows, cols);
  const normal = hostNormal();
  const drawn = new Float64Array(n * k);
  for (let j = 0; j < k; j++) for (let i = 0; i < n; i++) drawn[i * k + j] = normal();
  // PyTorch's recipe: Q of the normal matrix's QR, its columns times the signs of R's diagonal.
  // On the cpu device, whose qr kernel runs LAPACK's blocked algorithm in float64 (Gram-Schmidt
  // in TypeScript took 4.6 s at 1024 x 1024).
  return fill(tensor, () => {
    const host = device("cpu");
    const [q, r] = qr(tensorFrom(drawn, { shape: [n, k], dtype: "float64", device: host }));
    const diagonal = r.mul(eye(k, { dtype: "float64", device: host })).sum(-1);
    const columns = q.mul(diagonal.ge(0).mul(2 * gain).sub(gain));
    const out = rows >= cols ? columns : columns.transpose(0, 1);
    return out.reshape([...tensor.shape]).to(tensor.dtype).to(tensor.device);
  });
}

/** Options of {@link truncNormal_}. */
export interface TruncNormalOptions {
  /** Mean of the normal before truncation (default 0). */
  mean?: number;
  /** Standard deviation of the normal before truncation (default 1). */
  std?: number;
  /** Lower cut-off (default −2). */
  a?: number;
  /** Upper cut-off (default 2). */
  b?: number;
}

/** erfc(x) with relative error below 1.2e-7 everywhere (Numerical Recipes' `erfcc`). */
function erfc(x: number): number {
  const z = Math.abs(x);
  const t = 1 / (1 + 0.5 * z);
  const r = t * Math.exp(
    -z * z - 1.26551223 +
      t * (1.00002368 +
          t * (0.37409196 +
              t * (0.09678418 +
                  t * (-0.18628806 +
                      t * (0.27886807 +
                          t *
                            (-1.13520398 +
                              t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))),
  );
  return x >= 0 ? r : 2 - r;
}

/** The standard normal CDF. */
function normalCdf(x: number): number {
  return 0.5 * erfc(-x / Math.SQRT2);
}

/** The standard normal quantile (Acklam's rational approximation, relative error 1.2e-9). */
function normalQuantile(p: number): number {
  if (p <= 0) return -Infinity;
  if (p >= 1) return Infinity;
  const a = [
    -39.69683028665376,
    220.9460984245205,
    -275.9285104469687,
    138.357751867269,
    -30.66479806614716,
    2.506628277459239,
  ];
  const b = [
    -54.47609879822406,
    161.5858368580409,
    -155.6989798598866,
    66.80131188771972,
    -13.28068155288572,
  ];
  const c = [
    -0.007784894002430293,
    -0.3223964580411365,
    -2.400758277161838,
    -2.549732539343734,
    4.374664141464968,
    2.938163982698783,
  ];
  const d = [0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416];
  const low = 0.02425;
  if (p < low || p > 1 - low) {
    const q = Math.sqrt(-2 * Math.log(p < low ? p : 1 - p));
    const x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
      ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
    return p < low ? x : -x;
  }
  const q = p - 0.5;
  const r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
    (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

/**
 * Fills `tensor` with N(mean, std²) truncated to [a, b], as `torch.nn.init.trunc_normal_`, by the
 * inverse CDF as PyTorch (U(Φ(α), Φ(β)) through Φ⁻¹, clamped to [a, b]). An interval far in a
 * tail is sampled on its mirror image near 0, where Φ keeps its precision, so the draw stays
 * right where PyTorch's warns that it may not be.
 */
export function truncNormal_(tensor: Tensor, options: TruncNormalOptions = {}): Tensor {
  checkTensor("truncNormal_", tensor, true);
  const mean = options.mean ?? 0;
  const std = options.std ?? 1;
  const a = options.a ?? -2;
  const b = options.b ?? 2;
  checkFinite("truncNormal_", "mean", mean);
  checkFinite("truncNormal_", "std", std);
  for (const [name, v] of [["a", a], ["b", b]] as const) {
    if (typeof v !== "number" || Number.isNaN(v)) {
      throw new RangeError(`truncNormal_: ${name} must be a number, got ${String(v)}`);
    }
  }
  if (std < 0) throw new RangeError(`truncNormal_: expects std >= 0, got ${std}`);
  if (a > b) throw new RangeError(`truncNormal_: expects a <= b, got a=${a}, b=${b}`);
  const numel = numelOf(tensor);
  const out = new Float64Array(numel);
  if (std === 0) {
    out.fill(Math.min(Math.max(mean, a), b));
    return fromHostValues(tensor, out);
  }
  const alpha = (a - mean) / std;
  const beta = (b - mean) / std;
  // Mirror an interval right of 0 to the left, where the CDF is small and exact.
  const flip = alpha > 0;
  const lo = normalCdf(flip ? -beta : alpha);
  const hi = normalCdf(flip ? -alpha : beta);
  const u = hostUniform();
  for (let i = 0; i < numel; i++) {
    let z = normalQuantile(lo + (hi - lo) * u());
    if (flip) z = -z;
    out[i] = Math.min(Math.max(mean + std * z, a), b);
  }
  return fromHostValues(tensor, out);
}

/** Options of {@link dirac_}. */
export interface DiracOptions {
  /** Groups of output channels, each the identity on its inputs (default 1). */
  groups?: number;
}

/**
 * Fills a [out, in, ...kernel] convolution weight (3 to 5 dimensions) with the Dirac delta, as
 * `torch.nn.init.dirac_`: in each of `groups` groups of output channels, output channel d of the
 * group is 1 at input channel d and the kernel's centre (index ⌊k/2⌋), for d below
 * min(out / groups, in); every other entry is 0. A convolution with it (and no bias) passes its
 * input channels through, so it starts as the identity.
 */
export function dirac_(tensor: Tensor, options: DiracOptions = {}): Tensor {
  checkTensor("dirac_", tensor, false);
  const groups = options.groups ?? 1;
  const shape = tensor.shape;
  if (shape.length < 3 || shape.length > 5) {
    throw new RangeError(
      `dirac_: only tensors with 3, 4, or 5 dimensions are supported, got shape ${
        formatShape(shape)
      }`,
    );
  }
  if (!Number.isInteger(groups) || groups < 1) {
    throw new RangeError(`dirac_: groups must be a positive integer, got ${String(groups)}`);
  }
  if (shape[0] % groups !== 0) {
    throw new RangeError(
      `dirac_: dim 0 must be divisible by groups, got shape ${
        formatShape(shape)
      } and groups=${groups}`,
    );
  }
  const perGroup = shape[0] / groups;
  const minDim = Math.min(perGroup, shape[1]);
  const kernel = shape.slice(2);
  const kernelSize = kernel.reduce((x, y) => x * y, 1);
  // The centre's flat offset in the kernel.
  let centre = 0;
  for (const k of kernel) centre = centre * k + Math.floor(k / 2);
  const out = new Float64Array(numelOf(tensor));
  for (let g = 0; g < groups; g++) {
    for (let d = 0; d < minDim; d++) {
      out[((g * perGroup + d) * shape[1] + d) * kernelSize + centre] = 1;
    }
  }
  return fromHostValues(tensor, out);
}

/**
 * Fills a 2-dimensional `tensor` with the identity (ones on the diagonal, zeros elsewhere; a
 * non-square one too), as `torch.nn.init.eye_`.
 */
export function eye_(tensor: Tensor): Tensor {
  checkTensor("eye_", tensor, false);
  if (tensor.ndim !== 2) {
    throw new RangeError(
      `eye_: only tensors with 2 dimensions are supported, got shape ${formatShape(tensor.shape)}`,
    );
  }
  const [rows, cols] = tensor.shape;
  const out = new Float64Array(rows * cols);
  for (let i = 0; i < Math.min(rows, cols); i++) out[i * cols + i] = 1;
  return fromHostValues(tensor, out);
}

/** Options of {@link sparse_}. */
export interface SparseOptions {
  /** Standard deviation of the non-zero values (default 0.01). */
  std?: number;
}

/**
 * Fills a 2-dimensional `tensor` as a sparse matrix, as `torch.nn.init.sparse_`: N(0, std²)
 * values, then in each column ⌈sparsity · rows⌉ entries, at random rows, set to 0.
 */
export function sparse_(tensor: Tensor, sparsity: number, options: SparseOptions = {}): Tensor {
  checkTensor("sparse_", tensor, true);
  if (tensor.ndim !== 2) {
    throw new RangeError(
      `sparse_: only tensors with 2 dimensions are supported, got shape ${
        formatShape(tensor.shape)
      }`,
    );
  }
  checkFinite("sparse_", "sparsity", sparsity);
  if (sparsity < 0 || sparsity > 1) {
    throw new RangeError(`sparse_: sparsity must be in [0, 1], got ${sparsity}`);
  }
  const std = options.std ?? 0.01;
  checkFinite("sparse_", "std", std);
  if (std < 0) throw new RangeError(`sparse_: expects std >= 0, got ${std}`);
  const [rows, cols] = tensor.shape;
  const zeros = Math.ceil(sparsity * rows);
  const normal = hostNormal();
  const u = hostUniform();
  const out = new Float64Array(rows * cols);
  for (let i = 0; i < out.length; i++) out[i] = std * normal();
  const order = Array.from({ length: rows }, (_, i) => i);
  for (let c = 0; c < cols; c++) {
    // The first `zeros` entries of a random permutation of the rows (partial Fisher-Yates).
    for (let i = 0; i < zeros; i++) {
      const j = i + Math.floor(u() * (rows - i));
      [order[i], order[j]] = [order[j], order[i]];
      out[order[i] * cols + c] = 0;
    }
  }
  return fromHostValues(tensor, out);
}
