/**
 * Diagonals, blocks, index builders and picks by position: `diagonal`,
 * `diagEmbed`, `diagflat`, `blockDiag`, `trilIndices`, `triuIndices`,
 * `combinations`, `vander`, `diff`, `repeatInterleave`, `take`,
 * `takeAlongDim`, `selectScatter`, `sliceScatter`, `diagonalScatter`.
 * Compositions of the core's ops (gradients come free); index lists that
 * depend only on sizes are computed on the host.
 * @module
 */

import { noGrad } from "../autograd.ts";
import { type DType, isFloat, promoteTypes } from "../dtype.ts";
import { broadcastShapes as broadcastPair, formatShape, normalizeDim } from "../shape.ts";
import { forwardScope, tidy } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import { arange, tensor, type TensorOptions, zeros } from "../ops/factory.ts";
import { gather, where } from "../ops/indexing.ts";
import { cat, indexSelect, narrow, reshape, stack } from "../ops/view.ts";
import { checkLater } from "../ops/check.ts";
import { diagonalOf } from "./einsum.ts";
import { flip } from "./rearrange.ts";
import { cumprod, cumsum } from "./scan.ts";
import { diag } from "./structure.ts";
import { searchsorted } from "./index_ops.ts";
import { requireTensor } from "./util.ts";
import { owned } from "./owned.ts";

function requireInteger(op: string, what: string, v: unknown): asserts v is number {
  if (!Number.isInteger(v)) throw new TypeError(`${op}: ${what} must be an integer, got ${v}`);
}

function twoDims(op: string, ndim: number, dim1: number, dim2: number): [number, number] {
  const d1 = normalizeDim(dim1, ndim, op);
  const d2 = normalizeDim(dim2, ndim, op);
  if (d1 === d2) {
    throw new RangeError(`${op}: dim1 and dim2 cannot be the same dim (${dim1} and ${dim2})`);
  }
  return [d1, d2];
}

/** `x` with dims `d1`, `d2` moved last (in that order). */
function lastTwo(x: Tensor, d1: number, d2: number): Tensor {
  const rest = x.shape.map((_, i) => i).filter((i) => i !== d1 && i !== d2);
  const order = [...rest, d1, d2];
  return order.every((d, i) => d === i) ? x : x.permute(order);
}

/**
 * Diagonal `offset` (above the main one when positive) of the planes of
 * dims `dim1`, `dim2`, as `torch.diagonal`: those dims are removed and the
 * diagonal appended as the last dim (a copy, not a view).
 */
export function diagonal(x: Tensor, offset = 0, dim1 = 0, dim2 = 1): Tensor {
  requireTensor("diagonal", x, "the input");
  requireInteger("diagonal", "offset", offset);
  const [d1, d2] = twoDims("diagonal", x.ndim, dim1, dim2);
  return forwardScope(() => diagonalPlanes(lastTwo(x, d1, d2), offset));
}

/** Diagonal `k` of the last two dims of `t`, as the last dim. */
function diagonalPlanes(t: Tensor, k: number): Tensor {
  const [rows, cols] = t.shape.slice(-2);
  const lead = t.shape.slice(0, -2);
  const [r0, c0] = k >= 0 ? [0, k] : [-k, 0];
  const length = Math.max(0, Math.min(rows - r0, cols - c0));
  // Empty, but from t, so that it keeps t's graph as PyTorch's result does.
  if (length === 0) return narrow(t.reshape([...lead, rows * cols]), -1, 0, 0);
  const square = narrow(narrow(t, -2, r0, length), -1, c0, length);
  return diagonalOf(square, t.ndim - 2, t.ndim - 1);
}

/**
 * Square matrices with the last dim of `x` on diagonal `offset`, in dims
 * `dim1`, `dim2` of the result (one more dim than `x`), zeros elsewhere,
 * as `torch.diag_embed`.
 */
export function diagEmbed(x: Tensor, offset = 0, dim1 = -2, dim2 = -1): Tensor {
  requireTensor("diagEmbed", x, "the input");
  requireInteger("diagEmbed", "offset", offset);
  if (x.ndim === 0) {
    throw new RangeError("diagEmbed: expected a tensor with at least 1 dim, got a 0-d one");
  }
  const [d1, d2] = twoDims("diagEmbed", x.ndim + 1, dim1, dim2);
  return owned(() =>
    forwardScope(() => {
      const m = embedLast(x, offset);
      const n = m.ndim;
      const perm: number[] = [];
      for (let j = 0, r = 0; j < n; j++) perm.push(j === d1 ? n - 2 : j === d2 ? n - 1 : r++);
      return perm.every((d, i) => d === i) ? m : m.permute(perm);
    }), x);
}

