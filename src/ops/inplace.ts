/**
 * In-place operations, as PyTorch's trailing-underscore methods: `zero_`,
 * `fill_`, `copy_`, `add_`, `mul_`, and {@link inPlace}, which writes any
 * out-of-place op back in place (the other `_` methods, in
 * `src/ops_composite/inplace_variants.ts`). Each writes into the tensor's own
 * memory (views sharing it see the change) and bumps its version counter,
 * so a backward that saved the old values raises instead of computing a
 * wrong gradient. On a non-leaf (or with an operand) that requires grad,
 * the op is recorded: the tensor's node becomes the op's, fed by its old one.
 * A leaf that requires grad is refused outside `noGrad`, as in PyTorch.
 * @module
 */

import { isGradEnabled, noGrad, record } from "../autograd.ts";
import { checkFill, type DType, isFloat, promoteTypes } from "../dtype.ts";
import { formatShape, sameShape } from "../shape.ts";
import { Tensor } from "../tensor.ts";
import { add, cast, mul } from "./elementwise.ts";
import { expand, viewCopies } from "./view.ts";
import { launch, type TensorLike } from "./util.ts";
import { toDevice } from "./transfer.ts";
import { tidy } from "../storage.ts";
import { checkLater } from "./check.ts";

/**
 * Throws unless autograd lets `t` change in place now. When the change must
 * be recorded (grad mode on, `t` or an operand requires grad), returns `t`'s
 * history before it: a tensor on the same memory made by `t`'s old node.
 */
function checkInPlace(op: string, t: Tensor, ...others: unknown[]): Tensor | null {
  if (!(t instanceof Tensor)) throw new TypeError(`${op}: expected a Tensor, got ${typeof t}`);
  // PyTorch would write through to the source; a parameter (persistent) made from one is its own.
  const copiedBy = viewCopies.get(t.storage);
  if (copiedBy && !t.storage.persistent) {
    throw new Error(
      `${op}: the tensor (shape ${
        formatShape(t.shape)
      }) is a copy made by ${copiedBy} (multigrad's views other than reshape copy), so an in-place change would not reach the tensor it came from as in PyTorch. Write into that tensor instead (sliceScatter, indexCopy_, indexPut_, maskedFill_), or clone() first to change a separate copy.`,
    );
  }
  const tracked = t.requiresGrad || others.some((o) => o instanceof Tensor && o.requiresGrad);
  if (!isGradEnabled() || !tracked) return null;
  const what = `${op}: a${t.isLeaf ? " leaf" : ""} tensor (shape ${
    formatShape(t.shape)
  }, ${t.dtype})`;
  if (t.isLeaf && t.requiresGrad) {
    throw new Error(
      `${what} that requires grad cannot be changed in place while gradients are recorded: its .grad would belong to values that no longer exist. Run it inside noGrad() (as optimizers do), or use the out-of-place form (e.g. x.add(y) instead of x.add_(y)).`,
    );
  }
  if (t.storage.aliased) {
    throw new Error(
      `${what} shares its memory with another tensor (a reshape view, or an argument or output of a module with a full backward hook); an in-place change that autograd records would not reach the other one's history (PyTorch's CopySlices is not implemented). Use the out-of-place form, or clone() first.`,
    );
  }
  const old = t.detach();
  if (t.gradFn) old._attach(t.gradFn, t.outputIndex);
  return old;
}

