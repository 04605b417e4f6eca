/**
 * `col2im`: the adjoint of `im2col`. WGSL has no float atomics, so each
 * input element gathers the entries of the taps that read it (at most
 * kernelH * kernelW), deterministic and in the cpu loop's order.
 * @module
 */

import type { Col2imArgs } from "../../backend.ts";
import { groups2d, type Runtime } from "../runtime.ts";
import { coordinates, main1d, PARAMS_WGSL, storage, wgslType } from "../wgsl.ts";
import { WINDOW_PARAMS_WGSL, windowParams } from "./im2col.ts";

const WG = 256;

/** Records `out[n, c, h, w]` = Σ of the `cols` entries whose tap reads (h, w). */
export function col2im(rt: Runtime, layout: Col2imArgs<GPUBuffer>): void {
  const { x: cols, out } = layout;
  const { batch, channels, height, width } = layout;
  const numel = batch * channels * height * width;
  if (numel === 0) return;
  const t = wgslType(layout.dtype);
  rt.dispatch({
    name: "col2im",
    key: `col2im_${t}`,
    wgsl: () =>
      PARAMS_WGSL + storage(1, "cols", t, false) + storage(2, "out", t, true) + main1d(WG) +
      `${WINDOW_PARAMS_WGSL}
${coordinates("idx", ["plane", "hu", "wu"], ["u32(H)", "u32(W)"])}  let h = i32(hu);
  let w = i32(wu);
  let taps = OH * OW;
  var acc = ${t}(0);
  for (var ki = 0u; ki < KH; ki++) {
    let th = h + PH - i32(ki) * DH;
    if (th < 0) { break; }
    if (th % SH != 0) { continue; }
    let oh = u32(th / SH);
    if (oh >= OH) { continue; }
    for (var kj = 0u; kj < KW; kj++) {
      let tw = w + PW - i32(kj) * DW;
      if (tw < 0) { break; }
      if (tw % SW != 0) { continue; }
      let ow = u32(tw / SW);
      if (ow >= OW) { continue; }
      acc += cols[((plane * KH + ki) * KW + kj) * taps + oh * OW + ow];
    }
  }
  out[idx] = acc;
}
`,
    signature: "rw",
    buffers: [cols, out],
    params: [numel, ...windowParams(layout)],
    groups: groups2d(Math.ceil(numel / WG)),
  });
}
