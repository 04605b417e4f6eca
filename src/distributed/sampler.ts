/**
 * `DistributedSampler` (as `torch.utils.data.distributed.DistributedSampler`):
 * gives each rank of the process group its own share of a dataset. It lives
 * with the process groups it reads; users reach it as `data.DistributedSampler`.
 * @module
 */

import { Sampler } from "../data/sampler.ts";
import { currentGroup } from "./state.ts";
import { torchRandperm } from "./torch_randperm.ts";

/** Options of {@link DistributedSampler}. */
export interface DistributedSamplerOptions {
  /** Number of ranks sharing the dataset (default: the process group's world size). */
  numReplicas?: number;
  /** This rank (default: the process group's rank). */
  rank?: number;
  /** A new order every epoch (default true). */
  shuffle?: boolean;
  /**
   * Seed of the order; it must be the same on every rank (default 0). As
   * PyTorch's generator, only its low 32 bits (of `seed + epoch`) count; a
   * seed beyond 2^53, which JS cannot hold exactly, is an error: pass
   * PyTorch's seed mod 2^32 instead.
   */
  seed?: number;
  /** Cut the tail instead of padding it, so every rank gets the same count (default false). */
  dropLast?: boolean;
}

/**
 * Restricts loading to this rank's share of a dataset, as
 * `torch.utils.data.DistributedSampler`: the (shuffled) index list is padded
 * by repeating its start until it divides evenly among the ranks (or its
 * tail is cut with `dropLast`), and rank r takes every numReplicas-th index
 * starting at r. The shuffle is PyTorch's (`torch.randperm` with a generator
 * seeded `seed + epoch`), so each rank gets exactly the indices PyTorch's
 * sampler gives it. The order depends on `seed` and the epoch only, so the
 * ranks' shares never overlap except for the padding; call
 * {@link setEpoch} before each epoch for a new order.
 *
 * @example
 * ```ts
 * // 10 items, 3 replicas, no shuffle: [0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]
 * const sampler = new data.DistributedSampler(dataset, { numReplicas: 3, rank: 1, shuffle: false });
 * const loader = new data.DataLoader(dataset, { sampler, batchSize: 32 });
 * ```
 */
export class DistributedSampler extends Sampler {
  /** Number of ranks. */
  readonly numReplicas: number;
  /** This rank. */
  readonly rank: number;
  /** Whether the order is shuffled. */
  readonly shuffle: boolean;
  /** Seed of the shuffle. */
  readonly seed: number;
  /** Whether the tail is cut instead of padded. */
  readonly dropLast: boolean;
  readonly #dataset: { readonly length: number };
  #epoch = 0;

  /** A sampler over `dataset` (anything with a `length`). */
  constructor(dataset: { readonly length: number }, options: DistributedSamplerOptions = {}) {
    super();
    const n = dataset?.length;
    if (!Number.isInteger(n) || n < 0) {
      throw new TypeError(
        `DistributedSampler: the dataset must have a non-negative integer length, got ${n}`,
      );
    }
    const group = currentGroup();
    const numReplicas = options.numReplicas ?? group?.worldSize;
    const rank = options.rank ?? group?.rank;
    if (numReplicas === undefined || rank === undefined) {
      throw new Error(
        "DistributedSampler: numReplicas and rank default to the process group's, and this thread has none: call distributed.initProcessGroup() first, or pass { numReplicas, rank }",
      );
    }
    if (!Number.isInteger(numReplicas) || numReplicas < 1) {
      throw new RangeError(
        `DistributedSampler: numReplicas must be an integer >= 1, got ${numReplicas}`,
      );
    }
    if (!Number.isInteger(rank) || rank < 0 || rank >= numReplicas) {
      throw new RangeError(
        `DistributedSampler: rank must be an integer in [0, ${numReplicas}), got ${rank}`,
      );
    }
    const seed = options.seed ?? 0;
    if (!Number.isSafeInteger(seed)) {
      // 2 ** 63 - 1 rounds to 2 ** 63 here, whose low 32 bits (PyTorch's seed) differ.
      throw new RangeError(
        `DistributedSampler: seed must be a safe integer (|seed| < 2^53; PyTorch's generator keeps seed mod 2^32, so pass that), got ${seed}`,
      );
    }
    this.#dataset = dataset;
    this.numReplicas = numReplicas;
    this.rank = rank;
    this.shuffle = options.shuffle ?? true;
    this.seed = seed;
    this.dropLast = options.dropLast ?? false;
  }

  /** The epoch whose order the next iteration gives. */
  get epoch(): number {
    return this.#epoch;
  }

  /** Sets the epoch: with `shuffle`, each epoch has its own order (the same on every rank). */
  setEpoch(epoch: number): void {
    if (!Number.isSafeInteger(epoch) || epoch < 0) {
      throw new RangeError(
        `DistributedSampler.setEpoch: expected an integer >= 0 (a safe integer, below 2^53), got ${epoch}`,
      );
    }
    this.#epoch = epoch;
  }

  /** Indices this rank gets per epoch. */
  get length(): number {
    const n = this.#dataset.length;
    const r = this.numReplicas;
    // Fewer items than replicas with dropLast: 0 (Math.ceil would give -0).
    return this.dropLast && n % r !== 0 ? Math.max(0, Math.ceil((n - r) / r)) : Math.ceil(n / r);
  }

  /** This rank's indices of the current epoch. */
  *[Symbol.iterator](): Iterator<number> {
    const n = this.#dataset.length;
    const seed = this.seed + this.#epoch;
    if (this.shuffle && !Number.isSafeInteger(seed)) {
      throw new RangeError(
        `DistributedSampler: seed + epoch (${this.seed} + ${this.#epoch}) is beyond 2^53, where JS rounds it to another order; use a smaller seed`,
      );
    }
    // PyTorch's own permutation, so a rank gets the indices PyTorch's sampler gives it.
    const order = this.shuffle ? torchRandperm(n, seed) : null;
    const total = this.length * this.numReplicas;
    // Padding repeats the list from its start (several times when it is short): index i % n.
    for (let i = this.rank; i < total; i += this.numReplicas) {
      yield order ? order[i % n] : i % n;
    }
  }
}
