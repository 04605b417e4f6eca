/**
 * `geluDerivative` (optional fused kernel): `Φ(x) + x φ(x)`.
 * @module
 */

import type { GeluArgs } from "../../backend.ts";
import { dispatchMap } from "../map.ts";
import type { Runtime } from "../runtime.ts";
import { wgslType } from "../wgsl.ts";
import { GELU_DERIVATIVE_WGSL } from "./math.ts";

/** Records `out[i] = Φ(x[i]) + x[i] φ(x[i])`. */
export function geluDerivative(rt: Runtime, { x, out, numel, dtype }: GeluArgs<GPUBuffer>): void {
  if (wgslType(dtype) !== "f32") {
    throw new Error(`${rt.name} geluDerivative does not support dtype ${dtype}`);
  }
  const body = "return geluDerivative(x);";
  const spec = { name: "geluDerivative", key: "geluDerivative", type: "f32" as const, body };
  dispatchMap(rt, { ...spec, helpers: GELU_DERIVATIVE_WGSL }, x, out, numel);
}
