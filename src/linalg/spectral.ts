/**
 * Symmetric eigendecomposition (`eigh`, `eigvalsh`) and the singular value
 * decomposition (`svd`, `svdvals`), with PyTorch's analytic gradients;
 * `pinv` and `matrixRank` on top of them. By the backend's `eigh` / `svd`
 * kernels where it has them (the cpu backend: LAPACK's algorithms in
 * float64, see `src/backends/cpu/kernels/linalg.ts`); elsewhere by cyclic
 * Jacobi and one-sided Jacobi composed of tensor ops. NaN or ±inf input is
 * refused at the next read, as PyTorch refuses it.
 *
 * Both Jacobi methods sweep the pairs of indices in round-robin order, n/2 disjoint pairs
 * per round, so each round is one batched rotation `J` (a few tensor ops
 * and matmuls) rather than n/2 separate ones. The number of sweeps is
 * fixed (Jacobi converges quadratically), so nothing waits for the device.
 * @module
 */

import { noGrad, record } from "../autograd.ts";
import { recording } from "../autograd/recompute.ts";
import { tensor, zeros } from "../ops/factory.ts";
import { cat } from "../ops/view.ts";
import { eye } from "../ops_composite/mod.ts";
import { scopedRounds } from "../ops_composite/util.ts";
import { forwardScope } from "../storage.ts";
import type { DType } from "../dtype.ts";
import type { Tensor } from "../tensor.ts";
import { qr } from "./qr.ts";
import { kernelEigh, kernelSvd, refuseNonFinite } from "./host.ts";
import { matrixScale, mT, requireMatrix, requireSquare } from "./util.ts";

/** One round of the round-robin schedule: `partner[i]` (i itself when resting). */
function schedule(n: number): number[][] {
  const size = n % 2 === 0 ? n : n + 1;
  const players = Array.from({ length: size }, (_, i) => i);
  const rounds: number[][] = [];
  for (let r = 0; r < size - 1; r++) {
    const partner = Array.from({ length: n }, (_, i) => i);
    for (let i = 0; i < size / 2; i++) {
      const [a, b] = [players[i], players[size - 1 - i]];
      if (a < n && b < n) [partner[a], partner[b]] = [b, a];
    }
    rounds.push(partner);
    players.splice(1, 0, players.pop()!);
  }
  return rounds;
}

/**
 * Sweeps enough for convergence of the matrices these are used on. Highly
 * repeated eigenvalues slow cyclic Jacobi to about a digit per sweep: at
 * n = 24 with three values repeated 8 times, float64 needed 16 sweeps for a
 * rounding-level residual (the float32 count, 10, left 2e-8), while float32
 * gets to its own rounding level within that count.
 */
const sweepsFor = (n: number, dtype: DType) =>
  dtype === "float64"
    ? 2 * Math.ceil(Math.log2(Math.max(n, 2))) + 6
    : Math.max(6, Math.ceil(Math.log2(Math.max(n, 2))) + 5);

/**
 * One-sided Jacobi stays linear longer on graded matrices (singular values
 * over many orders of magnitude): at condition 1e6 in float64 these reach
 * rounding level up to n = 64, where ⌈log2 n⌉ + 5 sweeps left 4e-7 relative
 * error in U·diag(S)·Vh at n = 24 and 1e-5 at n = 64.
 */
const svdSweepsFor = (n: number) => Math.max(8, 2 * Math.ceil(Math.log2(Math.max(n, 2))) + 4);

interface Round {
  /** The pairing as a permutation matrix (row i has its 1 at partner(i)). */
  pair: Tensor;
  /** +1 where i is the first of its pair, -1 the second, 0 resting. */
  role: Tensor;
}

function rounds(n: number, like: Tensor): Round[] {
  const opts = { dtype: like.dtype, device: like.device };
  return schedule(n).map((partner) => {
    const pair = new Float64Array(n * n);
    partner.forEach((p, i) => (pair[i * n + p] = 1));
    const role = partner.map((p, i) => (p === i ? 0 : i < p ? 1 : -1));
    return { pair: tensor(pair, { ...opts, shape: [n, n] }), role: tensor(role, opts) };
  });
}

/**
 * The rotation of one round that zeroes `G[i, partner(i)]` for every pair of
 * the symmetric `G` (`[..., n, n]`): `J` with `JᵀGJ` (or `UJ` with `G = UᵀU`).
 */
