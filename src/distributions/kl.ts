/**
 * `klDivergence(p, q)`, as `torch.distributions.kl_divergence`, for the
 * pairs PyTorch registers among this package's distributions.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { noGrad } from "../autograd.ts";
import { forwardScope } from "../storage.ts";
import { Distribution } from "./distribution.ts";
import { type Ctor, softplus, sumRightmost } from "./util.ts";
import { Exponential, Laplace, Normal, Uniform } from "./continuous.ts";
import { Bernoulli, Categorical, OneHotCategorical } from "./discrete.ts";
import { Independent } from "./independent.ts";
import { ExponentialFamily } from "./exp_family.ts";
import { klExponentialFamily } from "./kl_util.ts";
import { Beta, Gamma } from "./gamma.ts";
import { digamma, lgamma } from "../ops_composite/special_functions.ts";
import { MultivariateNormal } from "./multivariate_normal.ts";
import { klMultivariateNormal } from "./mvn_util.ts";

const registry: [Ctor<Distribution>, Ctor<Distribution>, (p: never, q: never) => Tensor][] = [];

function register<P extends Distribution, Q extends Distribution>(
  p: Ctor<P>,
  q: Ctor<Q>,
  fn: (p: P, q: Q) => Tensor,
): void {
  registry.push([p, q, fn as (p: never, q: never) => Tensor]);
}

/**
 * Registers `fn` as `klDivergence(p, q)` for `p` of class `P` (or a
 * subclass) and `q` of class `Q`, as `torch.distributions.register_kl`;
 * the most specific registered pair wins (nearest `P` first, then `Q`).
 */
export function registerKl<P extends Distribution, Q extends Distribution>(
  P: Ctor<P>,
  Q: Ctor<Q>,
  fn: (p: P, q: Q) => Tensor,
): void {
  register(P, Q, fn);
}

/** How many prototype steps from `x`'s class up to `C` (Infinity when not an instance). */
function depth(x: object, C: Ctor<Distribution>): number {
  let n = 0;
  for (let proto = Object.getPrototypeOf(x); proto; proto = Object.getPrototypeOf(proto), n++) {
    if (proto === C.prototype) return n;
  }
  return Infinity;
}

/** `where(mask, value, t)` with a mask computed without gradient. */
function fill(t: Tensor, mask: Tensor, value: number): Tensor {
  return t.where(noGrad(() => mask.eq(0)), value);
}

// PyTorch's `_kl_expfamily_expfamily`: any pair of one exponential family without a closer
// registration (Wishart's, here) goes by the Bregman divergence.
register(ExponentialFamily, ExponentialFamily, klExponentialFamily);

register(Normal, Normal, (p, q) => {
  const varRatio = p.scale.div(q.scale).square();
  const t1 = p.loc.sub(q.loc).div(q.scale).square();
  return varRatio.add(t1).sub(1).sub(varRatio.log()).mul(0.5);
});

register(Uniform, Uniform, (p, q) => {
  const result = q.high.sub(q.low).div(p.high.sub(p.low)).log();
  const outside = noGrad(() => q.low.gt(p.low).add(q.high.lt(p.high)).gt(0));
  return fill(result, outside, Infinity);
});

register(Exponential, Exponential, (p, q) => {
  const ratio = q.rate.div(p.rate);
  return ratio.log().neg().add(ratio).sub(1);
});

register(Laplace, Laplace, (p, q) => {
  const scaleRatio = p.scale.div(q.scale);
  const diff = p.loc.sub(q.loc).abs();
  const t1 = scaleRatio.log().neg();
  const t2 = diff.div(q.scale);
  const t3 = scaleRatio.mul(diff.neg().div(p.scale).exp());
  return t1.add(t2).add(t3).sub(1);
});

register(Bernoulli, Bernoulli, (p, q) => {
  const pp = p.probs, qp = q.probs, pl = p.logits, ql = q.logits;
  let t1 = pp.mul(softplus(ql.neg()).sub(softplus(pl.neg())));
  t1 = fill(fill(t1, qp.eq(0), Infinity), pp.eq(0), 0);
  let t2 = pp.neg().add(1).mul(softplus(ql).sub(softplus(pl)));
  t2 = fill(fill(t2, qp.eq(1), Infinity), pp.eq(1), 0);
  return t1.add(t2);
});

