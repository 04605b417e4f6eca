/**
 * Convolution and pooling layers, as `torch.nn`: `Conv1d`, `Conv2d`,
 * `Conv3d`, `ConvTranspose1d`, `ConvTranspose2d`, `ConvTranspose3d`,
 * `MaxPool2d`, `MaxPool3d`, `AvgPool2d`, `AvgPool3d`, `AdaptiveAvgPool2d`,
 * `AdaptiveAvgPool3d` (see `functional/conv.ts`,
 * `functional/conv_transpose.ts` and `functional/volumetric.ts` for how
 * they compute).
 * @module
 */

import { getDefaultDtype } from "../dtype.ts";
import { resolveFactory } from "../ops/factory.ts";
import { empty } from "../ops/util.ts";
import type { Tensor } from "../tensor.ts";
import * as F from "./functional.ts";
import type { Size2 } from "./functional/conv.ts";
import { calculateFanInAndFanOut, kaimingUniform_, uniform_ } from "./init.ts";
import type { FactoryOptions } from "./layers.ts";
import { Module, Parameter } from "./module.ts";
import { adaptiveSizeRepr, checkCount, poolWindowRepr, pyBool, pySize, pyTuple } from "./util.ts";

/** Options of {@link Conv2d}. */
export interface Conv2dModuleOptions extends FactoryOptions {
  /** Step between windows (default 1). */
  stride?: Size2;
  /** Zero padding, or `"valid"` / `"same"` (default 0). */
  padding?: Size2 | "valid" | "same";
  /** Step between kernel taps (default 1). */
  dilation?: Size2;
  /** Channel groups (default 1). */
  groups?: number;
  /** Learn an additive bias (default true). */
  bias?: boolean;
  /** What the padding holds (default `"zeros"`); see {@link PaddingMode}. */
  paddingMode?: PaddingMode;
}

/** Options of {@link Conv1d}. */
export interface Conv1dModuleOptions extends FactoryOptions {
  /** Step between windows (default 1). */
  stride?: number | readonly [number];
  /** Zero padding, or `"valid"` / `"same"` (default 0). */
  padding?: number | readonly [number] | "valid" | "same";
  /** Step between kernel taps (default 1). */
  dilation?: number | readonly [number];
  /** Channel groups (default 1). */
  groups?: number;
  /** Learn an additive bias (default true). */
  bias?: boolean;
  /** What the padding holds (default `"zeros"`); see {@link PaddingMode}. */
  paddingMode?: PaddingMode;
}

/**
 * A convolution's padding, as PyTorch's `padding_mode`: `"zeros"`, or the
 * input's values mirrored (`"reflect"`), repeated from the edge
 * (`"replicate"`) or wrapped around (`"circular"`); the non-zero modes pad
 * with `F.pad` first, then convolve without padding, as PyTorch does.
 */
export type PaddingMode = "zeros" | "reflect" | "replicate" | "circular";

const PADDING_MODES: readonly PaddingMode[] = ["zeros", "reflect", "replicate", "circular"];

function checkPaddingMode(name: string, mode: PaddingMode): PaddingMode {
  if (!PADDING_MODES.includes(mode)) {
    throw new RangeError(
      `${name}: paddingMode must be one of ${PADDING_MODES.map((m) => `"${m}"`).join(", ")}, got ${
        JSON.stringify(mode)
      }`,
    );
  }
  return mode;
}

/** MaxPool1d's and MaxPool2d's repr: `kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False`. */
function maxPoolRepr(
  kernelSize: number | readonly number[],
  o: {
    stride?: number | readonly number[] | null;
    padding?: number | readonly number[];
    dilation?: number | readonly number[];
    ceilMode?: boolean;
  },
): string {
  return `${poolWindowRepr(kernelSize, o)}, dilation=${pySize(o.dilation ?? 1)}, ceil_mode=${
    pyBool(o.ceilMode ?? false)
  }`;
}

/** A size given as one number for every dim, or per dim, as `rank` numbers. */
const perDim = (v: number | readonly number[], rank: number): number[] =>
  typeof v === "number" ? new Array<number>(rank).fill(v) : [...v];

