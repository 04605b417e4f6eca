/**
 * Process groups (`torch.distributed`'s `init_process_group` and friends):
 * one per thread, backed by a plugin registered with
 * {@link registerProcessGroupBackend}. Two ship: `"local"` (Workers started
 * by `spawn`, shared memory) and `"mpi"` (processes started by `mpiexec`).
 * @module
 */

import { DistributedError, type DistributedGroup, type ProcessGroupFactory } from "./backend.ts";
import { createLocalShared, LocalBackend, localLaunch } from "./local.ts";
import { mpiBackend } from "./mpi.ts";
import type { Store } from "./store.ts";
import { tcpBackend } from "./tcp.ts";
import { launchedWithEnv } from "./launch_env.ts";
import {
  activeGroup,
  currentGroup,
  factoryOf,
  makeGroupHandle,
  ProcessGroup,
  registerFactory,
  setCurrentGroup,
} from "./state.ts";

/** Default of {@link InitProcessGroupOptions.timeoutMs}: one minute, as PyTorch's NCCL default is 10. */
export const DEFAULT_TIMEOUT_MS = 60_000;

/**
 * Registers (or replaces) a process-group backend: `factory` starts this
 * rank's end of a group when `initProcessGroup({ backend: name })` runs.
 */
export function registerProcessGroupBackend(name: string, factory: ProcessGroupFactory): void {
  registerFactory(name, factory);
}

function env(name: string): string | undefined {
  try {
    return globalThis.Deno?.env.get(name);
  } catch {
    // No --allow-env: then no launcher can be seen either.
    return undefined;
  }
}

/**
 * Whether this process was started by an MPI launcher (`mpiexec`, `mpirun`,
 * or Slurm's `srun --mpi=pmi2`), as seen in its environment (`PMI_RANK`,
 * `PMI_SIZE`, `PMIX_RANK`, `OMPI_COMM_WORLD_SIZE`).
 */
export function launchedByMpi(): boolean {
  return ["PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE"].some((v) =>
    env(v) !== undefined
  );
}

/** Options of {@link initProcessGroup}. */
export interface InitProcessGroupOptions {
  /**
   * `"local"`, `"mpi"` or `"tcp"` (or a registered plugin). Default:
   * `"local"` inside a Worker started by `spawn`, `"mpi"` under an MPI
   * launcher, `"tcp"` when `MASTER_ADDR`, `MASTER_PORT`, `RANK` and
   * `WORLD_SIZE` are set (multigrad's `run.ts`, torchrun, by hand) or an
   * `initMethod` or `store` is given.
   */
  backend?: string;
  /**
   * `"tcp"`'s rendezvous (`init_method`): `"env://"` (default: rank 0 hosts
   * a `TCPStore` at `MASTER_ADDR:MASTER_PORT`) or `"tcp://host:port"`
   * (the same at that address; `rank` and `worldSize` then given or from
   * `RANK`, `WORLD_SIZE`).
   */
  initMethod?: string;
  /**
   * `"tcp"`'s rendezvous through a store every rank shares
   * (`init_process_group(store=...)`), with `rank` and `worldSize`.
   */
  store?: Store;
  /** This rank; launchers supply it (given, it must agree with theirs). */
  rank?: number;
  /** Number of ranks; launchers supply it (given, it must agree). */
  worldSize?: number;
  /**
   * How long a collective waits for the other ranks before it fails naming
   * those that did not arrive (default 60 000); under MPI also how long
   * `initProcessGroup` waits for every rank of the job to start (under
   * `"tcp"` too, but at least 10 s: processes start at different times).
   */
  timeoutMs?: number;
}

function checkIndex(what: string, value: number | undefined, min: number): void {
  if (value !== undefined && (!Number.isInteger(value) || value < min)) {
    throw new RangeError(`initProcessGroup: ${what} must be an integer >= ${min}, got ${value}`);
  }
}

/**
 * Starts this thread's process group (`torch.distributed.init_process_group`).
 * Collectives and `DistributedDataParallel` use it until
 * {@link destroyProcessGroup}.
 */
export async function initProcessGroup(options: InitProcessGroupOptions = {}): Promise<void> {
  const existing = currentGroup();
  if (existing) {
    throw new Error(
      `initProcessGroup: a process group is already initialised (backend "${existing.backendName}", rank ${existing.rank} of ${existing.worldSize}); call destroyProcessGroup() first`,
    );
  }
  checkIndex("rank", options.rank, 0);
  checkIndex("worldSize", options.worldSize, 1);
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!(timeoutMs > 0) || !Number.isFinite(timeoutMs)) {
    throw new RangeError(
      `initProcessGroup: timeoutMs must be a positive number of milliseconds, got ${timeoutMs}`,
    );
  }
  const name = options.backend ??
    (localLaunch()
      ? "local"
      : launchedByMpi()
      ? "mpi"
      : options.initMethod !== undefined || options.store !== undefined || launchedWithEnv()
      ? "tcp"
      : null);
  if (name === null) {
    throw new Error(
      "initProcessGroup: no backend given and no launcher found: start the ranks with " +
        'distributed.spawn(moduleUrl, { nprocs }) (backend "local": Workers of one process) or with ' +
        '`mpiexec -n N deno run -A script.ts` (backend "mpi": processes, on one or many machines) or ' +
        'with `deno run -A jsr:@multigrad/core/run --nproc-per-node N script.ts` (backend "tcp": ' +
        "processes, MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE)",
    );
  }
  const backend = await factoryOf(name)({
    rank: options.rank,
    worldSize: options.worldSize,
    timeoutMs,
    initMethod: options.initMethod,
    store: options.store,
  });
  const mismatch = (options.rank !== undefined && options.rank !== backend.rank) ||
    (options.worldSize !== undefined && options.worldSize !== backend.worldSize);
  if (mismatch) {
    await backend.destroy();
    throw new Error(
      `initProcessGroup: asked for rank ${options.rank ?? "(any)"} of ${
        options.worldSize ?? "(any)"
      }, but the "${name}" launcher started this process as rank ${backend.rank} of ${backend.worldSize}`,
    );
  }
  setCurrentGroup(new ProcessGroup(name, backend, timeoutMs));
}

