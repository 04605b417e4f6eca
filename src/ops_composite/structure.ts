/**
 * Tensors built from others' elements by position: `meshgrid`,
 * `cartesianProd`, `diag`, `trace`, `kron`, `rot90`.
 * @module
 */

import { formatShape, normalizeDim } from "../shape.ts";
import { forwardScope } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import { zeros } from "../ops/factory.ts";
import { cat, clone, narrow, stack } from "../ops/view.ts";
import { diagonalOf } from "./einsum.ts";
import { flip } from "./rearrange.ts";
import { owned } from "./owned.ts";

function requireTensors(op: string, tensors: readonly unknown[]): asserts tensors is Tensor[] {
  tensors.forEach((t, i) => {
    if (!(t instanceof Tensor)) {
      throw new TypeError(`${op}: argument ${i} is ${typeof t}, not a Tensor`);
    }
  });
}

/** Options of {@link meshgrid}. */
export interface MeshgridOptions {
  /**
   * `"ij"` (default, matrix indexing): dim i of the grids follows tensor i;
   * `"xy"` (Cartesian): the first two dims are swapped, as NumPy's default.
   */
  indexing?: "ij" | "xy";
}

/**
 * Coordinate grids, as `torch.meshgrid`: for 1-D (or 0-D, size 1) tensors
 * of sizes n₀, n₁, …, one tensor per input of shape [n₀, n₁, …] (`"xy"`:
 * [n₁, n₀, …]) holding that input's values along its own dim. Unlike
 * PyTorch's views, each grid is its own tensor; gradients sum back.
 */
export function meshgrid(tensors: readonly Tensor[], options: MeshgridOptions = {}): Tensor[] {
  if (!Array.isArray(tensors)) {
    throw new TypeError(`meshgrid: expected an array of tensors, got ${typeof tensors}`);
  }
  requireTensors("meshgrid", tensors);
  const { indexing = "ij" } = options;
  if (indexing !== "ij" && indexing !== "xy") {
    throw new RangeError(
      `meshgrid: indexing must be "ij" or "xy", got ${JSON.stringify(indexing)}`,
    );
  }
  tensors.forEach((t, i) => {
    if (t.ndim > 1) {
      throw new RangeError(
        `meshgrid: expected 0-D or 1-D tensors, got shape ${formatShape(t.shape)} for tensor ${i}`,
      );
    }
    if (t.dtype !== tensors[0].dtype || t.device !== tensors[0].device) {
      throw new TypeError(
        `meshgrid: tensor ${i} is ${t.dtype} on ${t.device}, tensor 0 ${tensors[0].dtype} on ${
          tensors[0].device
        }; all must match`,
      );
    }
  });
  const sizes = tensors.map((t) => t.numel());
  // "xy" swaps the roles of the first two inputs' dims.
  const axis = sizes.map((_, i) => (indexing === "xy" && sizes.length >= 2 && i < 2 ? 1 - i : i));
  const shape = sizes.map((_, d) => sizes[axis.indexOf(d)]);
  return forwardScope(() =>
    tensors.map((t, i) =>
      t.reshape(shape.map((n, d) => (d === axis[i] ? n : 1))).expand(shape).clone()
    )
  );
}

/**
 * Every combination of the inputs' elements, as `torch.cartesian_prod`:
 * 1-D tensors of sizes n₀ … n_k give [n₀·…·n_k, k+1], the last input
 * varying fastest; one tensor gives a copy of it.
 */
export function cartesianProd(...tensors: Tensor[]): Tensor {
  requireTensors("cartesianProd", tensors);
  if (tensors.length === 0) throw new RangeError("cartesianProd: expected at least one tensor");
  tensors.forEach((t, i) => {
    if (t.ndim !== 1) {
      throw new RangeError(
        `cartesianProd: expected 1-D tensors, got shape ${formatShape(t.shape)} for tensor ${i}`,
      );
    }
  });
  if (tensors.length === 1) return clone(tensors[0]);
  return owned(
    () => forwardScope(() => stack(meshgrid(tensors).map((g) => g.flatten()), 1)),
    tensors,
  );
}

/**
 * As `torch.diag`: a 1-D tensor becomes the square matrix with it on
 * diagonal `diagonal` (above the main one when positive, below when
 * negative) and zeros elsewhere; a 2-D tensor gives its diagonal `diagonal`
 * as a 1-D tensor (empty when the diagonal lies outside).
 */
