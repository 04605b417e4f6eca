/**
 * `PixelShuffle` and `PixelUnshuffle`, as `torch.nn`'s.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import * as F from "./functional/pixel_shuffle.ts";
import { Module } from "./module.ts";
import { checkCount } from "./util.ts";

/** `[*, C·r², H, W]` to `[*, C, H·r, W·r]`, as `torch.nn.PixelShuffle`. */
export class PixelShuffle extends Module {
  /** r. */
  readonly upscaleFactor: number;

  /** A pixel shuffle by `upscaleFactor` (a positive integer). */
  constructor(upscaleFactor: number) {
    super();
    this.upscaleFactor = checkCount("PixelShuffle: upscaleFactor", upscaleFactor, false);
  }

  /** Rearranges `x`. */
  override forward(x: Tensor): Tensor {
    return F.pixelShuffle(x, this.upscaleFactor);
  }

  /** `upscale_factor=2`. */
  override extraRepr(): string {
    return `upscale_factor=${this.upscaleFactor}`;
  }
}

/** `[*, C, H·r, W·r]` to `[*, C·r², H, W]`, as `torch.nn.PixelUnshuffle`. */
export class PixelUnshuffle extends Module {
  /** r. */
  readonly downscaleFactor: number;

  /** A pixel unshuffle by `downscaleFactor` (a positive integer). */
  constructor(downscaleFactor: number) {
    super();
    this.downscaleFactor = checkCount("PixelUnshuffle: downscaleFactor", downscaleFactor, false);
  }

  /** Rearranges `x`. */
  override forward(x: Tensor): Tensor {
    return F.pixelUnshuffle(x, this.downscaleFactor);
  }

  /** `downscale_factor=2`. */
  override extraRepr(): string {
    return `downscale_factor=${this.downscaleFactor}`;
  }
}
