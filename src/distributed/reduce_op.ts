/**
 * The check every reducing collective makes of its op: internal to the
 * distributed layer (the ops themselves are `ReduceOp` in `backend.ts`).
 * @module
 */

import { type DType, isFloat } from "../dtype.ts";
import { formatShape } from "../shape.ts";
import { isBitwiseOp, REDUCE_OPS, type ReduceOp } from "./backend.ts";

/**
 * `op` when it is a {@link ReduceOp} that can combine `dtype` values, else an
 * error naming the collective, the op and the tensor: `"avg"` needs a float
 * dtype, the bitwise ops int32 (PyTorch's gloo refuses them on floats too).
 */
export function checkReduceOp(
  name: string,
  op: ReduceOp,
  dtype: DType,
  shape: readonly number[],
): ReduceOp {
  if (!REDUCE_OPS.includes(op)) {
    throw new RangeError(
      `${name}: op must be one of ${
        REDUCE_OPS.join(", ")
      } (or a distributed.ReduceOp member), got "${op}"`,
    );
  }
  if (op === "avg" && !isFloat(dtype)) {
    throw new TypeError(
      `${name}: op "avg" needs a floating-point tensor, got ${dtype} (shape ${formatShape(shape)})`,
    );
  }
  if (isBitwiseOp(op) && dtype !== "int32") {
    throw new TypeError(
      `${name}: op "${op}" (bitwise) needs an int32 tensor, got ${dtype} (shape ${
        formatShape(shape)
      })`,
    );
  }
  return op;
}
