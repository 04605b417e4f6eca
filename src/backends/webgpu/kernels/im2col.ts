/**
 * `im2col`: unfolds convolution / pooling windows into columns, on raw
 * 32-bit words (values are only moved), one invocation per column entry.
 * @module
 */

import type { Im2colArgs, WindowView } from "../../backend.ts";
import { toHost } from "../../../dtype.ts";
import { groups2d, LOOP_STEPS, type Runtime } from "../runtime.ts";
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

/**
 * How the window kernels (`im2col`, `col2im`, `maxPool2d`) split their
 * output: CPU adapters walk rows (one invocation per row of the last dim):
 * they divide integers lane by lane, and decoding every element's flat index
 * (five divisions in im2col) made the kernel ~5x a copy of the same size on
 * llvmpipe, ~1.4x by rows (1.8M elements: 66 -> 17 ms, copy 13, load 27).
 * GPUs keep one invocation per element, whose neighbours store to
 * neighbouring addresses.
 */
export function walkRows(rt: Runtime): boolean {
  return rt.isCpuAdapter;
}

/**
 * The length of the pieces a walked row is cut into: llvmpipe (Mesa's gallivm) silently ends a
 * shader loop after 65535 iterations, those of nested loops counted too, so an invocation
 * walking a row of 70,000 (or of 6,000 3x3 windows) stopped part way. `steps`: the loop steps
 * per element of the row (1 + the window loops' for the pools and col2im).
 */
export function rowPiece(steps: number): number {
  return Math.max(1, Math.floor(LOOP_STEPS / steps));
}

/** Invocations {@link rowRange} needs for `rows` rows of `length` cut in pieces of `piece`. */
export function rowPieces(rows: number, length: number, piece: number): number {
  return rows * Math.max(1, Math.ceil(length / piece));
}

/**
 * WGSL decoding `idx` over `names` (extents as in `coordinates`), the last
 * one walked: with `rows`, `idx` counts pieces of rows of the last dim (of
 * the length in parameter word `pieceWord`, from {@link rowPiece}) and the
 * invocation covers its piece; otherwise `idx` is one element. Defines the
 * outer names, `rowAt` (the flat index of the row's first element) and
 * `first`/`end`, the range of the last dim to cover.
 */
export function rowRange(
  rows: boolean,
  names: readonly string[],
  extents: readonly string[],
  pieceWord: number,
): string {
  const last = extents[extents.length - 1];
  if (rows) {
    return `  let piece = pu(${pieceWord}u);
  let pieces = max(1u, ((${last}) + piece - 1u) / piece);
  let rowIdx = idx / pieces;
  let first = (idx - rowIdx * pieces) * piece;
  let end = min(${last}, first + piece);
` + coordinates("rowIdx", names.slice(0, -1), extents.slice(0, -1)) +
      `  let rowAt = rowIdx * (${last});
`;
  }
  const lastName = names[names.length - 1];
  return coordinates("idx", names, extents) + `  let rowAt = idx - ${lastName};
  let first = ${lastName};
  let end = ${lastName} + 1u;
`;
}

/** Records `cols[n, c, ki, kj, oh, ow]` = the tap's input element or `padValue`. */
export function im2col(rt: Runtime, layout: Im2colArgs<GPUBuffer>): void {
  const { x, out: cols } = layout;
  const { batch, channels, kernelH, kernelW, outH, outW } = layout;
  const rows = walkRows(rt);
  const piece = rowPiece(1);
  const count = rows
    ? rowPieces(batch * channels * kernelH * kernelW * outH, outW, piece)
    : batch * channels * kernelH * kernelW * outH * outW;
  if (count * outW === 0) return;
  // The pad value's bits in the tensor's dtype (cols holds raw words).
  const padBits = new Uint32Array(toHost(layout.dtype, [layout.padValue]).buffer)[0];
  rt.dispatch({
    name: "im2col",
    key: `im2col_${rows ? "rows" : "elements"}`,
    wgsl: () =>
      PARAMS_WGSL + storage(1, "x", "u32", false) + storage(2, "cols", "u32", true) +
      main1d(WG) +
      `${WINDOW_PARAMS_WGSL}
${
        rowRange(rows, ["plane", "ki", "kj", "oh", "ow"], ["KH", "KW", "OH", "OW"], 14)
      }  let h = i32(oh) * SH - PH + i32(ki) * DH;
  let pad = pu(13u);
  if (h < 0 || h >= H) {
    for (var o = first; o < end; o++) { cols[rowAt + o] = pad; }
    return;
  }
  let src = plane * u32(H * W) + u32(h * W);
  let w0 = i32(kj) * DW - PW;
  for (var o = first; o < end; o++) {
    let w = i32(o) * SW + w0;
    // The read is clamped inside the row; padding taps take the pad value.
    let v = x[src + u32(clamp(w, 0, W - 1))];
    cols[rowAt + o] = select(pad, v, w >= 0 && w < W);
  }
}
`,
    signature: "rw",
    buffers: [x, cols],
    params: [count, ...windowParams(layout), padBits, piece],
    groups: groups2d(Math.ceil(count / WG)),
  });
}
