/**
 * `scatterAdd`: the adjoint of `gather`. WGSL has no float atomics, so the
 * sums are made without them, deterministically and in the cpu loop's order
 * (ascending source index), by one of two variants chosen per shape:
 * - per output element: each sums its own matches over the index axis,
 *   `count` reads per output element (plenty of parallelism, quadratic work);
 * - per column (o, i): one invocation zeroes its column and adds every
 *   source of it in turn, `size + count` steps (linear work, only
 *   `outer · inner` invocations). A max pool's gradient is this shape:
 *   `size` = H·W inputs per plane, `count` = OH·OW maxima, one column per
 *   plane.
 * @module
 */

import type { ScatterAddArgs } from "../../backend.ts";
import { groups2d, type Runtime } from "../runtime.ts";
import { coordinates, literals, main1d, PARAMS_WGSL, storage, wgslType } from "../wgsl.ts";

const WG = 256;

/** Invocations a CPU adapter runs at once (cores x SIMD lanes, generously). */
const CPU_LANES = 64;
/** The same for a GPU: enough resident invocations to hide memory latency. */
const GPU_LANES = 16384;

/**
 * Whether the per-column variant is expected to be faster: its serial
 * `size + count` steps per column, in waves of the adapter's lanes, against
 * `size · count` reads spread over every lane.
 */
export function scatterByColumn(
  { outer, size, count, inner }: Pick<ScatterAddArgs, "outer" | "size" | "count" | "inner">,
  isCpuAdapter: boolean,
): boolean {
  const lanes = isCpuAdapter ? CPU_LANES : GPU_LANES;
  const columns = outer * inner;
  const byElement = Math.ceil((columns * size) / lanes) * count;
  const byColumn = Math.ceil(columns / lanes) * (size + count);
  return byColumn < byElement;
}

function byElementWgsl(t: "f32" | "i32"): string {
  return PARAMS_WGSL + storage(1, "src", t, false) + storage(2, "index", "i32", false) +
    storage(3, "out", t, true) + main1d(WG) +
    `  let size = pu(1u);
  let count = pu(2u);
  let inner = pu(3u);
${coordinates("idx", ["o", "row", "i"], ["size", "inner"])}
  let r = i32(row);
  let first = o * count * inner + i;
  var acc = ${literals(t).zero};
  for (var j = 0u; j < count; j++) {
    let k = first + j * inner;
    if (index[k] == r) { acc += src[k]; }
  }
  out[idx] = acc;
}
`;
}

function byColumnWgsl(t: "f32" | "i32"): string {
  // Word 0 is the column count here; the invocation owns column (o, i).
  return PARAMS_WGSL + storage(1, "src", t, false) + storage(2, "index", "i32", false) +
    storage(3, "out", t, true) + main1d(WG) +
    `  let size = pu(1u);
  let count = pu(2u);
  let inner = pu(3u);
${coordinates("idx", ["o", "i"], ["inner"])}
  let dst = o * size * inner + i;
  for (var r = 0u; r < size; r++) { out[dst + r * inner] = ${literals(t).zero}; }
  let first = o * count * inner + i;
  for (var j = 0u; j < count; j++) {
    let k = first + j * inner;
    let r = index[k];
    if (r >= 0 && u32(r) < size) {
      let at = dst + u32(r) * inner;
      out[at] = out[at] + src[k];
    }
  }
}
`;
}

/**
 * Records `out[o, r, i] = Σ src[o, j, i]` over the j with
 * `index[o, j, i] = r` (0 where none).
 */
export function scatterAdd(rt: Runtime, args: ScatterAddArgs<GPUBuffer>): void {
  const { x: src, index, out, outer, size, count, inner, dtype } = args;
  const numel = outer * size * inner;
  if (numel === 0) return;
  const t = wgslType(dtype);
  const byColumn = scatterByColumn(args, rt.isCpuAdapter);
  const work = byColumn ? outer * inner : numel;
  rt.dispatch({
    name: "scatterAdd",
    key: `scatterAdd_${byColumn ? "column" : "element"}_${t}`,
    wgsl: () => (byColumn ? byColumnWgsl(t) : byElementWgsl(t)),
    signature: "rrw",
    buffers: [src, index, out],
    params: [work, size, count, inner],
    groups: groups2d(Math.ceil(work / WG)),
  });
}
