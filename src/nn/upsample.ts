/**
 * `Upsample`, as `torch.nn.Upsample`: a module around
 * `nn.functional.interpolate`.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { interpolate, type InterpolateMode } from "./functional/interpolate.ts";
import { Module } from "./module.ts";
import { pyFloat } from "./util.ts";

/** Options of {@link Upsample}: exactly one of `size` and `scaleFactor`. */
export interface UpsampleOptions {
  /** Output spatial size: a number for every spatial dim, or one per dim. */
  size?: number | readonly number[] | null;
  /** Multiplier of each spatial size (the output has floor(size · factor) elements). */
  scaleFactor?: number | readonly number[] | null;
  /**
   * `"nearest"` (default), `"nearest-exact"` (any), `"linear"` (3-D inputs),
   * `"bilinear"` (4-D inputs), `"trilinear"` (5-D inputs), `"bicubic"` (4-D
   * inputs) or `"area"` (any). (PyTorch 1.13's Upsample has no `antialias`;
   * `nn.functional.interpolate` has.)
   */
  mode?: InterpolateMode;
  /** Linear modes: map corner elements onto each other instead of pixel centres (default false). */
  alignCorners?: boolean | null;
  /**
   * With `scaleFactor`: source positions from input / output size instead
   * of 1 / factor (default false).
   */
  recomputeScaleFactor?: boolean | null;
}

/**
 * Resamples [N, C, L], [N, C, H, W] or [N, C, D, H, W] inputs to a new spatial size, as
 * `torch.nn.Upsample` of PyTorch 1.13 (see `nn.functional.interpolate`).
 */
export class Upsample extends Module {
  /** Output spatial size, or null. */
  readonly size: number | readonly number[] | null;
  /** Scale factor(s), or null. */
  readonly scaleFactor: number | readonly number[] | null;
  /** Interpolation mode. */
  readonly mode: InterpolateMode;
  /** Corner alignment of the linear modes (null: the default, false). */
  readonly alignCorners: boolean | null;
  /** Whether the source positions use the sizes instead of the factors. */
  readonly recomputeScaleFactor: boolean | null;

  /** Checked at the first forward, as PyTorch does. */
  constructor(options: UpsampleOptions = {}) {
    super();
    // Copies: a caller's later change to its array must not change the module.
    const frozen = <T>(v: T) => (Array.isArray(v) ? Object.freeze([...v]) as T : v);
    this.size = frozen(options.size ?? null);
    this.scaleFactor = frozen(options.scaleFactor ?? null);
    this.mode = options.mode ?? "nearest";
    this.alignCorners = options.alignCorners ?? null;
    this.recomputeScaleFactor = options.recomputeScaleFactor ?? null;
  }

  /** Resamples `x`. */
  override forward(x: Tensor): Tensor {
    return interpolate(x, {
      size: this.size,
      scaleFactor: this.scaleFactor,
      mode: this.mode,
      alignCorners: this.alignCorners,
      recomputeScaleFactor: this.recomputeScaleFactor,
    });
  }

  /** `scale_factor=2.0, mode=nearest` or `size=(3, 4), mode=bilinear`, as PyTorch prints it. */
  override extraRepr(): string {
    const tuple = (v: readonly string[]) => `(${v.join(", ")}${v.length === 1 ? "," : ""})`;
    const s = this.scaleFactor;
    const info = s !== null
      ? `scale_factor=${typeof s === "number" ? pyFloat(s) : tuple(s.map(pyFloat))}`
      : `size=${
        typeof this.size === "number" || this.size === null
          ? String(this.size ?? "None")
          : tuple(this.size.map(String))
      }`;
    return `${info}, mode=${this.mode}`;
  }
}
