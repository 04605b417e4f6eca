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
import { ELEMENTWISE_WASM } from "./modules.ts";

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
}

/** A window's sizes in the order `im2col` and `col2im` take them after `planes`. */
export function windowParams(v: WindowView): number[] {
  return [
    ...[v.height, v.width, v.kernelH, v.kernelW, v.outH, v.outW],
    ...[v.strideH, v.strideW, v.padH, v.padW, v.dilationH, v.dilationW],
  ];
}

/** The module, compiled once (null: no SIMD or no WebAssembly here). */
let compiled: WebAssembly.Module | null | undefined;
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
      const bytes = decodeBase64(ELEMENTWISE_WASM);
      compiled = WebAssembly.validate(bytes) ? new WebAssembly.Module(bytes) : null;
    } catch {
      compiled = null;
    }
  }
  if (compiled === null) return null;
  const { exports } = new WebAssembly.Instance(compiled, { env: { memory } });
  const loops = exports as unknown as ElementwiseLoops;
  onMemory.set(memory, loops);
  return loops;
}
