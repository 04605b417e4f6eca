/**
 * `torch.distributions`: probability distributions with sampling
 * (reparameterized where PyTorch has `rsample`), log-densities, entropies,
 * moments, cdf/icdf, and KL divergences, on every backend (compositions of
 * the core's ops, draws from the seeded generators `manualSeed` sets).
 *
 * @example
 * ```ts
 * import { distributions, manualSeed, tensor } from "@multigrad/core";
 * manualSeed(0);
 * const p = new distributions.Normal(tensor([0, 1]), tensor([1, 2]));
 * const q = new distributions.Normal(0, 1);
 * const x = p.rsample([5]); // [5, 2]
 * const kl = distributions.klDivergence(p, q); // [2]
 * ```
 * @module
 */

import "../ops_composite/mod.ts";

export { Distribution } from "./distribution.ts";
export { constraints, eventDimOf } from "./constraints.ts";
export type { Constraints, EventConstraint } from "./constraints.ts";
export type {
  Constraint,
  DistributionOptions,
  EnumerateSupportOptions,
  Param,
} from "./distribution.ts";
export { ExponentialFamily } from "./exp_family.ts";
export { Exponential, Laplace, Normal, Uniform } from "./continuous.ts";
export { Bernoulli, Categorical, OneHotCategorical } from "./discrete.ts";
export type { ProbsOrLogits } from "./discrete.ts";
export { Independent } from "./independent.ts";
export { Beta, Gamma } from "./gamma.ts";
export { dirichletGrad, standardGammaGrad } from "./gamma_grad.ts";
export { MultivariateNormal } from "./multivariate_normal.ts";
export type { MultivariateNormalOptions } from "./multivariate_normal.ts";
export { klDivergence, registerKl } from "./kl.ts";
export * from "./transforms.ts";
export * as transforms from "./transforms.ts";
export { TransformedDistribution } from "./transformed.ts";
export {
  Cauchy,
  Gumbel,
  HalfCauchy,
  HalfNormal,
  Kumaraswamy,
  LogisticNormal,
  LogNormal,
  Pareto,
  Weibull,
} from "./continuous_more.ts";
export {
  ExpRelaxedCategorical,
  LogitRelaxedBernoulli,
  OneHotCategoricalStraightThrough,
  RelaxedBernoulli,
  RelaxedOneHotCategorical,
} from "./relaxed.ts";
import "./kl_more.ts";
export { Binomial, Geometric, Multinomial, NegativeBinomial, Poisson } from "./discrete_more.ts";
export {
  Chi2,
  ContinuousBernoulli,
  FisherSnedecor,
  StudentT,
  VonMises,
} from "./continuous_extra.ts";
export type { ContinuousBernoulliOptions } from "./continuous_extra.ts";
export { Dirichlet, LowRankMultivariateNormal, MixtureSameFamily } from "./multivariate_more.ts";
export { LKJCholesky, Wishart } from "./matrix_families.ts";
export type { WishartOptions } from "./matrix_families.ts";
import "./kl_families.ts";
import "./arg_constraints.ts";
