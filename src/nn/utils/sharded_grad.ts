/**
 * Parameters whose gradient is only one rank's part of a larger one (the
 * flat shards of `distributed.fsdp.FullyShardedDataParallel`): their local
 * norm is not the model's, so `clipGradNorm_` refuses them with the advice
 * stored here instead of clipping by the wrong norm. Not exported from
 * `mod.ts`: the parallel wrappers mark their shards.
 * @module
 */

import type { Tensor } from "../../tensor.ts";

const partial = new WeakMap<Tensor, string>();

/** Marks `p`'s gradient as a shard; `advice` says what to call instead (it ends the error). */
export function markShardedGradient(p: Tensor, advice: string): void {
  partial.set(p, advice);
}

/** The advice for a marked parameter, or undefined. */
export function shardedGradientAdvice(p: Tensor): string | undefined {
  return partial.get(p);
}
