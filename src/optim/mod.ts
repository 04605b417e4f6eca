/**
 * Optimizers, as `torch.optim`: `SGD`, `Adam`, `AdamW`, `RMSprop`, `Adagrad`,
 * `Adamax`, `NAdam`, `RAdam`, `Adadelta`, `Rprop`, `ASGD`, `LBFGS` (whose step is async),
 * the `Optimizer` base class, the learning-rate schedules of
 * `lrScheduler`, and Stochastic Weight Averaging (`swaUtils`).
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

// `export *` (not named re-exports) so that `deno doc` lists every member of
// the namespace; the files re-exported here export only public API.
export * from "./optimizer.ts";
export * from "./sgd.ts";
export * from "./adam.ts";
export * from "./rmsprop.ts";
export * from "./adagrad.ts";
export * from "./adamax.ts";
export * from "./nadam.ts";
export * from "./radam.ts";
export * from "./adadelta.ts";
export * from "./rprop.ts";
export * from "./asgd.ts";
export * from "./lbfgs.ts";
export * as lrScheduler from "./lr_scheduler.ts";
export * as swaUtils from "./swa_utils.ts";
