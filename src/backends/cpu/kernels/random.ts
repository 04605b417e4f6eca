import type { RandomLayout } from "../../backend.ts";
import type { TypedArray } from "../../../dtype.ts";

/** The contract's lowbias32 hash (u32 in, u32 out). */
export function lowbias32(value: number): number {
  let x = value >>> 0;
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d) >>> 0;
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b) >>> 0;
  x ^= x >>> 16;
  return x >>> 0;
}

/** Counter-based uniform or normal numbers, as the contract defines them. */
export function random(out: TypedArray, layout: RandomLayout): void {
  const key = lowbias32(layout.seed);
  const u = (j: number) => (lowbias32((j ^ key) >>> 0) >>> 8) * 2 ** -24;
  const { numel, a, b } = layout;
  if (layout.kind === "uniform") {
    for (let i = 0; i < numel; i++) out[i] = a + (b - a) * u(i);
    return;
  }
  for (let i = 0; i < numel; i++) {
    const r = Math.sqrt(-2 * Math.log(1 - u(2 * i)));
    out[i] = a + b * r * Math.cos(2 * Math.PI * u(2 * i + 1));
  }
}
