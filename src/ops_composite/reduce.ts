/**
 * Reductions beyond the core's: `amax`, `amin`, `norm`, `all`, `any`.
 * @module
 */

import { noGrad, record } from "../autograd.ts";
import { formatShape, normalizeDim } from "../shape.ts";
import { tidy } from "../storage.ts";
import type { Tensor } from "../tensor.ts";
import { reduceKeepdim } from "../ops/reduce.ts";
import { clone } from "../ops/view.ts";
import { requireFloat } from "../ops/util.ts";
import { dimList, keptShape } from "./util.ts";

function extremes(
  op: "amax" | "amin",
  x: Tensor,
  dims: number | readonly number[] | undefined,
  keepdim: boolean,
): Tensor {
  const list = dimList(x, dims, op);
  if (x.ndim === 0) return clone(x);
  for (const d of list) {
    if (x.shape[d] === 0) {
      throw new RangeError(
        `${op}: cannot reduce dim ${d} of size 0 (shape ${formatShape(x.shape)}): it has no ${
          op === "amax" ? "maximum" : "minimum"
        }`,
      );
    }
  }
  const kept = keptShape(x.shape, list);
  const reduced = noGrad(() =>
    tidy(() => list.reduce((y, d) => reduceKeepdim(op === "amax" ? "max" : "min", y, d), x))
  );
  const out = keepdim ? reduced : reduced.reshape(x.shape.filter((_, i) => !list.includes(i)));
  return record(op, [x], out, ([g]) => {
    // PyTorch's `scale_grad_by_count`: shared evenly by the ties; a NaN result ties nothing, so
    // its slice gets NaN (g/0·0), as in PyTorch.
    const ties = x.eq(reduced);
    return [g!.reshape(kept).div(ties.sum(list, true)).mul(ties)];
  });
}

/**
 * The maximum over `dims` (every dim when omitted or empty), as `torch.amax`:
 * unlike {@link max} over a dim, the gradient is shared evenly by ties.
 */
export const amax = (x: Tensor, dims?: number | readonly number[], keepdim = false): Tensor =>
  extremes("amax", x, dims, keepdim);
/** The minimum over `dims`, as `torch.amin` (ties share the gradient). */
export const amin = (x: Tensor, dims?: number | readonly number[], keepdim = false): Tensor =>
  extremes("amin", x, dims, keepdim);

/**
 * The vector `p`-norm over `dim` (every dim when omitted), as `torch.norm`
 * with a number `p` (`"fro"` is 2): `p` = 2, 1, `Infinity` (max |x|),
 * `-Infinity` (min |x|), 0 (the count of nonzeros) or any other number
 * (`(Σ|x|^p)^(1/p)`). Float tensors; float32 sums in float32, as PyTorch's
 * cpu kernel (`[3e19, 4e19]` has norm inf there too). The gradient is
 * PyTorch's `norm_backward`: 0 at a zero norm (not NaN), ties of ±inf share
 * it, none for p = 0.
 */
export function norm(
  x: Tensor,
  p: number | "fro" = 2,
  dim?: number | readonly number[],
  keepdim = false,
): Tensor {
  requireFloat("norm", x);
  const q = p === "fro" ? 2 : p;
  if (typeof q !== "number" || Number.isNaN(q)) {
    throw new TypeError(`norm: p must be a number or "fro", got ${JSON.stringify(p)}`);
  }
  const dims = dimList(x, dim, "norm");
  if (p === "fro" && dims.length > 2) {
    throw new RangeError(`norm: "fro" takes at most 2 dims, got ${JSON.stringify(dim)}`);
  }
  const over = (t: Tensor) => t.sum(dims, keepdim);
  // PyTorch's norm of no elements is 0 for every p, ±inf included (which have no max or min).
  const empty = dims.some((d) => x.shape[d] === 0);
  const out = noGrad(() => {
    if (!Number.isFinite(q) && empty) return over(x.abs());
    if (q === Infinity) return amax(x.abs(), dims, keepdim);
    if (q === -Infinity) return amin(x.abs(), dims, keepdim);
    if (q === 0) return over(x.ne(0));
    if (q === 1) return over(x.abs());
    if (q === 2) return over(x.mul(x)).sqrt();
    return over(x.abs().pow(q)).pow(1 / q);
  });
  return record("norm", [x], out, ([g]) => {
    if (q === 0) return [null];
    const kept = keptShape(x.shape, dims);
    const gk = g!.reshape(kept);
    const nk = out.reshape(kept);
    if (q === 1) return [x.sign().mul(gk)];
    if (q === 2) return [gk.mul(x.div(nk).where(nk.ne(0), 0))];
    if (!Number.isFinite(q)) {
      const size = x.abs();
      const ties = size.eq(nk).maximum(size.ne(size)); // NaN counts as the extreme
      return [x.sign().mul(gk.div(ties.sum(dims, true)).mul(ties))];
    }
    if (q < 1) {
      const scaled = x.sign().mul(x.abs().pow(q - 1).where(x.ne(0), 0));
      return [scaled.mul(gk).mul(nk.pow(1 - q))];
    }
    const scale = gk.div(nk.pow(q - 1)).where(nk.ne(0), 0);
    const scaled = q < 2 ? x.sign().mul(x.abs().pow(q - 1)) : x.mul(x.abs().pow(q - 2));
    return [scaled.mul(scale)];
  });
}

function truth(op: "all" | "any", x: Tensor, dim: number | undefined, keepdim: boolean): Tensor {
  const dims = dim === undefined ? undefined : normalizeDim(dim, x.ndim, op);
  // Counting zeros (nonzeros) rather than taking a min (max) makes empty slices true (false).
  return noGrad(() => {
    const count = (op === "all" ? x.eq(0) : x.ne(0)).sum(dims, keepdim);
    return op === "all" ? count.eq(0) : count.ne(0);
  });
}

/**
 * 1 where every element (along `dim`) is nonzero, else 0, as `torch.all`.
 * PyTorch gives bool; multigrad has no bool dtype, so the result is 1/0 in
 * the input's dtype, as comparisons give (NaN counts as nonzero).
 */
export const all = (x: Tensor, dim?: number, keepdim = false): Tensor =>
  truth("all", x, dim, keepdim);
/** 1 where some element (along `dim`) is nonzero, else 0, in the input's dtype (`torch.any`). */
export const any = (x: Tensor, dim?: number, keepdim = false): Tensor =>
  truth("any", x, dim, keepdim);
