/**
 * Samplers: iterables of dataset indices that decide which samples a
 * `DataLoader` visits and in what order (`torch.utils.data.Sampler`). The
 * distributed one is in `../distributed/sampler.ts`.
 * @module
 */

/**
 * A sampler: an iterable of dataset indices with a `length`, as
 * `torch.utils.data.Sampler`. Pass one as `DataLoader(ds, { sampler })`.
 */
export abstract class Sampler implements Iterable<number> {
  /** Number of indices one iteration gives. */
  abstract get length(): number;
  /** The indices of one epoch. */
  abstract [Symbol.iterator](): Iterator<number>;
}