function rotation(g: Tensor, { pair, role }: Round, identity: Tensor): Tensor {
  const d = g.mul(identity).sum(-1);
  // G drifts off exact symmetry by rounding; g_pq and g_qp averaged keep both ends of a pair on
  // the same angle, else J stops being orthogonal once the off-diagonal is at rounding level.
  const row = g.mul(pair).sum(-1);
  const off = row.add(pair.mul(row.unsqueeze(-2)).sum(-1)).mul(0.5);
  const dPartner = pair.mul(d.unsqueeze(-2)).sum(-1);
  const live = off.ne(0).mul(role.ne(0));
  // τ = (g_qq - g_pp) / 2g_pq, the same from both ends of a pair; t = tan θ, the smaller root.
  const tau = dPartner.sub(d).mul(role).div(off.where(live, 1).mul(2));
  const t = tau.ge(0).mul(2).sub(1).div(tau.abs().add(tau.square().add(1).sqrt())).mul(live);
  const c = t.square().add(1).rsqrt();
  return identity.mul(c.unsqueeze(-2)).add(pair.mul(t.mul(c).mul(role).unsqueeze(-1)));
}

/** The values along the last dim sorted (`descending` or not) and `v`'s columns to match. */
function sortPairs(values: Tensor, v: Tensor, descending: boolean): [Tensor, Tensor] {
  const { values: sorted, indices } = values.sort(-1, descending);
  return [sorted, v.gather(-1, indices.unsqueeze(-2).expand([...v.shape]))];
}

/** Options of {@link eigh}. */
export interface EighOptions {
  /** Which triangle of `A` is read: `"L"` (default) or `"U"`. */
  UPLO?: "L" | "U";
}

function eighForward(op: string, A: Tensor, options: EighOptions): [Tensor, Tensor] {
  const { UPLO = "L" } = options;
  if (UPLO !== "L" && UPLO !== "U") {
    throw new RangeError(`${op}: Expected UPLO argument to be 'L' or 'U', but got ${String(UPLO)}`);
  }
  const n = requireSquare(op, A);
  refuseNonFinite("linalg.eigh", A, UPLO);
  return noGrad(() =>
    forwardScope(() => {
      const identity = eye(n, { dtype: A.dtype, device: A.device });
      const lower = UPLO === "L" ? A.tril() : mT(A.triu());
      const fast = kernelEigh(lower);
      if (fast) return fast;
      const symmetric = lower.add(mT(lower.tril(-1)));
      const schedule = rounds(n, A);
      const start: [Tensor, Tensor] = [symmetric, identity.expand([...A.shape])];
      const count = sweepsFor(n, A.dtype) * schedule.length;
      const [, v] = scopedRounds(count, start, ([a, v], i) => {
        const j = rotation(a, schedule[i % schedule.length], identity);
        return [mT(j).matmul(a).matmul(j), v.matmul(j)];
      });
      // a's diagonal carries a rounding error from each of the (n-1)·sweeps products; the
      // Rayleigh quotients of V's columns with the input carry only V's (second-order) one.
      const av = symmetric.matmul(v);
      return sortPairs(v.mul(av).sum(-2).div(v.square().sum(-2)), v, false);
    })
  );
}

/** PyTorch's `linalg_eig_backward` for Hermitian input: `V(M)Vᵀ`, M from gL, gV and the gaps. */
function eighBackward(l: Tensor, v: Tensor, gl: Tensor | null, gv: Tensor | null): Tensor {
  const n = l.shape.at(-1)!;
  const identity = eye(n, { dtype: l.dtype, device: l.device });
  let m = zeros([...v.shape], { dtype: v.dtype, device: v.device });
  if (gv) {
    const vg = mT(v).matmul(gv);
    const skew = vg.sub(mT(vg)).mul(0.5);
    const gaps = l.unsqueeze(-2).sub(l.unsqueeze(-1)).add(identity); // 1 on the diagonal
    m = skew.div(gaps).mul(identity.neg().add(1));
  }
  if (gl) m = m.add(identity.mul(gl.unsqueeze(-2)));
  return v.matmul(m).matmul(mT(v));
}

