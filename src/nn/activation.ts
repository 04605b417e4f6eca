/**
 * Activation modules beyond `ReLU`/`Sigmoid`/`Tanh`/`GELU`: `LeakyReLU`,
 * `SiLU`, `ELU`, `Softplus`, as `torch.nn`'s.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import * as F from "./functional/activation.ts";
import { Module } from "./module.ts";
import { checkFinite, pyFloat } from "./util.ts";

/** `x` where positive, else `negativeSlope * x`, as `torch.nn.LeakyReLU`. */
export class LeakyReLU extends Module {
  /** Slope for negative inputs. */
  readonly negativeSlope: number;

  /** A leaky ReLU (`negativeSlope` default 0.01). */
  constructor(options: F.LeakyReluOptions = {}) {
    super();
    this.negativeSlope = checkFinite("LeakyReLU", "negativeSlope", options.negativeSlope ?? 0.01);
  }

  /** Applies the leaky ReLU. */
  override forward(x: Tensor): Tensor {
    return F.leakyRelu(x, { negativeSlope: this.negativeSlope });
  }

  /** `negative_slope=0.01`. */
  override extraRepr(): string {
    return `negative_slope=${pyFloat(this.negativeSlope)}`;
  }
}

/** `x * sigmoid(x)`, as `torch.nn.SiLU`. */
export class SiLU extends Module {
  /** Applies SiLU. */
  override forward(x: Tensor): Tensor {
    return F.silu(x);
  }
}

/** `x` where positive, else `alpha * (e^x - 1)`, as `torch.nn.ELU`. */
export class ELU extends Module {
  /** Scale of the negative part. */
  readonly alpha: number;

  /** An ELU (`alpha` default 1). */
  constructor(options: F.EluOptions = {}) {
    super();
    this.alpha = checkFinite("ELU", "alpha", options.alpha ?? 1);
  }

  /** Applies ELU. */
  override forward(x: Tensor): Tensor {
    return F.elu(x, { alpha: this.alpha });
  }

  /** `alpha=1.0`. */
  override extraRepr(): string {
    return `alpha=${pyFloat(this.alpha)}`;
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
