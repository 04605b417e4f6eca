/**
 * `reduce`: sum, max, min, argmax, argmin over the middle axis.
 * @module
 */

import type { ReduceArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";
import { residentLoops } from "../wasm/elementwise.ts";
import { kernelFloats, releaseKernelFloats } from "./matmul.ts";

/**
 * Column sums (`inner` > 1) row by row into float64 accumulators: the reads
 * run along memory instead of striding by `inner` (a bias gradient sums a
 * [256, 512] tensor over its rows).
 */
function sumColumns(x: TypedArray, out: TypedArray, outer: number, size: number, inner: number) {
  if (x instanceof Float32Array && sumColumnsInWasm(x, out, outer, size, inner)) return;
  const acc = new Float64Array(inner);
  for (let o = 0; o < outer; o++) {
    acc.fill(0);
    for (let r = 0, at = o * size * inner; r < size; r++, at += inner) {
      for (let i = 0; i < inner; i++) acc[i] += x[at + i];
    }
    out.set(acc, o * inner);
  }
}

/**
 * {@link sumColumns} in WebAssembly (the same sums) when `x` lives in the
 * kernel's memory; a small host `out` (a bias gradient) is written through
 * a region of that memory. False where not done.
 */
function sumColumnsInWasm(
  x: Float32Array,
  out: TypedArray,
  outer: number,
  size: number,
  inner: number,
): boolean {
  const loops = residentLoops(x);
  if (loops === null) return false;
  const numel = outer * inner;
  const direct = out instanceof Float32Array && residentLoops(x, out) !== null;
  const into = direct ? out : kernelFloats(numel);
  if (into === undefined) return false;
  if (!direct && residentLoops(x, into) === null) {
    releaseKernelFloats(into);
    return false;
  }
  loops.sum_columns(x.byteOffset, into.byteOffset, outer, size, inner);
  if (!direct) {
    out.set(into.subarray(0, numel));
    releaseKernelFloats(into);
  }
  return true;
}

/** `out[o, i] = op over r of x[o, r, i]`, accumulating sums in float64. */
export function reduce({ op, x, out, outer, size, inner }: ReduceArgs<TypedArray>): void {
  if (op === "sum" && inner > 1) {
    sumColumns(x, out, outer, size, inner);
    return;
  }
  for (let o = 0; o < outer; o++) {
    const base = o * size * inner;
    for (let i = 0; i < inner; i++) {
      let at = base + i;
      if (op === "sum") {
        let acc = 0;
        for (let r = 0; r < size; r++, at += inner) acc += x[at];
        out[o * inner + i] = acc;
        continue;
      }
      let best = x[at];
      let bestIndex = 0;
      const wantMax = op === "max" || op === "argmax";
      for (let r = 1; r < size; r++) {
        at += inner;
        const v = x[at];
        // NaN wins, as in PyTorch; the first extreme index is kept on ties.
        if (Number.isNaN(best)) break;
        if (Number.isNaN(v) || (wantMax ? v > best : v < best)) {
          best = v;
          bestIndex = r;
        }
      }
      out[o * inner + i] = op === "argmax" || op === "argmin" ? bestIndex : best;
    }
  }
}
