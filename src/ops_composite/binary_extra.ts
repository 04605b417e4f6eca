/**
 * More elementwise functions of two operands, as PyTorch's: `remainder`,
 * `copysign`, `heaviside`, `fmax`, `fmin`, `floatPower`, `ldexp`, `gcd`,
 * `lcm`, the int32 bitwise ops, the arithmetic aliases (`multiply`,
 * `subtract`, `divide` with a rounding mode, `trueDivide`, `rsub`) and
 * `clampMin`, `clampMax`, `clip`. Operands broadcast and promote as the
 * core's binary ops do (a number beside a tensor takes its dtype).
 * @module
 */

import { getDefaultDtype, isFloat } from "../dtype.ts";
import { broadcastShapes, formatShape } from "../shape.ts";
import type { Tensor } from "../tensor.ts";
import { binaryRaw, cast, clamp, div, mul, operands, pow, sub } from "../ops/elementwise.ts";
import { commonDevice, scalar, type TensorLike } from "../ops/util.ts";
import { atan2, checkNoZeroDivisor, floorDivide, recordBinary, truncRemainder } from "./binary.ts";
import { trunc } from "./elementwise.ts";
import { computed, scopedRounds } from "./util.ts";

/** Both operands as `op` needs them: promoted, and int32 or float as `kind` says. */
function typed(op: string, a: TensorLike, b: TensorLike, kind: "int" | "float" | "any") {
  const [x, y] = operands(op, a, b);
  if (kind === "any" || isFloat(x.dtype) === (kind === "float")) return [x, y];
  const hint = kind === "int"
    ? "PyTorch's integer ops take integer tensors (for 0/1 masks use logicalAnd/Or/Xor/Not)"
    : 'convert with .to("float32")';
  throw new TypeError(
    `${op}: expected ${kind === "int" ? "int32" : "float"} operands, got ${x.dtype} (shapes ${
      formatShape(x.shape)
    } and ${formatShape(y.shape)}); ${hint}`,
  );
}

/** The checks of `operands` (a tensor among them, one device, shapes that broadcast), no casts. */
function checkPair(op: string, a: TensorLike, b: TensorLike): void {
  if (typeof a === "number" || typeof b === "number") {
    if (typeof a === typeof b) operands(op, a, b); // throws: no tensor operand
    return;
  }
  commonDevice(op, a, b);
  broadcastShapes(a.shape, b.shape, op);
}

/** Where a number is negative or a negative zero (its sign bit, but NaN counts as positive). */
const signBit = (t: Tensor) => t.lt(0).maximum(t.eq(0).mul(t.reciprocal().lt(0)));

/**
 * The remainder of `input / other` with the divisor's sign (Python's `%`),
 * as `torch.remainder`: PyTorch's algorithm, the `fmod` remainder (exact at
 * any quotient; see `fmod`)
 * moved by one divisor when the signs differ (so `remainder(-1, inf)` is
 * inf, as PyTorch's). int32 stays int32 (a zero divisor is an error);
 * floats give NaN for a zero divisor. The gradient is PyTorch's: `g` for
 * the input, `-g·floor(x/y)` for the divisor.
 */
export function remainder(input: TensorLike, other: TensorLike): Tensor {
  const [x, y] = operands("remainder", input, other);
  checkNoZeroDivisor("remainder", y);
  const out = computed(() => {
    const r = truncRemainder(x, y);
    const move = r.ne(0).mul(y.lt(0).ne(r.lt(0)));
    return r.add(y).where(move, r);
  });
  if (!isFloat(x.dtype)) return out;
  return recordBinary("remainder", x, y, out, (g) => [g, g.mul(floorDivide(x, y)).neg()]);
}

/**
 * `|input|` with the sign of `other`, as `torch.copysign` (int32 operands
 * give the default dtype): a negative zero divisor counts as negative, a NaN one as
 * positive. The gradient is PyTorch's: `g·copysign(x, y)/x` (0 where
 * `x = 0`) for the input, zeros for `other`.
 */
