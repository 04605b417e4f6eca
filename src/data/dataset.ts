/**
 * Datasets, as `torch.utils.data.Dataset` and `TensorDataset`.
 * @module
 */

import { formatShape } from "../shape.ts";
import { Tensor } from "../tensor.ts";

/**
 * A map-style dataset: `length` samples, read by index with `get(i)`, as
 * `torch.utils.data.Dataset` (`__len__`, `__getitem__`).
 */
export abstract class Dataset<T = unknown> {
  /** Number of samples. */
  abstract get length(): number;

  /** Sample `index` (0 <= index < length). */
  abstract get(index: number): T;

  /** The samples in order. */
  *[Symbol.iterator](): IterableIterator<T> {
    const n = this.length;
    for (let i = 0; i < n; i++) yield this.get(i);
  }
}

/**
 * Rows of tensors that share their first dim, as
 * `torch.utils.data.TensorDataset`: `get(i)` gives `[a[i], b[i], ...]`.
 * `DataLoader` batches it with one gather per tensor per batch.
 */
export class TensorDataset extends Dataset<Tensor[]> {
  /** The tensors, each with `length` rows. */
  readonly tensors: readonly Tensor[];

  /** A dataset over the rows of `tensors` (at least one; equal first dims). */
  constructor(...tensors: Tensor[]) {
    super();
    if (tensors.length === 0) throw new TypeError("TensorDataset: needs at least one tensor");
    tensors.forEach((t, i) => {
      if (!(t instanceof Tensor)) {
        throw new TypeError(`TensorDataset: argument ${i} is not a Tensor (got ${typeof t})`);
      }
      if (t.ndim === 0) {
        throw new RangeError(
          `TensorDataset: tensor ${i} is 0-dimensional; it needs a first dim of rows`,
        );
      }
    });
    const n = tensors[0].shape[0];
    const bad = tensors.findIndex((t) => t.shape[0] !== n);
    if (bad >= 0) {
      throw new RangeError(
        `TensorDataset: size mismatch between tensors: tensor 0 has shape ${
          formatShape(tensors[0].shape)
        } but tensor ${bad} has shape ${
          formatShape(tensors[bad].shape)
        } (first dims must be equal)`,
      );
    }
    this.tensors = Object.freeze([...tensors]);
  }

  /** Number of rows. */
  get length(): number {
    return this.tensors[0].shape[0];
  }

  /** Row `index` of every tensor (negative counts from the end). */
  get(index: number): Tensor[] {
    const n = this.length;
    const i = index < 0 ? index + n : index;
    if (!Number.isInteger(i) || i < 0 || i >= n) {
      throw new RangeError(`TensorDataset.get: index ${index} is out of range for ${n} rows`);
    }
    return this.tensors.map((t) => t.narrow(0, i, 1).reshape(t.shape.slice(1)));
  }
}
