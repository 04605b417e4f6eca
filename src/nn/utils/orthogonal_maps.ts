/**
 * The matrix functions `parametrizations.orthogonal` needs that multigrad
 * has no op for, as compositions of tensor ops (every backend, autograd
 * included): the matrix exponential and the product of Householder
 * reflections. Internal: not re-exported from nn.utils.
 * @module
 */

import { noGrad } from "../../autograd.ts";
import { zeros } from "../../ops/factory.ts";
import { where } from "../../ops/indexing.ts";
import { cat } from "../../ops/view.ts";
import { eye } from "../../ops_composite/mod.ts";
import { qr } from "../../linalg/qr.ts";
import type { Tensor } from "../../tensor.ts";

/** Degree of the Taylor polynomial: its remainder at ‖B‖₁ ≤ 1 is below 1/19! ≈ 8e-18. */
const TAYLOR_DEGREE = 18;
/**
 * Squarings at most: a 1-norm up to 2³² is scaled into the Taylor polynomial's range; a larger
 * one overflows float32 in exp anyway (for the skew-symmetric matrices of `orthogonal`, a
 * 1-norm of 2³² means entries no training ever reaches).
 */
const MAX_SQUARINGS = 32;

/** `e^A` of each matrix of `A` ([..., n, n]), by scaling and squaring of a Taylor polynomial. */
export function matrixExp(A: Tensor): Tensor {
  const n = A.shape.at(-1)!;
  const identity = eye(n, { dtype: A.dtype, device: A.device });
  // s = ⌈log₂ ‖A‖₁⌉ per matrix, computed on the device: the data decide how many of the
  // squarings below take effect, without a read back to the host.
  const s = noGrad(() =>
    A.abs().sum(-2).amax(-1, true).unsqueeze(-1).log().div(Math.LN2).ceil().clamp(
      0,
      MAX_SQUARINGS,
    )
  );
  const B = A.mul(s.mul(-Math.LN2).exp());
  let E = identity.add(B.div(TAYLOR_DEGREE));
  for (let k = TAYLOR_DEGREE - 1; k >= 1; k--) E = identity.add(B.matmul(E).div(k));
  for (let j = 0; j < MAX_SQUARINGS; j++) E = where(s.gt(j), E.matmul(E), E);
  return E;
}

/**
 * The first k columns of `H₁ H₂ ⋯ H_k`, `Hᵢ = I - τᵢ vᵢ vᵢᵀ`, with `vᵢ` column i of `V`
 * ([..., n, k]) below the diagonal and 1 on it, as `torch.linalg.householder_product`.
 */
export function householderProduct(V: Tensor, tau: Tensor): Tensor {
  const [n, k] = V.shape.slice(-2);
  const unit = eye(n, k, { dtype: V.dtype, device: V.device });
  const vs = V.tril(-1).add(unit);
  let M = unit.expand([...V.shape.slice(0, -2), n, k]);
  for (let i = k - 1; i >= 0; i--) {
    const v = vs.narrow(-1, i, 1);
    const t = tau.narrow(-1, i, 1).unsqueeze(-1);
    M = M.sub(v.mul(t).matmul(v.transpose(-1, -2).matmul(M)));
  }
  return M;
}

/**
 * PyTorch's `_make_orthogonal`: the Q of A's QR decomposition with the signs that make R's
 * diagonal positive (so an orthogonal A gives back A, up to rounding).
 */
export function makeOrthogonal(A: Tensor): Tensor {
  const [q, r] = qr(A);
  const k = r.shape.at(-1)!;
  const diag = r.mul(eye(r.shape.at(-2)!, k, { dtype: r.dtype, device: r.device })).sum(-2);
  return q.mul(diag.sign().unsqueeze(-2));
}

/** `[A, zeros]` along the last dim, to `cols` columns. */
export function padColumns(A: Tensor, cols: number): Tensor {
  const k = A.shape.at(-1)!;
  if (cols === k) return A;
  const zero = zeros([...A.shape.slice(0, -1), cols - k], { dtype: A.dtype, device: A.device });
  return cat([A, zero], -1);
}

/**
 * The Householder QR of each matrix of `A` ([..., n, k], n ≥ k) in LAPACK's `geqrf` form, as
 * `torch.geqrf`: R on and above the diagonal, the reflectors' vectors (their leading 1 implied)
 * below it, and their factors `tau` [..., k]; a column already zero below the diagonal gets
 * `tau = 0` (no reflection), as LAPACK's `dlarfg`. Without gradient.
 */
export function geqrf(A: Tensor): [Tensor, Tensor] {
  return noGrad(() => {
    const [n, k] = A.shape.slice(-2);
    let W = A;
    const taus: Tensor[] = [];
    for (let j = 0; j < k; j++) {
      const rows = n - j;
      const sub = W.narrow(-2, j, rows).narrow(-1, j, k - j);
      const x = sub.narrow(-1, 0, 1);
      const alpha = x.narrow(-2, 0, 1);
      const below = x.narrow(-2, 1, rows - 1);
      const tailSq = below.mul(below).sum(-2, true);
      const still = tailSq.eq(0);
      // beta = -sign(alpha)·‖x‖, with sign(0) = +1 (LAPACK's SIGN).
      const norm = alpha.mul(alpha).add(tailSq).sqrt();
      const beta = where(still, alpha, where(alpha.ge(0), norm.neg(), norm));
      const denom = where(still, 1, alpha.sub(beta));
      const tau = where(still, 0, beta.sub(alpha).div(where(still, 1, beta)));
      const vBelow = where(still, 0, below.div(denom));
      const v = cat([alpha.mul(0).add(1), vBelow], -2);
      const applied = sub.sub(v.mul(tau).matmul(v.transpose(-1, -2).matmul(sub)));
      const column = cat([beta, vBelow], -2);
      const right = cat([column, applied.narrow(-1, 1, k - j - 1)], -1);
      const lower = cat([W.narrow(-2, j, rows).narrow(-1, 0, j), right], -1);
      W = cat([W.narrow(-2, 0, j), lower], -2);
      taus.push(tau.squeeze(-1));
    }
    return [W, cat(taus, -1)];
  });
}
