/**
 * The Cholesky factorization with LAPACK's `info`, shared by
 * `linalg.cholesky`, `linalg.choleskyEx` and the distributions: internal,
 * not part of `linalg`.
 * @module
 */

import { noGrad, record } from "../autograd.ts";
import { zeros } from "../ops/factory.ts";
import { forwardScope } from "../storage.ts";
import { scopedRounds } from "../ops_composite/util.ts";
import type { Tensor } from "../tensor.ts";
import { failLater, indices, mT, requireSquare } from "./util.ts";
import { solveTriangular } from "./triangular.ts";
import type { CholeskyOptions } from "./cholesky.ts";

/**
 * {@link cholesky} and its LAPACK `info` (`[...]`, the order of the first
 * leading minor that is not positive-definite, 0 when none); the failure
 * raised at the next read only when `check`.
 */
export function choleskyInfo(
  op: string,
  A: Tensor,
  options: CholeskyOptions,
  check: boolean,
): [Tensor, Tensor] {
  const { upper = false } = options;
  const n = requireSquare(op, A);
  const [l, info] = noGrad(() =>
    forwardScope(() => {
      const source = upper ? mT(A) : A;
      const rows = indices(n, A);
      const start: [Tensor, Tensor] = [
        zeros([...A.shape], { dtype: A.dtype, device: A.device }),
        zeros(A.shape.slice(0, -2), { dtype: A.dtype, device: A.device }),
      ];
      return scopedRounds(n, start, ([l, info], j) => {
        // Columns ≥ j of l are still zero, so l·(row j of l)ᵀ sums over k < j only.
        const v = source.narrow(-1, j, 1).sub(l.matmul(mT(l.narrow(-2, j, 1))));
        const d = v.narrow(-2, j, 1);
        const good = d.gt(0); // NaN fails too
        const column = v.div(d.where(good, 1).sqrt()).mul(rows.ge(j).unsqueeze(-1));
        return [
          l.add(column.mul(rows.eq(j))),
          info.add(good.eq(0).reshape(info.shape).mul(info.eq(0)).mul(j + 1)),
        ];
      });
    })
  );
  if (check) {
    failLater(
      op,
      info,
      A.ndim > 2,
      (i) =>
        `The factorization could not be completed because the input is not positive-definite (the leading minor of order ${i} is not positive-definite).`,
    );
  }
  const out = upper ? mT(l) : l;
  // Solves (recorded) and the output (whose node is this one): differentiable under createGraph.
  const result = record(op, [A], out, ([g]) => {
    const [lo, gl] = upper ? [mT(out), mT(g!)] : [out, g!];
    // Φ: the lower triangle with the diagonal halved.
    const inner = mT(lo).matmul(gl);
    const phi = inner.tril().sub(inner.tril().triu().mul(0.5));
    const right = solveTriangular(mT(lo), phi, { upper: true });
    const s = solveTriangular(lo, right, { upper: false, left: false });
    return [s.add(mT(s)).mul(0.5)];
  });
  return [result, info];
}
