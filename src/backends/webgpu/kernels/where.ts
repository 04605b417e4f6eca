/**
 * `where`: the ternary select with broadcasting, on raw 32-bit words (the
 * values are only moved, so one shader serves every dtype).
 * @module
 */

import type { WhereArgs } from "../../backend.ts";
import { numelOf } from "../../../shape.ts";
import { coalesce } from "../layout.ts";
import { groups2d, PARAM_SLOT_WORDS, type Runtime } from "../runtime.ts";
import { main1d, PARAMS_WGSL, storage, stridedOffsets } from "../wgsl.ts";

const WG = 256;

/**
 * The truth of a condition word: any bit but the sign for a float (±0 is
 * false, NaN true, as `bool()` in PyTorch), any bit for an int. Testing bits
 * keeps NaN right where compilers fold float comparisons.
 */
function truth(condIsFloat: boolean): string {
  return condIsFloat
    ? "fn truth(c: u32) -> bool { return (c & 0x7fffffffu) != 0u; }\n"
    : "fn truth(c: u32) -> bool { return c != 0u; }\n";
}

/** Records `out[i] = cond[i] != 0 ? a[i] : b[i]` with broadcasting. */
export function where(rt: Runtime, layout: WhereArgs<GPUBuffer>): void {
  const { cond, a, b, out } = layout;
  const numel = numelOf(layout.shape);
  if (numel === 0) return;
  const condIsFloat = layout.condDtype !== "int32";
  const { shape, strides } = coalesce(layout.shape, [
    layout.condStrides,
    layout.aStrides,
    layout.bStrides,
  ]);
  const rank = shape.length;
  const header = PARAMS_WGSL + storage(1, "cond", "u32", false) + storage(2, "a", "u32", false) +
    storage(3, "b", "u32", false) + storage(4, "out", "u32", true) + truth(condIsFloat) +
    main1d(WG);
  const common = { name: "where", signature: "rrrw", buffers: [cond, a, b, out] } as const;
  const groups = groups2d(Math.ceil(numel / WG));
  if (rank === 1 && strides.every((s) => s[0] === 0 || s[0] === 1)) {
    // Each operand contiguous or one broadcast element: no index decoding.
    const [ec, ea, eb] = ["cond", "a", "b"].map((name, k) =>
      `${name}[${strides[k][0] === 1 ? "idx" : "0"}]`
    );
    rt.dispatch({
      ...common,
      key: `where_${condIsFloat}_${strides.map((s) => s[0]).join("")}`,
      wgsl: () => header + `  out[idx] = select(${eb}, ${ea}, truth(${ec}));\n}\n`,
      params: [numel],
      groups,
    });
    return;
  }
  if (1 + 4 * rank > PARAM_SLOT_WORDS) {
    throw new Error(`webgpu where: rank ${rank} is too large`);
  }
  const params = [numel, ...shape, ...strides.flatMap((s) => s.map((v) => v >>> 0))];
  const decode = stridedOffsets(rank, 1, [
    { name: "ic", stridesAt: 1 + rank },
    { name: "ia", stridesAt: 1 + 2 * rank },
    { name: "ib", stridesAt: 1 + 3 * rank },
  ]);
  rt.dispatch({
    ...common,
    key: `where_${condIsFloat}_r${rank}`,
    wgsl: () => header + decode + "  out[idx] = select(b[ib], a[ia], truth(cond[ic]));\n}\n",
    params,
    groups,
  });
}
