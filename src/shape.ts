/**
 * Shape arithmetic: sizes, strides, broadcasting and dim normalisation. Every
 * error names the shapes or dims involved.
 * @module
 */

/** A tensor shape: one non-negative integer per dimension. */
export type Shape = readonly number[];

/** `[2, 3]` as PyTorch prints it. */
export function formatShape(shape: Shape): string {
  return `[${shape.join(", ")}]`;
}

/** Number of elements of a shape (1 for a 0-dimensional shape). */
export function numelOf(shape: Shape): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** Row-major element strides of a contiguous tensor. */
export function contiguousStrides(shape: Shape): number[] {
  const strides = new Array<number>(shape.length);
  let s = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

/** Whether two shapes are equal. */
export function sameShape(a: Shape, b: Shape): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

/** Throws unless `shape` is an array of non-negative integers. */
export function checkShape(shape: unknown, what = "shape"): number[] {
  if (
    !Array.isArray(shape) ||
    !shape.every((d) => Number.isInteger(d) && d >= 0)
  ) {
    throw new TypeError(
      `${what} must be an array of non-negative integers, got ${JSON.stringify(shape)}`,
    );
  }
  return shape.slice();
}

/** PyTorch's broadcast of two shapes, or an error naming both. */
export function broadcastShapes(a: Shape, b: Shape, op = "op"): number[] {
  const n = Math.max(a.length, b.length);
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    const da = i < n - a.length ? 1 : a[i - (n - a.length)];
    const db = i < n - b.length ? 1 : b[i - (n - b.length)];
    if (da !== db && da !== 1 && db !== 1) {
      throw new RangeError(
        `${op}: shapes ${formatShape(a)} and ${formatShape(b)} cannot be broadcast (dim ${
          i - n
        }: ${da} vs ${db})`,
      );
    }
    out[i] = da === 1 ? db : da;
  }
  return out;
}

/**
 * Strides for reading a contiguous tensor of `shape` as if it had `outShape`
 * (right-aligned; 0 where broadcast).
 */
export function broadcastStrides(shape: Shape, outShape: Shape): number[] {
  const strides = contiguousStrides(shape);
  const offset = outShape.length - shape.length;
  return outShape.map((_, i) => {
    const j = i - offset;
    if (j < 0 || shape[j] === 1) return 0;
    return strides[j];
  });
}

/** A dim in `[-ndim, ndim)` made non-negative, or an error naming it. */
export function normalizeDim(dim: number, ndim: number, op = "op", scalarOk = true): number {
  if (ndim === 0 && !scalarOk) throw new RangeError(`${op}: cannot be applied to a 0-dim tensor`);
  const lo = -Math.max(ndim, 1);
  const hi = Math.max(ndim, 1) - 1;
  if (!Number.isInteger(dim) || dim < lo || dim > hi) {
    throw new RangeError(
      `${op}: dim ${dim} out of range for a ${ndim}-dimensional tensor (expected ${lo} to ${hi})`,
    );
  }
  return dim < 0 ? dim + Math.max(ndim, 1) : dim;
}

/**
 * `torch.chunk`'s sizes for splitting `n` into `chunks` parts: chunks of
 * `ceil(n / chunks)`, the remainder last, so there may be fewer than `chunks`
 * parts. `n = 0` gives `chunks` empty parts, as the parallel layer's spec asks.
 */
export function chunkSizes(n: number, chunks: number): number[] {
  if (!Number.isInteger(chunks) || chunks < 1) {
    throw new RangeError(
      `chunk: chunks must be a positive integer, got ${chunks}`,
    );
  }
  if (n === 0) return new Array<number>(chunks).fill(0);
  const size = Math.ceil(n / chunks);
  const sizes: number[] = [];
  for (let start = 0; start < n; start += size) {
    sizes.push(Math.min(size, n - start));
  }
  return sizes;
}

/** The [outer, size, inner] view of `shape` around `dim`. */
export function axisSplit(
  shape: Shape,
  dim: number,
): { outer: number; size: number; inner: number } {
  let outer = 1;
  for (let i = 0; i < dim; i++) outer *= shape[i];
  let inner = 1;
  for (let i = dim + 1; i < shape.length; i++) inner *= shape[i];
  return { outer, size: shape.length === 0 ? 1 : shape[dim], inner };
}
