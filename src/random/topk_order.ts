/**
 * The order PyTorch 1.13's cpu `topk` (largest, sorted) gives, ties
 * included: its `topk_impl_loop` runs libstdc++'s `std::partial_sort`
 * (when `k * 64 <= n`) or `std::nth_element` and then `std::sort` of the
 * first `k - 1`, and those algorithms (introselect, introsort, heap
 * select) move equal keys in their own deterministic order. Ported step
 * for step from GCC's `bits/stl_algo.h` / `stl_heap.h`, so that
 * `multinomial`'s zero-weight categories (keys that tie at 0) come out in
 * PyTorch's order.
 * @module
 */

/** The indices of the `k` largest `keys` (NaN largest), in PyTorch's cpu topk order. */
export function topkOrder(keys: ArrayLike<number>, k: number): Int32Array {
  const n = keys.length;
  const q = new Int32Array(n);
  for (let i = 0; i < n; i++) q[i] = i;
  if (k === 0) return q.subarray(0, 0);
  // TopKImpl.h's comparator: NaN first, then greater.
  const comp = (a: number, b: number): boolean => {
    const x = keys[a];
    const y = keys[b];
    return (x !== x && y === y) || x > y;
  };
  const swap = (i: number, j: number) => {
    const t = q[i];
    q[i] = q[j];
    q[j] = t;
  };
  const lg = (len: number) => 31 - Math.clz32(len);

  // ---- stl_heap.h ----
  const pushHeap = (first: number, hole: number, top: number, value: number) => {
    let parent = Math.trunc((hole - 1) / 2);
    while (hole > top && comp(q[first + parent], value)) {
      q[first + hole] = q[first + parent];
      hole = parent;
      parent = Math.trunc((hole - 1) / 2);
    }
    q[first + hole] = value;
  };
  const adjustHeap = (first: number, hole: number, len: number, value: number) => {
    const top = hole;
    let child = hole;
    while (child < Math.trunc((len - 1) / 2)) {
      child = 2 * (child + 1);
      if (comp(q[first + child], q[first + child - 1])) child--;
      q[first + hole] = q[first + child];
      hole = child;
    }
    if ((len & 1) === 0 && child === Math.trunc((len - 2) / 2)) {
      child = 2 * (child + 1);
      q[first + hole] = q[first + child - 1];
      hole = child - 1;
    }
    pushHeap(first, hole, top, value);
  };
  const makeHeap = (first: number, last: number) => {
    const len = last - first;
    if (len < 2) return;
    for (let parent = Math.trunc((len - 2) / 2);; parent--) {
      adjustHeap(first, parent, len, q[first + parent]);
      if (parent === 0) return;
    }
  };
  const popHeap = (first: number, last: number, result: number) => {
    const value = q[result];
    q[result] = q[first];
    adjustHeap(first, 0, last - first, value);
  };
  const heapSelect = (first: number, middle: number, last: number) => {
    makeHeap(first, middle);
    for (let i = middle; i < last; i++) if (comp(q[i], q[first])) popHeap(first, middle, i);
  };
  const sortHeap = (first: number, last: number) => {
    while (last - first > 1) {
      last--;
      popHeap(first, last, last);
    }
  };
  const partialSort = (first: number, middle: number, last: number) => {
    heapSelect(first, middle, last);
    sortHeap(first, middle);
  };

  // ---- stl_algo.h ----
  const moveMedianToFirst = (result: number, a: number, b: number, c: number) => {
    if (comp(q[a], q[b])) {
      if (comp(q[b], q[c])) swap(result, b);
      else if (comp(q[a], q[c])) swap(result, c);
      else swap(result, a);
    } else if (comp(q[a], q[c])) swap(result, a);
    else if (comp(q[b], q[c])) swap(result, c);
    else swap(result, b);
  };
  const unguardedPartition = (first: number, last: number, pivot: number) => {
    for (;;) {
      while (comp(q[first], q[pivot])) first++;
      last--;
      while (comp(q[pivot], q[last])) last--;
      if (!(first < last)) return first;
      swap(first, last);
      first++;
    }
  };
  const partitionPivot = (first: number, last: number) => {
    const mid = first + Math.trunc((last - first) / 2);
    moveMedianToFirst(first, first + 1, mid, last - 1);
    return unguardedPartition(first + 1, last, first);
  };
  const unguardedLinearInsert = (last: number) => {
    const value = q[last];
    let next = last - 1;
    while (comp(value, q[next])) {
      q[last] = q[next];
      last = next;
      next--;
    }
    q[last] = value;
  };
  const insertionSort = (first: number, last: number) => {
    if (first === last) return;
    for (let i = first + 1; i < last; i++) {
      if (comp(q[i], q[first])) {
        const value = q[i];
        q.copyWithin(first + 1, first, i);
        q[first] = value;
      } else unguardedLinearInsert(i);
    }
  };
  const introsortLoop = (first: number, last: number, depth: number) => {
    while (last - first > 16) {
      if (depth === 0) {
        partialSort(first, last, last);
        return;
      }
      depth--;
      const cut = partitionPivot(first, last);
      introsortLoop(cut, last, depth);
      last = cut;
    }
  };
  const sort = (first: number, last: number) => {
    if (first === last) return;
    introsortLoop(first, last, lg(last - first) * 2);
    if (last - first > 16) {
      insertionSort(first, first + 16);
      for (let i = first + 16; i < last; i++) unguardedLinearInsert(i);
    } else insertionSort(first, last);
  };
  const nthElement = (first: number, nth: number, last: number) => {
    if (first === last || nth === last) return;
    let depth = lg(last - first) * 2;
    while (last - first > 3) {
      if (depth === 0) {
        heapSelect(first, nth + 1, last);
        swap(first, nth);
        return;
      }
      depth--;
      const cut = partitionPivot(first, last);
      if (cut <= nth) first = cut;
      else last = cut;
    }
    insertionSort(first, last);
  };

  if (k * 64 <= n) partialSort(0, k, n);
  else {
    nthElement(0, k - 1, n);
    sort(0, k - 1);
  }
  return q.subarray(0, k);
}
