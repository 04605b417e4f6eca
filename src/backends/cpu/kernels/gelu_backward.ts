/**
 * `geluBackward` (optional fused kernel): `out = grad * gelu'(x)`, the
 * derivative written into `out` first (rounded to the dtype, as the
 * composed ops round it) and multiplied in place.
 * @module
 */

import type { GeluBackwardArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";
import { geluDerivative } from "./gelu_derivative.ts";

/** See {@link GeluBackwardArgs}. */
export function geluBackward(args: GeluBackwardArgs<TypedArray>): void {
  geluDerivative(args);
  const { grad, out, numel } = args;
  for (let i = 0; i < numel; i++) out[i] = grad[i] * out[i];
}
