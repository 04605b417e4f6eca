/**
 * `sort` (optional fused kernel): a bitonic sort of each row's (key,
 * position) pairs in scratch buffers, padded to a power of two. Keys are u32
 * whose order is the contract's, made from the bits alone (no float
 * comparisons: compilers may fold NaN tests, and GL once did): a float's
 * sign flipped (negatives: every bit), -0 as +0, every NaN above +inf; int32
 * offset by 2^31; complemented for descending. The position breaks ties, so
 * every pair is distinct and the network is stable. Stages whose partners
 * lie within a block of {@link BLOCK} run in workgroup memory, many per
 * dispatch; the longer ones one dispatch each.
 * @module
 */

import type { SortArgs } from "../../backend.ts";
import { groups2d, type Runtime } from "../runtime.ts";
import { coordinates, main1d, mainPerWorkgroup, PARAMS_WGSL, storage, wgslType } from "../wgsl.ts";

const WG = 256;
/** Pairs sorted in workgroup memory: 2 per invocation. */
const BLOCK = 2 * WG;

/** `after(a, b)`: whether pair a (key, position) comes after pair b, keys first. */
const EXCHANGE_WGSL = `
fn after(ka: u32, ia: u32, kb: u32, ib: u32) -> bool { return ka > kb || (ka == kb && ia > ib); }
`;

/** The keys and positions of every row, padding (key all ones, positions >= size) last. */
function initWgsl(): string {
  return PARAMS_WGSL + storage(1, "x", "u32", false) + storage(2, "keys", "u32", true) +
    storage(3, "ids", "u32", true) + main1d(WG) + `
  let logN = pu(1u);
  let size = pu(2u);
  let inner = pu(3u);
  let flags = pu(4u);
  let t = idx >> logN;
  let r = idx & ((1u << logN) - 1u);
  var key = 0xffffffffu;
  if (r < size) {
    let b = x[((t / inner) * size + r) * inner + t % inner];
    if ((flags & 1u) == 0u) {
      key = b ^ 0x80000000u;
    } else if ((b & 0x7fffffffu) > 0x7f800000u) {
      key = 0xffffffffu;
    } else if ((b & 0x7fffffffu) == 0u) {
      key = 0x80000000u;
    } else if ((b & 0x80000000u) != 0u) {
      key = ~b;
    } else {
      key = b | 0x80000000u;
    }
    if ((flags & 2u) != 0u) { key = ~key; }
  }
  keys[idx] = key;
  ids[idx] = r;
}
`;
}

/** One stage (k, j) over the whole scratch: an invocation per pair. */
function stageWgsl(): string {
  return PARAMS_WGSL + EXCHANGE_WGSL + storage(1, "keys", "u32", true) +
    storage(2, "ids", "u32", true) + main1d(WG) + `
  let logN = pu(1u);
  let k = pu(2u);
  let j = pu(3u);
  let t = idx >> (logN - 1u);
  let q = idx & ((1u << (logN - 1u)) - 1u);
  let lo = ((q & ~(j - 1u)) << 1u) | (q & (j - 1u));
  let a = (t << logN) | lo;
  let b = a | j;
  let ka = keys[a];
  let kb = keys[b];
  let ia = ids[a];
  let ib = ids[b];
  if (after(ka, ia, kb, ib) == ((lo & k) == 0u)) {
    keys[a] = kb;
    keys[b] = ka;
    ids[a] = ib;
    ids[b] = ia;
  }
}
`;
}

/**
 * Stages (k, j) for k from `k0` (starting at j = `j0`) to `k1` (each down to
 * j = 1) of one block of `B` pairs per workgroup, in workgroup memory.
 */
