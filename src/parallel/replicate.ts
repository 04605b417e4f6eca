/**
 * Replicas of a module on several devices. Replica 0 is the module itself;
 * the others get their parameters through a differentiable Broadcast, so
 * their gradients are summed back into the original parameters' `.grad`.
 * @module
 */

import { isGradEnabled } from "../autograd.ts";
import type { Module } from "../nn/module.ts";
import type { Tensor } from "../tensor.ts";
import { checkModuleOn, type DeviceLike, resolveDevices } from "./devices.ts";
import { Broadcast } from "./functions.ts";
import { refuseLazy } from "../nn/lazy_state.ts";
import * as comm from "./comm.ts";

/** Options of {@link replicate}. */
export interface ReplicateOptions {
  /** Plain copies without a graph, even with gradients enabled. */
  detach?: boolean;
}

/**
 * `module` on each device: replica 0 is `module` (its own parameters and
 * buffers); replicas 1.. are structural copies whose parameters are
 * Broadcast outputs (or plain copies with `detach` or under noGrad) and whose
 * buffers are copies made without gradient.
 */
export function replicate<M extends Module>(
  module: M,
  devices: readonly DeviceLike[],
  options: ReplicateOptions = {},
): M[] {
  const targets = resolveDevices(devices, "replicate");
  checkModuleOn(module, targets[0], "replicate");
  const others = targets.slice(1);
  if (others.length === 0) return [module];
  const params = module.parameters();
  const buffers = module.buffers();
  refuseLazy([...params, ...buffers], "DataParallel");
  const differentiable = isGradEnabled() && !options.detach;
  // Only parameters that require grad join the graph (PyTorch's Broadcast
  // marks the copies of the others non-differentiable): a frozen backbone
  // gets no gradients to compute, move and throw away.
  const learnt = differentiable ? params.filter((p) => p.requiresGrad) : [];
  const frozen = differentiable ? params.filter((p) => !p.requiresGrad) : params;
  const copyOf = new Map<Tensor, Tensor[]>();
  const learntCopies: Tensor[] = learnt.length > 0 ? Broadcast.apply(others, ...learnt) : [];
  learnt.forEach((p, j) =>
    copyOf.set(p, others.map((_, r) => learntCopies[r * learnt.length + j]))
  );
  const frozenCopies = comm.broadcastCoalesced(frozen, others);
  frozen.forEach((p, j) => copyOf.set(p, others.map((_, r) => frozenCopies[r][j])));
  const bufferCopies = comm.broadcastCoalesced(buffers, others).flat();
  const replicas: M[] = [module];
  others.forEach((_, r) => {
    const byOriginal = new Map<Tensor, Tensor>();
    params.forEach((p) => byOriginal.set(p, copyOf.get(p)![r]));
    buffers.forEach((b, j) => byOriginal.set(b, bufferCopies[r * buffers.length + j]));
    replicas.push(module._replicateWith((t) => byOriginal.get(t) ?? t) as M);
  });
  return replicas;
}
