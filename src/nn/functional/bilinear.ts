/**
 * `bilinear` and `pairwiseDistance`, as `torch.nn.functional`'s, composed
 * from tensor ops so that both run forward and backward on every backend.
 * @module
 */

import { noGrad, record } from "../../autograd.ts";
import { formatShape, numelOf } from "../../shape.ts";
import { forwardScope } from "../../storage.ts";
import type { Tensor } from "../../tensor.ts";
import { checkFinite, checkFloatInput, sameDevice } from "../util.ts";
import { owned } from "../../ops_composite/owned.ts";

/**
 * `y[..., o] = Σᵢⱼ x1[..., i] · weight[o, i, j] · x2[..., j] + bias[o]`, as
 * `torch.nn.functional.bilinear`: `input1` [*, in1] and `input2` [*, in2]
 * (the same leading dims), `weight` [out, in1, in2], `bias` [out] or
 * null; gives [*, out].
 */
export function bilinear(
  input1: Tensor,
  input2: Tensor,
  weight: Tensor,
  bias: Tensor | null = null,
): Tensor {
  return owned(
    () => {
      const op = "bilinear";
      checkFloatInput(op, input1, "input1");
      checkFloatInput(op, input2, "input2");
      checkFloatInput(op, weight, "weight");
      if (bias !== null && bias !== undefined) checkFloatInput(op, bias, "bias");
      if (weight.ndim !== 3) {
        throw new RangeError(
          `${op}: weight must be 3-dimensional [out, in1, in2], got shape ${
            formatShape(weight.shape)
          }`,
        );
      }
      const [outF, in1, in2] = weight.shape;
      if (input1.ndim === 0 || input1.ndim !== input2.ndim) {
        throw new RangeError(
          `${op}: input1 of shape ${formatShape(input1.shape)} and input2 of shape ${
            formatShape(input2.shape)
          } must have the same number of dims (at least 1)`,
        );
      }
      for (let d = 0; d < input1.ndim - 1; d++) {
        if (input1.shape[d] !== input2.shape[d]) {
          throw new RangeError(
            `${op}: input batch dimensions do not match at dim ${d}: input1 of shape ${
              formatShape(input1.shape)
            }, input2 of shape ${formatShape(input2.shape)}`,
          );
        }
      }
      if (input1.shape.at(-1) !== in1) {
        throw new RangeError(
          `${op}: input1 of shape ${formatShape(input1.shape)} does not match weight of shape ${
            formatShape(weight.shape)
          } (last dim ${in1} expected)`,
        );
      }
      if (input2.shape.at(-1) !== in2) {
        throw new RangeError(
          `${op}: input2 of shape ${formatShape(input2.shape)} does not match weight of shape ${
            formatShape(weight.shape)
          } (last dim ${in2} expected)`,
        );
      }
      if (bias && (bias.ndim !== 1 || bias.shape[0] !== outF)) {
        throw new RangeError(
          `${op}: bias of shape ${formatShape(bias.shape)} does not match weight of shape ${
            formatShape(weight.shape)
          } (expected [${outF}])`,
        );
      }
      for (const [name, t] of [["input2", input2], ["weight", weight], ["bias", bias]] as const) {
        if (t && t.dtype !== input1.dtype) {
          throw new TypeError(
            `${op}: ${name} is ${t.dtype}, input1 ${input1.dtype}; they must match`,
          );
        }
      }
      sameDevice(op, { input1, input2, weight, bias });
      const lead = input1.shape.slice(0, -1);
      const n = numelOf(lead);
      return forwardScope(() => {
        // x1 · W as one matmul over [in1, out * in2], then the dot with x2 per output.
        const w = weight.permute([1, 0, 2]).reshape([in1, outF * in2]);
        const left = input1.reshape([n, in1]).matmul(w).reshape([n, outF, in2]);
        let y = left.mul(input2.reshape([n, 1, in2])).sum(2);
        if (bias) y = y.add(bias);
        return y.reshape([...lead, outF]);
      });
    },
    input1,
    input2,
    weight,
    bias,
  );
}

/** Options of {@link pairwiseDistance}. */
export interface PairwiseDistanceOptions {
  /** The norm's exponent (default 2; any number, `Infinity` and `-Infinity` included). */
  p?: number;
  /** Added to the difference before the norm (default 1e-6), as PyTorch. */
  eps?: number;
  /** Keep the reduced last dim with size 1 (default false). */
  keepdim?: boolean;
}

/**
 * `‖x1 - x2 + eps‖ₚ` over the last dim of the broadcast inputs, as
 * `torch.nn.functional.pairwise_distance` (PyTorch 1.13: the norm runs over
 * the last dim of the input with more dims; float32 and float64 inputs give
 * float64; the gradient is `torch.norm`'s, 0 at a zero distance, none for p = 0).
 */
export function pairwiseDistance(
  x1: Tensor,
  x2: Tensor,
  options: PairwiseDistanceOptions = {},
): Tensor {
  const op = "pairwiseDistance";
  checkFloatInput(op, x1, "x1");
  checkFloatInput(op, x2, "x2");
  const p = options.p ?? 2;
  if (typeof p !== "number" || Number.isNaN(p)) {
    throw new RangeError(`${op}: p must be a number (Infinity allowed), got ${p}`);
  }
  const eps = checkFinite(op, "eps", options.eps ?? 1e-6);
  const keepdim = options.keepdim ?? false;
  // Mixed float dtypes promote, as PyTorch's (x1 - x2 does).
  sameDevice(op, { x1, x2 });
  if (p === 0) {
    // The count of nonzeros has gradient 0 (PyTorch: none). Recorded directly on x1 and x2: a
    // null gradient from norm's backward would reach the subtraction's backward as null.
    const count = noGrad(() => pairwiseNorm(x1.sub(x2).add(eps), 0, keepdim));
    return record("pairwiseDistance", [x1, x2], count, () => [x1.zerosLike(), x2.zerosLike()]);
  }
  return forwardScope(() => pairwiseNorm(x1.sub(x2).add(eps), p, keepdim));
}

function pairwiseNorm(diff: Tensor, p: number, keepdim: boolean): Tensor {
  // 0-dim inputs: a norm over the one value (PyTorch's innermost dim of a scalar).
  if (diff.ndim === 0) return diff.reshape([1]).norm(p, 0);
  // PyTorch's norm of no elements is 0 for every p; a negative p's would be 0^(1/p) = inf here.
  if (diff.shape.at(-1) === 0) return diff.sum(-1, keepdim);
  return diff.norm(p, -1, keepdim);
}