/**
 * Leaves the process group. Collectives already called still run; the
 * returned promise settles once they have and the backend is closed.
 */
export async function destroyProcessGroup(): Promise<void> {
  const group = activeGroup("destroyProcessGroup");
  setCurrentGroup(null);
  await group.destroy();
}

/**
 * Makes a group of some of the ranks (`torch.distributed.new_group`), for
 * collectives among just them (`allReduce(t, { group })` and the others).
 * Every rank of the process group must call it, in the same order, with
 * the same `ranks` (a difference is an error on every rank naming each
 * rank's list); on a rank not in `ranks` the returned group has rank -1,
 * and its collectives are an error naming the rank and the group. A
 * `"local"` group's first member makes the sub-group's shared memory and
 * posts it to the others (no limit on how many); `"mpi"` splits its
 * communicator. Destroyed with the process group.
 */
export async function newGroup(ranks: readonly number[]): Promise<DistributedGroup> {
  const world = activeGroup("newGroup");
  const n = world.worldSize;
  if (
    !Array.isArray(ranks) || ranks.length === 0 ||
    ranks.some((r) => !Number.isInteger(r) || r < 0 || r >= n) ||
    new Set(ranks).size !== ranks.length
  ) {
    throw new RangeError(
      `newGroup: ranks must be distinct ranks in [0, ${n}), at least one, got [${
        Array.isArray(ranks) ? ranks.join(", ") : String(ranks)
      }]`,
    );
  }
  const make = world.backend.newGroup?.bind(world.backend);
  if (!make) {
    throw new Error(
      `newGroup: the "${world.backendName}" process-group backend makes no sub-groups`,
    );
  }
  const sorted = [...ranks].sort((a, b) => a - b);
  const index = world.newGroups++;
  // Every rank must pass the same ranks: the lists are gathered and compared.
  const call = world.call({ kind: "allGather", dtype: "int32", shapes: [[sorted.length]] });
  const backend = await world.run(call, async () => {
    const lists = (await world.backend.allGather(call, Int32Array.from(sorted)))
      .map((list) => Array.from(list).join(", "));
    if (lists.some((list) => list !== lists[0])) {
      throw new DistributedError(
        `newGroup: every rank must pass the same ranks, but ${
          lists.map((list, q) => `rank ${q} passed [${list}]`).join("; ")
        }`,
        lists.flatMap((list, q) => list === lists[0] ? [] : [q]),
      );
    }
    return await make(sorted, index);
  });
  const group = backend
    ? new ProcessGroup(world.backendName, backend, world.timeoutMs, sorted)
    : null;
  if (group) world.subgroups.push(group);
  return makeGroupHandle(sorted, group);
}

/** Whether this thread has a process group. */
export function isInitialized(): boolean {
  return currentGroup() !== null;
}

/** This rank (0 ≤ rank < worldSize). */
export function getRank(): number {
  return activeGroup("getRank").rank;
}

/** Number of ranks in the group. */
export function getWorldSize(): number {
  return activeGroup("getWorldSize").worldSize;
}

/** The group's backend name (`"local"`, `"mpi"`). */
export function getBackend(): string {
  return activeGroup("getBackend").backendName;
}

registerFactory("local", (init) => {
  const launch = localLaunch();
  if (launch) {
    // A second group would restart its rounds at 0 on words that hold the
    // first one's, and read slots the other ranks have not written.
    if (launch.used) {
      throw new Error(
        `initProcessGroup: rank ${launch.rank} of this spawn already had its "local" group and destroyed it; a spawned rank has one group for its whole main (make sub-groups with newGroup instead of a new group)`,
      );
    }
    launch.used = true;
    return new LocalBackend(launch.shared, launch.rank, init.timeoutMs, null, launch.mailbox);
  }
  if ((init.worldSize ?? 1) === 1 && (init.rank ?? 0) === 0) {
    // One rank needs no launcher: collectives then leave values as they are.
    return new LocalBackend(createLocalShared(1), 0, init.timeoutMs);
  }
  throw new Error(
    `initProcessGroup: the "local" backend's ranks are Workers started by distributed.spawn(moduleUrl, { nprocs }), and this thread was not (asked for rank ${
      init.rank ?? "(any)"
    } of ${init.worldSize}); use spawn, or mpiexec with the "mpi" backend for processes`,
  );
});
registerFactory("mpi", mpiBackend);
registerFactory("tcp", tcpBackend);
