/**
 * Freed host arrays kept by dtype and exact length, for the next allocation
 * of that size: the allocate/free churn of a training loop then reuses
 * memory instead of zero-filling new arrays and leaving old ones to the
 * garbage collector. (The webgpu backend's pool does the same for buffers.)
 * @module
 */

import type { DType, TypedArray } from "../../dtype.ts";
import { dtypeOfArray } from "../../dtype.ts";

/**
 * A bounded pool of typed arrays by dtype and length. When a new array does
 * not fit, the arrays freed longest ago make room for it: a program's
 * sizes change (another model, another batch size), and a pool that kept
 * its first sizes and refused the rest would leave the current loop
 * allocating fresh arrays every step.
 */
export class HostPool {
  readonly #free: Record<DType, Map<number, TypedArray[]>> = {
    float32: new Map(),
    int32: new Map(),
    float64: new Map(),
  };
  /** Every pooled array, oldest first (a Set keeps insertion order). */
  readonly #order = new Set<TypedArray>();
  #bytes = 0;

  /**
   * Keeps at most `maxBytes` of free arrays; `evicted` gets each array the
   * pool lets go of to make room (to give it back to where it came from).
   */
  constructor(
    readonly maxBytes: number,
    readonly evicted: (array: TypedArray) => void = () => {},
  ) {}

  /** Bytes of arrays held for reuse. */
  get bytes(): number {
    return this.#bytes;
  }

  /** A free array of exactly `length` elements of `dtype` (old contents), or undefined. */
  take(dtype: DType, length: number): TypedArray | undefined {
    const array = this.#free[dtype].get(length)?.pop();
    if (array !== undefined) {
      this.#bytes -= array.byteLength;
      this.#order.delete(array);
    }
    return array;
  }

  /**
   * Keeps `array` for reuse (true), evicting the oldest arrays if needed;
   * false for an empty array or one larger than the whole pool.
   */
  give(array: TypedArray): boolean {
    if (array.length === 0 || array.byteLength > this.maxBytes) return false;
    for (const old of this.#order) {
      if (this.#bytes + array.byteLength <= this.maxBytes) break;
      const list = this.#free[dtypeOfArray(old)].get(old.length)!;
      list.splice(list.indexOf(old), 1);
      this.#order.delete(old);
      this.#bytes -= old.byteLength;
      this.evicted(old);
    }
    const lists = this.#free[dtypeOfArray(array)];
    let list = lists.get(array.length);
    if (list === undefined) {
      list = [];
      lists.set(array.length, list);
    }
    list.push(array);
    this.#order.add(array);
    this.#bytes += array.byteLength;
    return true;
  }
}
