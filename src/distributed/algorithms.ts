/**
 * Training algorithms on top of the process group
 * (`torch.distributed.algorithms`): {@link ddpCommHooks}, the communication
 * hooks of `DistributedDataParallel.registerCommHook`, and {@link join}
 * ({@link Join}, {@link Joinable}, {@link JoinHook}: uneven inputs).
 * @module
 */

export * as ddpCommHooks from "./ddp_comm_hooks.ts";
export * as join from "./join.ts";
// Also as members, as PyTorch's `torch.distributed.algorithms.Join` (`export *` so `deno doc` lists them).
export * from "./join.ts";