export function copysign(input: TensorLike, other: TensorLike): Tensor {
  let [x, y] = operands("copysign", input, other);
  if (!isFloat(x.dtype)) [x, y] = [cast(x, getDefaultDtype()), cast(y, getDefaultDtype())];
  const out = computed(() => {
    const magnitude = x.abs();
    return magnitude.neg().where(signBit(y), magnitude);
  });
  return recordBinary("copysign", x, y, out, (g) => [
    g.mul(out.div(x).where(x.ne(0), 0)),
    g.zerosLike(),
  ]);
}

/**
 * The Heaviside step, as `torch.heaviside`: 0 where `input < 0`, `values`
 * where it is 0, 1 where it is positive (NaN gives 0, as PyTorch's).
 * `input` and `values` must share a dtype (PyTorch's rule). Not
 * differentiable (PyTorch's backward raises): the result never requires grad.
 */
export function heaviside(input: Tensor, values: TensorLike): Tensor {
  if (typeof values !== "number" && values.dtype !== input.dtype) {
    throw new TypeError(
      `heaviside: input is ${input.dtype} (shape ${
        formatShape(input.shape)
      }) but values is ${values.dtype} (shape ${
        formatShape(values.shape)
      }); PyTorch requires one dtype`,
    );
  }
  const [x, v] = operands("heaviside", input, values);
  return computed(() => v.where(x.eq(0), x.gt(0)));
}

/** fmax / fmin: the larger (smaller) operand, the other where one is NaN; ties go to `x`. */
function nanIgnoring(op: "fmax" | "fmin", input: TensorLike, other: TensorLike): Tensor {
  const [x, y] = operands(op, input, other);
  if (!isFloat(x.dtype)) return binaryRaw(op === "fmax" ? "maximum" : "minimum", x, y);
  // PyTorch's masks: x wins where it is larger (smaller) or ties (so fmax(-0, 0) is -0), or
  // y is NaN; it takes the gradient there.
  const wins = () => (op === "fmax" ? x.ge(y) : x.le(y)).maximum(y.ne(y));
  const out = computed(() => x.where(wins(), y));
  return recordBinary(op, x, y, out, (g) => {
    const xWins = wins();
    return [g.where(xWins, 0), g.where(xWins.eq(0), 0)];
  });
}

/**
 * The larger operand, the other where one is NaN (NaN only where both are),
 * as `torch.fmax`. Ties and a NaN `other` give the gradient to `input`, as
 * PyTorch's.
 */
export const fmax = (input: TensorLike, other: TensorLike): Tensor =>
  nanIgnoring("fmax", input, other);

/** The smaller operand, the other where one is NaN, as `torch.fmin`; see {@link fmax}. */
export const fmin = (input: TensorLike, other: TensorLike): Tensor =>
  nanIgnoring("fmin", input, other);

/**
 * `input ** exponent` in float64, as `torch.float_power` (the result is
 * float64 whatever the operands). Only on backends with float64 (cpu): the
 * conversion names the device elsewhere. The gradient is `pow`'s.
 */
export function floatPower(input: TensorLike, exponent: TensorLike): Tensor {
  checkPair("floatPower", input, exponent);
  // Each operand straight to float64 (a number stays exact): int32 or a number through
  // float32 first would round, and turn (-1)^(2^24 + 1) into 1.
  const wide = (t: TensorLike) => typeof t === "number" ? t : cast(t, "float64");
  return pow(wide(input), wide(exponent));
}

/**
 * `input · 2^other`, as `torch.ldexp` (PyTorch's `input * pow(2, other)`,
 * so int32 operands give the default dtype). Differentiable in both.
 */
export function ldexp(input: TensorLike, other: TensorLike): Tensor {
  checkPair("ldexp", input, other);
  // The power in the exponent's own float dtype (the default one for int32 or a number), as
  // PyTorch's (so a float64 input times 2^200 from an int32 exponent is inf under float32).
  const exponent = typeof other === "number"
    ? scalar(other, getDefaultDtype(), (input as Tensor).device)
    : isFloat(other.dtype)
    ? other
    : cast(other, getDefaultDtype());
  return mul(input, pow(scalar(2, exponent.dtype, exponent.device), exponent));
}

