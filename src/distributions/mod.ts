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

// `export *` only: deno doc lists a namespace's members only when they are re-exported this way
// (tests/docs_test.ts checks it), so these files export nothing internal (helpers live in
// util.ts, gamma_sampling.ts, mvn_util.ts, kl_util.ts, half.ts).
export * from "./distribution.ts";
export * from "./constraints.ts";
export * from "./exp_family.ts";
export * from "./continuous.ts";
export * from "./discrete.ts";
export * from "./independent.ts";
export * from "./gamma.ts";
export * from "./gamma_grad.ts";
export * from "./multivariate_normal.ts";
export * from "./kl.ts";
export * from "./transforms.ts";
export * as transforms from "./transforms.ts";
export * from "./transformed.ts";
export * from "./continuous_more.ts";
export * from "./relaxed.ts";
import "./kl_more.ts";
export * from "./discrete_more.ts";
export * from "./continuous_extra.ts";
export * from "./multivariate_more.ts";
export * from "./matrix_families.ts";
import "./kl_families.ts";
import "./arg_constraints.ts";
