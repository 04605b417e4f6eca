/**
 * Products beside `matmul`: `mm`, `bmm`, `mv`, `dot`, `vdot`, `inner`,
 * `tensordot`, the scaled sums `addmm`, `addmv`, `addr`, `addbmm`,
 * `baddbmm`, and `ger`, `chainMatmul`. Every matrix product is one call
 * of the core's `matmul` (one batched kernel), so these cost what it does.
 * @module
 */

import { isFloat } from "../dtype.ts";
import { formatShape, normalizeDim } from "../shape.ts";
import { forwardScope } from "../storage.ts";
import type { Tensor } from "../tensor.ts";
import { matmul } from "../ops/linalg.ts";
import { where } from "../ops/indexing.ts";
import { ones } from "../ops/factory.ts";
import { outer } from "./rearrange.ts";
import { requireTensor } from "./util.ts";
import { owned } from "./owned.ts";

/** Options of the scaled products (`addmm`, `addmv`, `addr`, `addbmm`, `baddbmm`). */
export interface AddProductOptions {
  /** Factor of `input` (default 1; with 0, `input` is ignored, NaN included, as PyTorch). */
  beta?: number;
  /** Factor of the product (default 1). */
  alpha?: number;
}

function requireDims(op: string, what: string, t: unknown, ndim: number): asserts t is Tensor {
  requireTensor(op, t, what);
  if (t.ndim !== ndim) {
    const kind = ndim === 1 ? "1-D (a vector)" : ndim === 2 ? "2-D (a matrix)" : `${ndim}-D`;
    throw new RangeError(`${op}: ${what} must be ${kind}, got shape ${formatShape(t.shape)}`);
  }
}

function sameDType(op: string, ...ts: Tensor[]): void {
  const other = ts.find((t) => t.dtype !== ts[0].dtype);
  if (other) {
    throw new TypeError(
      `${op}: expected one dtype, got ${ts.map((t) => t.dtype).join(" and ")}; convert with .to()`,
    );
  }
}

/** The product of two matrices [n, m] and [m, p], as `torch.mm` (no broadcasting). */
export function mm(a: Tensor, b: Tensor): Tensor {
  requireDims("mm", "the first argument", a, 2);
  requireDims("mm", "the second argument", b, 2);
  return matmul(a, b);
}

/**
 * Batched matrix product of [B, n, m] and [B, m, p], as `torch.bmm` (the
 * batch sizes must be equal: no broadcasting, unlike `matmul`).
 */
export function bmm(a: Tensor, b: Tensor): Tensor {
  requireDims("bmm", "batch1", a, 3);
  requireDims("bmm", "batch2", b, 3);
  if (a.shape[0] !== b.shape[0]) {
    throw new RangeError(
      `bmm: batch sizes differ (${a.shape[0]} vs ${b.shape[0]}) for shapes ${
        formatShape(a.shape)
      } and ${formatShape(b.shape)}`,
    );
  }
  return matmul(a, b);
}

/** Matrix [n, m] times vector [m], as `torch.mv`. */
export function mv(a: Tensor, v: Tensor): Tensor {
  requireDims("mv", "the matrix", a, 2);
  requireDims("mv", "the vector", v, 1);
  return matmul(a, v);
}

/** Σ a[i]·b[i] of two 1-D tensors of one size and dtype (0-d), as `torch.dot`. */
export function dot(a: Tensor, b: Tensor): Tensor {
  return vectorDot("dot", a, b);
}

/** As {@link dot} (`torch.vdot`: the first is conjugated, a no-op for real tensors). */
export function vdot(a: Tensor, b: Tensor): Tensor {
  return vectorDot("vdot", a, b);
}

function vectorDot(op: string, a: Tensor, b: Tensor): Tensor {
  requireDims(op, "the first argument", a, 1);
  requireDims(op, "the second argument", b, 1);
  if (a.shape[0] !== b.shape[0]) {
    throw new RangeError(
      `${op}: the vectors have different sizes (${a.shape[0]} and ${b.shape[0]})`,
    );
  }
  sameDType(op, a, b);
  // An elementwise product and sum serves int32 too (the kernel is float only).
  return forwardScope(() => a.mul(b).sum());
}

