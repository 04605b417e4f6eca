/**
 * Training over several ranks (`torch.distributed`): process groups behind
 * a plugin registry (`"local"`: Workers of this process started by
 * {@link spawn}; `"mpi"`: processes started by `mpiexec`), collectives on
 * tensors of any device, and `DistributedDataParallel`. `pipeline.sync.Pipe`
 * is `parallel.Pipe` under PyTorch's other name
 * (`torch.distributed.pipeline.sync.Pipe`).
 *
 * @example
 * ```ts
 * // train.ts: run with `deno run -A train.ts` (2 Workers) or `mpiexec -n 2 deno run -A train.ts`
 * import { distributed, ones } from "@multigrad/core";
 * export async function main(rank: number, worldSize: number) {
 *   const t = ones([3]).mul(rank + 1);
 *   distributed.allReduce(t);
 *   return await t.toArray(); // [3, 3, 3] on both ranks
 * }
 * if (import.meta.main) await distributed.spawn(import.meta.url, { nprocs: 2 });
 * ```
 * @module
 */

// The namespace users see: above both `distributed` and `parallel`, so that
// `distributed.pipeline.sync.Pipe` exists while the distributed layer never
// imports `parallel` (which imports it, for DistributedDataParallel).
export * from "../distributed/mod.ts";
export * as pipeline from "./distributed_pipeline.ts";
