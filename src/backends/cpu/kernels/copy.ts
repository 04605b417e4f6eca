import type { AxisLayout, CopyLayout } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";
import { numelOf } from "../../../shape.ts";

/** The strided copy of the backend contract. */
export function copy(
  src: TypedArray,
  dst: TypedArray,
  layout: CopyLayout,
): void {
  const { shape, srcStrides, dstStrides } = layout;
  const nd = shape.length;
  const numel = numelOf(shape);
  if (numel === 0) return;
  if (nd === 0) {
    dst[layout.dstOffset] = src[layout.srcOffset];
    return;
  }
  const last = shape[nd - 1];
  const ss = srcStrides[nd - 1];
  const ds = dstStrides[nd - 1];
  const index = new Array<number>(nd).fill(0);
  let si = layout.srcOffset;
  let di = layout.dstOffset;
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

/** `out[o, j, i] = x[o, indices[j], i]`; out-of-range indices give 0. */
export function indexSelect(
  x: TypedArray,
  indices: TypedArray,
  out: TypedArray,
  { outer, size, inner, count }: AxisLayout & { readonly count: number },
): void {
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
