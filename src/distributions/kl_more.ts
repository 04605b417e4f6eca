/**
 * The KL divergences PyTorch registers for Cauchy, Gumbel, HalfNormal,
 * Pareto and TransformedDistribution, with each other and with the
 * families of `continuous.ts` and `gamma.ts` (registered through
 * {@link registerKl} when this module loads).
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { noGrad } from "../autograd.ts";
import { full } from "../ops/mod.ts";
import type { Distribution } from "./distribution.ts";
import { Exponential, Laplace, Normal, Uniform } from "./continuous.ts";
import { Beta, Gamma } from "./gamma.ts";
import { digamma, lgamma } from "../ops_composite/special_functions.ts";
import { klDivergence, registerKl } from "./kl.ts";
import { Cauchy, Gumbel, HalfNormal, Pareto } from "./continuous_more.ts";
import { TransformedDistribution } from "./transformed.ts";
import {
  AbsTransform,
  AffineTransform,
  CorrCholeskyTransform,
  ExpTransform,
  LowerCholeskyTransform,
  PowerTransform,
  ReshapeTransform,
  SigmoidTransform,
  SoftmaxTransform,
  SoftplusTransform,
  StickBreakingTransform,
  TanhTransform,
  type Transform,
} from "./transforms.ts";

const EULER = 0.5772156649015329;

/** `where(mask, value, t)` with a mask computed without gradient. */
function fill(t: Tensor, mask: () => Tensor, value: number): Tensor {
  return t.where(noGrad(() => mask().eq(0)), value);
}

/** Infinity of `like`'s shape, dtype and device (`_infinite_like`). */
function infiniteLike(like: Tensor): Tensor {
  return full([...like.shape], Infinity, { dtype: like.dtype, device: like.device });
}

/** `t·log t`. */
function xLogX(t: Tensor): Tensor {
  return t.mul(t.log());
}

/** A coefficient equal to another: numbers by value, tensors only as the same tensor. */
function sameCoefficient(a: number | Tensor, b: number | Tensor): boolean {
  return a === b;
}

/**
 * Whether `a` and `b` are the same transform, as PyTorch's `__eq__`:
 * parameterless ones by kind, affine and power ones by coefficients
 * (tensors only as the same tensors: comparing values would read the
 * device), reshapes by shapes, inverses by what they invert; any other
 * only as the same object.
 */
function sameTransform(a: Transform, b: Transform): boolean {
  if (a === b) return true;
  if (a.constructor !== b.constructor) return false;
  if (a instanceof AffineTransform && b instanceof AffineTransform) {
    return sameCoefficient(a.loc, b.loc) && sameCoefficient(a.scale, b.scale) &&
      a.eventDim === b.eventDim;
  }
  if (a instanceof PowerTransform && b instanceof PowerTransform) {
    return sameCoefficient(a.exponent, b.exponent);
  }
  if (a instanceof ReshapeTransform && b instanceof ReshapeTransform) {
    return a.inShape.join() === b.inShape.join() && a.outShape.join() === b.outShape.join();
  }
  if (a.name === "_InverseTransform") return sameTransform(a.inv, b.inv);
  return PARAMETERLESS.some((Kind) => a instanceof Kind);
}

const PARAMETERLESS = [
  AbsTransform,
  CorrCholeskyTransform,
  ExpTransform,
  LowerCholeskyTransform,
  SigmoidTransform,
  SoftmaxTransform,
  SoftplusTransform,
  StickBreakingTransform,
  TanhTransform,
];

registerKl(TransformedDistribution, TransformedDistribution, (p, q) => {
  const same = p.transforms.length === q.transforms.length &&
    p.transforms.every((t, i) => sameTransform(t, q.transforms[i]));
  if (!same) {
    throw new TypeError(
      `klDivergence: ${p.name} and ${q.name} have different transforms (tensor coefficients count as equal only when they are the same tensors)`,
    );
  }
  if (p.eventShape.join() !== q.eventShape.join()) {
    throw new TypeError(
      `klDivergence: ${p.name} and ${q.name} have event shapes [${p.eventShape}] and [${q.eventShape}]`,
    );
  }
  return klDivergence(p.baseDist, q.baseDist);
});

registerKl(Cauchy, Cauchy, (p, q) => {
  const t1 = p.scale.add(q.scale).square().add(p.loc.sub(q.loc).square()).log();
  const t2 = p.scale.mul(q.scale).mul(4).log();
  return t1.sub(t2);
});

registerKl(Gumbel, Gumbel, (p, q) => {
  const ct1 = p.scale.div(q.scale);
  const ct2 = q.loc.div(q.scale);
  const ct3 = p.loc.div(q.scale);
  const t1 = ct1.log().neg().sub(ct2).add(ct3);
  const t2 = ct1.mul(EULER);
  const t3 = ct2.add(lgamma(ct1.add(1))).sub(ct3).exp();
  return t1.add(t2).add(t3).sub(1 + EULER);
});

registerKl(HalfNormal, HalfNormal, (p, q) => {
  const [a, b] = [p.baseDist as Normal, q.baseDist as Normal];
  const varRatio = a.scale.div(b.scale).square();
  const t1 = a.loc.sub(b.loc).div(b.scale).square();
  return varRatio.add(t1).sub(1).sub(varRatio.log()).mul(0.5);
});

