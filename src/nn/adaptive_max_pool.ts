/**
 * `AdaptiveMaxPool3d`, `AdaptiveMaxPool2d` and `AdaptiveMaxPool1d`, as `torch.nn`'s (values
 * only, no `return_indices`).
 * @module
 */

import type { Tensor } from "../tensor.ts";
import * as F from "./functional.ts";
import { Module } from "./module.ts";
import { adaptiveSizeRepr } from "./util.ts";

/** Adaptive max pooling of [N, C, H, W] to a fixed size, as `torch.nn.AdaptiveMaxPool2d` (values only). */
export class AdaptiveMaxPool2d extends Module {
  /** [outH, outW], a number for both; null keeps the input's size. */
  readonly outputSize: number | readonly [number | null, number | null];

  /** Pools to `outputSize`. */
  constructor(outputSize: number | readonly [number | null, number | null]) {
    super();
    this.outputSize = outputSize;
  }

  /** Pools `x` [N, C, H, W] (or [C, H, W]). */
  override forward(x: Tensor): Tensor {
    return F.adaptiveMaxPool2d(x, this.outputSize);
  }

  /** `output_size=(2, 3)`. */
  override extraRepr(): string {
    return adaptiveSizeRepr(this.outputSize);
  }
}

/** Adaptive max pooling of [N, C, L] to a fixed length, as `torch.nn.AdaptiveMaxPool1d` (values only). */
export class AdaptiveMaxPool1d extends Module {
  /** Output length. */
  readonly outputSize: number | readonly [number];

  /** Pools to `outputSize` positions. */
  constructor(outputSize: number | readonly [number]) {
    super();
    this.outputSize = outputSize;
  }

  /** Pools `x` [N, C, L] (or [C, L]). */
  override forward(x: Tensor): Tensor {
    return F.adaptiveMaxPool1d(x, this.outputSize);
  }

  /** `output_size=3`. */
  override extraRepr(): string {
    const size = this.outputSize;
    return `output_size=${typeof size === "number" ? size : size[0]}`;
  }
}

/**
 * Adaptive max pooling of [N, C, D, H, W] to a fixed size, as
 * `torch.nn.AdaptiveMaxPool3d` (values only).
 */
export class AdaptiveMaxPool3d extends Module {
  /** [outD, outH, outW], a number for all; null keeps the input's size. */
  readonly outputSize: F.AdaptiveSize3;

  /** Pools to `outputSize`. */
  constructor(outputSize: F.AdaptiveSize3) {
    super();
    this.outputSize = outputSize;
  }

  /** Pools `x` [N, C, D, H, W] (or [C, D, H, W]). */
  override forward(x: Tensor): Tensor {
    return F.adaptiveMaxPool3d(x, this.outputSize);
  }

  /** `output_size=(1, 2, 3)`. */
  override extraRepr(): string {
    return adaptiveSizeRepr(this.outputSize);
  }
}
