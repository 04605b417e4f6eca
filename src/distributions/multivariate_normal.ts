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
  type Constraint,
  Distribution,
  type DistributionOptions,
  type Param,
} from "./distribution.ts";
import { checkMaskLater, constraints, defaultValidateArgs } from "./util.ts";
import { noGrad } from "../autograd.ts";
import { givenMatrix, mahalanobis, takeFactor, withFactor } from "./mvn_util.ts";

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

/** The diagonals of a batch of square matrices. */
function diagonal(m: Tensor): Tensor {
  const n = m.shape[m.ndim - 1];
  return m.mul(eye(n, { dtype: m.dtype, device: m.device })).sum(-1);
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