/** [..., n] to [..., n + |k|, n + |k|] with the values on diagonal k of the last two dims. */
function embedLast(x: Tensor, k: number): Tensor {
  const n = x.shape[x.ndim - 1];
  const lead = x.shape.slice(0, -1);
  const blank = (shape: number[]) => zeros(shape, { dtype: x.dtype, device: x.device });
  // [.., n, 1] beside zeros [.., n, n] flattens to x[i] at i·(n+1): the diagonal of [n, n].
  const spread = cat([x.unsqueeze(-1), blank([...lead, n, n])], -1).reshape([
    ...lead,
    n * (n + 1),
  ]);
  const square = narrow(spread, -1, 0, n * n).reshape([...lead, n, n]);
  if (k === 0) return square;
  const a = Math.abs(k);
  const side = blank([...lead, n, a]);
  const rows = cat(k > 0 ? [side, square] : [square, side], -1);
  const band = blank([...lead, a, n + a]);
  return cat(k > 0 ? [rows, band] : [band, rows], -2);
}

/** `x` flattened, on diagonal `offset` of a square matrix, as `torch.diagflat`. */
export function diagflat(x: Tensor, offset = 0): Tensor {
  requireTensor("diagflat", x, "the input");
  return owned(() => diag(x.reshape([x.numel()]), offset), x);
}

/**
 * The tensors as blocks on the diagonal of one matrix, zeros elsewhere, as
 * `torch.block_diag`: 0-d ones count as [1, 1], 1-D [n] as [1, n]; the
 * dtype is the promoted one.
 */
export function blockDiag(...tensors: Tensor[]): Tensor {
  tensors.forEach((t, i) => {
    requireTensor("blockDiag", t, `tensor ${i}`);
    if (t.ndim > 2) {
      throw new RangeError(
        `blockDiag: tensor ${i} has ${t.ndim} dims (shape ${
          formatShape(t.shape)
        }); expected at most 2`,
      );
    }
    if (t.device !== tensors[0].device) {
      throw new Error(
        `blockDiag: tensor ${i} is on ${t.device}, tensor 0 on ${
          tensors[0].device
        }; move them with .to(device)`,
      );
    }
  });
  if (tensors.length === 0) return zeros([1, 0]);
  const dtype = resultType(tensors);
  const device = tensors[0].device;
  const blocks = tensors.map((t) => (t.ndim === 2 ? t : t.reshape([1, t.numel()])));
  const width = blocks.reduce((s, b) => s + b.shape[1], 0);
  return forwardScope(() => {
    let before = 0;
    const rows = blocks.map((b) => {
      const [r, c] = b.shape;
      const parts = [
        zeros([r, before], { dtype, device }),
        b.to(dtype),
        zeros([r, width - before - c], { dtype, device }),
      ];
      before += c;
      return cat(parts, 1);
    });
    return cat(rows, 0);
  });
}

/**
 * PyTorch's result type of several tensors: 0-d ones widen the dimensioned
 * ones' type only when of a higher kind (float beside int).
 */
function resultType(tensors: readonly Tensor[]): DType {
  const promoted = (
    ts: Tensor[],
  ) => (ts.length ? ts.map((t) => t.dtype).reduce(promoteTypes) : null);
  const wide = promoted(tensors.filter((t) => t.ndim > 0));
  const lone = promoted(tensors.filter((t) => t.ndim === 0));
  if (wide === null || lone === null) return (wide ?? lone)!;
  return isFloat(lone) && !isFloat(wide) ? promoteTypes(wide, lone) : wide;
}

/** Options of {@link trilIndices} and {@link triuIndices}. */
export type IndicesOptions = Pick<TensorOptions, "device" | "dtype">;

