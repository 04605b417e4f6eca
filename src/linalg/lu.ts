/**
 * Gaussian elimination with partial pivoting, batched over leading dims:
 * `det`, `slogdet`, `inv`, `solve`, `matrixPower`.
 * @module
 */

import { noGrad, record } from "../autograd.ts";
import { sumTo } from "../ops/elementwise.ts";
import { zeros } from "../ops/factory.ts";
import { gatherInRange } from "../ops/indexing.ts";
import { cat } from "../ops/view.ts";
import { eye } from "../ops_composite/mod.ts";
import { forwardScope } from "../storage.ts";
import { scopedRounds } from "../ops_composite/util.ts";
import type { Tensor } from "../tensor.ts";
import { failLater, indices, mT, requireSquare } from "./util.ts";
import { owned } from "../ops_composite/owned.ts";
import { broadcastBatch, gaussJordan, pivotRow, solveArgs, swapRows } from "./lu_steps.ts";

/**
 * The pivots of LU with partial pivoting (`[..., n]`) and the permutation's
 * sign (`[...]`), differentiable through the eliminations (the pivot choices
 * are constants, as in PyTorch's LU-based gradient). A zero pivot leaves
 * its (all-zero) column alone, so a singular matrix gives a zero pivot
 * rather than NaN.
 */
function luPivots(a: Tensor): [Tensor, Tensor] {
  const n = a.shape.at(-1)!;
  const rows = indices(n, a);
  let u = a;
  let sign = zeros(a.shape.slice(0, -2), { dtype: a.dtype, device: a.device }).add(1);
  const pivots: Tensor[] = [];
  for (let k = 0; k < n; k++) {
    const [p, same] = pivotRow(u.narrow(-1, k, 1).squeeze(-1), rows, k);
    u = swapRows(u, p, rows, k);
    sign = noGrad(() => sign.mul(same.mul(2).sub(1)));
    const pivot = u.narrow(-2, k, 1).narrow(-1, k, 1);
    pivots.push(pivot.reshape(pivot.shape.slice(0, -2)));
    if (k === n - 1) break;
    const safe = pivot.where(noGrad(() => pivot.ne(0)), 1);
    const below = rows.gt(k).unsqueeze(-1);
    const l = u.narrow(-1, k, 1).mul(below).div(safe);
    u = u.sub(l.mul(u.narrow(-2, k, 1)));
  }
  const all = n === 0
    ? zeros([...a.shape.slice(0, -2), 0], { dtype: a.dtype, device: a.device })
    : cat(pivots.map((p) => p.unsqueeze(-1)), -1);
  return [all, sign];
}

/**
 * The determinant of each square matrix in `A` (`[..., n, n]` → `[...]`),
 * as `torch.linalg.det`: elimination with complete pivoting; the gradient
 * is that of the elimination with the pivot order fixed (the cofactors, at
 * singular matrices too, and the second derivative det's own there).
 */
export function det(A: Tensor): Tensor {
  requireSquare("linalg.det", A);
  return forwardScope(() => detByElimination(A));
}

/**
 * Elimination with complete pivoting, the last 2 × 2 block's determinant by
 * its formula. A zero pivot then means all that is left is zero (row
 * pivoting alone meets one at a zero column of a rank n - 1 matrix, where
 * its division by 1 in place of the zero drops cofactors), so with the
 * pivot order fixed the recorded ops equal det near `a` at every matrix of
 * rank n - 2 or more: first and second derivatives are exact everywhere
 * (both are zero below that rank, and so are these).
 */
function detByElimination(a: Tensor): Tensor {
  const n = a.shape.at(-1)!;
  const batch = a.shape.slice(0, -2);
  if (n === 0) return zeros(batch, { dtype: a.dtype, device: a.device }).add(1);
  if (n === 1) return a.reshape(batch).clone();
  const rows = indices(n, a);
  const start = [a, zeros(batch, { dtype: a.dtype, device: a.device }).add(1)];
  const [u, value] = scopedRounds(n - 2, start, ([before, value], k) => {
    let u = before;
    const [byRow, byColumn, flip] = noGrad(() => {
      const m = n - k;
      const rest = u.narrow(-2, k, m).narrow(-1, k, m).abs().reshape([...batch, m * m]);
      const at = rest.argmax(-1, true).to(a.dtype);
      const row = at.div(m).floor();
      const [r, c] = [row.add(k), at.sub(row.mul(m)).add(k)];
      // Each index with k and the pivot's swapped, picked by gather (its adjoint recorded).
      const swapped = (i: Tensor) => rows.where(rows.ne(k), i).where(rows.ne(i), k).to("int32");
      return [
        swapped(r).unsqueeze(-1).expand(u.shape),
        swapped(c).unsqueeze(-2).expand(u.shape),
        r.eq(k).eq(c.eq(k)).mul(2).sub(1).squeeze(-1),
      ];
    });
    u = gatherInRange(gatherInRange(u, -2, byRow), -1, byColumn);
    const pivot = u.narrow(-2, k, 1).narrow(-1, k, 1);
    const safe = pivot.where(noGrad(() => pivot.ne(0)), 1);
    const l = u.narrow(-1, k, 1).mul(rows.gt(k).unsqueeze(-1)).div(safe);
    return [u.sub(l.mul(u.narrow(-2, k, 1))), value.mul(pivot.reshape(batch)).mul(flip)];
  });
  const s = (i: number, j: number) => u.select(-2, n - 2 + i).select(-1, n - 2 + j);
  return value.mul(s(0, 0).mul(s(1, 1)).sub(s(0, 1).mul(s(1, 0))));
}

