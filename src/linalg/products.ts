/**
 * Products: `multiDot`, `cross`.
 * @module
 */

import { cat } from "../ops/view.ts";
import { broadcastShapes, formatShape, normalizeDim } from "../shape.ts";
import { forwardScope } from "../storage.ts";
import type { Tensor } from "../tensor.ts";
import { cheapestChain } from "../ops_composite/products.ts";

/**
 * The product of a chain of matrices, as `torch.linalg.multi_dot`: the
 * first may be 1-D (a row vector) and the last 1-D (a column vector),
 * the others 2-D; the result drops the dims of 1-D ends. The order of the
 * products is the cheapest one (the classic dynamic program), as PyTorch's.
 */
export function multiDot(tensors: readonly Tensor[]): Tensor {
  const op = "multi_dot()";
  if (!Array.isArray(tensors) || tensors.length < 2) {
    throw new RangeError(
      `${op}: expected at least 2 tensors but got ${Array.isArray(tensors) ? tensors.length : 0}`,
    );
  }
  const last = tensors.length - 1;
  tensors.forEach((t, i) => {
    const end = i === 0 ? "the first" : i === last ? "the last" : null;
    if (end ? t.ndim !== 1 && t.ndim !== 2 : t.ndim !== 2) {
      throw new RangeError(
        end
          ? `${op}: ${end} tensor must be 1D or 2D but got ${t.ndim}D`
          : `${op}: tensor ${i} must be 2D but got ${t.ndim}D`,
      );
    }
    if (t.dtype !== tensors[0].dtype) {
      throw new TypeError(
        `${op}: all tensors must have the same dtype, got ${tensors[0].dtype} and ${t.dtype}`,
      );
    }
  });
  return forwardScope(() => {
    const mats = tensors.map((t, i) =>
      t.ndim === 2 ? t : i === 0 ? t.unsqueeze(0) : t.unsqueeze(-1)
    );
    for (let i = 0; i < last; i++) {
      if (mats[i].shape[1] !== mats[i + 1].shape[0]) {
        throw new RangeError(
          `${op}: tensors ${i} and ${i + 1} with shapes ${formatShape(tensors[i].shape)} and ${
            formatShape(tensors[i + 1].shape)
          } cannot be multiplied`,
        );
      }
    }
    let out = cheapestChain(mats);
    if (tensors[last].ndim === 1) out = out.squeeze(-1);
    if (tensors[0].ndim === 1) out = out.squeeze(0);
    return out;
  });
}

/**
 * The cross product of 3-vectors along `dim` (default -1), as
 * `torch.linalg.cross`; the other dims broadcast.
 */
export function cross(a: Tensor, b: Tensor, options: { dim?: number } = {}): Tensor {
  const op = "linalg.cross";
  const { dim = -1 } = options;
  if (a.ndim !== b.ndim) {
    throw new RangeError(
      `${op}: inputs must have the same number of dimensions, got shapes ${
        formatShape(a.shape)
      } and ${formatShape(b.shape)}`,
    );
  }
  const d = normalizeDim(dim, a.ndim, op, false);
  if (a.shape[d] !== 3 || b.shape[d] !== 3) {
    throw new RangeError(
      `${op}: inputs dimension ${dim} must have length 3. Got ${a.shape[d]} and ${b.shape[d]}`,
    );
  }
  const shape = broadcastShapes(a.shape, b.shape, op);
  return forwardScope(() => {
    const ae = a.expand(shape);
    const be = b.expand(shape);
    const at = (t: Tensor, i: number) => t.narrow(d, i % 3, 1);
    return cat(
      [0, 1, 2].map((i) => at(ae, i + 1).mul(at(be, i + 2)).sub(at(ae, i + 2).mul(at(be, i + 1)))),
      d,
    );
  });
}
