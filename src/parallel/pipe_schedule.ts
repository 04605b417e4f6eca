/**
 * The GPipe schedule and the checkpointing of one partition's forward, as
 * PyTorch's `torch.distributed.pipeline.sync.pipeline` and `checkpoint`.
 * Internal to {@link Pipe}; not re-exported.
 * @module
 */

import { runCheckpoint } from "../autograd/checkpoint_core.ts";
import { BatchNormBase } from "../nn/normalization.ts";
import type { Module } from "../nn/module.ts";
import type { Tensor } from "../tensor.ts";

/**
 * The (micro-batch, partition) pairs of each clock cycle for `m`
 * micro-batches over `n` partitions: cycle k runs micro-batch i on partition
 * j where i + j = k, so m + n - 1 cycles in all (PyTorch's `_clock_cycles`).
 */
export function clockCycles(m: number, n: number): [number, number][][] {
  const cycles: [number, number][][] = [];
  for (let k = 0; k < m + n - 1; k++) {
    const cycle: [number, number][] = [];
    for (let j = Math.max(1 + k - m, 0); j < Math.min(1 + k, n); j++) cycle.push([k - j, j]);
    cycles.push(cycle);
  }
  return cycles;
}

/**
 * Runs `forward(...args)` as a checkpoint (see `runCheckpoint`): only `args` are saved,
 * and backward runs the forward again in grad mode (with the random
 * generator as it was, so dropout draws the same mask) and differentiates
 * that. The node's inputs are the tensors of `args` and `params`, so parameter gradients reach
 * the engine as from any op (hooks and accumulation as usual, and
 * `autograd.grad` works). Running statistics of BatchNorm layers in
 * `modules` are not updated by the recomputation, so that one forward
 * updates them once (PyTorch's plain BatchNorm would update them twice).
 */
export function checkpointed(
  forward: (...args: unknown[]) => Tensor | Tensor[],
  args: unknown[],
  params: readonly Tensor[],
  modules: readonly Module[],
): Tensor | Tensor[] {
  return runCheckpoint("Pipe.checkpoint", forward, args, {}, {
    params,
    beforeRecompute() {
      const norms = modules.filter((m): m is BatchNormBase =>
        m instanceof BatchNormBase && m.training && m.trackRunningStats
      );
      // Normalizing with the batch's statistics without updating the running ones: the same
      // numbers, and no second update (nor a write to buffers in backward).
      const untracked = norms as { trackRunningStats: boolean }[];
      untracked.forEach((m) => m.trackRunningStats = false);
      return () => untracked.forEach((m) => m.trackRunningStats = true);
    },
  });
}
