/**
 * `torch.autograd`'s functions over the core's engine: {@link grad}
 * (`torch.autograd.grad`), with higher-order gradients through `createGraph`,
 * {@link backward} (several roots in one pass), `functional`
 * (`torch.autograd.functional`: vjp, jvp, vhp, hvp, jacobian, hessian),
 * {@link gradcheck} and {@link gradgradcheck} (analytic against numerical
 * derivatives), and anomaly mode ({@link detectAnomaly}).
 * @module
 */

export { grad } from "./grad.ts";
export type { GradOptions } from "./grad.ts";
export * as functional from "./functional.ts";
export { backward } from "./backward.ts";
export type { AutogradBackwardOptions } from "./backward.ts";
export { gradcheck, GradcheckError, gradgradcheck } from "./gradcheck.ts";
export type { CheckedFn, GradcheckOptions, GradgradcheckOptions } from "./gradcheck.ts";
export {
  detectAnomaly,
  isAnomalyCheckNanEnabled,
  isAnomalyEnabled,
  setDetectAnomaly,
} from "./anomaly.ts";
export type { AnomalyOptions } from "./anomaly.ts";
