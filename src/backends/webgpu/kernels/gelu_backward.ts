/**
 * `geluBackward` (optional fused kernel): `grad * geluDerivative(x)` in one
 * dispatch, four elements per invocation when `numel` is a multiple of 4.
 * @module
 */

import type { GeluBackwardArgs, MatmulArgs } from "../../backend.ts";
import { HELD_MATMUL, type HeldProduct, matmulGeluBackward } from "./matmul.ts";
import { groups2d, type Runtime } from "../runtime.ts";
import { IS_NAN_WGSL, main1d, PARAMS_WGSL, storage, wgslType } from "../wgsl.ts";
import { GELU_DERIVATIVE_WGSL } from "./math.ts";

const WG = 256;

function wgsl(vec: boolean): string {
  const t = vec ? "vec4<f32>" : "f32";
  const apply = vec
    ? `let v = x[idx];
  out[idx] = g[idx] * vec4<f32>(geluDerivative(v.x), geluDerivative(v.y), geluDerivative(v.z),
    geluDerivative(v.w));`
    : "out[idx] = g[idx] * geluDerivative(x[idx]);";
  return PARAMS_WGSL + IS_NAN_WGSL + GELU_DERIVATIVE_WGSL + storage(1, "x", t, false) +
    storage(2, "g", t, false) + storage(3, "out", t, true) + main1d(WG) +
    `  ${apply}
}
`;
}

/** Records `out[i] = grad[i] * geluDerivative(x[i])`. */
export function geluBackward(rt: Runtime, args: GeluBackwardArgs<GPUBuffer>): void {
  if (wgslType(args.dtype) !== "f32") {
    throw new Error(`${rt.name} geluBackward does not support dtype ${args.dtype}`);
  }
  const { numel } = args;
  if (numel === 0) return;
  // The gradient made by the product just before (held for this, see
  // matmul): stored by that product's epilogue instead.
  const held = rt.claimDeferred<HeldProduct<MatmulArgs<GPUBuffer>>>(
    HELD_MATMUL,
    ({ layout: l }) =>
      l.out === args.grad && l.m * l.n === numel && args.x !== l.out &&
      // Written while the product reads its operands: it must be none of them.
      args.out !== l.a && args.out !== l.b && args.out !== args.x,
  );
  if (held) {
    matmulGeluBackward(rt, held, args.x, args.out);
    return;
  }
  const vec = numel % 4 === 0;
  const count = vec ? numel / 4 : numel;
  rt.dispatch({
    name: "geluBackward",
    key: `geluBackward_${vec}`,
    wgsl: () => wgsl(vec),
    signature: "rrw",
    buffers: [args.x, args.grad, args.out],
    params: [count],
    groups: groups2d(Math.ceil(count / WG)),
  });
}