function localWgsl(): string {
  return PARAMS_WGSL + EXCHANGE_WGSL + storage(1, "keys", "u32", true) +
    storage(2, "ids", "u32", true) +
    `var<workgroup> sk: array<u32, ${BLOCK}>;\nvar<workgroup> si: array<u32, ${BLOCK}>;\n` +
    mainPerWorkgroup(WG) + `
  let logN = pu(0u);
  let B = pu(1u);
  let k1 = pu(3u);
  let base = g * B;
  let rowMask = (1u << logN) - 1u;
  for (var e = lid; e < B; e += ${WG}u) {
    sk[e] = keys[base + e];
    si[e] = ids[base + e];
  }
  workgroupBarrier();
  var k = pu(2u);
  var j = pu(4u);
  loop {
    if (lid < B / 2u) {
      let lo = ((lid & ~(j - 1u)) << 1u) | (lid & (j - 1u));
      let hi = lo | j;
      let ka = sk[lo];
      let kb = sk[hi];
      let ia = si[lo];
      let ib = si[hi];
      if (after(ka, ia, kb, ib) == ((((base + lo) & rowMask) & k) == 0u)) {
        sk[lo] = kb;
        sk[hi] = ka;
        si[lo] = ib;
        si[hi] = ia;
      }
    }
    workgroupBarrier();
    if (j > 1u) {
      j = j >> 1u;
    } else {
      if (k >= k1) { break; }
      k = k << 1u;
      j = k >> 1u;
    }
  }
  for (var e = lid; e < B; e += ${WG}u) {
    keys[base + e] = sk[e];
    ids[base + e] = si[e];
  }
}
`;
}

/** Each row's first `k` positions, and the values they name. */
function finishWgsl(): string {
  return PARAMS_WGSL + storage(1, "x", "u32", false) + storage(2, "ids", "u32", false) +
    storage(3, "values", "u32", true) + storage(4, "indices", "u32", true) + main1d(WG) + `
  let logN = pu(1u);
  let size = pu(2u);
  let inner = pu(3u);
  let k = pu(4u);
${
    coordinates("idx", ["o", "r", "i"], ["k", "inner"])
  }  let src = ids[((o * inner + i) << logN) | r];
  indices[idx] = src;
  values[idx] = x[(o * size + src) * inner + i];
}
`;
}

/** Records the sort of every row of the [outer, size, inner] view (see {@link SortArgs}). */
export function sort(rt: Runtime, args: SortArgs<GPUBuffer>): void {
  const { x, values, indices, outer, size, inner, k, descending, dtype } = args;
  const float = wgslType(dtype) === "f32";
  const rows = outer * inner;
  if (rows * k === 0) return;
  const logN = Math.max(1, Math.ceil(Math.log2(size)));
  const N = 2 ** logN;
  if (rows * N * 4 > rt.maxBinding) {
    // The network fallback would pad to N too (a tensor as large), so it is no way out.
    throw new RangeError(
      `webgpu sort: the [outer, size, inner] = [${outer}, ${size}, ${inner}] ${dtype} view needs ${
        rows * N * 4
      } bytes of scratch (${rows} rows padded to ${N}), more than the adapter's storage binding limit of ${rt.maxBinding} bytes; sort fewer or shorter rows at a time`,
    );
  }
  const keys = rt.storage.acquire(rows * N * 4);
  const ids = rt.storage.acquire(rows * N * 4);
  const flags = (float ? 1 : 0) | (descending ? 2 : 0);
  rt.dispatch({
    name: "sort",
    key: "sort_init",
    wgsl: initWgsl,
    signature: "rww",
    buffers: [x, keys, ids],
    params: [rows * N, logN, size, inner, flags],
    groups: groups2d(Math.ceil((rows * N) / WG)),
  });
  const B = Math.min(N, BLOCK);
  const local = (k0: number, k1: number, j0: number) =>
    rt.dispatch({
      name: "sort",
      key: "sort_local",
      wgsl: localWgsl,
      signature: "ww",
      buffers: [keys, ids],
      params: [logN, B, k0, k1, j0],
      groups: groups2d((rows * N) / B),
    });
  local(2, B, 1);
  for (let k = 2 * B; k <= N; k *= 2) {
    for (let j = k / 2; j >= B; j /= 2) {
      rt.dispatch({
        name: "sort",
        key: "sort_stage",
        wgsl: stageWgsl,
        signature: "ww",
        buffers: [keys, ids],
        params: [(rows * N) / 2, logN, k, j],
        groups: groups2d(Math.ceil((rows * N) / 2 / WG)),
      });
    }
    local(k, k, B / 2);
  }
  rt.dispatch({
    name: "sort",
    key: "sort_finish",
    wgsl: finishWgsl,
    signature: "rrww",
    buffers: [x, ids, values, indices],
    params: [rows * k, logN, size, inner, k],
    groups: groups2d(Math.ceil((rows * k) / WG)),
  });
  // Later kernels that reuse these buffers are recorded after this one, so
  // queue order makes the early release safe.
  rt.release(keys);
  rt.release(ids);
}
