/**
 * `MultivariateNormal`, as `torch.distributions.MultivariateNormal`: one
 * Cholesky factor `scaleTril` carries the covariance, for sampling (`loc +
 * L·ε`), densities (a triangular solve) and the KL divergence.
 * @module
 */

import { Tensor } from "../tensor.ts";
import { randn } from "../ops/mod.ts";
import { eye } from "../ops_composite/mod.ts";
import { cholesky, inv, solveTriangular } from "../linalg/mod.ts";
import { forwardScope } from "../storage.ts";
import { broadcastShapes, formatShape } from "../shape.ts";
import {
  checkMaskLater,
  type Constraint,
  constraints,
  defaultValidateArgs,
  Distribution,
  type DistributionOptions,
  type Param,
} from "./distribution.ts";
import { noGrad } from "../autograd.ts";

const LOG_2PI = Math.log(2 * Math.PI);

/** Exactly one of the three ways to give the covariance. */
export interface MultivariateNormalOptions extends DistributionOptions {
  /** Symmetric positive-definite covariance `[..., n, n]`. */
  covarianceMatrix?: Tensor;
  /** Symmetric positive-definite inverse covariance `[..., n, n]`. */
  precisionMatrix?: Tensor;
  /** Lower-triangular Cholesky factor of the covariance, positive diagonal, `[..., n, n]`. */
  scaleTril?: Tensor;
}

/** The factor {@link withFactor} hands the constructor it runs, keyed by the matrix it factors. */
let pending: { matrix: Tensor; factor: Tensor } | undefined;

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

/** The diagonals of a batch of square matrices. */
function diagonal(m: Tensor): Tensor {
  const n = m.shape[m.ndim - 1];
  return m.mul(eye(n, { dtype: m.dtype, device: m.device })).sum(-1);
}

/** `‖L⁻¹x‖²` over the last dim (`_batch_mahalanobis`), batch dims broadcast. */
function mahalanobis(l: Tensor, x: Tensor): Tensor {
  const shape = broadcastShapes(l.shape.slice(0, -2), x.shape.slice(0, -1));
  const n = x.shape[x.ndim - 1];
  const lb = l.expand([...shape, n, n]);
  const xb = x.expand([...shape, n]).unsqueeze(-1);
  return solveTriangular(lb, xb, { upper: false }).squeeze(-1).square().sum(-1);
}

/**
 * The multivariate normal distribution N(loc, Σ) with `Σ` given as
 * `covarianceMatrix`, `precisionMatrix` or `scaleTril` (exactly one).
 *
 * @example
 * ```ts
 * import { distributions, tensor } from "@multigrad/core";
 * const d = new distributions.MultivariateNormal(tensor([0, 0]), {
 *   covarianceMatrix: tensor([[2, 0.5], [0.5, 1]]),
 * });
 * const lp = d.logProb(tensor([0.3, -0.2]));
 * ```
 */
export class MultivariateNormal extends Distribution {
  /** The mean, `batchShape + [n]`. */
  readonly loc: Tensor;
  /** The lower Cholesky factor of the covariance, `batchShape + [n, n]`. */
  readonly scaleTril: Tensor;
  readonly #given: "covarianceMatrix" | "precisionMatrix" | "scaleTril";
  readonly #matrix: Tensor;

