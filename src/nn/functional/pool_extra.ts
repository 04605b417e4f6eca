/**
 * More pooling, as `torch.nn.functional`'s: `adaptiveAvgPool1d`, `lpPool1d`,
 * `lpPool2d`, `maxUnpool1d`, `maxUnpool2d`, and `channelShuffle`. The
 * pools compose the average pools (PyTorch's own formulas); unpooling
 * scatter-adds into the output planes, with a gather as its gradient.
 * @module
 */

import { record } from "../../autograd.ts";
import { full } from "../../ops/factory.ts";
import { gatherInRange, scatterAddRaw, where } from "../../ops/indexing.ts";
import { checkIndexRange } from "../../ops/view.ts";
import { formatShape, sameShape } from "../../shape.ts";
import { forwardScope } from "../../storage.ts";
import type { Tensor } from "../../tensor.ts";
import { checkFinite, checkFloatInput, checkTensor, sameDevice } from "../util.ts";
import { adaptiveAvgPool2d, avgPool2d, type Size2 } from "./conv.ts";
import { avgPool1d, type Size1 } from "./pool1d.ts";
import { pair } from "./window_args.ts";

function checkRanks(op: string, x: Tensor, dims: number, layout: string): void {
  checkFloatInput(op, x);
  if (x.ndim !== dims + 1 && x.ndim !== dims + 2) {
    throw new RangeError(
      `${op}: expected a ${dims + 1}-D (unbatched) or ${
        dims + 2
      }-D (batched) input ${layout}, got shape ${formatShape(x.shape)}`,
    );
  }
}

function one(op: string, name: string, v: Size1, min: number): number {
  const value = typeof v === "number" ? v : v.length === 1 ? v[0] : NaN;
  if (!Number.isInteger(value) || value < min) {
    throw new RangeError(
      `${op}: ${name} must be an integer >= ${min} (or [integer]), got ${JSON.stringify(v)}`,
    );
  }
  return value;
}

/**
 * Average pooling of [N, C, L] (or [C, L]) to `outputSize` positions, as
 * `torch.nn.functional.adaptive_avg_pool1d`: window i covers
 * [floor(i·L/out), ceil((i+1)·L/out)).
 */
export function adaptiveAvgPool1d(input: Tensor, outputSize: Size1): Tensor {
  const op = "adaptiveAvgPool1d";
  checkRanks(op, input, 1, "[N, C, L]");
  const out = one(op, "outputSize", outputSize, 1);
  return forwardScope(() => adaptiveAvgPool2d(input.unsqueeze(-2), [1, out]).squeeze(-2));
}

/** Options of {@link lpPool1d} and {@link lpPool2d}. */
export interface LPPoolOptions<S> {
  /** Step between windows (default: the kernel size). */
  stride?: S | null;
  /** Round the output size up instead of down (default false). */
  ceilMode?: boolean;
}

/**
 * PyTorch's last step: `sign(avg)·relu(|avg|)·taps`, to the power 1/p (an
 * average that is NaN, from a negative input to a fractional power, stays NaN).
 */
function lpFinish(avg: Tensor, taps: number, normType: number): Tensor {
  return avg.sign().mul(avg.abs().relu()).mul(taps).pow(1 / normType);
}

/**
 * Power-average pooling along the last dim of [N, C, L] (or [C, L]):
 * (Σ over the window of x^p)^(1/p), as `torch.nn.functional.lp_pool1d`
 * (computed as PyTorch does, from an average pool of x^p times the kernel
 * size, so a window that `ceilMode` cuts short gives its sum scaled by
 * kernel size / taps inside).
 */
export function lpPool1d(
  input: Tensor,
  normType: number,
  kernelSize: Size1,
  options: LPPoolOptions<Size1> = {},
): Tensor {
  const op = "lpPool1d";
  checkRanks(op, input, 1, "[N, C, L]");
  const p = checkFinite(op, "normType", normType, { nonZero: true });
  const k = one(op, "kernelSize", kernelSize, 1);
  const stride = options.stride == null ? k : one(op, "stride", options.stride, 1);
  return forwardScope(() => {
    const avg = avgPool1d(input.pow(p), k, { stride, ceilMode: options.ceilMode });
    return lpFinish(avg, k, p);
  });
}

