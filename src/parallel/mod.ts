/**
 * `torch.nn.parallel` for multigrad: replicate, scatter, parallelApply,
 * gather, dataParallel and DataParallel, with autograd through Scatter,
 * Gather, Broadcast and ReduceAddCoalesced. Works over any mix of started
 * devices (webgpu and cpu together).
 * @module
 */

export { replicate } from "./replicate.ts";
export type { ReplicateOptions } from "./replicate.ts";
export { gather, scatter } from "./scatter_gather.ts";
export type { NestedGatherOptions, NestedScatterOptions } from "./scatter_gather.ts";
export { parallelApply } from "./parallel_apply.ts";
export type { ParallelApplyOptions } from "./parallel_apply.ts";
export { DataParallel, dataParallel } from "./data_parallel.ts";
export type { DataParallelModuleOptions, DataParallelOptions } from "./data_parallel.ts";
export { Broadcast, Gather, ReduceAddCoalesced, Scatter } from "./functions.ts";
export * as comm from "./comm.ts";
export type { DeviceLike } from "./devices.ts";
