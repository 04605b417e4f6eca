/**
 * `maxPool1d` and `avgPool1d`, as `torch.nn.functional`'s: the 2-d pools on
 * a height of 1 (the same kernels and gradients, every backend).
 * @module
 */

import { formatShape } from "../../shape.ts";
import type { Tensor } from "../../tensor.ts";
import { checkFloatInput } from "../util.ts";
import {
  avgPool2d,
  type AvgPool2dOptions,
  maxPool2d,
  type MaxPool2dOptions,
  type PoolWithIndices,
  type ReturnIndicesOption,
} from "./conv.ts";
import { owned } from "../../ops_composite/owned.ts";

/** A 1-d size: a number or a one-element array. */
export type Size1 = number | readonly [number];

/** Options of {@link maxPool1d}. */
export interface MaxPool1dOptions {
  /** Step between windows (default: the kernel size). */
  stride?: Size1 | null;
  /** Implicit -inf padding on both sides (at most half the kernel; default 0). */
  padding?: Size1;
  /** Step between kernel taps (default 1). */
  dilation?: Size1;
  /** Round the output size up instead of down (default false). */
  ceilMode?: boolean;
}

/** Options of {@link avgPool1d}. */
export interface AvgPool1dOptions {
  /** Step between windows (default: the kernel size). */
  stride?: Size1 | null;
  /** Implicit zero padding on both sides (at most half the kernel; default 0). */
  padding?: Size1;
  /** Round the output size up instead of down (default false). */
  ceilMode?: boolean;
  /** Count padding zeros in each window's divisor (default true). */
  countIncludePad?: boolean;
}

const one = (size: Size1): number => (typeof size === "number" ? size : size[0]);

/** [N, C, L] (or [C, L]) as [N, C, 1, L], and the 2-d form of each size. */
function as2d(op: string, input: Tensor) {
  checkFloatInput(op, input);
  if (input.ndim !== 2 && input.ndim !== 3) {
    throw new RangeError(
      `${op}: expected [N, C, L] or [C, L], got shape ${formatShape(input.shape)}`,
    );
  }
  return input.unsqueeze(-2);
}
const pair = (size: Size1, rowValue: number): [number, number] => [rowValue, one(size)];

/**
 * Maximum over windows of `kernelSize` along the last dim, as
 * `torch.nn.functional.max_pool1d`; with `returnIndices`, also each
 * maximum's position along that dim ({@link PoolWithIndices}).
 */
export function maxPool1d(
  input: Tensor,
  kernelSize: Size1,
  options: MaxPool1dOptions & { returnIndices: true },
): PoolWithIndices;
/** {@link maxPool1d} without `returnIndices`: the output alone. */
export function maxPool1d(
  input: Tensor,
  kernelSize: Size1,
  options?: MaxPool1dOptions & { returnIndices?: false },
): Tensor;
/** {@link maxPool1d} with `returnIndices` known only at run time. */
export function maxPool1d(
  input: Tensor,
  kernelSize: Size1,
  options?: MaxPool1dOptions & ReturnIndicesOption,
): Tensor | PoolWithIndices;
export function maxPool1d(
  input: Tensor,
  kernelSize: Size1,
  options: MaxPool1dOptions & ReturnIndicesOption = {},
): Tensor | PoolWithIndices {
  return owned(() => {
    const x = as2d("maxPool1d", input);
    const o: MaxPool2dOptions = {
      stride: options.stride == null ? null : pair(options.stride, 1),
      padding: pair(options.padding ?? 0, 0),
      dilation: pair(options.dilation ?? 1, 1),
      ceilMode: options.ceilMode,
    };
    if (!options.returnIndices) return maxPool2d(x, pair(kernelSize, 1), o).squeeze(-2);
    // On a height of 1 the flat position in the plane is the column.
    const [y, indices] = maxPool2d(x, pair(kernelSize, 1), { ...o, returnIndices: true });
    return [y.squeeze(-2), indices.squeeze(-2)];
  }, input);
}

/** Mean over windows of `kernelSize` along the last dim, as `torch.nn.functional.avg_pool1d`. */
export function avgPool1d(
  input: Tensor,
  kernelSize: Size1,
  options: AvgPool1dOptions = {},
): Tensor {
  const x = as2d("avgPool1d", input);
  const o: AvgPool2dOptions = {
    stride: options.stride == null ? null : pair(options.stride, 1),
    padding: pair(options.padding ?? 0, 0),
    ceilMode: options.ceilMode,
    countIncludePad: options.countIncludePad,
  };
  return avgPool2d(x, pair(kernelSize, 1), o).squeeze(-2);
}