/** Euclid's steps enough for any int32 pair (consecutive Fibonacci numbers below 2^31 take 45). */
const EUCLID_STEPS = 46;

/**
 * The greatest common divisor, as `torch.gcd`: int32 operands, never
 * negative except `gcd(-2^31, 0)` (PyTorch's wrap), `gcd(0, 0) = 0`. Runs a
 * fixed number of Euclid steps, so every backend computes it without reading
 * the device.
 */
export function gcd(input: TensorLike, other: TensorLike): Tensor {
  const [x, y] = typed("gcd", input, other, "int");
  return computed(() => {
    const start: [Tensor, Tensor] = [x.abs().add(y.mul(0)), y.abs().add(x.mul(0))];
    // Each step in a scope of its own (the pair it replaces freed): 334 arrays of the
    // operands' size at the peak when every step's were kept.
    const [a] = scopedRounds(EUCLID_STEPS, start, ([a, b]) => {
      const live = b.ne(0);
      const divisor = b.where(live, 1);
      const r = a.sub(binaryRaw("div", a, divisor).mul(divisor));
      return [b.where(live, a), r.where(live, 0)];
    });
    return a;
  });
}

/**
 * The least common multiple, as `torch.lcm`: int32 operands,
 * `|x / gcd · y|` (wrapping as PyTorch's when it overflows), 0 when either
 * is 0.
 */
export function lcm(input: TensorLike, other: TensorLike): Tensor {
  const [x, y] = typed("lcm", input, other, "int");
  const g = gcd(x, y);
  return computed(() => {
    const live = g.ne(0);
    const divisor = g.where(live, 1);
    return binaryRaw("div", x, divisor).mul(y).abs().where(live, 0);
  });
}

/** A bitwise kernel on promoted int32 operands. */
function bitwise(
  op: "bitwiseAnd" | "bitwiseOr" | "bitwiseXor" | "leftShift" | "rightShift",
  name: string,
  a: TensorLike,
  b: TensorLike,
): Tensor {
  const [x, y] = typed(name, a, b, "int");
  return binaryRaw(op, x, y);
}

/** Bitwise AND of int32 operands, as `torch.bitwise_and`. */
export const bitwiseAnd = (input: TensorLike, other: TensorLike): Tensor =>
  bitwise("bitwiseAnd", "bitwiseAnd", input, other);
/** Bitwise OR of int32 operands, as `torch.bitwise_or`. */
export const bitwiseOr = (input: TensorLike, other: TensorLike): Tensor =>
  bitwise("bitwiseOr", "bitwiseOr", input, other);
/** Bitwise exclusive OR of int32 operands, as `torch.bitwise_xor`. */
export const bitwiseXor = (input: TensorLike, other: TensorLike): Tensor =>
  bitwise("bitwiseXor", "bitwiseXor", input, other);
/**
 * `input << other` on int32, as `torch.bitwise_left_shift`: bits shifted
 * out are lost; the count is taken modulo 32, as PyTorch 1.13's cpu kernels
 * (so a count of 33 shifts by 1, and -1 by 31).
 */
export const bitwiseLeftShift = (input: TensorLike, other: TensorLike): Tensor =>
  bitwise("leftShift", "bitwiseLeftShift", input, other);
/**
 * `input >> other` on int32 (arithmetic: the sign fills), as
 * `torch.bitwise_right_shift`; the count is taken modulo 32, see
 * {@link bitwiseLeftShift}.
 */
export const bitwiseRightShift = (input: TensorLike, other: TensorLike): Tensor =>
  bitwise("rightShift", "bitwiseRightShift", input, other);

/** `~input` on int32 (`-input - 1`), as `torch.bitwise_not`. */
export function bitwiseNot(input: Tensor): Tensor {
  if (isFloat(input.dtype)) {
    throw new TypeError(
      `bitwiseNot: expected an int32 tensor, got ${input.dtype} (shape ${
        formatShape(input.shape)
      }); for 0/1 masks use logicalNot`,
    );
  }
  return binaryRaw("bitwiseXor", input, scalar(-1, "int32", input.device));
}

