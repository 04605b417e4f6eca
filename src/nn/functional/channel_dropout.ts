/**
 * Channel-wise and self-normalizing dropout, as `torch.nn.functional`'s
 * `dropout1d`, `dropout2d`, `dropout3d` and `alpha_dropout`. The masks come from the
 * seeded `rand` stream on the input's device, as `dropout`'s, so a seeded
 * run draws the same channels on every backend.
 * @module
 */

import { noGrad } from "../../autograd.ts";
import { rand } from "../../ops/factory.ts";
import { formatShape } from "../../shape.ts";
import { forwardScope, tidy } from "../../storage.ts";
import type { Tensor } from "../../tensor.ts";
import { checkDropout, dropoutWithOptions } from "../util.ts";
import type { DropoutOptions } from "./inplace.ts";

/**
 * ATen's `feature_dropout` on [N, C, ...]: one draw per (sample, channel),
 * broadcast over the rest, kept ones scaled by `1 / (1 - p)`.
 */
function featureDropout(x: Tensor, p: number, training: boolean): Tensor {
  if (!training || p === 0 || x.numel() === 0) return x;
  // As PyTorch: a product with 0, so NaN and infinite inputs give NaN.
  if (p === 1) return x.mul(0);
  const shape = x.shape.map((n, i) => (i < 2 ? n : 1));
  // The scaled mask carries no gradient itself: build it outside the graph.
  const mask = noGrad(() =>
    tidy(() => rand(shape, { dtype: x.dtype, device: x.device }).ge(p).mul(1 / (1 - p)))
  );
  return forwardScope(() => x.mul(mask));
}

/**
 * Zeroes whole channels of [N, C, L] (or unbatched [C, L]) with probability
 * `p`, scaling the rest by `1 / (1 - p)`, when `training` (default true), as
 * `torch.nn.functional.dropout1d`; otherwise returns `x`.
 */
export function dropout1d(
  x: Tensor,
  p: number | DropoutOptions = 0.5,
  training = true,
): Tensor {
  if (typeof p === "object" && p !== null) {
    return dropoutWithOptions("dropout1d", x, p, true, dropout1d);
  }
  checkDropout("dropout1d", x, p);
  if (x.ndim !== 2 && x.ndim !== 3) {
    throw new RangeError(
      `dropout1d: expected a 2D [C, L] or 3D [N, C, L] input, got shape ${
        formatShape(x.shape)
      } (${x.ndim}D); dropout1d drops channels of inputs with one spatial dim`,
    );
  }
  if (x.ndim === 3) return featureDropout(x, p, training);
  return forwardScope(() => featureDropout(x.unsqueeze(0), p, training).squeeze(0));
}

const warned = new Set<string>();

function warnOnce(key: string, message: string): void {
  if (warned.has(key)) return;
  warned.add(key);
  console.warn(message);
}

/**
 * Zeroes whole channels of [N, C, H, W] with probability `p`, scaling the
 * rest by `1 / (1 - p)`, when `training` (default true), as
 * `torch.nn.functional.dropout2d`; otherwise returns `x`.
 *
 * Other ranks behave as in PyTorch 1.13, with its warnings (once each): a
 * 3D input is taken as [N, C, L] (1.13 does not treat it as an unbatched
 * [C, H, W]: each of the N·C rows is dropped as a whole), any other rank of
 * at least 2 drops per (dim 0, dim 1) pair, and fewer than 2 dims is an
 * error.
 */
