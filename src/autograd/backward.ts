/**
 * `torch.autograd.backward`: backward from several roots in one pass of the
 * core's engine (a node shared by two roots runs once, with the sum of
 * their gradients), accumulating into `.grad`, optionally only that of
 * chosen `inputs`.
 * @module
 */

import { accumulateLeaf, backwardPass, setGradEnabled } from "../autograd.ts";
import { formatShape } from "../shape.ts";
import { keep } from "../storage.ts";
import type { Tensor } from "../tensor.ts";
import { inputsPass } from "./checkpoint_core.ts";
import { seedsFor, tensorList } from "./seeds.ts";

/** Options of {@link backward}, as `torch.autograd.backward`'s keyword arguments. */
export interface AutogradBackwardOptions {
  /** Keep the graph so backward can run through it again (default: `createGraph`). */
  retainGraph?: boolean;
  /** Record the backward pass, so that the gradients are differentiable (higher-order gradients). */
  createGraph?: boolean;
  /**
   * Accumulate only into these tensors' `.grad` (leaves, or intermediate
   * tensors, whose `.grad` then holds the gradient that flowed into them);
   * the rest of the graph's leaves are left alone. Not empty.
   */
  inputs?: Tensor | Tensor[];
}

/**
 * Backpropagates from every tensor of `tensors` at once, each seeded with
 * its entry of `gradTensors` (null or omitted: 1, for a one-element
 * tensor), accumulating the sum into the leaves' `.grad`, as
 * `torch.autograd.backward`: the same as calling `backward` on each with
 * `retainGraph`, in one pass. With `inputs`, only those tensors' `.grad`
 * change (their hooks run; for an intermediate tensor `.grad` gets the
 * gradient that flowed into it) and only the part of the graph leading to
 * them runs.
 *
 * @example
 * ```ts
 * import { autograd, tensor } from "@multigrad/core";
 * const w = tensor([1, 2], { requiresGrad: true });
 * const y = w.mul(3);
 * autograd.backward([y.sum(), y.pow(2).sum()]); // w.grad = 3 + 18w
 * ```
 */
export function backward(
  tensors_: Tensor | Tensor[],
  gradTensors?: Tensor | null | (Tensor | null)[],
  options: AutogradBackwardOptions = {},
): void {
  const roots = tensorList("autograd.backward", tensors_, "tensor");
  if (roots.length === 0) return; // as PyTorch: nothing to do
  const seeds = seedsFor(roots, gradTensors, "autograd.backward", "gradTensors");
  const given = Array.isArray(gradTensors) ? gradTensors : roots.map(() => gradTensors ?? null);
  const implicit = seeds.filter((_, i) => !given[i]);
  try {
    if (options.inputs === undefined) {
      backwardPass(roots, seeds, options, null);
      return;
    }
    const inputs = tensorList("autograd.backward", options.inputs, "input");
    if (inputs.length === 0) {
      throw new RangeError("autograd.backward: 'inputs' argument to backward() cannot be empty");
    }
    inputs.forEach((t, i) => {
      if (!t.requiresGrad) {
        throw new Error(
          `autograd.backward: input ${i} does not require grad (${t.dtype} of shape ${
            formatShape(t.shape)
          } on ${t.device}): can't accumulate its gradient`,
        );
      }
    });
    const unique = [...new Set(inputs)];
    const grads = inputsPass(() => backwardPass(roots, seeds, options, unique));
    const create = options.createGraph ?? false;
    // Accumulated in the pass's grad mode, as the pass itself does (a new sum under createGraph).
    const previous = setGradEnabled(create);
    try {
      unique.forEach((t, i) => {
        const g = grads[i];
        if (!g) return;
        if (t.isLeaf) accumulateLeaf(t, g, false);
        else t.grad = keep(t.grad ? t.grad.add(g) : g.clone());
      });
    } finally {
      setGradEnabled(previous);
    }
  } finally {
    // The implicit seeds are never kept (leaves get copies), unless a recorded backward reads them.
    if (!options.createGraph) { for (const seed of implicit) seed.dispose(); }
  }
}