/**
 * Shared by the convolutions and the transposed convolutions: channels,
 * weight, bias and PyTorch's initialisation.
 */
abstract class ConvNd extends Module {
  /** Input channels. */
  readonly inChannels: number;
  /** Output channels. */
  readonly outChannels: number;
  /** Kernel size per spatial dim. */
  readonly kernelSize: readonly number[];
  /** Channel groups. */
  readonly groups: number;
  /** What the padding holds (`"zeros"` unless given). */
  readonly paddingMode: PaddingMode;
  /**
   * [outChannels, inChannels / groups, ...kernelSize]; transposed:
   * [inChannels, outChannels / groups, ...kernelSize].
   */
  weight: Parameter;
  /** [outChannels], or null. */
  bias: Parameter | null;

  constructor(
    name: string,
    inChannels: number,
    outChannels: number,
    kernelSize: readonly number[],
    groups: number,
    options: FactoryOptions & { bias?: boolean; paddingMode?: PaddingMode },
    transposed = false,
  ) {
    super();
    this.paddingMode = checkPaddingMode(name, options.paddingMode ?? "zeros");
    if (transposed && this.paddingMode !== "zeros") {
      // PyTorch's rule: a transposed convolution's padding removes output, it pads nothing.
      throw new RangeError(
        `${name}: only "zeros" paddingMode is supported, got "${this.paddingMode}"`,
      );
    }
    this.inChannels = checkCount(`${name}: inChannels`, inChannels);
    this.outChannels = checkCount(`${name}: outChannels`, outChannels);
    if (!Number.isInteger(groups) || groups < 1 || inChannels % groups || outChannels % groups) {
      throw new RangeError(
        `${name}: groups (${groups}) must be a positive integer dividing inChannels (${inChannels}) and outChannels (${outChannels})`,
      );
    }
    if (kernelSize.some((k) => !Number.isInteger(k) || k < 1)) {
      throw new RangeError(`${name}: kernelSize must be positive integers, got ${kernelSize}`);
    }
    this.kernelSize = kernelSize;
    this.groups = groups;
    const { dtype, device } = resolveFactory(options, getDefaultDtype());
    const channels = transposed
      ? [inChannels, outChannels / groups]
      : [outChannels, inChannels / groups];
    this.weight = this.registerParameter(
      "weight",
      new Parameter(empty([...channels, ...kernelSize], dtype, device)),
    );
    this.bias = this.registerParameter(
      "bias",
      (options.bias ?? true) ? new Parameter(empty([outChannels], dtype, device)) : null,
    );
    this.resetParameters();
  }

  /**
   * `x` padded by `paddingMode` when it is not `"zeros"`, with the padding
   * the conv then takes (0); else `x` and `padding` as they are.
   */
  protected padInput(
    x: Tensor,
    padding: number | readonly number[] | "valid" | "same",
    dilation: number | readonly number[],
  ): [Tensor, number | readonly number[] | "valid" | "same"] {
    const mode = this.paddingMode;
    if (mode === "zeros") return [x, padding];
    const perDim = (v: number | readonly number[], d: number) => typeof v === "number" ? v : v[d];
    // [before, after] per spatial dim; "same" puts the odd one after, as PyTorch.
    const amounts = this.kernelSize.map((k, d): [number, number] => {
      if (padding === "valid") return [0, 0];
      if (padding === "same") {
        const total = perDim(dilation, d) * (k - 1);
        return [Math.floor(total / 2), total - Math.floor(total / 2)];
      }
      const p = perDim(padding, d);
      return [p, p];
    });
    // F.pad lists the last dim first.
    const padded = F.pad(x, amounts.reverse().flat(), { mode });
    return [padded, new Array<number>(this.kernelSize.length).fill(0)];
  }

