/**
 * `segmentReduce`: embeddingBag's bags (sums, means, maxima and the rows
 * they came from, and the sums' adjoint) in one pass over the looked-up
 * rows.
 * @module
 */

import type { SegmentReduceArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";
import { type ElementwiseLoops, residentLoops } from "../wasm/elementwise.ts";

/**
 * `segment.wat`'s loops where every array is float32 (or int32) in the kernel's memory, with
 * the weights' address (0 when there are none); else null.
 */
function wasmLoops(
  { x, index, weights, out }: SegmentReduceArgs<TypedArray>,
): [ElementwiseLoops, number] | null {
  if (!(x instanceof Float32Array)) return null;
  const loops = weights === null
    ? residentLoops(x, index, out)
    : residentLoops(x, index, out, weights);
  return loops === null ? null : [loops, weights?.byteOffset ?? 0];
}

/** See {@link SegmentReduceArgs}. */
export function segmentReduce(args: SegmentReduceArgs<TypedArray>): void {
  if (args.mode === "max") segmentMax(args);
  else if (args.transpose) segmentScatter(args);
  else segmentSum(args);
}

/** Segment `s`'s positions [start, end), its bounds clamped into [0, count]. */
function span(bounds: TypedArray, count: number, s: number): [number, number] {
  const clamp = (b: number) => (b < 0 ? 0 : b > count ? count : b);
  return [clamp(bounds[s]), clamp(bounds[s + 1])];
}

/** Each position's row (times its weight) added into its segment's, then means divided. */
function segmentSum(args: SegmentReduceArgs<TypedArray>): void {
  const { x, index, bounds, weights, out, mode, rows, count, size, inner } = args;
  const wasm = wasmLoops(args);
  if (wasm !== null) {
    const [loops, at] = wasm;
    const weighted = weights === null ? 0 : 1;
    for (let s = 0; s < size; s++) {
      const [start, end] = span(bounds, count, s);
      const o = s * inner;
      const o4 = out.byteOffset + o * 4;
      const counted = loops.segment_sum(
        o4,
        x.byteOffset,
        index.byteOffset,
        at,
        weighted,
        start,
        end,
        rows,
        inner,
      );
      if (mode === "mean" && counted > 1) {
        for (let c = 0; c < inner; c++) out[o + c] /= counted;
      }
    }
    return;
  }
  // A product rounded as the composition's elementwise multiply stores it.
  const round = out instanceof Float32Array ? Math.fround : (v: number) => v;
  out.fill(0, 0, size * inner);
  for (let s = 0; s < size; s++) {
    const [start, end] = span(bounds, count, s);
    const o = s * inner;
    let counted = 0;
    for (let i = start; i < end; i++) {
      const r = index[i];
      if (!(r >= 0 && r < rows)) continue;
      counted++;
      const from = r * inner;
      if (weights === null) {
        for (let c = 0; c < inner; c++) out[o + c] += x[from + c];
      } else {
        const w = weights[i];
        for (let c = 0; c < inner; c++) out[o + c] += round(x[from + c] * w);
      }
    }
    if (mode === "mean" && counted > 1) {
      for (let c = 0; c < inner; c++) out[o + c] /= counted;
    }
  }
}

/** The adjoint of {@link segmentSum}: each segment's row, times its factor, added at its rows. */
function segmentScatter(args: SegmentReduceArgs<TypedArray>): void {
  const { x, index, bounds, weights, out, mode, rows, count, size, inner } = args;
  const round = out instanceof Float32Array ? Math.fround : (v: number) => v;
  const wasm = wasmLoops(args);
  out.fill(0, 0, rows * inner);
  for (let s = 0; s < size; s++) {
    const [start, end] = span(bounds, count, s);
    const o = s * inner;
    let counted = 1;
    if (mode === "mean") {
      counted = 0;
      for (let i = start; i < end; i++) if (index[i] >= 0 && index[i] < rows) counted++;
    }
    if (wasm !== null) {
      const [loops, at] = wasm;
      const g = x.byteOffset + o * 4;
      const [weighted, div] = weights === null ? [0, counted] : [1, 1];
      loops.segment_scatter(
        out.byteOffset,
        g,
        index.byteOffset,
        at,
        weighted,
        start,
        end,
        rows,
        inner,
        div,
      );
      continue;
    }
    for (let i = start; i < end; i++) {
      const r = index[i];
      if (!(r >= 0 && r < rows)) continue;
      const to = r * inner;
      if (weights !== null) {
        const w = weights[i];
        for (let c = 0; c < inner; c++) out[to + c] += round(x[o + c] * w);
      } else if (counted > 1) {
        for (let c = 0; c < inner; c++) out[to + c] += round(x[o + c] / counted);
      } else {
        for (let c = 0; c < inner; c++) out[to + c] += x[o + c];
      }
    }
  }
}

/** Each segment's first maximum per column and its row: -1 and 0 where a segment has no position. */
function segmentMax(
  { x, index, bounds, out, indices, rows, count, size, inner }: SegmentReduceArgs<TypedArray>,
): void {
  for (let s = 0; s < size; s++) {
    const [start, end] = span(bounds, count, s);
    const o = s * inner;
    let first = true;
    for (let i = start; i < end; i++) {
      const r = index[i];
      if (!(r >= 0 && r < rows)) continue;
      const from = r * inner;
      if (first) {
        for (let c = 0; c < inner; c++) {
          out[o + c] = x[from + c];
          indices![o + c] = r;
        }
        first = false;
        continue;
      }
      for (let c = 0; c < inner; c++) {
        const v = x[from + c];
        const b = out[o + c];
        // Only a greater value replaces the held one, as PyTorch's: ties keep the first, and a
        // NaN is kept where it came first but never wins later.
        if (v > b) {
          out[o + c] = v;
          indices![o + c] = r;
        }
      }
    }
    if (first) {
      out.fill(0, o, o + inner);
      indices!.fill(-1, o, o + inner);
    }
  }
}
