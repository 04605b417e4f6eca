/**
 * Gamma and Dirichlet draws with their implicit reparameterization
 * gradients attached (shared by Gamma, Beta, Chi2, Dirichlet...). Internal:
 * not part of `distributions`.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { noGrad, record } from "../autograd.ts";
import { dirichletGrad, standardGammaGrad } from "./gamma_grad.ts";
import { forwardScope } from "../storage.ts";
import { rand, randn } from "../ops/mod.ts";
import { finfoMin } from "./util.ts";

/**
 * Standard gamma draws `x` of `alpha` (a fresh tensor without history, the
 * shape of `alpha`) made differentiable in `alpha` by
 * {@link standardGammaGrad}, as PyTorch's `_standard_gamma` backward.
 */
export function attachGammaGrad(alpha: Tensor, x: Tensor): Tensor {
  return record("standardGamma", [alpha], x, ([g]) => [
    g ? g.mul(standardGammaGrad(alpha.detach(), x.detach())) : null,
  ]);
}

/**
 * Dirichlet draws `x` of `concentration` (fresh, without history, the
 * same shape) made differentiable in the concentration, as PyTorch's
 * `_Dirichlet` backward: `dirichletGrad(x, α, Σα)·(g - Σ x·g)`.
 */
export function attachDirichletGrad(concentration: Tensor, x: Tensor): Tensor {
  return record("dirichlet", [concentration], x, ([g]) => {
    if (!g) return [null];
    const c = concentration.detach();
    const xd = x.detach();
    const grad = noGrad(() => dirichletGrad(xd, c, c.sum(-1, true).expand([...c.shape])));
    return [grad.mul(g.sub(xd.mul(g).sum(-1, true)))];
  });
}

/**
 * Standard gamma draws of `alpha` (already shaped as the draws), clamped
 * below to the smallest normal number as PyTorch's.
 */
export function standardGamma(alpha: Tensor): Tensor {
  return noGrad(() => forwardScope(() => logStandardGamma(alpha).exp().clamp(tiny(alpha.dtype))));
}

/**
 * {@link standardGamma}'s draws, differentiable in `alpha` by implicit
 * reparameterization (PyTorch's `_standard_gamma` and its backward
 * `_standard_gamma_grad`).
 */
export function rsampleStandardGamma(alpha: Tensor): Tensor {
  return attachGammaGrad(alpha, standardGamma(alpha));
}

/**
 * The logs of standard gamma draws of `alpha` (already shaped as the
 * draws): Marsaglia and Tsang's squeeze with `ROUNDS` proposals each, the
 * first accepted one kept; α < 1 draws at α + 1 and adds `log(u)/α`. A draw
 * none of whose rounds is accepted (probability below 1e-13) takes the mode
 * `d`. In logs, as a draw of small α underflows (α = 1e-3 gives X < 1e-38
 * nine times in ten) and Beta needs the ratio of two of them.
 */
export function logStandardGamma(alpha: Tensor): Tensor {
  return noGrad(() =>
    forwardScope(() => {
      const shape = [...alpha.shape];
      const opts = { dtype: alpha.dtype, device: alpha.device };
      const small = alpha.lt(1);
      const a = alpha.add(small);
      const d = a.sub(1 / 3);
      const c = d.mul(9).rsqrt();
      const x = randn([ROUNDS, ...shape], opts);
      const u = rand([ROUNDS, ...shape], opts);
      const v = x.mul(c).add(1).pow(3);
      const positive = v.gt(0);
      const logv = v.where(positive, 1).log();
      const accept = positive.mul(
        u.log().lt(x.square().mul(0.5).add(d).sub(d.mul(v)).add(d.mul(logv))),
      );
      const first = accept.mul(accept.cumsum(0).eq(1));
      const any = first.sum(0);
      const g = d.mul(v).mul(first).sum(0).add(d.mul(any.eq(0)));
      const boost = rand(shape, opts).log().div(alpha);
      return g.log().add(boost.where(small, 0)).clamp(finfoMin(alpha.dtype));
    })
  );
}

/** The smallest normal number of `dtype` (`torch.finfo(dtype).tiny`). */
export function tiny(dtype: Tensor["dtype"]): number {
  return dtype === "float64" ? 2.2250738585072014e-308 : 1.1754943508222875e-38;
}

/** The rounds of Marsaglia–Tsang proposals per draw (acceptance ≥ 95% each). */
export const ROUNDS = 10;