function pairDims(op: string, dims: unknown, a: Tensor, b: Tensor): [number[], number[]] {
  const fail = (why: string): never => {
    throw new RangeError(
      `${op}: ${why} (dims ${JSON.stringify(dims)}, shapes ${formatShape(a.shape)} and ${
        formatShape(b.shape)
      })`,
    );
  };
  if (typeof dims === "number") {
    if (!Number.isInteger(dims) || dims < 0) fail("dims must be a non-negative integer");
    if (dims > a.ndim || dims > b.ndim) fail(`cannot contract ${dims} dims`);
    return [
      Array.from({ length: dims }, (_, i) => a.ndim - dims + i),
      Array.from({ length: dims }, (_, i) => i),
    ];
  }
  if (!Array.isArray(dims) || dims.length !== 2) {
    throw new TypeError(
      `${op}: dims must be a number or a pair [dimsA, dimsB], got ${JSON.stringify(dims)}`,
    );
  }
  const list = (v: unknown): number[] => (typeof v === "number" ? [v] : Array.isArray(v) ? v : []);
  const [da, db] = [list(dims[0]), list(dims[1])];
  if (da.length !== db.length) fail("both operands need the same number of dims");
  const na = da.map((d) => normalizeDim(d, a.ndim, op));
  const nb = db.map((d) => normalizeDim(d, b.ndim, op));
  if (new Set(na).size !== na.length || new Set(nb).size !== nb.length) fail("a dim repeats");
  return [na, nb];
}

/**
 * Sums of products over `dims` of `a` and `b`, as `torch.tensordot`: a
 * number `k` contracts the last `k` dims of `a` with the first `k` of `b`;
 * a pair `[dimsA, dimsB]` names them. The result has `a`'s other dims, then
 * `b`'s; one matrix product computes it.
 */
export function tensordot(
  a: Tensor,
  b: Tensor,
  dims: number | readonly [number | readonly number[], number | readonly number[]] = 2,
): Tensor {
  requireTensor("tensordot", a, "a");
  requireTensor("tensordot", b, "b");
  const [da, db] = pairDims("tensordot", dims, a, b);
  // As PyTorch, a contracted dim of size 1 broadcasts against the other's (0 included).
  const sizes = da.map((d, i) => (a.shape[d] === 1 ? b.shape[db[i]] : a.shape[d]));
  da.forEach((d, i) => {
    const [na, nb] = [a.shape[d], b.shape[db[i]]];
    if (na !== nb && na !== 1 && nb !== 1) {
      throw new RangeError(
        `tensordot: contracted dims differ in size: dim ${d} of a (shape ${
          formatShape(a.shape)
        }) has ${a.shape[d]}, dim ${db[i]} of b (shape ${formatShape(b.shape)}) has ${
          b.shape[db[i]]
        }`,
      );
    }
  });
  sameDType("tensordot", a, b);
  const freeA = a.shape.map((_, i) => i).filter((i) => !da.includes(i));
  const freeB = b.shape.map((_, i) => i).filter((i) => !db.includes(i));
  const size = (t: Tensor, dims: number[]) => dims.reduce((p, d) => p * t.shape[d], 1);
  const k = sizes.reduce((p, n) => p * n, 1);
  return forwardScope(() => {
    const widened = (t: Tensor, dims: number[]) =>
      dims.some((d, i) => t.shape[d] !== sizes[i])
        ? t.expand(t.shape.map((n, j) => (dims.includes(j) ? sizes[dims.indexOf(j)] : n)))
        : t;
    const ordered = (t: Tensor, order: number[]) =>
      order.every((d, i) => d === i) ? t : t.permute(order);
    const a2 = ordered(widened(a, da), [...freeA, ...da]).reshape([size(a, freeA), k]);
    const b2 = ordered(widened(b, db), [...db, ...freeB]).reshape([k, size(b, freeB)]);
    return matmul(a2, b2).reshape([
      ...freeA.map((d) => a.shape[d]),
      ...freeB.map((d) => b.shape[d]),
    ]);
  });
}

