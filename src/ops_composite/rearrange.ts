/**
 * Moving elements around: `flip`, `roll`, `repeat`, `tile`, `outer`.
 * @module
 */

import { record } from "../autograd.ts";
import { formatShape, normalizeDim } from "../shape.ts";
import type { Tensor } from "../tensor.ts";
import { clone } from "../ops/view.ts";
import { dimList, reorder } from "./util.ts";
import { owned } from "./owned.ts";

/** The order along `dims` reversed, as `torch.flip` (a copy; the gradient is flipped back). */
export function flip(x: Tensor, dims: number | readonly number[]): Tensor {
  if (dims === undefined) throw new TypeError("flip: dims is required (a dim or an array of dims)");
  // Unlike a reduction's, an empty list means no dim here.
  const empty = Array.isArray(dims) && dims.length === 0;
  const list = empty ? [] : dimList(x, dims, "flip"); // a 0-d tensor takes dim 0 or -1
  let out = x;
  for (const d of x.ndim === 0 ? [] : list) out = reorder(out, d, (i, n) => n - 1 - i);
  if (out === x) return clone(x);
  return record("flip", [x], out, ([g]) => [flip(g!, list)]);
}

function integers(values: number | readonly number[], what: string, op: string): number[] {
  const list = typeof values === "number" ? [values] : Array.isArray(values) ? [...values] : null;
  if (!list || !list.every(Number.isInteger)) {
    throw new TypeError(`${op}: ${what} must be an integer or an array of integers, got ${values}`);
  }
  return list;
}

/**
 * Elements shifted by `shifts` along `dims`, those pushed past the end coming
 * back at the start, as `torch.roll`; without `dims` the tensor is rolled as
 * if flattened, then given its shape back.
 */
export function roll(
  x: Tensor,
  shifts: number | readonly number[],
  dims?: number | readonly number[],
): Tensor {
  const s = integers(shifts, "shifts", "roll");
  const d = dims === undefined ? [] : integers(dims, "dims", "roll");
  if (d.length === 0) {
    if (s.length !== 1) {
      throw new RangeError(
        `roll: without dims, shifts must be one number (the tensor is rolled flattened), got ${
          JSON.stringify(shifts)
        }`,
      );
    }
    return owned(() => roll(x.flatten(), s, 0).reshape(x.shape), x);
  }
  if (d.length !== s.length) {
    throw new RangeError(
      `roll: shifts ${JSON.stringify(shifts)} and dims ${
        JSON.stringify(dims)
      } must have the same length (${s.length} vs ${d.length})`,
    );
  }
  const normal = d.map((dim) => normalizeDim(dim, x.ndim, "roll", false));
  let out = x;
  normal.forEach((dim, i) => {
    const n = x.shape[dim];
    const k = ((s[i] % n) + n) % n;
    if (k !== 0) out = reorder(out, dim, (j) => (j - k + n) % n);
  });
  if (out === x) return clone(x);
  return record("roll", [x], out, ([g]) => [roll(g!, s.map((v) => -v), normal)]);
}

function checkSizes(sizes: readonly number[], op: string): void {
  if (!Array.isArray(sizes) || !sizes.every((n) => Number.isInteger(n) && n >= 0)) {
    throw new TypeError(
      `${op}: sizes must be an array of non-negative integers, got ${JSON.stringify(sizes)}`,
    );
  }
}

/**
 * The tensor repeated `sizes[i]` times along dim `i`, as `Tensor.repeat`:
 * `sizes` has one entry per dim or more (extra ones add leading dims).
 */
export const repeat = (x: Tensor, sizes: readonly number[]): Tensor => repeated(x, sizes, "repeat");

function repeated(x: Tensor, sizes: readonly number[], op: string): Tensor {
  checkSizes(sizes, op);
  if (sizes.length < x.ndim) {
    throw new RangeError(
      `${op}: ${sizes.length} sizes ${
        JSON.stringify(sizes)
      } for a tensor of ${x.ndim} dims (shape ${formatShape(x.shape)}): give a size for every dim`,
    );
  }
  const shape = [...new Array<number>(sizes.length - x.ndim).fill(1), ...x.shape];
  // [1, a, 1, b] broadcast to [ra, a, rb, b]: expand's gradient sums the copies back.
  // A new tensor, as PyTorch's: its memory is its own, not a view's.
  return owned(() => {
    const spread = x.reshape(shape.flatMap((n) => [1, n]));
    const copies = spread.expand(shape.flatMap((n, i) => [sizes[i], n]));
    return copies.reshape(shape.map((n, i) => n * sizes[i]));
  }, x);
}

/** As {@link repeat}, with fewer sizes than dims allowed (`torch.tile`: 1s are put in front). */
export function tile(x: Tensor, dims: readonly number[]): Tensor {
  checkSizes(dims, "tile");
  const lead = new Array<number>(Math.max(0, x.ndim - dims.length)).fill(1);
  return repeated(x, [...lead, ...dims], "tile");
}

/** `x[i] * y[j]` of two 1-dimensional tensors, as `torch.outer`. */
export function outer(x: Tensor, y: Tensor): Tensor {
  if (x.ndim !== 1 || y?.ndim !== 1) {
    throw new RangeError(
      `outer: expects two 1-dimensional tensors, got shapes ${formatShape(x.shape)} and ${
        y?.shape ? formatShape(y.shape) : typeof y
      }`,
    );
  }
  return owned(() => x.reshape([x.shape[0], 1]).mul(y.reshape([1, y.shape[0]])), x, y);
}