/**
 * The sign and the log of the absolute value of each determinant, as
 * `torch.linalg.slogdet` (`[sign, logabsdet]`, both `[...]`): a singular
 * matrix gives sign 0 and logabsdet -inf. The gradient flows through
 * logabsdet (the sign is piecewise constant).
 */
export function slogdet(A: Tensor): [Tensor, Tensor] {
  requireSquare("linalg.slogdet", A);
  return forwardScope(() => {
    const [pivots, sign] = luPivots(A);
    const s = noGrad(() => pivots.sign().prod(-1).mul(sign));
    return [s, pivots.abs().log().sum(-1)];
  });
}

/** Solves `AX = B` for matrices `B` (batch dims broadcast), with the singular check. */
function solveLeft(op: string, a: Tensor, b: Tensor, what: string): Tensor {
  const [ae, be] = broadcastBatch(op, a, b);
  const [x, info] = gaussJordan(ae, be);
  failLater(
    op,
    info,
    ae.ndim > 2,
    (i) =>
      what === "inv"
        ? `The diagonal element ${i} is zero, the inversion could not be completed because the input matrix is singular.`
        : "The solver failed because the input matrix is singular.",
  );
  return x;
}

/**
 * The inverse of each square matrix in `A`, as `torch.linalg.inv`. A
 * singular matrix (an exactly zero pivot) makes the next read on the
 * device reject with PyTorch's message, naming the batch element. The
 * gradient is PyTorch's `-A⁻ᵀ g A⁻ᵀ`.
 */
export function inv(A: Tensor): Tensor {
  return owned(() => {
    const n = requireSquare("linalg.inv", A);
    // PyTorch's LAPACK call reads the row-major A as Aᵀ: inverting Aᵀ (and transposing back)
    // meets the zero pivot its message names.
    const x = mT(solveLeft(
      "linalg.inv",
      mT(A),
      noGrad(() => eye(n, { dtype: A.dtype, device: A.device })),
      "inv",
    ));
    return record("linalg.inv", [A], x, ([g]) => {
      const xt = mT(x);
      return [xt.matmul(g!).matmul(xt).neg()];
    });
  }, A);
}

/** Options of {@link solve}. */
export interface SolveOptions {
  /** Solve `AX = B` (default) or, when false, `XA = B`. */
  left?: boolean;
}

/**
 * The solution of `AX = B` (or `XA = B` with `left: false`), as
 * `torch.linalg.solve`: `A` is `[..., n, n]`, `B` is `[..., n, k]` or a
 * batch of vectors `[..., n]` (when it is 1-D or has `A`'s shape without
 * its last dim); batch dims broadcast. A singular `A` is reported at the
 * next read, naming the batch element. Gradients are PyTorch's:
 * `gB = A⁻ᵀ gX`, `gA = -gB Xᵀ`.
 */
export function solve(A: Tensor, B: Tensor, options: SolveOptions = {}): Tensor {
  return owned(
    () => {
      const op = "linalg.solve";
      const { left = true } = options;
      const { b, vector } = solveArgs(op, A, B, left);
      const solved = forwardScope(() =>
        left ? solveLeft(op, A, b, "solve") : mT(solveLeft(op, mT(A), mT(b), "solve"))
      );
      // A solve (recorded) and the output (whose node is this one): differentiable under createGraph.
      const x = record(op, [A, b], solved, ([g]) => {
        const gb = solve(mT(A), g!, { left });
        const ga = left ? gb.matmul(mT(solved)).neg() : mT(solved).matmul(gb).neg();
        return [sumTo(ga, A.shape), sumTo(gb, b.shape)];
      });
      return vector ? x.squeeze(left ? -1 : -2) : x;
    },
    A,
    B,
  );
}

/**
 * `A` to the integer power `n`, as `torch.linalg.matrix_power`: by
 * repeated squaring; n = 0 gives identities, negative n powers of
 * {@link inv}`(A)`.
 */
export function matrixPower(A: Tensor, n: number): Tensor {
  const size = requireSquare("linalg.matrix_power", A);
  if (!Number.isInteger(n)) {
    throw new TypeError(`linalg.matrix_power: n must be an integer, got ${n}`);
  }
  if (n === 0) {
    return noGrad(() =>
      eye(size, { dtype: A.dtype, device: A.device }).expand([...A.shape]).clone()
    );
  }
  return forwardScope(() => {
    let base = n < 0 ? inv(A) : A;
    let result: Tensor | null = null;
    for (let e = Math.abs(n); e > 0; e = Math.floor(e / 2)) {
      if (e % 2 === 1) result = result === null ? base : result.matmul(base);
      if (e > 1) base = base.matmul(base);
    }
    return result === A ? A.clone() : result!;
  });
}
