/**
 * `maxPool2d` (optional fused kernel): each window's maximum and its
 * position, one invocation per output element (per row on CPU adapters),
 * read straight from the input (the composition unfolds the windows, takes an argmax and gathers).
 * @module
 */

import type { MaxPool2dArgs } from "../../backend.ts";
import { groups2d, type Runtime } from "../runtime.ts";
import { IS_NAN_WGSL, main1d, PARAMS_WGSL, storage, wgslType } from "../wgsl.ts";
import {
  rowPiece,
  rowPieces,
  rowRange,
  walkRows,
  WINDOW_PARAMS_WGSL,
  windowParams,
} from "./im2col.ts";

const WG = 256;

/**
 * `beats(v, b)`: `v` replaces the winner `b` when larger, or NaN (over a
 * NaN too: the last NaN of a window wins, as PyTorch's `val > maxval ||
 * isnan(val)`); NaN decided by bits first (GL drivers fold `v > b` as if
 * NaN never occurred). Strictly larger: the first one wins ties, as PyTorch.
 */
const BEATS_WGSL = IS_NAN_WGSL + `
fn beats(v: f32, b: f32) -> bool {
  if (isNan(v)) { return true; }
  if (isNan(b)) { return false; }
  return v > b;
}
`;

/** Records the maxima and positions of {@link MaxPool2dArgs}. */
export function maxPool2d(rt: Runtime, args: MaxPool2dArgs<GPUBuffer>): void {
  const { x, out, indices, batch, channels, outH, outW, dtype } = args;
  if (wgslType(dtype) !== "f32") {
    throw new Error(`${rt.name} maxPool2d does not support dtype ${dtype}`);
  }
  // On CPU adapters one invocation per output row (plane, oh), walking ow
  // (see `walkRows`).
  const rows = walkRows(rt);
  const piece = rowPiece(1 + args.kernelH * (1 + args.kernelW));
  const count = rows
    ? rowPieces(batch * channels * outH, outW, piece)
    : batch * channels * outH * outW;
  if (count * outW === 0) return;
  rt.dispatch({
    name: "maxPool2d",
    key: `max_pool2d_${rows ? "rows" : "elements"}`,
    wgsl: () =>
      PARAMS_WGSL + BEATS_WGSL + storage(1, "x", "f32", false) +
      storage(2, "out", "f32", true) + storage(3, "indices", "i32", true) + main1d(WG) +
      `${WINDOW_PARAMS_WGSL}
${rowRange(rows, ["plane", "oh", "owFirst"], ["OH", "OW"], 13)}  let base = plane * u32(H * W);
  let h0 = i32(oh) * SH - PH;
  for (var ow = first; ow < end; ow++) {
    let w0 = i32(ow) * SW - PW;
    // Padding never wins: only taps inside the input are read (every window
    // has one: padding is at most half the kernel).
    var best = -1;
    var top = 0.0;
    for (var ki = 0u; ki < KH; ki++) {
      let h = h0 + i32(ki) * DH;
      if (h < 0 || h >= H) { continue; }
      for (var kj = 0u; kj < KW; kj++) {
        let w = w0 + i32(kj) * DW;
        if (w < 0 || w >= W) { continue; }
        let at = h * W + w;
        let v = x[base + u32(at)];
        if (best < 0 || beats(v, top)) {
          best = at;
          top = v;
        }
      }
    }
    let o = rowAt + ow;
    out[o] = top;
    indices[o] = best;
  }
}
`,
    signature: "rww",
    buffers: [x, out, indices],
    params: [count, ...windowParams(args), piece],
    groups: groups2d(Math.ceil(count / WG)),
  });
}
