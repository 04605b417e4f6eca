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
import { full, normal as normalTensor, uniform as uniformTensor } from "../ops/factory.ts";
import { formatShape } from "../shape.ts";
import { tidy } from "../storage.ts";
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