/**
 * The eigenvalues (ascending) and orthonormal eigenvectors (columns) of
 * each symmetric matrix in `A`, as `torch.linalg.eigh`: only the triangle
 * `UPLO` names is read. By the backend's kernel (cpu: tridiagonal QL) or
 * cyclic Jacobi; an eigenvector's sign is arbitrary (as LAPACK's, though
 * not necessarily the same one). Gradients
 * are PyTorch's (infinite where eigenvalues repeat and V is used).
 */
export function eigh(A: Tensor, options: EighOptions = {}): [Tensor, Tensor] {
  const op = "linalg.eigh";
  const [l, v] = eighForward(op, A, options);
  // L and V are the outputs (whose node is this one): differentiable under createGraph.
  return record(op, [A], [l, v], ([gl, gv]) => [eighBackward(l, v, gl, gv)]);
}

/** The eigenvalues (ascending) of each symmetric matrix in `A`, as `torch.linalg.eigvalsh`. */
export function eigvalsh(A: Tensor, options: EighOptions = {}): Tensor {
  const op = "linalg.eigvalsh";
  const [l, v] = eighForward(op, A, options);
  // V is an output of the node too (as in PyTorch, which runs eigh when A requires grad), so
  // that the gradient, made from it, is differentiable under createGraph.
  record(op, [A], [l, v], ([gl, gv]) => [eighBackward(l, v, gl, gv)]);
  return l;
}

/** U `[..., m, k]`, S `[..., k]`, V `[..., n, k]` of `A` (`[..., m, n]`), no gradient. */
function svdForward(a: Tensor): [Tensor, Tensor, Tensor] {
  const [m, n] = a.shape.slice(-2);
  if (m < n) {
    const [u, s, v] = svdForward(mT(a));
    return [v, s, u];
  }
  refuseNonFinite("linalg.svd", a);
  return noGrad(() =>
    forwardScope(() => {
      const fast = kernelSvd(a);
      if (fast) return [fast[0], fast[1], mT(fast[2])];
      const identity = eye(n, { dtype: a.dtype, device: a.device });
      // G = UᵀU squares A's entries: scaled to 1 (S scaled back), |A| near either end of the
      // float range neither overflows nor underflows.
      const scale = matrixScale(a);
      const scaled = a.div(scale);
      const schedule = rounds(n, a);
      const start: [Tensor, Tensor] = [scaled, identity.expand([...a.shape.slice(0, -2), n, n])];
      const [, rotated] = scopedRounds(
        svdSweepsFor(n) * schedule.length,
        start,
        ([u, v], i) => {
          const j = rotation(mT(u).matmul(u), schedule[i % schedule.length], identity);
          return [u.matmul(j), v.matmul(j)];
        },
      );
      // u carries a rounding error from each of the (n-1)·sweeps products; A·V, with V's
      // columns' norms divided out, carries only V's (second-order) one.
      const norms = rotated.square().sum(-2, true).sqrt();
      const v = rotated.div(norms);
      const u = scaled.matmul(v);
      const s = u.square().sum(-2).sqrt();
      const [sorted, order] = sortPairs(s, cat([u, v], -2), true);
      const us = order.narrow(-2, 0, m);
      const vs = order.narrow(-2, m, n);
      // Columns of zero singular values have no direction of their own: QR completes them to
      // an orthonormal set, and its R's signs (±1 elsewhere) keep the others as they are.
      const unit = us.div(sorted.where(sorted.ne(0), 1).unsqueeze(-2));
      const [q, r] = qr(unit);
      const signs = r.mul(eye(n, { dtype: a.dtype, device: a.device })).sum(-1).ge(0).mul(2).sub(1);
      return [q.mul(signs.unsqueeze(-2)), sorted.mul(scale.squeeze(-1)), vs];
    })
  );
}

/** Options of {@link svd}. */
export interface SvdOptions {
  /** U `[..., m, m]` and Vh `[..., n, n]` (default true, as PyTorch) or `[..., m, k]`, `[..., k, n]`. */
  fullMatrices?: boolean;
}

