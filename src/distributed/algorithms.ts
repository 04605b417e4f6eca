/**
 * Training algorithms on top of the process group
 * (`torch.distributed.algorithms`): {@link ddpCommHooks}, the communication
 * hooks of `DistributedDataParallel.registerCommHook`.
 * @module
 */

export * as ddpCommHooks from "./ddp_comm_hooks.ts";
