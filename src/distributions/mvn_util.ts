/**
 * The helpers of the multivariate normal families: factor caching, the
 * given-matrix checks, their KL and low-rank pieces. Internal: not part of
 * `distributions`.
 * @module
 */

import { Tensor } from "../tensor.ts";
import { solveTriangular } from "../linalg/mod.ts";
import { broadcastShapes } from "../shape.ts";
import type { MultivariateNormal, MultivariateNormalOptions } from "./multivariate_normal.ts";
import type { LowRankMultivariateNormal } from "./multivariate_more.ts";

/**
 * `make()` with `factor` (already computed from `matrix`, e.g. expanded from
 * the original's) handed to the constructor that `make` runs, so that
 * `expand` does not factor every copy of the matrix again (PyTorch's expand
 * copies its factors too; the gradient still flows to the original parameters).
 */
export function withFactor<T>(matrix: Tensor, factor: Tensor, make: () => T): T {
  pending = { matrix, factor };
  try {
    return make();
  } finally {
    pending = undefined;
  }
}

/** The factor of `matrix` (a constructor argument) that {@link withFactor} handed over, else `compute()`. */
export function takeFactor(matrix: Tensor, compute: () => Tensor): Tensor {
  const given = pending?.matrix === matrix ? pending.factor : undefined;
  if (given) pending = undefined;
  return given ?? compute();
}

/**
 * The one matrix of `covarianceMatrix`, `precisionMatrix` and `scaleTril`
 * that `options` gives (MultivariateNormal's and Wishart's rule), with its name.
 */
export function givenMatrix(
  op: string,
  options: MultivariateNormalOptions,
): ["covarianceMatrix" | "precisionMatrix" | "scaleTril", Tensor] {
  const given = (["covarianceMatrix", "precisionMatrix", "scaleTril"] as const).filter((k) =>
    options?.[k] !== undefined
  );
  if (given.length !== 1) {
    throw new TypeError(
      `${op}: exactly one of covarianceMatrix, precisionMatrix or scaleTril must be given, got ${
        given.length === 0 ? "none" : given.join(", ")
      }`,
    );
  }
  const kind = given[0];
  const m = options[kind]!;
  if (!(m instanceof Tensor)) throw new TypeError(`${op}: ${kind} must be a Tensor`);
  return [kind, m];
}

/** `KL(p ‖ q)` of two multivariate normals of one event size. */
export function klMultivariateNormal(p: MultivariateNormal, q: MultivariateNormal): Tensor {
  const n = p.eventShape[0];
  if (q.eventShape[0] !== n) {
    throw new RangeError(
      `klDivergence: MultivariateNormals of different event shapes [${n}] and [${
        q.eventShape[0]
      }] have no KL divergence`,
    );
  }
  const shape = broadcastShapes(p.batchShape, q.batchShape, "klDivergence");
  const pl = p.scaleTril.expand([...shape, n, n]);
  const ql = q.scaleTril.expand([...shape, n, n]);
  const term1 = q.halfLogDet().sub(p.halfLogDet());
  const term2 = solveTriangular(ql, pl, { upper: false }).square().sum([-2, -1]);
  const term3 = mahalanobis(q.scaleTril, q.loc.sub(p.loc));
  return term1.add(term2.add(term3).sub(n).mul(0.5));
}

/** `Σ xᵢⱼ²` over the last two dims (`_batch_trace_XXT`). */
export function traceXXt(x: Tensor): Tensor {
  return x.square().sum([-2, -1]);
}

/** The KL pieces shared by the low-rank pairs: `A = C_q⁻¹ W_qᵀ D_q⁻¹`. */
export function lowrankA(q: LowRankMultivariateNormal): Tensor {
  return solveTriangular(q.capacitanceTril, wtDinv(q.covFactor, q.covDiag), { upper: false });
}

/** The factor {@link withFactor} hands the constructor it runs, keyed by the matrix it factors. */
export let pending: { matrix: Tensor; factor: Tensor } | undefined;

/** `‖L⁻¹x‖²` over the last dim (`_batch_mahalanobis`), batch dims broadcast. */
export function mahalanobis(l: Tensor, x: Tensor): Tensor {
  const shape = broadcastShapes(l.shape.slice(0, -2), x.shape.slice(0, -1));
  const n = x.shape[x.ndim - 1];
  const lb = l.expand([...shape, n, n]);
  const xb = x.expand([...shape, n]).unsqueeze(-1);
  return solveTriangular(lb, xb, { upper: false }).squeeze(-1).square().sum(-1);
}

/** `Wᵀ D⁻¹` of a batch of `[n, m]` factors and `[n]` diagonals. */
export function wtDinv(w: Tensor, d: Tensor): Tensor {
  return w.transpose(-1, -2).div(d.unsqueeze(-2));
}
