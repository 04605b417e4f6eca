/**
 * Argument helpers shared by the windowed functions (convolution,
 * transposed convolution, pooling); internal: `functional.ts` does not
 * re-export this file.
 * @module
 */

import { formatShape } from "../../shape.ts";
import type { Tensor } from "../../tensor.ts";
import { checkFloatInput, checkTensor, sameDevice } from "../util.ts";

/** `value` as [rows, columns], checked to be integers of at least `min`. */
export function pair(
  op: string,
  name: string,
  value: number | readonly number[],
  min: number,
): [number, number] {
  const list = typeof value === "number" ? [value, value] : [...value];
  if (list.length !== 2 || list.some((v) => !Number.isInteger(v) || v < min)) {
    throw new RangeError(
      `${op}: ${name} must be an integer >= ${min} or a pair of them, got ${JSON.stringify(value)}`,
    );
  }
  return list as [number, number];
}

/** `value` as [depth, rows, columns], checked to be integers of at least `min`. */
export function triple(
  op: string,
  name: string,
  value: number | readonly number[],
  min: number,
): [number, number, number] {
  const list = typeof value === "number" ? [value, value, value] : [...value];
  if (list.length !== 3 || list.some((v) => !Number.isInteger(v) || v < min)) {
    throw new RangeError(
      `${op}: ${name} must be an integer >= ${min} or a triple of them, got ${
        JSON.stringify(value)
      }`,
    );
  }
  return list as [number, number, number];
}

/** Output length of one spatial dim of a convolution or pooling (PyTorch's formula). */
export function outLength(
  size: number,
  kernel: number,
  stride: number,
  pad: number,
  dilation: number,
  ceilMode: boolean,
): number {
  const span = size + 2 * pad - dilation * (kernel - 1) - 1;
  let out = (ceilMode ? Math.ceil(span / stride) : Math.floor(span / stride)) + 1;
  // The last window must start inside the input or the left padding.
  if (ceilMode && (out - 1) * stride >= size + pad) out--;
  return out;
}

/** A batched view ([N, C, H, W] for rank 4) of a batched or unbatched ([C, H, W]) input. */
export function batched(op: string, x: Tensor, rank: number): Tensor {
  checkFloatInput(op, x);
  if (x.ndim === rank) return x;
  if (x.ndim === rank - 1) return x.unsqueeze(0);
  throw new RangeError(
    `${op}: expected a ${rank - 1}-D (unbatched) or ${rank}-D (batched) input, got shape ${
      formatShape(x.shape)
    }`,
  );
}

/** A convolution's first checks: Tensors on the input's device, the weight [`layout`] of its rank. */
export function checkConvWeight(
  op: string,
  x: Tensor,
  weight: Tensor,
  bias: Tensor | null | undefined,
  layout: string,
): void {
  checkTensor(op, "weight", weight);
  if (bias != null) checkTensor(op, "bias", bias);
  sameDevice(op, { input: x, weight, bias });
  if (weight.ndim !== x.ndim) {
    throw new RangeError(
      `${op}: weight must be [${layout}], got shape ${formatShape(weight.shape)}`,
    );
  }
}

/** Throws unless a convolution's weight and bias have the input's dtype. */
export function checkConvDtypes(op: string, x: Tensor, weight: Tensor, bias?: Tensor | null): void {
  if (weight.dtype !== x.dtype || (bias && bias.dtype !== x.dtype)) {
    throw new TypeError(
      `${op}: dtypes differ (input ${x.dtype}, weight ${weight.dtype}${
        bias ? `, bias ${bias.dtype}` : ""
      })`,
    );
  }
}

/** Throws unless a convolution's bias (when given) is [cout]. */
export function checkConvBias(op: string, bias: Tensor | null | undefined, cout: number): void {
  if (bias && (bias.ndim !== 1 || bias.shape[0] !== cout)) {
    throw new RangeError(
      `${op}: bias of shape ${formatShape(bias.shape)} does not match ${cout} output channels`,
    );
  }
}

/**
 * Throws unless `groups` divides a convolution's channels and the weight
 * [Cout, C / groups, ...] fits the input's C channels.
 */
export function checkConvGroups(op: string, x: Tensor, weight: Tensor, groups: number): void {
  const c = x.shape[1];
  const [cout, cPerGroup] = weight.shape;
  if (!Number.isInteger(groups) || groups < 1 || c % groups !== 0 || cout % groups !== 0) {
    throw new RangeError(
      `${op}: groups (${groups}) must be a positive integer dividing in_channels (${c}) and out_channels (${cout})`,
    );
  }
  if (cPerGroup * groups !== c) {
    throw new RangeError(
      `${op}: input of shape ${formatShape(x.shape)} has ${c} channels, but weight of shape ${
        formatShape(weight.shape)
      } with groups=${groups} expects ${cPerGroup * groups}`,
    );
  }
}

