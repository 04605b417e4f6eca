/**
 * More factories and dtype queries: `logspace`, the signal windows
 * (`hannWindow`, `hammingWindow`, `blackmanWindow`, `bartlettWindow`,
 * `kaiserWindow`), `empty`, `emptyLike`, `scalarTensor`, `asTensor`, and
 * `finfo`, `iinfo`, `promoteTypes`, `resultType`, `canCast`. The factories
 * compute their values on the host (in float64, rounded once to the dtype):
 * they take no tensor input, so there is nothing to differentiate.
 * @module
 */

import { allocHost, assertDType, type DType, getDefaultDtype, isFloat } from "../dtype.ts";
import { promoteTypes as promote } from "../dtype.ts";
import { type Device, device as resolveDevice } from "../device.ts";
import { checkShape } from "../shape.ts";
import { Tensor } from "../tensor.ts";
import {
  fromHost,
  type NestedArray,
  resolveFactory,
  tensor,
  type TensorOptions,
  zeros,
} from "../ops/factory.ts";
import type { TypedArray } from "../dtype.ts";

function finish(t: Tensor, options: TensorOptions): Tensor {
  if (options.requiresGrad) t.requiresGrad = true;
  return t;
}

function count(value: unknown, what: string, op: string): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0) {
    throw new RangeError(`${op}: ${what} must be a non-negative integer, got ${value}`);
  }
  return value;
}

/** Options of {@link logspace}. */
export interface LogspaceOptions extends TensorOptions {
  /** The base of the powers (default 10). */
  base?: number;
}

/**
 * `steps` values `base ** e` for exponents evenly spaced from `start` to
 * `end`, as `torch.logspace` (the default dtype unless told; int32 truncates start,
 * end and the powers, as PyTorch's cpu kernel).
 */
export function logspace(
  start: number,
  end: number,
  steps: number,
  options: LogspaceOptions = {},
): Tensor {
  if (typeof start !== "number" || typeof end !== "number") {
    throw new TypeError(`logspace: start and end must be numbers, got ${start} and ${end}`);
  }
  const n = count(steps, "steps", "logspace");
  const base = options.base ?? 10;
  if (typeof base !== "number") throw new TypeError(`logspace: base must be a number, got ${base}`);
  const { dtype, device } = resolveFactory(options, getDefaultDtype());
  // As PyTorch's cpu kernel: start and end in the dtype (int32 truncates), the step and the
  // exponents in float64, the first half counting up from start, the second down from end.
  const int = dtype === "int32";
  const cast = int ? Math.trunc : dtype === "float32" ? Math.fround : (v: number) => v;
  const [s, e] = [cast(start), cast(end)];
  const step = cast(e - s) / (n - 1);
  const half = Math.floor(n / 2);
  // A double to int32 as C++'s cast on x86: out of range (and NaN) is INT_MIN.
  const toInt = (v: number) => {
    const t = Math.trunc(v);
    return t >= -2147483648 && t <= 2147483647 ? t : -2147483648;
  };
  const values = allocHost(dtype, n);
  for (let i = 0; i < n; i++) {
    const power = base ** (i < half ? s + step * i : e - step * (n - 1 - i));
    values[i] = int ? toInt(power) : power;
  }
  if (n === 1) values[0] = int ? toInt(base ** start) : base ** start;
  return finish(fromHost(values, [n], device), options);
}

/** Options shared by the window functions. */
export interface WindowOptions extends TensorOptions {
  /** A periodic window (for spectral analysis, the default) or a symmetric one (filter design). */
  periodic?: boolean;
}

/** Options of {@link hammingWindow}. */
export interface HammingWindowOptions extends WindowOptions {
  /** The coefficient α of `α - β cos(2πn / (N - 1))` (default 0.54). */
  alpha?: number;
  /** The coefficient β (default 0.46). */
  beta?: number;
}

/** Options of {@link kaiserWindow}. */
export interface KaiserWindowOptions extends WindowOptions {
  /** The shape parameter β (default 12). */
  beta?: number;
}

/**
 * A window of `length` values from `at(n, N)` (N the symmetric window's
 * length: one more than `length` for a periodic window), checked as
 * PyTorch's window functions check.
 */
function window(
  op: string,
  length: number,
  options: WindowOptions,
  at: (n: number, N: number) => number,
): Tensor {
  if (typeof length !== "number" || !Number.isInteger(length) || length < 0) {
    throw new RangeError(`${op} requires non-negative window_length, got window_length=${length}`);
  }
  const { dtype, device } = resolveFactory(options, getDefaultDtype());
  if (!isFloat(dtype)) throw new TypeError(`${op} expects floating point dtypes, got ${dtype}`);
  const values = allocHost(dtype, length);
  if (length === 1) values[0] = 1;
  else {
    const N = (options.periodic ?? true) ? length + 1 : length;
    for (let n = 0; n < length; n++) values[n] = at(n, N);
  }
  return finish(fromHost(values, [length], device), options);
}