  /**
   * Draws new parameters as PyTorch's `reset_parameters`:
   * `kaimingUniform_(weight, { a: √5 })`, i.e. U(-1/√fanIn, 1/√fanIn) with
   * fanIn = the weight's dim 1 · kernel area (inChannels / groups; for a
   * transposed convolution outChannels / groups, as PyTorch computes it on
   * the transposed weight), and the bias from the same range.
   */
  resetParameters(): void {
    kaimingUniform_(this.weight, { a: Math.sqrt(5) });
    if (this.bias) {
      const [fanIn] = calculateFanInAndFanOut(this.weight);
      const bound = fanIn > 0 ? 1 / Math.sqrt(fanIn) : 0;
      uniform_(this.bias, { a: -bound, b: bound });
    }
  }
}

/** 2-d convolution, as `torch.nn.Conv2d`. */
export class Conv2d extends ConvNd {
  /** Step between windows. */
  readonly stride: Size2;
  /** Padding. */
  readonly padding: Size2 | "valid" | "same";
  /** Step between taps. */
  readonly dilation: Size2;

  /**
   * `kernelSize` is a number or [kH, kW]; weight [outChannels,
   * inChannels / groups, kH, kW], bias [outChannels].
   */
  constructor(
    inChannels: number,
    outChannels: number,
    kernelSize: Size2,
    options: Conv2dModuleOptions = {},
  ) {
    const kernel = perDim(kernelSize, 2);
    super("Conv2d", inChannels, outChannels, kernel, options.groups ?? 1, options);
    this.stride = options.stride ?? 1;
    this.padding = options.padding ?? 0;
    this.dilation = options.dilation ?? 1;
  }

  /** Convolves `x` [N, C, H, W] (or [C, H, W]). */
  override forward(x: Tensor): Tensor {
    const [input, padding] = this.padInput(x, this.padding, this.dilation);
    return F.conv2d(input, this.weight, this.bias, {
      stride: this.stride,
      padding: padding as Size2 | "valid" | "same",
      dilation: this.dilation,
      groups: this.groups,
    });
  }

  /** `1, 8, kernel_size=(3, 3), stride=(1, 1)`, as PyTorch prints it. */
  override extraRepr(): string {
    return convRepr(this, 2, this.stride, this.padding, this.dilation);
  }
}

/** 1-d convolution, as `torch.nn.Conv1d`. */
export class Conv1d extends ConvNd {
  /** Step between windows. */
  readonly stride: number | readonly [number];
  /** Padding. */
  readonly padding: number | readonly [number] | "valid" | "same";
  /** Step between taps. */
  readonly dilation: number | readonly [number];

  /** Weight [outChannels, inChannels / groups, kernelSize], bias [outChannels]. */
  constructor(
    inChannels: number,
    outChannels: number,
    kernelSize: number | readonly [number],
    options: Conv1dModuleOptions = {},
  ) {
    const kernel = perDim(kernelSize, 1);
    super("Conv1d", inChannels, outChannels, kernel, options.groups ?? 1, options);
    this.stride = options.stride ?? 1;
    this.padding = options.padding ?? 0;
    this.dilation = options.dilation ?? 1;
  }

  /** Convolves `x` [N, C, L] (or [C, L]). */
  override forward(x: Tensor): Tensor {
    const [input, padding] = this.padInput(x, this.padding, this.dilation);
    return F.conv1d(input, this.weight, this.bias, {
      stride: this.stride,
      padding: padding as number | readonly [number] | "valid" | "same",
      dilation: this.dilation,
      groups: this.groups,
    });
  }

  /** `1, 8, kernel_size=(3,), stride=(1,)`, as PyTorch prints it. */
  override extraRepr(): string {
    return convRepr(this, 1, this.stride, this.padding, this.dilation);
  }
}

/** Options of {@link Conv3d}. */
export interface Conv3dModuleOptions extends FactoryOptions {
  /** Step between windows (default 1). */
  stride?: F.Size3;
  /** Zero padding, or `"valid"` / `"same"` (default 0). */
  padding?: F.Size3 | "valid" | "same";
  /** Step between kernel taps (default 1). */
  dilation?: F.Size3;
  /** Channel groups (default 1). */
  groups?: number;
  /** Learn an additive bias (default true). */
  bias?: boolean;
  /** What the padding holds (default `"zeros"`); see {@link PaddingMode}. */
  paddingMode?: PaddingMode;
}

