/**
 * Sub-groups made in bulk (`torch.distributed.new_subgroups` and
 * `new_subgroups_by_enumeration`), the maps between a group's ranks and the
 * whole group's (`get_global_rank`, `get_group_rank`,
 * `get_process_group_ranks`), and which process-group backends this
 * runtime can start (`is_available`, `is_mpi_available`, ...).
 * @module
 */

import type { DistributedGroup } from "./backend.ts";
import { newGroup } from "./group.ts";
import { mpiLibraryLoads } from "./mpi.ts";
import { activeGroup } from "./state.ts";

/** What {@link newSubgroups} and {@link newSubgroupsByEnumeration} return: this rank's group (or null) and all. */
export type Subgroups = [current: DistributedGroup | null, all: DistributedGroup[]];

/**
 * Splits every rank into consecutive groups of `groupSize`
 * (`torch.distributed.new_subgroups`): ranks `[0, groupSize)`,
 * `[groupSize, 2 * groupSize)`, ... Every rank must call it. Returns this
 * rank's group and all of them, in order. The world size must be a
 * multiple of `groupSize`. Unlike PyTorch, `groupSize` is required (its
 * default is the number of CUDA devices of the machine).
 *
 * @example
 * ```ts
 * // 4 ranks
 * const [mine, all] = await distributed.newSubgroups(2);
 * // all: ranks [0, 1] and [2, 3]; rank 3's mine.ranks: [2, 3], mine.rank: 1
 * ```
 */
export async function newSubgroups(groupSize: number): Promise<Subgroups> {
  const world = activeGroup("newSubgroups");
  const n = world.worldSize;
  if (!Number.isInteger(groupSize) || groupSize <= 0) {
    throw new RangeError(`newSubgroups: groupSize must be an integer > 0, got ${groupSize}`);
  }
  if (groupSize > n) {
    throw new RangeError(
      `newSubgroups: groupSize (${groupSize}) must not exceed the world size (${n})`,
    );
  }
  if (n % groupSize !== 0) {
    throw new RangeError(
      `newSubgroups: the world size (${n}) must be divisible by groupSize (${groupSize})`,
    );
  }
  const lists = Array.from(
    { length: n / groupSize },
    (_, g) => Array.from({ length: groupSize }, (_, i) => g * groupSize + i),
  );
  return await makeAll(lists, world.rank);
}

/**
 * One group per list of ranks (`torch.distributed.
 * new_subgroups_by_enumeration`); a rank may be in at most one list, and
 * ranks in none are allowed (their current group is null). Every rank must
 * call it with the same lists. Returns this rank's group and all of them,
 * in the order of the lists (each group's ranks ascending, as `newGroup`'s).
 *
 * @example
 * ```ts
 * // 4 ranks
 * const [mine, all] = await distributed.newSubgroupsByEnumeration([[0, 2], [1, 3]]);
 * // rank 2's mine.ranks: [0, 2] (mine.rank: 1); rank 1's: [1, 3]
 * ```
 */
export async function newSubgroupsByEnumeration(
  ranksPerSubgroupList: readonly (readonly number[])[],
): Promise<Subgroups> {
  const world = activeGroup("newSubgroupsByEnumeration");
  if (!Array.isArray(ranksPerSubgroupList) || ranksPerSubgroupList.length === 0) {
    throw new RangeError(
      `newSubgroupsByEnumeration: ranksPerSubgroupList must be a non-empty array of rank lists, got ${
        Array.isArray(ranksPerSubgroupList) ? "[]" : String(ranksPerSubgroupList)
      }`,
    );
  }
  const seen = new Map<number, readonly number[]>();
  ranksPerSubgroupList.forEach((ranks) => {
    if (!Array.isArray(ranks)) {
      throw new TypeError(
        `newSubgroupsByEnumeration: every entry must be an array of ranks, got ${String(ranks)}`,
      );
    }
    for (const rank of ranks) {
      const other = seen.get(rank);
      if (other) {
        throw new RangeError(
          `newSubgroupsByEnumeration: rank ${rank} is in both subgroup [${other.join(", ")}] and [${
            ranks.join(", ")
          }] (a rank may be in one subgroup only)`,
        );
      }
      seen.set(rank, ranks);
    }
  });
  return await makeAll(ranksPerSubgroupList, world.rank);
}

async function makeAll(lists: readonly (readonly number[])[], rank: number): Promise<Subgroups> {
  const all: DistributedGroup[] = [];
  let current: DistributedGroup | null = null;
  // One after the other: every rank must make the groups in the same order.
  for (const ranks of lists) {
    const group = await newGroup(ranks);
    all.push(group);
    if (ranks.includes(rank)) current = group;
  }
  return [current, all];
}

/**
 * The whole group's rank of `group`'s rank `groupRank`
 * (`torch.distributed.get_global_rank`); `group` undefined (PyTorch's
 * `group.WORLD`): `groupRank` itself.
 */
export function getGlobalRank(group: DistributedGroup | undefined, groupRank: number): number {
  if (group === undefined) return groupRank;
  const global = Number.isInteger(groupRank) ? group.ranks[groupRank] : undefined;
  if (global === undefined) {
    throw new RangeError(
      `getGlobalRank: group rank ${groupRank} is not part of the group of ranks [${
        group.ranks.join(", ")
      }] (its ranks are 0 to ${group.size - 1})`,
    );
  }
  return global;
}

/**
 * `group`'s rank of the whole group's rank `globalRank`
 * (`torch.distributed.get_group_rank`); `group` undefined (PyTorch's
 * `group.WORLD`): `globalRank` itself.
 */
export function getGroupRank(group: DistributedGroup | undefined, globalRank: number): number {
  if (group === undefined) return globalRank;
  const at = group.ranks.indexOf(globalRank);
  if (at < 0) {
    throw new RangeError(
      `getGroupRank: global rank ${globalRank} is not part of the group of ranks [${
        group.ranks.join(", ")
      }]`,
    );
  }
  return at;
}

/**
 * The whole group's ranks of `group`, ordered by their rank in it
 * (`torch.distributed.get_process_group_ranks`); `group` undefined: every
 * rank of this thread's process group.
 */
export function getProcessGroupRanks(group?: DistributedGroup): number[] {
  if (group !== undefined) return [...group.ranks];
  return Array.from({ length: activeGroup("getProcessGroupRanks").worldSize }, (_, q) => q);
}

/** Whether the distributed package is usable (`torch.distributed.is_available`): always true here. */
export function isAvailable(): boolean {
  return true;
}

/**
 * Whether the `"mpi"` backend can start here (`torch.distributed.
 * is_mpi_available`): Deno's FFI is allowed and MPICH's library
 * (`libmpich.so.12`, or `MULTIGRAD_MPI_LIB`) loads. Never throws. It does
 * not tell whether this process was started by `mpiexec` (see
 * `launchedByMpi`).
 */
export function isMpiAvailable(): boolean {
  return mpiLibraryLoads();
}

/** Whether NCCL can be used (`torch.distributed.is_nccl_available`): false, there is no CUDA here. */
export function isNcclAvailable(): boolean {
  return false;
}

/**
 * Whether gloo can be used (`torch.distributed.is_gloo_available`): false;
 * the `"local"` backend (Workers, shared memory) takes its place.
 */
export function isGlooAvailable(): boolean {
  return false;
}