/**
 * Throws unless `groups` divides a transposed convolution's input channels
 * and the weight [Cin, Cout / groups, ...] (`layout`) fits the input.
 */
export function checkTransposedGroups(
  op: string,
  x: Tensor,
  weight: Tensor,
  groups: number,
  layout: string,
): void {
  const c = x.shape[1];
  const cin = weight.shape[0];
  if (!Number.isInteger(groups) || groups < 1 || cin % groups !== 0) {
    throw new RangeError(
      `${op}: groups (${groups}) must be a positive integer dividing the weight's in_channels (${cin}, its dim 0)`,
    );
  }
  if (c !== cin) {
    throw new RangeError(
      `${op}: input of shape ${formatShape(x.shape)} has ${c} channels, but weight of shape ${
        formatShape(weight.shape)
      } expects ${cin} (the weight is [${layout}])`,
    );
  }
}

/**
 * A convolution's padding per spatial dim: `"valid"` is none, `"same"`
 * (stride 1 only) d·(k - 1) in total per dim, split evenly; an odd total
 * puts the extra one after, as PyTorch does, which `after` gives as
 * `F.pad` amounts (last dim first) to pad the input with first, else null.
 */
export function convPadding(
  op: string,
  requested: number | readonly number[] | "valid" | "same",
  kernel: readonly number[],
  stride: readonly number[],
  dilation: readonly number[],
): { padding: number[]; after: number[] | null } {
  if (requested === "valid") return { padding: kernel.map(() => 0), after: null };
  if (requested !== "same") {
    const perDim = kernel.length === 2 ? pair : triple;
    return { padding: perDim(op, "padding", requested, 0), after: null };
  }
  if (stride.some((s) => s !== 1)) {
    throw new RangeError(`${op}: padding="same" needs stride 1, got ${JSON.stringify(stride)}`);
  }
  const total = kernel.map((k, d) => dilation[d] * (k - 1));
  const padding = total.map((t) => Math.floor(t / 2));
  const odd = total.some((t) => t % 2);
  return { padding, after: odd ? [...total].reverse().flatMap((t) => [0, t % 2]) : null };
}

/**
 * A transposed convolution's output size per spatial dim,
 * (in - 1)·stride - 2·padding + dilation·(k - 1) + outputPadding + 1,
 * with PyTorch's checks: output padding only fills what a larger input
 * would have reached (so it stays below the stride or the dilation), and
 * every size is at least 1.
 */
export function transposedOutputSize(
  op: string,
  x: Tensor,
  kernel: readonly number[],
  window: {
    stride: readonly number[];
    padding: readonly number[];
    dilation: readonly number[];
    outputPadding: readonly number[];
  },
): number[] {
  const { stride, padding, dilation, outputPadding } = window;
  if (kernel.some((_, d) => outputPadding[d] >= stride[d] && outputPadding[d] >= dilation[d])) {
    throw new RangeError(
      `${op}: outputPadding ${JSON.stringify(outputPadding)} must be smaller than either stride ${
        JSON.stringify(stride)
      } or dilation ${JSON.stringify(dilation)}`,
    );
  }
  const size = kernel.map((k, d) =>
    (x.shape[2 + d] - 1) * stride[d] - 2 * padding[d] + dilation[d] * (k - 1) +
    outputPadding[d] + 1
  );
  if (size.some((s) => s < 1)) {
    throw new RangeError(
      `${op}: the output size ${size.join("x")} is too small for input of shape ${
        formatShape(x.shape)
      } (kernel ${kernel.join("x")}, stride ${JSON.stringify(stride)}, padding ${
        JSON.stringify(padding)
      }, dilation ${JSON.stringify(dilation)})`,
    );
  }
  return size;
}

/** Throws unless a pool's padding is at most half its kernel in every dim (PyTorch's rule). */
export function checkPoolPadding(
  op: string,
  padding: readonly number[],
  kernel: readonly number[],
): void {
  if (padding.some((p, d) => p * 2 > kernel[d])) {
    throw new RangeError(
      `${op}: padding ${JSON.stringify(padding)} must be at most half the kernel size ${
        JSON.stringify(kernel)
      }`,
    );
  }
}
