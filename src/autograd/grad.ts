/**
 * `torch.autograd.grad`: the gradients of outputs with respect to chosen
 * inputs, returned rather than accumulated into `.grad`, over the core's
 * backward pass (which with `createGraph` records itself, so gradients of
 * gradients work).
 * @module
 */

import { backwardPass } from "../autograd.ts";
import type { Tensor } from "../tensor.ts";
import { inputsPass } from "./checkpoint_core.ts";
import { describe, seedsFor, tensorList } from "./seeds.ts";

/** Options of {@link grad}, as `torch.autograd.grad`'s keyword arguments. */
export interface GradOptions {
  /**
   * The gradient of each output (the "vector" of the vector-Jacobian
   * product); null or omitted for a one-element output means 1.
   */
  gradOutputs?: Tensor | (Tensor | null)[];
  /** Keep the graph so backward can run through it again (default: `createGraph`). */
  retainGraph?: boolean;
  /** Record the backward pass, so that the returned gradients are differentiable. */
  createGraph?: boolean;
  /** Give null for an input that no output depends on, instead of an error. */
  allowUnused?: boolean;
}

/**
 * The sum of the gradients of `outputs` (each weighted by its entry of
 * `gradOutputs`) with respect to each of `inputs`, as
 * `torch.autograd.grad`. No `.grad` is touched and no post-accumulate hook
 * runs. Inputs may be intermediate tensors: their gradient is the one that
 * flows into them. Only the part of the graph between the outputs and the
 * inputs runs. With `createGraph` the gradients have a graph of their own
 * (gradient penalties, Hessian-vector products).
 *
 * @example
 * ```ts
 * import { autograd, tensor } from "@multigrad/core";
 * const x = tensor([1, 2, 3], { requiresGrad: true });
 * const [g] = autograd.grad(x.pow(3).sum(), x, { createGraph: true }); // 3x²
 * const [h] = autograd.grad(g!.sum(), x); // 6x
 * ```
 */
export function grad(
  outputs: Tensor | Tensor[],
  inputs: Tensor | Tensor[],
  options: GradOptions = {},
): (Tensor | null)[] {
  const outs = tensorList("autograd.grad", outputs, "output");
  const ins = tensorList("autograd.grad", inputs, "input");
  if (outs.length === 0 || ins.length === 0) {
    throw new RangeError(
      `autograd.grad: expected at least one output and one input, got ${outs.length} and ${ins.length}`,
    );
  }
  ins.forEach((t, i) => {
    if (!t.requiresGrad) {
      throw new Error(
        `autograd.grad: one of the differentiated Tensors does not require grad (input ${i}, ${
          describe(t)
        })`,
      );
    }
  });
  const seeds = seedsFor(outs, options.gradOutputs, "autograd.grad");
  // The implicit seeds are not disposed: a gradient returned may share their memory (a reshape's).
  const result = inputsPass(() => backwardPass(outs, seeds, options, ins));
  result.forEach((g, i) => {
    if (!g && !options.allowUnused) {
      throw new Error(
        `autograd.grad: one of the differentiated Tensors appears to not have been used in the graph (input ${i}, ${
          describe(ins[i])
        }); set allowUnused: true if this is the desired behavior`,
      );
    }
  });
  return result;
}
