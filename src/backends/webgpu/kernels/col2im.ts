/**
 * `col2im`: the adjoint of `im2col`. WGSL has no float atomics, so each
 * input element gathers the entries of the taps that read it (at most
 * kernelH * kernelW), deterministic and in the cpu loop's order.
 * @module
 */

import type { Col2imArgs } from "../../backend.ts";
import { groups2d, type Runtime } from "../runtime.ts";
import { main1d, PARAMS_WGSL, storage, wgslType } from "../wgsl.ts";
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
 * The tap's window index along one dim, `t / S` when `t` (the position
 * plus padding minus the tap's offset) is a non-negative multiple of the
 * stride `S`; `skip` otherwise. Unit strides need no division, which CPU
 * adapters do lane by lane.
 */
function windowIndex(unitStride: boolean, t: string, s: string, skip: string): string {
  return unitStride ? `let ${t}Index = u32(${t});` : `if (${t} % ${s} != 0) { ${skip} }
      let ${t}Index = u32(${t} / ${s});`;
}

/**
 * Records `out[n, c, h, w]` = Σ of the `cols` entries whose tap reads
 * (h, w); on CPU adapters one invocation per input row (n, c, h), walking w
 * (see `walkRows`).
 */
export function col2im(rt: Runtime, layout: Col2imArgs<GPUBuffer>): void {
  const { x: cols, out } = layout;
  const { batch, channels, height, width } = layout;
  const rows = walkRows(rt);
  const piece = rowPiece(1 + layout.kernelH * (1 + layout.kernelW));
  const count = rows
    ? rowPieces(batch * channels * height, width, piece)
    : batch * channels * height * width;
  if (count * width === 0) return;
  const t = wgslType(layout.dtype);
  const unit = layout.strideH === 1 && layout.strideW === 1;
  rt.dispatch({
    name: "col2im",
    key: `col2im_${rows ? "rows" : "elements"}_${t}_${unit}`,
    wgsl: () =>
      PARAMS_WGSL + storage(1, "cols", t, false) + storage(2, "out", t, true) + main1d(WG) +
      `${WINDOW_PARAMS_WGSL}
${rowRange(rows, ["plane", "hu", "wFirst"], ["u32(H)", "u32(W)"], 13)}  let h = i32(hu);
  let taps = OH * OW;
  for (var wu = first; wu < end; wu++) {
    let w = i32(wu);
    var acc = ${t}(0);
    for (var ki = 0u; ki < KH; ki++) {
      let th = h + PH - i32(ki) * DH;
      if (th < 0) { break; }
      ${windowIndex(unit, "th", "SH", "continue;")}
      if (thIndex >= OH) { continue; }
      for (var kj = 0u; kj < KW; kj++) {
        let tw = w + PW - i32(kj) * DW;
        if (tw < 0) { break; }
        ${windowIndex(unit, "tw", "SW", "continue;")}
        if (twIndex >= OW) { continue; }
        acc += cols[((plane * KH + ki) * KW + kj) * taps + thIndex * OW + twIndex];
      }
    }
    out[rowAt + wu] = acc;
  }
}
`,
    signature: "rw",
    buffers: [cols, out],
    params: [count, ...windowParams(layout), piece],
    groups: groups2d(Math.ceil(count / WG)),
  });
}
