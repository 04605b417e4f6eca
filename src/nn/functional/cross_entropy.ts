/**
 * Per-row cross-entropy against class indices through the backend's fused
 * `crossEntropy` / `crossEntropyBackward` kernels: two launches (forward,
 * backward) where the composition from log-softmax, one-hot and reductions
 * takes about twenty. `crossEntropy` uses it when the backend has both
 * kernels, else composes.
 * @module
 */

import { isGradEnabled, noGrad, record } from "../../autograd.ts";
import type { Storage } from "../../storage.ts";
import type { Tensor } from "../../tensor.ts";
import { where } from "../../ops/indexing.ts";
import { arange } from "../../ops/factory.ts";
import { empty, hasKernel, launch } from "../../ops/util.ts";
import { checkClassRange } from "../util.ts";

/**
 * Targets already found in range, with the version, class count and
 * ignoreIndex they were checked for: a training loop that reuses its target
 * tensor (a full batch) checks it once, not every step (each check is a
 * few kernels and a read). A target changed since is checked again.
 */
const verified = new WeakMap<Storage, string>();

/**
 * PyTorch's error for a class index out of range (ignoreIndex aside), raised
 * by the next read. (The fused kernels alone would give NaN there.)
 */
function checkTargets(op: string, target: Tensor, classes: number, ignoreIndex: number): void {
  const storage = target.storage;
  const known = storage.knownRange;
  // Values known on the host (written from it, or picked from such) and in range: nothing to read.
  if (known && known[0] >= 0 && known[1] < classes) return;
  const key = `${storage.version}|${classes}|${ignoreIndex}`;
  if (verified.get(storage) === key) return;
  const safe = noGrad(() => where(target.ne(ignoreIndex), target, 0));
  checkClassRange(op, safe, classes, `, or ignoreIndex ${ignoreIndex}`, () => {
    verified.set(storage, key);
  });
}

/**
 * The logits' gradient `(softmax - onehot(target)) * rowScale` from
 * differentiable ops: the fused kernels' backward under createGraph (grad
 * mode on in backward), so that second derivatives flow through it.
 */
function recordedGrad(logits: Tensor, target: Tensor, rowScale: Tensor): Tensor {
  const classes = arange(logits.shape[1], { device: logits.device });
  const onehot = target.reshape([-1, 1]).eq(classes).to(logits.dtype);
  return logits.softmax(1).sub(onehot).mul(rowScale.reshape([-1, 1]));
}

/**
 * `losses[r] = logsumexp(logits[r]) - logits[r, target[r]]` and
 * `weights[r]` (1, or 0 where `target[r] === ignoreIndex`, loss 0 there too)
 * for logits [rows, classes] and int32 target [rows] on one device; null
 * when the backend lacks the fused kernels. Differentiable in `logits`. A
 * target out of range makes the next read reject, naming it (as `op`).
 */
export function crossEntropyRows(
  op: string,
  logits: Tensor,
  target: Tensor,
  ignoreIndex: number,
): { losses: Tensor; weights: Tensor } | null {
  const device = logits.device;
  if (!hasKernel(device, "crossEntropy") || !hasKernel(device, "crossEntropyBackward")) {
    return null;
  }
  const [rows, classes] = logits.shape;
  checkTargets(op, target, classes, ignoreIndex);
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
    if (isGradEnabled()) return [recordedGrad(logits, target, g!.mul(weights))];
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

/**
 * The rows' cross-entropy summed (`mean` false) or averaged over the rows
 * not ignored, as a scalar, through the backend's `crossEntropyReduced` /
 * `crossEntropyReducedBackward` kernels: one launch each way where the
 * per-row kernels need two sums and a division forward, and a division and
 * an expand backward. Null when the backend lacks them (the caller then
 * reduces {@link crossEntropyRows}). Differentiable in `logits`.
 */
export function crossEntropyReduced(
  op: string,
  logits: Tensor,
  target: Tensor,
  ignoreIndex: number,
  mean: boolean,
): Tensor | null {
  const device = logits.device;
  if (
    !hasKernel(device, "crossEntropyReduced") || !hasKernel(device, "crossEntropyReducedBackward")
  ) {
    return null;
  }
  const [rows, classes] = logits.shape;
  checkTargets(op, target, classes, ignoreIndex);
  const dtype = logits.dtype;
  const loss = empty([], dtype, device);
  // Saved for backward (the logits may be disposed by then).
  const weightSum = empty([], dtype, device);
  const probs = empty([rows, classes], dtype, device);
  launch(device, "crossEntropyReduced", {
    logits: logits.storage.buffer("crossEntropy"),
    target: target.storage.buffer("crossEntropy"),
    probs: probs.storage.buffer(),
    loss: loss.storage.buffer(),
    weightSum: weightSum.storage.buffer(),
    rows,
    classes,
    ignoreIndex,
    mean,
    dtype,
  });
  record("crossEntropy", [logits], loss, ([g]) => {
    if (isGradEnabled()) {
      const scale = target.ne(ignoreIndex).to(dtype).mul(mean ? g!.div(weightSum) : g!);
      return [recordedGrad(logits, target, scale)];
    }
    const out = empty(logits.shape, dtype, device);
    launch(device, "crossEntropyReducedBackward", {
      probs: probs.storage.buffer("crossEntropy backward"),
      target: target.storage.buffer("crossEntropy backward"),
      gradLoss: g!.storage.buffer("crossEntropy backward"),
      weightSum: weightSum.storage.buffer("crossEntropy backward"),
      out: out.storage.buffer(),
      rows,
      classes,
      ignoreIndex,
      mean,
      dtype,
    });
    return [out];
  });
  return loss;
}
