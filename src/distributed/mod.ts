/**
 * Training over several ranks (`torch.distributed`): process groups behind
 * a plugin registry (`"local"`: Workers of this process started by
 * {@link spawn}; `"mpi"`: processes started by `mpiexec`), collectives on
 * tensors of any device, and `DistributedDataParallel`.
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

// `export *` so that `deno doc` lists every member; these files export only public API.
export * from "./backend.ts";
export * from "./group.ts";
export * from "./launch_env.ts";
export * from "./collectives.ts";
export * from "./coalesced.ts";
export * from "./subgroups.ts";
export * from "./monitored_barrier.ts";
export * from "./store.ts";
export * from "./store_error.ts";
export * from "./file_store.ts";
export * from "./tcp_store.ts";
export * from "./scatter_gather.ts";
export * from "./objects.ts";
export * from "./p2p.ts";
export * from "./spawn.ts";
export * from "./ddp.ts";
export * from "./grad_bucket.ts";
export * as optim from "./optim.ts";
export * as fsdp from "./fsdp/mod.ts";
export * as algorithms from "./algorithms.ts";
export * as nn from "./nn/mod.ts";