/**
 * The Hann window `0.5 - 0.5 cos(2πn / (N - 1))`, as `torch.hann_window`
 * (`{ periodic }`, default periodic; float dtypes only).
 */
export function hannWindow(length: number, options: WindowOptions = {}): Tensor {
  return window(
    "hann_window",
    length,
    options,
    (n, N) => 0.5 - 0.5 * Math.cos(2 * Math.PI * n / (N - 1)),
  );
}

/**
 * The Hamming window `α - β cos(2πn / (N - 1))`, as `torch.hamming_window`
 * (`{ periodic, alpha, beta }`, defaults true, 0.54, 0.46).
 */
export function hammingWindow(length: number, options: HammingWindowOptions = {}): Tensor {
  const { alpha = 0.54, beta = 0.46 } = options;
  return window(
    "hamming_window",
    length,
    options,
    (n, N) => alpha - beta * Math.cos(2 * Math.PI * n / (N - 1)),
  );
}

/**
 * The Blackman window `0.42 - 0.5 cos(2πn / (N - 1)) + 0.08 cos(4πn / (N - 1))`,
 * as `torch.blackman_window` (`{ periodic }`).
 */
export function blackmanWindow(length: number, options: WindowOptions = {}): Tensor {
  return window("blackman_window", length, options, (n, N) => {
    const w = Math.PI * n / (N - 1);
    // PyTorch's order of terms, which makes the ends exactly 0.
    return 0.08 * Math.cos(4 * w) - 0.5 * Math.cos(2 * w) + 0.42;
  });
}

/**
 * The triangular Bartlett window `1 - |2n / (N - 1) - 1|`, as
 * `torch.bartlett_window` (`{ periodic }`).
 */
export function bartlettWindow(length: number, options: WindowOptions = {}): Tensor {
  return window("bartlett_window", length, options, (n, N) => {
    const w = 2 * n / (N - 1);
    return n <= (N - 1) >> 1 ? w : 2 - w;
  });
}

/** The modified Bessel function I0 (its power series: ample for window shapes). */
function besselI0(x: number): number {
  let sum = 1;
  let term = 1;
  const q = x * x / 4;
  for (let k = 1; k < 500 && term > sum * 1e-17; k++) {
    term *= q / (k * k);
    sum += term;
  }
  return sum;
}

/**
 * The Kaiser window `I0(β sqrt(1 - ((n - a) / a)²)) / I0(β)` with
 * `a = (N - 1) / 2`, as `torch.kaiser_window` (`{ periodic, beta }`,
 * default β 12).
 */
export function kaiserWindow(length: number, options: KaiserWindowOptions = {}): Tensor {
  const { beta = 12 } = options;
  if (typeof beta !== "number" || !Number.isFinite(beta)) {
    throw new RangeError(`kaiser_window: beta must be a finite number, got ${beta}`);
  }
  const denominator = besselI0(beta);
  return window("kaiser_window", length, options, (n, N) => {
    const a = (N - 1) / 2;
    const r = (n - a) / a;
    return besselI0(beta * Math.sqrt(Math.max(0, 1 - r * r))) / denominator;
  });
}

/**
 * A tensor of `shape`, as `torch.empty`. Its contents are unspecified in
 * PyTorch; here they are zeros (a fresh buffer is zero-filled anyway).
 */
export function empty(shape: number[], options: TensorOptions = {}): Tensor {
  if (!Array.isArray(shape)) throw new TypeError(`empty: shape must be an array, got ${shape}`);
  checkShape(shape);
  return zeros(shape, options);
}

/** A tensor of `t`'s shape (its dtype and device unless told), as `torch.empty_like` (zeros). */
export function emptyLike(t: Tensor, options: TensorOptions = {}): Tensor {
  if (!(t instanceof Tensor)) throw new TypeError(`emptyLike: expected a Tensor, got ${typeof t}`);
  return zeros([...t.shape], { dtype: t.dtype, device: t.device, ...options });
}

/**
 * A 0-dimensional tensor holding `value`, as `torch.scalar_tensor`
 * (the default dtype unless told, even for an integer).
 */
export function scalarTensor(value: number | boolean, options: TensorOptions = {}): Tensor {
  if (typeof value !== "number" && typeof value !== "boolean") {
    throw new TypeError(`scalarTensor: value must be a number, got ${typeof value}`);
  }
  return tensor(Number(value), { dtype: getDefaultDtype(), ...options });
}

/** Options of {@link asTensor}. */
export interface AsTensorOptions {
  /** The dtype wanted (default the data's: a tensor's own, the default dtype for numbers). */
  dtype?: DType;
  /** The device wanted (default the tensor's own, else the default device). */
  device?: Device | string;
}

/**
 * `data` as a tensor, as `torch.as_tensor`: a tensor already of the dtype
 * and device asked for is returned itself (no copy, its graph kept); one
 * of another dtype or device is converted (`.to`, differentiable); arrays
 * and numbers become a new tensor.
 */