/** `input * other`, as `torch.multiply` (an alias of `mul`). */
export const multiply = (input: TensorLike, other: TensorLike): Tensor => mul(input, other);

/** Options of {@link subtract} and {@link rsub}. */
export interface SubtractOptions {
  /** The multiplier of the subtracted operand (default 1). */
  alpha?: number;
}

/** `input - alpha·other`, as `torch.subtract` / `torch.sub` with `alpha`. */
export function subtract(
  input: TensorLike,
  other: TensorLike,
  options: SubtractOptions = {},
): Tensor {
  const { alpha = 1 } = options;
  // PyTorch checks alpha against the common dtype: int32 only if no operand is float.
  const ints = [input, other].every((t) =>
    typeof t === "number" ? Number.isInteger(t) : !isFloat(t.dtype)
  );
  if (ints && !Number.isInteger(alpha)) {
    throw new TypeError(`subtract: alpha must be an integer for int32 operands, got ${alpha}`);
  }
  if (alpha === 1) return sub(input, other);
  return sub(input, typeof other === "number" ? other * alpha : mul(other, alpha));
}

/** `other - alpha·input` (the operands reversed), as `torch.rsub`. */
export const rsub = (input: TensorLike, other: TensorLike, options: SubtractOptions = {}): Tensor =>
  subtract(other, input, options);

/** `input / other` (true division; int32 gives float32), as `torch.true_divide`. */
export const trueDivide = (input: TensorLike, other: TensorLike): Tensor => div(input, other);

/** Options of {@link divide}. */
export interface DivideOptions {
  /**
   * Omitted: true division. `"trunc"`: rounded toward zero. `"floor"`:
   * rounded toward -inf (as {@link floorDivide}). With a rounding mode,
   * int32 stays int32 and a zero int32 divisor is an error.
   */
  roundingMode?: "trunc" | "floor";
}

/**
 * `input / other`, as `torch.divide` / `torch.div` with `rounding_mode`.
 * With a rounding mode the gradient is zero for both operands (PyTorch's).
 */
export function divide(input: TensorLike, other: TensorLike, options: DivideOptions = {}): Tensor {
  const { roundingMode } = options;
  if (roundingMode === undefined) return div(input, other);
  if (roundingMode !== "trunc" && roundingMode !== "floor") {
    throw new RangeError(
      `divide: roundingMode must be "trunc", "floor" or omitted, got ${
        JSON.stringify(roundingMode)
      }`,
    );
  }
  const [x, y] = operands("divide", input, other);
  if (roundingMode === "floor") {
    const out = floorDivide(x, y);
    if (!isFloat(x.dtype)) return out;
    return recordBinary("divide", x, y, out, (g) => [g.zerosLike(), g.zerosLike()]);
  }
  checkNoZeroDivisor("divide", y);
  if (!isFloat(x.dtype)) return computed(() => binaryRaw("div", x, y));
  const out = computed(() => trunc(x.div(y)));
  return recordBinary("divide", x, y, out, (g) => [g.zerosLike(), g.zerosLike()]);
}

/** `input` clamped below by `min` (a number or a tensor), as `torch.clamp_min`. */
export const clampMin = (input: Tensor, min: TensorLike): Tensor => clamp(input, min);
/** `input` clamped above by `max` (a number or a tensor), as `torch.clamp_max`. */
export const clampMax = (input: Tensor, max: TensorLike): Tensor => clamp(input, undefined, max);
/** Clamps into [min, max], as `torch.clip` (an alias of `clamp`). */
export const clip = (input: Tensor, min?: TensorLike, max?: TensorLike): Tensor =>
  clamp(input, min, max);

/** {@link atan2} (`torch.arctan2`). */
export const arctan2 = (input: TensorLike, other: TensorLike): Tensor => atan2(input, other);
