/**
 * PyTorch's trailing-underscore in-place variants of the elementwise and
 * indexing ops (`exp_`, `sub_`, `clamp_`, `eq_`, `scatter_`, `indexPut_`,
 * ...), plus `addcmul`/`addcdiv` and theirs. Each is its out-of-place op
 * written back through the core's `inPlace`, so it follows the rules of
 * `add_`: the tensor keeps its shape and dtype (a float result is refused
 * in an int tensor), its version counter moves (a backward that saved it
 * raises), a leaf that requires grad is refused while gradients are
 * recorded, and on a non-leaf the op is recorded, with PyTorch's gradient.
 * @module
 */

import { inPlace } from "../ops/inplace.ts";
import {
  abs,
  add,
  cast,
  ceil,
  clamp,
  compare,
  cos,
  div,
  exp,
  expm1,
  floor,
  log,
  log1p,
  mul,
  neg,
  pow,
  reciprocal,
  relu,
  round,
  rsqrt,
  sigmoid,
  sign,
  sin,
  sqrt,
  square,
  tanh,
} from "../ops/elementwise.ts";
import { maskedFill, tril, triu } from "../ops/indexing.ts";
import { tensor } from "../ops/factory.ts";
import { checkFill, isFloat } from "../dtype.ts";
import { broadcastShapes, formatShape, sameShape } from "../shape.ts";
import { Tensor } from "../tensor.ts";
import type { TensorLike } from "../ops/util.ts";
import { erf, frac, lerp, nanToNum, type NanToNumOptions, trunc } from "./elementwise.ts";
import { acos, asin, asinh, atan, atanh, cosh, deg2rad, exp2, log10 } from "./unary_math.ts";
import { acosh, log2, logit, type LogitOptions, rad2deg, sinc, sinh, tan } from "./unary_math.ts";
import { digamma, erfc, erfinv, i0, lgamma, mvlgamma, polygamma } from "./special_functions.ts";
import { xlogy } from "./special_functions.ts";
import { atan2, floorDivide, fmod, hypot } from "./binary.ts";
import { bitwiseAnd, bitwiseLeftShift, bitwiseNot, bitwiseOr } from "./binary_extra.ts";
import {
  bitwiseRightShift,
  bitwiseXor,
  copysign,
  divide,
  type DivideOptions,
} from "./binary_extra.ts";
import { gcd, heaviside, lcm, ldexp, remainder, subtract } from "./binary_extra.ts";
import type { SubtractOptions } from "./binary_extra.ts";
import { logicalAnd, logicalNot, logicalOr, logicalXor } from "./logical.ts";
import { indexPut, type IndexPutOptions, maskedScatter, put, scatter } from "./scatter.ts";
import { indexReduce, scatterAdd, type ScatterOptions, scatterReduce } from "./scatter.ts";
import type { ScatterReduceOptions, ScatterReduction } from "./scatter.ts";
import { indexAdd, type IndexAddOptions, indexCopy, indexFill } from "./index_ops.ts";

/** A unary in-place op: overwrites `t` and returns it. */
export type InPlaceUnaryOp = (t: Tensor) => Tensor;
/** A binary in-place op: overwrites `t` with its result with `other` (broadcast to `t`'s shape). */
export type InPlaceBinaryOp = (t: Tensor, other: TensorLike) => Tensor;

/**
 * Refuses, before any work is queued, operands that would broadcast `t` to a
 * bigger shape (PyTorch checks first too: a refused op must leave no pending
 * deferred check, such as an int division by zero, to fail a later read).
 */
