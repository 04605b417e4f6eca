/**
 * `gelu` (optional fused kernel): `x Φ(x)` with the exact erf.
 * @module
 */

import type { GeluArgs } from "../../backend.ts";
import { dispatchMap } from "../map.ts";
import type { Runtime } from "../runtime.ts";
import { wgslType } from "../wgsl.ts";
import { NORMAL_CDF_WGSL } from "./math.ts";
import { addmmGelu, HELD_ADDMM, type HeldAddmm } from "./matmul.ts";

/**
 * Records `out[i] = x[i] Φ(x[i])`; when `x` is the output of the `addmm` call
 * just before (held for this), in that product's epilogue instead.
 */
export function gelu(rt: Runtime, { x, out, numel, dtype }: GeluArgs<GPUBuffer>): void {
  if (wgslType(dtype) !== "f32") throw new Error(`${rt.name} gelu does not support dtype ${dtype}`);
  const held = rt.claimDeferred<HeldAddmm>(
    HELD_ADDMM,
    ({ layout: l }) =>
      l.out === x && l.batch * l.m * l.n === numel &&
      // Written while the product reads its operands: it must be none of them.
      out !== l.a && out !== l.b && out !== l.bias,
  );
  if (held) {
    addmmGelu(rt, held, out);
    return;
  }
  const body = "if (isNan(x)) { return x; } return x * phi(x);";
  dispatchMap(
    rt,
    { name: "gelu", key: "gelu", type: "f32", body, helpers: NORMAL_CDF_WGSL },
    x,
    out,
    numel,
  );
}
