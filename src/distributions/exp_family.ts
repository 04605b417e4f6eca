/**
 * `ExponentialFamily`: the base of the families whose density is
 * `h(x)·exp(⟨θ, T(x)⟩ - A(θ))`, as `torch.distributions.ExponentialFamily`,
 * with the entropy and the KL divergence by the Bregman divergence of the
 * log normalizer `A`, its gradient taken by autograd.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { enableGrad, noGrad } from "../autograd.ts";
import { grad } from "../autograd/grad.ts";
import { Distribution, sumRightmost } from "./distribution.ts";

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

/**
 * `A(θ)` (without graph) at detached copies of `d`'s natural parameters,
 * and each copy with its gradient `∂A/∂θ`.
 */
function atNatural(d: ExponentialFamily): [Tensor, [Tensor, Tensor][]] {
  const thetas = noGrad(() => d.naturalParams).map((t) => t.detach().requiresGrad_());
  return enableGrad(() => {
    const lg = d.logNormalizer(...thetas);
    const grads = grad(lg.sum(), thetas, { allowUnused: true });
    const pairs = thetas.map((t, i): [Tensor, Tensor] => [
      t.detach(),
      grads[i] ?? noGrad(() => t.zerosLike()),
    ]);
    return [lg.detach(), pairs];
  });
}

/**
 * `KL(p ‖ q)` of two members of one exponential family by the Bregman
 * divergence of the log normalizer: `A(θq) - A(θp) - ⟨θq - θp, ∇A(θp)⟩`,
 * differentiable in q's parameters (p's enter without graph, as PyTorch's).
 * Each inner product sums the dims past the batch (see the note inside).
 */
export function klExponentialFamily(p: ExponentialFamily, q: ExponentialFamily): Tensor {
  if (p.constructor !== q.constructor) {
    throw new TypeError(
      `klDivergence: no KL divergence is registered for ${p.name} and ${q.name}, and the Bregman form needs two members of one exponential family`,
    );
  }
  const [lg, pairs] = atNatural(p);
  let result = q.logNormalizer(...q.naturalParams).sub(lg);
  // PyTorch sums the rightmost len(event_shape) dims of each term, which for a
  // parameter of the batch shape (Wishart's df) sums over batch dims; here only the
  // dims past the batch are summed.
  const batchDims = Math.max(p.batchShape.length, q.batchShape.length);
  q.naturalParams.forEach((theta, i) => {
    const [thetaP, g] = pairs[i];
    const term = theta.sub(thetaP).mul(g);
    result = result.sub(sumRightmost(term, term.ndim - batchDims));
  });
  return result;
}
