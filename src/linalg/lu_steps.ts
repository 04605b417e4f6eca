/**
 * The steps of Gaussian elimination with partial pivoting that the
 * `linalg` functions share (pivot choice, exact row swaps, Gauss–Jordan,
 * LAPACK-style packed LU and the inverse with its `info`), and their
 * argument checks: internal, not part of `linalg`.
 * @module
 */

import { noGrad, record } from "../autograd.ts";
import { zeros } from "../ops/factory.ts";
import { cat } from "../ops/view.ts";
import { broadcastShapes, formatShape } from "../shape.ts";
import { forwardScope } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import { failLater, indices, mT, requireSquare } from "./util.ts";
import { eye } from "../ops_composite/factory.ts";
import { scopedRounds } from "../ops_composite/util.ts";

/**
 * The row of `column` (`[..., n]`) with the largest magnitude among rows
 * ≥ k, one-hot (`[..., n]`), and whether it is row k (`[...]`). The first
 * such row wins, as LAPACK's `i?amax`.
 */
export function pivotRow(column: Tensor, rows: Tensor, k: number): [Tensor, Tensor] {
  return noGrad(() => {
    const p = column.abs().where(rows.ge(k), -1).argmax(-1, true).to(column.dtype);
    return [rows.eq(p), p.squeeze(-1).eq(k)];
  });
}

/**
 * `m` with rows k and the one-hot `p`'s swapped (`m`: `[..., n, w]`, `p`:
 * `[..., n]`). Selected, not computed (`row + (other - row)` rounds away a
 * row much smaller than the other, and `0 · inf` would spread NaN), so the
 * interchange is exact, as LAPACK's.
 */
export function swapRows(m: Tensor, p: Tensor, rows: Tensor, k: number): Tensor {
  const rowK = m.narrow(-2, k, 1);
  const atP = p.unsqueeze(-1);
  const rowP = m.where(atP, 0).sum(-2, true);
  return rowP.where(rows.eq(k).unsqueeze(-1), rowK.where(atP, m));
}

/**
 * `A⁻¹B` by Gauss–Jordan elimination with partial pivoting on `[A | B]`
 * (`A`: `[..., n, n]`, `B`: `[..., n, k]`, batch dims already equal),
 * without gradient, and the 1-based index of the first zero pivot of each
 * matrix (0 when none).
 */
export function gaussJordan(a: Tensor, b: Tensor): [Tensor, Tensor] {
  return noGrad(() =>
    forwardScope(() => {
      const n = a.shape.at(-1)!;
      const rows = indices(n, a);
      const start: [Tensor, Tensor] = [
        cat([a, b], -1),
        zeros(a.shape.slice(0, -2), { dtype: a.dtype, device: a.device }),
      ];
      const [m, info] = scopedRounds(n, start, ([before, info], k) => {
        const [p] = pivotRow(before.narrow(-1, k, 1).squeeze(-1), rows, k);
        const m = swapRows(before, p, rows, k);
        const pivot = m.narrow(-2, k, 1).narrow(-1, k, 1);
        const zero = pivot.eq(0);
        const pivotRow_ = m.narrow(-2, k, 1).div(pivot.where(zero.eq(0), 1));
        // Row k becomes row k / pivot (selected: computing it as a difference cancels); the
        // others lose their column k.
        const others = rows.ne(k).unsqueeze(-1);
        return [
          m.sub(m.narrow(-1, k, 1).mul(pivotRow_)).where(others, pivotRow_),
          info.add(zero.reshape(info.shape).mul(info.eq(0)).mul(k + 1)),
        ];
      });
      return [m.narrow(-1, n, b.shape.at(-1)!), info];
    })
  );
}

/** The batch shape `A` and `B` broadcast to, and both expanded to it. */
export function broadcastBatch(op: string, a: Tensor, b: Tensor): [Tensor, Tensor] {
  const batch = broadcastShapes(a.shape.slice(0, -2), b.shape.slice(0, -2), op);
  return [
    a.expand([...batch, ...a.shape.slice(-2)]),
    b.expand([...batch, ...b.shape.slice(-2)]),
  ];
}

/**
 * `B` of a solve checked against the square `A` (same dtype, `n` rows for
 * `AX = B`, `n` columns for `XA = B`), as a matrix: a batch of vectors
 * (`B` 1-D, or `A`'s shape without its last dim) gets a unit dim, and
 * `vector` says so.
 */
