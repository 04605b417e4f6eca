/**
 * Ready-made parametrizations, as PyTorch 1.13's
 * `torch.nn.utils.parametrizations`: `orthogonal` and the parametrization
 * version of `spectralNorm` (the older `nn.utils.spectralNorm` is the
 * hook-based one), registered with {@link registerParametrization}.
 * @module
 */

import { noGrad } from "../../autograd.ts";
import { solve } from "../../linalg/lu.ts";
import { normal, randn, zeros } from "../../ops/factory.ts";
import { cat } from "../../ops/view.ts";
import { eye } from "../../ops_composite/mod.ts";
import { formatShape, sameShape } from "../../shape.ts";
import { tidy } from "../../storage.ts";
import { Tensor } from "../../tensor.ts";
import { ConvTranspose1d, ConvTranspose2d, ConvTranspose3d } from "../conv.ts";
import { normalize } from "../functional/normalize.ts";
import { Module } from "../module.ts";
import {
  geqrf,
  householderProduct,
  makeOrthogonal,
  matrixExp,
  padColumns,
} from "./orthogonal_maps.ts";
import { where } from "../../ops/indexing.ts";
import { NotImplementedError, type Parametrized, registerParametrization } from "./parametrize.ts";

/** The maps from unconstrained matrices to orthogonal ones that {@link orthogonal} offers. */
export type OrthogonalMap = "matrix_exp" | "cayley" | "householder";

/** Options of {@link orthogonal}. */
export interface OrthogonalOptions {
  /**
   * `"matrix_exp"`, `"cayley"` or `"householder"`; default `"matrix_exp"` for square matrices
   * and `"householder"` otherwise, as PyTorch.
   */
  orthogonalMap?: OrthogonalMap;
  /**
   * Keep the map's input near zero by moving a `base` orthogonal matrix along (default true),
   * as PyTorch's `use_trivialization`: the buffer `parametrizations.<name>.0.base` holds it.
   */
  useTrivialization?: boolean;
}

/** Options of {@link spectralNorm}. */
export interface SpectralNormOptions {
  /** Power-iteration steps per read of the tensor in training mode (default 1). */
  nPowerIterations?: number;
  /** Smallest norm `u` and `v` are divided by (default 1e-12). */
  eps?: number;
  /** The dim of the outputs (default 0; 1 for ConvTranspose1d/2d/3d). */
  dim?: number;
}

type Fields = Record<string, unknown>;

const mT = (x: Tensor): Tensor => x.transpose(-1, -2);

/** The diagonal of each [..., n, k] matrix (n ≥ k), as [..., k]. */
function diagonalOf(X: Tensor): Tensor {
  const [n, k] = X.shape.slice(-2);
  return X.mul(eye(n, k, { dtype: X.dtype, device: X.device })).sum(-2);
}

/**
 * PyTorch's `_Orthogonal`: the parametrization {@link orthogonal} registers. Its forward maps
 * a matrix (or a batch) to one with orthonormal columns (rows when wide).
 */
export class _Orthogonal extends Module {
  /** The shape of the tensor it parametrizes. */
  readonly shape: readonly number[];
  /** The map used. */
  readonly orthogonalMap: OrthogonalMap;
  /** Whether a `base` buffer is kept (PyTorch's `use_trivialization`). */
  readonly useTrivialization: boolean;
  /** The orthogonal matrix the map's output multiplies, when {@link useTrivialization}. */
  declare base: Tensor | null;

  /** A parametrization for tensors of `weight`'s shape. */
  constructor(weight: Tensor, orthogonalMap: OrthogonalMap, useTrivialization = true) {
    super();
    this.shape = [...weight.shape];
    this.orthogonalMap = orthogonalMap;
    this.useTrivialization = useTrivialization;
    if (useTrivialization) this.registerBuffer("base", null);
  }

  /** The orthogonal matrix that `X` (unconstrained, of the parametrized shape) stands for. */
  override forward(X: Tensor): Tensor {
    let [n, k] = X.shape.slice(-2);
    const transposed = n < k;
    if (transposed) {
      X = mT(X);
      [n, k] = [k, n];
    }
    let Q: Tensor;
    if (this.orthogonalMap === "householder") {
      const A = X.tril(-1);
      const tau = A.mul(A).sum(-2).add(1).reciprocal().mul(2);
      Q = householderProduct(A, tau);
      // The diagonal of X holds ±1 and is not learned: PyTorch casts it to int (truncation).
      Q = Q.mul(noGrad(() => diagonalOf(X).trunc()).unsqueeze(-2));
    } else {
      const Y = padColumns(X.tril(), n);
      const A = Y.sub(mT(Y));
      if (this.orthogonalMap === "matrix_exp") {
        Q = matrixExp(A);
      } else {
        const id = eye(n, { dtype: A.dtype, device: A.device });
        Q = solve(id.sub(A.mul(0.5)), id.add(A.mul(0.5)));
      }
      if (n !== k) Q = Q.narrow(-1, 0, k);
    }
    if (this.useTrivialization) {
      if (!(this.base instanceof Tensor)) {
        throw new Error("_Orthogonal: the base is not set (rightInverse was never called)");
      }
      Q = this.base.matmul(Q);
    }
    return transposed ? mT(Q) : Q;
  }

