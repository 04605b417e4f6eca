/**
 * LU with partial pivoting in LAPACK's packed form (`luFactor`,
 * `luFactorEx`, `lu`, `luUnpack`, `luSolve`), the `*Ex` variants that
 * return LAPACK's `info` instead of failing (`invEx`, `solveEx`,
 * `choleskyEx`), and `householderProduct`: compositions of the core's
 * ops, so every backend runs them; the gradients follow the eliminations
 * with the pivot order fixed, which is the derivative of the factorization.
 * @module
 */

import { noGrad, record } from "../autograd.ts";
import { sumTo } from "../ops/elementwise.ts";
import { zeros } from "../ops/factory.ts";
import { cat, stack } from "../ops/view.ts";
import { eye } from "../ops_composite/factory.ts";
import { scopedRounds } from "../ops_composite/util.ts";
import { formatShape } from "../shape.ts";
import { forwardScope } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import {
  asInfo,
  broadcastBatch,
  factor,
  gaussJordan,
  invWithInfo,
  solveArgs,
  transposedInfo,
  unsolved,
} from "./lu_steps.ts";
import { solveTriangular } from "./triangular.ts";
import type { CholeskyOptions } from "./cholesky.ts";
import { choleskyInfo } from "./cholesky_steps.ts";
import { failLater, indices, mT, requireMatrix, requireSquare } from "./util.ts";
import { luUnpack } from "./lu_unpack.ts";

/** Options of {@link luFactor} and {@link lu}. */
export interface LuFactorOptions {
  /** Partial pivoting (the default; `false` is refused, as PyTorch's cpu refuses it). */
  pivot?: boolean;
}

/** Options of the `*Ex` functions. */
export interface CheckErrorsOptions {
  /** Fail (at the next read) where `info` is nonzero, as the plain function does (default false). */
  checkErrors?: boolean;
}

function requirePivot(op: string, options: LuFactorOptions): void {
  if (options.pivot === false) {
    throw new RangeError(`${op}: LU without pivoting is not implemented on the CPU (pivot: false)`);
  }
}

/**
 * The LU factorization with partial pivoting of each matrix in `A`
 * (`[..., m, n]`, float), as `torch.linalg.lu_factor_ex`:
 * `[LU, pivots, info]` — `L` (unit lower, below the diagonal) and `U`
 * packed into `LU`, `pivots` the 1-based rows swapped in at each step
 * (int32, LAPACK's), `info` the 1-based index of the first zero pivot (0
 * when none; int32). Differentiable in `LU`.
 */
export function luFactorEx(
  A: Tensor,
  options: LuFactorOptions & CheckErrorsOptions = {},
): [Tensor, Tensor, Tensor] {
  const op = "linalg.lu_factor_ex";
  requireMatrix(op, A);
  requirePivot(op, options);
  const out = forwardScope(() => factor(A));
  if (options.checkErrors) {
    failLater(
      op,
      out[2],
      A.ndim > 2,
      (i) =>
        `The factorization could not be completed because the input is singular (U[${i}, ${i}] is zero).`,
      false, // PyTorch raises a plain RuntimeError here, not a LinAlgError.
    );
  }
  return out;
}

/**
 * `[LU, pivots]` of {@link luFactorEx}, as `torch.linalg.lu_factor`: an
 * exactly zero pivot (a singular matrix) fails at the next read with
 * PyTorch's error (`luFactorEx` and `lu` do not fail).
 */
export function luFactor(A: Tensor, options: LuFactorOptions = {}): [Tensor, Tensor] {
  const [LU, pivots, info] = luFactorEx(A, options);
  failLater(
    "torch.linalg.lu_factor",
    info,
    A.ndim > 2,
    (i) =>
      `U[${i},${i}] is zero and using it on lu_solve would result in a division by zero. If you still want to perform the factorization, consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)`,
    false, // PyTorch raises a plain RuntimeError here, not a LinAlgError.
  );
  return [LU, pivots];
}

