/**
 * Each family's `argConstraints`, as PyTorch's `arg_constraints` (imported
 * for its registrations by the package's `mod.ts`).
 * @module
 */

import type { Constraint, Distribution } from "./distribution.ts";
import { registerArgConstraints } from "./util.ts";
import { constraints as c } from "./constraints.ts";
import { Exponential, Laplace, Normal, Uniform } from "./continuous.ts";
import { Bernoulli, Categorical, OneHotCategorical } from "./discrete.ts";
import { Beta, Gamma } from "./gamma.ts";
import { MultivariateNormal } from "./multivariate_normal.ts";
import {
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
import {
  ExpRelaxedCategorical,
  LogitRelaxedBernoulli,
  RelaxedBernoulli,
  RelaxedOneHotCategorical,
} from "./relaxed.ts";
import { Binomial, Geometric, Multinomial, NegativeBinomial, Poisson } from "./discrete_more.ts";
import {
  Chi2,
  ContinuousBernoulli,
  FisherSnedecor,
  StudentT,
  VonMises,
} from "./continuous_extra.ts";
import { Dirichlet, LowRankMultivariateNormal } from "./multivariate_more.ts";
import { LKJCholesky, Wishart } from "./matrix_families.ts";

/** A family, for the loops over families sharing their constraints. */
type Kind = abstract new (...args: never[]) => Distribution;

const positive = c.positive;
const locScale = (): Record<string, Constraint> => ({ loc: c.real, scale: positive });
const binary = (): Record<string, Constraint> => ({ probs: c.unitInterval, logits: c.real });
const categorical = (): Record<string, Constraint> => ({ probs: c.simplex, logits: c.realVector });

for (const Kind of [Normal, Laplace, Cauchy, Gumbel, LogNormal, LogisticNormal] as Kind[]) {
  registerArgConstraints(Kind, locScale);
}
for (const Kind of [HalfNormal, HalfCauchy] as Kind[]) {
  registerArgConstraints(Kind, () => ({ scale: positive }));
}
registerArgConstraints(Uniform, () => ({ low: c.dependent, high: c.dependent }));
registerArgConstraints(Exponential, () => ({ rate: positive }));
registerArgConstraints(Gamma, () => ({ concentration: positive, rate: positive }));
registerArgConstraints(Chi2, () => ({ df: positive }));
for (const Kind of [Beta, Kumaraswamy] as Kind[]) {
  registerArgConstraints(Kind, () => ({ concentration1: positive, concentration0: positive }));
}
registerArgConstraints(Weibull, () => ({ scale: positive, concentration: positive }));
registerArgConstraints(Pareto, () => ({ alpha: positive, scale: positive }));
registerArgConstraints(StudentT, () => ({ df: positive, loc: c.real, scale: positive }));
registerArgConstraints(FisherSnedecor, () => ({ df1: positive, df2: positive }));
registerArgConstraints(VonMises, () => ({ loc: c.real, concentration: positive }));
for (const Kind of [Bernoulli, ContinuousBernoulli, Geometric, LogitRelaxedBernoulli] as Kind[]) {
  registerArgConstraints(Kind, binary);
}
registerArgConstraints(RelaxedBernoulli, binary);
for (const Kind of [Categorical, OneHotCategorical, Multinomial, ExpRelaxedCategorical] as Kind[]) {
  registerArgConstraints(Kind, categorical);
}
registerArgConstraints(RelaxedOneHotCategorical, categorical);
registerArgConstraints(Binomial, () => ({ totalCount: c.nonnegativeInteger, ...binary() }));
registerArgConstraints(NegativeBinomial, () => ({
  totalCount: c.greaterThanEq(0),
  probs: c.halfOpenInterval(0, 1),
  logits: c.real,
}));
registerArgConstraints(Poisson, () => ({ rate: c.nonnegative }));
registerArgConstraints(Dirichlet, () => ({ concentration: c.independent(positive, 1) }));
registerArgConstraints(MultivariateNormal, () => ({
  loc: c.realVector,
  covarianceMatrix: c.positiveDefinite,
  precisionMatrix: c.positiveDefinite,
  scaleTril: c.lowerCholesky,
}));
registerArgConstraints(LowRankMultivariateNormal, () => ({
  loc: c.realVector,
  covFactor: c.independent(c.real, 2),
  covDiag: c.independent(positive, 1),
}));
// PyTorch 1.13 sets df's bound to p - 1 when a Wishart is built (on the class, so for all).
registerArgConstraints(Wishart, (d) => ({
  covarianceMatrix: c.positiveDefinite,
  precisionMatrix: c.positiveDefinite,
  scaleTril: c.lowerCholesky,
  df: c.greaterThan(d.eventShape[0] - 1),
}));
registerArgConstraints(LKJCholesky, () => ({ concentration: positive }));
