/**
 * More activation modules, as `torch.nn`'s: `PReLU` (learnable slopes),
 * `LogSigmoid`, `Softmin`, `Softsign`, `Tanhshrink`, `Threshold`, `GLU`,
 * `SELU`, `CELU`, `Hardshrink`, `Softshrink`.
 * @module
 */

import { getDefaultDtype } from "../dtype.ts";
import { full } from "../ops/factory.ts";
import type { Tensor } from "../tensor.ts";
import * as F from "./functional/activation_extra.ts";
import type { FactoryOptions } from "./layers.ts";
import { Module, Parameter } from "./module.ts";
import { checkCount, checkFinite, pyFloat } from "./util.ts";
import { applyInPlace, type InplaceOptions, inplaceRepr } from "./functional/inplace.ts";

/** Options of {@link PReLU}. */
export interface PReLUOptions extends FactoryOptions {
  /** The slopes' initial value (default 0.25). */
  init?: number;
}

/**
 * `x` where positive, else `weight * x` with a learned `weight`
 * [numParameters], as `torch.nn.PReLU`: one slope shared by every channel
 * (default), or one per channel (dim 1 of the input).
 */
export class PReLU extends Module {
  /** Number of slopes: 1, or the input's channel count. */
  readonly numParameters: number;
  /** The slopes [numParameters], all `init` at first. */
  weight: Parameter;

  /** A PReLU with `numParameters` slopes (default 1), each starting at `init` (default 0.25). */
  constructor(numParameters = 1, options: PReLUOptions = {}) {
    super();
    this.numParameters = checkCount("PReLU: numParameters", numParameters, false);
    const init = checkFinite("PReLU", "init", options.init ?? 0.25);
    const factory = { device: options.device, dtype: options.dtype ?? getDefaultDtype() };
    this.weight = this.registerParameter(
      "weight",
      new Parameter(full([numParameters], init, factory)),
    );
  }

  /** Applies the PReLU. */
  override forward(x: Tensor): Tensor {
    return F.prelu(x, this.weight);
  }

  /** `num_parameters=1`. */
  override extraRepr(): string {
    return `num_parameters=${this.numParameters}`;
  }
}

/** `log(sigmoid(x))`, computed stably, as `torch.nn.LogSigmoid`. */
export class LogSigmoid extends Module {
  /** Applies log-sigmoid. */
  override forward(x: Tensor): Tensor {
    return F.logsigmoid(x);
  }
}

/** `softmax(-x)` along `dim`, as `torch.nn.Softmin`. */
export class Softmin extends Module {
  /** The dim normalized over. */
  readonly dim: number;

  /** Softmin along `dim` (required, as for `Softmax`). */
  constructor(dim: number) {
    super();
    if (!Number.isInteger(dim)) throw new TypeError(`Softmin: dim must be an integer, got ${dim}`);
    this.dim = dim;
  }

  /** Applies softmin. */
  override forward(x: Tensor): Tensor {
    return F.softmin(x, this.dim);
  }

  /** `dim=1`. */
  override extraRepr(): string {
    return `dim=${this.dim}`;
  }
}

/** `x / (1 + |x|)`, as `torch.nn.Softsign`. */
export class Softsign extends Module {
  /** Applies softsign. */
  override forward(x: Tensor): Tensor {
    return F.softsign(x);
  }
}

/** `x - tanh(x)`, as `torch.nn.Tanhshrink`. */
export class Tanhshrink extends Module {
  /** Applies tanhshrink. */
  override forward(x: Tensor): Tensor {
    return F.tanhshrink(x);
  }
}

/** A number as Python prints it when given as an int (whole) or a float (otherwise). */
function pyNumber(x: number): string {
  return Number.isInteger(x) ? String(x) : pyFloat(x);
}

/** `value` where `x <= threshold`, else `x`, as `torch.nn.Threshold`. */
export class Threshold extends Module {
  /** Inputs at or below it are replaced. */
  readonly threshold: number;
  /** What replaces them. */
  readonly value: number;
  /** Whether forward overwrites its input (PyTorch's `inplace`). */
  readonly inplace: boolean;

  /** A threshold at `threshold`, replacing with `value`; `inplace` as PyTorch's. */
  constructor(threshold: number, value: number, options: InplaceOptions = {}) {
    super();
    this.inplace = options.inplace ?? false;
    for (const [name, v] of [["threshold", threshold], ["value", value]] as const) {
      if (typeof v !== "number") {
        throw new TypeError(`Threshold: ${name} must be a number, got ${v}`);
      }
    }
    this.threshold = threshold;
    this.value = value;
  }

  /** Applies the threshold. */
  override forward(x: Tensor): Tensor {
    return applyInPlace(
      "threshold_",
      x,
      this.inplace,
      (x) => F.threshold(x, this.threshold, this.value),
    );
  }

