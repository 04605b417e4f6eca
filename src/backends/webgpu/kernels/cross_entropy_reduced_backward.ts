/**
 * `crossEntropyReducedBackward` (optional fused kernel): the logits'
 * gradient of the summed or averaged cross-entropy from the saved softmax,
 * one invocation per element; the scalar gradient (over the summed weights
 * for the mean) is read in place, so the backward needs no division or
 * expand kernels before it.
 * @module
 */

import type { CrossEntropyReducedBackwardArgs } from "../../backend.ts";
import { groups2d, i32Bits, type Runtime } from "../runtime.ts";
import { IS_NAN_WGSL, main1d, PARAMS_WGSL, storage, wgslType } from "../wgsl.ts";

const WG = 256;

/** Records the gradient of {@link CrossEntropyReducedBackwardArgs}. */
export function crossEntropyReducedBackward(
  rt: Runtime,
  args: CrossEntropyReducedBackwardArgs<GPUBuffer>,
): void {
  const { probs, target, gradLoss, weightSum, out, rows, classes, dtype } = args;
  if (wgslType(dtype) !== "f32") {
    throw new Error(`${rt.name} crossEntropyReducedBackward does not support dtype ${dtype}`);
  }
  const count = rows * classes;
  if (count === 0) return;
  // Params: count, classes, ignoreIndex, mean. (`target` is a WGSL keyword: `labels`.)
  rt.dispatch({
    name: "crossEntropyReducedBackward",
    key: "cross_entropy_reduced_backward",
    wgsl: () =>
      PARAMS_WGSL + IS_NAN_WGSL + storage(1, "probs", "f32", false) +
      storage(2, "labels", "i32", false) + storage(3, "gradLoss", "f32", false) +
      storage(4, "weightSum", "f32", false) + storage(5, "out", "f32", true) + main1d(WG) +
      `  let classes = pu(1u);
  let r = idx / classes;
  let c = idx - r * classes;
  let t = labels[r];
  if (t == pi(2u)) { out[idx] = 0.0; return; }
  if (t < 0 || u32(t) >= classes) { out[idx] = nanF32(); return; }
  var g = gradLoss[0];
  if (pu(3u) != 0u) { g = g / weightSum[0]; }
  out[idx] = g * probs[idx] - select(0.0, g, c == u32(t));
}
`,
    signature: "rrrrw",
    buffers: [probs, target, gradLoss, weightSum, out],
    params: [count, classes, i32Bits(args.ignoreIndex), args.mean ? 1 : 0],
    groups: groups2d(Math.ceil(count / WG)),
  });
}
