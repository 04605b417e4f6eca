/**
 * `batchNormBackward` (optional fused kernel): a training batch norm's
 * gradients in two passes over `x` and `grad` per channel (the sums, then
 * the input gradient), where the composition makes about nine.
 * @module
 */

import type { BatchNormBackwardArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";
import { residentLoops } from "../wasm/elementwise.ts";

/** See {@link BatchNormBackwardArgs}. */
export function batchNormBackward(args: BatchNormBackwardArgs<TypedArray>): void {
  const { x, weight, mean, invstd, grad, gradInput, gradWeight, gradBias } = args;
  const { outer, channels, inner } = args;
  const n = outer * inner;
  const plane = channels * inner;
  // In the kernel's memory, float32 runs in WebAssembly: the same sums in
  // the same order, so the same bits.
  const loops = x instanceof Float32Array ? residentLoops(x, grad, gradInput) : null;
  for (let c = 0; c < channels; c++) {
    const first = c * inner;
    const m = mean[c];
    const s = invstd[c];
    const [gsum0, gsum1, gxc0, gxc1] = loops === null
      ? gradientSums(x, grad, first, plane, outer, inner, m)
      : loops.bn_backward_sums(
        ...[x.byteOffset + 4 * first, grad.byteOffset + 4 * first],
        ...[4 * plane, outer, inner, m] as const,
      );
    const gsum = gsum0 + gsum1;
    const gxc = gxc0 + gxc1;
    gradWeight[c] = gxc * s;
    gradBias[c] = gsum;
    // gradInput = a·grad + b·(x - mean) + k, per channel.
    const a = weight[c] * s;
    const b = (-a * s * s * gxc) / n;
    const k = (-a * gsum) / n;
    if (loops !== null) {
      const at = 4 * first;
      loops.bn_backward_input(
        ...[x.byteOffset + at, grad.byteOffset + at, gradInput.byteOffset + at],
        ...[4 * plane, outer, inner, m, a, b, k],
      );
      continue;
    }
    for (let o = 0, at = first; o < outer; o++, at += plane) {
      for (let i = at, end = at + inner; i < end; i++) {
        gradInput[i] = a * grad[i] + b * (x[i] - m) + k;
      }
    }
  }
}

/**
 * One channel's sums of `grad` and of `grad · (x - mean)` over `outer` runs
 * of `inner` from `first`, `plane` apart; two sets of sums, even and odd
 * elements (as batchNorm's statistics).
 */
function gradientSums(
  x: TypedArray,
  grad: TypedArray,
  first: number,
  plane: number,
  outer: number,
  inner: number,
  m: number,
): [number, number, number, number] {
  let [gsum0, gsum1, gxc0, gxc1] = [0, 0, 0, 0];
  for (let o = 0, at = first; o < outer; o++, at += plane) {
    const end = at + inner;
    let i = at;
    for (; i + 1 < end; i += 2) {
      const g0 = grad[i];
      const g1 = grad[i + 1];
      gsum0 += g0;
      gxc0 += g0 * (x[i] - m);
      gsum1 += g1;
      gxc1 += g1 * (x[i + 1] - m);
    }
    if (i < end) {
      gsum0 += grad[i];
      gxc0 += grad[i] * (x[i] - m);
    }
  }
  return [gsum0, gsum1, gxc0, gxc1];
}
