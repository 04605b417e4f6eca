/**
 * `copy`: the strided copy of the backend contract.
 * @module
 */

import type { CopyArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";
import { numelOf } from "../../../shape.ts";

/** Runs shorter than this copy element by element: a subarray per run costs more. */
const SET_MIN = 64;

/**
 * Merges each dim into the next where both sides step through them as one
 * (stride of the outer = size · stride of the inner), dropping size-1 dims:
 * a permuted view's copy then walks runs as long as the layouts allow (a
 * contiguous [4, 16, 16, 16, 16] is one run, not 16k runs of 16).
 */
function coalesce(
  shape: readonly number[],
  xs: readonly number[],
  os: readonly number[],
): [number[], number[], number[]] {
  const s: number[] = [];
  const a: number[] = [];
  const b: number[] = [];
  for (let d = 0; d < shape.length; d++) {
    if (shape[d] === 1) continue;
    const k = s.length - 1;
    if (k >= 0 && a[k] === shape[d] * xs[d] && b[k] === shape[d] * os[d]) {
      s[k] *= shape[d];
      a[k] = xs[d];
      b[k] = os[d];
    } else {
      s.push(shape[d]);
      a.push(xs[d]);
      b.push(os[d]);
    }
  }
  return [s, a, b];
}

/** The strided copy of the backend contract. */
export function copy(
  { x: src, out: dst, shape: fullShape, xStrides, xOffset, outStrides, outOffset }: CopyArgs<
    TypedArray
  >,
): void {
  const numel = numelOf(fullShape);
  if (numel === 0) return;
  const [shape, srcStrides, dstStrides] = coalesce(fullShape, xStrides, outStrides);
  const nd = shape.length;
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
    if (ss === 1 && ds === 1) {
      if (last >= SET_MIN) dst.set(src.subarray(si, si + last), di);
      else for (let j = 0; j < last; j++) dst[di + j] = src[si + j];
    } else for (let j = 0; j < last; j++) dst[di + j * ds] = src[si + j * ss];
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
