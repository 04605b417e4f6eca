/**
 * `scatterAdd`: the adjoint of `gather` (its backward).
 * @module
 */

import type { ScatterAddArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";
import { residentLoops } from "../wasm/elementwise.ts";

/**
 * `out[o, r, i] = Σ src[o, j, i]` over the j with `index[o, j, i] = r`, 0
 * where none; out-of-range indices are skipped.
 */
export function scatterAdd(
  { x: src, index, out, outer, size, count, inner }: ScatterAddArgs<TypedArray>,
): void {
  // In the kernel's memory, float32 rows (a max pool's gradient) run in
  // WebAssembly: the same adds in the same order.
  const loops = inner === 1 && src instanceof Float32Array ? residentLoops(src, index, out) : null;
  if (loops !== null) {
    loops.scatter_add_rows(src.byteOffset, index.byteOffset, out.byteOffset, outer, size, count);
    return;
  }
  out.fill(0, 0, outer * size * inner);
  for (let o = 0; o < outer; o++) {
    const base = o * size * inner;
    for (let j = 0; j < count; j++) {
      const at = (o * count + j) * inner;
      for (let i = 0; i < inner; i++) {
        const r = index[at + i];
        if (!(r >= 0 && r < size)) continue;
        const k = base + r * inner + i;
        out[k] += src[at + i]; // int32 stores wrap, as on the GPU
      }
    }
  }
}
