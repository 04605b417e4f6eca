/**
 * `addmm` (optional fused kernel): the product with `bias` added to every
 * row (rounded as the composed add rounds it; the WebAssembly kernel adds it
 * as it stores its sums).
 * @module
 */

import type { AddmmArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";
import { matmulBias, type MatmulKernel } from "./matmul.ts";

/** See {@link AddmmArgs}; `threads` and `kernel` as `matmul`'s. */
export function addmm(
  args: AddmmArgs<TypedArray>,
  threads: number,
  kernel: MatmulKernel | "auto",
): void {
  matmulBias(args, args.bias, threads, kernel);
}