function fits(op: string, t: unknown, operands: readonly unknown[]): void {
  if (!(t instanceof Tensor)) return; // inPlace names it
  for (const o of operands) {
    if (!(o instanceof Tensor)) continue;
    const shape = broadcastShapes(t.shape, o.shape, op);
    if (!sameShape(shape, t.shape)) {
      throw new RangeError(
        `${op}: the result of shape ${formatShape(shape)} does not fit the tensor's shape ${
          formatShape(t.shape)
        } (the other operands may only broadcast to it)`,
      );
    }
  }
}
/** {@link inPlace} of an elementwise op, its operands checked first by {@link fits}. */
function elementwise(
  op: string,
  t: Tensor,
  operands: readonly unknown[],
  compute: (self: Tensor) => Tensor,
  savesSelf = true,
): Tensor {
  fits(op, t, operands);
  return inPlace(op, t, operands, compute, savesSelf);
}

// savesSelf false: the op's backward never reads `t`'s old values, so they need no copy.
const unary = (op: string, f: (x: Tensor) => Tensor, savesSelf = true): InPlaceUnaryOp => (t) =>
  inPlace(op, t, [], f, savesSelf);
const binary =
  (op: string, f: (x: Tensor, y: TensorLike) => Tensor, savesSelf = true): InPlaceBinaryOp =>
  (t, other) => elementwise(op, t, [other], (self) => f(self, other), savesSelf);
// Comparisons and logical ops give 1/0, which any dtype holds (an int `t` compared with a float
// is no float result), and have no gradient.
const predicate = (op: string, f: (x: Tensor, y: TensorLike) => Tensor): InPlaceBinaryOp =>
  binary(op, (x, y) => cast(f(x, y), x.dtype), false);

// ---- unary ----