export function diag(x: Tensor, diagonal = 0): Tensor {
  if (!Number.isInteger(diagonal)) {
    throw new TypeError(`diag: diagonal must be an integer, got ${diagonal}`);
  }
  if (x.ndim !== 1 && x.ndim !== 2) {
    throw new RangeError(`diag: expected a 1-D or 2-D tensor, got shape ${formatShape(x.shape)}`);
  }
  return owned(
    () => forwardScope(() => (x.ndim === 1 ? diagMatrix(x, diagonal) : diagonalPart(x, diagonal))),
    x,
  );
}

function diagMatrix(x: Tensor, k: number): Tensor {
  const n = x.shape[0];
  const m = n + Math.abs(k);
  const blank = (shape: number[]) => zeros(shape, { dtype: x.dtype, device: x.device });
  // [n, 1] beside zeros [n, n] flattens to x[i] at i·(n+1): the diagonal of [n, n].
  const spread = cat([x.reshape([n, 1]), blank([n, n])], 1).reshape([n * (n + 1)]);
  const square = narrow(spread, 0, 0, n * n).reshape([n, n]);
  if (k === 0) return square;
  const side = blank([n, Math.abs(k)]);
  const rows = cat(k > 0 ? [side, square] : [square, side], 1);
  const band = blank([Math.abs(k), m]);
  return cat(k > 0 ? [rows, band] : [band, rows], 0);
}

function diagonalPart(x: Tensor, k: number): Tensor {
  const [rows, cols] = x.shape;
  const [r0, c0] = k >= 0 ? [0, k] : [-k, 0];
  const length = Math.max(0, Math.min(rows - r0, cols - c0));
  // Empty, but from x, so that it has x's graph as PyTorch's result does.
  if (length === 0) return narrow(x.reshape([x.numel()]), 0, 0, 0);
  const square = narrow(narrow(x, 0, r0, length), 1, c0, length);
  return diagonalOf(square, 0, 1);
}

/** The sum of the main diagonal of a 2-D tensor, as `torch.trace` (0-d). */
export function trace(x: Tensor): Tensor {
  if (!(x instanceof Tensor) || x.ndim !== 2) {
    throw new RangeError(
      `trace: expected a 2-D tensor, got ${
        x instanceof Tensor ? `shape ${formatShape(x.shape)}` : typeof x
      }`,
    );
  }
  return forwardScope(() => diagonalPart(x, 0).sum());
}

/**
 * The Kronecker product, as `torch.kron`: the fewer-dim operand gets
 * leading 1s, and block `i` of the result is `a[i]·b` (shape
 * `a.shape[d]·b.shape[d]` in every dim).
 */
export function kron(a: Tensor, b: Tensor): Tensor {
  requireTensors("kron", [a, b]);
  const nd = Math.max(a.ndim, b.ndim);
  const pad = (t: Tensor) => [...Array(nd - t.ndim).fill(1), ...t.shape] as number[];
  const [as, bs] = [pad(a), pad(b)];
  return owned(
    () =>
      forwardScope(() => {
        const x = a.reshape(as.flatMap((n) => [n, 1]));
        const y = b.reshape(bs.flatMap((n) => [1, n]));
        return x.mul(y).reshape(as.map((n, i) => n * bs[i]));
      }),
    a,
    b,
  );
}

/**
 * `x` rotated by 90° `k` times in the plane of `dims`, from the first
 * toward the second, as `torch.rot90` (k may be negative or ≥ 4).
 */
export function rot90(x: Tensor, k = 1, dims: readonly number[] = [0, 1]): Tensor {
  if (!Number.isInteger(k)) throw new TypeError(`rot90: k must be an integer, got ${k}`);
  if (!Array.isArray(dims) || dims.length !== 2) {
    throw new RangeError(`rot90: expected 2 dims, got ${JSON.stringify(dims)}`);
  }
  if (x.ndim < 2) {
    throw new RangeError(`rot90: expected at least 2 dims, got shape ${formatShape(x.shape)}`);
  }
  const [d0, d1] = dims.map((d) => normalizeDim(d, x.ndim, "rot90"));
  if (d0 === d1) {
    throw new RangeError(`rot90: the two dims must differ, got ${JSON.stringify(dims)}`);
  }
  const turns = ((k % 4) + 4) % 4;
  return owned(() =>
    forwardScope(() => {
      if (turns === 0) return clone(x);
      if (turns === 2) return flip(x, [d0, d1]);
      return flip(x, turns === 1 ? d1 : d0).transpose(d0, d1);
    }), x);
}