/** 3-d convolution, as `torch.nn.Conv3d`. */
export class Conv3d extends ConvNd {
  /** Step between windows. */
  readonly stride: F.Size3;
  /** Padding. */
  readonly padding: F.Size3 | "valid" | "same";
  /** Step between taps. */
  readonly dilation: F.Size3;

  /**
   * `kernelSize` is a number or [kD, kH, kW]; weight [outChannels,
   * inChannels / groups, kD, kH, kW], bias [outChannels].
   */
  constructor(
    inChannels: number,
    outChannels: number,
    kernelSize: F.Size3,
    options: Conv3dModuleOptions = {},
  ) {
    const kernel = perDim(kernelSize, 3);
    super("Conv3d", inChannels, outChannels, kernel, options.groups ?? 1, options);
    this.stride = options.stride ?? 1;
    this.padding = options.padding ?? 0;
    this.dilation = options.dilation ?? 1;
  }

  /** Convolves `x` [N, C, D, H, W] (or [C, D, H, W]). */
  override forward(x: Tensor): Tensor {
    const [input, padding] = this.padInput(x, this.padding, this.dilation);
    return F.conv3d(input, this.weight, this.bias, {
      stride: this.stride,
      padding: padding as F.Size3 | "valid" | "same",
      dilation: this.dilation,
      groups: this.groups,
    });
  }

  /** `1, 8, kernel_size=(3, 3, 3), stride=(1, 1, 1)`, as PyTorch prints it. */
  override extraRepr(): string {
    return convRepr(this, 3, this.stride, this.padding, this.dilation);
  }
}

function convRepr(
  m: ConvNd,
  rank: number,
  stride: number | readonly number[],
  padding: number | readonly number[] | string,
  dilation: number | readonly number[],
  outputPadding: number | readonly number[] = 0,
): string {
  let s = `${m.inChannels}, ${m.outChannels}, kernel_size=${pyTuple(m.kernelSize, rank)}, stride=${
    pyTuple(stride, rank)
  }`;
  const zero = typeof padding === "number"
    ? padding === 0
    : padding === "valid"
    ? false
    : typeof padding !== "string" && padding.every((p) => p === 0);
  if (!zero) {
    s += `, padding=${typeof padding === "string" ? padding : pyTuple(padding, rank)}`;
  }
  const one = typeof dilation === "number" ? dilation === 1 : dilation.every((d) => d === 1);
  if (!one) s += `, dilation=${pyTuple(dilation, rank)}`;
  const noOutputPadding = typeof outputPadding === "number"
    ? outputPadding === 0
    : outputPadding.every((p) => p === 0);
  if (!noOutputPadding) s += `, output_padding=${pyTuple(outputPadding, rank)}`;
  if (m.groups !== 1) s += `, groups=${m.groups}`;
  if (!m.bias) s += `, bias=${pyBool(false)}`;
  if (m.paddingMode !== "zeros") s += `, padding_mode=${m.paddingMode}`;
  return s;
}

/** Options of {@link ConvTranspose2d}. */
export interface ConvTranspose2dModuleOptions extends FactoryOptions {
  /** Step between the input elements' places in the output (default 1). */
  stride?: Size2;
  /** Rows / columns cut from both sides of the full output (default 0). */
  padding?: Size2;
  /**
   * Added after the output's bottom and right edges; smaller than stride or
   * dilation (default 0).
   */
  outputPadding?: Size2;
  /** Channel groups (default 1). */
  groups?: number;
  /** Learn an additive bias (default true). */
  bias?: boolean;
  /** Step between kernel taps (default 1). */
  dilation?: Size2;
}