function categoricalKl(p: Categorical, q: Categorical): Tensor {
  const pp = p.probs, qp = q.probs;
  let t = pp.mul(p.logits.sub(q.logits));
  const shape = [...t.shape];
  t = fill(t, qp.eq(0).expand(shape), Infinity);
  t = fill(t, pp.eq(0).expand(shape), 0);
  return t.sum(-1);
}

register(Categorical, Categorical, categoricalKl);
register(
  OneHotCategorical,
  OneHotCategorical,
  (p, q) => categoricalKl(p.categorical, q.categorical),
);

register(MultivariateNormal, MultivariateNormal, klMultivariateNormal);

register(Gamma, Gamma, (p, q) => {
  const [pa, pb, qa, qb] = [p.concentration, p.rate, q.concentration, q.rate];
  const t1 = qa.mul(pb.div(qb).log());
  const t2 = lgamma(qa).sub(lgamma(pa));
  const t3 = pa.sub(qa).mul(digamma(pa));
  const t4 = qb.sub(pb).mul(pa.div(pb));
  return t1.add(t2).add(t3).add(t4);
});

register(Beta, Beta, (p, q) => {
  const [p1, p0, q1, q0] = [p.concentration1, p.concentration0, q.concentration1, q.concentration0];
  const sp = p1.add(p0);
  const sq = q1.add(q0);
  const t1 = lgamma(q1).add(lgamma(q0)).add(lgamma(sp));
  const t2 = lgamma(p1).add(lgamma(p0)).add(lgamma(sq));
  const t3 = p1.sub(q1).mul(digamma(p1));
  const t4 = p0.sub(q0).mul(digamma(p0));
  const t5 = sq.sub(sp).mul(digamma(sp));
  return t1.sub(t2).add(t3).add(t4).add(t5);
});

register(Independent, Independent, (p, q) => {
  if (p.reinterpretedBatchNdims !== q.reinterpretedBatchNdims) {
    throw new TypeError(
      `klDivergence: Independent distributions reinterpret ${p.reinterpretedBatchNdims} and ${q.reinterpretedBatchNdims} batch dims; they must match`,
    );
  }
  return sumRightmost(klDivergence(p.baseDist, q.baseDist), p.reinterpretedBatchNdims);
});

/**
 * `KL(p ‖ q) = E_p[log p(x) - log q(x)]`, of the batch shape, for the pairs
 * PyTorch registers: Normal, Uniform, Exponential, Laplace, Bernoulli,
 * Categorical, OneHotCategorical, Gamma, Beta, MultivariateNormal and
 * Independent with their own kind (and the pairs the other modules
 * register); two members of one {@link ExponentialFamily} without a
 * registered pair (Wishart) by the Bregman divergence. Any other pair is
 * a TypeError naming both.
 */
export function klDivergence(p: Distribution, q: Distribution): Tensor {
  if (!(p instanceof Distribution) || !(q instanceof Distribution)) {
    throw new TypeError(`klDivergence: p and q must be distributions`);
  }
  const [pd, qd] = [p.paramDevice, q.paramDevice];
  if (pd && qd && pd !== qd) {
    // Number parameters follow the other's device, as PyTorch's 0-dim cpu tensors do.
    q = q.withNumbersOn(pd);
    if (q.paramDevice !== pd) p = p.withNumbersOn(qd);
    if (p.paramDevice !== q.paramDevice) {
      throw new TypeError(
        `klDivergence: p (${p.name}) is on ${pd} and q (${q.name}) on ${qd}; move one with tensors on the other's device`,
      );
    }
  }
  let best: ((p: never, q: never) => Tensor) | undefined;
  let bestDepth = [Infinity, Infinity];
  for (const [P, Q, fn] of registry) {
    const [dp, dq] = [depth(p, P), depth(q, Q)];
    if (dp === Infinity || dq === Infinity) continue;
    // Later registrations of the same pair replace earlier ones, as PyTorch's dict.
    if (dp < bestDepth[0] || (dp === bestDepth[0] && dq <= bestDepth[1])) {
      best = fn;
      bestDepth = [dp, dq];
    }
  }
  if (best) return forwardScope(() => best(p as never, q as never));
  throw new TypeError(
    `klDivergence: no KL divergence is registered for ${p.name} and ${q.name}`,
  );
}
