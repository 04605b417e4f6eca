/**
 * PyTorch's `inplace=True` for activations and dropout, and its functional
 * in-place forms (`F.relu_`, `F.elu_`, ...): the input is overwritten with
 * the result, recorded like the Tensor's in-place ops (`relu_`, `add_`):
 * allowed on a non-leaf or a tensor without grad, refused on a leaf that
 * requires grad or on memory another tensor shares; the backward gets a copy
 * of the overwritten values, so the gradient is the out-of-place one.
 * @module
 */

import { inPlace } from "../../ops/inplace.ts";
import type { Tensor } from "../../tensor.ts";
import { elu, type EluOptions, hardtanh, type HardtanhOptions, leakyRelu } from "./activation.ts";
import type { LeakyReluOptions } from "./activation.ts";
import { celu, type CeluOptions, selu, threshold } from "./activation_extra.ts";
import { rrelu, type RReLUOptions } from "./nn_gaps.ts";

/** The `inplace` option of the modules that PyTorch lets work in place. */
export interface InplaceOptions {
  /**
   * Overwrite the input with the result and return it (default false), as
   * PyTorch's `inplace=True`. The input must not be a leaf that requires grad.
   */
  inplace?: boolean;
}

/** `f(x)`, written into `x` as the in-place op `op` when `inplace`. */
export function applyInPlace(
  op: string,
  x: Tensor,
  inplace: boolean | undefined,
  f: (x: Tensor) => Tensor,
): Tensor {
  return inplace ? inPlace(op, x, [], f) : f(x);
}

/** `max(x, 0)` in place, as `torch.nn.functional.relu_`. */
export function relu_(x: Tensor): Tensor {
  return inPlace("relu_", x, [], (t) => t.relu());
}

/** {@link elu} in place, as `torch.nn.functional.elu_`. */
export function elu_(x: Tensor, options: EluOptions = {}): Tensor {
  return inPlace("elu_", x, [], (t) => elu(t, options));
}

/** {@link leakyRelu} in place, as `torch.nn.functional.leaky_relu_`. */
export function leakyRelu_(x: Tensor, options: LeakyReluOptions = {}): Tensor {
  return inPlace("leakyRelu_", x, [], (t) => leakyRelu(t, options));
}

/** {@link hardtanh} in place, as `torch.nn.functional.hardtanh_`. */
export function hardtanh_(x: Tensor, options: HardtanhOptions = {}): Tensor {
  return inPlace("hardtanh_", x, [], (t) => hardtanh(t, options));
}

/** {@link rrelu} in place, as `torch.nn.functional.rrelu_`. */
export function rrelu_(x: Tensor, options: RReLUOptions = {}): Tensor {
  return inPlace("rrelu_", x, [], (t) => rrelu(t, options));
}

/** {@link celu} in place, as `torch.nn.functional.celu_`. */
export function celu_(x: Tensor, options: CeluOptions = {}): Tensor {
  return inPlace("celu_", x, [], (t) => celu(t, options));
}

/** {@link selu} in place, as `torch.nn.functional.selu_`. */
export function selu_(x: Tensor): Tensor {
  return inPlace("selu_", x, [], selu);
}

/** {@link threshold} in place, as `torch.nn.functional.threshold_`. */
export function threshold_(x: Tensor, thresholdValue: number, value: number): Tensor {
  return inPlace("threshold_", x, [], (t) => threshold(t, thresholdValue, value));
}

/** `", inplace=True"` when set, else `""`: how PyTorch's modules print the option. */
export function inplaceRepr(inplace: boolean): string {
  return inplace ? ", inplace=True" : "";
}

/**
 * PyTorch's keywords of the functional dropouts, as an options object:
 * `F.dropout(x, { p, training, inplace })` (the positional `p, training` still work).
 */
export interface DropoutOptions extends InplaceOptions {
  /** Probability of dropping (default 0.5). */
  p?: number;
  /** Drop only when true (default: the function's, true for dropout, false for alphaDropout). */
  training?: boolean;
}