/** `t = -t` in place (`Tensor.neg_`). */
export const neg_: InPlaceUnaryOp = unary("neg_", neg, false);
/** `t = exp(t)` in place. */
export const exp_: InPlaceUnaryOp = unary("exp_", exp);
/** `t = log(t)` in place. */
export const log_: InPlaceUnaryOp = unary("log_", log);
/** `t = sqrt(t)` in place. */
export const sqrt_: InPlaceUnaryOp = unary("sqrt_", sqrt);
/** `t = |t|` in place. */
export const abs_: InPlaceUnaryOp = unary("abs_", abs);
/** `t = max(t, 0)` in place. */
export const relu_: InPlaceUnaryOp = unary("relu_", relu);
/** `t = sigmoid(t)` in place. */
export const sigmoid_: InPlaceUnaryOp = unary("sigmoid_", sigmoid);
/** `t = tanh(t)` in place. */
export const tanh_: InPlaceUnaryOp = unary("tanh_", tanh);
/** `t = sign(t)` in place. */
export const sign_: InPlaceUnaryOp = unary("sign_", sign);
/** `t = sin(t)` in place. */
export const sin_: InPlaceUnaryOp = unary("sin_", sin);
/** `t = cos(t)` in place. */
export const cos_: InPlaceUnaryOp = unary("cos_", cos);
/** `t = tan(t)` in place. */
export const tan_: InPlaceUnaryOp = unary("tan_", tan);
/** `t = asin(t)` in place. */
export const asin_: InPlaceUnaryOp = unary("asin_", asin);
/** `t = acos(t)` in place. */
export const acos_: InPlaceUnaryOp = unary("acos_", acos);
/** `t = atan(t)` in place. */
export const atan_: InPlaceUnaryOp = unary("atan_", atan);
/** `t = sinh(t)` in place. */
export const sinh_: InPlaceUnaryOp = unary("sinh_", sinh);
/** `t = cosh(t)` in place. */
export const cosh_: InPlaceUnaryOp = unary("cosh_", cosh);
/** `t = asinh(t)` in place. */
export const asinh_: InPlaceUnaryOp = unary("asinh_", asinh);
/** `t = acosh(t)` in place. */
export const acosh_: InPlaceUnaryOp = unary("acosh_", acosh);
/** `t = atanh(t)` in place. */
export const atanh_: InPlaceUnaryOp = unary("atanh_", atanh);
/** `t = floor(t)` in place. */
export const floor_: InPlaceUnaryOp = unary("floor_", floor, false);
/** `t = ceil(t)` in place. */
export const ceil_: InPlaceUnaryOp = unary("ceil_", ceil, false);
/** `t = round(t)` (half to even) in place. */
export const round_: InPlaceUnaryOp = unary("round_", round, false);
/** `t = trunc(t)` in place. */
export const trunc_: InPlaceUnaryOp = unary("trunc_", trunc, false);
/** `t = t - trunc(t)` in place. */
export const frac_: InPlaceUnaryOp = unary("frac_", frac, false);
/** `t = erf(t)` in place. */
export const erf_: InPlaceUnaryOp = unary("erf_", erf);
/** `t = erfc(t)` in place. */
export const erfc_: InPlaceUnaryOp = unary("erfc_", erfc);
/** `t = erfinv(t)` in place. */
export const erfinv_: InPlaceUnaryOp = unary("erfinv_", erfinv);
/** `t = 1 / t` in place. */
export const reciprocal_: InPlaceUnaryOp = unary("reciprocal_", reciprocal);
/** `t = 1 / sqrt(t)` in place. */
export const rsqrt_: InPlaceUnaryOp = unary("rsqrt_", rsqrt);
/** `t = t²` in place. */
export const square_: InPlaceUnaryOp = unary("square_", square);
/** `t = log(1 + t)` in place. */
export const log1p_: InPlaceUnaryOp = unary("log1p_", log1p);
/** `t = exp(t) - 1` in place. */
export const expm1_: InPlaceUnaryOp = unary("expm1_", expm1);
/** `t = log2(t)` in place. */
export const log2_: InPlaceUnaryOp = unary("log2_", log2);
/** `t = log10(t)` in place. */
export const log10_: InPlaceUnaryOp = unary("log10_", log10);
/** `t = 2^t` in place. */
export const exp2_: InPlaceUnaryOp = unary("exp2_", exp2);
/** `t = lgamma(t)` in place. */
export const lgamma_: InPlaceUnaryOp = unary("lgamma_", lgamma);
/** `t = digamma(t)` in place. */
export const digamma_: InPlaceUnaryOp = unary("digamma_", digamma);
/** `t = i0(t)` in place. */
export const i0_: InPlaceUnaryOp = unary("i0_", i0);
/** `t = sin(πt) / (πt)` in place. */
export const sinc_: InPlaceUnaryOp = unary("sinc_", sinc);
/** `t = t · π / 180` in place. */
export const deg2rad_: InPlaceUnaryOp = unary("deg2rad_", deg2rad, false);
/** `t = t · 180 / π` in place. */
export const rad2deg_: InPlaceUnaryOp = unary("rad2deg_", rad2deg, false);
/** `t = (t == 0)` in place, as 1/0 in `t`'s dtype. */
export const logicalNot_: InPlaceUnaryOp = unary("logicalNot_", logicalNot, false);
/** `t = ~t` in place (int tensors). */
export const bitwiseNot_: InPlaceUnaryOp = unary("bitwiseNot_", bitwiseNot, false);

/** `t = polygamma(n, t)` in place (`Tensor.polygamma_(n)`). */
export const polygamma_ = (t: Tensor, n: number): Tensor =>
  inPlace("polygamma_", t, [], (x) => polygamma(n, x));
/** `t = mvlgamma(t, p)` in place. */
export const mvlgamma_ = (t: Tensor, p: number): Tensor =>
  inPlace("mvlgamma_", t, [], (x) => mvlgamma(x, p));
/** `t = logit(t)` in place (`eps` clamps first, as `logit`). */
export const logit_ = (t: Tensor, options?: LogitOptions): Tensor =>
  inPlace("logit_", t, [], (x) => logit(x, options));
/** NaN, +inf and -inf replaced in place (see `nanToNum`). */
export const nanToNum_ = (t: Tensor, options?: NanToNumOptions): Tensor =>
  inPlace("nanToNum_", t, [], (x) => nanToNum(x, options));

