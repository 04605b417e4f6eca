/**
 * Shape helpers shared by the strided kernels.
 * @module
 */

/** A shape with one or more stride lists over it. */
export interface Strided {
  /** Sizes of each dim. */
  shape: number[];
  /** One stride list per operand, each as long as `shape`. */
  strides: number[][];
}

/**
 * Drops size-1 dims and merges neighbouring dims that are contiguous in every
 * stride list, so most layouts become rank 1 and hit the fast paths (and the
 * general shaders compile once per small rank).
 */
export function coalesce(
  shape: readonly number[],
  strides: readonly (readonly number[])[],
): Strided {
  const outShape: number[] = [];
  const outStrides: number[][] = strides.map(() => []);
  for (let d = 0; d < shape.length; d++) {
    if (shape[d] === 1) continue;
    const last = outShape.length - 1;
    if (
      last >= 0 &&
      strides.every((s, k) => outStrides[k][last] === s[d] * shape[d])
    ) {
      outShape[last] *= shape[d];
      for (let k = 0; k < strides.length; k++) {
        outStrides[k][last] = strides[k][d];
      }
      continue;
    }
    outShape.push(shape[d]);
    for (let k = 0; k < strides.length; k++) outStrides[k].push(strides[k][d]);
  }
  if (outShape.length === 0) {
    return { shape: [1], strides: strides.map(() => [0]) };
  }
  return { shape: outShape, strides: outStrides };
}