/**
 * Σ over the last dim of `a` and of `b`, as `torch.inner`: shape
 * `a.shape[:-1] + b.shape[:-1]`; a 0-d operand multiplies the other.
 */
export function inner(a: Tensor, b: Tensor): Tensor {
  requireTensor("inner", a, "the first argument");
  requireTensor("inner", b, "the second argument");
  if (a.ndim === 0 || b.ndim === 0) return a.mul(b);
  if (a.shape[a.ndim - 1] !== b.shape[b.ndim - 1]) {
    throw new RangeError(
      `inner: the last dims differ (shapes ${formatShape(a.shape)} and ${formatShape(b.shape)})`,
    );
  }
  if (a.ndim === 1 && b.ndim === 1) return vectorDot("inner", a, b);
  return tensordot(a, b, [[-1], [-1]]);
}

/** `beta·input + alpha·product`, `input` broadcast to the product's shape. */
function scaledSum(
  op: string,
  input: Tensor,
  product: () => Tensor,
  outShape: readonly number[],
  options: AddProductOptions,
): Tensor {
  requireTensor(op, input, "input");
  const { beta = 1, alpha = 1 } = options ?? {};
  if (typeof beta !== "number" || typeof alpha !== "number") {
    throw new TypeError(`${op}: beta and alpha must be numbers, got ${beta} and ${alpha}`);
  }
  const lead = outShape.length - input.ndim;
  if (lead < 0 || input.shape.some((n, i) => n !== 1 && n !== outShape[lead + i])) {
    throw new RangeError(
      `${op}: input of shape ${
        formatShape(input.shape)
      } does not broadcast to the product's shape ${formatShape(outShape)}`,
    );
  }
  return forwardScope(() => {
    const p = product();
    sameDType(op, input, p);
    if (!isFloat(p.dtype) && !(Number.isInteger(beta) && Number.isInteger(alpha))) {
      throw new TypeError(
        `${op}: for ${p.dtype} tensors, alpha and beta must be integers, got beta ${beta} and alpha ${alpha}`,
      );
    }
    const scaled = alpha === 1 ? p : p.mul(alpha);
    // beta = 0 ignores input's values (NaN too) but, as PyTorch, still gives it a zero gradient.
    if (beta === 0) return where(ones([], { dtype: "int32", device: p.device }), scaled, input);
    return (beta === 1 ? input : input.mul(beta)).add(scaled);
  });
}

/** `beta·input + alpha·(m1 @ m2)` of matrices, as `torch.addmm`. */
export function addmm(
  input: Tensor,
  m1: Tensor,
  m2: Tensor,
  options: AddProductOptions = {},
): Tensor {
  requireDims("addmm", "mat1", m1, 2);
  requireDims("addmm", "mat2", m2, 2);
  return scaledSum("addmm", input, () => mm(m1, m2), [m1.shape[0], m2.shape[1]], options);
}

/** `beta·input + alpha·(mat @ vec)`, as `torch.addmv`. */
export function addmv(
  input: Tensor,
  mat: Tensor,
  vec: Tensor,
  options: AddProductOptions = {},
): Tensor {
  requireDims("addmv", "mat", mat, 2);
  requireDims("addmv", "vec", vec, 1);
  return scaledSum("addmv", input, () => mv(mat, vec), [mat.shape[0]], options);
}

/** `beta·input + alpha·outer(vec1, vec2)`, as `torch.addr`. */
export function addr(
  input: Tensor,
  vec1: Tensor,
  vec2: Tensor,
  options: AddProductOptions = {},
): Tensor {
  return owned(
    () => {
      requireDims("addr", "vec1", vec1, 1);
      requireDims("addr", "vec2", vec2, 1);
      return scaledSum(
        "addr",
        input,
        () => outer(vec1, vec2),
        [vec1.shape[0], vec2.shape[0]],
        options,
      );
    },
    input,
    vec1,
    vec2,
  );
}