/** Records `t` as overwritten by `value` (null: a constant): its old values get no gradient. */
function recordOverwrite(op: string, t: Tensor, old: Tensor | null, value: Tensor | null): void {
  if (old) record(op, [old, value], t, ([g]) => [old.requiresGrad ? g!.zerosLike() : null, g]);
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

/** {@link checkFill} of a one-element `value`: now if in host memory, else by the next read on its device. */
export function checkFillTensor(dtype: DType, value: Tensor, what: string): void {
  const { backendDevice: backend, stream } = value.device;
  if (dtype === value.dtype || dtype === "float64") return;
  if (!backend.readSync || !stream.idle) {
    return checkLater(value.reshape([1]), (host) => (checkFill(dtype, host[0], what), null));
  }
  checkFill(dtype, backend.readSync(value.storage.buffer(what), 0, 1, value.dtype)[0], what);
}

/** Sets every element to `value` in place; returns `t`. */
export function fill_(t: Tensor, value: number | Tensor): Tensor {
  const old = checkInPlace("fill_", t, value);
  if (value instanceof Tensor) {
    if (value.numel() !== 1) {
      throw new RangeError(
        `fill_: a tensor value must have one element, got shape ${formatShape(value.shape)}`,
      );
    }
    checkFillTensor(t.dtype, value, "fill_");
    const v = shapedLike("fill_", value.reshape([]), t);
    t._assign(v);
    recordOverwrite("fill_", t, old, v);
    return t;
  }
  if (typeof value !== "number") {
    throw new TypeError(
      `fill_: value must be a number or a one-element Tensor, got ${typeof value}`,
    );
  }
  checkFill(t.dtype, value, "fill_");
  const n = t.numel();
  if (n > 0) {
    launch(t.device, "fill", { out: t.storage.buffer("fill_"), numel: n, value, dtype: t.dtype });
  }
  t.storage.markModified();
  recordOverwrite("fill_", t, old, null);
  return t;
}

/** Sets every element to 0 in place; returns `t`. */
export function zero_(t: Tensor): Tensor {
  checkInPlace("zero_", t); // refusals name zero_
  return fill_(t, 0);
}

/**
 * Copies `src` into `t` in place, broadcasting it to `t`'s shape and
 * converting its dtype and device; returns `t`.
 */
export function copy_(t: Tensor, src: Tensor): Tensor {
  if (!(src instanceof Tensor)) {
    throw new TypeError(`copy_: src must be a Tensor, got ${typeof src}`);
  }
  const old = checkInPlace("copy_", t, src);
  const v = shapedLike("copy_", src, t);
  t._assign(v);
  recordOverwrite("copy_", t, old, v);
  return t;
}

/**
 * Writes `compute(self)` back into `t` in place, with the autograd rules of
 * the in-place ops above: `self` is `t` (its history, when the change is
 * recorded); `operands` are the other tensors the result depends on. The
 * result must keep `t`'s shape, and a float result is refused in an int `t`
 * (PyTorch's can_cast). Unless `savesSelf` is false, a recorded op gets a
 * copy of `t`'s old values, since its backward may read what the write replaces.
 */
export function inPlace(
  op: string,
  t: Tensor,
  operands: readonly unknown[],
  compute: (self: Tensor) => Tensor,
  savesSelf = true,
): Tensor {
  const old = checkInPlace(op, t, ...operands);
  // Unrecorded, nothing but the result outlives the op: its intermediates go at once.
  const result = old
    ? compute(savesSelf ? old.clone() : old)
    : noGrad(() => tidy(() => compute(t)));
  if (!sameShape(result.shape, t.shape)) {
    throw new RangeError(
      `${op}: the result of shape ${formatShape(result.shape)} does not fit the tensor's shape ${
        formatShape(t.shape)
      } (the other operands may only broadcast to it)`,
    );
  }
  if (isFloat(result.dtype) && !isFloat(t.dtype)) {
    throw new TypeError(
      `${op}: the result type ${result.dtype} cannot be stored in the ${t.dtype} tensor`,
    );
  }
  if (result.storage === t.storage) return t; // the op changed nothing
  const value = cast(result, t.dtype);
  t._assign(value);
  // The out-of-place op's node becomes t's: its inputs are t's old history and the operands.
  if (value.gradFn) t._attach(value.gradFn, value.outputIndex);
  else recordOverwrite(op, t, old, null); // a result without gradient (eq_, floor_ of ints)
  // Unrecorded, nothing reads them after the copy; recorded, the backward may (exp_ saves its output).
  if (!old) [value, result].forEach((x) => x.dispose());
  return t;
}

/** The result of `op(t, other)` written back into `t`, which keeps its shape and dtype. */
function updateInPlace(
  op: string,
  t: Tensor,
  other: TensorLike,
  compute: (a: Tensor, b: TensorLike) => Tensor,
  savesSelf = false,
): Tensor {
  const otherDtype = other instanceof Tensor
    ? other.dtype
    : Number.isInteger(other)
    ? t.dtype
    : "float32";
  // PyTorch's can_cast: a float result may be stored in any float tensor, never in an int one.
  if (isFloat(promoteTypes(t.dtype, otherDtype)) && !isFloat(t.dtype)) {
    throw new TypeError(
      `${op}: the result type ${
        promoteTypes(t.dtype, otherDtype)
      } cannot be stored in the ${t.dtype} tensor`,
    );
  }
  const b = other instanceof Tensor && other.device !== t.device
    ? toDevice(other, t.device)
    : other;
  // mul_'s gradient for `other` reads the old values, which the write below replaces.
  return inPlace(
    op,
    t,
    [other],
    (a) => compute(a, b),
    savesSelf && other instanceof Tensor && other.requiresGrad,
  );
}

/** Options of {@link add_}. */
export interface AddInPlaceOptions {
  /** Multiplies `other` first (default 1), as PyTorch's `alpha`. */
  alpha?: number;
}

/** `t += alpha * other` in place (other broadcasts to `t`); returns `t`. */
export function add_(t: Tensor, other: TensorLike, options: AddInPlaceOptions = {}): Tensor {
  const alpha = options.alpha ?? 1;
  if (!isFloat(t.dtype) && !Number.isInteger(alpha)) {
    throw new TypeError(`add_: alpha ${alpha} is not an integer, and the tensor is ${t.dtype}`);
  }
  return updateInPlace(
    "add_",
    t,
    other,
    (a, b) => add(a, alpha === 1 ? b : typeof b === "number" ? b * alpha : mul(b, alpha)),
  );
}

/** `t *= other` in place (other broadcasts to `t`); returns `t`. */
export function mul_(t: Tensor, other: TensorLike): Tensor {
  return updateInPlace("mul_", t, other, (a, b) => mul(a, b), true);
}