  /**
   * `threshold=0.1, value=20`: whole numbers print as Python prints the ints of its documented
   * `Threshold(0.1, 20)`.
   */
  override extraRepr(): string {
    return `threshold=${pyNumber(this.threshold)}, value=${pyNumber(this.value)}${
      inplaceRepr(this.inplace)
    }`;
  }
}

/** The gated linear unit over the two halves of `dim`, as `torch.nn.GLU`. */
export class GLU extends Module {
  /** The dim split in two. */
  readonly dim: number;

  /** A GLU splitting `dim` (default -1). */
  constructor(dim = -1) {
    super();
    if (!Number.isInteger(dim)) throw new TypeError(`GLU: dim must be an integer, got ${dim}`);
    this.dim = dim;
  }

  /** Applies the GLU. */
  override forward(x: Tensor): Tensor {
    return F.glu(x, this.dim);
  }

  /** `dim=-1`. */
  override extraRepr(): string {
    return `dim=${this.dim}`;
  }
}

/** The self-normalizing ELU with PyTorch's fixed alpha and scale, as `torch.nn.SELU`. */
export class SELU extends Module {
  /** Whether forward overwrites its input (PyTorch's `inplace`). */
  readonly inplace: boolean;

  /** `inplace` overwrites the input, as PyTorch's `inplace=True`. */
  constructor(options: InplaceOptions = {}) {
    super();
    this.inplace = options.inplace ?? false;
  }

  /** Applies SELU. */
  override forward(x: Tensor): Tensor {
    return applyInPlace("selu_", x, this.inplace, (x) => F.selu(x));
  }

  /** `inplace=True` when set. */
  override extraRepr(): string {
    return inplaceRepr(this.inplace).slice(2);
  }
}

/** A number, or options holding it under `key`. */
function optionOf<K extends string>(
  value: number | { readonly [k in K]?: number },
  key: K,
): number | undefined {
  return typeof value === "number" ? value : value[key];
}

/** `x > 0 ? x : alpha · (e^(x / alpha) - 1)`, as `torch.nn.CELU`. */
export class CELU extends Module {
  /** Scale of the negative part. */
  readonly alpha: number;
  /** Whether forward overwrites its input (PyTorch's `inplace`). */
  readonly inplace: boolean;

  /** A CELU with `alpha` (default 1; a number or `{ alpha, inplace }`). */
  constructor(alpha: number | (F.CeluOptions & InplaceOptions) = {}) {
    super();
    this.inplace = typeof alpha === "number" ? false : alpha.inplace ?? false;
    this.alpha = checkFinite("CELU", "alpha", optionOf(alpha, "alpha") ?? 1, { nonZero: true });
  }

  /** Applies CELU. */
  override forward(x: Tensor): Tensor {
    return applyInPlace("celu_", x, this.inplace, (x) => F.celu(x, { alpha: this.alpha }));
  }

  /** `alpha=1.0`. */
  override extraRepr(): string {
    return `alpha=${pyFloat(this.alpha)}${inplaceRepr(this.inplace)}`;
  }
}

/** 0 where `|x| <= lambd`, else `x`, as `torch.nn.Hardshrink`. */
export class Hardshrink extends Module {
  /** Half-width of the band sent to 0. */
  readonly lambd: number;

  /** A hardshrink with `lambd` (default 0.5; a number or `{ lambd }`). */
  constructor(lambd: number | F.ShrinkOptions = {}) {
    super();
    this.lambd = checkFinite("Hardshrink", "lambd", optionOf(lambd, "lambd") ?? 0.5);
  }

  /** Applies hardshrink. */
  override forward(x: Tensor): Tensor {
    return F.hardshrink(x, { lambd: this.lambd });
  }

  /** `0.5`. */
  override extraRepr(): string {
    return pyFloat(this.lambd);
  }
}

/** `x ∓ lambd` outside [-lambd, lambd], else 0, as `torch.nn.Softshrink`. */
export class Softshrink extends Module {
  /** Half-width of the band sent to 0. */
  readonly lambd: number;

  /** A softshrink with `lambd` >= 0 (default 0.5; a number or `{ lambd }`). */
  constructor(lambd: number | F.ShrinkOptions = {}) {
    super();
    const value = checkFinite("Softshrink", "lambd", optionOf(lambd, "lambd") ?? 0.5);
    if (value < 0) {
      throw new RangeError(`Softshrink: lambd must be greater or equal to 0, got ${value}`);
    }
    this.lambd = value;
  }

  /** Applies softshrink. */
  override forward(x: Tensor): Tensor {
    return F.softshrink(x, { lambd: this.lambd });
  }

  /** `0.5`. */
  override extraRepr(): string {
    return pyFloat(this.lambd);
  }
}