/**
 * `[P, L, U]` with `A = P L U` for each matrix in `A` (`[..., m, n]`), as
 * `torch.linalg.lu` (partial pivoting; L unit lower `[..., m, k]`, U
 * `[..., k, n]`). Differentiable in L and U.
 */
export function lu(A: Tensor, options: LuFactorOptions = {}): [Tensor, Tensor, Tensor] {
  requirePivot("linalg.lu", options);
  const [LU, pivots] = luFactorEx(A);
  return luUnpack(LU, pivots);
}

/** Options of {@link luSolve}. */
export interface LuSolveOptions {
  /** Solve `AX = B` (default) or, when false, `XA = B`. */
  left?: boolean;
  /** Solve with `Aᵀ` in place of `A`. */
  adjoint?: boolean;
}

/**
 * The solution of `AX = B` (or `XA = B`, or with `Aᵀ`) from `A`'s
 * {@link luFactor} (`LU`, `pivots`), as `torch.linalg.lu_solve`: two
 * triangular solves and the permutation; batch dims broadcast.
 * Differentiable in `LU` and `B`.
 */
export function luSolve(
  LU: Tensor,
  pivots: Tensor,
  B: Tensor,
  options: LuSolveOptions = {},
): Tensor {
  const op = "linalg.lu_solve";
  const n = requireSquare(op, LU, "LU");
  const { left = true, adjoint = false } = options;
  if (!(B instanceof Tensor) || B.ndim < 2) {
    throw new RangeError(
      `${op}: B must be a batch of matrices, got shape ${formatShape(B?.shape ?? [])}`,
    );
  }
  if (B.dtype !== LU.dtype) {
    throw new TypeError(
      `${op}: Expected LU and B to have the same dtype, got ${LU.dtype} and ${B.dtype}`,
    );
  }
  if ((left ? B.shape.at(-2) : B.shape.at(-1)) !== n) {
    throw new RangeError(
      `${op}: Incompatible shapes of A and B for the equation ${
        left ? "AX = B" : "XA = B"
      } (${n}x${n} and ${B.shape.slice(-2).join("x")})`,
    );
  }
  return forwardScope(() => {
    const [P, L, U] = luUnpack(LU, pivots);
    const lower = { upper: false, unitriangular: true };
    if (left && !adjoint) {
      const y = solveTriangular(L, mT(P).matmul(B), lower);
      return solveTriangular(U, y, { upper: true });
    }
    if (left) {
      const y = solveTriangular(mT(U), B, { upper: false });
      return P.matmul(solveTriangular(mT(L), y, { upper: true, unitriangular: true }));
    }
    if (!adjoint) {
      const y = solveTriangular(U, B, { upper: true, left: false });
      return solveTriangular(L, y, { ...lower, left: false }).matmul(mT(P));
    }
    const y = B.matmul(P);
    const z = solveTriangular(mT(L), y, { upper: true, unitriangular: true, left: false });
    return solveTriangular(mT(U), z, { upper: false, left: false });
  });
}

/**
 * `[inverse, info]` of each square matrix in `A`, as
 * `torch.linalg.inv_ex`: `info` (int32) is the 1-based index of the first
 * zero pivot of the LU factorization of `Aᵀ`, as PyTorch's (0 when
 * invertible); a singular matrix gives NaN in the inverse (PyTorch's
 * inf/NaN) and no error unless `checkErrors`. The gradient is
 * {@link inv}'s.
 */
export function invEx(A: Tensor, options: CheckErrorsOptions = {}): [Tensor, Tensor] {
  const [inverse, info] = invWithInfo(A, options.checkErrors ?? false);
  return [inverse, info];
}

/** Options of {@link solveEx}. */
export interface SolveExOptions extends CheckErrorsOptions {
  /** Solve `AX = B` (default) or, when false, `XA = B`. */
  left?: boolean;
}

