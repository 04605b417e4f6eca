/**
 * More layers, as `torch.nn`'s: `RReLU`, `FeatureAlphaDropout`,
 * `FractionalMaxPool2d`, `FractionalMaxPool3d`, `MaxUnpool3d` and
 * `CrossMapLRN2d` (see `functional/nn_gaps.ts` and `functional/pool_gaps.ts`).
 * @module
 */

import { cat } from "../ops/view.ts";
import { formatShape } from "../shape.ts";
import { forwardScope } from "../storage.ts";
import type { Tensor } from "../tensor.ts";
import type { PoolWithIndices, Size2 } from "./functional/conv.ts";
import * as G from "./functional/nn_gaps.ts";
import * as P from "./functional/pool_gaps.ts";
import type { MaxUnpoolModuleOptions } from "./pool_extra.ts";
import type { Size3 } from "./functional/volumetric.ts";
import { DropoutNd } from "./dropout.ts";
import { Module } from "./module.ts";
import { checkCount, checkFinite, checkFloatInput, poolWindowRepr, pyFloat } from "./util.ts";
import { applyInPlace, type InplaceOptions, inplaceRepr } from "./functional/inplace.ts";

/** Options of {@link RReLU}. */
export interface RReLUModuleOptions {
  /** Lower bound of the random negative slope (default 1/8). */
  lower?: number;
  /** Upper bound of the random negative slope (default 1/3). */
  upper?: number;
}

/**
 * Randomized leaky ReLU, as `torch.nn.RReLU`: in training mode each
 * negative element is scaled by a slope drawn from U(lower, upper); in
 * evaluation mode by (lower + upper) / 2.
 */
export class RReLU extends Module {
  /** Lower bound of the slope. */
  readonly lower: number;
  /** Upper bound of the slope. */
  readonly upper: number;
  /** Whether forward overwrites its input (PyTorch's `inplace`). */
  readonly inplace: boolean;

  /** An RReLU with slopes in [lower, upper] (defaults 1/8 and 1/3). */
  constructor(options: RReLUModuleOptions & InplaceOptions = {}) {
    super();
    this.inplace = options.inplace ?? false;
    this.lower = checkFinite("RReLU", "lower", options.lower ?? 1 / 8);
    this.upper = checkFinite("RReLU", "upper", options.upper ?? 1 / 3);
    if (this.lower > this.upper) {
      throw new RangeError(
        `RReLU: lower bound ${this.lower} must be less than or equal to the upper bound ${this.upper}`,
      );
    }
  }

  /** Applies the RReLU (random slopes when training). */
  override forward(x: Tensor): Tensor {
    const options = { lower: this.lower, upper: this.upper, training: this.training };
    return applyInPlace("rrelu_", x, this.inplace, (x) => G.rrelu(x, options));
  }

  /** `lower=0.125, upper=0.3333333333333333`. */
  override extraRepr(): string {
    return `lower=${pyFloat(this.lower)}, upper=${pyFloat(this.upper)}${inplaceRepr(this.inplace)}`;
  }
}

/**
 * Alpha dropout of whole channels, as `torch.nn.FeatureAlphaDropout`: in
 * training mode each channel of [N, C, ...] is set to SELU's negative
 * saturation with probability `p`, then scaled and shifted to keep zero
 * mean and unit variance; the identity in evaluation mode.
 */
export class FeatureAlphaDropout extends DropoutNd {
  /** Feature alpha dropout with probability `p` (default 0.5); `inplace` as PyTorch\'s `inplace=True`. */
  constructor(p = 0.5, options: InplaceOptions = {}) {
    super("FeatureAlphaDropout", p, options);
  }

  /** Applies feature alpha dropout when training. */
  override forward(x: Tensor): Tensor {
    return applyInPlace(
      "featureAlphaDropout_",
      x,
      this.inplace,
      (x) => G.featureAlphaDropout(x, this.p, this.training),
    );
  }
}

