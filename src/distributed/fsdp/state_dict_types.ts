/**
 * The public names of FSDP's state dicts (PyTorch 1.13's
 * `torch.distributed.fsdp.StateDictType`, `FullStateDictConfig` and the
 * chunks of a `SHARDED_STATE_DICT`); state_dict.ts makes the dicts.
 * @module
 */
/** `torch.distributed.fsdp.StateDictType`: what `stateDict()` gives (see {@link stateDictType}). */
export const StateDictType = {
  /** The original parameters, unflattened, under their original names (every rank gets the same values). */
  FULL_STATE_DICT: "FULL_STATE_DICT",
  /** Each unit's flat shard of this rank, under `<unit path>.flatParam`, and the buffers. */
  LOCAL_STATE_DICT: "LOCAL_STATE_DICT",
  /**
   * Each original parameter's rows of this rank (`torch.chunk` along dim 0,
   * as PyTorch's ShardedTensor chunks) under its original name, the buffers
   * whole (see {@link shardedTensorMetadata}).
   */
  SHARDED_STATE_DICT: "SHARDED_STATE_DICT",
} as const;
/** One of {@link StateDictType}'s values. */
export type StateDictType = typeof StateDictType[keyof typeof StateDictType];

/** Options of {@link FullStateDictConfig}. */
export interface FullStateDictConfigOptions {
  /** The full dict's tensors are copied to the host (`cpu`) instead of staying on the model's device (default false). */
  offloadToCpu?: boolean;
  /** Only rank 0 of the group gets the full dict; the others get `{}` (default false). Every rank still gathers. */
  rank0Only?: boolean;
}

/**
 * `torch.distributed.fsdp.FullStateDictConfig(offload_to_cpu, rank0_only)`:
 * how {@link stateDictType}'s `FULL_STATE_DICT` is made. As PyTorch,
 * `rank0Only` ranks other than 0 get an empty dict (after taking part in
 * the gathers), and loading still wants the full dict on every rank.
 */
export class FullStateDictConfig {
  /** Copy the full dict's tensors to the host. */
  readonly offloadToCpu: boolean;
  /** Only rank 0 gets the dict. */
  readonly rank0Only: boolean;
  /** Both default false, as PyTorch. */
  constructor(options: FullStateDictConfigOptions = {}) {
    this.offloadToCpu = options.offloadToCpu ?? false;
    this.rank0Only = options.rank0Only ?? false;
  }
}

/**
 * The prefix of the one key every SHARDED and LOCAL state dict carries,
 * `_fsdpShard.rank<r>.of<n>`: the rank and world size (of the group) that
 * saved it, in the name so that loading checks it without reading a
 * tensor; its tensor is int32 `[r, n]`.
 */
export const SHARD_INFO_PREFIX = "_fsdpShard";

/** Where {@link shardedTensorMetadata} puts one rank's chunk of a parameter. */
export interface ShardedTensorMetadata {
  /** The original parameter's shape. */
  globalShape: number[];
  /** Where the chunk starts in each dim (only dim 0 is ever non-zero). */
  offsets: number[];
  /** The chunk's shape (dim 0 may be 0: a rank past the last chunk holds no rows). */
  shape: number[];
}

/**
 * Rank `rank`'s chunk of a parameter of `globalShape` in a
 * `SHARDED_STATE_DICT` at `worldSize` ranks: PyTorch 1.13's
 * `_create_chunk_sharded_tensor` (`tensor.chunk(worldSize, 0)`): chunks of
 * `ceil(d0 / worldSize)` rows, rank r's from row `r · ceil(d0 / worldSize)`;
 * where PyTorch leaves a rank with no shard we give it a tensor of 0 rows.
 * A 0-d parameter is kept whole by rank 0 (0 elements elsewhere).
 */
export function shardedTensorMetadata(
  globalShape: readonly number[],
  rank: number,
  worldSize: number,
): ShardedTensorMetadata {
  if (!Number.isInteger(rank) || !Number.isInteger(worldSize) || rank < 0 || rank >= worldSize) {
    throw new RangeError(
      `shardedTensorMetadata: rank ${rank} is not a rank of world size ${worldSize}`,
    );
  }
  if (globalShape.length === 0) {
    return { globalShape: [], offsets: [], shape: [] };
  }
  const d0 = globalShape[0];
  const chunk = Math.ceil(d0 / worldSize);
  const from = Math.min(rank * chunk, d0);
  const rows = Math.min(chunk, d0 - from);
  return {
    globalShape: [...globalShape],
    offsets: [from, ...globalShape.slice(1).map(() => 0)],
    shape: [rows, ...globalShape.slice(1)],
  };
}
