/**
 * Wishart and LKJCholesky, as `torch.distributions`: distributions over
 * positive-definite matrices and over Cholesky factors of correlation
 * matrices. Draws use the library's gamma sampler; Wishart's are
 * reparameterized (implicitly in df), LKJCholesky's carry no gradient.
 * @module
 */

import { Tensor } from "../tensor.ts";
import { noGrad } from "../autograd.ts";
import { arange, randn } from "../ops/mod.ts";
import { eye } from "../ops_composite/mod.ts";
import { cholesky, inv, slogdet } from "../linalg/mod.ts";
import { choleskyInfo } from "../linalg/cholesky_steps.ts";
import { choleskySolve } from "../linalg/torch_level.ts";
import { forwardScope } from "../storage.ts";
import { broadcastShapes, formatShape } from "../shape.ts";
import {
  type Constraint,
  Distribution,
  type DistributionOptions,
  type Param,
} from "./distribution.ts";
import {
  broadcastAll,
  checkMaskLater,
  checkParam,
  constraints,
  defaultValidateArgs,
  eps,
  numberParam,
} from "./util.ts";
import { ExponentialFamily } from "./exp_family.ts";
import { constraints as allConstraints } from "./constraints.ts";
import { Beta } from "./gamma.ts";
import { rsampleStandardGamma } from "./gamma_sampling.ts";
import { givenMatrix, takeFactor, withFactor } from "./mvn_util.ts";

const LOG2 = Math.LN2;

/** A number as Python prints a float (`3.0`, `0.5`). */
function pyFloat(x: number): string {
  return Number.isInteger(x) ? x.toFixed(1) : String(x);
}

/** The smallest normal number of `dtype` (`torch.finfo(dtype).tiny`). */
function tiny(dtype: Tensor["dtype"]): number {
  return dtype === "float64" ? 2.2250738585072014e-308 : 1.1754943508222875e-38;
}

/** The multivariate digamma `Σᵢ ψ(x - i/2)`, i < p (`_mvdigamma`). */
function mvdigamma(x: Tensor, p: number): Tensor {
  const offsets = arange(0, p, 1, { dtype: x.dtype, device: x.device }).div(2);
  return x.unsqueeze(-1).sub(offsets).digamma().sum(-1);
}

/** Symmetric positive-definite matrices (`constraints.positive_definite`). */
const positiveDefinite: Constraint = {
  name: "positive definite",
  check: (x) => {
    const sym = allConstraints.symmetric.check(x);
    const [, info] = choleskyInfo("Wishart", x, {}, false);
    return sym.mul(info.eq(0).reshape([...info.shape, 1, 1]).expand([...x.shape]));
  },
  holds: () => true,
};

/** Exactly one way to give the scale matrix of a {@link Wishart}. */
export interface WishartOptions extends DistributionOptions {
  /** Symmetric positive-definite scale `[..., p, p]`. */
  covarianceMatrix?: Tensor;
  /** Its inverse. */
  precisionMatrix?: Tensor;
  /** Its lower Cholesky factor with a positive diagonal. */
  scaleTril?: Tensor;
}

/**
 * The Wishart distribution of `df` degrees of freedom (ν > p - 1) and a
 * `p × p` scale matrix Σ, as `torch.distributions.Wishart`. Draws by
 * Bartlett's decomposition, differentiable in df (through the chi-squared
 * draws, implicitly, see {@link Gamma}) and the scale; PyTorch's retries of
 * singular draws are not needed as the chi-squared draws are clamped above eps.
 */
export class Wishart extends ExponentialFamily {
  /** ν, of the batch shape. */
  readonly df: Tensor;
  /** The lower Cholesky factor of the scale, `batchShape + [p, p]`. */
  readonly scaleTril: Tensor;
  readonly #given: "covarianceMatrix" | "precisionMatrix" | "scaleTril";
  readonly #matrix: Tensor;
  readonly #dfNumber: number | undefined;