/**
 * Power-average pooling over windows of [N, C, H, W] (or [C, H, W]), as
 * `torch.nn.functional.lp_pool2d` (see {@link lpPool1d}).
 */
export function lpPool2d(
  input: Tensor,
  normType: number,
  kernelSize: Size2,
  options: LPPoolOptions<Size2> = {},
): Tensor {
  const op = "lpPool2d";
  checkRanks(op, input, 2, "[N, C, H, W]");
  const p = checkFinite(op, "normType", normType, { nonZero: true });
  const kernel = pair(op, "kernelSize", kernelSize, 1);
  const stride = options.stride == null ? kernel : pair(op, "stride", options.stride, 1);
  return forwardScope(() => {
    const avg = avgPool2d(input.pow(p), kernel, { stride, ceilMode: options.ceilMode });
    return lpFinish(avg, kernel[0] * kernel[1], p);
  });
}

/** Options of {@link maxUnpool1d} and {@link maxUnpool2d}. */
export interface MaxUnpoolOptions<S> {
  /** The pool's step between windows (default: the kernel size). */
  stride?: S | null;
  /** The pool's padding (default 0). */
  padding?: S;
  /**
   * The output's spatial size (or its full size [N, C, ...spatial]); by
   * default the pool's input size `(in - 1)·stride + kernel - 2·padding`.
   * Each dim must lie strictly within `stride` of that default.
   */
  outputSize?: readonly number[] | null;
}

/**
 * The inverse of a max pool over `dims` spatial dims: `input` values
 * written at `indices` of zeroed output planes. A repeated index (the
 * pool's windows overlapped) holds its values, which are then equal,
 * exactly; unequal ones (not from a pool) give about their mean, where
 * PyTorch keeps one of them (the last on cpu; which one is undefined on cuda).
 */
export function maxUnpool(
  op: string,
  input: Tensor,
  indices: Tensor,
  kernel: readonly number[],
  stride: readonly number[],
  padding: readonly number[],
  outputSize: readonly number[] | null | undefined,
): Tensor {
  const dims = kernel.length;
  checkTensor(op, "indices", indices);
  if (indices.dtype !== "int32") {
    throw new TypeError(
      `${op}: indices must be an int32 tensor (as a max pool's returnIndices gives), got ${indices.dtype}`,
    );
  }
  if (!sameShape(indices.shape, input.shape)) {
    throw new RangeError(
      `${op}: indices of shape ${formatShape(indices.shape)} must have the shape of input ${
        formatShape(input.shape)
      }`,
    );
  }
  sameDevice(op, { input, indices });
  const inSpatial = input.shape.slice(-dims);
  const defaults = inSpatial.map((s, d) => (s - 1) * stride[d] + kernel[d] - 2 * padding[d]);
  let size = defaults;
  if (outputSize != null) {
    const given = outputSize.length === dims + 2 ? outputSize.slice(2) : [...outputSize];
    if (given.length !== dims) {
      throw new RangeError(
        `${op}: outputSize must have ${dims} or ${dims + 2} elements, got ${
          JSON.stringify(outputSize)
        }`,
      );
    }
    given.forEach((s, d) => {
      const [low, high] = [defaults[d] - stride[d], defaults[d] + stride[d]];
      if (!Number.isInteger(s) || !(low < s && s < high)) {
        throw new RangeError(
          `${op}: invalid outputSize ${
            JSON.stringify(outputSize)
          } (dim ${d} must be between ${low} and ${high}, exclusive)`,
        );
      }
    });
    size = given;
  }
  if (size.some((s) => s < 1)) {
    throw new RangeError(
      `${op}: output size ${JSON.stringify(size)} for input of shape ${
        formatShape(input.shape)
      } is empty`,
    );
  }
  const plane = size.reduce((a, b) => a * b, 1);
  const lead = input.shape.slice(0, -dims);
  const count = inSpatial.reduce((a, b) => a * b, 1);
  const flatShape = [lead.reduce((a, b) => a * b, 1), count];
  checkIndexRange(
    indices,
    plane,
    (bad) =>
      `${op}: index ${bad} is out of range for output planes of size ${
        size.join(" x ")
      } (${plane} elements)`,
  );
  return forwardScope(() => {
    const x = input.reshape(flatShape);
    const index = indices.reshape(flatShape);
    const v = x.detach();
    const ones = full(flatShape, 1, { dtype: x.dtype, device: x.device });
    const counts = scatterAddRaw(ones, index, 1, plane).clamp(1);
    // A repeated index (overlapping windows) holds equal values v, whose sum
    // may overflow and whose mean may be off by an ulp: the shares v / count
    // sum to within ulps of v; the residuals v - that are exact and sum
    // exactly, and their mean added lands on v.
    const approx = scatterAddRaw(v.div(gatherInRange(counts, 1, index)), index, 1, plane);
    const residual = scatterAddRaw(v.sub(gatherInRange(approx, 1, index)), index, 1, plane);
    const y = where(approx.isfinite(), approx.add(residual.div(counts)), approx);
    // As PyTorch's: each input's gradient is the output gradient where it went.
    record(op, [x], y, ([g]) => [gatherInRange(g!, 1, index)]);
    return y.reshape([...lead, ...size]);
  });
}

