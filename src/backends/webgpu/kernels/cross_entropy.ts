/**
 * `crossEntropy` (optional fused kernel): per-row loss `log Σ exp(x) - x[t]`
 * against class indices and the row's softmax, one invocation per row.
 * Rows of more than {@link LOOP_STEPS} classes (past llvmpipe's silent limit of
 * 65535 loop iterations per invocation a row's walk stopped part way) take
 * softmax's chunked column walk, then one invocation per row for the loss.
 * @module
 */

import type { CrossEntropyArgs } from "../../backend.ts";
import { groups2d, i32Bits, LOOP_STEPS, type Runtime } from "../runtime.ts";
import { main1d, MAX_NAN_WGSL, PARAMS_WGSL, storage, wgslType } from "../wgsl.ts";
import { columnSoftmax } from "./softmax.ts";

const WG = 64;

/** Records the losses, weights and softmax of {@link CrossEntropyArgs}. */
export function crossEntropy(rt: Runtime, args: CrossEntropyArgs<GPUBuffer>): void {
  const { logits, target, losses, weights, probs, rows, classes, dtype } = args;
  if (wgslType(dtype) !== "f32") {
    throw new Error(`${rt.name} crossEntropy does not support dtype ${dtype}`);
  }
  if (rows === 0) return;
  if (classes > LOOP_STEPS) {
    longRows(rt, args);
    return;
  }
  // Params: rows, classes, ignoreIndex. (`target` is a WGSL keyword: `labels`.)
  rt.dispatch({
    name: "crossEntropy",
    key: "cross_entropy",
    wgsl: () =>
      PARAMS_WGSL + MAX_NAN_WGSL + storage(1, "x", "f32", false) +
      storage(2, "labels", "i32", false) + storage(3, "losses", "f32", true) +
      storage(4, "weights", "f32", true) + storage(5, "probs", "f32", true) + main1d(WG) +
      `  if (idx >= pu(0u)) { return; }
  let classes = pu(1u);
  let base = idx * classes;
  var m = x[base];
  for (var c = 1u; c < classes; c++) { m = maxNan(m, x[base + c]); }
  var s = 0.0;
  for (var c = 0u; c < classes; c++) { s += exp(x[base + c] - m); }
  for (var c = 0u; c < classes; c++) { probs[base + c] = exp(x[base + c] - m) / s; }
  let t = labels[idx];
  if (t == pi(2u)) {
    losses[idx] = 0.0;
    weights[idx] = 0.0;
  } else {
    weights[idx] = 1.0;
    losses[idx] = select(nanF32(), m + log(s) - x[base + u32(t)], t >= 0 && u32(t) < classes);
  }
}
`,
    signature: "rrwww",
    buffers: [logits, target, losses, weights, probs],
    params: [rows, classes, i32Bits(args.ignoreIndex)],
    groups: groups2d(Math.ceil(rows / WG)),
  });
}

/** {@link crossEntropy} of rows longer than {@link LOOP_STEPS}, the same operations in the same order. */
function longRows(rt: Runtime, args: CrossEntropyArgs<GPUBuffer>): void {
  const { logits, target, losses, weights, probs, rows, classes } = args;
  const [m, s] = columnSoftmax(rt, logits, probs, {
    outer: rows,
    size: classes,
    inner: 1,
    log: false,
  });
  rt.dispatch({
    name: "crossEntropy",
    key: "cross_entropy_long_losses",
    wgsl: () =>
      PARAMS_WGSL + MAX_NAN_WGSL + storage(1, "x", "f32", false) +
      storage(2, "labels", "i32", false) + storage(3, "ms", "f32", false) +
      storage(4, "ss", "f32", false) + storage(5, "losses", "f32", true) +
      storage(6, "weights", "f32", true) + main1d(WG) +
      `  let classes = pu(1u);
  let t = labels[idx];
  if (t == pi(2u)) {
    losses[idx] = 0.0;
    weights[idx] = 0.0;
  } else {
    weights[idx] = 1.0;
    let at = idx * classes + u32(t);
    losses[idx] = select(nanF32(), ms[idx] + log(ss[idx]) - x[at], t >= 0 && u32(t) < classes);
  }
}
`,
    signature: "rrrrww",
    buffers: [logits, target, m, s, losses, weights],
    params: [rows, classes, i32Bits(args.ignoreIndex)],
    groups: groups2d(Math.ceil(rows / WG)),
  });
  // Later kernels that reuse these buffers are recorded after this one, so
  // queue order makes the early release safe.
  rt.release(m);
  rt.release(s);
}