/** Options of {@link ConvTranspose1d}. */
export interface ConvTranspose1dModuleOptions extends FactoryOptions {
  /** Step between the input elements' places in the output (default 1). */
  stride?: F.Size1;
  /** Cut from both ends of the full output (default 0). */
  padding?: F.Size1;
  /** Added after the output's end; smaller than stride or dilation (default 0). */
  outputPadding?: F.Size1;
  /** Channel groups (default 1). */
  groups?: number;
  /** Learn an additive bias (default true). */
  bias?: boolean;
  /** Step between kernel taps (default 1). */
  dilation?: F.Size1;
}

/**
 * The output padding that makes a transposed convolution's output
 * `outputSize` (its spatial sizes, or with the leading batch and channel
 * sizes), as PyTorch's `_output_padding`: each size must lie between the
 * output without output padding and that plus stride - 1.
 */
function outputPaddingFor(
  name: string,
  x: Tensor,
  outputSize: readonly number[],
  m: {
    kernelSize: readonly number[];
    stride: readonly number[];
    padding: readonly number[];
    dilation: readonly number[];
  },
): number[] {
  const rank = m.kernelSize.length;
  const leading = x.ndim === rank + 2 ? 2 : 1;
  const sizes = outputSize.length === rank + leading ? outputSize.slice(leading) : [...outputSize];
  if (sizes.length !== rank) {
    throw new RangeError(
      `${name}: for a ${x.ndim}-D input, outputSize must have ${rank} or ${
        rank + leading
      } entries, got ${JSON.stringify(outputSize)}`,
    );
  }
  const least = m.kernelSize.map((k, d) =>
    (x.shape[leading + d] - 1) * m.stride[d] - 2 * m.padding[d] + m.dilation[d] * (k - 1) + 1
  );
  if (sizes.some((s, d) => !(s >= least[d] && s <= least[d] + m.stride[d] - 1))) {
    throw new RangeError(
      `${name}: requested an output size of ${
        JSON.stringify(outputSize)
      }, but valid sizes range from ${JSON.stringify(least)} to ${
        JSON.stringify(least.map((l, d) => l + m.stride[d] - 1))
      } (for an input of spatial size ${JSON.stringify(x.shape.slice(leading))})`,
    );
  }
  return sizes.map((s, d) => s - least[d]);
}

/** The output padding a transposed conv module's forward needs for `outputSize`. */
function transposedPadding(
  m: ConvNd & {
    stride: number | readonly number[];
    padding: number | readonly number[];
    dilation: number | readonly number[];
  },
  name: string,
  x: Tensor,
  outputSize: readonly number[],
): number[] {
  const rank = m.kernelSize.length;
  return outputPaddingFor(name, x, outputSize, {
    kernelSize: m.kernelSize,
    stride: perDim(m.stride, rank),
    padding: perDim(m.padding, rank),
    dilation: perDim(m.dilation, rank),
  });
}

/**
 * 2-d transposed convolution, as `torch.nn.ConvTranspose2d`: weight
 * [inChannels, outChannels / groups, kH, kW], bias [outChannels],
 * initialised as PyTorch's `reset_parameters` (fan-in from the weight's dim 1).
 */
export class ConvTranspose2d extends ConvNd {
  /** Step between the input elements' places in the output. */
  readonly stride: Size2;
  /** Padding cut from the full output. */
  readonly padding: Size2;
  /** Extra rows / columns after the output's edges. */
  readonly outputPadding: Size2;
  /** Step between taps. */
  readonly dilation: Size2;

  /** `kernelSize` is a number or [kH, kW]. */
  constructor(
    inChannels: number,
    outChannels: number,
    kernelSize: Size2,
    options: ConvTranspose2dModuleOptions = {},
  ) {
    const kernel = perDim(kernelSize, 2);
    super("ConvTranspose2d", inChannels, outChannels, kernel, options.groups ?? 1, options, true);
    this.stride = options.stride ?? 1;
    this.padding = options.padding ?? 0;
    this.outputPadding = options.outputPadding ?? 0;
    this.dilation = options.dilation ?? 1;
  }

