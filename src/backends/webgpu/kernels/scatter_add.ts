/**
 * `scatterAdd`: the adjoint of `gather`. WGSL has no float atomics, so the
 * sums are made without them, deterministically and in the cpu loop's order
 * (ascending source index), by one of two variants chosen per shape:
 * - per output element: each sums its own matches over the index axis,
 *   `count` reads per output element (plenty of parallelism, quadratic work);
 * - per column (o, i): one invocation adds every source of its column in
 *   turn (zeroed by a pass before), `size + count` steps (linear work, only
 *   `outer · inner` invocations). A max pool's gradient is this shape:
 *   `size` = H·W inputs per plane, `count` = OH·OW maxima, one column per
 *   plane.
 * @module
 */

import type { ScatterAddArgs } from "../../backend.ts";
import { groups2d, LOOP_STEPS, type Runtime } from "../runtime.ts";
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
  let chunk = pu(4u) * ${LOOP_STEPS}u;
  var acc = ${literals(t).zero};
  if (chunk > 0u) { acc = out[idx]; }
  for (var j = chunk; j < min(count, chunk + ${LOOP_STEPS}u); j++) {
    let k = first + j * inner;
    if (index[k] == r) { acc += src[k]; }
  }
  out[idx] = acc;
}
`;
}

function byColumnWgsl(t: "f32" | "i32"): string {
  // Word 0 is the column count here; the invocation owns column (o, i), sources j of word 4's
  // chunk; `out` is zeroed before the first.
  return PARAMS_WGSL + storage(1, "src", t, false) + storage(2, "index", "i32", false) +
    storage(3, "out", t, true) + main1d(WG) +
    `  let size = pu(1u);
  let count = pu(2u);
  let inner = pu(3u);
${coordinates("idx", ["o", "i"], ["inner"])}
  let dst = o * size * inner + i;
  let first = o * count * inner + i;
  let chunk = pu(4u) * ${LOOP_STEPS}u;
  for (var j = chunk; j < min(count, chunk + ${LOOP_STEPS}u); j++) {
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
  if (!byColumn) {
    for (let chunk = 0; chunk === 0 || chunk * LOOP_STEPS < count; chunk++) {
      rt.dispatch({
        name: "scatterAdd",
        key: `scatterAdd_element_${t}`,
        wgsl: () => byElementWgsl(t),
        signature: "rrw",
        buffers: [src, index, out],
        params: [numel, size, count, inner, chunk],
        groups: groups2d(Math.ceil(numel / WG)),
      });
    }
    return;
  }
  rt.dispatch({
    name: "scatterAdd",
    key: `scatterAdd_zero_${t}`,
    wgsl: () =>
      PARAMS_WGSL + storage(1, "out", t, true) + main1d(WG) +
      `  out[idx] = ${literals(t).zero};\n}\n`,
    signature: "w",
    buffers: [out],
    params: [numel],
    groups: groups2d(Math.ceil(numel / WG)),
  });
  for (let chunk = 0; chunk * LOOP_STEPS < count; chunk++) {
    rt.dispatch({
      name: "scatterAdd",
      key: `scatterAdd_column_${t}`,
      wgsl: () => byColumnWgsl(t),
      signature: "rrw",
      buffers: [src, index, out],
      params: [outer * inner, size, count, inner, chunk],
      groups: groups2d(Math.ceil((outer * inner) / WG)),
    });
  }
}