function triangleIndices(
  op: string,
  row: number,
  col: number,
  offset: number,
  lower: boolean,
  options: IndicesOptions,
): Tensor {
  for (const [what, v] of [["row", row], ["col", col]] as const) {
    if (!Number.isInteger(v) || v < 0) {
      throw new RangeError(`${op}: ${what} must be a non-negative integer, got ${v}`);
    }
  }
  requireInteger(op, "offset", offset);
  const rs: number[] = [];
  const cs: number[] = [];
  for (let i = 0; i < row; i++) {
    for (let j = 0; j < col; j++) {
      if (lower ? j - i <= offset : j - i >= offset) {
        rs.push(i);
        cs.push(j);
      }
    }
  }
  const { dtype = "int32", device } = options ?? {};
  return tensor([...rs, ...cs], { shape: [2, rs.length], dtype, device });
}

/**
 * The [2, N] coordinates (row, then column, in row-major order) of the
 * lower triangle of a `row`×`col` matrix on and below diagonal `offset`, as
 * `torch.tril_indices` (int32 unless `dtype`).
 */
export function trilIndices(
  row: number,
  col: number,
  offset = 0,
  options: IndicesOptions = {},
): Tensor {
  return triangleIndices("trilIndices", row, col, offset, true, options);
}

/** As {@link trilIndices} for the upper triangle, on and above diagonal `offset` (`torch.triu_indices`). */
export function triuIndices(
  row: number,
  col: number,
  offset = 0,
  options: IndicesOptions = {},
): Tensor {
  return triangleIndices("triuIndices", row, col, offset, false, options);
}

/** Options of {@link combinations}. */
export interface CombinationsOptions {
  /** Elements per combination (default 2). */
  r?: number;
  /** Whether an element may repeat in a combination (default false). */
  withReplacement?: boolean;
}

/**
 * The length-`r` combinations of the elements of a 1-D tensor, in
 * lexicographic order of positions, as `torch.combinations`: shape [C, r]
 * (`r = 0` gives an empty 1-D tensor, as PyTorch).
 */
export function combinations(x: Tensor, options: CombinationsOptions = {}): Tensor {
  requireTensor("combinations", x, "the input");
  const { r = 2, withReplacement = false } = options ?? {};
  if (x.ndim !== 1) {
    throw new RangeError(
      `combinations: expected a 1-D tensor, got shape ${formatShape(x.shape)}`,
    );
  }
  if (!Number.isInteger(r) || r < 0) {
    throw new RangeError(`combinations: r must be a non-negative integer, got ${r}`);
  }
  const n = x.shape[0];
  const picks: number[] = [];
  const current: number[] = [];
  const walk = (from: number) => {
    if (current.length === r) {
      picks.push(...current);
      return;
    }
    for (let i = from; i < n; i++) {
      current.push(i);
      walk(withReplacement ? i : i + 1);
      current.pop();
    }
  };
  if (r > 0) walk(0);
  const index = tensor(Int32Array.from(picks), { device: x.device });
  return forwardScope(() => {
    const picked = indexSelect(x, 0, index);
    return r === 0 ? picked : picked.reshape([picks.length / r, r]);
  });
}

/** Options of {@link vander}. */
export interface VanderOptions {
  /** Number of columns (default: the length of `x`). */
  N?: number;
  /** Powers rising left to right (default false: x^(N-1) first, as PyTorch). */
  increasing?: boolean;
}

/**
 * The Vandermonde matrix of a 1-D tensor, as `torch.vander`: column j is
 * x^(N-1-j) (x^j with `increasing`). Powers are running products, so the
 * gradient at 0 is finite, as PyTorch's.
 */
export function vander(x: Tensor, options: VanderOptions = {}): Tensor {
  requireTensor("vander", x, "the input");
  if (x.ndim !== 1) {
    throw new RangeError(`vander: x must be a 1-D tensor, got shape ${formatShape(x.shape)}`);
  }
  const n = x.shape[0];
  const { N = n, increasing = false } = options ?? {};
  if (!Number.isInteger(N) || N < 0) {
    throw new RangeError(`vander: N must be a non-negative integer, got ${N}`);
  }
  return forwardScope(() => {
    const column = x.reshape([n, 1]);
    if (N === 0) return narrow(column, 1, 0, 0);
    const parts = [zeros([n, 1], { dtype: x.dtype, device: x.device }).add(1)];
    if (N > 1) parts.push(cumprod(column.expand([n, N - 1]), 1));
    const rising = cat(parts, 1);
    return increasing ? rising : flip(rising, 1);
  });
}

