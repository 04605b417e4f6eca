/**
 * `copy`: strided copy of raw 32-bit words (permute, expand, narrow, concat).
 * @module
 */

import type { CopyArgs } from "../../backend.ts";
import { numelOf } from "../../../shape.ts";
import { coalesce } from "../layout.ts";
import { groups2d, PARAM_SLOT_WORDS, type Runtime } from "../runtime.ts";
import { main1d, PARAMS_WGSL, storage, stridedOffsets } from "../wgsl.ts";

const WG = 256;

/** Records the strided copy of `x` into `out`. */
export function copy(rt: Runtime, layout: CopyArgs<GPUBuffer>): void {
  const { x: src, out: dst } = layout;
  const numel = numelOf(layout.shape);
  if (numel === 0) return;
  const { shape, strides: [ss, ds] } = coalesce(layout.shape, [
    layout.xStrides,
    layout.outStrides,
  ]);
  const rank = shape.length;
  if (rank === 1 && ss[0] === 1 && ds[0] === 1) {
    // Contiguous on both sides: a plain buffer copy, which also avoids a
    // shader over a range that is not vec4 aligned.
    rt.encoder(dst).copyBufferToBuffer(
      src,
      layout.xOffset * 4,
      dst,
      layout.outOffset * 4,
      numel * 4,
    );
    return;
  }
  if (3 + 3 * rank > PARAM_SLOT_WORDS) {
    throw new Error(`webgpu copy: rank ${rank} is too large`);
  }
  const params = [
    numel,
    layout.xOffset,
    layout.outOffset,
    ...shape,
    ...ss.map((s) => s >>> 0),
    ...ds.map((s) => s >>> 0),
  ];
  const index = stridedOffsets(rank, 3, [
    { name: "is", stridesAt: 3 + rank },
    { name: "id", stridesAt: 3 + 2 * rank },
  ]);
  rt.dispatch({
    name: "copy",
    key: `copy_r${rank}`,
    wgsl: () =>
      PARAMS_WGSL + storage(1, "src", "u32", false) +
      storage(2, "dst", "u32", true) + main1d(WG) +
      `${index}  dst[pi(2u) + id] = src[pi(1u) + is];
}
`,
    signature: "rw",
    buffers: [src, dst],
    params,
    groups: groups2d(Math.ceil(numel / WG)),
  });
}
