/**
 * `where`: the ternary select with broadcasting.
 * @module
 */

import type { WhereArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";
import { numelOf } from "../../../shape.ts";

/** The 32-bit words of a typed array's elements (two per float64). */
function words(t: TypedArray): Int32Array {
  return t instanceof Int32Array
    ? t
    : new Int32Array(t.buffer, t.byteOffset, t.byteLength / Int32Array.BYTES_PER_ELEMENT);
}

/**
 * `out[i] = cond[i] != 0 ? a[i] : b[i]` over the broadcast index space.
 * The choice is made on the bits, without a branch: `(a & m) | (b & ~m)`
 * with `m` all ones or all zeros. A branch on a random mask (a ReLU's
 * gradient) mispredicts half the time and took twice a product's time;
 * bits also carry NaN payloads and -0 through unchanged.
 */
export function where(
  { cond, a, b, out, shape, condStrides: cs, aStrides: as, bStrides: bs, dtype }: WhereArgs<
    TypedArray
  >,
): void {
  const numel = numelOf(shape);
  if (numel === 0) return;
  const nd = shape.length;
  if (nd === 0) {
    // `!== 0` is false for ±0 only, so NaN selects `a` as in PyTorch.
    out[0] = cond[0] !== 0 ? a[0] : b[0];
    return;
  }
  const [aw, bw, ow] = [words(a), words(b), words(out)];
  // Words per element: float64 moves two.
  const w = dtype === "float64" ? 2 : 1;
  // Odometer over all but the last dim, the last dim in an inner loop.
  const last = shape[nd - 1];
  const [sc, sa, sb] = [cs[nd - 1], as[nd - 1] * w, bs[nd - 1] * w];
  const index = new Array<number>(nd).fill(0);
  let ci = 0;
  let ai = 0;
  let bi = 0;
  for (let o = 0; o < numel; o += last) {
    if (w === 1) {
      for (let j = 0, c = ci, x = ai, y = bi; j < last; j++, c += sc, x += sa, y += sb) {
        const m = -(+(cond[c] !== 0));
        ow[o + j] = (aw[x] & m) | (bw[y] & ~m);
      }
    } else {
      for (let j = 0, c = ci, x = ai, y = bi; j < last; j++, c += sc, x += sa, y += sb) {
        const m = -(+(cond[c] !== 0));
        const k = 2 * (o + j);
        ow[k] = (aw[x] & m) | (bw[y] & ~m);
        ow[k + 1] = (aw[x + 1] & m) | (bw[y + 1] & ~m);
      }
    }
    for (let d = nd - 2; d >= 0; d--) {
      index[d]++;
      ci += cs[d];
      ai += as[d] * w;
      bi += bs[d] * w;
      if (index[d] < shape[d]) break;
      ci -= cs[d] * shape[d];
      ai -= as[d] * shape[d] * w;
      bi -= bs[d] * shape[d] * w;
      index[d] = 0;
    }
  }
}