/**
 * `[result, info]` of `torch.linalg.solve_ex`: {@link solve}'s solution
 * (shapes, broadcasting and gradients as there) and `info` (int32, the
 * 1-based index of the first zero pivot of each `Aᵀ`'s LU as PyTorch's, 0
 * when none); a
 * singular `A` gives NaN and no error unless `checkErrors`.
 */
export function solveEx(A: Tensor, B: Tensor, options: SolveExOptions = {}): [Tensor, Tensor] {
  const op = "linalg.solve_ex";
  const { left = true, checkErrors = false } = options;
  const { b, vector } = solveArgs(op, A, B, left);
  const [solved, info] = forwardScope(() => {
    const [ae, be] = left ? broadcastBatch(op, A, b) : broadcastBatch(op, mT(A), mT(b));
    const [raw, info] = gaussJordan(ae, be);
    const x = unsolved(raw, info);
    return [left ? x : mT(x), info];
  });
  if (checkErrors) {
    failLater(
      op,
      info,
      info.ndim > 0,
      () => "The solver failed because the input matrix is singular.",
    );
  }
  const x: Tensor = record(op, [A, b], solved, ([g]) => {
    const [gb] = solveEx(mT(A), g!, { left });
    const ga = left ? gb.matmul(mT(solved)).neg() : mT(solved).matmul(gb).neg();
    return [sumTo(ga, A.shape), sumTo(gb, b.shape)];
  });
  const batchInfo = transposedInfo(A).expand(info.shape).clone();
  return [vector ? x.squeeze(left ? -1 : -2) : x, batchInfo];
}

/**
 * `[L, info]` of `torch.linalg.cholesky_ex`: {@link cholesky}'s factor
 * (`{ upper }` as there) and `info` (int32, the order of the first leading
 * minor that is not positive-definite, 0 when none); no error unless
 * `checkErrors`. The gradient is cholesky's.
 */
export function choleskyEx(
  A: Tensor,
  options: CholeskyOptions & CheckErrorsOptions = {},
): [Tensor, Tensor] {
  const [l, info] = choleskyInfo("linalg.cholesky_ex", A, options, options.checkErrors ?? false);
  return [l, asInfo(info)];
}

/**
 * The first `n` columns of the product of Householder reflectors
 * `H_i = I - τ_i v_i v_iᵀ` (`v_i` column i of `A` below the diagonal, with
 * a 1 on it), as `torch.linalg.householder_product` (LAPACK's `orgqr`):
 * `A` is `[..., m, n]` with m ≥ n, `tau` `[..., k]` with k ≤ n.
 * Differentiable in both.
 */
export function householderProduct(A: Tensor, tau: Tensor): Tensor {
  const op = "torch.linalg.householder_product";
  requireMatrix(op, A, "input");
  const [m, n] = A.shape.slice(-2);
  if (!(tau instanceof Tensor)) {
    throw new TypeError(`${op}: tau must be a Tensor, got ${typeof tau}`);
  }
  if (m < n) {
    throw new RangeError(
      `${op}: input.shape[-2] must be greater than or equal to input.shape[-1] (shape ${
        formatShape(A.shape)
      })`,
    );
  }
  const k = tau.shape.at(-1) ?? 0;
  if (tau.ndim !== A.ndim - 1) {
    throw new RangeError(
      `${op}: Expected tau to have one dimension less than input, but got tau.ndim equal to ${tau.ndim} and input.ndim is equal to ${A.ndim}`,
    );
  }
  const batch = A.shape.slice(0, -2);
  if (tau.shape.slice(0, -1).some((s, i) => s !== batch[i])) {
    throw new RangeError(
      `${op}: Expected batch dimensions of tau to be equal to input.shape[:-2], but got ${
        formatShape(tau.shape.slice(0, -1))
      } (input shape ${formatShape(A.shape)})`,
    );
  }
  if (n < k) {
    throw new RangeError(
      `${op}: input.shape[-1] must be greater than or equal to tau.shape[-1] (${n} < ${k})`,
    );
  }
  if (tau.dtype !== A.dtype) {
    throw new TypeError(`${op}: tau dtype ${tau.dtype} does not match input dtype ${A.dtype}`);
  }
  if (k === 0) {
    // No reflectors: the identity's columns, with zero gradients as PyTorch's.
    const like = { dtype: A.dtype, device: A.device };
    const q = noGrad(() => eye(m, n, like).expand([...A.shape]).clone());
    return record(op, [A, tau], q, () => [zeros([...A.shape], like), zeros([...tau.shape], like)]);
  }
  return forwardScope(() => {
    const v = A.tril(-1).add(noGrad(() => eye(m, n, { dtype: A.dtype, device: A.device })));
    let q: Tensor = noGrad(() =>
      eye(m, { dtype: A.dtype, device: A.device }).expand([...A.shape.slice(0, -2), m, m])
    );
    for (let i = 0; i < k; i++) {
      const vi = v.narrow(-1, i, 1);
      const t = tau.narrow(-1, i, 1).unsqueeze(-1);
      q = q.sub(q.matmul(vi).mul(t).matmul(mT(vi)));
    }
    return q.narrow(-1, 0, n).clone();
  });
}

