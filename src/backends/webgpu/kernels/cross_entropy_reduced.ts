/**
 * `crossEntropyReduced` (optional fused kernel): the rows' cross-entropy
 * summed or averaged in ONE workgroup: each invocation takes every `WG`-th
 * row (softmax, loss, weight) and keeps partial sums; after one barrier the
 * first invocation adds the partials and writes the loss and the summed
 * weights. One dispatch instead of four (per-row kernel, two sums, a
 * division); a training batch has hundreds of rows, not millions, so one
 * workgroup is enough.
 *
 * llvmpipe silently ends a shader loop after 65535 iterations, nested
 * loops counted together: where an invocation's rows times their classes
 * would walk more than {@link LOOP_STEPS} steps, the per-row kernel (chunked for
 * long rows) runs instead and its losses and weights are summed by `reduce`.
 * @module
 */

import type { CrossEntropyReducedArgs } from "../../backend.ts";
import { groups2d, i32Bits, LOOP_STEPS, type Runtime } from "../runtime.ts";
import { main1d, mainTiles, MAX_NAN_WGSL, PARAMS_WGSL, storage, wgslType } from "../wgsl.ts";
import { crossEntropy } from "./cross_entropy.ts";
import { reduce } from "./reduce.ts";

const WG = 64;

/** Records the reduced loss, summed weights and softmax of {@link CrossEntropyReducedArgs}. */
export function crossEntropyReduced(rt: Runtime, args: CrossEntropyReducedArgs<GPUBuffer>): void {
  const { logits, target, probs, loss, weightSum, rows, classes, dtype } = args;
  if (wgslType(dtype) !== "f32") {
    throw new Error(`${rt.name} crossEntropyReduced does not support dtype ${dtype}`);
  }
  // The loop steps of the busiest invocation: its rows, three walks over the classes each.
  if (Math.ceil(rows / WG) * (3 * classes + 1) > LOOP_STEPS) {
    byRows(rt, args);
    return;
  }
  // Params: rows, classes, ignoreIndex, mean. (`target` is a WGSL keyword: `labels`.)
  rt.dispatch({
    name: "crossEntropyReduced",
    key: "cross_entropy_reduced",
    wgsl: () =>
      PARAMS_WGSL + MAX_NAN_WGSL + storage(1, "x", "f32", false) +
      storage(2, "labels", "i32", false) + storage(3, "probs", "f32", true) +
      storage(4, "loss", "f32", true) + storage(5, "weightSum", "f32", true) + `
var<workgroup> lossPart: array<f32, ${WG}>;
var<workgroup> weightPart: array<f32, ${WG}>;
` + mainTiles(WG) +
      `  let rows = pu(0u);
  let classes = pu(1u);
  var lossAcc = 0.0;
  var weightAcc = 0.0;
  for (var r = lid; r < rows; r += ${WG}u) {
    let base = r * classes;
    var m = x[base];
    for (var c = 1u; c < classes; c++) { m = maxNan(m, x[base + c]); }
    var s = 0.0;
    for (var c = 0u; c < classes; c++) { s += exp(x[base + c] - m); }
    for (var c = 0u; c < classes; c++) { probs[base + c] = exp(x[base + c] - m) / s; }
    let t = labels[r];
    if (t != pi(2u)) {
      weightAcc += 1.0;
      lossAcc += select(nanF32(), m + log(s) - x[base + u32(t)], t >= 0 && u32(t) < classes);
    }
  }
  lossPart[lid] = lossAcc;
  weightPart[lid] = weightAcc;
  workgroupBarrier();
  if (lid == 0u) {
    var total = 0.0;
    var weights = 0.0;
    for (var i = 0u; i < ${WG}u; i++) {
      total += lossPart[i];
      weights += weightPart[i];
    }
    weightSum[0] = weights;
    // Every row ignored: 0 / 0, NaN as PyTorch's mean (made explicitly:
    // a compiler may fold a float division by zero).
    if (pu(3u) == 0u) {
      loss[0] = total;
    } else {
      loss[0] = select(nanF32(), total / weights, weights > 0.0);
    }
  }
}
`,
    signature: "rrwww",
    buffers: [logits, target, probs, loss, weightSum],
    params: [rows, classes, i32Bits(args.ignoreIndex), args.mean ? 1 : 0],
    groups: [1, 1, 1],
  });
}

/** {@link crossEntropyReduced} by the per-row kernel and two sums (no long loop anywhere). */
function byRows(rt: Runtime, args: CrossEntropyReducedArgs<GPUBuffer>): void {
  const { loss, weightSum, rows, dtype } = args;
  const losses = rt.storage.acquire(Math.max(rows, 1) * 4);
  const weights = rt.storage.acquire(Math.max(rows, 1) * 4);
  crossEntropy(rt, { ...args, losses, weights });
  reduce(rt, { op: "sum", x: losses, out: loss, outer: 1, size: rows, inner: 1, dtype });
  reduce(rt, { op: "sum", x: weights, out: weightSum, outer: 1, size: rows, inner: 1, dtype });
  if (args.mean) {
    // Every row ignored: 0 / 0, NaN as PyTorch's mean (made explicitly, as above).
    rt.dispatch({
      name: "crossEntropyReduced",
      key: "cross_entropy_reduced_mean",
      wgsl: () =>
        PARAMS_WGSL + MAX_NAN_WGSL + storage(1, "weightSum", "f32", false) +
        storage(2, "loss", "f32", true) + main1d(1) +
        `  let w = weightSum[0];
  loss[0] = select(nanF32(), loss[0] / w, w > 0.0);
}
`,
      signature: "rw",
      buffers: [weightSum, loss],
      params: [1],
      groups: groups2d(1),
    });
  }
  // Later kernels that reuse these buffers are recorded after this one, so
  // queue order makes the early release safe.
  rt.release(losses);
  rt.release(weights);
}
