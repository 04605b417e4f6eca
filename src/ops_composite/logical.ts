/**
 * Comparisons and logical ops, as PyTorch's: `eq`, `ne`, `lt`, `le`, `gt`,
 * `ge` as functions and their long names (`greater`, `greaterEqual`,
 * `less`, `lessEqual`, `notEqual`), `logicalAnd/Or/Xor/Not`, `isclose`,
 * `allclose` and `equal` (async: they read the device), `isneginf`,
 * `isposinf`, `isreal`.
 *
 * multigrad has no bool dtype: every mask here is 1 or 0 in the operands'
 * promoted dtype, as the core's comparisons give it (PyTorch returns bool).
 * @module
 */

import { noGrad } from "../autograd.ts";
import { isFloat } from "../dtype.ts";
import { formatShape, sameShape } from "../shape.ts";
import { Tensor } from "../tensor.ts";
import { cast, compare, operands } from "../ops/elementwise.ts";
import { full } from "../ops/factory.ts";
import { commonDevice, type TensorLike } from "../ops/util.ts";
import { all } from "./reduce.ts";
import { computed } from "./util.ts";

/** 1 where `input == other`, else 0 (`torch.eq`). */
export const eq = (input: TensorLike, other: TensorLike): Tensor => compare("eq", input, other);
/** 1 where `input != other` (NaN differs from everything), as `torch.ne`. */
export const ne = (input: TensorLike, other: TensorLike): Tensor => compare("ne", input, other);
/** 1 where `input < other`, as `torch.lt`. */
export const lt = (input: TensorLike, other: TensorLike): Tensor => compare("lt", input, other);
/** 1 where `input <= other`, as `torch.le`. */
export const le = (input: TensorLike, other: TensorLike): Tensor => compare("le", input, other);
/** 1 where `input > other`, as `torch.gt`. */
export const gt = (input: TensorLike, other: TensorLike): Tensor => compare("gt", input, other);
/** 1 where `input >= other`, as `torch.ge`. */
export const ge = (input: TensorLike, other: TensorLike): Tensor => compare("ge", input, other);
/** {@link gt} (`torch.greater`). */
export const greater: typeof gt = gt;
/** {@link ge} (`torch.greater_equal`). */
export const greaterEqual: typeof ge = ge;
/** {@link lt} (`torch.less`). */
export const less: typeof lt = lt;
/** {@link le} (`torch.less_equal`). */
export const lessEqual: typeof le = le;
/** {@link ne} (`torch.not_equal`). */
export const notEqual: typeof ne = ne;

/** Both operands promoted, each as 1 where nonzero (NaN counts as true, as in PyTorch). */
function truths(op: string, input: TensorLike, other: TensorLike): [Tensor, Tensor] {
  const [x, y] = operands(op, input, other);
  return [x.ne(0), y.ne(0)];
}

/** 1 where both are nonzero, as `torch.logical_and`. */
export const logicalAnd = (input: TensorLike, other: TensorLike): Tensor =>
  computed(() => {
    const [x, y] = truths("logicalAnd", input, other);
    return x.mul(y);
  });
/** 1 where either is nonzero, as `torch.logical_or`. */
export const logicalOr = (input: TensorLike, other: TensorLike): Tensor =>
  computed(() => {
    const [x, y] = truths("logicalOr", input, other);
    return x.maximum(y);
  });
/** 1 where exactly one is nonzero, as `torch.logical_xor`. */
export const logicalXor = (input: TensorLike, other: TensorLike): Tensor =>
  computed(() => {
    const [x, y] = truths("logicalXor", input, other);
    return x.ne(y);
  });
/** 1 where zero, in the input's dtype, as `torch.logical_not` (NaN is true, so gives 0). */
export const logicalNot = (input: Tensor): Tensor => noGrad(() => input.eq(0));

/** Options of {@link isclose} and {@link allclose} (PyTorch's defaults). */
export interface IscloseOptions {
  /** Relative tolerance, at least 0 (default 1e-5). */
  rtol?: number;
  /** Absolute tolerance, at least 0 (default 1e-8). */
  atol?: number;
  /** Whether NaN is close to NaN (default false). */
  equalNan?: boolean;
}