  /**
   * An unconstrained tensor whose forward gives `Q` (orthogonalised first through its QR
   * decomposition), as PyTorch's `right_inverse`: with trivialization, `Q` (completed to a
   * square orthogonal matrix by random columns when it is not square) becomes the base and the
   * result is `-I`.
   */
  rightInverse(Q: Tensor): Tensor {
    if (!sameShape(Q.shape, this.shape)) {
      throw new RangeError(
        `Expected a matrix or batch of matrices of shape ${formatShape(this.shape)}. ` +
          `Got a tensor of shape ${formatShape(Q.shape)}.`,
      );
    }
    return noGrad(() => {
      const qInit = Q;
      let [n, k] = Q.shape.slice(-2);
      if (n < k) {
        Q = mT(Q);
        [n, k] = [k, n];
      }
      if (!this.useTrivialization) {
        if (this.orthogonalMap !== "householder") {
          throw new NotImplementedError(
            "It is not possible to assign to the matrix exponential " +
              "or the Cayley parametrizations when use_trivialization=False.",
          );
        }
        // The reflectors of Q's QR, and R's diagonal signs (flipped where no reflection was
        // made, as the forward's tau is then 2, not LAPACK's 0) on the diagonal.
        const [A, tau] = geqrf(Q);
        const unit = eye(n, k, { dtype: A.dtype, device: A.device });
        const signs = diagonalOf(A).sign().mul(where(tau.eq(0), -1, 1));
        const X = A.mul(unit.neg().add(1)).add(unit.mul(signs.unsqueeze(-2)));
        return qInit.shape.at(-2)! < qInit.shape.at(-1)! ? mT(X) : X;
      }
      const batch = Q.shape.slice(0, -2);
      if (n !== k) {
        Q = cat([Q, randn([...batch, n, n - k], { dtype: Q.dtype, device: Q.device })], -1);
      }
      // PyTorch keeps an already orthogonal Q as it is; its QR with positive diagonal is that
      // same Q up to rounding, so it is always taken here (no read back to the host).
      this.base = tidy(() => makeOrthogonal(Q));
      const opts = { dtype: qInit.dtype, device: qInit.device };
      return zeros([...qInit.shape], opts).sub(eye(qInit.shape.at(-2)!, qInit.shape.at(-1)!, opts));
    });
  }
}

/**
 * Makes `module`'s matrix (or batch of matrices) `name` (default `"weight"`) orthogonal, as
 * PyTorch 1.13's `torch.nn.utils.parametrizations.orthogonal`: orthonormal columns when it is
 * tall or square, orthonormal rows when it is wide, through the map `orthogonalMap` of an
 * unconstrained `parametrizations.<name>.original`. The tensor starts at its current value
 * made orthogonal (by QR, with R's diagonal positive), and assigning to it sets it likewise.
 * Registered unsafe, as PyTorch's. Returns `module`.
 *
 * Unlike PyTorch, an already orthogonal square value is orthogonalised anyway (the same
 * matrix up to rounding; PyTorch keeps it when `QᵀQ` is within `10·n·eps` of I). The matrix
 * exponential is a Taylor polynomial with scaling and squaring, `torch.geqrf` (the householder
 * map's inverse without trivialization) a loop of reflections: both compositions of tensor ops.
 */
export function orthogonal<M extends Module>(
  module: M,
  name = "weight",
  options: OrthogonalOptions = {},
): M & Parametrized {
  const weight = (module as unknown as Fields)[name];
  if (!(weight instanceof Tensor)) {
    throw new RangeError(`Module '${module}' has no parameter or buffer with name '${name}'`);
  }
  if (weight.ndim < 2) {
    throw new RangeError(
      `Expected a matrix or batch of matrices. Got a tensor of ${weight.ndim} dimensions.`,
    );
  }
  const map = options.orthogonalMap ??
    (weight.shape.at(-2) === weight.shape.at(-1) ? "matrix_exp" : "householder");
  if (map !== "matrix_exp" && map !== "cayley" && map !== "householder") {
    throw new RangeError(
      `orthogonal_map has to be one of "matrix_exp", "cayley", "householder". Got: ${map}`,
    );
  }
  const useTrivialization = options.useTrivialization ?? true;
  const orth = new _Orthogonal(weight, map, useTrivialization);
  return registerParametrization(module, name, orth, { unsafe: true });
}

/** PyTorch's `_SpectralNorm`: the parametrization {@link spectralNorm} registers. */
export class _SpectralNorm extends Module {
  /** The output dim, made non-negative. */
  readonly dim: number;
  /** Smallest norm `u` and `v` are divided by. */
  readonly eps: number;
  /** Power-iteration steps per forward in training mode. */
  readonly nPowerIterations: number;
  /** The left singular vector estimate (buffer `_u`; absent for a 1-dim weight). */
  declare _u: Tensor;
  /** The right singular vector estimate (buffer `_v`; absent for a 1-dim weight). */
  declare _v: Tensor;

