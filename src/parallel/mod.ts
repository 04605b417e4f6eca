/**
 * `torch.nn.parallel` for multigrad: replicate, scatter, parallelApply,
 * gather, dataParallel and DataParallel, with autograd through Scatter,
 * Gather, Broadcast and ReduceAddCoalesced. Works over any mix of started
 * devices (webgpu and cpu together).
 * @module
 */

// `export *` (not named re-exports) so that `deno doc` lists every member of
// the namespace; the files re-exported here export only public API.
export * from "./replicate.ts";
export * from "./scatter_gather.ts";
export * from "./parallel_apply.ts";
export * from "./data_parallel.ts";
export * from "./data_parallel_function.ts";
export * from "./functions.ts";
export * from "./pipe.ts";
export * from "./deferred_batch_norm.ts";
export * from "../distributed/ddp.ts";
export * as comm from "./comm.ts";
export type { DeviceLike } from "./devices.ts";
