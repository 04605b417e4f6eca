/**
 * Activation modules beyond `ReLU`/`Sigmoid`/`Tanh`/`GELU`: `LeakyReLU`,
 * `SiLU`, `ELU`, `Softplus`, `Hardtanh`, `ReLU6`, `Hardsigmoid`, `Hardswish`,
 * `Mish`, as `torch.nn`'s.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import * as F from "./functional/activation.ts";
import { Module } from "./module.ts";
import { checkFinite, pyFloat } from "./util.ts";
import { applyInPlace, type InplaceOptions, inplaceRepr } from "./functional/inplace.ts";

/** `x` where positive, else `negativeSlope * x`, as `torch.nn.LeakyReLU`. */
export class LeakyReLU extends Module {
  /** Whether forward overwrites its input (PyTorch's `inplace`). */
  readonly inplace: boolean;
  /** Slope for negative inputs. */
  readonly negativeSlope: number;

  /** A leaky ReLU (`negativeSlope` default 0.01). */
  constructor(options: F.LeakyReluOptions & InplaceOptions = {}) {
    super();
    this.inplace = options.inplace ?? false;
    this.negativeSlope = checkFinite("LeakyReLU", "negativeSlope", options.negativeSlope ?? 0.01);
  }

  /** Applies the leaky ReLU. */
  override forward(x: Tensor): Tensor {
    return applyInPlace(
      "leakyRelu_",
      x,
      this.inplace,
      (x) => F.leakyRelu(x, { negativeSlope: this.negativeSlope }),
    );
  }

  /** `negative_slope=0.01`. */
  override extraRepr(): string {
    return `negative_slope=${pyFloat(this.negativeSlope)}${inplaceRepr(this.inplace)}`;
  }
}

/** `x * sigmoid(x)`, as `torch.nn.SiLU`. */
export class SiLU extends Module {
  /** Whether forward overwrites its input (PyTorch's `inplace`). */
  readonly inplace: boolean;

  /** `inplace` overwrites the input, as PyTorch's `inplace=True`. */
  constructor(options: InplaceOptions = {}) {
    super();
    this.inplace = options.inplace ?? false;
  }

  /** Applies SiLU. */
  override forward(x: Tensor): Tensor {
    return applyInPlace("silu_", x, this.inplace, (x) => F.silu(x));
  }

  /** `inplace=True` when set. */
  override extraRepr(): string {
    return inplaceRepr(this.inplace).slice(2);
  }
}

/** `x` where positive, else `alpha * (e^x - 1)`, as `torch.nn.ELU`. */
export class ELU extends Module {
  /** Whether forward overwrites its input (PyTorch's `inplace`). */
  readonly inplace: boolean;
  /** Scale of the negative part. */
  readonly alpha: number;

  /** An ELU (`alpha` default 1). */
  constructor(options: F.EluOptions & InplaceOptions = {}) {
    super();
    this.inplace = options.inplace ?? false;
    this.alpha = checkFinite("ELU", "alpha", options.alpha ?? 1);
  }

  /** Applies ELU. */
  override forward(x: Tensor): Tensor {
    return applyInPlace("elu_", x, this.inplace, (x) => F.elu(x, { alpha: this.alpha }));
  }

  /** `alpha=1.0`. */
  override extraRepr(): string {
    return `alpha=${pyFloat(this.alpha)}${inplaceRepr(this.inplace)}`;
  }
}

/** `log(1 + e^(beta x)) / beta`, linear above the threshold, as `torch.nn.Softplus`. */
export class Softplus extends Module {
  /** The sharpness. */
  readonly beta: number;
  /** Where the function becomes `x`. */
  readonly threshold: number;

  /** A softplus (`beta` default 1, `threshold` default 20). */
  constructor(options: F.SoftplusOptions = {}) {
    super();
    this.beta = checkFinite("Softplus", "beta", options.beta ?? 1, { nonZero: true });
    this.threshold = checkFinite("Softplus", "threshold", options.threshold ?? 20);
  }

  /** Applies softplus. */
  override forward(x: Tensor): Tensor {
    return F.softplus(x, { beta: this.beta, threshold: this.threshold });
  }

