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

/** A [N, C, H, W] view of a batched or unbatched ([C, H, W]) input. */
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
