/**
 * Training batch norm through the backend's fused `batchNorm` and
 * `batchNormBackward` kernels: two passes over the input forward and two
 * backward, where the composition in `functional.ts` makes about eight and
 * nine. `batchNorm` uses it when the backend has both kernels and the layer
 * is affine.
 * @module
 */

import { record } from "../../autograd.ts";
import type { Tensor } from "../../tensor.ts";
import { empty, hasKernel, launch } from "../../ops/util.ts";

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
