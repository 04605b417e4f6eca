/**
 * `im2col`: unfolds convolution / pooling windows into columns, on raw
 * 32-bit words (values are only moved), one invocation per column entry.
 * @module
 */

import type { Im2colArgs, WindowView } from "../../backend.ts";
import { toHost } from "../../../dtype.ts";
import { groups2d, type Runtime } from "../runtime.ts";
import { coordinates, main1d, PARAMS_WGSL, storage } from "../wgsl.ts";

const WG = 256;

/** The 13 window parameters after the element count, in the order the shaders read them. */
export function windowParams(l: WindowView): number[] {
  return [
    l.height,
    l.width,
    l.kernelH,
    l.kernelW,
    l.strideH,
    l.strideW,
    l.padH,
    l.padW,
    l.dilationH,
    l.dilationW,
    l.outH,
    l.outW,
  ];
}

/** WGSL reading the window parameters (words 1..12) into named lets. */
export const WINDOW_PARAMS_WGSL = `
  let H = pi(1u); let W = pi(2u); let KH = pu(3u); let KW = pu(4u);
  let SH = pi(5u); let SW = pi(6u); let PH = pi(7u); let PW = pi(8u);
  let DH = pi(9u); let DW = pi(10u); let OH = pu(11u); let OW = pu(12u);
`;

/** Records `cols[n, c, ki, kj, oh, ow]` = the tap's input element or `padValue`. */
export function im2col(rt: Runtime, layout: Im2colArgs<GPUBuffer>): void {
  const { x, out: cols } = layout;
  const { batch, channels, kernelH, kernelW, outH, outW } = layout;
  const numel = batch * channels * kernelH * kernelW * outH * outW;
  if (numel === 0) return;
  // The pad value's bits in the tensor's dtype (cols holds raw words).
  const padBits = new Uint32Array(toHost(layout.dtype, [layout.padValue]).buffer)[0];
  rt.dispatch({
    name: "im2col",
    key: "im2col",
    wgsl: () =>
      PARAMS_WGSL + storage(1, "x", "u32", false) + storage(2, "cols", "u32", true) +
      main1d(WG) +
      `${WINDOW_PARAMS_WGSL}
${
        coordinates("idx", ["plane", "ki", "kj", "oh", "ow"], ["KH", "KW", "OH", "OW"])
      }  let h = i32(oh) * SH - PH + i32(ki) * DH;
  let w = i32(ow) * SW - PW + i32(kj) * DW;
  if (h < 0 || h >= H || w < 0 || w >= W) { cols[idx] = pu(13u); return; }
  cols[idx] = x[plane * u32(H * W) + u32(h * W + w)];
}
`,
    signature: "rw",
    buffers: [x, cols],
    params: [numel, ...windowParams(layout), padBits],
    groups: groups2d(Math.ceil(numel / WG)),
  });
}