  /** `df > p - 1`; exactly one of the three matrices, batch dims broadcast with df's. */
  constructor(df: Param, options: WishartOptions) {
    const op = "Wishart";
    const [kind, m] = givenMatrix(op, options);
    if (m.dtype !== "float32" && m.dtype !== "float64") {
      throw new TypeError(`${op}: ${kind} must be a float tensor, got dtype ${m.dtype}`);
    }
    const p = m.shape[m.ndim - 1];
    if (m.ndim < 2 || m.shape[m.ndim - 2] !== p) {
      throw new RangeError(
        `${op}: ${kind} must be a batch of square matrices, got shape ${formatShape(m.shape)}`,
      );
    }
    if (df instanceof Tensor && (df.dtype !== m.dtype || df.device !== m.device)) {
      throw new TypeError(
        `${op}: df and ${kind} must have one dtype and device, got ${df.dtype} on ${df.device} and ${m.dtype} on ${m.device}`,
      );
    }
    const validate = options.validateArgs ?? defaultValidateArgs();
    if (typeof df === "number" && !(df > p - 1)) {
      throw new RangeError(`${op}: df must be greater than p - 1 = ${p - 1}, got ${df}`);
    }
    let batch: number[];
    try {
      batch = df instanceof Tensor
        ? broadcastShapes(m.shape.slice(0, -2), df.shape, op)
        : m.shape.slice(0, -2);
    } catch {
      throw new RangeError(
        `${op}: the batch shapes of ${kind} ${formatShape(m.shape)} and df ${
          formatShape((df as Tensor).shape)
        } do not broadcast`,
      );
    }
    super(batch, [p, p], validate);
    this.#dfNumber = typeof df === "number" ? df : undefined;
    this.df = typeof df === "number"
      ? numberParam(df, m.dtype, m.device).expand(batch)
      : df.expand(batch);
    this.#given = kind;
    this.#matrix = m.expand([...batch, p, p]);
    if (validate && df instanceof Tensor) {
      checkParam(op, "df", df, df, allConstraints.greaterThan(p - 1));
    }
    if (validate) {
      const mat = this.#matrix;
      const c = kind === "scaleTril" ? allConstraints.lowerCholesky : positiveDefinite;
      const ok = noGrad(() => c.check(mat).amin([-2, -1]));
      checkMaskLater(
        ok,
        ok,
        (i) => `${op}: ${kind} must be ${c.name} (batch element ${i} is not)`,
      );
    }
    this.scaleTril = takeFactor(m, () =>
      forwardScope(() =>
        // A given factor is used as it is, upper triangle included: PyTorch's `cholesky_solve`
        // and matmul gradients reach entries above the diagonal (the constraint keeps them 0).
        kind === "scaleTril"
          ? this.#matrix
          : kind === "covarianceMatrix"
          ? cholesky(this.#matrix)
          : cholesky(inv(this.#matrix))
      ));
  }
  /** Symmetric positive-definite matrices. */
  get support(): Constraint {
    return positiveDefinite;
  }
  /** The size p of the matrices. */
  private get p(): number {
    return this.eventShape[0];
  }
  /** ν with two trailing size-1 dims. */
  private get dfMatrix(): Tensor {
    return this.df.reshape([...this.batchShape, 1, 1]);
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
      const id = eye(this.p, { dtype: this.df.dtype, device: this.df.device })
        .expand([...this.batchShape, this.p, this.p]);
      return choleskySolve(id, this.scaleTril); // PyTorch's form, so its gradients
    });
  }
  /** `ν·Σ`. */
  get mean(): Tensor {
    return this.dfMatrix.mul(this.covarianceMatrix);
  }
  /** `(ν - p - 1)·Σ` where `ν > p + 1`, else NaN. */
  override get mode(): Tensor {
    const factor = this.dfMatrix.sub(this.p + 1);
    const safe = factor.where(noGrad(() => factor.gt(0)), NaN);
    return safe.mul(this.covarianceMatrix);
  }
  /** `ν(Σᵢⱼ² + Σᵢᵢ Σⱼⱼ)`. */
  get variance(): Tensor {
    return forwardScope(() => {
      const v = this.covarianceMatrix;
      const d = v.diagonal(0, -2, -1);
      return this.dfMatrix.mul(v.square().add(d.unsqueeze(-1).mul(d.unsqueeze(-2))));
    });
  }
  /** True: draws are differentiable in df and the scale. */
  override get hasRsample(): boolean {
    return true;
  }
  /** Bartlett's `L·A·Aᵀ·Lᵀ` (A's diagonal √χ², below it standard normals). */
  override rsample(sampleShape: number[] = []): Tensor {
    const shape = [...sampleShape, ...this.batchShape];
    const p = this.p;
    return forwardScope(() => {
      const opts = { dtype: this.df.dtype, device: this.df.device };
      const dfs = this.df.unsqueeze(-1).sub(arange(0, p, 1, opts)).expand([...shape, p]);
      const chi = rsampleStandardGamma(dfs.mul(0.5)).mul(2).sqrt().clamp(eps(opts.dtype));
      const a = randn([...shape, p, p], opts).tril(-1).add(chi.diagEmbed());
      const c = this.scaleTril.matmul(a);
      return c.matmul(c.transpose(-1, -2));
    });
  }
  /** `-ν(p log 2/2 + log|L|) - log Γ_p(ν/2) + (ν - p - 1)/2·log|X| - tr(Σ⁻¹X)/2`. */
  logProb(value: Tensor): Tensor {
    this.validateSample("logProb", value, this.df);
    return forwardScope(() => {
      const nu = this.df;
      const p = this.p;
      const logDetL = this.scaleTril.diagonal(0, -2, -1).log().sum(-1);
      const [, logAbsDet] = slogdet(value);
      const shape = broadcastShapes(value.shape.slice(0, -2), this.batchShape);
      const l = this.scaleTril.expand([...shape, p, p]);
      const x = value.expand([...shape, p, p]);
      const trace = choleskySolve(x, l).diagonal(0, -2, -1).sum(-1);
      return nu.mul(logDetL.add(p * LOG2 / 2)).neg().sub(nu.div(2).mvlgamma(p))
        .add(nu.sub(p + 1).div(2).mul(logAbsDet)).sub(trace.div(2));
    });
  }
  /** The entropy, as PyTorch's formula. */
  override entropy(): Tensor {
    return forwardScope(() => {
      const nu = this.df;
      const p = this.p;
      const logDetL = this.scaleTril.diagonal(0, -2, -1).log().sum(-1);
      return logDetL.add(p * LOG2 / 2).mul(p + 1).add(nu.div(2).mvlgamma(p))
        .sub(nu.sub(p + 1).div(2).mul(mvdigamma(nu.div(2), p))).add(nu.mul(p / 2));
    });
  }
  /** The matrix given and `df`. */
  protected params(): Record<string, Tensor> {
    const names = {
      covarianceMatrix: "covariance_matrix",
      precisionMatrix: "precision_matrix",
      scaleTril: "scale_tril",
    };
    return { [names[this.#given]]: this.#matrix, df: this.df };
  }
  /** A Wishart given the same kind of matrix (a number df stays a number). */
  protected override remake([m, df]: Param[], validateArgs = this.validateArgs): Distribution {
    const Kind = this.constructor as typeof Wishart;
    return new Kind(this.#dfNumber ?? df, { [this.#given]: m as Tensor, validateArgs });
  }
  /** The parameters and the Cholesky factor expanded (no factoring per copy). */
  protected override expanded(batchShape: number[]): Distribution {
    const shape = [...batchShape, this.p, this.p];
    const matrix = this.#matrix.expand(shape);
    return withFactor(
      matrix,
      this.scaleTril.expand(shape),
      () => this.remake([matrix, this.df.expand(batchShape)], false),
    );
  }
  /** `(-Σ⁻¹/2, (ν - p - 1)/2)`. */
  get naturalParams(): Tensor[] {
    return [this.precisionMatrix.mul(-0.5), this.df.sub(this.p + 1).mul(0.5)];
  }
  /** `(y + (p + 1)/2)·(p log 2 - log det(-2x)) + log Γₚ(y + (p + 1)/2)`. */
  logNormalizer(x: Tensor, y: Tensor): Tensor {
    const p = this.p;
    const logDet = cholesky(x.mul(-2)).diagonal(0, -2, -1).log().sum(-1).mul(2);
    const a = y.add((p + 1) / 2);
    return a.mul(logDet.neg().add(p * LOG2)).add(a.mvlgamma(p));
  }
  /** 0. */
  override get meanCarrierMeasure(): number {
    return 0;
  }
  /** PyTorch's repr: `df` shows its value when it was a number. */
  override toString(): string {
    const base = super.toString();
    if (this.#dfNumber === undefined) return base;
    return base.replace(/df: torch\.Size\(\[[^\]]*\]\)/, `df: ${pyFloat(this.#dfNumber)}`);
  }
  /** Itself: a number `df` always joins the matrix's device. */
  override withNumbersOn(): Distribution {
    return this;
  }
}

/**
 * The LKJ distribution over lower Cholesky factors of `dim × dim`
 * correlation matrices with shape `concentration` η (density ∝ `det(LLᵀ)^{η-1}`),
 * as `torch.distributions.LKJCholesky`; draws by the onion method, without
 * gradient (as PyTorch), with the onion's Beta(i/2, ·) for row i where PyTorch
 * 1.13 draws Beta(i - ½, ·), whose correlations past the second row are too
 * wide. PyTorch defines no mean or variance for it.
 */
export class LKJCholesky extends Distribution {
  /** The size of the matrices. */
  readonly dim: number;
  /** η. */
  readonly concentration: Tensor;
  readonly #beta: Beta;
  readonly #number: number | undefined;

  /** `dim >= 2` an integer; `concentration > 0` (default 1). */
  constructor(dim: number, concentration: Param = 1, options: DistributionOptions = {}) {
    if (!Number.isInteger(dim) || dim < 2) {
      throw new RangeError(`LKJCholesky: dim must be an integer >= 2, got ${dim}`);
    }
    const [c] = broadcastAll("LKJCholesky", { concentration });
    super(c.shape, [dim, dim], options.validateArgs ?? defaultValidateArgs());
    this.dim = dim;
    this.concentration = c;
    this.#number = typeof concentration === "number" ? concentration : undefined;
    if (this.validateArgs) {
      checkParam("LKJCholesky", "concentration", concentration, c, constraints.positive);
    }
    this.#beta = forwardScope(() => {
      const marginal = c.add(0.5 * (dim - 2));
      // [0, 0, 1, ..., dim - 2], as PyTorch's cat([0], arange(dim - 1)). Row i's squared norm is
      // Beta(i/2, marginal - (i - 1)/2) by the onion method; PyTorch 1.13's first parameter
      // `offset + ½` (i - ½) gives rows past the second too wide correlations, so not here.
      const offset = arange(0, dim, 1, { dtype: c.dtype, device: c.device }).sub(1).clamp(0);
      return new Beta(offset.add(1).mul(0.5), marginal.unsqueeze(-1).sub(offset.mul(0.5)), {
        validateArgs: false,
      });
    });
  }
  /** Lower Cholesky factors of correlation matrices. */
  get support(): Constraint {
    return allConstraints.corrCholesky;
  }
  /** Not defined (as PyTorch). */
  get mean(): Tensor {
    throw new TypeError("LKJCholesky.mean: not implemented (as PyTorch)");
  }
  /** Not defined (as PyTorch). */
  get variance(): Tensor {
    throw new TypeError("LKJCholesky.variance: not implemented (as PyTorch)");
  }
  /** The onion method: rows of length √y (y Beta draws) on the hypersphere, without gradient. */
  override sample(sampleShape: number[] = []): Tensor {
    const shape = this.extendedShape(sampleShape);
    return noGrad(() =>
      forwardScope(() => {
        const c = this.concentration;
        const y = this.#beta.sample(sampleShape).unsqueeze(-1);
        const u = randn(shape, { dtype: c.dtype, device: c.device }).tril(-1);
        const norm = u.square().sum(-1, true).sqrt();
        // Row 0 is all zeros (PyTorch fills its 0/0 with 0).
        const sphere = u.div(norm.where(norm.gt(0), 1));
        const w = y.sqrt().mul(sphere);
        const diag = w.square().sum(-1).neg().add(1).clamp(tiny(c.dtype)).sqrt();
        return w.add(diag.diagEmbed());
      })
    );
  }
  /** `Σᵢ (2(η - 1) + dim - i) log Lᵢᵢ` (i ≥ 2) minus the normalizer, as PyTorch. */
  logProb(value: Tensor): Tensor {
    this.validateSample("logProb", value, this.concentration);
    return forwardScope(() => {
      const d = this.dim;
      const c = this.concentration;
      const diag = value.diagonal(0, -1, -2).narrow(-1, 1, d - 1);
      const order = arange(2, d + 1, 1, { dtype: c.dtype, device: c.device });
      const coef = c.sub(1).unsqueeze(-1).mul(2).add(d).sub(order);
      const unnormalized = coef.mul(diag.log()).sum(-1);
      const dm1 = d - 1;
      const alpha = c.add(0.5 * dm1);
      const denominator = alpha.lgamma().mul(dm1);
      const numerator = alpha.sub(0.5).mvlgamma(dm1);
      const norm = numerator.sub(denominator).add(0.5 * dm1 * Math.log(Math.PI));
      return unnormalized.sub(norm);
    });
  }
  /** `concentration`. */
  protected params(): Record<string, Tensor> {
    return { concentration: this.concentration };
  }
  /** PyTorch's repr: the value of a number concentration. */
  override toString(): string {
    if (this.#number === undefined) return super.toString();
    return `LKJCholesky(concentration: ${pyFloat(this.#number)})`;
  }
  /** An LKJCholesky of this `dim` from its parameter. */
  protected override remake([c]: Param[], validateArgs = this.validateArgs): Distribution {
    const Kind = this.constructor as typeof LKJCholesky;
    return new Kind(this.dim, c, { validateArgs });
  }
}