/** PyTorch's `svd_backward` for reduced U `[m, k]`, S `[k]`, Vh `[k, n]`. */
function svdBackward(
  u: Tensor,
  s: Tensor,
  vh: Tensor,
  gu: Tensor | null,
  gs: Tensor | null,
  gvh: Tensor | null,
): Tensor {
  const [m, n] = [u.shape.at(-2)!, vh.shape.at(-1)!];
  const k = s.shape.at(-1)!;
  const identity = eye(k, { dtype: s.dtype, device: s.device });
  if (!gu && !gvh) return u.mul(gs!.unsqueeze(-2)).matmul(vh);
  const skew = (x: Tensor) => x.sub(mT(x));
  const s2 = s.square();
  const gaps = s2.unsqueeze(-2).sub(s2.unsqueeze(-1)).add(identity);
  let inner = zeros([...s.shape, k], { dtype: s.dtype, device: s.device });
  if (gu) inner = inner.add(skew(mT(u).matmul(gu)).mul(s.unsqueeze(-2)));
  if (gvh) inner = inner.add(s.unsqueeze(-1).mul(skew(vh.matmul(mT(gvh)))));
  let ga = inner.div(gaps).mul(identity.neg().add(1));
  if (gs) ga = ga.add(identity.mul(gs.unsqueeze(-2)));
  if (m > n && gu) {
    ga = u.matmul(ga);
    const scaled = gu.div(s.unsqueeze(-2));
    ga = ga.add(scaled).sub(u.matmul(mT(u).matmul(scaled)));
    return ga.matmul(vh);
  }
  if (m < n && gvh) {
    ga = ga.matmul(vh);
    const scaled = gvh.div(s.unsqueeze(-1));
    ga = ga.add(scaled).sub(scaled.matmul(mT(vh)).matmul(vh));
    return u.matmul(ga);
  }
  return u.matmul(ga).matmul(vh);
}

/** U completed to `[..., m, m]` by QR (its columns kept, signs included). */
function complete(u: Tensor): Tensor {
  const [m, k] = u.shape.slice(-2);
  if (m === k) return u.clone();
  const [q, r] = qr(u, { mode: "complete" });
  const signs = r.narrow(-2, 0, k).mul(eye(k, { dtype: u.dtype, device: u.device })).sum(-1)
    .ge(0).mul(2).sub(1);
  return cat([q.narrow(-1, 0, k).mul(signs.unsqueeze(-2)), q.narrow(-1, k, m - k)], -1);
}

/**
 * The singular value decomposition `A = U diag(S) Vh` of each matrix in
 * `A` (`[..., m, n]`), as `torch.linalg.svd`: S descending; with
 * `fullMatrices` (the default) U and Vh are square, their extra columns
 * (rows) an orthonormal completion. By the backend's kernel (cpu:
 * Golub–Kahan) or one-sided Jacobi; a singular
 * pair's signs are arbitrary (as LAPACK's, though not necessarily the
 * same). Gradients are PyTorch's (through the first k = min(m, n) columns
 * of U and rows of Vh).
 */
export function svd(A: Tensor, options: SvdOptions = {}): [Tensor, Tensor, Tensor] {
  const op = "linalg.svd";
  const { fullMatrices = true } = options;
  requireMatrix(op, A);
  const [m, n] = A.shape.slice(-2);
  const [u, s, v] = svdForward(A);
  const vh = mT(v);
  const outputs = noGrad(() =>
    forwardScope(() =>
      fullMatrices ? [complete(u), s, mT(complete(v))] : [u.clone(), s, vh.clone()]
    )
  );
  const k = Math.min(m, n);
  return record(op, [A], outputs, ([gu, gs, gvh]) => {
    // Under createGraph, from the outputs (whose node is this one), so that the gradient is
    // differentiable; else from the reduced factors, as computed.
    const [U, Vh] = !recording()
      ? [u, vh]
      : fullMatrices
      ? [outputs[0].narrow(-1, 0, k), outputs[2].narrow(-2, 0, k)]
      : [outputs[0], outputs[2]];
    return [
      svdBackward(
        U,
        s,
        Vh,
        gu && fullMatrices ? gu.narrow(-1, 0, k) : gu,
        gs,
        gvh && fullMatrices ? gvh.narrow(-2, 0, k) : gvh,
      ),
    ];
  }) as [Tensor, Tensor, Tensor];
}

