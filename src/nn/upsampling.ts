/**
 * `UpsamplingNearest2d` and `UpsamplingBilinear2d`, as PyTorch 1.13's
 * deprecated fixed-mode forms of `nn.Upsample`.
 * @module
 */

import { Upsample } from "./upsample.ts";

/** Options of {@link UpsamplingNearest2d} and {@link UpsamplingBilinear2d}: one of the two. */
export interface UpsamplingOptions {
  /** Output spatial size: a number for both dims, or [H, W]. */
  size?: number | readonly number[] | null;
  /** Multiplier of each spatial size (the output has floor(size · factor) elements). */
  scaleFactor?: number | readonly number[] | null;
}

/**
 * Nearest-neighbour upsampling, as `torch.nn.UpsamplingNearest2d`:
 * `nn.Upsample` with mode `"nearest"`.
 */
export class UpsamplingNearest2d extends Upsample {
  /** Checked at the first forward, as PyTorch does. */
  constructor(options: UpsamplingOptions = {}) {
    super({ size: options.size, scaleFactor: options.scaleFactor, mode: "nearest" });
  }
}

/**
 * Bilinear upsampling with corner alignment, as
 * `torch.nn.UpsamplingBilinear2d`: `nn.Upsample` with mode `"bilinear"` and
 * `alignCorners: true`.
 */
export class UpsamplingBilinear2d extends Upsample {
  /** Checked at the first forward, as PyTorch does. */
  constructor(options: UpsamplingOptions = {}) {
    super({
      size: options.size,
      scaleFactor: options.scaleFactor,
      mode: "bilinear",
      alignCorners: true,
    });
  }
}