// ---- binary (other broadcasts to t's shape) ----

/** `t = t - alpha · other` in place. */
export const sub_ = (t: Tensor, other: TensorLike, options?: SubtractOptions): Tensor => {
  // A float scalar makes a float result (PyTorch's), even when alpha makes the product whole.
  if (typeof other === "number" && !Number.isInteger(other) && t instanceof Tensor) {
    if (!isFloat(t.dtype)) {
      throw new TypeError(
        `sub_: the result type float32 cannot be stored in the ${t.dtype} tensor`,
      );
    }
  }
  return elementwise("sub_", t, [other], (x) => subtract(x, other, options), false);
};
/** `t = t / other` in place (`roundingMode` as `divide`; int tensors need one). */
export const div_ = (t: Tensor, other: TensorLike, options?: DivideOptions): Tensor =>
  elementwise("div_", t, [other], (x) => divide(x, other, options));
/** `t = t ** exponent` in place. */
export const pow_: InPlaceBinaryOp = binary("pow_", pow);
/** Python's `%` (the divisor's sign) in place. */
export const remainder_: InPlaceBinaryOp = binary("remainder_", remainder);
/** C's `fmod` (the dividend's sign) in place. */
export const fmod_: InPlaceBinaryOp = binary("fmod_", fmod);
/** `t = floor(t / other)` in place. */
export const floorDivide_: InPlaceBinaryOp = binary("floorDivide_", floorDivide);
/** `|t|` with `other`'s sign, in place. */
export const copysign_: InPlaceBinaryOp = binary("copysign_", copysign);
/** The Heaviside step of `t` (`values` where `t` is 0), in place. */
export const heaviside_: InPlaceBinaryOp = binary("heaviside_", (x, v) => heaviside(x, v));
/** `t = t · 2^other` in place. */
export const ldexp_: InPlaceBinaryOp = binary("ldexp_", ldexp);
/** Greatest common divisor, in place (int tensors). */
export const gcd_: InPlaceBinaryOp = binary("gcd_", gcd, false);
/** Least common multiple, in place (int tensors). */
export const lcm_: InPlaceBinaryOp = binary("lcm_", lcm, false);
/** `t = atan2(t, other)` in place. */
export const atan2_: InPlaceBinaryOp = binary("atan2_", atan2);
/** `t = sqrt(t² + other²)` in place. */
export const hypot_: InPlaceBinaryOp = binary("hypot_", hypot);
/** `t = t · log(other)` (0 where `t` is 0) in place. */
export const xlogy_: InPlaceBinaryOp = binary("xlogy_", xlogy);
/** `t = (t == other)` in place, as 1/0 in `t`'s dtype. */
export const eq_: InPlaceBinaryOp = predicate("eq_", (x, y) => compare("eq", x, y));
/** `t = (t != other)` in place, as 1/0 in `t`'s dtype. */
export const ne_: InPlaceBinaryOp = predicate("ne_", (x, y) => compare("ne", x, y));
/** `t = (t < other)` in place, as 1/0 in `t`'s dtype. */
export const lt_: InPlaceBinaryOp = predicate("lt_", (x, y) => compare("lt", x, y));
/** `t = (t <= other)` in place, as 1/0 in `t`'s dtype. */
export const le_: InPlaceBinaryOp = predicate("le_", (x, y) => compare("le", x, y));
/** `t = (t > other)` in place, as 1/0 in `t`'s dtype. */
export const gt_: InPlaceBinaryOp = predicate("gt_", (x, y) => compare("gt", x, y));
/** `t = (t >= other)` in place, as 1/0 in `t`'s dtype. */
export const ge_: InPlaceBinaryOp = predicate("ge_", (x, y) => compare("ge", x, y));
/** Logical and of `t` and `other` (nonzero is true) in place, as 1/0. */
export const logicalAnd_: InPlaceBinaryOp = predicate("logicalAnd_", logicalAnd);
/** Logical or in place, as 1/0. */
export const logicalOr_: InPlaceBinaryOp = predicate("logicalOr_", logicalOr);
/** Logical xor in place, as 1/0. */
export const logicalXor_: InPlaceBinaryOp = predicate("logicalXor_", logicalXor);
/** Bitwise and in place (int tensors). */
export const bitwiseAnd_: InPlaceBinaryOp = predicate("bitwiseAnd_", bitwiseAnd);
/** Bitwise or in place (int tensors). */
export const bitwiseOr_: InPlaceBinaryOp = predicate("bitwiseOr_", bitwiseOr);
/** Bitwise xor in place (int tensors). */
export const bitwiseXor_: InPlaceBinaryOp = predicate("bitwiseXor_", bitwiseXor);
/** `t = t << other` in place (int tensors). */
export const bitwiseLeftShift_: InPlaceBinaryOp = predicate("bitwiseLeftShift_", bitwiseLeftShift);
/** `t = t >> other` (arithmetic) in place (int tensors). */
export const bitwiseRightShift_: InPlaceBinaryOp = predicate(
  "bitwiseRightShift_",
  bitwiseRightShift,
);

