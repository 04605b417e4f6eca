/**
 * `torch.autograd`'s functions over the core's engine: {@link grad}
 * (`torch.autograd.grad`), with higher-order gradients through `createGraph`,
 * and `functional` (`torch.autograd.functional`: vjp, jvp, vhp, hvp,
 * jacobian, hessian).
 * @module
 */

export { grad } from "./grad.ts";
export type { GradOptions } from "./grad.ts";
export * as functional from "./functional.ts";
