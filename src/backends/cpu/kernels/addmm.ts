/**
 * `addmm` (optional fused kernel): the product, then `bias` added to every
 * row in one pass over the output (rounded as the composed add rounds it).
 * @module
 */

import type { AddmmArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";
import { matmul, type MatmulKernel } from "./matmul.ts";

/** See {@link AddmmArgs}; `threads` and `kernel` as {@link matmul}'s. */
export function addmm(
  args: AddmmArgs<TypedArray>,
  threads: number,
  kernel: MatmulKernel | "auto",
): void {
  matmul(args, threads, kernel);
  const { out, bias, n } = args;
  const rows = args.batch * args.m;
  for (let r = 0, at = 0; r < rows; r++, at += n) {
    for (let j = 0; j < n; j++) out[at + j] += bias[j];
  }
}
