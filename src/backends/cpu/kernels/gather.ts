/**
 * `gather`: picks one element along the axis per index entry.
 * @module
 */

import type { GatherArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";

/** `out[o, j, i] = x[o, index[o, j, i], i]`; an out-of-range index gives 0. */
export function gather(
  { x, index, out, outer, size, count, inner }: GatherArgs<TypedArray>,
): void {
  for (let o = 0; o < outer; o++) {
    const base = o * size * inner;
    for (let j = 0; j < count; j++) {
      const at = (o * count + j) * inner;
      for (let i = 0; i < inner; i++) {
        const r = index[at + i];
        out[at + i] = r >= 0 && r < size ? x[base + r * inner + i] : 0;
      }
    }
  }
}
