/**
 * Sorting along a dim: `sort`, `argsort`, `topk`, by the backend's `sort`
 * kernel where it has one, else by a bitonic network of elementwise kernels,
 * so every backend sorts without a sort kernel.
 * @module
 */

import { noGrad, record } from "../autograd.ts";
import { type DType, isFloat } from "../dtype.ts";
import { axisSplit, formatShape, normalizeDim } from "../shape.ts";
import { tidy } from "../storage.ts";
import type { Tensor } from "../tensor.ts";
import { arange, full, tensor } from "../ops/factory.ts";
import { gatherInRange, scatterToIndex } from "../ops/indexing.ts";
import { cat, clone, indexSelect, narrow } from "../ops/view.ts";
import { cachedConstant, empty, hasKernel, launch } from "../ops/util.ts";
import { valuesIndices } from "./util.ts";

/**
 * Values and their int32 indices, as PyTorch's `(values, indices)` named
 * tuple: `const [v, i] = x.sort()` or `x.sort().values`.
 */
export type ValuesIndices = readonly [values: Tensor, indices: Tensor] & {
  /** The values. */
  readonly values: Tensor;
  /** Where each value was along the dim (int32; PyTorch: int64). */
  readonly indices: Tensor;
};

const constants = new Map<string, Tensor>();

/**
 * The two keys of every element, the dim padded to `N` with elements that
 * sort after all others: the value, NaN read as +inf; and the position, moved
 * by N after every other position for NaN (ascending; before, descending), so
 * that NaN follows +inf ascending and precedes it descending.
 */
function keys(x: Tensor, d: number, N: number, descending: boolean, positions: Tensor): Tensor[] {
  const float = isFloat(x.dtype);
  const [low, high] = float ? [-Infinity, Infinity] : [-(2 ** 31), 2 ** 31 - 1];
  const pad = x.shape.map((s, i) => (i === d ? N - x.shape[d] : s));
  const filler = full(pad, descending ? low : high, { dtype: x.dtype, device: x.device });
  const padded = N === x.shape[d] ? x : cat([x, filler], d);
  if (!float) return [padded, positions.expand(padded.shape)];
  const nan = padded.ne(padded);
  return [padded.where(nan.eq(0), Infinity), nan.mul(descending ? -N : N).add(positions)];
}

/**
 * One stage of the network: of each element and its partner (the element
 * `partner` names), the one that comes first in the order (value, then
 * position) is kept where `earlier` is 1, the other elsewhere.
 */
function exchange(
  [value, position]: Tensor[],
  d: number,
  partner: Tensor,
  earlier: Tensor,
  descending: boolean,
): Tensor[] {
  const pv = indexSelect(value, d, partner);
  const pp = indexSelect(position, d, partner);
  const wins = descending ? pv.gt(value) : pv.lt(value);
  const partnerFirst = pp.lt(position).where(pv.eq(value), wins);
  const take = partnerFirst.eq(earlier);
  return [pv.where(take, value), pp.where(take, position)];
}

/**
 * The int32 indices that sort `x` along `d` (at least 2 long), stably, NaN
 * after +inf ascending and before it descending, as PyTorch. The elements'
 * keys (see {@link keys}) are all distinct, so the network needs no tie rule:
 * log₂N (log₂N + 1) / 2 stages of {@link exchange} (Batcher's bitonic sort),
 * about ten kernels each.
 */
/** The longest padded dim whose stage tables are cached (about 1.3 MB of them per dtype and device). */
const CACHED_LENGTH = 4096;

