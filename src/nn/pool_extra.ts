/**
 * More pooling layers, as `torch.nn`'s: `AdaptiveAvgPool1d`, `LPPool1d`,
 * `LPPool2d`, `MaxUnpool1d`, `MaxUnpool2d`, plus `ChannelShuffle` and
 * `Softmax2d` (see `functional/pool_extra.ts`).
 * @module
 */

import { formatShape } from "../shape.ts";
import type { Tensor } from "../tensor.ts";
import type { Size2 } from "./functional/conv.ts";
import type { Size1 } from "./functional/pool1d.ts";
import * as F from "./functional/pool_extra.ts";
import { Module } from "./module.ts";
import { checkCount, checkFloatInput, poolWindowRepr, pyBool, pySize } from "./util.ts";

/** Average pooling of [N, C, L] to a fixed length, as `torch.nn.AdaptiveAvgPool1d`. */
export class AdaptiveAvgPool1d extends Module {
  /** Output length. */
  readonly outputSize: Size1;

  /** Pools to `outputSize` positions. */
  constructor(outputSize: Size1) {
    super();
    this.outputSize = outputSize;
  }

  /** Pools `x` [N, C, L] (or [C, L]). */
  override forward(x: Tensor): Tensor {
    return F.adaptiveAvgPool1d(x, this.outputSize);
  }

  /** `output_size=3`. */
  override extraRepr(): string {
    return `output_size=${pySize(this.outputSize)}`;
  }
}

/** Shared by the LP pools: p, the kernel size and the options as given, and the repr. */
abstract class LPPoolNd<K extends number | readonly number[]> extends Module {
  /** p. */
  readonly normType: number;
  /** Window size. */
  readonly kernelSize: K;
  /** Stride and ceil mode as given. */
  readonly options: F.LPPoolOptions<K>;

  /** Pools `kernelSize` windows with the `normType`-norm. */
  constructor(normType: number, kernelSize: K, options: F.LPPoolOptions<K> = {}) {
    super();
    this.normType = normType;
    this.kernelSize = kernelSize;
    this.options = { ...options };
  }

  /** `norm_type=2, kernel_size=3, stride=None, ceil_mode=False` (a pair as `(2, 3)`). */
  override extraRepr(): string {
    const o = this.options;
    return `norm_type=${this.normType}, kernel_size=${pySize(this.kernelSize)}, stride=${
      o.stride == null ? "None" : pySize(o.stride)
    }, ceil_mode=${pyBool(o.ceilMode ?? false)}`;
  }
}

/** (Σ x^p)^(1/p) over windows along the last dim, as `torch.nn.LPPool1d`. */
export class LPPool1d extends LPPoolNd<Size1> {
  /** Pools `x` [N, C, L] (or [C, L]). */
  override forward(x: Tensor): Tensor {
    return F.lpPool1d(x, this.normType, this.kernelSize, this.options);
  }
}

/** (Σ x^p)^(1/p) over 2-d windows, as `torch.nn.LPPool2d`. */
export class LPPool2d extends LPPoolNd<Size2> {
  /** Pools `x` [N, C, H, W] (or [C, H, W]). */
  override forward(x: Tensor): Tensor {
    return F.lpPool2d(x, this.normType, this.kernelSize, this.options);
  }
}

/** Options of {@link MaxUnpool1d} and {@link MaxUnpool2d}: the pool's. */
export interface MaxUnpoolModuleOptions<S> {
  /** The pool's step between windows (default: the kernel size). */
  stride?: S | null;
  /** The pool's padding (default 0). */
  padding?: S;
}

/** Shared by the max unpools: the pool's kernel size and options as given. */
abstract class MaxUnpoolNd<K extends number | readonly number[]> extends Module {
  /** The pool's window size. */
  readonly kernelSize: K;
  /** The pool's stride and padding as given. */
  readonly options: MaxUnpoolModuleOptions<K>;

  /** Unpools a `kernelSize` max pool. */
  constructor(kernelSize: K, options: MaxUnpoolModuleOptions<K> = {}) {
    super();
    this.kernelSize = kernelSize;
    this.options = { ...options };
  }
}

/**
 * The inverse of `MaxPool1d` with `returnIndices`, as `torch.nn.MaxUnpool1d`:
 * `forward(x, indices, outputSize?)` puts each value back where it came
 * from, zeros elsewhere.
 */
export class MaxUnpool1d extends MaxUnpoolNd<Size1> {
  /** Unpools `x` [N, C, L] (or [C, L]) by its pool's `indices`. */
  override forward(x: Tensor, indices: Tensor, outputSize?: readonly number[] | null): Tensor {
    return F.maxUnpool1d(x, indices, this.kernelSize, { ...this.options, outputSize });
  }

  /** `kernel_size=(2,), stride=(2,), padding=(0,)`. */
  override extraRepr(): string {
    return poolWindowRepr(this.kernelSize, this.options, 1);
  }
}

/**
 * The inverse of `MaxPool2d` with `returnIndices`, as `torch.nn.MaxUnpool2d`:
 * `forward(x, indices, outputSize?)` puts each value back where it came
 * from, zeros elsewhere.
 */
export class MaxUnpool2d extends MaxUnpoolNd<Size2> {
  /** Unpools `x` [N, C, H, W] (or [C, H, W]) by its pool's `indices`. */
  override forward(x: Tensor, indices: Tensor, outputSize?: readonly number[] | null): Tensor {
    return F.maxUnpool2d(x, indices, this.kernelSize, { ...this.options, outputSize });
  }

  /** `kernel_size=(2, 2), stride=(2, 2), padding=(0, 0)`. */
  override extraRepr(): string {
    return poolWindowRepr(this.kernelSize, this.options, 2);
  }
}

/** Interleaves the channels of [N, C, *] in `groups`, as `torch.nn.ChannelShuffle`. */
export class ChannelShuffle extends Module {
  /** Channel groups. */
  readonly groups: number;

  /** Shuffles in `groups` (a positive integer). */
  constructor(groups: number) {
    super();
    this.groups = checkCount("ChannelShuffle: groups", groups, false);
  }

  /** Shuffles `x`. */
  override forward(x: Tensor): Tensor {
    return F.channelShuffle(x, this.groups);
  }

  /** `groups=2`. */
  override extraRepr(): string {
    return `groups=${this.groups}`;
  }
}

/** Softmax over the channels of [N, C, H, W] (or [C, H, W]) at each position, as `torch.nn.Softmax2d`. */
export class Softmax2d extends Module {
  /** Softmax over dim -3. */
  override forward(x: Tensor): Tensor {
    checkFloatInput("Softmax2d", x);
    if (x.ndim !== 3 && x.ndim !== 4) {
      throw new RangeError(
        `Softmax2d: expected a 3-D [C, H, W] or 4-D [N, C, H, W] input, got shape ${
          formatShape(x.shape)
        }`,
      );
    }
    return x.softmax(-3);
  }
}