/** Bunch–Kaufman's α, (1 + √17) / 8: the growth bound its pivot choice keeps. */
const BK_ALPHA = (1 + Math.sqrt(17)) / 8;

/** Options of {@link ldlFactor} and {@link ldlFactorEx}. */
export interface LdlFactorOptions {
  /** Read `A` as Hermitian (the same as symmetric for real matrices; default false). */
  hermitian?: boolean;
}

/**
 * LAPACK's `sytf2` (lower) as ops, batched: every matrix steps through the
 * columns together, a 2 × 2 pivot block making its matrix sit out the next
 * step. The trailing block is kept whole and symmetric, so an interchange
 * is `P S P` with a one-hot transposition, and only the columns still to
 * come are permuted, as LAPACK's (its L is the product of the steps').
 */
function ldlSteps(a: Tensor): [Tensor, Tensor, Tensor] {
  const n = a.shape.at(-1)!;
  const batch = a.shape.slice(0, -2);
  const like = { dtype: a.dtype, device: a.device };
  const idx = indices(n, a);
  const col = (t: Tensor, j: Tensor) => t.mul(j.unsqueeze(-2)).sum(-1); // column one-hot j → [..., n]
  const oneHot = (i: Tensor) => idx.eq(i.unsqueeze(-1)); // [...] → [..., n]
  const start = [
    a.tril().add(a.tril(-1).transpose(-1, -2)),
    zeros([...a.shape], like),
    zeros(batch, { dtype: "int32", device: a.device }),
    zeros(batch, like),
  ];
  // Each step in a scope of its own (the state it replaces freed): the pivots so far ride along.
  const [, ld, info, , ...pivots] = scopedRounds(n, start, ([s, ld, info, skip, ...pivots], k) => {
    const ek = idx.eq(k);
    const ek1 = idx.eq(k + 1);
    const columnK = s.narrow(-1, k, 1).squeeze(-1);
    const absakk = columnK.narrow(-1, k, 1).squeeze(-1).abs();
    const below = columnK.abs().mul(idx.gt(k));
    const colmax = below.amax(-1);
    const imax = below.argmax(-1).to(a.dtype); // first of the largest, as idamax
    const rowImax = oneHot(imax).unsqueeze(-2).matmul(s).squeeze(-2);
    const rowmax = rowImax.abs().mul(idx.ge(k)).mul(idx.ne(imax.unsqueeze(-1))).amax(-1);
    const diagImax = col(rowImax.unsqueeze(-2), oneHot(imax)).squeeze(-1);
    const zero = absakk.maximum(colmax).eq(0).maximum(absakk.ne(absakk)).mul(skip.eq(0));
    const first = absakk.ge(colmax.mul(BK_ALPHA));
    const second = absakk.ge(colmax.mul(BK_ALPHA).mul(colmax.div(rowmax)));
    const third = diagImax.abs().ge(rowmax.mul(BK_ALPHA));
    const keep = zero.maximum(first).maximum(second); // 1 × 1 at k, no interchange
    const active = skip.eq(0);
    const two = keep.eq(0).mul(third.eq(0)).mul(active);
    const oneSwap = keep.eq(0).mul(third).mul(active);
    // The transposition (kk, kp); the identity where nothing moves.
    const kk = two.add(k);
    const kp = imax.where(oneSwap.add(two).gt(0), kk);
    const d = oneHot(kk).sub(oneHot(kp)); // e_kk - e_kp
    const perm = noGrad(() => eye(n, like)).sub(d.unsqueeze(-1).mul(d.unsqueeze(-2)));
    s = perm.matmul(s).matmul(perm);
    // 1 × 1 block: L's column s_k / d, the trailing block less s_k s_kᵀ / d.
    const dk = s.narrow(-2, k, 1).narrow(-1, k, 1); // [..., 1, 1]
    const one = active.mul(two.eq(0)).mul(zero.eq(0)).unsqueeze(-1).unsqueeze(-1);
    const sk = s.narrow(-1, k, 1).mul(idx.gt(k).unsqueeze(-1)); // [..., n, 1]
    const l1 = sk.div(dk.where(one.gt(0), 1)).mul(one);
    // 2 × 2 block D = [[a, b], [b, c]]: L's two columns W D⁻¹, the trailing block less W D⁻¹ Wᵀ.
    const tw = two.unsqueeze(-1).unsqueeze(-1);
    const rest = idx.gt(k + 1).unsqueeze(-1);
    const w = k + 1 < n ? s.narrow(-1, k, 2).mul(rest) : zeros([...batch, n, 2], like);
    const [aa, bb, cc] = k + 1 < n
      ? [dk, s.narrow(-2, k + 1, 1).narrow(-1, k, 1), s.narrow(-2, k + 1, 1).narrow(-1, k + 1, 1)]
      : [dk, dk, dk];
    const det = aa.mul(cc).sub(bb.square()).where(tw.gt(0), 1);
    const dinv = cat([cat([cc, bb.neg()], -1), cat([bb.neg(), aa], -1)], -2).div(det).mul(tw);
    const l2 = w.matmul(dinv); // [..., n, 2]
    s = s.sub(l1.matmul(sk.transpose(-1, -2))).sub(l2.matmul(w.transpose(-1, -2)));
    // LD's columns: the 1 × 1 pivot and multipliers, or D's lower triangle and the two columns.
    const diag1 = ek.unsqueeze(-1).mul(dk).mul(one);
    let update = l1.add(diag1).mul(ek);
    if (k + 1 < n) {
      const dBlock = ek.unsqueeze(-1).mul(aa).add(ek1.unsqueeze(-1).mul(bb)).mul(ek)
        .add(ek1.unsqueeze(-1).mul(cc).mul(ek1));
      update = update.add(
        dBlock.add(l2.narrow(-1, 0, 1).mul(ek)).add(l2.narrow(-1, 1, 1).mul(ek1)).mul(tw),
      );
    }
    // A zero column (info) is left as it is, as LAPACK leaves it.
    const zeroColumn = sk.add(ek.unsqueeze(-1).mul(dk)).mul(ek).mul(
      zero.unsqueeze(-1).unsqueeze(-1),
    );
    const pivot = kp.add(1).mul(two.mul(-2).add(1)).mul(active);
    // The second column of a 2 × 2 block: its pivot is the first's, and the step is skipped.
    const taken = k > 0 ? pivot.add(pivots[k - 1].mul(skip)) : pivot;
    return [
      s,
      ld.add(update).add(zeroColumn),
      info.add(zero.mul(info.eq(0)).mul(k + 1).to("int32")),
      two,
      ...pivots,
      taken,
    ];
  });
  const piv = n === 0
    ? zeros([...batch, 0], { dtype: "int32", device: a.device })
    : stack(pivots, -1).to("int32");
  return [ld, piv, info];
}

