/**
 * `cdist`: pairwise p-norm distances between two sets of row vectors.
 * @module
 */

import { noGrad, record } from "../autograd.ts";
import { formatShape } from "../shape.ts";
import { forwardScope, tidy } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import { cast, sumTo } from "../ops/elementwise.ts";
import { requireFloat } from "../ops/util.ts";
import { norm } from "./reduce.ts";
import { owned } from "./owned.ts";

/** Options of {@link cdist}. */
export interface CdistOptions {
  /** The norm's p: any number ≥ 0, `Infinity` included (default 2). */
  p?: number;
}

/**
 * The p-norm distance between every row of `x1` ([..., P, M]) and every row
 * of `x2` ([..., R, M]), as `torch.cdist`: [..., P, R], batch dims
 * broadcast. Float tensors of one dtype. Computed from the differences of
 * all pairs ([..., P, R, M] at once), as PyTorch does below 25 rows; it does
 * not switch to PyTorch's matrix-product form for p = 2 on larger inputs
 * (more memory, better accuracy). The gradient is PyTorch's: 0 where a
 * distance is 0, none for p = 0; at p = ∞, each coordinate tying for the
 * largest difference gets the whole gradient, as PyTorch's.
 */
export function cdist(x1: Tensor, x2: Tensor, options: CdistOptions = {}): Tensor {
  return owned(
    () => {
      const { p = 2 } = options;
      if (!(x1 instanceof Tensor) || !(x2 instanceof Tensor)) {
        throw new TypeError(`cdist: expected Tensors, got ${typeof x1} and ${typeof x2}`);
      }
      requireFloat("cdist", x1);
      requireFloat("cdist", x2);
      if (typeof p !== "number" || !(p >= 0)) {
        throw new RangeError(`cdist: p must be a number ≥ 0, got ${p}`);
      }
      const shapes = `${formatShape(x1.shape)} and ${formatShape(x2.shape)}`;
      if (x1.ndim < 2 || x2.ndim < 2) {
        throw new RangeError(`cdist: expected at least 2-D tensors [..., rows, M], got ${shapes}`);
      }
      if (x1.shape.at(-1) !== x2.shape.at(-1)) {
        throw new RangeError(`cdist: the last dims (vector sizes) differ: ${shapes}`);
      }
      if (x1.dtype !== x2.dtype) {
        throw new TypeError(
          `cdist: dtypes differ (${x1.dtype} and ${x2.dtype}) for shapes ${shapes}`,
        );
      }
      if (p === Infinity) return cdistInf(x1, x2);
      return forwardScope(() => {
        const diff = x1.unsqueeze(-2).sub(x2.unsqueeze(-3));
        return norm(diff, p, -1);
      });
    },
    x1,
    x2,
  );
}

/**
 * p = ∞ with PyTorch's gradient: every coordinate whose difference ties for
 * the largest gets the whole `g·sign(diff)` (the max's own gradient would
 * share it out among them).
 */
function cdistInf(x1: Tensor, x2: Tensor): Tensor {
  return forwardScope(() => {
    const [out, weight] = noGrad(() =>
      tidy(() => {
        const diff = x1.unsqueeze(-2).sub(x2.unsqueeze(-3));
        const out = norm(diff, Infinity, -1);
        const top = cast(diff.abs().eq(out.unsqueeze(-1)), diff.dtype);
        return [out, diff.sign().mul(top)];
      })
    );
    return record("cdist", [x1, x2], out, ([g]) => {
      const gd = g!.unsqueeze(-1).mul(weight);
      return [
        x1.requiresGrad ? sumTo(gd.sum(-2), x1.shape) : null,
        x2.requiresGrad ? sumTo(gd.sum(-3).neg(), x2.shape) : null,
      ];
    });
  });
}