/** Options of {@link FractionalMaxPool2d} and {@link FractionalMaxPool3d}. */
export interface FractionalMaxPoolModuleOptions<S, R> {
  /** The output's spatial size (this or `outputRatio`). */
  outputSize?: S | null;
  /** The output's size as a fraction in (0, 1) of the input's. */
  outputRatio?: R | null;
  /** `forward` returns `[output, indices]` (default false). */
  returnIndices?: boolean;
  /**
   * Fixed window placements [N, C, dims] in [0, 1) (PyTorch's
   * `_random_samples`), registered as the buffer `_random_samples`; by
   * default every call draws new ones.
   */
  randomSamples?: Tensor | null;
}

abstract class FractionalMaxPoolNd<S extends number | readonly number[], R> extends Module {
  /** Window size. */
  readonly kernelSize: S;
  /** Output size and ratio as given (one of them), and `returnIndices`. */
  readonly options: FractionalMaxPoolModuleOptions<S, R>;
  /** The fixed window placements, or null to draw them per call. */
  randomSamples: Tensor | null;

  constructor(name: string, kernelSize: S, options: FractionalMaxPoolModuleOptions<S, R>) {
    super();
    if ((options.outputSize == null) === (options.outputRatio == null)) {
      throw new RangeError(
        `${name}: give exactly one of outputSize and outputRatio, got ${
          JSON.stringify({ outputSize: options.outputSize, outputRatio: options.outputRatio })
        }`,
      );
    }
    const r = options.outputRatio;
    if (r != null && !(typeof r === "number" ? [r] : r as number[]).every((v) => v > 0 && v < 1)) {
      throw new RangeError(
        `${name}: outputRatio must be between 0 and 1, got ${JSON.stringify(r)}`,
      );
    }
    this.kernelSize = kernelSize;
    this.options = { ...options };
    this.randomSamples = this.registerBuffer("_random_samples", options.randomSamples ?? null, {
      field: "randomSamples",
    });
  }
}

/**
 * Fractional max pooling of [N, C, H, W] (or [C, H, W]), as
 * `torch.nn.FractionalMaxPool2d` (see `functional.fractionalMaxPool2d`).
 */
export class FractionalMaxPool2d
  extends FractionalMaxPoolNd<Size2, number | readonly [number, number]> {
  /** Pools `kernelSize` windows to `outputSize` or `outputRatio` of the input. */
  constructor(
    kernelSize: Size2,
    options: FractionalMaxPoolModuleOptions<Size2, number | readonly [number, number]>,
  ) {
    super("FractionalMaxPool2d", kernelSize, options);
  }

  /** Pools `x`; `[output, indices]` with `returnIndices`. */
  override forward(x: Tensor): Tensor | PoolWithIndices {
    return P.fractionalMaxPool2d(x, this.kernelSize, {
      ...this.options,
      randomSamples: this.randomSamples,
    });
  }
}

/**
 * Fractional max pooling of [N, C, D, H, W] (or [C, D, H, W]), as
 * `torch.nn.FractionalMaxPool3d` (see `functional.fractionalMaxPool3d`).
 */
export class FractionalMaxPool3d
  extends FractionalMaxPoolNd<Size3, number | readonly [number, number, number]> {
  /** Pools `kernelSize` windows to `outputSize` or `outputRatio` of the input. */
  constructor(
    kernelSize: Size3,
    options: FractionalMaxPoolModuleOptions<Size3, number | readonly [number, number, number]>,
  ) {
    super("FractionalMaxPool3d", kernelSize, options);
  }

  /** Pools `x`; `[output, indices]` with `returnIndices`. */
  override forward(x: Tensor): Tensor | PoolWithIndices {
    return P.fractionalMaxPool3d(x, this.kernelSize, {
      ...this.options,
      randomSamples: this.randomSamples,
    });
  }
}

/**
 * The inverse of `MaxPool3d` with `returnIndices`, as `torch.nn.MaxUnpool3d`:
 * `forward(x, indices, outputSize?)` puts each value back where it came
 * from, zeros elsewhere.
 */
export class MaxUnpool3d extends Module {
  /** The pool's window size. */
  readonly kernelSize: Size3;
  /** The pool's stride and padding as given. */
  readonly options: MaxUnpoolModuleOptions<Size3>;

