/**
 * The backward of a node whose forward ran without a graph (a fused kernel,
 * or a composition run under `noGrad` with a closed-form backward), under
 * createGraph: the forward re-run in grad mode and differentiated with a
 * graph of its own, so that second derivatives are exact, never zero.
 * @module
 */

import { backwardPass, isGradEnabled } from "../autograd.ts";
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
 * @internal Throws when a backward runs under createGraph: for hand-written
 * backwards not (yet) made of recorded ops, so that a second derivative is
 * an error naming `op` rather than silently wrong.
 */
export function firstOrderOnly(op: string): void {
  if (isGradEnabled()) throw new Error(`${op}'s backward is not differentiable (createGraph)`);
}
