/**
 * The argmax PyTorch's max pools take: the first maximum on ties, but of
 * several NaN in a window the last, as their kernels replace the winner when
 * `val > maxval || isnan(val)` (where `argmax` and `max(dim)` take the
 * first NaN). The fused kernels choose the same positions.
 * @module
 */

import { arangeOn } from "../../ops/factory.ts";
import { gatherInRange, where } from "../../ops/indexing.ts";
import type { Tensor } from "../../tensor.ts";

/** int32 positions (dim kept) of the max-pool winner of `x` along `dim` (taps in scan order). */
export function poolArgmax(x: Tensor, dim: number): Tensor {
  const first = x.argmax(dim, true);
  const n = x.shape[dim];
  const shape = x.shape.map((_s, i) => (i === dim ? n : 1));
  // 1..n at NaN, 0 elsewhere: the largest is the last NaN.
  const order = arangeOn(n, x.device).add(1).to(x.dtype).reshape(shape);
  const lastNan = x.isnan().to(x.dtype).mul(order).argmax(dim, true);
  return where(gatherInRange(x, dim, first).isnan(), lastNan, first);
}