function clampWith(op: string, t: Tensor, min?: TensorLike, max?: TensorLike): Tensor {
  if (min === undefined && max === undefined) {
    throw new RangeError(`${op}: at least one of min or max must be given`);
  }
  return elementwise(op, t, [min, max], (x) => clamp(x, min, max));
}

/** Clamps into [min, max] in place (either bound, not both, may be omitted; or a tensor). */
export const clamp_ = (t: Tensor, min?: TensorLike, max?: TensorLike): Tensor =>
  clampWith("clamp_", t, min, max);
/** {@link clamp_} (`Tensor.clip_`). */
export const clip_ = (t: Tensor, min?: TensorLike, max?: TensorLike): Tensor =>
  clampWith("clip_", t, min, max);
/** `t = max(t, min)` in place. */
export const clampMin_: InPlaceBinaryOp = binary("clampMin_", (x, m) => clamp(x, m));
/** `t = min(t, max)` in place. */
export const clampMax_: InPlaceBinaryOp = binary("clampMax_", (x, m) => clamp(x, undefined, m));
/** `t = t + weight · (end - t)` in place. */
export const lerp_ = (t: Tensor, end: Tensor, weight: TensorLike): Tensor =>
  elementwise("lerp_", t, [end, weight], (x) => lerp(x, end, weight));
/** `value` where `mask` is nonzero, in place (mask broadcasts to `t`'s shape). */
export const maskedFill_ = (t: Tensor, mask: Tensor, value: number | Tensor): Tensor =>
  elementwise("maskedFill_", t, [mask, value], (x) => maskedFill(x, mask, value), false);
/** Zeroes the entries above diagonal `diagonal` of the last two dims, in place. */
export const tril_ = (t: Tensor, diagonal = 0): Tensor =>
  inPlace("tril_", t, [], (x) => tril(x, diagonal), false);
/** Zeroes the entries below diagonal `diagonal` of the last two dims, in place. */
export const triu_ = (t: Tensor, diagonal = 0): Tensor =>
  inPlace("triu_", t, [], (x) => triu(x, diagonal), false);

// ---- addcmul / addcdiv ----

/** Options of {@link addcmul} and {@link addcdiv}. */
export interface AddcOptions {
  /** Multiplies the product (quotient) first (default 1), as PyTorch's `value`. */
  value?: number;
}

