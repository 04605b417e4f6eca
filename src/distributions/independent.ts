/**
 * `Independent`: reinterprets batch dims of a distribution as event dims,
 * as `torch.distributions.Independent`.
 * @module
 */

import type { Tensor } from "../tensor.ts";
import type { Device } from "../device.ts";
import { forwardScope } from "../storage.ts";
import { formatShape } from "../shape.ts";
import {
  type Constraint,
  Distribution,
  type DistributionOptions,
  type EnumerateSupportOptions,
} from "./distribution.ts";
import { sumRightmost } from "./util.ts";

/**
 * The rightmost `reinterpretedBatchNdims` batch dims of `base` become event
 * dims: `logProb` and `entropy` sum over them.
 *
 * @example
 * ```ts
 * import { distributions, zeros, ones } from "@multigrad/core";
 * const d = new distributions.Independent(new distributions.Normal(zeros([3]), ones([3])), 1);
 * console.log(d.batchShape, d.eventShape); // [] [3]
 * ```
 */
export class Independent extends Distribution {
  /** The wrapped distribution. */
  readonly baseDist: Distribution;
  /** How many batch dims became event dims. */
  readonly reinterpretedBatchNdims: number;

  /** `reinterpretedBatchNdims` must be an integer in [0, base's batch dims]. */
  constructor(
    baseDistribution: Distribution,
    reinterpretedBatchNdims: number,
    options: DistributionOptions = {},
  ) {
    if (!(baseDistribution instanceof Distribution)) {
      throw new TypeError(
        `Independent: baseDistribution must be a Distribution, got ${typeof baseDistribution}`,
      );
    }
    const n = reinterpretedBatchNdims;
    const batch = baseDistribution.batchShape;
    if (!Number.isInteger(n) || n < 0 || n > batch.length) {
      throw new RangeError(
        `Independent: Expected reinterpretedBatchNdims <= len(${
          formatShape(batch)
        }) (a nonnegative integer), actual ${n} vs ${batch.length}`,
      );
    }
    super(
      batch.slice(0, batch.length - n),
      [...batch.slice(batch.length - n), ...baseDistribution.eventShape],
      options.validateArgs ?? baseDistribution.validateArgs,
    );
    this.baseDist = baseDistribution;
    this.reinterpretedBatchNdims = n;
  }

  /** The base's support. */
  get support(): Constraint {
    return this.baseDist.support;
  }
  /** The base's. */
  override get hasRsample(): boolean {
    return this.baseDist.hasRsample;
  }
  /** The base's mode. */
  override get mode(): Tensor {
    return this.baseDist.mode;
  }
  /** The base's mean. */
  get mean(): Tensor {
    return this.baseDist.mean;
  }
  /** The base's variance. */
  get variance(): Tensor {
    return this.baseDist.variance;
  }
  /** The base's draws. */
  override sample(sampleShape: number[] = []): Tensor {
    return this.baseDist.sample(sampleShape);
  }
  /** The base's reparameterized draws. */
  override rsample(sampleShape: number[] = []): Tensor {
    return this.baseDist.rsample(sampleShape);
  }
  /** The base's log-probability summed over the reinterpreted dims. */
  logProb(value: Tensor): Tensor {
    return forwardScope(() =>
      sumRightmost(this.baseDist.logProb(value), this.reinterpretedBatchNdims)
    );
  }
  /** The base's entropy summed over the reinterpreted dims. */
  override entropy(): Tensor {
    return forwardScope(() => sumRightmost(this.baseDist.entropy(), this.reinterpretedBatchNdims));
  }
  /** A repr like PyTorch's: `Independent(Normal(...), 1)`. */
  override toString(): string {
    return `Independent(${this.baseDist}, ${this.reinterpretedBatchNdims})`;
  }
  /** None of its own. */
  protected params(): Record<string, Tensor> {
    return {};
  }
  /** The base expanded to `batchShape` plus the reinterpreted dims. */
  protected override expanded(batchShape: number[]): Distribution {
    const n = this.reinterpretedBatchNdims;
    const reinterpreted = this.eventShape.slice(0, n);
    const Kind = this.constructor as typeof Independent;
    return new Kind(this.baseDist.expand([...batchShape, ...reinterpreted]), n, {
      validateArgs: false,
    });
  }
  /** The base's when no dims are reinterpreted (as PyTorch), else false. */
  override get hasEnumerateSupport(): boolean {
    return this.reinterpretedBatchNdims === 0 && this.baseDist.hasEnumerateSupport;
  }
  /** The base's; with reinterpreted dims (a cartesian product) not available, as PyTorch. */
  override enumerateSupport(options: EnumerateSupportOptions = {}): Tensor {
    if (this.reinterpretedBatchNdims > 0) {
      throw new TypeError(
        `Independent.enumerateSupport: enumeration over the cartesian product of ${this.reinterpretedBatchNdims} reinterpreted dims is not implemented (as PyTorch)`,
      );
    }
    return this.baseDist.enumerateSupport(options);
  }
  /** The base's. */
  override get paramDevice(): Device | undefined {
    return this.baseDist.paramDevice;
  }
  /** Itself, or the same reinterpretation of the base remade on `device`. */
  override withNumbersOn(device: Device | undefined): Distribution {
    const base = this.baseDist.withNumbersOn(device);
    if (base === this.baseDist) return this;
    return new Independent(base, this.reinterpretedBatchNdims, { validateArgs: this.validateArgs });
  }
}
