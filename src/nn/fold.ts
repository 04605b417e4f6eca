/**
 * `Unfold` and `Fold`, as `torch.nn`'s (see `functional/fold.ts`).
 * @module
 */

import type { Tensor } from "../tensor.ts";
import type { Size2 } from "./functional/conv.ts";
import { fold, type FoldOptions, unfold } from "./functional/fold.ts";
import { Module } from "./module.ts";

/** A size as the user gave it, printed as Python would: `2`, or `(2, 3)`. */
function pySize(v: Size2): string {
  return typeof v === "number" ? String(v) : `(${v.join(", ")})`;
}

function foldRepr(kernelSize: Size2, o: FoldOptions): string {
  return `kernel_size=${pySize(kernelSize)}, dilation=${pySize(o.dilation ?? 1)}, padding=${
    pySize(o.padding ?? 0)
  }, stride=${pySize(o.stride ?? 1)}`;
}

/** Sliding blocks of [N, C, H, W] as columns [N, C·kH·kW, L], as `torch.nn.Unfold`. */
export class Unfold extends Module {
  /** Block size. */
  readonly kernelSize: Size2;
  /** Dilation, padding and stride as given. */
  readonly options: FoldOptions;

  /** Unfolds `kernelSize` blocks. */
  constructor(kernelSize: Size2, options: FoldOptions = {}) {
    super();
    this.kernelSize = kernelSize;
    this.options = { ...options };
  }

  /** Unfolds `x` [N, C, H, W] (or [C, H, W]). */
  override forward(x: Tensor): Tensor {
    return unfold(x, this.kernelSize, this.options);
  }

  /** `kernel_size=2, dilation=1, padding=0, stride=1`. */
  override extraRepr(): string {
    return foldRepr(this.kernelSize, this.options);
  }
}

/** Columns [N, C·kH·kW, L] summed into [N, C, ...outputSize], as `torch.nn.Fold`. */
export class Fold extends Module {
  /** The image's spatial size. */
  readonly outputSize: Size2;
  /** Block size. */
  readonly kernelSize: Size2;
  /** Dilation, padding and stride as given. */
  readonly options: FoldOptions;

  /** Folds `kernelSize` blocks into `outputSize` images. */
  constructor(outputSize: Size2, kernelSize: Size2, options: FoldOptions = {}) {
    super();
    this.outputSize = outputSize;
    this.kernelSize = kernelSize;
    this.options = { ...options };
  }

  /** Folds `x` [N, C·kH·kW, L] (or [C·kH·kW, L]). */
  override forward(x: Tensor): Tensor {
    return fold(x, this.outputSize, this.kernelSize, this.options);
  }

  /** `output_size=(4, 5), kernel_size=2, dilation=1, padding=0, stride=1`. */
  override extraRepr(): string {
    return `output_size=${pySize(this.outputSize)}, ${foldRepr(this.kernelSize, this.options)}`;
  }
}
