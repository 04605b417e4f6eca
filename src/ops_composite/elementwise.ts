/**
 * Elementwise ops composed from the core's kernels: `isnan`, `isinf`,
 * `isfinite`, `nanToNum`, `trunc`, `frac`, `erf`, `lerp`.
 * @module
 */

import { noGrad, record } from "../autograd.ts";
import { getDefaultDtype, isFloat } from "../dtype.ts";
import { broadcastShapes, formatShape } from "../shape.ts";
import { Tensor } from "../tensor.ts";
import { cast, sumTo, unaryRaw } from "../ops/elementwise.ts";
import { full } from "../ops/factory.ts";
import { clone } from "../ops/view.ts";
import { commonDevice, requireFloat, type TensorLike } from "../ops/util.ts";

// Masks are 1/0 in the input's dtype, as comparisons give them (there is no bool dtype).
const constant = (x: Tensor, value: number) =>
  full([...x.shape], value, { dtype: x.dtype, device: x.device });

/** 1 where the element is NaN, else 0, in the input's dtype (`torch.isnan`). */
export const isnan = (x: Tensor): Tensor => isFloat(x.dtype) ? x.ne(x) : constant(x, 0);
/** 1 where the element is +inf or -inf, else 0, in the input's dtype (`torch.isinf`). */
export const isinf = (x: Tensor): Tensor =>
  isFloat(x.dtype) ? noGrad(() => x.abs().eq(Infinity)) : constant(x, 0);
/** 1 where the element is neither NaN nor infinite, else 0, in the input's dtype. */
export const isfinite = (x: Tensor): Tensor =>
  isFloat(x.dtype) ? noGrad(() => x.abs().lt(Infinity)) : constant(x, 1);

/** Options of {@link nanToNum}: the replacements (PyTorch's defaults when omitted). */
export interface NanToNumOptions {
  /** For NaN (default 0). */
  nan?: number;
  /** For +inf (default the dtype's largest finite value). */
  posinf?: number;
  /** For -inf (default the dtype's lowest finite value). */
  neginf?: number;
}

/**
 * NaN, +inf and -inf replaced, as `torch.nan_to_num`; int32 is copied. The
 * gradient passes where the input is finite and is 0 where it was replaced.
 */
export function nanToNum(x: Tensor, options: NanToNumOptions = {}): Tensor {
  if (!isFloat(x.dtype)) return clone(x);
  const big = x.dtype === "float32" ? 3.4028234663852886e38 : Number.MAX_VALUE;
  const { nan = 0, posinf = big, neginf = -big } = options;
  const out = noGrad(() =>
    x.where(x.eq(x), nan).where(x.ne(Infinity), posinf).where(x.ne(-Infinity), neginf)
  );
  return record("nanToNum", [x], out, ([g]) => [g!.mul(isfinite(x))]);
}

/** Rounded toward zero, as `torch.trunc` (int32 is copied); zero gradient. */
export function trunc(x: Tensor): Tensor {
  if (!isFloat(x.dtype)) return clone(x);
  const out = noGrad(() => x.ceil().where(x.lt(0), x.floor()));
  return record("trunc", [x], out, ([g]) => [g!.zerosLike()]);
}

/** `x - trunc(x)`, sign kept, as `torch.frac` (float; NaN at ±inf); the gradient passes. */
export function frac(x: Tensor): Tensor {
  requireFloat("frac", x);
  const out = noGrad(() => x.sub(trunc(x)));
  return record("frac", [x], out, ([g]) => [g]);
}

/** The error function, as `torch.erf` (int32 becomes the default dtype, as PyTorch promotes it). */
export function erf(x: Tensor): Tensor {
  const v = isFloat(x.dtype) ? x : cast(x, getDefaultDtype());
  const out = unaryRaw("erf", v);
  return record("erf", [v], out, ([g]) => [
    v.square().neg().exp().mul(2 / Math.sqrt(Math.PI)).mul(g!),
  ]);
}

/**
 * `x + weight·(end - x)`, as `torch.lerp`: float tensors of one dtype,
 * `weight` a number or a tensor, all three broadcast. As PyTorch, weights of
 * 0.5 and above use `end - (end - x)·(1 - weight)`, so that weight 1 gives
 * `end` exactly; PyTorch fuses each into one multiply-add, multigrad rounds
 * the product first (a last-bit difference).
 */
export function lerp(x: Tensor, end: Tensor, weight: TensorLike): Tensor {
  requireFloat("lerp", x);
  for (const [name, t] of [["end", end], ["weight", weight]] as const) {
    if (name === "end" && !(t instanceof Tensor)) {
      throw new TypeError(`lerp: end must be a Tensor, got ${typeof t}`);
    }
    if (t instanceof Tensor && t.dtype !== x.dtype) {
      throw new TypeError(
        `lerp: ${name} is ${t.dtype} (shape ${
          formatShape(t.shape)
        }), expected ${x.dtype} as the input`,
      );
    }
  }
  if (typeof weight !== "number" && !(weight instanceof Tensor)) {
    throw new TypeError(`lerp: weight must be a number or a Tensor, got ${typeof weight}`);
  }
  const w = typeof weight === "number" ? weight : null;
  commonDevice("lerp", x, end, ...(w === null ? [weight as Tensor] : []));
  const shape = broadcastShapes(x.shape, end.shape, "lerp");
  if (w === null) broadcastShapes(shape, (weight as Tensor).shape, "lerp");
  const narrow = x.dtype === "float32" ? Math.fround : (v: number) => v;
  const out = noGrad(() => {
    const span = end.sub(x);
    if (w !== null) {
      const wt = narrow(w);
      return wt < 0.5 ? x.add(span.mul(wt)) : end.sub(span.mul(narrow(1 - wt)));
    }
    const wt = weight as Tensor;
    const small = x.add(span.mul(wt));
    return small.where(wt.lt(0.5), end.sub(span.mul(wt.neg().add(1))));
  });
  const inputs = w === null ? [x, end, weight as Tensor] : [x, end];
  return record("lerp", inputs, out, ([g]) => {
    const grads = w === null
      ? [g!.mul((weight as Tensor).neg().add(1)), g!.mul(weight), g!.mul(end.sub(x))]
      : [g!.mul(1 - w), g!.mul(w)];
    return grads.map((grad, i) => (inputs[i].requiresGrad ? sumTo(grad, inputs[i].shape) : null));
  });
}