  /** Unpools a `kernelSize` max pool. */
  constructor(kernelSize: Size3, options: MaxUnpoolModuleOptions<Size3> = {}) {
    super();
    this.kernelSize = kernelSize;
    this.options = { ...options };
  }

  /** Unpools `x` [N, C, D, H, W] (or [C, D, H, W]) by its pool's `indices`. */
  override forward(x: Tensor, indices: Tensor, outputSize?: readonly number[] | null): Tensor {
    return P.maxUnpool3d(x, indices, this.kernelSize, { ...this.options, outputSize });
  }

  /** `kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0)`. */
  override extraRepr(): string {
    return poolWindowRepr(this.kernelSize, this.options, 3);
  }
}

/** Options of {@link CrossMapLRN2d}. */
export interface CrossMapLRN2dOptions {
  /** Multiplies the window's sum of squares / size (default 1e-4). */
  alpha?: number;
  /** The exponent (default 0.75). */
  beta?: number;
  /** Added before the exponent (default 1). */
  k?: number;
}

/**
 * Local response normalisation across channels of [N, C, H, W], as the
 * legacy `torch.nn.CrossMapLRN2d`: `x · (k + alpha/size · S)^-beta` where S
 * sums the squares over channels c - pre + 1 ... c + pre - 1
 * (`pre = floor((size - 1)/2 + 1)`) and, as PyTorch's running window never
 * drops it, channel 0 for every c >= pre. The forward equals PyTorch's; the
 * gradient is the true gradient of that forward, where PyTorch's hand-written
 * backward (of a symmetric window) is not.
 */
export class CrossMapLRN2d extends Module {
  /** Channels in the window. */
  readonly size: number;
  /** The multiplier. */
  readonly alpha: number;
  /** The exponent. */
  readonly beta: number;
  /** The additive constant. */
  readonly k: number;

  /** Normalizes over `size` neighbouring channels. */
  constructor(size: number, options: CrossMapLRN2dOptions = {}) {
    super();
    this.size = checkCount("CrossMapLRN2d: size", size, false);
    this.alpha = checkFinite("CrossMapLRN2d", "alpha", options.alpha ?? 1e-4);
    this.beta = checkFinite("CrossMapLRN2d", "beta", options.beta ?? 0.75);
    this.k = checkFinite("CrossMapLRN2d", "k", options.k ?? 1);
  }

  /** Normalizes `x` [N, C, H, W]. */
  override forward(x: Tensor): Tensor {
    checkFloatInput("CrossMapLRN2d", x);
    if (x.ndim !== 4) {
      throw new RangeError(
        `CrossMapLRN2d: expected a 4-D input [N, C, H, W], got shape ${formatShape(x.shape)}`,
      );
    }
    const c = x.shape[1];
    const pre = Math.floor((this.size - 1) / 2 + 1);
    if (x.numel() === 0) return x.mul(1);
    return forwardScope(() => {
      const square = x.mul(x);
      const pad = square.narrow(1, 0, 1).mul(0).expand([x.shape[0], pre - 1, ...x.shape.slice(2)]);
      const padded = pre > 1 ? cat([pad, square, pad], 1) : square;
      let sum = padded.narrow(1, 0, c);
      for (let i = 1; i < 2 * pre - 1; i++) sum = sum.add(padded.narrow(1, i, c));
      if (c > pre) {
        // Channels pre.. keep channel 0's square in PyTorch's running sum.
        const first = square.narrow(1, 0, 1);
        const extra = cat([
          first.mul(0).expand([x.shape[0], pre, ...x.shape.slice(2)]),
          first.expand([x.shape[0], c - pre, ...x.shape.slice(2)]),
        ], 1);
        sum = sum.add(extra);
      }
      return x.mul(sum.mul(this.alpha / this.size).add(this.k).pow(-this.beta));
    });
  }

  /** `3, alpha=0.0001, beta=0.75, k=1`. */
  override extraRepr(): string {
    // alpha and beta default to floats in PyTorch, k to the int 1.
    const num = (v: number) => (Number.isInteger(v) ? String(v) : pyFloat(v));
    return `${this.size}, alpha=${pyFloat(this.alpha)}, beta=${pyFloat(this.beta)}, k=${
      num(this.k)
    }`;
  }
}
