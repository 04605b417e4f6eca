/**
 * `gelu` (optional fused kernel): `x Φ(x)` with the exact erf. float32 runs
 * in WebAssembly SIMD (`../wasm/gelu.wat`, within 8 ulp of float64) where
 * the engine has it; otherwise float32 uses a rational approximation of
 * erfc with relative error below 1.2e-7 everywhere (about one float32 ulp,
 * one `exp` and one division), and float64 the float64-exact erfc.
 * @module
 */

import type { GeluArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";
import { geluFloat32 } from "../wasm/gelu.ts";
import { erfc, erfcFloat32 } from "./erf.ts";

/** `out[i] = x[i] Φ(x[i])`. */
export function gelu({ x, out, numel }: GeluArgs<TypedArray>): void {
  if (geluFloat32(x, out, numel, false)) return;
  const cdfErfc = x instanceof Float64Array ? erfc : erfcFloat32;
  for (let i = 0; i < numel; i++) {
    const v = x[i];
    // Φ(x) = erfc(-x/√2)/2: no cancellation in the negative tail.
    out[i] = 0.5 * v * cdfErfc(-v * Math.SQRT1_2);
  }
}
