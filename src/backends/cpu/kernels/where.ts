/**
 * `where`: the ternary select with broadcasting.
 * @module
 */

import type { WhereArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";
import { numelOf } from "../../../shape.ts";

/** `out[i] = cond[i] != 0 ? a[i] : b[i]` over the broadcast index space. */
export function where(
  { cond, a, b, out, shape, condStrides: cs, aStrides: as, bStrides: bs }: WhereArgs<TypedArray>,
): void {
  const numel = numelOf(shape);
  if (numel === 0) return;
  const nd = shape.length;
  if (nd === 0) {
    // `!== 0` is false for ±0 only, so NaN selects `a` as in PyTorch.
    out[0] = cond[0] !== 0 ? a[0] : b[0];
    return;
  }
  // Odometer over all but the last dim, the last dim in an inner loop.
  const last = shape[nd - 1];
  const [sc, sa, sb] = [cs[nd - 1], as[nd - 1], bs[nd - 1]];
  const index = new Array<number>(nd).fill(0);
  let ci = 0;
  let ai = 0;
  let bi = 0;
  for (let o = 0; o < numel; o += last) {
    for (let j = 0; j < last; j++) {
      out[o + j] = cond[ci + j * sc] !== 0 ? a[ai + j * sa] : b[bi + j * sb];
    }
    for (let d = nd - 2; d >= 0; d--) {
      index[d]++;
      ci += cs[d];
      ai += as[d];
      bi += bs[d];
      if (index[d] < shape[d]) break;
      ci -= cs[d] * shape[d];
      ai -= as[d] * shape[d];
      bi -= bs[d] * shape[d];
      index[d] = 0;
    }
  }
}