/**
 * 1 where `|input - other| <= atol + rtol·|other|` or the two are equal (so
 * equal infinities are close), as `torch.isclose`; NaN is close to NaN only
 * with `equalNan`. Tensors of one dtype (PyTorch's rule; a number `other`
 * takes the input's), broadcast; int32 operands are compared in float32 (so
 * their difference cannot wrap), and zero tolerances are an equality check.
 */
export function isclose(input: Tensor, other: TensorLike, options: IscloseOptions = {}): Tensor {
  const { rtol = 1e-5, atol = 1e-8, equalNan = false } = options;
  for (const [name, value] of [["rtol", rtol], ["atol", atol]] as const) {
    if (!(value >= 0)) {
      throw new RangeError(`isclose: ${name} must be a number >= 0, got ${value}`);
    }
  }
  if (other instanceof Tensor && other.dtype !== input.dtype) {
    throw new TypeError(
      `isclose: input is ${input.dtype} (shape ${
        formatShape(input.shape)
      }) but other is ${other.dtype} (shape ${
        formatShape(other.shape)
      }); PyTorch requires one dtype`,
    );
  }
  const [x, y] = operands("isclose", input, other);
  return computed(() => {
    let close = x.eq(y);
    if (equalNan && isFloat(x.dtype)) close = close.maximum(x.ne(x).mul(y.ne(y)));
    if (rtol === 0 && atol === 0) return close;
    // As PyTorch: int32 is compared in float32, so the difference cannot wrap.
    const [fx, fy] = isFloat(x.dtype) ? [x, y] : [cast(x, "float32"), cast(y, "float32")];
    const error = fx.sub(fy).abs();
    const finiteClose = error.le(fy.mul(rtol).abs().add(atol)).mul(error.lt(Infinity));
    return close.maximum(cast(finiteClose, x.dtype));
  });
}

/**
 * Whether every element is {@link isclose} to `other`, as `torch.allclose`.
 * Async: the answer is read from the device (a Promise, as TensorFlow.js's
 * `*Async` reads).
 */
export async function allclose(
  input: Tensor,
  other: TensorLike,
  options: IscloseOptions = {},
): Promise<boolean> {
  const verdict = computed(() => all(isclose(input, other, options)));
  return (await verdict.item()) !== 0;
}

/**
 * Whether the two tensors have the same shape and equal elements, as
 * `torch.equal` (false for different shapes, and wherever a NaN is; dtypes
 * promote, so int32 `1` equals float `1.0`, as in PyTorch 1.13). Async: the
 * answer is read from the device.
 */
export async function equal(input: Tensor, other: Tensor): Promise<boolean> {
  if (!(input instanceof Tensor) || !(other instanceof Tensor)) {
    throw new TypeError(
      `equal: expected two Tensors, got ${typeof input} and ${typeof other}`,
    );
  }
  commonDevice("equal", input, other);
  if (!sameShape(input.shape, other.shape)) return false;
  if (input.numel() === 0) return true;
  const verdict = computed(() => all(compare("eq", input, other)));
  return (await verdict.item()) !== 0;
}

/** 1 where the element is -inf, in the input's dtype, as `torch.isneginf`. */
export const isneginf = (input: Tensor): Tensor =>
  isFloat(input.dtype) ? noGrad(() => input.eq(-Infinity)) : noGrad(() => input.mul(0));
/** 1 where the element is +inf, in the input's dtype, as `torch.isposinf`. */
export const isposinf = (input: Tensor): Tensor =>
  isFloat(input.dtype) ? noGrad(() => input.eq(Infinity)) : noGrad(() => input.mul(0));
/** 1 everywhere (multigrad has no complex dtypes), in the input's dtype, as `torch.isreal`. */
export const isreal = (input: Tensor): Tensor =>
  full([...input.shape], 1, { dtype: input.dtype, device: input.device });
