/**
 * `copy`: the strided copy of the backend contract.
 * @module
 */

import type { CopyArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";
import { numelOf } from "../../../shape.ts";

/** The strided copy of the backend contract. */
export function copy(
  { x: src, out: dst, shape, xStrides: srcStrides, xOffset, outStrides: dstStrides, outOffset }:
    CopyArgs<TypedArray>,
): void {
  const nd = shape.length;
  const numel = numelOf(shape);
  if (numel === 0) return;
  if (nd === 0) {
    dst[outOffset] = src[xOffset];
    return;
  }
  const last = shape[nd - 1];
  const ss = srcStrides[nd - 1];
  const ds = dstStrides[nd - 1];
  const index = new Array<number>(nd).fill(0);
  let si = xOffset;
  let di = outOffset;
  for (let done = 0; done < numel; done += last) {
    if (ss === 1 && ds === 1) dst.set(src.subarray(si, si + last), di);
    else for (let j = 0; j < last; j++) dst[di + j * ds] = src[si + j * ss];
    for (let d = nd - 2; d >= 0; d--) {
      index[d]++;
      si += srcStrides[d];
      di += dstStrides[d];
      if (index[d] < shape[d]) break;
      si -= srcStrides[d] * shape[d];
      di -= dstStrides[d] * shape[d];
      index[d] = 0;
    }
  }
}