  /** `loc` at least 1-D; the matrix `[..., n, n]` with `n` loc's last dim. */
  constructor(loc: Tensor, options: MultivariateNormalOptions) {
    const op = "MultivariateNormal";
    if (!(loc instanceof Tensor)) {
      throw new TypeError(`${op}: loc must be a Tensor, got ${typeof loc}`);
    }
    if (loc.ndim < 1) {
      throw new RangeError(`${op}: loc must be at least one-dimensional, got shape []`);
    }
    const [kind, m] = givenMatrix(op, options);
    const n = loc.shape[loc.ndim - 1];
    if (m.ndim < 2 || m.shape[m.ndim - 1] !== n || m.shape[m.ndim - 2] !== n) {
      throw new RangeError(
        `${op}: ${kind} must be at least two-dimensional with shape [..., ${n}, ${n}] (loc has shape ${
          formatShape(loc.shape)
        }), got ${formatShape(m.shape)}`,
      );
    }
    if (m.dtype !== loc.dtype || m.device !== loc.device) {
      throw new TypeError(
        `${op}: loc and ${kind} must have one dtype and device, got ${loc.dtype} on ${loc.device} and ${m.dtype} on ${m.device}`,
      );
    }
    let batch: number[];
    try {
      batch = broadcastShapes(loc.shape.slice(0, -1), m.shape.slice(0, -2), op);
    } catch {
      throw new RangeError(
        `${op}: the batch shapes of loc ${formatShape(loc.shape)} and ${kind} ${
          formatShape(m.shape)
        } do not broadcast`,
      );
    }
    super(batch, [n], options.validateArgs ?? defaultValidateArgs());
    this.#given = kind;
    this.#matrix = m.expand([...batch, n, n]);
    this.loc = loc.expand([...batch, n]);
    if (this.validateArgs && kind === "scaleTril") {
      const ok = noGrad(() =>
        diagonal(m).gt(0).sum(-1).eq(n).mul(m.triu(1).eq(0).sum([-2, -1]).eq(n * n))
      );
      checkMaskLater(
        ok,
        ok,
        (i) =>
          `${op}: scaleTril must be lower triangular with a positive diagonal (batch element ${i} is not)`,
      );
    }
    if (this.validateArgs && kind !== "scaleTril") {
      // The Cholesky factorization reads one triangle only, so an asymmetric matrix would pass
      // silently; PyTorch's positive_definite checks isclose(m, mᵀ, atol=1e-6) first.
      const ok = noGrad(() => {
        const mt = m.transpose(-1, -2);
        return m.sub(mt).abs().le(mt.abs().mul(1e-5).add(1e-6)).sum([-2, -1]).eq(n * n);
      });
      checkMaskLater(
        ok,
        ok,
        (i) =>
          `${op}: ${kind} must be symmetric positive-definite (batch element ${i} is not symmetric)`,
      );
    }
    this.scaleTril = takeFactor(
      m,
      () =>
        forwardScope(() =>
          kind === "scaleTril"
            ? this.#matrix
            : kind === "covarianceMatrix"
            ? cholesky(this.#matrix)
            : cholesky(inv(this.#matrix))
        ),
    );
  }

  /** The real vectors. */
  get support(): Constraint {
    return constraints.real;
  }
  /** True. */
  override get hasRsample(): boolean {
    return true;
  }
  /** `loc`. */
  override get mode(): Tensor {
    return this.loc;
  }
  /** `loc`. */
  get mean(): Tensor {
    return this.loc;
  }
  /** The covariance's diagonal. */
  get variance(): Tensor {
    return this.scaleTril.square().sum(-1);
  }
  /** `L·Lᵀ`. */
  get covarianceMatrix(): Tensor {
    if (this.#given === "covarianceMatrix") return this.#matrix;
    return this.scaleTril.matmul(this.scaleTril.transpose(-1, -2));
  }
  /** `(L·Lᵀ)⁻¹`. */
  get precisionMatrix(): Tensor {
    if (this.#given === "precisionMatrix") return this.#matrix;
    return forwardScope(() => {
      const n = this.eventShape[0];
      const id = eye(n, { dtype: this.loc.dtype, device: this.loc.device })
        .expand([...this.batchShape, n, n]);
      const li = solveTriangular(this.scaleTril, id, { upper: false });
      return li.transpose(-1, -2).matmul(li);
    });
  }
  /** `loc + L·ε` with ε standard normal. */
  override rsample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    const e = randn(shape, { dtype: this.loc.dtype, device: this.loc.device });
    return this.loc.add(this.scaleTril.matmul(e.unsqueeze(-1)).squeeze(-1));
  }
  /** `-½(n log 2π + ‖L⁻¹(x - loc)‖²) - Σ log diag L`. */
  logProb(value: Tensor): Tensor {
    this.validateSample("logProb", value, this.loc);
    return forwardScope(() => {
      const n = this.eventShape[0];
      const m = mahalanobis(this.scaleTril, value.sub(this.loc));
      return m.add(n * LOG_2PI).mul(-0.5).sub(this.halfLogDet());
    });
  }
  /** `½n(1 + log 2π) + Σ log diag L`. */
  override entropy(): Tensor {
    const n = this.eventShape[0];
    return this.halfLogDet().add(0.5 * n * (1 + LOG_2PI));
  }
  /** `½ log det Σ = Σ log diag L`. */
  halfLogDet(): Tensor {
    return diagonal(this.scaleTril).log().sum(-1);
  }
  /** `loc` and the matrix given. */
  protected params(): Record<string, Tensor> {
    return { loc: this.loc, [this.#given]: this.#matrix };
  }
  /** A MultivariateNormal given the same kind of matrix. */
  protected override remake([loc, m]: Param[], validateArgs = this.validateArgs): Distribution {
    const Kind = this.constructor as typeof MultivariateNormal;
    return new Kind(loc as Tensor, { [this.#given]: m as Tensor, validateArgs });
  }
  /** The parameters and the Cholesky factor expanded (the factor of a broadcast matrix is the broadcast factor: no factoring per copy). */
  protected override expanded(batchShape: number[]): Distribution {
    const n = this.eventShape[0];
    const matrix = this.#matrix.expand([...batchShape, n, n]);
    const factor = this.scaleTril.expand([...batchShape, n, n]);
    const loc = this.loc.expand([...batchShape, n]);
    return withFactor(matrix, factor, () => this.remake([loc, matrix], false));
  }
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