  /**
   * Upsamples `x` [N, C, H, W] (or [C, H, W]); `outputSize` ([outH, outW],
   * or with the leading sizes) picks the output padding instead of the
   * `outputPadding` option, as PyTorch's `forward(input, output_size)`.
   */
  override forward(x: Tensor, outputSize?: readonly number[] | null): Tensor {
    const outputPadding = outputSize == null
      ? this.outputPadding
      : transposedPadding(this, "ConvTranspose2d", x, outputSize) as [number, number];
    return F.convTranspose2d(x, this.weight, {
      bias: this.bias,
      stride: this.stride,
      padding: this.padding,
      outputPadding,
      groups: this.groups,
      dilation: this.dilation,
    });
  }

  /** `4, 2, kernel_size=(3, 3), stride=(2, 2)`, as PyTorch prints it. */
  override extraRepr(): string {
    return convRepr(this, 2, this.stride, this.padding, this.dilation, this.outputPadding);
  }
}

/**
 * 1-d transposed convolution, as `torch.nn.ConvTranspose1d`: weight
 * [inChannels, outChannels / groups, k], bias [outChannels].
 */
export class ConvTranspose1d extends ConvNd {
  /** Step between the input elements' places in the output. */
  readonly stride: F.Size1;
  /** Padding cut from the full output. */
  readonly padding: F.Size1;
  /** Extra elements after the output's end. */
  readonly outputPadding: F.Size1;
  /** Step between taps. */
  readonly dilation: F.Size1;

  /** `kernelSize` is a number or [k]. */
  constructor(
    inChannels: number,
    outChannels: number,
    kernelSize: F.Size1,
    options: ConvTranspose1dModuleOptions = {},
  ) {
    const kernel = perDim(kernelSize, 1);
    super("ConvTranspose1d", inChannels, outChannels, kernel, options.groups ?? 1, options, true);
    this.stride = options.stride ?? 1;
    this.padding = options.padding ?? 0;
    this.outputPadding = options.outputPadding ?? 0;
    this.dilation = options.dilation ?? 1;
  }

  /**
   * Upsamples `x` [N, C, L] (or [C, L]); `outputSize` ([outL], or with the
   * leading sizes) as in {@link ConvTranspose2d.forward}.
   */
  override forward(x: Tensor, outputSize?: readonly number[] | null): Tensor {
    const outputPadding = outputSize == null
      ? this.outputPadding
      : transposedPadding(this, "ConvTranspose1d", x, outputSize)[0];
    return F.convTranspose1d(x, this.weight, {
      bias: this.bias,
      stride: this.stride,
      padding: this.padding,
      outputPadding,
      groups: this.groups,
      dilation: this.dilation,
    });
  }

  /** `4, 2, kernel_size=(3,), stride=(2,)`, as PyTorch prints it. */
  override extraRepr(): string {
    return convRepr(this, 1, this.stride, this.padding, this.dilation, this.outputPadding);
  }
}

/** Options of {@link ConvTranspose3d}. */
export interface ConvTranspose3dModuleOptions extends FactoryOptions {
  /** Step between the input elements' places in the output (default 1). */
  stride?: F.Size3;
  /** Cut from both sides of each dim of the full output (default 0). */
  padding?: F.Size3;
  /** Added after each dim's far edge; smaller than stride or dilation (default 0). */
  outputPadding?: F.Size3;
  /** Channel groups (default 1). */
  groups?: number;
  /** Learn an additive bias (default true). */
  bias?: boolean;
  /** Step between kernel taps (default 1). */
  dilation?: F.Size3;
}

/**
 * 3-d transposed convolution, as `torch.nn.ConvTranspose3d`: weight
 * [inChannels, outChannels / groups, kD, kH, kW], bias [outChannels].
 */
export class ConvTranspose3d extends ConvNd {
  /** Step between the input elements' places in the output. */
  readonly stride: F.Size3;
  /** Padding cut from the full output. */
  readonly padding: F.Size3;
  /** Extra planes / rows / columns after the output's far edges. */
  readonly outputPadding: F.Size3;
  /** Step between taps. */
  readonly dilation: F.Size3;