  /** `beta=1, threshold=20` (numbers as Python prints them as given). */
  override extraRepr(): string {
    return `beta=${this.beta}, threshold=${this.threshold}`;
  }
}

/** `x` clamped into [minVal, maxVal], as `torch.nn.Hardtanh`. */
export class Hardtanh extends Module {
  /** Whether forward overwrites its input (PyTorch's `inplace`). */
  readonly inplace: boolean;
  /** Lower bound. */
  readonly minVal: number;
  /** Upper bound. */
  readonly maxVal: number;

  /** A hardtanh (`minVal` default -1, `maxVal` default 1). */
  constructor(options: F.HardtanhOptions & InplaceOptions = {}) {
    super();
    this.inplace = options.inplace ?? false;
    this.minVal = checkFinite("Hardtanh", "minVal", options.minVal ?? -1);
    this.maxVal = checkFinite("Hardtanh", "maxVal", options.maxVal ?? 1);
  }

  /** Applies hardtanh. */
  override forward(x: Tensor): Tensor {
    return applyInPlace(
      "hardtanh_",
      x,
      this.inplace,
      (x) => F.hardtanh(x, { minVal: this.minVal, maxVal: this.maxVal }),
    );
  }

  /** `min_val=-1.0, max_val=1.0`. */
  override extraRepr(): string {
    return `min_val=${pyFloat(this.minVal)}, max_val=${pyFloat(this.maxVal)}${
      inplaceRepr(this.inplace)
    }`;
  }
}

/** `min(max(x, 0), 6)`, as `torch.nn.ReLU6`. */
export class ReLU6 extends Module {
  /** Whether forward overwrites its input (PyTorch's `inplace`). */
  readonly inplace: boolean;

  /** `inplace` overwrites the input, as PyTorch's `inplace=True`. */
  constructor(options: InplaceOptions = {}) {
    super();
    this.inplace = options.inplace ?? false;
  }

  /** Applies ReLU6. */
  override forward(x: Tensor): Tensor {
    return applyInPlace("relu6_", x, this.inplace, (x) => F.relu6(x));
  }

  /** `inplace=True` when set. */
  override extraRepr(): string {
    return inplaceRepr(this.inplace).slice(2);
  }
}

/** `x / 6 + 1/2` clamped into [0, 1], as `torch.nn.Hardsigmoid`. */
export class Hardsigmoid extends Module {
  /** Whether forward overwrites its input (PyTorch's `inplace`). */
  readonly inplace: boolean;

  /** `inplace` overwrites the input, as PyTorch's `inplace=True`. */
  constructor(options: InplaceOptions = {}) {
    super();
    this.inplace = options.inplace ?? false;
  }

  /** Applies hardsigmoid. */
  override forward(x: Tensor): Tensor {
    return applyInPlace("hardsigmoid_", x, this.inplace, (x) => F.hardsigmoid(x));
  }
}

/** `x · relu6(x + 3) / 6`, as `torch.nn.Hardswish`. */
export class Hardswish extends Module {
  /** Whether forward overwrites its input (PyTorch's `inplace`). */
  readonly inplace: boolean;

  /** `inplace` overwrites the input, as PyTorch's `inplace=True`. */
  constructor(options: InplaceOptions = {}) {
    super();
    this.inplace = options.inplace ?? false;
  }

  /** Applies hardswish. */
  override forward(x: Tensor): Tensor {
    return applyInPlace("hardswish_", x, this.inplace, (x) => F.hardswish(x));
  }
}

/** `x · tanh(softplus(x))`, as `torch.nn.Mish`. */
export class Mish extends Module {
  /** Whether forward overwrites its input (PyTorch's `inplace`). */
  readonly inplace: boolean;

  /** `inplace` overwrites the input, as PyTorch's `inplace=True`. */
  constructor(options: InplaceOptions = {}) {
    super();
    this.inplace = options.inplace ?? false;
  }

  /** Applies mish. */
  override forward(x: Tensor): Tensor {
    return applyInPlace("mish_", x, this.inplace, (x) => F.mish(x));
  }

  /** `inplace=True` when set. */
  override extraRepr(): string {
    return inplaceRepr(this.inplace).slice(2);
  }
}
