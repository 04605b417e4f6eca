/**
 * Host arrays that collectives reuse, by dtype and length. A DDP step moves
 * the same buckets every time, and a fresh multi-megabyte array costs its
 * page faults on first touch: over the `"tcp"` group, a 2.7 MB gradient
 * all-reduce through a new array each step took 10-25 ms instead of 3-5
 * (copying into fresh pages, which glibc sometimes reuses and sometimes
 * maps anew, so steps switched between the two speeds). Internal to the
 * distributed layer.
 * @module
 */

import { allocHost, type DType, dtypeOfArray, type TypedArray } from "../dtype.ts";

const pools = new Map<string, TypedArray[]>();
const lent = new WeakSet<TypedArray>();
const POOL_DEPTH = 4;

const poolKey = (dtype: DType, n: number) => `${dtype}:${n}`;

/** A host array of `n` elements of `dtype` (contents undefined), from the pool when one is free. */
export function borrowHost(dtype: DType, n: number): TypedArray {
  const reused = pools.get(poolKey(dtype, n))?.pop();
  const out = reused ?? allocHost(dtype, n);
  lent.add(out);
  return out;
}

/** Returns an array from {@link borrowHost} to the pool (others are ignored). */
export function giveBackHost(array: TypedArray): void {
  if (!lent.has(array)) return;
  lent.delete(array);
  const key = poolKey(dtypeOfArray(array), array.length);
  const list = pools.get(key) ?? [];
  if (list.length < POOL_DEPTH) list.push(array);
  pools.set(key, list);
}
