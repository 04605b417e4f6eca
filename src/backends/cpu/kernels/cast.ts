/**
 * `cast`: elementwise dtype conversion.
 * @module
 */

import type { CastArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";

/** Elementwise conversion; float to int truncates toward zero. */
export function cast({ x, out, numel, to }: CastArgs<TypedArray>): void {
  if (to === "int32") {
    for (let i = 0; i < numel; i++) out[i] = Math.trunc(x[i]);
  } else for (let i = 0; i < numel; i++) out[i] = x[i];
}
