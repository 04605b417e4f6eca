/**
 * Weight normalization as a parametrization, as PyTorch's
 * `torch.nn.utils.parametrizations.weight_norm` (the successor of the
 * hook-based `nn.utils.weightNorm`).
 * @module
 */

import { normalizeDim } from "../../shape.ts";
import { Tensor } from "../../tensor.ts";
import { Module } from "../module.ts";
import { type Parametrized, registerParametrization } from "./parametrize.ts";

type Fields = Record<string, unknown>;

/**
 * ATen's `norm_except_dim(v, 2, dim)`: the 2-norm over every dim but `dim`,
 * kept with size 1; `dim = -1` (PyTorch's spelling of None) is the norm of
 * the whole tensor, a 0-dim tensor.
 */
function normExceptDim(v: Tensor, dim: number): Tensor {
  if (dim === -1) return v.norm(2);
  const others = v.shape.map((_, d) => d).filter((d) => d !== dim);
  if (others.length === 0) return v.abs();
  return v.norm(2, others, true);
}

/**
 * PyTorch's `_WeightNorm`: the parametrization {@link weightNorm}
 * registers. `forward(g, v)` is `v · g / ‖v‖` (the norm over every dim but
 * `dim`); `rightInverse(w)` gives `[‖w‖, w]`.
 */
export class _WeightNorm extends Module {
  /** The dim that keeps one norm per slice; -1 for one norm of the whole tensor. */
  readonly dim: number;

  /** Normalizes over every dim but `dim` (null: one norm of the whole tensor). */
  constructor(dim: number | null = 0) {
    super();
    this.dim = dim ?? -1;
  }

  /** The weight from its magnitude `g` and direction `v`. */
  override forward(weightG: Tensor, weightV: Tensor): Tensor {
    return weightV.mul(weightG.div(normExceptDim(weightV, this.dim)));
  }

  /** `[g, v]` of `weight`: its norms and itself. */
  rightInverse(weight: Tensor): Tensor[] {
    return [normExceptDim(weight, this.dim), weight];
  }
}

/**
 * Weight normalization as a parametrization, as PyTorch's
 * `torch.nn.utils.parametrizations.weight_norm`: `module[name]` (default
 * `"weight"`) reads as `g · v / ‖v‖` with the magnitude
 * `parametrizations.<name>.original0` (one per slice of `dim`, default 0;
 * `dim: null`, or -1 as in PyTorch's `_weight_norm`, for one of the whole
 * tensor) and the direction
 * `parametrizations.<name>.original1`. Registered with `unsafe`, as
 * PyTorch. (PyTorch also loads state dicts of the old hook-based
 * `weight_g`/`weight_v` form into it; multigrad does not.) Returns `module`.
 */
export function weightNorm<M extends Module>(
  module: M,
  name = "weight",
  options: { dim?: number | null } = {},
): M & Parametrized {
  const weight = (module as unknown as Fields)[name];
  if (!(weight instanceof Tensor)) {
    throw new RangeError(
      `weightNorm: module '${module}' has no parameter or buffer named '${name}'`,
    );
  }
  let dim = options.dim === undefined ? 0 : options.dim;
  if (dim !== null && dim !== -1) dim = normalizeDim(dim, weight.ndim, "weightNorm");
  return registerParametrization(module, name, new _WeightNorm(dim), { unsafe: true });
}