/** Options of {@link diff}. */
export interface DiffOptions {
  /** Put before `x` along `dim` first (same dims as `x`, equal sizes elsewhere). */
  prepend?: Tensor;
  /** Put after `x` along `dim` first. */
  append?: Tensor;
}

/**
 * The `n`-th forward difference along `dim`, as `torch.diff`: each pass
 * gives `x[i+1] - x[i]`, one shorter (empty once nothing is left); with
 * `n = 0`, `x` itself (`prepend` and `append` checked, not added), as PyTorch.
 */
export function diff(x: Tensor, n = 1, dim = -1, options: DiffOptions = {}): Tensor {
  requireTensor("diff", x, "the input");
  if (!Number.isInteger(n) || n < 0) {
    throw new RangeError(`diff: order n must be a non-negative integer, got ${n}`);
  }
  if (x.ndim === 0) {
    throw new RangeError("diff: expected a tensor with at least 1 dim, got a 0-d one");
  }
  const d = normalizeDim(dim, x.ndim, "diff");
  const { prepend, append } = options ?? {};
  for (const [what, t] of [["prepend", prepend], ["append", append]] as const) {
    if (t !== undefined) {
      requireTensor("diff", t, what);
      if (t.ndim !== x.ndim || t.shape.some((m, i) => i !== d && m !== x.shape[i])) {
        throw new RangeError(
          `diff: ${what} of shape ${formatShape(t.shape)} must have the dims of x (shape ${
            formatShape(x.shape)
          }) and its sizes except along dim ${d}`,
        );
      }
    }
  }
  // As PyTorch, n = 0 gives the input itself: prepend and append are checked, not added.
  if (n === 0) return x.reshape(x.shape);
  return forwardScope(() => {
    let t = prepend || append ? cat([prepend, x, append].filter((v) => v !== undefined), d) : x;
    for (let i = 0; i < n; i++) {
      const len = t.shape[d];
      if (len === 0) break;
      t = narrow(t, d, 1, len - 1).sub(narrow(t, d, 0, len - 1));
    }
    return t;
  });
}

/** Options of {@link repeatInterleave}. */
export interface RepeatInterleaveOptions {
  /** The result's length along `dim`: needed when `repeats` is a tensor (its sum). */
  outputSize?: number;
}

/**
 * Each element (slice along `dim`; of the flattened tensor without `dim`)
 * repeated `repeats` times in place, as `torch.repeat_interleave`.
 * `repeats` is a number, one count per element (an array), or an int32
 * tensor of counts: multigrad never reads device values synchronously, so
 * a tensor needs `outputSize` (the counts' sum; a negative count or another
 * sum is an error at once for counts from the host, else at the next read).
 */
