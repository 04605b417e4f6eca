/**
 * Optimizers, as `torch.optim`: `SGD`, `Adam`, `AdamW` and the `Optimizer`
 * base class.
 *
 * @example
 * ```ts
 * import { nn, optim } from "@multigrad/core";
 * const model = new nn.Linear(4, 2);
 * const opt = new optim.SGD(model.parameters(), { lr: 0.1, momentum: 0.9 });
 * // per step: opt.zeroGrad(); loss.backward(); opt.step();
 * ```
 * @module
 */

export { Optimizer } from "./optimizer.ts";
export type {
  OptimizerStateDict,
  OptionValue,
  ParamGroup,
  ParamGroupInput,
  ParamState,
  ScalarFn,
} from "./optimizer.ts";
export { SGD } from "./sgd.ts";
export type { SGDGroupOptions, SGDOptions } from "./sgd.ts";
export { Adam, AdamW } from "./adam.ts";
export type { AdamGroupOptions, AdamOptions } from "./adam.ts";
