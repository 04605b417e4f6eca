/**
 * Per-row cross-entropy against class indices through the backend's fused
 * `crossEntropy` / `crossEntropyBackward` kernels: two launches (forward,
 * backward) where the composition from log-softmax, one-hot and reductions
 * takes about twenty. `crossEntropy` uses it when the backend has both
 * kernels, else composes.
 * @module
 */

import { record } from "../../autograd.ts";
import type { Tensor } from "../../tensor.ts";
import { empty, hasKernel, launch } from "../../ops/util.ts";

/**
 * `losses[r] = logsumexp(logits[r]) - logits[r, target[r]]` and
 * `weights[r]` (1, or 0 where `target[r] === ignoreIndex`, loss 0 there too)
 * for logits [rows, classes] and int32 target [rows] on one device; null
 * when the backend lacks the fused kernels. Differentiable in `logits`.
 */
export function crossEntropyRows(
  logits: Tensor,
  target: Tensor,
  ignoreIndex: number,
): { losses: Tensor; weights: Tensor } | null {
  const device = logits.device;
  if (!hasKernel(device, "crossEntropy") || !hasKernel(device, "crossEntropyBackward")) {
    return null;
  }
  const [rows, classes] = logits.shape;
  const dtype = logits.dtype;
  const losses = empty([rows], dtype, device);
  const weights = empty([rows], dtype, device);
  // The softmax is what backward needs (the logits may be disposed by then).
  const probs = empty([rows, classes], dtype, device);
  launch(device, "crossEntropy", {
    logits: logits.storage.buffer("crossEntropy"),
    target: target.storage.buffer("crossEntropy"),
    losses: losses.storage.buffer(),
    weights: weights.storage.buffer(),
    probs: probs.storage.buffer(),
    rows,
    classes,
    ignoreIndex,
    dtype,
  });
  record("crossEntropy", [logits], losses, ([g]) => {
    const out = empty(logits.shape, dtype, device);
    launch(device, "crossEntropyBackward", {
      probs: probs.storage.buffer("crossEntropy backward"),
      target: target.storage.buffer("crossEntropy backward"),
      gradLoss: g!.storage.buffer("crossEntropy backward"),
      out: out.storage.buffer(),
      rows,
      classes,
      ignoreIndex,
      dtype,
    });
    return [out];
  });
  return { losses, weights };
}
