/**
 * Dropout layers beyond `Dropout`: `Dropout1d`, `Dropout2d` and `Dropout3d` (whole
 * channels) and `AlphaDropout` (for SELU networks), as `torch.nn`'s. Each is
 * the identity in evaluation mode.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import * as F from "./functional/channel_dropout.ts";
import { Module } from "./module.ts";
import { pyBool, pyFloat } from "./util.ts";
import { applyInPlace, type InplaceOptions } from "./functional/inplace.ts";

/** What the dropout layers share, as PyTorch's `_DropoutNd`: `p`, checked, and the repr. */
export abstract class DropoutNd extends Module {
  /** Probability of dropping (a channel, or an element). */
  readonly p: number;
  /** Whether forward overwrites its input (PyTorch's `inplace`). */
  readonly inplace: boolean;

  /** A dropout layer with probability `p` in [0, 1], named `name` in errors. */
  constructor(name: string, p: number, options: InplaceOptions = {}) {
    super();
    this.inplace = options.inplace ?? false;
    if (typeof p !== "number" || !(p >= 0 && p <= 1)) {
      throw new RangeError(`${name}: dropout probability has to be between 0 and 1, but got ${p}`);
    }
    this.p = p;
  }

  /** `p=0.5, inplace=False`. */
  override extraRepr(): string {
    return `p=${pyFloat(this.p)}, inplace=${pyBool(this.inplace)}`;
  }
}

/**
 * In training mode zeroes whole channels of [N, C, L] (or [C, L]) inputs
 * with probability `p` and scales the others by `1 / (1 - p)`, as
 * `torch.nn.Dropout1d`; the identity in evaluation mode.
 */
export class Dropout1d extends DropoutNd {
  /** Channel dropout with probability `p` (default 0.5); `inplace` as PyTorch\'s `inplace=True`. */
  constructor(p = 0.5, options: InplaceOptions = {}) {
    super("Dropout1d", p, options);
  }

  /** Applies channel dropout when training. */
  override forward(x: Tensor): Tensor {
    return applyInPlace(
      "dropout1d_",
      x,
      this.inplace,
      (x) => F.dropout1d(x, this.p, this.training),
    );
  }
}

/**
 * In training mode zeroes whole channels of [N, C, H, W] inputs with
 * probability `p` and scales the others by `1 / (1 - p)`, as
 * `torch.nn.Dropout2d`; the identity in evaluation mode. A 3D input is
 * taken as [N, C, L], as PyTorch 1.13 does (see `functional.dropout2d`).
 */
export class Dropout2d extends DropoutNd {
  /** Channel dropout with probability `p` (default 0.5); `inplace` as PyTorch\'s `inplace=True`. */
  constructor(p = 0.5, options: InplaceOptions = {}) {
    super("Dropout2d", p, options);
  }

  /** Applies channel dropout when training. */
  override forward(x: Tensor): Tensor {
    return applyInPlace(
      "dropout2d_",
      x,
      this.inplace,
      (x) => F.dropout2d(x, this.p, this.training),
    );
  }
}

/**
 * In training mode zeroes whole channels of [N, C, D, H, W] (or
 * [C, D, H, W]) inputs with probability `p` and scales the others by
 * `1 / (1 - p)`, as `torch.nn.Dropout3d`; the identity in evaluation mode.
 */
export class Dropout3d extends DropoutNd {
  /** Channel dropout with probability `p` (default 0.5); `inplace` as PyTorch\'s `inplace=True`. */
  constructor(p = 0.5, options: InplaceOptions = {}) {
    super("Dropout3d", p, options);
  }

  /** Applies channel dropout when training. */
  override forward(x: Tensor): Tensor {
    return applyInPlace(
      "dropout3d_",
      x,
      this.inplace,
      (x) => F.dropout3d(x, this.p, this.training),
    );
  }
}

/**
 * Alpha dropout, as `torch.nn.AlphaDropout`: in training mode elements are
 * set to SELU's negative saturation with probability `p` and the result is
 * scaled and shifted to keep zero mean and unit variance; the identity in
 * evaluation mode.
 */
export class AlphaDropout extends DropoutNd {
  /** Alpha dropout with probability `p` (default 0.5); `inplace` as PyTorch\'s `inplace=True`. */
  constructor(p = 0.5, options: InplaceOptions = {}) {
    super("AlphaDropout", p, options);
  }

  /** Applies alpha dropout when training. */
  override forward(x: Tensor): Tensor {
    return applyInPlace(
      "alphaDropout_",
      x,
      this.inplace,
      (x) => F.alphaDropout(x, this.p, this.training),
    );
  }
}
