/**
 * The base of the loss modules (internal: `nn` does not re-export this file).
 * @module
 */

import type { Reduction, ReductionOptions } from "./functional/loss.ts";
import { Module } from "./module.ts";
import { checkReduction } from "./util.ts";

/** A loss holding its reduction (PyTorch's `_Loss`, whose repr shows no options). */
export abstract class ReducedLoss extends Module {
  /** `"mean"`, `"sum"` or `"none"`. */
  readonly reduction: Reduction;

  constructor(options: ReductionOptions, owner: string) {
    super();
    this.reduction = options.reduction ?? "mean";
    checkReduction(owner, this.reduction);
  }
}
