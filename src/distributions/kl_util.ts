/**
 * KL divergences shared by several families (registered in `kl.ts` and
 * its siblings). Internal: not part of `distributions`.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { sumRightmost } from "./util.ts";
import { enableGrad, noGrad } from "../autograd.ts";
import { grad } from "../autograd/grad.ts";
import type { ExponentialFamily } from "./exp_family.ts";

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

/**
 * `A(θ)` (without graph) at detached copies of `d`'s natural parameters,
 * and each copy with its gradient `∂A/∂θ`.
 */
export function atNatural(d: ExponentialFamily): [Tensor, [Tensor, Tensor][]] {
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