/**
 * The LDLᵀ factorization of each symmetric matrix in `A` (its lower
 * triangle read) with Bunch–Kaufman pivoting, as
 * `torch.linalg.ldl_factor_ex`: `[LD, pivots, info]` in LAPACK's `sytrf`
 * format (`LD` holds D's 1 × 1 and 2 × 2 blocks and L's multipliers below,
 * zeros above; `pivots` int32, 1-based, negative for a 2 × 2 block; `info`
 * the first zero pivot's 1-based index, 0 when none). No gradient (PyTorch
 * has none).
 */
export function ldlFactorEx(
  A: Tensor,
  options: LdlFactorOptions & CheckErrorsOptions = {},
): [Tensor, Tensor, Tensor] {
  return ldlChecked("torch.linalg.ldl_factor_ex", A, options.checkErrors ?? false);
}

function ldlChecked(op: string, A: Tensor, checkErrors: boolean): [Tensor, Tensor, Tensor] {
  requireSquare(op, A);
  const out = noGrad(() => forwardScope(() => ldlSteps(A)));
  if (checkErrors) {
    failLater(
      op,
      out[2],
      A.ndim > 2,
      (i) =>
        `The factorization could not be completed because the input is singular (D[${i}, ${i}] is zero).`,
      false, // PyTorch raises a plain RuntimeError here, not a LinAlgError.
    );
  }
  return out;
}

