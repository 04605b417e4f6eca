/**
 * `gelu` (optional fused kernel): `x Φ(x)` with the exact erf.
 * @module
 */

import type { GeluArgs } from "../../backend.ts";
import { dispatchMap } from "../map.ts";
import type { Runtime } from "../runtime.ts";
import { wgslType } from "../wgsl.ts";
import { NORMAL_CDF_WGSL } from "./math.ts";

/** Records `out[i] = x[i] Φ(x[i])`. */
export function gelu(rt: Runtime, { x, out, numel, dtype }: GeluArgs<GPUBuffer>): void {
  if (wgslType(dtype) !== "f32") throw new Error(`${rt.name} gelu does not support dtype ${dtype}`);
  const body = "if (isNan(x)) { return x; } return x * phi(x);";
  dispatchMap(
    rt,
    { name: "gelu", key: "gelu", type: "f32", body, helpers: NORMAL_CDF_WGSL },
    x,
    out,
    numel,
  );
}
