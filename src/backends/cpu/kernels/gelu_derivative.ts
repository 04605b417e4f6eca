/**
 * `geluDerivative` (optional fused kernel): `Φ(x) + x φ(x)`, in
 * WebAssembly SIMD for float32 where the engine has it, else with the erfc
 * of `gelu.ts`.
 * @module
 */

import type { GeluArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";
import { geluFloat32 } from "../wasm/gelu.ts";
import { erfc, erfcFloat32 } from "./erf.ts";

const INV_SQRT_2PI = 1 / Math.sqrt(2 * Math.PI);

/** `out[i] = Φ(x[i]) + x[i] φ(x[i])`. */
export function geluDerivative({ x, out, numel }: GeluArgs<TypedArray>): void {
  if (geluFloat32(x, out, numel, true)) return;
  const cdfErfc = x instanceof Float64Array ? erfc : erfcFloat32;
  for (let i = 0; i < numel; i++) {
    const v = x[i];
    out[i] = 0.5 * cdfErfc(-v * Math.SQRT1_2) + v * INV_SQRT_2PI * Math.exp(-0.5 * v * v);
  }
}