export function repeatInterleave(
  x: Tensor,
  repeats: number | readonly number[] | Tensor,
  dim?: number,
  options: RepeatInterleaveOptions = {},
): Tensor {
  requireTensor("repeatInterleave", x, "the input");
  if (dim !== undefined && x.ndim === 0) {
    throw new RangeError(`repeatInterleave: dim ${dim} given for a 0-d tensor (it has no dims)`);
  }
  const source = dim === undefined ? reshape(x, [x.numel()], "repeatInterleave", true) : x;
  const d = dim === undefined ? 0 : normalizeDim(dim, x.ndim, "repeatInterleave");
  const size = source.shape[d];
  if (typeof repeats === "number") {
    if (!Number.isInteger(repeats) || repeats < 0) {
      throw new RangeError(
        `repeatInterleave: repeats must be a non-negative integer, got ${repeats}`,
      );
    }
    const shape = source.shape;
    return owned(() =>
      forwardScope(() =>
        source.unsqueeze(d + 1)
          .expand([...shape.slice(0, d + 1), repeats, ...shape.slice(d + 1)])
          .reshape(shape.map((n, i) => (i === d ? n * repeats : n)))
      ), x);
  }
  if (repeats instanceof Tensor) {
    const { outputSize } = options ?? {};
    if (repeats.dtype !== "int32" || repeats.ndim > 1) {
      throw new TypeError(
        `repeatInterleave: repeats must be an int32 tensor of at most 1 dim, got ${repeats.dtype} of shape ${
          formatShape(repeats.shape)
        }`,
      );
    }
    if (repeats.numel() !== 1 && repeats.numel() !== size) {
      throw new RangeError(
        `repeatInterleave: ${repeats.numel()} repeats for dim ${d} of size ${size}`,
      );
    }
    if (!Number.isInteger(outputSize) || outputSize! < 0) {
      throw new TypeError(
        `repeatInterleave: with a tensor of repeats, outputSize (their sum) is required, got ${outputSize}; or pass the counts as numbers`,
      );
    }
    const known = repeats.storage.knownRange;
    if (known && repeats.numel() > 0 && known[0] < 0) {
      throw new RangeError(`repeatInterleave: repeats must not be negative, got ${known[0]}`);
    }
    const wrongSize = (sum: number) =>
      `repeatInterleave: outputSize ${outputSize} is not the sum of the repeats (${sum})`;
    if (size === 0 && outputSize !== 0) throw new RangeError(wrongSize(0));
    if (size > 0) {
      // Counts on the device are checked at the next read, as indexSelect checks its indices.
      checkLater(
        noGrad(() =>
          tidy(() => {
            const all = repeats.reshape([repeats.numel()]).expand([size]);
            return stack([all.min(), all.sum()]);
          })
        ),
        (host) =>
          host[0] < 0
            ? `repeatInterleave: repeats must not be negative, got ${host[0]}`
            : host[1] !== outputSize
            ? wrongSize(host[1])
            : null,
      );
    }
    return forwardScope(() => {
      const counts = repeats.reshape([repeats.numel()]).expand([size]);
      // Output position p comes from the element whose running count first exceeds p.
      const ends = cumsum(counts, 0);
      const positions = arange(outputSize!, { dtype: "int32", device: x.device });
      return indexSelect(source, d, searchsorted(ends, positions, { right: true }));
    });
  }
  if (!Array.isArray(repeats) || !repeats.every((r) => Number.isInteger(r) && r >= 0)) {
    throw new TypeError(
      `repeatInterleave: repeats must be a number, an array of non-negative integers or a tensor, got ${
        JSON.stringify(repeats)
      }`,
    );
  }
  if (repeats.length !== 1 && repeats.length !== size) {
    throw new RangeError(
      `repeatInterleave: ${repeats.length} repeats for dim ${d} of size ${size} (shape ${
        formatShape(x.shape)
      })`,
    );
  }
  const picks: number[] = [];
  for (let i = 0; i < size; i++) {
    for (let k = 0; k < repeats[repeats.length === 1 ? 0 : i]; k++) picks.push(i);
  }
  const index = tensor(Int32Array.from(picks), { device: x.device });
  return forwardScope(() => indexSelect(source, d, index));
}

function requireIndexTensor(op: string, index: unknown, x: Tensor): asserts index is Tensor {
  requireTensor(op, index, "the index");
  if (index.dtype !== "int32") {
    throw new TypeError(
      `${op}: the index must be an int32 tensor, got ${index.dtype} of shape ${
        formatShape(index.shape)
      }`,
    );
  }
  if (index.device !== x.device) {
    throw new Error(`${op}: the index is on ${index.device}, the input on ${x.device}`);
  }
}

/**
 * Elements of `x` as if flattened, at int32 `index` (negative ones count
 * from the end), in `index`'s shape, as `torch.take`.
 */
export function take(x: Tensor, index: Tensor): Tensor {
  requireTensor("take", x, "the input");
  requireIndexTensor("take", index, x);
  const n = x.numel();
  if (n === 0 && index.numel() > 0) {
    throw new RangeError(
      `take: cannot take ${index.numel()} elements from an empty tensor (shape ${
        formatShape(x.shape)
      })`,
    );
  }
  const known = index.storage.knownRange;
  if (known && index.numel() > 0 && (known[0] < -n || known[1] >= n)) {
    const bad = known[0] < -n ? known[0] : known[1];
    throw new RangeError(
      `take: index ${bad} is out of range for a tensor of ${n} elements (shape ${
        formatShape(x.shape)
      })`,
    );
  }
  return owned(
    () =>
      forwardScope(() => {
        const flat = index.reshape([index.numel()]);
        const wrapped = known && known[0] >= 0 ? flat : where(flat.lt(0), flat.add(n), flat);
        return indexSelect(x.reshape([n]), 0, wrapped).reshape(index.shape);
      }),
    x,
    index,
  );
}

