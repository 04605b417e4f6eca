import type { MatmulLayout } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";

/**
 * Batched matmul. Loops are ordered so the innermost one walks memory
 * contiguously for each transpose case (i-p-j for plain and transA, dot
 * products for transB), and rows accumulate in a float64 scratch.
 */
export function matmul(
  a: TypedArray,
  b: TypedArray,
  out: TypedArray,
  layout: MatmulLayout,
): void {
  const { batch, m, n, k, aBatchStride, bBatchStride, transA, transB } = layout;
  const row = new Float64Array(n);
  for (let bt = 0; bt < batch; bt++) {
    const ao = bt * aBatchStride;
    const bo = bt * bBatchStride;
    const oo = bt * m * n;
    for (let i = 0; i < m; i++) {
      if (transB) {
        for (let j = 0; j < n; j++) {
          let acc = 0;
          const bRow = bo + j * k;
          if (transA) {
            for (let p = 0; p < k; p++) acc += a[ao + p * m + i] * b[bRow + p];
          } else {
            const aRow = ao + i * k;
            for (let p = 0; p < k; p++) acc += a[aRow + p] * b[bRow + p];
          }
          out[oo + i * n + j] = acc;
        }
        continue;
      }
      row.fill(0);
      for (let p = 0; p < k; p++) {
        const av = transA ? a[ao + p * m + i] : a[ao + i * k + p];
        if (av === 0) continue;
        const bRow = bo + p * n;
        for (let j = 0; j < n; j++) row[j] += av * b[bRow + j];
      }
      const orow = oo + i * n;
      for (let j = 0; j < n; j++) out[orow + j] = row[j];
    }
  }
}