/**
 * Scatters the values of a max pool over [N, C, L] (or [C, L]) back to
 * where `indices` (its `returnIndices`, int32) say they came from, zeros
 * elsewhere, as `torch.nn.functional.max_unpool1d`.
 */
export function maxUnpool1d(
  input: Tensor,
  indices: Tensor,
  kernelSize: Size1,
  options: MaxUnpoolOptions<Size1> = {},
): Tensor {
  const op = "maxUnpool1d";
  checkRanks(op, input, 1, "[N, C, L]");
  const k = one(op, "kernelSize", kernelSize, 1);
  const stride = options.stride == null ? k : one(op, "stride", options.stride, 1);
  const padding = one(op, "padding", options.padding ?? 0, 0);
  return maxUnpool(op, input, indices, [k], [stride], [padding], options.outputSize);
}

/**
 * Scatters the values of a max pool over [N, C, H, W] (or [C, H, W]) back
 * to where `indices` (flat positions in each input plane, int32) say they
 * came from, zeros elsewhere, as `torch.nn.functional.max_unpool2d`.
 */
export function maxUnpool2d(
  input: Tensor,
  indices: Tensor,
  kernelSize: Size2,
  options: MaxUnpoolOptions<Size2> = {},
): Tensor {
  const op = "maxUnpool2d";
  checkRanks(op, input, 2, "[N, C, H, W]");
  const kernel = pair(op, "kernelSize", kernelSize, 1);
  const stride = options.stride == null ? kernel : pair(op, "stride", options.stride, 1);
  const padding = pair(op, "padding", options.padding ?? 0, 0);
  return maxUnpool(op, input, indices, kernel, stride, padding, options.outputSize);
}

/**
 * Interleaves the channels (dim 1) of [N, C, ...] in `groups`: channel
 * g·(C/groups) + i moves to i·groups + g, as
 * `torch.nn.functional.channel_shuffle`.
 */
export function channelShuffle(input: Tensor, groups: number): Tensor {
  const op = "channelShuffle";
  checkTensor(op, "input", input);
  if (!Number.isInteger(groups) || groups < 1) {
    throw new RangeError(`${op}: groups must be a positive integer, got ${groups}`);
  }
  if (input.ndim < 3) {
    throw new RangeError(
      `${op}: expected an input of more than 2 dims [N, C, *], got shape ${
        formatShape(input.shape)
      }`,
    );
  }
  const [n, c, ...rest] = input.shape;
  if (c % groups !== 0) {
    throw new RangeError(
      `${op}: the ${c} channels (dim 1) of input of shape ${
        formatShape(input.shape)
      } must be divisible by groups ${groups}`,
    );
  }
  return forwardScope(() =>
    input.reshape([n, groups, c / groups, ...rest]).transpose(1, 2).reshape(input.shape)
  );
}
