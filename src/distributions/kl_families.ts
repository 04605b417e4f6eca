/**
 * The KL divergences PyTorch registers for Binomial, Geometric, Poisson,
 * Dirichlet, ContinuousBernoulli and the low-rank normal, with each other
 * and with the families they meet in `torch.distributions.kl`
 * (registered through {@link registerKl} when this module loads).
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { noGrad } from "../autograd.ts";
import { full } from "../ops/mod.ts";
import { broadcastShapes, formatShape } from "../shape.ts";
import { solveTriangular } from "../linalg/mod.ts";
import { checkMaskLater } from "./util.ts";
import { Exponential, Laplace, Normal, Uniform } from "./continuous.ts";
import { Bernoulli } from "./discrete.ts";
import { Beta, Gamma } from "./gamma.ts";
import { MultivariateNormal } from "./multivariate_normal.ts";
import { registerKl } from "./kl.ts";
import { Gumbel, Pareto } from "./continuous_more.ts";
import { Binomial, Geometric, Poisson } from "./discrete_more.ts";
import { ContinuousBernoulli } from "./continuous_extra.ts";
import { Dirichlet, LowRankMultivariateNormal } from "./multivariate_more.ts";
import { lowrankA, traceXXt } from "./mvn_util.ts";

/** Infinity of `like`'s shape, dtype and device (`_infinite_like`). */
function infiniteLike(like: Tensor): Tensor {
  return full([...like.shape], Infinity, { dtype: like.dtype, device: like.device });
}

/** `t`, with `value` where `mask` (computed without gradient) holds. */
function fill(t: Tensor, mask: () => Tensor, value: number): Tensor {
  return t.where(noGrad(() => mask().eq(0)), value);
}

registerKl(Binomial, Binomial, (p, q) => {
  const [pn, qn] = [p.totalCount, q.totalCount];
  const shape = broadcastShapes(pn.shape, qn.shape, "klDivergence");
  const ok = noGrad(() => pn.ge(qn).expand(shape));
  checkMaskLater(
    ok,
    qn.expand(shape),
    (i, v) =>
      `klDivergence: Binomial KL where q.totalCount > p.totalCount is not implemented (q.totalCount ${v} at index ${i})`,
  );
  const kl = pn.mul(
    p.probs.mul(p.logits.sub(q.logits)).add(p.probs.neg().log1p()).sub(q.probs.neg().log1p()),
  );
  return fill(kl, () => pn.gt(qn), Infinity);
});

registerKl(
  Geometric,
  Geometric,
  (p, q) => p.entropy().neg().sub(q.probs.neg().log1p().div(p.probs)).sub(q.logits),
);

registerKl(
  Poisson,
  Poisson,
  (p, q) => p.rate.mul(p.rate.log().sub(q.rate.log())).sub(p.rate.sub(q.rate)),
);

registerKl(Dirichlet, Dirichlet, (p, q) => {
  const [pc, qc] = [p.concentration, q.concentration];
  const sp = pc.sum(-1);
  const sq = qc.sum(-1);
  const t1 = sp.lgamma().sub(sq.lgamma());
  const t2 = pc.lgamma().sub(qc.lgamma()).sum(-1);
  const t3 = pc.sub(qc);
  const t4 = pc.digamma().sub(sp.digamma().unsqueeze(-1));
  return t1.sub(t2).add(t3.mul(t4).sum(-1));
});

registerKl(ContinuousBernoulli, ContinuousBernoulli, (p, q) => {
  const t1 = p.mean.mul(p.logits.sub(q.logits));
  const t2 = p.logNorm().add(p.probs.neg().log1p());
  const t3 = q.logNorm().neg().sub(q.probs.neg().log1p());
  return t1.add(t2).add(t3);
});

registerKl(
  Bernoulli,
  Poisson,
  (p, q) => p.entropy().neg().sub(p.probs.mul(q.rate.log()).sub(q.rate)),
);

registerKl(
  Beta,
  ContinuousBernoulli,
  (p, q) => p.entropy().neg().sub(p.mean.mul(q.logits)).sub(q.probs.neg().log1p()).sub(q.logNorm()),
);

registerKl(ContinuousBernoulli, Pareto, (p) => infiniteLike(p.probs));

registerKl(
  ContinuousBernoulli,
  Exponential,
  (p, q) => p.entropy().neg().sub(q.rate.log()).add(q.rate.mul(p.mean)),
);

