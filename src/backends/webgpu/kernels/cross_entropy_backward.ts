/**
 * `crossEntropyBackward` (optional fused kernel): the logits' gradient
 * `gradLoss[r] · (probs - onehot)`, one invocation per element.
 * @module
 */

import type { CrossEntropyBackwardArgs } from "../../backend.ts";
import { groups2d, i32Bits, type Runtime } from "../runtime.ts";
import { IS_NAN_WGSL, main1d, PARAMS_WGSL, storage, wgslType } from "../wgsl.ts";

const WG = 256;

/** Records the gradient of {@link CrossEntropyBackwardArgs}. */
export function crossEntropyBackward(
  rt: Runtime,
  args: CrossEntropyBackwardArgs<GPUBuffer>,
): void {
  const { probs, target, gradLoss, out, rows, classes, dtype } = args;
  if (wgslType(dtype) !== "f32") {
    throw new Error(`${rt.name} crossEntropyBackward does not support dtype ${dtype}`);
  }
  const count = rows * classes;
  if (count === 0) return;
  // Params: count, classes, ignoreIndex. (`target` is a WGSL keyword: `labels`.)
  rt.dispatch({
    name: "crossEntropyBackward",
    key: "cross_entropy_backward",
    wgsl: () =>
      PARAMS_WGSL + IS_NAN_WGSL + storage(1, "probs", "f32", false) +
      storage(2, "labels", "i32", false) + storage(3, "gradLoss", "f32", false) +
      storage(4, "out", "f32", true) + main1d(WG) +
      `  if (idx >= pu(0u)) { return; }
  let classes = pu(1u);
  let r = idx / classes;
  let c = idx - r * classes;
  let t = labels[r];
  if (t == pi(2u)) { out[idx] = 0.0; return; }
  if (t < 0 || u32(t) >= classes) { out[idx] = nanF32(); return; }
  let g = gradLoss[r];
  out[idx] = g * probs[idx] - select(0.0, g, c == u32(t));
}
`,
    signature: "rrrw",
    buffers: [probs, target, gradLoss, out],
    params: [count, classes, i32Bits(args.ignoreIndex)],
    groups: groups2d(Math.ceil(count / WG)),
  });
}
