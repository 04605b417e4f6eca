/**
 * Running `elementwise.wat` (float32 ReLU, select, binary and window loops in
 * WebAssembly SIMD) on arrays that live in the matmul kernel's shared
 * memory: the backend's large float32 arrays (`heap.ts`), so the loops read
 * and write them in place. Kernels ask {@link residentLoops} first and run
 * their TypeScript loops where it answers null.
 * @module
 */

import type { WindowView } from "../../backend.ts";
import { residentMemory } from "../kernels/matmul.ts";
import { decodeBase64 } from "./load.ts";
import {
  ADAM_SUMS_WASM,
  BATCH_NORM_WASM,
  ELEMENTWISE_WASM,
  MAX_POOL_WASM,
  SEGMENT_WASM,
} from "./modules.ts";

/** A binary op's number in `elementwise.wat`. */
export const WASM_BINARY_OPS = {
  add: 0,
  sub: 1,
  mul: 2,
  div: 3,
  lt: 4,
  le: 5,
  gt: 6,
  ge: 7,
} as const;

/** `elementwise.wat`'s exports: byte addresses and element counts. */
export interface ElementwiseLoops {
  /** `out[i] = x[i]` where `!(x[i] <= 0)`, else +0. */
  readonly relu: (out: number, x: number, n: number) => void;
  /** `out[i]` = the bits `a` where `cond[i] != 0`, else `b[i]`. */
  readonly select_scalar: (out: number, cond: number, a: number, b: number, n: number) => void;
  /** `out[i] = a[i] op b[i]`, `op` from {@link WASM_BINARY_OPS}. */
  readonly binary: (op: number, out: number, a: number, b: number, n: number) => void;
  /** `out[i] = a[i] op v`. */
  readonly binary_scalar: (op: number, out: number, a: number, v: number, n: number) => void;
  /** The `im2col` kernel's loop: x, out, planes, then the window's sizes (see the `.wat`). */
  readonly im2col: (x: number, out: number, planes: number, ...window: number[]) => void;
  /** The `col2im` kernel's loop (out zeroed first). */
  readonly col2im: (cols: number, out: number, planes: number, ...window: number[]) => void;
  /** Zeroes `bytes` bytes from `out`. */
  readonly zero: (out: number, bytes: number) => void;
  /** `batch_norm.wat`: one channel's shifted sums (even, odd) and sums of squares. */
  readonly bn_sums: (
    x: number,
    plane: number,
    outer: number,
    inner: number,
    shift: number,
  ) => [number, number, number, number];
  /** `out = x · scale + offset` over one channel. */
  readonly bn_normalize: (...args: number[]) => void;
  /** One channel's gradient sums (even, odd) and gradient-times-centered sums. */
  readonly bn_backward_sums: (
    x: number,
    grad: number,
    plane: number,
    outer: number,
    inner: number,
    mean: number,
  ) => [number, number, number, number];
  /** `out = a · grad + b · (x - mean) + k` over one channel. */
  readonly bn_backward_input: (...args: number[]) => void;
  /** `max_pool.wat`: x, out, indices, planes, H, W, outH, outW. */
  readonly max_pool_2x2: (...args: number[]) => void;
  /** src, index, out, outer, size, count: the scatter-add with inner = 1. */
  readonly scatter_add_rows: (...args: number[]) => void;
  /** `adam_sums.wat`: one float32 Adam step (see the `.wat` for the arguments). */
  readonly adam: (...args: number[]) => void;
  /** x, out, outer, size, inner: float64 column sums rounded to float32. */
  readonly sum_columns: (...args: number[]) => void;
  /**
   * `segment.wat`: out, x, index, weights, weighted, start, end, rows, inner: one bag's sum,
   * giving the positions counted.
   */
  readonly segment_sum: (...args: number[]) => number;
  /** The same arguments and a divisor: one bag's row added at its positions' rows. */
  readonly segment_scatter: (...args: number[]) => void;
}

/** A window's sizes in the order `im2col` and `col2im` take them after `planes`. */
export function windowParams(v: WindowView): number[] {
  return [
    ...[v.height, v.width, v.kernelH, v.kernelW, v.outH, v.outW],
    ...[v.strideH, v.strideW, v.padH, v.padW, v.dilationH, v.dilationW],
  ];
}

/**
 * The modules, compiled once (null: no SIMD or no WebAssembly here). Five
 * modules, each under the 4 KB that browsers compile synchronously.
 */
let compiled: WebAssembly.Module[] | null | undefined;
/** One instance per memory. */
const onMemory = new WeakMap<WebAssembly.Memory, ElementwiseLoops>();

/**
 * The loops on the shared memory holding every one of `arrays`; null where
 * one of them is a host array (or the module does not compile here).
 */
export function residentLoops(...arrays: ArrayBufferView[]): ElementwiseLoops | null {
  const memory = residentMemory(...arrays);
  if (memory === null) return null;
  const made = onMemory.get(memory);
  if (made !== undefined) return made;
  if (compiled === undefined) {
    try {
      const sources = [
        ELEMENTWISE_WASM,
        BATCH_NORM_WASM,
        MAX_POOL_WASM,
        ADAM_SUMS_WASM,
        SEGMENT_WASM,
      ].map(decodeBase64);
      compiled = sources.every((bytes) => WebAssembly.validate(bytes))
        ? sources.map((bytes) => new WebAssembly.Module(bytes))
        : null;
    } catch {
      compiled = null;
    }
  }
  if (compiled === null) return null;
  const exports = compiled.map((m) => new WebAssembly.Instance(m, { env: { memory } }).exports);
  const loops = Object.assign({}, ...exports) as ElementwiseLoops;
  onMemory.set(memory, loops);
  return loops;
}
