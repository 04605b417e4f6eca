/**
 * `torch.distributed.fsdp` (PyTorch 1.13): {@link FullyShardedDataParallel},
 * its sharding strategies and state dict types, and the auto-wrap policies
 * of `torch.distributed.fsdp.wrap`.
 * @module
 */

export * from "./fully_sharded.ts";
export * from "./state_dict_types.ts";
export * from "./wrap.ts";
