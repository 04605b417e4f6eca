/**
 * Two `torch.nn.functional` names over code the library already has:
 * `conv_tbc` (a 1-d convolution of time-first input) and
 * `native_channel_shuffle`.
 * @module
 */

import { formatShape } from "../../shape.ts";
import type { Tensor } from "../../tensor.ts";
import { checkFloatInput, checkTensor } from "../util.ts";
import { conv1d } from "./conv.ts";
import { channelShuffle } from "./pool_extra.ts";

/**
 * 1-d convolution of a time-first sequence, as `torch.nn.functional.conv_tbc`:
 * `input` [T, B, Cin], `weight` [K, Cin, Cout], `bias` [Cout] (required, as
 * PyTorch's), `pad` zeros at both ends of the time dim; the output is
 * [T + 2·pad - K + 1, B, Cout], `output[t] = bias + Σ_k input[t + k - pad]
 * weight[k]` (cross-correlation, as `conv1d`). Runs {@link conv1d}, so its
 * gradients and every backend come with it.
 */
export function convTbc(input: Tensor, weight: Tensor, bias: Tensor, pad = 0): Tensor {
  const op = "convTbc";
  checkFloatInput(op, input);
  checkFloatInput(op, weight, "weight");
  checkFloatInput(op, bias, "bias");
  if (input.ndim !== 3 || weight.ndim !== 3 || bias.ndim !== 1) {
    throw new RangeError(
      `${op}: expected input [T, B, Cin] (3-D), weight [K, Cin, Cout] (3-D) and bias [Cout] (1-D), got ${
        formatShape(input.shape)
      }, ${formatShape(weight.shape)} and ${formatShape(bias.shape)}`,
    );
  }
  if (weight.shape[1] !== input.shape[2] || bias.shape[0] !== weight.shape[2]) {
    throw new RangeError(
      `${op}: input ${formatShape(input.shape)} has ${input.shape[2]} channels, weight ${
        formatShape(weight.shape)
      } takes ${weight.shape[1]} and gives ${weight.shape[2]}, bias ${
        formatShape(bias.shape)
      } has ${bias.shape[0]}: the channel counts must agree`,
    );
  }
  if (!Number.isInteger(pad) || pad < 0) {
    throw new RangeError(`${op}: pad must be a non-negative integer, got ${pad}`);
  }
  const y = conv1d(input.permute([1, 2, 0]), weight.permute([2, 1, 0]), bias, { padding: pad });
  return y.permute([2, 0, 1]);
}

/**
 * `torch.nn.functional.native_channel_shuffle`: the same shuffle as
 * {@link channelShuffle} (PyTorch's native kernel of it; here one code path).
 */
export function nativeChannelShuffle(input: Tensor, groups: number): Tensor {
  checkTensor("nativeChannelShuffle", "input", input);
  return channelShuffle(input, groups);
}
