/**
 * `ExponentialFamily`: the base of the families whose density is
 * `h(x)·exp(⟨θ, T(x)⟩ - A(θ))`, as `torch.distributions.ExponentialFamily`,
 * with the entropy and the KL divergence by the Bregman divergence of the
 * log normalizer `A`, its gradient taken by autograd.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { noGrad } from "../autograd.ts";
import { Distribution } from "./distribution.ts";
import { sumRightmost } from "./util.ts";
import { atNatural } from "./kl_util.ts";

/**
 * A distribution of an exponential family, density
 * `h(x)·exp(⟨θ, T(x)⟩ - A(θ))` with natural parameters θ
 * ({@link naturalParams}), log normalizer A ({@link logNormalizer}) and
 * carrier measure h ({@link meanCarrierMeasure} is `E[log h(x)]`).
 * Bernoulli, Beta, ContinuousBernoulli, Dirichlet, Exponential, Gamma
 * (and so Chi2), Normal, Poisson and Wishart derive from it, as in PyTorch.
 *
 * {@link entropy} here is the Bregman form `A(θ) - ⟨θ, ∇A(θ)⟩ - E[log h]`;
 * the families override it with their closed forms (as PyTorch), and
 * `klDivergence` of two members of one family without a registered pair
 * uses the Bregman divergence of A (PyTorch's `_kl_expfamily_expfamily`).
 *
 * @example
 * ```ts
 * import { distributions, tensor } from "@multigrad/core";
 * const d = new distributions.Gamma(tensor([2, 3]), tensor([1, 0.5]));
 * // The Bregman entropy, which equals the closed form d.entropy():
 * const h = distributions.ExponentialFamily.prototype.entropy.call(d);
 * ```
 */
export abstract class ExponentialFamily extends Distribution {
  /** The natural parameters θ (PyTorch's `_natural_params`). */
  abstract get naturalParams(): Tensor[];

  /**
   * The log normalizer `A(θ)` of natural parameters of this family's
   * shapes (PyTorch's `_log_normalizer`), of the batch shape; differentiable.
   */
  abstract logNormalizer(...naturalParams: Tensor[]): Tensor;

  /**
   * `E[log h(x)]` of the carrier measure h (PyTorch's
   * `_mean_carrier_measure`); families without one in closed form throw.
   */
  get meanCarrierMeasure(): Tensor | number {
    throw new TypeError(
      `${this.name}.meanCarrierMeasure: not implemented for ${this.name} (no closed form)`,
    );
  }

  /**
   * The entropy by the Bregman divergence, `A(θ) - ⟨θ, ∇A(θ)⟩ - E[log h]`
   * with `∇A` by autograd. As PyTorch's, it is not differentiable in the
   * parameters (PyTorch detaches θ; here the result has no graph).
   */
  override entropy(): Tensor {
    const measure = this.meanCarrierMeasure;
    const [lg, pairs] = atNatural(this);
    return noGrad(() => {
      let result = lg;
      for (const [theta, g] of pairs) {
        result = result.sub(sumRightmost(theta.mul(g), theta.ndim - this.batchShape.length));
      }
      return result.sub(measure);
    });
  }
}