export function solveArgs(
  op: string,
  A: Tensor,
  B: Tensor,
  left: boolean,
): { b: Tensor; vector: boolean } {
  const n = requireSquare(op, A);
  if (!(B instanceof Tensor)) throw new TypeError(`${op}: B must be a Tensor, got ${typeof B}`);
  if (B.dtype !== A.dtype) {
    throw new TypeError(
      `${op}: Expected A and B to have the same dtype, got ${A.dtype} and ${B.dtype}`,
    );
  }
  const vector = B.ndim === 1 ||
    (B.ndim === A.ndim - 1 && B.shape.every((s, i) => s === A.shape[i]));
  const b = vector ? B.unsqueeze(left ? -1 : -2) : B;
  if (b.ndim < 2 || (left ? b.shape.at(-2) : b.shape.at(-1)) !== n) {
    throw new RangeError(
      `${op}: Incompatible shapes of A and B for the equation ${
        left ? "AX = B" : "XA = B"
      } (${n}x${n} and ${vector ? formatShape(B.shape) : b.shape.slice(-2).join("x")})`,
    );
  }
  return { b, vector };
}

/**
 * LAPACK's `getrf` as ops: the packed factors (`[..., m, n]`), the 1-based
 * pivot rows (`[..., min(m, n)]`, int32) and `info` (`[...]`, int32: the
 * 1-based index of the first zero pivot, 0 when none).
 */
export function factor(a: Tensor): [Tensor, Tensor, Tensor] {
  const [m, n] = a.shape.slice(-2);
  const k = Math.min(m, n);
  const batch = a.shape.slice(0, -2);
  const rows = indices(m, a);
  const cols = indices(n, a);
  // Each step in a scope of its own (without gradient, the state it replaces freed); the
  // pivot rows so far ride along in the state.
  const start = [a, zeros(batch, { dtype: "int32", device: a.device })];
  const [u, info, ...pivots] = scopedRounds(k, start, ([before, info, ...pivots], j) => {
    const [p, at] = noGrad(() => {
      const column = before.narrow(-1, j, 1).squeeze(-1);
      const [p] = pivotRow(column, rows, j);
      return [p, p.mul(rows).sum(-1, true).add(1).to("int32")];
    });
    const swapped = swapRows(before, p, rows, j);
    const pivot = swapped.narrow(-2, j, 1).narrow(-1, j, 1);
    const nonzero = noGrad(() => pivot.ne(0));
    const below = rows.gt(j).unsqueeze(-1);
    const l = swapped.narrow(-1, j, 1).div(pivot.where(nonzero, 1));
    // Only the trailing block is updated and the multipliers go to column j below the pivot,
    // both selected, not masked by multiplying: exact elsewhere, and an inf spreads no NaN.
    const updated = swapped.sub(l.mul(swapped.narrow(-2, j, 1)))
      .where(below.mul(cols.gt(j)), swapped);
    return [
      l.where(below.mul(cols.eq(j)), updated),
      noGrad(() => info.add(nonzero.eq(0).reshape(batch).to("int32").mul(info.eq(0)).mul(j + 1))),
      ...pivots,
      at,
    ];
  });
  const piv = k === 0
    ? zeros([...batch, 0], { dtype: "int32", device: a.device })
    : cat(pivots, -1);
  return [k === 0 ? a.clone() : u, piv, info];
}

/** The info of `gaussJordan` as int32 (`[...]`). */
export const asInfo = (info: Tensor) => noGrad(() => info.to("int32"));

/**
 * `gaussJordan`'s solution with NaN in each matrix where it met a zero
 * pivot (`info` nonzero): there its numbers are no solution, and the `*Ex`
 * functions report LAPACK's `info`, which need not see that pivot.
 */
export const unsolved = (x: Tensor, info: Tensor) =>
  noGrad(() => x.where(info.eq(0).unsqueeze(-1).unsqueeze(-1), NaN));

/**
 * {@link invEx}'s inverse, PyTorch's `info` and the elimination's own
 * (nonzero where the inverse is NaN), for `cond`.
 */
export function invWithInfo(A: Tensor, checkErrors = false): [Tensor, Tensor, Tensor] {
  const op = "linalg.inv_ex";
  const n = requireSquare(op, A);
  const [raw, own] = gaussJordan(
    A,
    noGrad(() => eye(n, { dtype: A.dtype, device: A.device }).expand([...A.shape])),
  );
  if (checkErrors) {
    failLater(
      op,
      own,
      A.ndim > 2,
      (i) =>
        `The diagonal element ${i} is zero, the inversion could not be completed because the input matrix is singular.`,
    );
  }
  const x = unsolved(raw, own);
  const inverse = record(op, [A], x, ([g]) => {
    const xt = mT(inverse);
    return [xt.matmul(g!).matmul(xt).neg()];
  });
  return [inverse, own.numel() === 0 ? asInfo(own) : transposedInfo(A), own];
}

/**
 * PyTorch's `info` for `inv_ex` and `solve_ex`: they factor `Aᵀ` (a
 * row-major `A` is LAPACK's column-major `Aᵀ`), so theirs is the first zero
 * pivot of that factorization, which can differ from `A`'s.
 */
export const transposedInfo = (a: Tensor) => noGrad(() => forwardScope(() => factor(mT(a))[2]));