export function dropout2d(
  x: Tensor,
  p: number | DropoutOptions = 0.5,
  training = true,
): Tensor {
  if (typeof p === "object" && p !== null) {
    return dropoutWithOptions("dropout2d", x, p, true, dropout2d);
  }
  checkDropout("dropout2d", x, p);
  if (x.ndim < 2) {
    throw new RangeError(
      `dropout2d: expected a 4D [N, C, H, W] input, got shape ${
        formatShape(x.shape)
      } (${x.ndim}D); channel dropout needs at least 2 dims`,
    );
  }
  if (x.ndim === 3) {
    warnOnce(
      "dropout2d 3D",
      "dropout2d: a 3D input is taken as [N, C, L] (channel-wise 1D dropout), as PyTorch 1.13 does; PyTorch warns that it will read it as an unbatched [C, H, W] in a future release. Use dropout1d for [N, C, L] inputs.",
    );
  } else if (x.ndim !== 4) {
    warnOnce(
      `dropout2d ${x.ndim}D`,
      `dropout2d: received a ${x.ndim}D input (shape ${
        formatShape(x.shape)
      }); dropout2d is meant for 4D [N, C, H, W] inputs and PyTorch 1.13 deprecates other ranks. Each (dim 0, dim 1) slice is dropped as a whole.`,
    );
  }
  return featureDropout(x, p, training);
}

/**
 * Zeroes whole channels of [N, C, D, H, W] (or unbatched [C, D, H, W]) with
 * probability `p`, scaling the rest by `1 / (1 - p)`, when `training`
 * (default true), as `torch.nn.functional.dropout3d`; otherwise returns `x`.
 * Other ranks behave as in PyTorch 1.13, with its warning (once per rank):
 * the input is taken as unbatched and each slice along dim 0 is dropped as a
 * whole.
 */
export function dropout3d(
  x: Tensor,
  p: number | DropoutOptions = 0.5,
  training = true,
): Tensor {
  if (typeof p === "object" && p !== null) {
    return dropoutWithOptions("dropout3d", x, p, true, dropout3d);
  }
  checkDropout("dropout3d", x, p);
  if (x.ndim === 0) {
    throw new RangeError(
      "dropout3d: expected a 5D [N, C, D, H, W] or 4D [C, D, H, W] input, got a 0-dimensional one",
    );
  }
  if (x.ndim === 5) return featureDropout(x, p, training);
  if (x.ndim !== 4) {
    warnOnce(
      `dropout3d ${x.ndim}D`,
      `dropout3d: received a ${x.ndim}D input (shape ${
        formatShape(x.shape)
      }); dropout3d is meant for 4D [C, D, H, W] and 5D [N, C, D, H, W] inputs and PyTorch 1.13 deprecates other ranks. It is taken as unbatched: each slice along dim 0 is dropped as a whole.`,
    );
  }
  return forwardScope(() => featureDropout(x.unsqueeze(0), p, training).squeeze(0));
}

/** The SELU's negative saturation value `-scale · alpha`, as ATen's alpha dropout. */
const ALPHA = 1.7580993408473766;

/**
 * Alpha dropout, as `torch.nn.functional.alpha_dropout`: when `training`
 * (default false, as PyTorch's functional form) each element is set with
 * probability `p` to SELU's negative saturation, and the result is scaled
 * and shifted (`a = 1 / √((α² p + 1)(1 - p))`, kept `x · a + α a p`,
 * dropped `-α a (1 - p)`) so that inputs of zero mean and unit variance keep
 * them. `p = 1` gives `x · 0`, as PyTorch.
 */
export function alphaDropout(
  x: Tensor,
  p: number | DropoutOptions = 0.5,
  training = false,
): Tensor {
  if (typeof p === "object" && p !== null) {
    return dropoutWithOptions("alphaDropout", x, p, false, alphaDropout);
  }
  checkDropout("alphaDropout", x, p);
  if (!training || p === 0 || x.numel() === 0) return x;
  if (p === 1) return x.mul(0);
  const a = 1 / Math.sqrt((ALPHA * ALPHA * p + 1) * (1 - p));
  const [scale, shift] = noGrad(() =>
    tidy(() => {
      const keep = rand([...x.shape], { dtype: x.dtype, device: x.device }).ge(p);
      // ATen: b = (noise - 1) · (α a) + α a p, then input · (noise · a) + b.
      return [keep.mul(a), keep.sub(1).mul(ALPHA * a).add(ALPHA * a * p)];
    })
  );
  return forwardScope(() => x.mul(scale).add(shift));
}