function addcValue(op: string, input: Tensor, t1: Tensor, t2: Tensor, value: number): void {
  for (const [name, x] of [["input", input], ["tensor1", t1], ["tensor2", t2]] as const) {
    if (!(x instanceof Tensor)) {
      throw new TypeError(`${op}: ${name} must be a Tensor, got ${typeof x}`);
    }
  }
  if (typeof value !== "number") {
    throw new TypeError(`${op}: value must be a number, got ${typeof value}`);
  }
  const ints = [input, t1, t2].every((x) => !isFloat(x.dtype));
  if (ints && !Number.isInteger(value)) {
    throw new TypeError(`${op}: value ${value} must be an integer for ${input.dtype} tensors`);
  }
  if (op.startsWith("addcdiv") && !isFloat(t1.dtype) && !isFloat(t2.dtype)) {
    throw new TypeError(
      `${op}: integer division is not supported (tensor1 and tensor2 are ${t1.dtype} and ${t2.dtype}); use floating-point tensors, as PyTorch asks`,
    );
  }
}

/** `input + value · tensor1 · tensor2`, all three broadcast together (`torch.addcmul`). */
export function addcmul(
  input: Tensor,
  tensor1: Tensor,
  tensor2: Tensor,
  options: AddcOptions = {},
): Tensor {
  const { value = 1 } = options;
  addcValue("addcmul", input, tensor1, tensor2, value);
  const product = mul(tensor1, tensor2);
  return add(input, value === 1 ? product : mul(product, value));
}

/** `input + value · tensor1 / tensor2`, all three broadcast together (`torch.addcdiv`). */
export function addcdiv(
  input: Tensor,
  tensor1: Tensor,
  tensor2: Tensor,
  options: AddcOptions = {},
): Tensor {
  const { value = 1 } = options;
  addcValue("addcdiv", input, tensor1, tensor2, value);
  const quotient = div(tensor1, tensor2);
  return add(input, value === 1 ? quotient : mul(quotient, value));
}

/** {@link addcmul} written into `t` in place. */
export const addcmul_ = (
  t: Tensor,
  tensor1: Tensor,
  tensor2: Tensor,
  options?: AddcOptions,
): Tensor =>
  elementwise(
    "addcmul_",
    t,
    [tensor1, tensor2],
    (x) => addcmul(x, tensor1, tensor2, options),
    false,
  );
/** {@link addcdiv} written into `t` in place. */
export const addcdiv_ = (
  t: Tensor,
  tensor1: Tensor,
  tensor2: Tensor,
  options?: AddcOptions,
): Tensor =>
  elementwise(
    "addcdiv_",
    t,
    [tensor1, tensor2],
    (x) => addcdiv(x, tensor1, tensor2, options),
    false,
  );

// ---- indexing ----

/** `src` (or a number) written along `dim` at `index`, in place (`Tensor.scatter_`). */
export const scatter_ = (
  t: Tensor,
  dim: number,
  index: Tensor,
  src: Tensor | number,
  options?: ScatterOptions,
): Tensor => inPlace("scatter_", t, [src], (x) => scatter(x, dim, index, src, options));
/** `src` added along `dim` at `index`, in place. */
export const scatterAdd_ = (t: Tensor, dim: number, index: Tensor, src: Tensor): Tensor =>
  inPlace("scatterAdd_", t, [src], (x) => scatterAdd(x, dim, index, src));
/** `src` reduced along `dim` at `index`, in place. */
export const scatterReduce_ = (
  t: Tensor,
  dim: number,
  index: Tensor,
  src: Tensor,
  reduce: ScatterReduction,
  options?: ScatterReduceOptions,
): Tensor =>
  inPlace("scatterReduce_", t, [src], (x) => scatterReduce(x, dim, index, src, reduce, options));
/** `alpha · source` added to the slices `index` names along `dim`, in place. */
export const indexAdd_ = (
  t: Tensor,
  dim: number,
  index: Tensor,
  source: Tensor,
  options?: IndexAddOptions,
): Tensor => inPlace("indexAdd_", t, [source], (x) => indexAdd(x, dim, index, source, options));
/** The slices `index` names along `dim` replaced by `source`'s, in place. */
export const indexCopy_ = (t: Tensor, dim: number, index: Tensor, source: Tensor): Tensor =>
  inPlace("indexCopy_", t, [source], (x) => indexCopy(x, dim, index, source));
