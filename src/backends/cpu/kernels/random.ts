/**
 * `random`: the contract's counter-based uniform and normal numbers.
 * @module
 */

import { lowbias32, type RandomArgs } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";

/** Counter-based uniform or normal numbers, as the contract defines them. */
export function random({ out, numel, kind, seed, a, b }: RandomArgs<TypedArray>): void {
  const key = lowbias32(seed);
  const u = (j: number) => (lowbias32((j ^ key) >>> 0) >>> 8) * 2 ** -24;
  if (kind === "uniform") {
    for (let i = 0; i < numel; i++) out[i] = a + (b - a) * u(i);
    return;
  }
  for (let i = 0; i < numel; i++) {
    const r = Math.sqrt(-2 * Math.log(1 - u(2 * i)));
    out[i] = a + b * r * Math.cos(2 * Math.PI * u(2 * i + 1));
  }
}
