/**
 * Argument helpers shared by the windowed functions (convolution,
 * transposed convolution, pooling); internal: `functional.ts` does not
 * re-export this file.
 * @module
 */

import { formatShape } from "../../shape.ts";
import type { Tensor } from "../../tensor.ts";
import { checkFloatInput } from "../util.ts";

/** `value` as [rows, columns], checked to be integers of at least `min`. */
export function pair(
  op: string,
  name: string,
  value: number | readonly number[],
  min: number,
): [number, number] {
  const list = typeof value === "number" ? [value, value] : [...value];
  if (list.length !== 2 || list.some((v) => !Number.isInteger(v) || v < min)) {
    throw new RangeError(
      `${op}: ${name} must be an integer >= ${min} or a pair of them, got ${JSON.stringify(value)}`,
    );
  }
  return list as [number, number];
}

/** `value` as [depth, rows, columns], checked to be integers of at least `min`. */
export function triple(
  op: string,
  name: string,
  value: number | readonly number[],
  min: number,
): [number, number, number] {
  const list = typeof value === "number" ? [value, value, value] : [...value];
  if (list.length !== 3 || list.some((v) => !Number.isInteger(v) || v < min)) {
    throw new RangeError(
      `${op}: ${name} must be an integer >= ${min} or a triple of them, got ${
        JSON.stringify(value)
      }`,
    );
  }
  return list as [number, number, number];
}

/** Output length of one spatial dim of a convolution or pooling (PyTorch's formula). */
export function outLength(
  size: number,
  kernel: number,
  stride: number,
  pad: number,
  dilation: number,
  ceilMode: boolean,
): number {
  const span = size + 2 * pad - dilation * (kernel - 1) - 1;
  let out = (ceilMode ? Math.ceil(span / stride) : Math.floor(span / stride)) + 1;
  // The last window must start inside the input or the left padding.
  if (ceilMode && (out - 1) * stride >= size + pad) out--;
  return out;
}

/** A batched view ([N, C, H, W] for rank 4) of a batched or unbatched ([C, H, W]) input. */
export function batched(op: string, x: Tensor, rank: number): Tensor {
  checkFloatInput(op, x);
  if (x.ndim === rank) return x;
  if (x.ndim === rank - 1) return x.unsqueeze(0);
  throw new RangeError(
    `${op}: expected a ${rank - 1}-D (unbatched) or ${rank}-D (batched) input, got shape ${
      formatShape(x.shape)
    }`,
  );
}
