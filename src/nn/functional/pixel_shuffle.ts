/**
 * Sub-pixel rearrangements, as `torch.nn.functional.pixel_shuffle` and
 * `pixel_unshuffle`: a reshape, a permute and a reshape, so they run (with
 * gradients) on every backend and for any dtype.
 * @module
 */

import { formatShape } from "../../shape.ts";
import { forwardScope } from "../../storage.ts";
import type { Tensor } from "../../tensor.ts";
import { checkTensor } from "../util.ts";
import { owned } from "../../ops_composite/owned.ts";

function checkFactor(op: string, name: string, factor: unknown): number {
  if (typeof factor !== "number" || !Number.isInteger(factor) || factor <= 0) {
    throw new RangeError(`${op}: ${name} must be a positive integer, got ${factor}`);
  }
  return factor;
}

function checkRank(op: string, x: Tensor): void {
  checkTensor(op, "input", x);
  if (x.ndim < 3) {
    throw new RangeError(
      `${op}: expected an input of at least 3 dims [*, C, H, W], got shape ${formatShape(x.shape)}`,
    );
  }
}

/**
 * `[*, C·r², H, W]` to `[*, C, H·r, W·r]` (`r` = `upscaleFactor`), as
 * `torch.nn.functional.pixel_shuffle`: output pixel (h·r + i, w·r + j) of
 * channel c is input channel c·r² + i·r + j at (h, w).
 */
export function pixelShuffle(x: Tensor, upscaleFactor: number): Tensor {
  const op = "pixelShuffle";
  checkRank(op, x);
  const r = checkFactor(op, "upscaleFactor", upscaleFactor);
  const batch = x.shape.slice(0, -3);
  const [c, h, w] = x.shape.slice(-3);
  if (c % (r * r) !== 0) {
    throw new RangeError(
      `${op}: the channel dim (size ${c}, dim -3 of input of shape ${
        formatShape(x.shape)
      }) must be divisible by upscaleFactor² = ${r * r}`,
    );
  }
  const b = batch.length;
  const lead = batch.map((_, i) => i);
  // A new tensor, as PyTorch's (the permute's copy is the result's own memory).
  return owned(() =>
    forwardScope(() =>
      x.reshape([...batch, c / (r * r), r, r, h, w])
        .permute([...lead, b, b + 3, b + 1, b + 4, b + 2])
        .reshape([...batch, c / (r * r), h * r, w * r])
    ), x);
}

/**
 * `[*, C, H·r, W·r]` to `[*, C·r², H, W]` (`r` = `downscaleFactor`), the inverse
 * of {@link pixelShuffle}, as `torch.nn.functional.pixel_unshuffle`.
 */
export function pixelUnshuffle(x: Tensor, downscaleFactor: number): Tensor {
  const op = "pixelUnshuffle";
  checkRank(op, x);
  const r = checkFactor(op, "downscaleFactor", downscaleFactor);
  const batch = x.shape.slice(0, -3);
  const [c, h, w] = x.shape.slice(-3);
  for (const [name, size, dim] of [["height", h, -2], ["width", w, -1]] as const) {
    if (size % r !== 0) {
      throw new RangeError(
        `${op}: the ${name} (size ${size}, dim ${dim} of input of shape ${
          formatShape(x.shape)
        }) must be divisible by downscaleFactor ${r}`,
      );
    }
  }
  const b = batch.length;
  const lead = batch.map((_, i) => i);
  // A new tensor, as PyTorch's, and no view of x comes out: both stay changeable in place.
  return owned(() =>
    forwardScope(() =>
      x.reshape([...batch, c, h / r, r, w / r, r])
        .permute([...lead, b, b + 2, b + 4, b + 1, b + 3])
        .reshape([...batch, c * r * r, h / r, w / r])
    ), x);
}
