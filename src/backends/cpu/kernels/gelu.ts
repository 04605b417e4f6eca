/**
 * `gelu` (optional fused kernel): `x Φ(x)` with the exact erf. float64 uses
 * the float64-exact erfc; float32 a rational approximation of erfc with
 * relative error below 1.2e-7 everywhere (about one float32 ulp) that costs
 * one `exp` and one division, 3-4x less than the float64 one.
 * @module
 */

import type { GeluArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";
import { erfc, erfcFloat32 } from "./erf.ts";

/** `out[i] = x[i] Φ(x[i])`. */
export function gelu({ x, out, numel }: GeluArgs<TypedArray>): void {
  const cdfErfc = x instanceof Float64Array ? erfc : erfcFloat32;
  for (let i = 0; i < numel; i++) {
    const v = x[i];
    // Φ(x) = erfc(-x/√2)/2: no cancellation in the negative tail.
    out[i] = 0.5 * v * cdfErfc(-v * Math.SQRT1_2);
  }
}
