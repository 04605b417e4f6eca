/**
 * What the normalisation layers share (PyTorch's `_NormBase`): the checks of
 * eps, the affine parameters and the running statistics with their reset.
 * Internal to `nn`.
 * @module
 */

import { noGrad } from "../autograd.ts";
import { full, ones, zeros } from "../ops/factory.ts";
import { tidy } from "../storage.ts";
import type { Tensor } from "../tensor.ts";
import type { FactoryOptions } from "./layers.ts";
import { type Module, Parameter } from "./module.ts";

/** `eps`, or an error naming `owner` when it is not a non-negative number. */
export function checkEps(owner: string, eps: number): number {
  if (typeof eps !== "number" || !(eps >= 0)) {
    throw new RangeError(`${owner}: eps must be a non-negative number, got ${eps}`);
  }
  return eps;
}

/**
 * A norm's affine parameters registered on `m`: `weight` (ones) when `weight`, `bias` (zeros) when
 * `bias` (default: as `weight`), each of `shape`; null where not.
 */
export function registerAffine(
  m: Module,
  shape: number[],
  factory: FactoryOptions,
  weight: boolean,
  bias = weight,
): [Parameter | null, Parameter | null] {
  return [
    m.registerParameter("weight", weight ? new Parameter(ones(shape, factory)) : null),
    m.registerParameter("bias", bias ? new Parameter(zeros(shape, factory)) : null),
  ];
}

/** The buffers of a norm's running statistics, or nulls when it does not track them. */
export type RunningStats = [Tensor | null, Tensor | null, Tensor | null];

/**
 * The buffers `running_mean` (zeros), `running_var` (ones) and `num_batches_tracked` (0, int32;
 * PyTorch: int64) of `features` channels registered on `m` when `track`, else nulls.
 */
export function registerRunningStats(
  m: Module,
  features: number,
  factory: FactoryOptions,
  track: boolean,
): RunningStats {
  return [
    m.registerBuffer("running_mean", track ? zeros([features], factory) : null),
    m.registerBuffer("running_var", track ? ones([features], factory) : null),
    m.registerBuffer(
      "num_batches_tracked",
      track ? full([], 0, { device: factory.device, dtype: "int32" }) : null,
      { whenMissing: 0 },
    ),
  ];
}

/** Resets running statistics in place to mean 0, variance 1, 0 batches. */
export function resetRunningStats([mean, variance, tracked]: RunningStats): void {
  tidy(() =>
    noGrad(() => {
      mean?._assign(mean.zerosLike());
      variance?._assign(variance.zerosLike().add(1));
      tracked?._assign(tracked.zerosLike());
    })
  );
}
