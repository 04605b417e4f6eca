/**
 * In-place operations, as PyTorch's trailing-underscore methods: `zero_`,
 * `fill_`, `copy_`, `add_`, `mul_`. Each writes into the tensor's own
 * memory (views sharing it see the change) and bumps its version counter,
 * so a backward that saved the old values raises instead of computing a
 * wrong gradient. A tensor that requires grad is refused while grad mode is
 * on (autograd would need its old values); inside `noGrad` it is allowed,
 * as PyTorch allows parameter updates there.
 * @module
 */

import { isGradEnabled, noGrad } from "../autograd.ts";
import { isFloat, promoteTypes } from "../dtype.ts";
import { formatShape, sameShape } from "../shape.ts";
import { Tensor } from "../tensor.ts";
import { add, cast, mul } from "./elementwise.ts";
import { expand } from "./view.ts";
import { launch, type TensorLike } from "./util.ts";
import { toDevice } from "./transfer.ts";

/** Throws unless autograd lets `t` change in place now. */
function checkInPlace(op: string, t: Tensor): void {
  if (!(t instanceof Tensor)) throw new TypeError(`${op}: expected a Tensor, got ${typeof t}`);
  if (isGradEnabled() && t.requiresGrad) {
    const what = t.isLeaf
      ? "a leaf tensor that requires grad"
      : `a tensor made by ${t.gradFn?.name ?? "an op"} that autograd still needs`;
    throw new Error(
      `${op}: ${what} (shape ${
        formatShape(t.shape)
      }, ${t.dtype}) cannot be changed in place while gradients are recorded: backward would need its old values. Run it inside noGrad(), or use the out-of-place form (e.g. x.add(y) instead of x.add_(y)).`,
    );
  }
}

/** `value` on `t`'s device, broadcast to `t`'s shape, in `t`'s dtype (PyTorch's copy_ rules). */
function shapedLike(op: string, value: Tensor, t: Tensor): Tensor {
  let v = value.device === t.device ? value : toDevice(value, t.device);
  if (!sameShape(v.shape, t.shape)) {
    try {
      v = expand(v, [...t.shape]);
    } catch (error) {
      throw new RangeError(
        `${op}: a value of shape ${
          formatShape(value.shape)
        } does not broadcast to the tensor's shape ${formatShape(t.shape)}`,
        { cause: error },
      );
    }
  }
  return cast(v, t.dtype);
}

/** Sets every element to `value` in place; returns `t`. */
export function fill_(t: Tensor, value: number | Tensor): Tensor {
  checkInPlace("fill_", t);
  if (value instanceof Tensor) {
    if (value.numel() !== 1) {
      throw new RangeError(
        `fill_: a tensor value must have one element, got shape ${formatShape(value.shape)}`,
      );
    }
    t._assign(shapedLike("fill_", value.reshape([]), t));
    return t;
  }
  if (typeof value !== "number") {
    throw new TypeError(
      `fill_: value must be a number or a one-element Tensor, got ${typeof value}`,
    );
  }
  if (!isFloat(t.dtype) && !Number.isInteger(value)) {
    throw new TypeError(`fill_: cannot fill an ${t.dtype} tensor with ${value}`);
  }
  const n = t.numel();
  if (n > 0) {
    launch(t.device, "fill", { out: t.storage.buffer("fill_"), numel: n, value, dtype: t.dtype });
  }
  t.storage.markModified();
  return t;
}

/** Sets every element to 0 in place; returns `t`. */
export function zero_(t: Tensor): Tensor {
  checkInPlace("zero_", t);
  return fill_(t, 0);
}

/**
 * Copies `src` into `t` in place, broadcasting it to `t`'s shape and
 * converting its dtype and device; returns `t`.
 */
export function copy_(t: Tensor, src: Tensor): Tensor {
  checkInPlace("copy_", t);
  if (!(src instanceof Tensor)) {
    throw new TypeError(`copy_: src must be a Tensor, got ${typeof src}`);
  }
  t._assign(shapedLike("copy_", src, t));
  return t;
}

/** The result of `op(t, other)` written back into `t`, which keeps its shape and dtype. */
function updateInPlace(
  op: string,
  t: Tensor,
  other: TensorLike,
  compute: (a: Tensor, b: TensorLike) => Tensor,
): Tensor {
  checkInPlace(op, t);
  if (isGradEnabled() && other instanceof Tensor && other.requiresGrad) {
    throw new Error(
      `${op}: the other operand requires grad, so the result would need a gradient history the tensor (shape ${
        formatShape(t.shape)
      }) cannot take in place; use the out-of-place form, or noGrad()`,
    );
  }
  const otherDtype = other instanceof Tensor
    ? other.dtype
    : Number.isInteger(other)
    ? t.dtype
    : "float32";
  if (promoteTypes(t.dtype, otherDtype) !== t.dtype) {
    throw new TypeError(
      `${op}: the result type ${
        promoteTypes(t.dtype, otherDtype)
      } cannot be stored in the ${t.dtype} tensor`,
    );
  }
  const b = other instanceof Tensor && other.device !== t.device
    ? toDevice(other, t.device)
    : other;
  const result = noGrad(() => compute(t, b));
  if (!sameShape(result.shape, t.shape)) {
    throw new RangeError(
      `${op}: the result of shape ${formatShape(result.shape)} does not fit the tensor's shape ${
        formatShape(t.shape)
      } (the other operand may only broadcast to it)`,
    );
  }
  const value = cast(result, t.dtype);
  t._assign(value);
  // Freed once the copy has run.
  value.dispose();
  result.dispose();
  return t;
}

/** Options of {@link add_}. */
export interface AddInPlaceOptions {
  /** Multiplies `other` first (default 1), as PyTorch's `alpha`. */
  alpha?: number;
}

/** `t += alpha * other` in place (other broadcasts to `t`); returns `t`. */
export function add_(t: Tensor, other: TensorLike, options: AddInPlaceOptions = {}): Tensor {
  const alpha = options.alpha ?? 1;
  return updateInPlace(
    "add_",
    t,
    other,
    (a, b) => add(a, alpha === 1 ? b : typeof b === "number" ? b * alpha : mul(b, alpha)),
  );
}

/** `t *= other` in place (other broadcasts to `t`); returns `t`. */
export function mul_(t: Tensor, other: TensorLike): Tensor {
  return updateInPlace("mul_", t, other, (a, b) => mul(a, b));
}
