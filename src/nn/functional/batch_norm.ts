/**
 * Training batch norm through the backend's fused `batchNorm` and
 * `batchNormBackward` kernels: two passes over the input forward and two
 * backward, where the composition in `functional.ts` makes about eight and
 * nine. `batchNorm` uses it when the backend has both kernels and the layer
 * is affine.
 * @module
 */

import { record } from "../../autograd.ts";
import { recomputedBackward, recording } from "../../autograd/recompute.ts";
import type { Tensor } from "../../tensor.ts";
import { empty, hasKernel, launch } from "../../ops/util.ts";

/**
 * Training batch norm of `x` [N, C, ...] from recorded ops, without the
 * running statistics: what the fused and the closed-form backward
 * differentiate under createGraph (gradients of gradients).
 */
export function composedBatchNorm(
  x: Tensor,
  weight: Tensor | null,
  bias: Tensor | null,
  eps: number,
): Tensor {
  const [n, c] = x.shape;
  const x3 = x.reshape([n, c, x.numel() / (n * c)]);
  const centered = x3.sub(x3.mean([0, 2], true));
  let y = centered.mul(centered.square().mean([0, 2], true).add(eps).rsqrt());
  if (weight) y = y.mul(weight.reshape([1, c, 1]));
  if (bias) y = y.add(bias.reshape([1, c, 1]));
  return y.reshape(x.shape);
}

/**
 * The normalized `x` [N, C, ...] (differentiable in `x`, `weight` and
 * `bias`) with the batch `mean` and biased `variance` [C]; null when the
 * backend lacks the fused kernels.
 */
export function fusedBatchNorm(
  x: Tensor,
  weight: Tensor,
  bias: Tensor,
  eps: number,
): { y: Tensor; mean: Tensor; variance: Tensor } | null {
  const device = x.device;
  if (!hasKernel(device, "batchNorm") || !hasKernel(device, "batchNormBackward")) return null;
  const dtype = x.dtype;
  const [outer, channels] = x.shape;
  const inner = x.numel() / (outer * channels);
  const shape = { outer, channels, inner, dtype };
  const y = empty(x.shape, dtype, device);
  const mean = empty([channels], dtype, device);
  const invstd = empty([channels], dtype, device);
  const variance = empty([channels], dtype, device);
  launch(device, "batchNorm", {
    ...shape,
    x: x.storage.buffer("batchNorm"),
    weight: weight.storage.buffer("batchNorm"),
    bias: bias.storage.buffer("batchNorm"),
    mean: mean.storage.buffer(),
    invstd: invstd.storage.buffer(),
    variance: variance.storage.buffer(),
    out: y.storage.buffer(),
    eps,
  });
  record("batchNorm", [x, weight, bias], y, ([g]) => {
    if (recording()) {
      return recomputedBackward(
        [x, weight, bias],
        () => composedBatchNorm(x, weight, bias, eps),
        g!,
      );
    }
    const gradInput = empty(x.shape, dtype, device);
    const gradWeight = empty([channels], dtype, device);
    const gradBias = empty([channels], dtype, device);
    const what = "batchNorm backward";
    launch(device, "batchNormBackward", {
      ...shape,
      x: x.storage.buffer(what),
      weight: weight.storage.buffer(what),
      mean: mean.storage.buffer(what),
      invstd: invstd.storage.buffer(what),
      grad: g!.storage.buffer(what),
      gradInput: gradInput.storage.buffer(),
      gradWeight: gradWeight.storage.buffer(),
      gradBias: gradBias.storage.buffer(),
    });
    return [gradInput, gradWeight, gradBias];
  });
  return { y, mean, variance };
}