/**
 * Values of `x` at int32 `indices` along `dim`, as `torch.take_along_dim`:
 * `x` and `indices` (same number of dims) broadcast in every other dim;
 * without `dim`, both are flattened.
 */
export function takeAlongDim(x: Tensor, indices: Tensor, dim?: number): Tensor {
  requireTensor("takeAlongDim", x, "the input");
  requireIndexTensor("takeAlongDim", indices, x);
  if (dim === undefined) {
    return forwardScope(() =>
      gather(x.reshape([x.numel()]), 0, indices.reshape([indices.numel()]))
    );
  }
  if (x.ndim !== indices.ndim) {
    throw new RangeError(
      `takeAlongDim: input of shape ${formatShape(x.shape)} and indices of shape ${
        formatShape(indices.shape)
      } must have the same number of dims`,
    );
  }
  const d = normalizeDim(dim, x.ndim, "takeAlongDim");
  const one = (s: readonly number[]) => s.map((n, i) => (i === d ? 1 : n));
  const common = broadcastPair(one(x.shape), one(indices.shape), "takeAlongDim");
  const at = (n: number) => common.map((c, i) => (i === d ? n : c));
  return forwardScope(() =>
    gather(x.expand(at(x.shape[d])), d, indices.expand(at(indices.shape[d])))
  );
}

/** `src` in the dtype of `x` (PyTorch casts it), which must be on `x`'s device. */
function sourceFor(op: string, x: Tensor, src: Tensor): Tensor {
  if (src.device !== x.device) {
    throw new TypeError(
      `${op}: src is on ${src.device}, the input on ${x.device}; they must match`,
    );
  }
  return src.dtype === x.dtype ? src : src.to(x.dtype);
}

/**
 * `x` with positions `picks` along `d` taken from `src` (whose dim `d`
 * has one entry per pick), others from `x`: a mask picks, and an index
 * spreads `src` over the whole dim, so both gradients are exact.
 */
function scatterAlong(x: Tensor, src: Tensor, d: number, picks: number[]): Tensor {
  const n = x.shape[d];
  const slot = new Int32Array(n);
  const mask = new Int32Array(n);
  picks.forEach((p, i) => {
    slot[p] = i;
    mask[p] = 1;
  });
  const shape = x.shape.map((_, i) => (i === d ? n : 1));
  const device = x.device;
  if (picks.length === 0) return x.clone();
  const spread = indexSelect(src, d, tensor(slot, { device }));
  return where(tensor(mask, { device, shape }), spread, x);
}

function requireSrcShape(op: string, src: Tensor, expected: readonly number[], x: Tensor): void {
  if (src.ndim !== expected.length || src.shape.some((n, i) => n !== expected[i])) {
    throw new RangeError(
      `${op}: src of shape ${formatShape(src.shape)} must have shape ${
        formatShape(expected)
      } (input of shape ${formatShape(x.shape)})`,
    );
  }
}

/**
 * `x` with the slice at `index` along `dim` replaced by `src` (shape of `x`
 * without `dim`), as `torch.select_scatter`.
 */
export function selectScatter(x: Tensor, src: Tensor, dim: number, index: number): Tensor {
  requireTensor("selectScatter", x, "the input");
  requireTensor("selectScatter", src, "src");
  if (x.ndim === 0) throw new RangeError("selectScatter: expected at least 1 dim, got a 0-d input");
  const d = normalizeDim(dim, x.ndim, "selectScatter");
  const n = x.shape[d];
  requireInteger("selectScatter", "index", index);
  if (index < -n || index >= n) {
    throw new RangeError(
      `selectScatter: index ${index} is out of range for dim ${d} of size ${n} (shape ${
        formatShape(x.shape)
      })`,
    );
  }
  requireSrcShape("selectScatter", src, x.shape.filter((_, i) => i !== d), x);
  const i = index < 0 ? index + n : index;
  return forwardScope(() =>
    scatterAlong(x, sourceFor("selectScatter", x, src).unsqueeze(d), d, [i])
  );
}