  /**
   * A parametrization for tensors like `weight`: `_u` and `_v` start as normalised normal draws
   * refined by 15 power-iteration steps, as PyTorch's.
   */
  constructor(weight: Tensor, nPowerIterations = 1, dim = 0, eps = 1e-12) {
    super();
    const ndim = weight.ndim;
    if (!Number.isInteger(dim) || dim >= ndim || dim < -ndim) {
      throw new RangeError(
        `Dimension out of range (expected to be in range of [-${ndim}, ${
          ndim - 1
        }] but got ${dim})`,
      );
    }
    if (!Number.isInteger(nPowerIterations) || nPowerIterations <= 0) {
      throw new RangeError(
        `Expected nPowerIterations to be positive, but got nPowerIterations=${nPowerIterations}`,
      );
    }
    if (typeof eps !== "number" || !(eps >= 0)) {
      throw new RangeError(`spectralNorm: eps must be a non-negative number, got ${eps}`);
    }
    this.dim = dim >= 0 ? dim : dim + ndim;
    this.eps = eps;
    this.nPowerIterations = nPowerIterations;
    if (ndim > 1) {
      noGrad(() =>
        tidy(() => {
          const mat = this.weightMatrix(weight);
          const [h, w] = mat.shape;
          const opts = { dtype: weight.dtype, device: weight.device };
          this.registerBuffer("_u", normalize(normal([h], 0, 1, opts), { dim: 0, eps }), {
            field: "_u",
          });
          this.registerBuffer("_v", normalize(normal([w], 0, 1, opts), { dim: 0, eps }), {
            field: "_v",
          });
          this.powerMethod(mat, 15);
        })
      );
    }
  }

  /** The weight as a matrix: `dim` first, the other dims flattened (PyTorch's `_reshape_weight_to_matrix`). */
  weightMatrix(weight: Tensor): Tensor {
    const others = weight.shape.map((_, d) => d).filter((d) => d !== this.dim);
    const mat = this.dim === 0 ? weight : weight.permute([this.dim, ...others]);
    return mat.flatten(1);
  }

  /** `steps` steps of `u = normalize(W v)`, `v = normalize(Wᵀ u)`, written into `_u` and `_v`. */
  powerMethod(mat: Tensor, steps: number): void {
    noGrad(() =>
      tidy(() => {
        const w = mat.detach();
        for (let i = 0; i < steps; i++) {
          this._u._assign(
            normalize(w.matmul(this._v.unsqueeze(-1)).squeeze(-1), { dim: 0, eps: this.eps }),
          );
          this._v._assign(
            normalize(w.t().matmul(this._u.unsqueeze(-1)).squeeze(-1), { dim: 0, eps: this.eps }),
          );
        }
      })
    );
  }

  /**
   * `weight / σ`, σ = uᵀ W v, after `nPowerIterations` power-iteration steps in training mode;
   * a 1-dim weight is normalised instead.
   */
  override forward(weight: Tensor): Tensor {
    if (weight.ndim === 1) return normalize(weight, { dim: 0, eps: this.eps });
    const mat = this.weightMatrix(weight);
    if (this.training) this.powerMethod(mat, this.nPowerIterations);
    const u = this._u.clone();
    const v = this._v.clone();
    const sigma = u.mul(mat.matmul(v.unsqueeze(-1)).squeeze(-1)).sum();
    return weight.div(sigma);
  }

  /** The value itself: any weight is its own unnormalised original (PyTorch's `right_inverse`). */
  rightInverse(value: Tensor): Tensor {
    return value;
  }
}

/**
 * Spectral normalization as a parametrization, as PyTorch 1.13's
 * `torch.nn.utils.parametrizations.spectral_norm`: `module[name]` (default `"weight"`) reads as
 * `original / σ`, σ the largest singular value of the weight as a matrix (`dim` first, the
 * other dims flattened), estimated by power iteration with the buffers
 * `parametrizations.<name>.0._u` and `_v`; in training mode every read runs `nPowerIterations`
 * more steps. A 1-dim weight is divided by its norm. Returns `module`.
 */
export function spectralNorm<M extends Module>(
  module: M,
  name = "weight",
  options: SpectralNormOptions = {},
): M & Parametrized {
  const weight = (module as unknown as Fields)[name];
  if (!(weight instanceof Tensor)) {
    throw new RangeError(`Module '${module}' has no parameter or buffer with name '${name}'`);
  }
  const isTransposed = module instanceof ConvTranspose1d || module instanceof ConvTranspose2d ||
    module instanceof ConvTranspose3d;
  const dim = options.dim ?? (isTransposed ? 1 : 0);
  const sn = new _SpectralNorm(weight, options.nPowerIterations ?? 1, dim, options.eps ?? 1e-12);
  return registerParametrization(module, name, sn);
}