/**
 * `[LD, pivots]` of {@link ldlFactorEx}, as `torch.linalg.ldl_factor`; a
 * singular matrix fails at the next read.
 */
export function ldlFactor(A: Tensor, options: LdlFactorOptions = {}): [Tensor, Tensor] {
  const [LD, pivots] = ldlChecked("torch.linalg.ldl_factor", A, true);
  void options;
  return [LD, pivots];
}

/**
 * The solution of `AX = B` from `A`'s {@link ldlFactor} (`LD`, `pivots`),
 * as `torch.linalg.ldl_solve` (LAPACK's `sytrs`): batch dims broadcast. No
 * gradient (PyTorch has none).
 */
export function ldlSolve(
  LD: Tensor,
  pivots: Tensor,
  B: Tensor,
  options: LdlFactorOptions = {},
): Tensor {
  const op = "torch.linalg.ldl_solve";
  void options;
  const n = requireSquare(op, LD, "LD");
  if (!(pivots instanceof Tensor) || pivots.dtype !== "int32") {
    throw new TypeError(`${op}: pivots must be an int32 tensor, got ${pivots?.dtype}`);
  }
  if (pivots.ndim !== LD.ndim - 1 || pivots.shape.at(-1) !== n) {
    throw new RangeError(
      `${op}: pivots (shape ${formatShape(pivots.shape)}) do not fit LD (shape ${
        formatShape(LD.shape)
      })`,
    );
  }
  if (!(B instanceof Tensor) || B.ndim < 2 || B.shape.at(-2) !== n) {
    throw new RangeError(
      `${op}: B must be a batch of matrices with ${n} rows, got shape ${
        formatShape(B?.shape ?? [])
      }`,
    );
  }
  if (B.dtype !== LD.dtype) {
    throw new TypeError(
      `${op}: Expected LD and B to have the same dtype, got ${LD.dtype} and ${B.dtype}`,
    );
  }
  return noGrad(() =>
    forwardScope(() => {
      const [ld, b0] = broadcastBatch(op, LD, B);
      const batch = ld.shape.slice(0, -2);
      const like = { dtype: LD.dtype, device: LD.device };
      const idx = indices(n, LD);
      const piv = pivots.to(LD.dtype).expand([...batch, n]);
      const at = (t: Tensor, i: number) => t.narrow(-1, i, 1); // [..., 1]
      const swap = (x: Tensor, i: Tensor, j: Tensor) => {
        // Rows i and j (per matrix, [..., 1]) of x swapped.
        const d = idx.eq(i).sub(idx.eq(j));
        return x.sub(d.unsqueeze(-1).mul(d.unsqueeze(-2)).matmul(x));
      };
      // The block starts: a 2 × 2 block's second column is not one.
      const starts: Tensor[] = [];
      let second = zeros([...batch, 1], like);
      for (let k = 0; k < n; k++) {
        starts.push(second.eq(0));
        second = at(piv, k).lt(0).mul(second.eq(0));
      }
      let x = b0;
      // L D Y = B, forward.
      for (let k = 0; k < n; k++) {
        const p = at(piv, k);
        const one = starts[k].mul(p.gt(0));
        const two = starts[k].mul(p.lt(0));
        const target = one.mul(k).add(two.mul(k + 1)).add(starts[k].eq(0).mul(k));
        const kp = p.abs().sub(1).where(starts[k], target);
        x = swap(x, target, kp);
        const lk = ld.narrow(-1, k, 1); // [..., n, 1]
        const xk = x.narrow(-2, k, 1);
        const ones = one.unsqueeze(-1);
        x = x.sub(lk.mul(idx.gt(k).unsqueeze(-1)).matmul(xk).mul(ones));
        const dk = ld.narrow(-2, k, 1).narrow(-1, k, 1);
        x = x.add(idx.eq(k).unsqueeze(-1).mul(xk.div(dk.where(ones.gt(0), 1)).sub(xk)).mul(ones));
        if (k + 1 < n) {
          const twos = two.unsqueeze(-1);
          const rest = idx.gt(k + 1).unsqueeze(-1);
          const xk1 = x.narrow(-2, k + 1, 1);
          const lk1 = ld.narrow(-1, k + 1, 1);
          x = x.sub(lk.mul(rest).matmul(xk).add(lk1.mul(rest).matmul(xk1)).mul(twos));
          const b = ld.narrow(-2, k + 1, 1).narrow(-1, k, 1).where(twos.gt(0), 1);
          const akm1 = dk.div(b);
          const ak = ld.narrow(-2, k + 1, 1).narrow(-1, k + 1, 1).div(b);
          const denom = akm1.mul(ak).sub(1).where(twos.gt(0), 1);
          const [bkm1, bk] = [xk.div(b), xk1.div(b)];
          const newK = ak.mul(bkm1).sub(bk).div(denom);
          const newK1 = akm1.mul(bk).sub(bkm1).div(denom);
          x = x.add(
            idx.eq(k).unsqueeze(-1).mul(newK.sub(xk)).add(
              idx.eq(k + 1).unsqueeze(-1).mul(newK1.sub(xk1)),
            )
              .mul(twos),
          );
        }
      }
      // Lᵀ X = Y, backward over the blocks.
      for (let k = n - 1; k >= 0; k--) {
        const p = at(piv, k);
        // The block ending at k: a 1 × 1 one, or a 2 × 2 one started at k - 1.
        const one = p.gt(0);
        const two = k > 0 ? starts[k].eq(0) : zeros([...batch, 1], like);
        const rest = idx.gt(k).unsqueeze(-1);
        const tail = x.mul(rest);
        const lk = ld.narrow(-1, k, 1).mul(rest);
        const active = one.add(two).unsqueeze(-1);
        x = x.sub(idx.eq(k).unsqueeze(-1).mul(lk.transpose(-1, -2).matmul(tail)).mul(active));
        if (k > 0) {
          const lkm1 = ld.narrow(-1, k - 1, 1).mul(rest);
          x = x.sub(
            idx.eq(k - 1).unsqueeze(-1).mul(lkm1.transpose(-1, -2).matmul(tail)).mul(
              two.unsqueeze(-1),
            ),
          );
        }
        const kp = p.abs().sub(1).where(one.add(two).gt(0), k);
        x = swap(x, zeros([...batch, 1], like).add(k), kp);
      }
      return x;
    })
  );
}
