/**
 * `fill`: one value into the first `numel` elements.
 * @module
 */

import type { FillArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";

/** `out[i] = value` for `i < numel`. */
export function fill({ out, numel, value }: FillArgs<TypedArray>): void {
  out.fill(value, 0, numel);
}
