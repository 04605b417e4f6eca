/**
 * Running `gelu.wat` (float32 GELU and its derivative in WebAssembly SIMD,
 * within 8 ulp of float64) for the cpu backend's `gelu` and
 * `geluDerivative` kernels: x is copied into the module's memory (padded to
 * whole 4-float groups), the result copied out.
 * @module
 */

import type { TypedArray } from "../../../dtype.ts";
import { instantiate } from "./load.ts";
import { GELU_WASM } from "./modules.ts";

interface GeluModule {
  readonly memory: WebAssembly.Memory;
  readonly gelu: (x: number, out: number, groups: number) => void;
  readonly geluDerivative: (x: number, out: number, groups: number) => void;
  view: Float32Array;
}

/** The module, made on first use; null where WebAssembly SIMD is missing. */
let made: GeluModule | null | undefined;

function geluModule(): GeluModule | null {
  if (made === undefined) {
    const instance = instantiate(GELU_WASM);
    if (instance === null) {
      made = null;
    } else {
      const memory = instance.exports.memory as WebAssembly.Memory;
      made = {
        memory,
        gelu: instance.exports.gelu as GeluModule["gelu"],
        geluDerivative: instance.exports.geluDerivative as GeluModule["geluDerivative"],
        view: new Float32Array(memory.buffer),
      };
    }
  }
  return made;
}

/** Whether float32 GELU runs in WebAssembly here. */
export function geluInWasm(): boolean {
  return geluModule() !== null;
}

/**
 * `out = gelu(x)` (or its derivative) over `numel` float32 values in
 * WebAssembly; false, with nothing written, where the module is missing or
 * its memory cannot grow (the caller then runs TypeScript).
 */
export function geluFloat32(
  x: TypedArray,
  out: TypedArray,
  numel: number,
  derivative: boolean,
): boolean {
  const w = x instanceof Float32Array && numel > 0 ? geluModule() : null;
  if (w === null) return false;
  const padded = Math.ceil(numel / 4) * 4;
  const bytes = 2 * padded * 4;
  const have = w.memory.buffer.byteLength;
  if (bytes > have) {
    try {
      w.memory.grow(Math.ceil((bytes - have) / 65536));
    } catch {
      return false;
    }
    w.view = new Float32Array(w.memory.buffer);
  }
  const view = w.view;
  view.set(x.subarray(0, numel), 0);
  view.fill(0, numel, padded);
  (derivative ? w.geluDerivative : w.gelu)(0, padded * 4, padded / 4);
  out.set(view.subarray(padded, padded + numel));
  return true;
}