/** Options of {@link sliceScatter}: the slice, as Python's `start:end:step` along `dim`. */
export interface SliceScatterOptions {
  /** Default 0. */
  dim?: number;
  /** Default 0 (negative counts from the end). */
  start?: number;
  /** Default the size (negative counts from the end; past it is clipped). */
  end?: number;
  /** Default 1 (must be positive). */
  step?: number;
}

/**
 * `x` with the slice `start:end:step` along `dim` replaced by `src`, as
 * `torch.slice_scatter`.
 */
export function sliceScatter(x: Tensor, src: Tensor, options: SliceScatterOptions = {}): Tensor {
  requireTensor("sliceScatter", x, "the input");
  requireTensor("sliceScatter", src, "src");
  if (x.ndim === 0) throw new RangeError("sliceScatter: expected at least 1 dim, got a 0-d input");
  const { dim = 0, start, end, step = 1 } = options ?? {};
  const d = normalizeDim(dim, x.ndim, "sliceScatter");
  const n = x.shape[d];
  if (!Number.isInteger(step) || step <= 0) {
    throw new RangeError(`sliceScatter: step must be a positive integer, got ${step}`);
  }
  const bound = (v: number | undefined, fallback: number, what: string) => {
    if (v === undefined) return fallback;
    requireInteger("sliceScatter", what, v);
    return Math.min(n, Math.max(0, v < 0 ? v + n : v));
  };
  const s = bound(start, 0, "start");
  const e = bound(end, n, "end");
  const picks: number[] = [];
  for (let i = s; i < e; i += step) picks.push(i);
  requireSrcShape("sliceScatter", src, x.shape.map((m, i) => (i === d ? picks.length : m)), x);
  return forwardScope(() => scatterAlong(x, sourceFor("sliceScatter", x, src), d, picks));
}

/**
 * `x` with diagonal `offset` of the planes of `dim1`, `dim2` replaced by
 * `src` (shaped as `diagonal(x, offset, dim1, dim2)`), as
 * `torch.diagonal_scatter`.
 */
export function diagonalScatter(
  x: Tensor,
  src: Tensor,
  offset = 0,
  dim1 = 0,
  dim2 = 1,
): Tensor {
  requireTensor("diagonalScatter", x, "the input");
  requireTensor("diagonalScatter", src, "src");
  requireInteger("diagonalScatter", "offset", offset);
  const [d1, d2] = twoDims("diagonalScatter", x.ndim, dim1, dim2);
  const [rows, cols] = [x.shape[d1], x.shape[d2]];
  const [r0, c0] = offset >= 0 ? [0, offset] : [-offset, 0];
  const length = Math.max(0, Math.min(rows - r0, cols - c0));
  const rest = x.shape.filter((_, i) => i !== d1 && i !== d2);
  requireSrcShape("diagonalScatter", src, [...rest, length], x);
  if (length === 0) return x.clone();
  return forwardScope(() => {
    // src on the diagonal of [.., m, m] (m = length + |offset|), trimmed or padded to rows × cols.
    let planes = embedLast(sourceFor("diagonalScatter", x, src), offset);
    const fit = (t: Tensor, axis: number, size: number) => {
      const have = t.shape[axis];
      if (have === size) return t;
      if (have > size) return narrow(t, axis, 0, size);
      const pad = t.shape.map((m, i) => (i === axis ? size - have : m));
      return cat([t, zeros(pad, { dtype: t.dtype, device: t.device })], axis);
    };
    planes = fit(fit(planes, planes.ndim - 2, rows), planes.ndim - 1, cols);
    const n = x.ndim;
    const perm: number[] = [];
    for (let j = 0, r = 0; j < n; j++) perm.push(j === d1 ? n - 2 : j === d2 ? n - 1 : r++);
    const placed = perm.every((p, i) => p === i) ? planes : planes.permute(perm);
    const mask = new Int32Array(rows * cols);
    for (let i = 0; i < length; i++) mask[(r0 + i) * cols + c0 + i] = 1;
    const maskShape = x.shape.map((_, i) => (i === d1 ? rows : i === d2 ? cols : 1));
    // The mask is [rows, cols] in row-major order; put it in dims d1, d2.
    const m2 = tensor(mask, { device: x.device, shape: [rows, cols] });
    const maskT = d1 < d2 ? m2 : m2.transpose(0, 1);
    return where(maskT.reshape(maskShape), placed, x);
  });
}