/** The slices `index` names along `dim` set to `value`, in place. */
export const indexFill_ = (t: Tensor, dim: number, index: Tensor, value: number): Tensor =>
  inPlace("indexFill_", t, [], (x) => indexFill(x, dim, index, value));
/** `source`'s slices reduced into those `index` names along `dim`, in place. */
export const indexReduce_ = (
  t: Tensor,
  dim: number,
  index: Tensor,
  source: Tensor,
  reduce: "prod" | "mean" | "amax" | "amin",
  options?: ScatterReduceOptions,
): Tensor =>
  inPlace("indexReduce_", t, [source], (x) => indexReduce(x, dim, index, source, reduce, options));
/** `t[indices] = values` in place (`accumulate` adds). */
export const indexPut_ = (
  t: Tensor,
  indices: readonly Tensor[],
  values: Tensor,
  options?: IndexPutOptions,
): Tensor => inPlace("indexPut_", t, [values], (x) => indexPut(x, indices, values, options));
/** The masked places filled in order from `source`, in place. */
export const maskedScatter_ = (t: Tensor, mask: Tensor, source: Tensor): Tensor =>
  inPlace("maskedScatter_", t, [source], (x) => maskedScatter(x, mask, source));
/** `source` written at flat positions `index`, in place (`accumulate` adds). */
export const put_ = (t: Tensor, index: Tensor, source: Tensor, options?: IndexPutOptions): Tensor =>
  inPlace("put_", t, [source], (x) => put(x, index, source, options));

/** Options of {@link fillDiagonal_}. */
export interface FillDiagonalOptions {
  /** For a tall matrix, start again below the first square (numpy's `wrap`; default false). */
  wrap?: boolean;
}

/**
 * Sets the main diagonal (entries `[i, i, ..., i]`) to `fillValue` in
 * place, as `Tensor.fill_diagonal_`: a 2-D tensor of any shape, or one with
 * every dim of the same size.
 */
export function fillDiagonal_(
  t: Tensor,
  fillValue: number,
  options: FillDiagonalOptions = {},
): Tensor {
  if (!(t instanceof Tensor)) {
    throw new TypeError(`fillDiagonal_: expected a Tensor, got ${typeof t}`);
  }
  if (typeof fillValue !== "number") {
    throw new TypeError(`fillDiagonal_: fillValue must be a number, got ${typeof fillValue}`);
  }
  const shape = t.shape;
  if (shape.length < 2) {
    throw new RangeError(
      `fillDiagonal_: the tensor needs at least 2 dims, got shape ${formatShape(shape)}`,
    );
  }
  if (shape.length > 2 && shape.some((n) => n !== shape[0])) {
    throw new RangeError(
      `fillDiagonal_: all dims must have the same length when there are more than 2, got shape ${
        formatShape(shape)
      }`,
    );
  }
  checkFill(t.dtype, fillValue, "fillDiagonal_");
  const numel = t.numel();
  const [rows, cols] = [shape[0], shape[shape.length - 1]];
  // Flat positions along the diagonal step by 1 + cols + cols² + ...
  let step = 1;
  for (let d = 1, s = 1; d < shape.length; d++) step += s *= shape[shape.length - d];
  const count = shape.length === 2 && options.wrap ? Math.ceil(numel / step) : Math.min(rows, cols);
  const mask = new Int32Array(numel);
  // numpy's wrap skips a row between blocks: the flat step lands there by itself.
  for (let k = 0; k < count && k * step < numel; k++) mask[k * step] = 1;
  const m = tensor(mask, { shape: [...shape], dtype: "int32", device: t.device });
  return inPlace("fillDiagonal_", t, [], (x) => maskedFill(x, m, fillValue));
}