  /** `kernelSize` is a number or [kD, kH, kW]. */
  constructor(
    inChannels: number,
    outChannels: number,
    kernelSize: F.Size3,
    options: ConvTranspose3dModuleOptions = {},
  ) {
    const kernel = perDim(kernelSize, 3);
    super("ConvTranspose3d", inChannels, outChannels, kernel, options.groups ?? 1, options, true);
    this.stride = options.stride ?? 1;
    this.padding = options.padding ?? 0;
    this.outputPadding = options.outputPadding ?? 0;
    this.dilation = options.dilation ?? 1;
  }

  /**
   * Upsamples `x` [N, C, D, H, W] (or [C, D, H, W]); `outputSize` ([outD,
   * outH, outW], or with the leading sizes) as in
   * {@link ConvTranspose2d.forward}.
   */
  override forward(x: Tensor, outputSize?: readonly number[] | null): Tensor {
    const outputPadding = outputSize == null
      ? this.outputPadding
      : transposedPadding(this, "ConvTranspose3d", x, outputSize) as [number, number, number];
    return F.convTranspose3d(x, this.weight, {
      bias: this.bias,
      stride: this.stride,
      padding: this.padding,
      outputPadding,
      groups: this.groups,
      dilation: this.dilation,
    });
  }

  /** `4, 2, kernel_size=(3, 3, 3), stride=(2, 2, 2)`, as PyTorch prints it. */
  override extraRepr(): string {
    return convRepr(this, 3, this.stride, this.padding, this.dilation, this.outputPadding);
  }
}

/**
 * Shared by the window pools: the kernel size and the options as given
 * (copied), which `forward` and the repr read.
 */
abstract class WindowPool<K, O extends object> extends Module {
  /** Window size. */
  readonly kernelSize: K;
  /** Options as given (stride defaults to the kernel size). */
  readonly options: O;

  /** Pools `kernelSize` windows. */
  constructor(kernelSize: K, options: O = {} as O) {
    super();
    this.kernelSize = kernelSize;
    this.options = { ...options };
  }
}

/**
 * What a max-pool layer's `forward` gives: the output, or with
 * `returnIndices: true` the output and the maxima's positions.
 */
export type MaxPoolResult<R extends boolean> = R extends true ? F.PoolWithIndices : Tensor;

/**
 * Max pooling, as `torch.nn.MaxPool2d`; the gradient goes to each window's
 * arg-max. With `returnIndices: true`, `forward` returns `[output, indices]`.
 */
export class MaxPool2d<R extends boolean = false>
  extends WindowPool<Size2, F.MaxPool2dOptions & F.ReturnIndicesOption> {
  /** Pools `kernelSize` windows. */
  constructor(kernelSize: Size2, options: F.MaxPool2dOptions & { returnIndices?: R } = {}) {
    super(kernelSize, options);
  }

  /** Pools `x` [N, C, H, W] (or [C, H, W]). */
  override forward(x: Tensor): MaxPoolResult<R> {
    return F.maxPool2d(x, this.kernelSize, this.options) as MaxPoolResult<R>;
  }

  /** `kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False`. */
  override extraRepr(): string {
    return maxPoolRepr(this.kernelSize, this.options);
  }
}

/** Average pooling, as `torch.nn.AvgPool2d`. */
export class AvgPool2d extends WindowPool<Size2, F.AvgPool2dOptions> {
  /** Pools `x` [N, C, H, W] (or [C, H, W]). */
  override forward(x: Tensor): Tensor {
    return F.avgPool2d(x, this.kernelSize, this.options);
  }

  /** `kernel_size=2, stride=2, padding=0`. */
  override extraRepr(): string {
    return poolWindowRepr(this.kernelSize, this.options);
  }
}

/** Average pooling to a fixed output size, as `torch.nn.AdaptiveAvgPool2d`. */
export class AdaptiveAvgPool2d extends Module {
  /** [outH, outW], a number for both; null keeps the input's size. */
  readonly outputSize: number | readonly [number | null, number | null];

