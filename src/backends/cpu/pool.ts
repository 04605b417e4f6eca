/**
 * Freed host arrays kept by dtype and exact length, for the next allocation
 * of that size: the allocate/free churn of a training loop then reuses
 * memory instead of zero-filling new arrays and leaving old ones to the
 * garbage collector. (The webgpu backend's pool does the same for buffers.)
 * @module
 */

import type { DType, TypedArray } from "../../dtype.ts";
import { dtypeOfArray } from "../../dtype.ts";

/** A bounded pool of typed arrays by dtype and length. */
export class HostPool {
  readonly #free: Record<DType, Map<number, TypedArray[]>> = {
    float32: new Map(),
    int32: new Map(),
    float64: new Map(),
  };
  #bytes = 0;

  /** Keeps at most `maxBytes` of free arrays; beyond it freed arrays are dropped. */
  constructor(readonly maxBytes: number) {}

  /** Bytes of arrays held for reuse. */
  get bytes(): number {
    return this.#bytes;
  }

  /** A free array of exactly `length` elements of `dtype` (old contents), or undefined. */
  take(dtype: DType, length: number): TypedArray | undefined {
    const array = this.#free[dtype].get(length)?.pop();
    if (array !== undefined) this.#bytes -= array.byteLength;
    return array;
  }

  /** Keeps `array` for reuse (true), unless the pool is full or the array is empty (false). */
  give(array: TypedArray): boolean {
    if (array.length === 0 || this.#bytes + array.byteLength > this.maxBytes) return false;
    const lists = this.#free[dtypeOfArray(array)];
    let list = lists.get(array.length);
    if (list === undefined) {
      list = [];
      lists.set(array.length, list);
    }
    list.push(array);
    this.#bytes += array.byteLength;
    return true;
  }
}
