import type { MatmulLayout } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";

/**
 * Copies the logical [rows, cols] matrix at `offset` (stored transposed when
 * `stored` is "cols-major") into panels of 4 rows: panel b holds rows
 * 4b..4b+3 as [cols][4]. The kernel then reads 4 contiguous values of A and
 * of B per step, whatever the operands' transposes were.
 */
function pack(
  src: TypedArray,
  offset: number,
  rows: number,
  cols: number,
  transposed: boolean,
  into: Float64Array,
): void {
  const panels = Math.ceil(rows / 4);
  into.fill(0, 0, panels * cols * 4);
  for (let row = 0; row < rows; row++) {
    const base = (row >> 2) * cols * 4 + (row & 3);
    if (transposed) {
      for (let c = 0, at = offset + row; c < cols; c++, at += rows) into[base + c * 4] = src[at];
    } else {
      const start = offset + row * cols;
      for (let c = 0; c < cols; c++) into[base + c * 4] = src[start + c];
    }
  }
}

/**
 * Batched matmul with 4x4 register blocking over packed panels: each step of
 * the inner loop loads 8 numbers and does 16 multiply-adds, accumulating in
 * float64 (so the reference is more exact than float32 kernels).
 */
export function matmul(
  a: TypedArray,
  b: TypedArray,
  out: TypedArray,
  layout: MatmulLayout,
): void {
  const { batch, m, n, k, aBatchStride, bBatchStride, transA, transB } = layout;
  const mPanels = Math.ceil(m / 4);
  const nPanels = Math.ceil(n / 4);
  const ap = new Float64Array(mPanels * k * 4);
  const bp = new Float64Array(nPanels * k * 4);
  for (let bt = 0; bt < batch; bt++) {
    // A is [m, k] (stored [k, m] when transA); Bᵀ is [n, k] (B stored [k, n] unless transB).
    if (bt === 0 || aBatchStride !== 0) pack(a, bt * aBatchStride, m, k, transA, ap);
    if (bt === 0 || bBatchStride !== 0) pack(b, bt * bBatchStride, n, k, !transB, bp);
    const oo = bt * m * n;
    for (let ib = 0; ib < mPanels; ib++) {
      const ao = ib * k * 4;
      const i0 = ib * 4;
      for (let jb = 0; jb < nPanels; jb++) {
        const bo = jb * k * 4;
        let c00 = 0, c01 = 0, c02 = 0, c03 = 0, c10 = 0, c11 = 0, c12 = 0, c13 = 0;
        let c20 = 0, c21 = 0, c22 = 0, c23 = 0, c30 = 0, c31 = 0, c32 = 0, c33 = 0;
        for (let p = 0, x = ao, y = bo; p < k; p++, x += 4, y += 4) {
          const a0 = ap[x], a1 = ap[x + 1], a2 = ap[x + 2], a3 = ap[x + 3];
          const b0 = bp[y], b1 = bp[y + 1], b2 = bp[y + 2], b3 = bp[y + 3];
          c00 += a0 * b0;
          c01 += a0 * b1;
          c02 += a0 * b2;
          c03 += a0 * b3;
          c10 += a1 * b0;
          c11 += a1 * b1;
          c12 += a1 * b2;
          c13 += a1 * b3;
          c20 += a2 * b0;
          c21 += a2 * b1;
          c22 += a2 * b2;
          c23 += a2 * b3;
          c30 += a3 * b0;
          c31 += a3 * b1;
          c32 += a3 * b2;
          c33 += a3 * b3;
        }
        const j0 = jb * 4;
        if (i0 + 4 <= m && j0 + 4 <= n) {
          let at = oo + i0 * n + j0;
          out[at] = c00, out[at + 1] = c01, out[at + 2] = c02, out[at + 3] = c03;
          at += n;
          out[at] = c10, out[at + 1] = c11, out[at + 2] = c12, out[at + 3] = c13;
          at += n;
          out[at] = c20, out[at + 1] = c21, out[at + 2] = c22, out[at + 3] = c23;
          at += n;
          out[at] = c30, out[at + 1] = c31, out[at + 2] = c32, out[at + 3] = c33;
          continue;
        }
        // An edge tile: write only the rows and columns inside the matrix.
        const tile = [
          c00,
          c01,
          c02,
          c03,
          c10,
          c11,
          c12,
          c13,
          c20,
          c21,
          c22,
          c23,
          c30,
          c31,
          c32,
          c33,
        ];
        const rows = Math.min(4, m - i0);
        const cols = Math.min(4, n - j0);
        for (let r = 0; r < rows; r++) {
          const at = oo + (i0 + r) * n + j0;
          for (let c = 0; c < cols; c++) out[at + c] = tile[r * 4 + c];
        }
      }
    }
  }
}
