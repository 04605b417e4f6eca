/**
 * `torch.autograd`'s functions over the core's engine: {@link grad}
 * (`torch.autograd.grad`), with higher-order gradients through `createGraph`,
 * {@link backward} (several roots in one pass), `functional`
 * (`torch.autograd.functional`: vjp, jvp, vhp, hvp, jacobian, hessian),
 * {@link gradcheck} and {@link gradgradcheck} (analytic against numerical
 * derivatives), and anomaly mode ({@link detectAnomaly}).
 * @module
 */

// `export *` only: deno doc lists a namespace's members only when they are re-exported this way
// (tests/docs_test.ts checks it), so these files export nothing internal (see seeds.ts).
export * from "./grad.ts";
export * as functional from "./functional.ts";
export * from "./backward.ts";
export * from "./gradcheck.ts";
export * from "./anomaly.ts";
export * from "./function.ts";
