/**
 * Dropout, as `torch.nn.functional.dropout`.
 * @module
 */

import { noGrad } from "../../autograd.ts";
import { isFloat } from "../../dtype.ts";
import { rand } from "../../ops/factory.ts";
import { formatShape } from "../../shape.ts";
import { tidy } from "../../storage.ts";
import type { Tensor } from "../../tensor.ts";
import { checkTensor, dropoutWithOptions } from "../util.ts";
import type { DropoutOptions } from "./inplace.ts";

/**
 * Zeroes each element with probability `p` and scales the rest by
 * `1 / (1 - p)`, when `training` (default true, as PyTorch's functional form);
 * otherwise returns `x`. The mask comes from the seeded `rand` stream on the
 * input's device.
 */
export function dropout(
  x: Tensor,
  p: number | DropoutOptions = 0.5,
  training = true,
): Tensor {
  if (typeof p === "object" && p !== null) {
    return dropoutWithOptions("dropout", x, p, true, dropout);
  }
  checkTensor("dropout", "input", x);
  if (typeof p !== "number" || !(p >= 0 && p <= 1)) {
    throw new RangeError(`dropout: probability has to be between 0 and 1, but got ${p}`);
  }
  if (!isFloat(x.dtype)) {
    throw new TypeError(
      `dropout: expected a floating-point input, got ${x.dtype} (shape ${formatShape(x.shape)})`,
    );
  }
  if (!training || p === 0) return x;
  if (p === 1) return x.mul(0);
  // The scaled mask carries no gradient itself: build it outside the graph.
  const mask = noGrad(() =>
    tidy(() => rand([...x.shape], { dtype: x.dtype, device: x.device }).ge(p).mul(1 / (1 - p)))
  );
  return x.mul(mask);
}