registerKl(ContinuousBernoulli, Normal, (p, q) => {
  const t1 = p.entropy().neg();
  const t2 = q.loc.div(q.scale).square().add(Math.log(2 * Math.PI)).mul(0.5).add(q.scale.log());
  const t3 = p.variance.add(p.mean.square()).sub(q.loc.mul(2).mul(p.mean))
    .div(q.scale.square().mul(2));
  return t1.add(t2).add(t3);
});

registerKl(ContinuousBernoulli, Uniform, (p, q) => {
  const result = p.entropy().neg().add(q.high.sub(q.low).log());
  return fill(result, () => q.low.ge(0).add(q.high.le(1)).gt(0), Infinity);
});

registerKl(Uniform, ContinuousBernoulli, (p, q) => {
  const result = p.entropy().neg().sub(p.mean.mul(q.logits)).sub(q.probs.neg().log1p())
    .sub(q.logNorm());
  return fill(result, () => p.high.ge(1).add(p.low.le(0)).gt(0), Infinity);
});

registerKl(Exponential, ContinuousBernoulli, (p) => infiniteLike(p.rate));
registerKl(Gamma, ContinuousBernoulli, (p) => infiniteLike(p.concentration));
registerKl(Gumbel, ContinuousBernoulli, (p) => infiniteLike(p.loc));
registerKl(Laplace, ContinuousBernoulli, (p) => infiniteLike(p.loc));
registerKl(Normal, ContinuousBernoulli, (p) => infiniteLike(p.loc));
registerKl(Pareto, ContinuousBernoulli, (p) => infiniteLike(p.scale));
registerKl(Poisson, Bernoulli, (p) => infiniteLike(p.rate));
registerKl(Poisson, Binomial, (p) => infiniteLike(p.rate));

/** The event sizes of two (low-rank) normals must match, as PyTorch. */
function sameEvent(p: { eventShape: number[] }, q: { eventShape: number[] }): number {
  if (p.eventShape[0] !== q.eventShape[0]) {
    throw new RangeError(
      `klDivergence: (low-rank) multivariate normals of different event shapes ${
        formatShape(p.eventShape)
      } and ${formatShape(q.eventShape)} have no KL divergence`,
    );
  }
  return p.eventShape[0];
}

registerKl(LowRankMultivariateNormal, LowRankMultivariateNormal, (p, q) => {
  const n = sameEvent(p, q);
  const term1 = q.logdet().sub(p.logdet());
  const term3 = q.mahalanobis(q.loc.sub(p.loc));
  const a = lowrankA(q);
  const term21 = p.covDiag.div(q.covDiag).sum(-1);
  const term22 = traceXXt(p.covFactor.mul(q.covDiag.rsqrt().unsqueeze(-1)));
  const term23 = traceXXt(a.mul(p.covDiag.sqrt().unsqueeze(-2)));
  const term24 = traceXXt(a.matmul(p.covFactor));
  const term2 = term21.add(term22).sub(term23).sub(term24);
  return term1.add(term2).add(term3).sub(n).mul(0.5);
});

registerKl(MultivariateNormal, LowRankMultivariateNormal, (p, q) => {
  const n = sameEvent(p, q);
  const term1 = q.logdet().sub(p.halfLogDet().mul(2));
  const term3 = q.mahalanobis(q.loc.sub(p.loc));
  const a = lowrankA(q);
  const term21 = traceXXt(p.scaleTril.mul(q.covDiag.rsqrt().unsqueeze(-1)));
  const term22 = traceXXt(a.matmul(p.scaleTril));
  return term1.add(term21.sub(term22)).add(term3).sub(n).mul(0.5);
});

registerKl(LowRankMultivariateNormal, MultivariateNormal, (p, q) => {
  const n = sameEvent(p, q);
  const term1 = q.halfLogDet().mul(2).sub(p.logdet());
  const shape = broadcastShapes(q.batchShape, p.batchShape, "klDivergence");
  const ql = q.scaleTril.expand([...shape, n, n]);
  const diff = q.loc.sub(p.loc).expand([...shape, n]).unsqueeze(-1);
  const term3 = solveTriangular(ql, diff, { upper: false }).square().sum([-2, -1]);
  const m = p.covFactor.shape[p.covFactor.ndim - 1];
  const pw = p.covFactor.expand([...shape, n, m]);
  const pd = p.covDiag.sqrt().diagEmbed().expand([...shape, n, n]);
  const term21 = traceXXt(solveTriangular(ql, pw, { upper: false }));
  const term22 = traceXXt(solveTriangular(ql, pd, { upper: false }));
  return term1.add(term21).add(term22).add(term3).sub(n).mul(0.5);
});