  /** Pools to `outputSize`. */
  constructor(outputSize: number | readonly [number | null, number | null]) {
    super();
    this.outputSize = outputSize;
  }

  /** Pools `x` [N, C, H, W] (or [C, H, W]). */
  override forward(x: Tensor): Tensor {
    return F.adaptiveAvgPool2d(x, this.outputSize);
  }

  /** `output_size=(1, 1)`. */
  override extraRepr(): string {
    return adaptiveSizeRepr(this.outputSize);
  }
}

/**
 * Max pooling over [N, C, D, H, W] windows, as `torch.nn.MaxPool3d`; the
 * gradient goes to each window's arg-max.
 */
export class MaxPool3d extends WindowPool<F.Size3, F.MaxPool3dOptions> {
  /** Pools `x` [N, C, D, H, W] (or [C, D, H, W]). */
  override forward(x: Tensor): Tensor {
    return F.maxPool3d(x, this.kernelSize, this.options);
  }

  /** `kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False`. */
  override extraRepr(): string {
    return maxPoolRepr(this.kernelSize, this.options);
  }
}

/** Average pooling over [N, C, D, H, W] windows, as `torch.nn.AvgPool3d`. */
export class AvgPool3d extends WindowPool<F.Size3, F.AvgPool3dOptions> {
  /** Pools `x` [N, C, D, H, W] (or [C, D, H, W]). */
  override forward(x: Tensor): Tensor {
    return F.avgPool3d(x, this.kernelSize, this.options);
  }

  /** `kernel_size=2, stride=2, padding=0` (PyTorch prints no more). */
  override extraRepr(): string {
    return poolWindowRepr(this.kernelSize, this.options);
  }
}

/** Average pooling of [N, C, D, H, W] to a fixed output size, as `torch.nn.AdaptiveAvgPool3d`. */
export class AdaptiveAvgPool3d extends Module {
  /** [outD, outH, outW], a number for all; null keeps the input's size. */
  readonly outputSize: F.AdaptiveSize3;

  /** Pools to `outputSize`. */
  constructor(outputSize: F.AdaptiveSize3) {
    super();
    this.outputSize = outputSize;
  }

  /** Pools `x` [N, C, D, H, W] (or [C, D, H, W]). */
  override forward(x: Tensor): Tensor {
    return F.adaptiveAvgPool3d(x, this.outputSize);
  }

  /** `output_size=(1, 1, 1)`. */
  override extraRepr(): string {
    return adaptiveSizeRepr(this.outputSize);
  }
}

/**
 * Max pooling along the last dim, as `torch.nn.MaxPool1d`. With
 * `returnIndices: true`, `forward` returns `[output, indices]`.
 */
export class MaxPool1d<R extends boolean = false>
  extends WindowPool<F.Size1, F.MaxPool1dOptions & F.ReturnIndicesOption> {
  /** Pools `kernelSize` windows. */
  constructor(kernelSize: F.Size1, options: F.MaxPool1dOptions & { returnIndices?: R } = {}) {
    super(kernelSize, options);
  }

  /** Pools `x` [N, C, L] (or [C, L]). */
  override forward(x: Tensor): MaxPoolResult<R> {
    return F.maxPool1d(x, this.kernelSize, this.options) as MaxPoolResult<R>;
  }

  /** `kernel_size=3, stride=3, padding=0, dilation=1, ceil_mode=False`. */
  override extraRepr(): string {
    return maxPoolRepr(this.kernelSize, this.options);
  }
}

/** Average pooling along the last dim, as `torch.nn.AvgPool1d`. */
export class AvgPool1d extends WindowPool<F.Size1, F.AvgPool1dOptions> {
  /** Pools `x` [N, C, L] (or [C, L]). */
  override forward(x: Tensor): Tensor {
    return F.avgPool1d(x, this.kernelSize, this.options);
  }

  /** `kernel_size=(3,), stride=(3,), padding=(0,)`: PyTorch's AvgPool1d keeps 1-tuples. */
  override extraRepr(): string {
    return poolWindowRepr(this.kernelSize, this.options, 1);
  }
}