/** `beta·input + alpha·bmm(batch1, batch2)`, as `torch.baddbmm`. */
export function baddbmm(
  input: Tensor,
  batch1: Tensor,
  batch2: Tensor,
  options: AddProductOptions = {},
): Tensor {
  requireDims("baddbmm", "batch1", batch1, 3);
  requireDims("baddbmm", "batch2", batch2, 3);
  const shape = [batch1.shape[0], batch1.shape[1], batch2.shape[2]];
  return scaledSum("baddbmm", input, () => bmm(batch1, batch2), shape, options);
}

/**
 * `beta·input + alpha·Σ_b batch1[b] @ batch2[b]`, as `torch.addbmm`: the
 * sum over the batch is one matrix product with the batch folded into the
 * contracted dim.
 */
export function addbmm(
  input: Tensor,
  batch1: Tensor,
  batch2: Tensor,
  options: AddProductOptions = {},
): Tensor {
  requireDims("addbmm", "batch1", batch1, 3);
  requireDims("addbmm", "batch2", batch2, 3);
  const [batch, n, m] = batch1.shape;
  const [batch2Size, m2, p] = batch2.shape;
  if (batch !== batch2Size || m !== m2) {
    throw new RangeError(
      `addbmm: batch1 of shape ${formatShape(batch1.shape)} and batch2 of shape ${
        formatShape(batch2.shape)
      } cannot be multiplied (need [B, n, m] and [B, m, p])`,
    );
  }
  const product = () =>
    matmul(batch1.permute([1, 0, 2]).reshape([n, batch * m]), batch2.reshape([batch * m, p]));
  return scaledSum("addbmm", input, product, [n, p], options);
}

/** As `outer` (`torch.ger`, its older name). */
export function ger(vec1: Tensor, vec2: Tensor): Tensor {
  requireDims("ger", "vec1", vec1, 1);
  requireDims("ger", "vec2", vec2, 1);
  return outer(vec1, vec2);
}

/**
 * The product of 2-D matrices in the cheapest order, as `torch.chain_matmul`
 * (one matrix gives a copy of it).
 */
export function chainMatmul(...matrices: Tensor[]): Tensor {
  if (matrices.length === 0) {
    throw new RangeError("chainMatmul: expected at least one matrix, got none");
  }
  matrices.forEach((t, i) => requireDims("chainMatmul", `matrix ${i}`, t, 2));
  if (matrices.length === 1) return matrices[0].clone();
  matrices.forEach((t, i) => {
    if (i > 0 && t.shape[0] !== matrices[i - 1].shape[1]) {
      throw new RangeError(
        `chainMatmul: matrix ${i - 1} of shape ${
          formatShape(matrices[i - 1].shape)
        } and matrix ${i} of shape ${formatShape(t.shape)} cannot be multiplied`,
      );
    }
  });
  return forwardScope(() => cheapestChain(matrices));
}

/**
 * The product of 2-D `matrices` (shapes already checked to chain) in the
 * order that needs the fewest multiplications: the classic dynamic program,
 * as PyTorch's `multi_dot`. Shared with `linalg.multiDot`.
 */
export function cheapestChain(matrices: readonly Tensor[]): Tensor {
  const n = matrices.length;
  // cost[i][j]: the fewest multiplications for matrices i..j; split[i][j]: where it splits.
  const dims = [matrices[0].shape[0], ...matrices.map((t) => t.shape[1])];
  const cost = Array.from({ length: n }, () => new Array<number>(n).fill(0));
  const split = Array.from({ length: n }, () => new Array<number>(n).fill(0));
  for (let len = 1; len < n; len++) {
    for (let i = 0; i + len < n; i++) {
      const j = i + len;
      cost[i][j] = Infinity;
      for (let k = i; k < j; k++) {
        const c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1];
        if (c < cost[i][j]) [cost[i][j], split[i][j]] = [c, k];
      }
    }
  }
  const chain = (i: number, j: number): Tensor =>
    i === j ? matrices[i] : matmul(chain(i, split[i][j]), chain(split[i][j] + 1, j));
  return chain(0, n - 1);
}
