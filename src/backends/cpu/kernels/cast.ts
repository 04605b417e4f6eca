/**
 * `cast`: elementwise dtype conversion.
 * @module
 */

import { type CastArgs, toInt32 } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";

/** Elementwise conversion; float to int32 as the contract's {@link toInt32}. */
export function cast({ x, out, numel, to }: CastArgs<TypedArray>): void {
  if (to === "int32") {
    for (let i = 0; i < numel; i++) out[i] = toInt32(x[i]);
  } else for (let i = 0; i < numel; i++) out[i] = x[i];
}
