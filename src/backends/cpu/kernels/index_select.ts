/**
 * `indexSelect`: rows of the middle axis picked by int32 indices.
 * @module
 */

import type { IndexSelectArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";

/** `out[o, j, i] = x[o, indices[j], i]`; out-of-range indices give 0. */
export function indexSelect(
  { x, indices, out, outer, size, inner, count }: IndexSelectArgs<TypedArray>,
): void {
  if (inner === 1) {
    // Picking single elements (the last axis): a subarray per element cost 10x the copy.
    for (let o = 0; o < outer; o++) {
      const base = o * size;
      const to = o * count;
      for (let j = 0; j < count; j++) {
        const r = indices[j];
        out[to + j] = r >= 0 && r < size ? x[base + r] : 0;
      }
    }
    return;
  }
  for (let o = 0; o < outer; o++) {
    for (let j = 0; j < count; j++) {
      const r = indices[j];
      const to = (o * count + j) * inner;
      if (r < 0 || r >= size) {
        out.fill(0, to, to + inner);
        continue;
      }
      const from = (o * size + r) * inner;
      out.set(x.subarray(from, from + inner), to);
    }
  }
}