/** @internal The network's indices (see above), for backends without a `sort` kernel. */
export function networkSortIndices(x: Tensor, d: number, descending: boolean): Tensor {
  const n = x.shape[d];
  const N = 2 ** Math.ceil(Math.log2(n));
  const { device } = x;
  if (x.dtype === "float32" && N > 2 ** 22) {
    throw new RangeError(
      `sort: a float32 dim of ${n} elements is more than this sort handles (2^22: positions are float32 keys)`,
    );
  }
  // Constants over the padded dim. Up to CACHED_LENGTH they are uploaded once per device; the
  // network's stage tables total about N·log²N/2 values, so longer dims make them per stage
  // (freed with it) rather than keep hundreds of MiB in the cache.
  const make = (dtype: DType, at: (i: number) => number) =>
    tensor(Array.from({ length: N }, (_, i) => at(i)), { dtype, device });
  const table = (key: string, dtype: DType, at: (i: number) => number) =>
    N > CACHED_LENGTH ? make(dtype, at) : cachedConstant(
      constants,
      256,
      `${device}|${dtype}|${N} ${key}`,
      device,
      () => make(dtype, at),
    );
  const along = (t: Tensor) => t.reshape(x.shape.map((_, i) => (i === d ? N : 1)));
  return noGrad(() =>
    tidy(() => {
      // Padding's positions come after every other key, NaN's included.
      const positions = table(`positions ${n}`, x.dtype, (i) => (i < n ? i : i + 2 * N));
      let pair = keys(x, d, N, descending, along(positions));
      // Past CACHED_LENGTH the stage tables come from the device: 2N host numbers per stage
      // took most of the time (a sort of 2^20 elements: a minute on cpu). Bit b of i is
      // ⌊i/b⌋ - 2⌊i/2b⌋, exact in float32 up to 2^24 (b a power of two; a product, since WGSL
      // may round a quotient).
      const onDevice = N > CACHED_LENGTH && N <= 2 ** 24;
      const index = onDevice ? arange(N, { dtype: "float32", device }) : null;
      const bit = (b: number) =>
        index!.mul(1 / b).floor().sub(index!.mul(1 / (2 * b)).floor().mul(2));
      for (let k = 2; k <= N; k *= 2) {
        const bitK = index ? bit(k) : null;
        for (let j = k / 2; j >= 1; j /= 2) {
          const early = (i: number) => Number(((i & j) === 0) === ((i & k) === 0));
          const next = tidy(() => {
            const bitJ = index ? bit(j) : null;
            const partner = bitJ
              ? index!.add(bitJ.mul(-2 * j).add(j)).to("int32")
              : table(`partner ${j}`, "int32", (i) => i ^ j);
            const earlier = along(
              bitJ ? bitJ.eq(bitK!).to(x.dtype) : table(`earlier ${j} ${k}`, x.dtype, early),
            );
            return exchange(pair, d, partner, earlier, descending);
          });
          for (const t of pair) if (t !== x) t.dispose();
          pair = next;
        }
        bitK?.dispose();
      }
      // The first n are the elements; their positions without NaN's shift.
      const sorted = narrow(pair[1], d, 0, n);
      if (!isFloat(x.dtype)) return sorted.to("int32");
      const shift = descending ? sorted.lt(0).mul(N) : sorted.ge(N).mul(-N);
      return sorted.add(shift).to("int32");
    })
  );
}

/**
 * Values and indices from the backend's `sort` kernel (one launch, `d` any
 * dim), the first `k` along `d` (topk: the kernel may select, not sort); the values' gradient goes back to where each came from (twice
 * differentiable, as the network's gather).
 */
function kernelSort(x: Tensor, d: number, descending: boolean, k = x.shape[d]): ValuesIndices {
  const shape = x.shape.map((s, i) => (i === d ? k : s));
  const values = empty(shape, x.dtype, x.device);
  const indices = empty(shape, "int32", x.device);
  const { outer, size, inner } = axisSplit(x.shape, d);
  const buffers = { values: values.storage.buffer(), indices: indices.storage.buffer() };
  const args = { x: x.storage.buffer("sort"), ...buffers, outer, size, inner, k, descending };
  launch(x.device, "sort", { ...args, dtype: x.dtype });
  record("sort", [x], values, ([g]) => [scatterToIndex(g!, d, indices, size, "sort")]);
  return valuesIndices(values, indices);
}

/** The int32 indices that sort `x` along `d`: the kernel's where the backend has it. */
function sortIndices(x: Tensor, d: number, descending: boolean): Tensor {
  if (!hasKernel(x.device, "sort")) return networkSortIndices(x, d, descending);
  const [values, indices] = noGrad(() => kernelSort(x, d, descending));
  values.dispose();
  return indices;
}

/**
 * Indices of `x` (as int32, `k` of them along `d`) when there is nothing to
 * sort: 0-d, empty, or one element along `d`.
 */
function trivial(x: Tensor, d: number, k = x.ndim === 0 ? 1 : x.shape[d]): Tensor | null {
  if (x.ndim > 0 && x.numel() > 0 && x.shape[d] > 1) return null;
  return full(x.shape.map((s, i) => (i === d ? k : s)), 0, { dtype: "int32", device: x.device });
}

