/**
 * The QR decomposition by Householder reflections: the backend's `qr`
 * kernel where it has one (the cpu backend's: LAPACK's blocked algorithm in
 * float64), else one batched reflection of tensor ops per column.
 * @module
 */

import { noGrad, record } from "../autograd.ts";
import { firstOrderOnly } from "../autograd/recompute.ts";
import { zeros } from "../ops/factory.ts";
import { cat } from "../ops/view.ts";
import { eye } from "../ops_composite/mod.ts";
import { forwardScope } from "../storage.ts";
import { scopedRounds } from "../ops_composite/util.ts";
import { solveTriangular } from "./triangular.ts";
import { kernelQr } from "./host.ts";
import type { Tensor } from "../tensor.ts";
import { indices, matrixScale, mT, requireMatrix } from "./util.ts";

/** Options of {@link qr}. */
export interface QrOptions {
  /**
   * `"reduced"` (default): Q `[..., m, k]`, R `[..., k, n]` with k = min(m, n);
   * `"complete"`: Q `[..., m, m]`, R `[..., m, n]`; `"r"`: R only (Q empty).
   */
  mode?: "reduced" | "complete" | "r";
}

/**
 * The QR decomposition `A = QR` of each matrix in `A` (`[..., m, n]`), as
 * `torch.linalg.qr`, by Householder reflections with LAPACK's sign
 * convention (R's diagonal is -sign(x₀)·‖x‖, a column already zero below
 * the diagonal is left alone), so Q and R equal PyTorch's. The gradient is
 * PyTorch's analytic one; unlike PyTorch, mode "r" has it too (Q is
 * computed anyway), and "complete" with m > n refuses it as PyTorch does.
 */
export function qr(A: Tensor, options: QrOptions = {}): [Tensor, Tensor] {
  const op = "linalg.qr";
  const { mode = "reduced" } = options;
  if (mode !== "reduced" && mode !== "complete" && mode !== "r") {
    throw new RangeError(
      `${op}: qr received unrecognized mode '${
        String(mode)
      }' but expected one of 'reduced' (default), 'r', or 'complete'`,
    );
  }
  requireMatrix(op, A);
  const [m, n] = A.shape.slice(-2);
  const k = Math.min(m, n);
  const batch = A.shape.slice(0, -2);
  const [q, r] = noGrad(() =>
    forwardScope(() => {
      // The kernel's Q has min(m, n) columns unless complete: all that is read of it below.
      const fast = kernelQr(A, mode === "complete");
      if (fast) return fast;
      const rows = indices(m, A).unsqueeze(-1);
      // The reflections' norms square A's entries: scaled to 1 and back, |A| near float
      // range's ends neither overflows nor underflows.
      const scale = matrixScale(A);
      const start: [Tensor, Tensor] = [
        A.div(scale),
        eye(m, { dtype: A.dtype, device: A.device }).expand([...batch, m, m]),
      ];
      const [r, q] = scopedRounds(k, start, ([r, q], j) => {
        const column = r.narrow(-1, j, 1);
        const xj = r.narrow(-2, j, 1).narrow(-1, j, 1);
        const tail = column.mul(rows.gt(j));
        const tail2 = tail.square().sum(-2, true);
        const live = tail2.gt(0);
        const size = xj.square().add(tail2).sqrt();
        // v = x - βe_j with β = -sign(x_j)‖x‖ (sign(0) = 1); scaled so that H = I - wwᵀ.
        const v = tail.add(rows.eq(j).mul(xj.add(size.mul(xj.ge(0).mul(2).sub(1)))));
        const v2 = v.square().sum(-2, true);
        const w = v.mul(v2.where(live, 1).rsqrt().mul(Math.SQRT2)).mul(live);
        return [r.sub(w.matmul(mT(w).matmul(r))), q.sub(q.matmul(w).matmul(mT(w)))];
      });
      return [q, r.triu().mul(scale)];
    })
  );
  const reducedQ = q.narrow(-1, 0, k);
  const reducedR = r.narrow(-2, 0, k);
  const outputs = noGrad(() =>
    mode === "complete" ? [q.clone(), r.clone()] : [
      mode === "r" ? zeros([0], { dtype: A.dtype, device: A.device }) : reducedQ.clone(),
      reducedR.clone(),
    ]
  );
  const backward = ([gq, gr]: (Tensor | null)[]) => {
    if (mode === "complete" && m > n && gq) {
      throw new RangeError(
        `${op}: The QR decomposition is not differentiable when mode='complete' and nrows > ncols.`,
      );
    }
    const gQ = mode === "r" ? null : gq;
    const gR = gr && mode === "complete" ? gr.narrow(-2, 0, k) : gr;
    // Q and R are the outputs (whose node is this one), so that under createGraph the gradient
    // is differentiable; mode "r" returns no Q to carry that graph (first order only).
    const [Q, R] = mode === "r"
      ? [reducedQ, reducedR]
      : [outputs[0].narrow(-1, 0, k), outputs[1].narrow(-2, 0, k)];
    return [qrBackward(Q, R, gQ, gR, m, n)];
  };
  return record(
    op,
    [A],
    outputs,
    mode === "r" ? firstOrderOnly(op, [A], backward) : backward,
  ) as [Tensor, Tensor];
}

/**
 * PyTorch's QR gradient (reduced Q `[m, k]`, R `[k, n]`): for m ≥ n,
 * `gA = (gQ + Q·copyltu(M))R⁻ᵀ` with `M = gR Rᵀ - Qᵀ gQ` (its upper
 * triangle mirrored below); for m < n, that for the leading square block
 * with `gQ + A₂gR₂ᵀ`, and `Q gR₂` for the rest.
 */
function qrBackward(
  q: Tensor,
  r: Tensor,
  gq: Tensor | null,
  gr: Tensor | null,
  m: number,
  n: number,
): Tensor {
  if (m < n) {
    const r1 = r.narrow(-1, 0, m);
    const r2 = r.narrow(-1, m, n - m);
    const a2 = q.matmul(r2);
    const gr1 = gr ? gr.narrow(-1, 0, m) : null;
    const gr2 = gr ? gr.narrow(-1, m, n - m) : null;
    const gq1 = gr2 ? (gq ? gq.add(a2.matmul(mT(gr2))) : a2.matmul(mT(gr2))) : gq;
    const g1 = qrBackward(q, r1, gq1, gr1, m, m);
    const g2 = gr2 ? q.matmul(gr2) : a2.mul(0);
    return cat([g1, g2], -1);
  }
  let mm = gr ? gr.matmul(mT(r)) : null;
  if (gq) mm = mm ? mm.sub(mT(q).matmul(gq)) : mT(q).matmul(gq).neg();
  const upper = mm!.triu();
  const sym = upper.add(mT(upper.triu(1)));
  const inner = gq ? gq.add(q.matmul(sym)) : q.matmul(sym);
  // X R⁻ᵀ: a right solve with the lower-triangular Rᵀ (recorded, for createGraph).
  return solveTriangular(mT(r), inner, { upper: false, left: false });
}