export function asTensor(
  data: Tensor | NestedArray | TypedArray,
  options: AsTensorOptions = {},
): Tensor {
  if (data instanceof Tensor) {
    let out = data;
    if (options.dtype !== undefined) {
      assertDType(options.dtype);
      if (options.dtype !== out.dtype) out = out.to(options.dtype);
    }
    if (options.device !== undefined) {
      const d = resolveDevice(options.device);
      if (d !== out.device) out = out.to(d);
    }
    return out;
  }
  return tensor(data, options);
}

/** The limits of a floating-point dtype, as `torch.finfo` gives them. */
export interface FInfo {
  /** The dtype described. */
  dtype: DType;
  /** Bits per element. */
  bits: number;
  /** The difference between 1 and the next larger representable number. */
  eps: number;
  /** The largest finite value. */
  max: number;
  /** The most negative finite value (`-max`). */
  min: number;
  /** The smallest positive normal number. */
  tiny: number;
  /** The smallest positive normal number (`tiny`'s other name). */
  smallestNormal: number;
  /** The approximate decimal resolution (1e-6 for float32, 1e-15 for float64, as PyTorch). */
  resolution: number;
}

/** The limits of an integer dtype, as `torch.iinfo` gives them. */
export interface IInfo {
  /** The dtype described. */
  dtype: DType;
  /** Bits per element. */
  bits: number;
  /** The largest value. */
  max: number;
  /** The smallest value. */
  min: number;
}

/** The limits of a float dtype (default {@link getDefaultDtype}'s), as `torch.finfo`. */
export function finfo(dtype: DType = getDefaultDtype()): FInfo {
  assertDType(dtype);
  if (dtype === "float32") {
    const max = 3.4028234663852886e38;
    const tiny = 1.1754943508222875e-38;
    return {
      dtype,
      bits: 32,
      eps: 2 ** -23,
      max,
      min: -max,
      tiny,
      smallestNormal: tiny,
      resolution: 1e-6,
    };
  }
  if (dtype === "float64") {
    const tiny = 2.2250738585072014e-308;
    return {
      dtype,
      bits: 64,
      eps: Number.EPSILON,
      max: Number.MAX_VALUE,
      min: -Number.MAX_VALUE,
      tiny,
      smallestNormal: tiny,
      resolution: 1e-15,
    };
  }
  throw new TypeError(`finfo: expected a floating-point dtype, got ${dtype} (use iinfo)`);
}

/** The limits of an integer dtype, as `torch.iinfo` (multigrad's one is int32). */
export function iinfo(dtype: DType): IInfo {
  assertDType(dtype);
  if (dtype !== "int32") {
    throw new TypeError(`iinfo: expected an integer dtype, got ${dtype} (use finfo)`);
  }
  return { dtype, bits: 32, max: 2147483647, min: -2147483648 };
}

/** The dtype two dtypes promote to, as `torch.promote_types` (float64 > float32 > int32). */
export function promoteTypes(a: DType, b: DType): DType {
  assertDType(a);
  assertDType(b);
  return promote(a, b);
}

/**
 * The dtype an op of `a` and `b` (tensors or numbers) gives, as
 * `torch.result_type`: tensors with dimensions decide, then 0-dimensional
 * tensors and numbers only where they are of a higher category (float over
 * integer); a float number next to integers gives the default dtype, an integer
 * number int32 (PyTorch's int64).
 */
export function resultType(a: Tensor | number, b: Tensor | number): DType {
  const operands = [a, b];
  for (const x of operands) {
    if (!(x instanceof Tensor) && typeof x !== "number") {
      throw new TypeError(`resultType: expected a Tensor or a number, got ${typeof x}`);
    }
  }
  const fold = (xs: (Tensor | number)[], of: (x: Tensor | number) => DType) =>
    xs.length === 0 ? undefined : xs.map(of).reduce(promote);
  const tensors = operands.filter((x): x is Tensor => x instanceof Tensor);
  const dims = fold(tensors.filter((t) => t.ndim > 0), (t) => (t as Tensor).dtype);
  const zeroDim = fold(tensors.filter((t) => t.ndim === 0), (t) => (t as Tensor).dtype);
  const numbers = fold(
    operands.filter((x) => typeof x === "number"),
    (x) => Number.isInteger(x) ? "int32" : getDefaultDtype(),
  );
  let out: DType | undefined = dims;
  for (const next of [zeroDim, numbers]) {
    if (next === undefined) continue;
    if (out === undefined) out = next;
    else if (!isFloat(out) && isFloat(next)) out = next;
  }
  return out!;
}

/**
 * Whether PyTorch's type promotion allows casting `from` to `to`, as
 * `torch.can_cast`: not from a float dtype to an integer one.
 */
export function canCast(from: DType, to: DType): boolean {
  assertDType(from);
  assertDType(to);
  return !(isFloat(from) && !isFloat(to));
}