/**
 * The values along `dim` sorted (ascending unless `descending`) and where
 * each came from, as `torch.sort`: NaN sorts after +inf (first when
 * descending). The sort is stable (PyTorch's `stable=True`; its default may
 * order equal values' indices otherwise). The gradient goes back to where
 * each value came from.
 */
export function sort(x: Tensor, dim = -1, descending = false): ValuesIndices {
  const d = normalizeDim(dim, x.ndim, "sort");
  const trivially = trivial(x, d);
  if (!trivially && hasKernel(x.device, "sort")) return kernelSort(x, d, descending);
  const indices = trivially ?? sortIndices(x, d, descending);
  const values = x.ndim === 0 ? clone(x) : gatherInRange(x, d, indices);
  return valuesIndices(values, indices);
}

/** The int32 indices that sort `x` along `dim`, as `torch.argsort` (stable; see {@link sort}). */
export function argsort(x: Tensor, dim = -1, descending = false): Tensor {
  const d = normalizeDim(dim, x.ndim, "argsort");
  return trivial(x, d) ?? sortIndices(x, d, descending);
}

/**
 * The `k` largest (smallest unless `largest`) values along `dim` and their
 * indices, as `torch.topk`, in sorted order (also when `sorted` is false,
 * where PyTorch leaves the order open). NaN counts as the largest. Among
 * equal values the earlier index is taken; PyTorch's choice among ties is
 * unspecified and may differ.
 */
export function topk(x: Tensor, k: number, dim = -1, largest = true, sorted = true): ValuesIndices {
  void sorted; // false allows any order, the sorted one included
  const d = normalizeDim(dim, x.ndim, "topk");
  const size = x.ndim === 0 ? 1 : x.shape[d];
  if (!Number.isInteger(k) || k < 0 || k > size) {
    throw new RangeError(
      `topk: k = ${k} is out of range for dim ${d} of size ${size} (shape ${
        formatShape(x.shape)
      }): expected 0 to ${size}`,
    );
  }
  if (x.ndim === 0) {
    return valuesIndices(clone(x), full([], 0, { dtype: "int32", device: x.device }));
  }
  // Nothing to sort still leaves k indices along d, not all of them ([1] with k = 0 gives [0]).
  const trivially = trivial(x, d, k);
  if (!trivially && hasKernel(x.device, "sort")) return kernelSort(x, d, largest, k);
  const stages = Math.ceil(Math.log2(size)) * (Math.ceil(Math.log2(size)) + 1) / 2;
  // Without a sort kernel, a few largest values cost a few kernels per value where the network
  // costs about ten per stage (a top-5 of 1,000 classes: 45 kernels instead of 550).
  const indices = trivially ??
    (largest && k > 0 && k < stages && k <= 16
      ? largestByRounds(x, d, k)
      : noGrad(() => narrow(sortIndices(x, d, largest), d, 0, k)));
  return valuesIndices(gatherInRange(x, d, indices), indices);
}

/**
 * The indices of the `k` largest elements along `d`, in order, one round
 * each: the largest of those not taken yet (NaN first, then the earliest
 * index among equals, as the stable sort gives them).
 */
function largestByRounds(x: Tensor, d: number, k: number): Tensor {
  return noGrad(() =>
    tidy(() => {
      const n = x.shape[d];
      const lowest = isFloat(x.dtype) ? -Infinity : -(2 ** 31);
      const positions = arange(n, { dtype: "int32", device: x.device })
        .reshape(x.shape.map((_, i) => (i === d ? n : 1)));
      const nan = isFloat(x.dtype) ? x.ne(x) : null;
      let open = x.eq(x).maximum(nan ?? 0); // 1 everywhere, in x's dtype
      const picks: Tensor[] = [];
      for (let round = 0; round < k; round++) {
        const best = x.where(open, lowest).max(d, true);
        let hit = x.eq(best);
        // NaN is the largest: while one is open, the open NaNs are the candidates.
        if (nan) hit = hit.maximum(nan.mul(best.ne(best)));
        const pick = hit.mul(open).argmax(d, true);
        picks.push(pick);
        open = open.mul(positions.ne(pick).to(x.dtype));
      }
      return cat(picks, d);
    })
  );
}