registerKl(Pareto, Pareto, (p, q) => {
  const scaleRatio = p.scale.div(q.scale);
  const alphaRatio = q.alpha.div(p.alpha);
  const t1 = q.alpha.mul(scaleRatio.log());
  const t2 = alphaRatio.log().neg();
  const result = t1.add(t2).add(alphaRatio).sub(1);
  return fill(result, () => p.scale.lt(q.scale), Infinity);
});

// Supports that do not cover the first's: infinite.
for (
  const [P, Q, param] of [
    [Beta, Pareto, "concentration1"],
    [Exponential, Pareto, "rate"],
    [Gamma, Pareto, "concentration"],
    [Gumbel, Beta, "loc"],
    [Gumbel, Exponential, "loc"],
    [Gumbel, Gamma, "loc"],
    [Gumbel, Pareto, "loc"],
    [Gumbel, Uniform, "loc"],
    [Laplace, Pareto, "loc"],
    [Normal, Pareto, "loc"],
    [Pareto, Beta, "scale"],
    [Pareto, Uniform, "scale"],
  ] as const
) {
  registerKl(
    P as abstract new (...args: never[]) => Distribution,
    Q as abstract new (...args: never[]) => Distribution,
    (p) => infiniteLike((p as unknown as Record<string, Tensor>)[param]),
  );
}

registerKl(Exponential, Gumbel, (p, q) => {
  const srp = p.rate.mul(q.scale);
  const lsr = q.loc.div(q.scale);
  const t1 = srp.log().sub(1);
  const t2 = lsr.exp().mul(srp).div(srp.add(1));
  const t3 = srp.reciprocal();
  return t1.sub(lsr).add(t2).add(t3);
});

registerKl(Gamma, Gumbel, (p, q) => {
  const a = p.concentration;
  const bsp = p.rate.mul(q.scale);
  const lsr = q.loc.div(q.scale);
  const t1 = a.sub(1).mul(digamma(a)).sub(lgamma(a)).sub(a);
  const t2 = bsp.log().add(a.div(bsp));
  const t3 = lsr.exp().mul(bsp.reciprocal().add(1).pow(a.neg())).sub(lsr);
  return t1.add(t2).add(t3);
});

registerKl(Gumbel, Normal, (p, q) => {
  const ratio = p.scale.div(q.scale);
  const t1 = ratio.div(Math.sqrt(2 * Math.PI)).log();
  const t2 = ratio.mul(Math.PI * 0.5).square().div(3);
  const t3 = p.loc.add(p.scale.mul(EULER)).sub(q.loc).div(q.scale).square().mul(0.5);
  return t1.neg().add(t2).add(t3).sub(EULER + 1);
});

registerKl(Normal, Gumbel, (p, q) => {
  const msr = p.loc.div(q.scale);
  const vsr = p.scale.div(q.scale).square();
  const lsr = q.loc.div(q.scale);
  const t1 = vsr.log().mul(0.5);
  const t2 = msr.sub(lsr);
  const t3 = msr.neg().add(vsr.mul(0.5)).add(lsr).exp();
  return t1.neg().add(t2).add(t3).sub(0.5 * (1 + Math.log(2 * Math.PI)));
});

registerKl(Pareto, Exponential, (p, q) => {
  const srp = p.scale.mul(q.rate);
  const t1 = p.alpha.div(srp).log();
  const t2 = p.alpha.reciprocal();
  const t3 = p.alpha.mul(srp).div(p.alpha.sub(1));
  return fill(t1.sub(t2).add(t3).sub(1), () => p.alpha.le(1), Infinity);
});

registerKl(Pareto, Gamma, (p, q) => {
  const common = p.scale.log().add(p.alpha.reciprocal());
  const t1 = p.alpha.log().sub(common);
  const t2 = lgamma(q.concentration).sub(q.concentration.mul(q.rate.log()));
  const t3 = q.concentration.neg().add(1).mul(common);
  const t4 = q.rate.mul(p.alpha).mul(p.scale).div(p.alpha.sub(1));
  return fill(t1.add(t2).add(t3).add(t4).sub(1), () => p.alpha.le(1), Infinity);
});

registerKl(Pareto, Normal, (p, q) => {
  const varNormal = q.scale.square().mul(2);
  const common = p.scale.div(p.alpha.sub(1));
  const t1 = q.scale.mul(p.alpha).div(p.scale).mul(Math.sqrt(2 * Math.PI)).log();
  const t2 = p.alpha.reciprocal();
  const t3 = p.alpha.mul(common.square()).div(p.alpha.sub(2));
  const t4 = p.alpha.mul(common).sub(q.loc).square();
  const result = t1.sub(t2).add(t3.add(t4).div(varNormal)).sub(1);
  return fill(result, () => p.alpha.le(2), Infinity);
});

registerKl(Uniform, Gumbel, (p, q) => {
  const common = q.scale.div(p.high.sub(p.low));
  const high = p.high.sub(q.loc).div(q.scale);
  const low = p.low.sub(q.loc).div(q.scale);
  const t1 = common.log().add(high.add(low).mul(0.5));
  const t2 = common.mul(high.neg().exp().sub(low.neg().exp()));
  return t1.sub(t2);
});

registerKl(Uniform, Pareto, (p, q) => {
  const width = p.high.sub(p.low);
  const t1 = q.alpha.mul(q.scale.pow(q.alpha)).mul(width).log();
  const t2 = xLogX(p.high).sub(xLogX(p.low)).sub(width).div(width);
  const result = t2.mul(q.alpha.add(1)).sub(t1);
  return fill(result, () => p.low.lt(q.scale), Infinity);
});
