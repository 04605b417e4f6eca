/**
 * `torch.lu_unpack`: the permutation and the triangular factors of a
 * packed LU factorization (a `torch.*` function, not in `torch.linalg`).
 * @module
 */

import { noGrad } from "../autograd.ts";
import { checkLater } from "../ops/check.ts";
import { zeros } from "../ops/factory.ts";
import { eye } from "../ops_composite/factory.ts";
import { formatShape } from "../shape.ts";
import { forwardScope } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import { swapRows } from "./lu_steps.ts";
import { indices, mT, requireMatrix } from "./util.ts";

/** Options of {@link luUnpack}. */
export interface LuUnpackOptions {
  /** Unpack L and U (default true; else they come back empty). */
  unpackData?: boolean;
  /** Unpack P (default true; else it comes back empty). */
  unpackPivots?: boolean;
}

/**
 * `[P, L, U]` (with `A = P L U`) from the packed `LU` and `pivots` of
 * {@link luFactor}, as `torch.lu_unpack`: P `[..., m, m]`, L
 * `[..., m, k]` (unit lower), U `[..., k, n]`, k = min(m, n); pivots
 * outside 1..m fail at the next read, as PyTorch's. Differentiable in `LU`.
 */
export function luUnpack(
  LU: Tensor,
  pivots: Tensor,
  options: LuUnpackOptions = {},
): [Tensor, Tensor, Tensor] {
  const op = "torch.lu_unpack";
  requireMatrix(op, LU, "LU_data");
  const { unpackData = true, unpackPivots = true } = options;
  const [m, n] = LU.shape.slice(-2);
  const k = Math.min(m, n);
  const batch = LU.shape.slice(0, -2);
  if (!(pivots instanceof Tensor) || pivots.dtype !== "int32") {
    throw new TypeError(`${op}: LU_pivots is expected to be an int32 tensor, got ${pivots?.dtype}`);
  }
  if (pivots.shape.at(-1) !== k || pivots.ndim !== LU.ndim - 1) {
    throw new RangeError(
      `${op}: LU_pivots (shape ${formatShape(pivots.shape)}) does not fit LU_data (shape ${
        formatShape(LU.shape)
      }): expected its last dim to be min(m, n) = ${k}`,
    );
  }
  if (unpackPivots && pivots.numel() > 0) {
    // The pivots' values are only known on the device: checked at the next read, as PyTorch's.
    checkLater(
      noGrad(() => pivots.lt(1).add(pivots.gt(m)).sum().reshape([1])),
      (host) =>
        host[0] > 0
          ? "pivots passed to lu_unpack must be between 1 and LU.size(-2) inclusive.Did you properly pass the result of lu_factor?"
          : null,
    );
  }
  const none = () => zeros([0], { dtype: LU.dtype, device: LU.device });
  return forwardScope(() => {
    let L = none();
    let U = none();
    if (unpackData) {
      const unit = noGrad(() => eye(m, k, { dtype: LU.dtype, device: LU.device }));
      L = LU.narrow(-1, 0, k).tril(-1).add(unit);
      U = LU.narrow(-2, 0, k).triu();
    }
    let P = none();
    if (unpackPivots) {
      P = noGrad(() => {
        const rows = indices(m, LU);
        let perm = eye(m, { dtype: LU.dtype, device: LU.device }).expand([...batch, m, m]);
        const at = pivots.to(LU.dtype).sub(1);
        for (let j = 0; j < k; j++) {
          perm = swapRows(perm, rows.eq(at.narrow(-1, j, 1)), rows, j);
        }
        return mT(perm).clone();
      });
    }
    return [P, L, U];
  });
}