/** The singular values (descending) of each matrix in `A`, as `torch.linalg.svdvals`. */
export function svdvals(A: Tensor): Tensor {
  const op = "linalg.svdvals";
  requireMatrix(op, A);
  const [u, s, v] = svdForward(A);
  // U and V are outputs of the node too (as in PyTorch, which runs svd when A requires grad),
  // so that the gradient, made from them, is differentiable under createGraph.
  record(op, [A], [s, u, v], ([gs, gu, gv]) => [svdBackward(u, s, mT(v), gu, gs, gv && mT(gv))]);
  return s;
}

/** Options of {@link pinv} and {@link matrixRank}. */
export interface PinvOptions {
  /** Absolute tolerance on singular values (default 0). */
  atol?: number;
  /**
   * Relative tolerance, times the largest singular value (default
   * eps·max(m, n) when `atol` is not given, else 0).
   */
  rtol?: number;
  /** `A` is symmetric (read through {@link eigh}). */
  hermitian?: boolean;
}

/** The cutoff below which singular values count as zero (`[..., 1]`). */
function cutoff(s: Tensor, m: number, n: number, options: PinvOptions): Tensor {
  const { atol, rtol } = options;
  const eps = s.dtype === "float64" ? 2.220446049250313e-16 : 1.1920928955078125e-7;
  const relative = rtol ?? (atol === undefined || atol === 0 ? eps * Math.max(m, n) : 0);
  const largest = s.shape.at(-1) === 0
    ? zeros([...s.shape.slice(0, -1), 1], { dtype: s.dtype, device: s.device })
    : s.abs().amax(-1, true);
  return largest.mul(relative).maximum(atol ?? 0);
}

/**
 * The Moore–Penrose pseudoinverse of each matrix in `A`, as
 * `torch.linalg.pinv`: `V diag(1/σ) Uᵀ` over the singular values above
 * the cutoff (see {@link PinvOptions}), through one-sided Jacobi (or
 * {@link eigh} when `hermitian`). The gradient is PyTorch's
 * `pinv_backward` (that of a general matrix, also when `hermitian`).
 */
export function pinv(A: Tensor, options: PinvOptions = {}): Tensor {
  const op = "linalg.pinv";
  requireMatrix(op, A);
  const [m, n] = A.shape.slice(-2);
  const p = noGrad(() =>
    forwardScope(() => {
      if (options.hermitian) {
        requireSquare(op, A);
        const [l, v] = eigh(A);
        const keep = l.abs().gt(cutoff(l, m, n, options));
        const scale = l.where(keep, 1).reciprocal().mul(keep);
        return v.mul(scale.unsqueeze(-2)).matmul(mT(v));
      }
      const [u, s, v] = svdForward(A);
      const keep = s.gt(cutoff(s, m, n, options));
      const scale = s.where(keep, 1).reciprocal().mul(keep);
      return v.mul(scale.unsqueeze(-2)).matmul(mT(u));
    })
  );
  // The output (whose node is this one) and A: differentiable under createGraph.
  return record(op, [A], p, ([g]) => {
    // PyTorch's pinv_backward, arranged so the products stay small.
    const ph = mT(p);
    const gh = mT(g!);
    if (m <= n) {
      const k = gh.matmul(p);
      const kph = k.matmul(ph);
      return [
        mT(p.matmul(k)).neg().add(kph).sub(A.matmul(p).matmul(kph))
          .add(ph.matmul(p).matmul(gh.sub(k.matmul(A)))),
      ];
    }
    const k = p.matmul(gh);
    const phk = ph.matmul(k);
    return [
      mT(k.matmul(p)).neg().add(phk).sub(phk.matmul(p).matmul(A))
        .add(gh.sub(A.matmul(k)).matmul(p).matmul(ph)),
    ];
  });
}

/**
 * The rank of each matrix in `A` (`[...]`, int32, as multigrad has no
 * int64): the count of singular values above the cutoff, as
 * `torch.linalg.matrix_rank`. Not differentiable.
 */
export function matrixRank(A: Tensor, options: PinvOptions = {}): Tensor {
  const op = "linalg.matrix_rank";
  requireMatrix(op, A);
  const [m, n] = A.shape.slice(-2);
  return noGrad(() =>
    forwardScope(() => {
      const s = options.hermitian ? eigvalsh(A).abs() : svdvals(A);
      return s.gt(cutoff(s, m, n, options)).sum(-1).to("int32");
    })
  );
}
