/**
 * The backward of a node whose forward ran without a graph (a fused kernel,
 * or a composition run under `noGrad` with a closed-form backward), under
 * createGraph: the forward re-run in grad mode and differentiated with a
 * graph of its own, so that second derivatives are exact, never zero.
 * @module
 */

import { type BackwardFn, backwardPass, isGradEnabled, noGrad, record } from "../autograd.ts";
import type { Tensor } from "../tensor.ts";

/**
 * @internal Whether a backward runs under createGraph (grad mode is on only
 * then, inside backward): the cue for a hand-written backward to take
 * {@link recomputedBackward}.
 */
export const recording = (): boolean => isGradEnabled();

/**
 * @internal The gradients of `inputs` (null for those that need none) of
 * `forward()` (recorded ops of the inputs, run now in grad mode) weighted by
 * `g`, differentiable in the inputs and in `g`.
 */
export function recomputedBackward(
  inputs: (Tensor | null)[],
  forward: () => Tensor,
  g: Tensor,
): (Tensor | null)[] {
  const wanted = [...new Set(inputs)].filter((t): t is Tensor => t !== null && t.requiresGrad);
  const out = forward();
  if (wanted.length === 0 || !out.requiresGrad) return inputs.map(() => null);
  const grads = backwardPass([out], [g], { createGraph: true }, wanted);
  // A tensor passed twice (prelu(w, w)) has one total gradient: its first slot takes it all,
  // as the engine sums the slots.
  return inputs.map((t, i) =>
    t && t.requiresGrad && inputs.indexOf(t) === i ? grads[wanted.indexOf(t)] : null
  );
}

/**
 * @internal The backward of `op` for hand-written backwards not (yet) made
 * of recorded ops (PyTorch's ops without a double-backward formula). Under
 * createGraph it runs with grad mode off, so its first-order gradients are
 * exactly the plain ones, and each comes back on a node whose own backward
 * throws: a second derivative is an error naming `op` only when a later
 * backward reaches it, never a silently wrong number. The node's inputs are
 * the incoming gradients and `saved`, the op's inputs the gradients depend on.
 */
export function firstOrderOnly(
  op: string,
  saved: (Tensor | null)[],
  backward: BackwardFn,
): BackwardFn {
  return (grads) => {
    if (!isGradEnabled()) return backward(grads);
    const inputs = [...grads, ...saved];
    const refuse = (): never => {
      throw new Error(`${op}'s backward is not differentiable (createGraph)`);
    };
    // Detached: a gradient may be a tensor of the graph (g passed through), whose node stays.
    return noGrad(() => backward(grads)).map((g) =>
      g && record(`${op}Backward`, inputs, g.detach(), refuse)
    );
  };
}
