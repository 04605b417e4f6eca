/**
 * `TransformedDistribution`: a base distribution pushed through a chain
 * of transforms, as `torch.distributions.TransformedDistribution`
 * (densities by the change of variables, cdf/icdf through monotone
 * chains).
 * @module
 */

import { Tensor } from "../tensor.ts";
import type { Device } from "../device.ts";
import { noGrad } from "../autograd.ts";
import { formatShape, sameShape } from "../shape.ts";
import { type Constraint, Distribution, type DistributionOptions } from "./distribution.ts";
import { anyParam, checkMaskLater, checkParam, defaultValidateArgs, sumRightmost } from "./util.ts";
import { Independent } from "./independent.ts";
import { constraints, eventDimOf } from "./constraints.ts";
import { ComposeTransform, Transform } from "./transforms.ts";

/**
 * The distribution of `t_n(...t_1(x))` with `x` drawn from `base`.
 *
 * @example
 * ```ts
 * import { distributions, tensor } from "@multigrad/core";
 * const logNormal = new distributions.TransformedDistribution(
 *   new distributions.Normal(0, 1),
 *   [new distributions.ExpTransform()],
 * );
 * const lp = logNormal.logProb(tensor([0.5, 2]));
 * ```
 */
export class TransformedDistribution extends Distribution {
  /** The base distribution (wrapped in {@link Independent} when the transforms need more event dims). */
  readonly baseDist: Distribution;
  /** The transforms, applied first to last. */
  readonly transforms: Transform[];

  /** `transforms` one transform or a list of them. */
  constructor(
    baseDistribution: Distribution,
    transforms: Transform | readonly Transform[],
    options: DistributionOptions = {},
  ) {
    const op = new.target?.name ?? "TransformedDistribution";
    if (!(baseDistribution instanceof Distribution)) {
      throw new TypeError(
        `${op}: baseDistribution must be a Distribution, got ${typeof baseDistribution}`,
      );
    }
    const list = transforms instanceof Transform ? [transforms] : transforms;
    if (!Array.isArray(list)) {
      throw new TypeError(`${op}: transforms must be a Transform or a list of Transforms`);
    }
    list.forEach((t, i) => {
      if (!(t instanceof Transform)) {
        throw new TypeError(`${op}: transforms[${i}] must be a Transform, got ${typeof t}`);
      }
    });
    const baseShape = [...baseDistribution.batchShape, ...baseDistribution.eventShape];
    const baseEventDim = baseDistribution.eventShape.length;
    const chain = new ComposeTransform(list);
    const domainEventDim = eventDimOf(chain.domain);
    if (baseShape.length < domainEventDim) {
      throw new RangeError(
        `${op}: base distribution needs at least ${domainEventDim} dims for the transforms, got shape ${
          formatShape(baseShape)
        }`,
      );
    }
    const forwardShape = chain.forwardShape(baseShape);
    const expanded = chain.inverseShape(forwardShape);
    let base = baseDistribution;
    if (!sameShape(expanded, baseShape)) {
      // Transform parameters of a larger shape broadcast the base, as PyTorch.
      base = base.expand(expanded.slice(0, expanded.length - baseEventDim));
    }
    const reinterpreted = domainEventDim - baseEventDim;
    if (reinterpreted > 0) base = new Independent(base, reinterpreted);
    const change = eventDimOf(chain.codomain) - domainEventDim;
    const eventDim = Math.max(eventDimOf(chain.codomain), baseEventDim + change);
    const k = forwardShape.length - eventDim;
    super(
      forwardShape.slice(0, k),
      forwardShape.slice(k),
      options.validateArgs ?? defaultValidateArgs(),
    );
    this.baseDist = base;
    this.transforms = [...list];
  }

  /** The last transform's codomain over the event dims. */
  get support(): Constraint {
    if (this.transforms.length === 0) return this.baseDist.support;
    const support = this.transforms[this.transforms.length - 1].codomain;
    const extra = this.eventShape.length - eventDimOf(support);
    return extra > 0 ? constraints.independent(support, extra) : support;
  }
  /** The base's. */
  override get hasRsample(): boolean {
    return this.baseDist.hasRsample;
  }
  /** Not available in closed form (the subclasses give it). */
  get mean(): Tensor {
    throw new TypeError(`${this.name}.mean: not implemented for ${this.name}`);
  }
  /** Not available in closed form (the subclasses give it). */
  get variance(): Tensor {
    throw new TypeError(`${this.name}.variance: not implemented for ${this.name}`);
  }
  /** The base's draws pushed through the transforms, without gradient. */
  override sample(sampleShape: number[] = []): Tensor {
    return noGrad(() => {
      let x = this.baseDist.sample(sampleShape);
      for (const t of this.transforms) x = t.call(x);
      return x;
    });
  }
  /** The base's reparameterized draws pushed through the transforms. */
  override rsample(sampleShape: number[] = []): Tensor {
    let x = this.baseDist.rsample(sampleShape);
    for (const t of this.transforms) x = t.call(x);
    return x;
  }
  /**
   * The base's log-density at the inverse image minus each transform's
   * log-Jacobian (summed over the event dims), as PyTorch.
   */
  logProb(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.logProb(value);
    this.validateSample("logProb", value, this.like());
    let ed = this.eventShape.length;
    let result: Tensor | undefined;
    let y = value;
    for (const t of [...this.transforms].reverse()) {
      const x = t.inv.call(y);
      ed += eventDimOf(t.domain) - eventDimOf(t.codomain);
      const term = sumRightmost(t.logAbsDetJacobian(x, y), ed - eventDimOf(t.domain));
      result = result ? result.sub(term) : term.neg();
      y = x;
    }
    const base = sumRightmost(this.baseDist.logProb(y), ed - this.baseDist.eventShape.length);
    return result ? base.add(result) : base;
  }
  /** `cdf` of a decreasing chain is `1 - cdf`: `sign·(F - ½) + ½`. */
  private monotonize(value: Tensor): Tensor {
    let sign: number | Tensor = 1;
    for (const t of this.transforms) {
      const s = t.sign;
      sign = mulSign(sign, s);
    }
    if (sign === 1) return value;
    return value.sub(0.5).mul(sign).add(0.5);
  }
  /**
   * The base's cdf at the inverse image (flipped for a decreasing chain);
   * as PyTorch, the inverse image is checked against the base's support, so
   * that the boundary of an open support is accepted (LogNormal's cdf at 0).
   */
  override cdf(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.cdf(value);
    this.checkValue("cdf", value);
    let x = value;
    for (const t of [...this.transforms].reverse()) x = t.inv.call(x);
    if (this.validateArgs) {
      const support = this.baseDist.support;
      const shown = sameShape(x.shape, value.shape) ? value : x;
      checkMaskLater(
        noGrad(() => support.check(x)),
        shown,
        (i, v) =>
          `${this.name}.cdf: value must map into the support of ${this.baseDist.name} (${support.name}), got ${v} at index ${i}`,
      );
    }
    return this.monotonize(this.baseDist.cdf(x));
  }
  /** The transforms applied to the base's icdf (of the flipped probability for a decreasing chain). */
  override icdf(value: Tensor): Tensor {
    const d = this.withNumbersOn(value?.device);
    if (d !== this) return d.icdf(value);
    this.checkValue("icdf", value);
    if (this.validateArgs) {
      checkParam(`${this.name}.icdf`, "value", value, value, constraints.unitInterval);
    }
    let x = this.baseDist.icdf(this.monotonize(value));
    for (const t of this.transforms) x = t.call(x);
    return x;
  }
  /** A tensor of the distribution's dtype and device (for argument checks). */
  protected like(): Tensor {
    return anyParam(this);
  }
  /** Checks a `logProb`/`cdf` argument: a tensor on the parameters' device. */
  private checkValue(op: string, value: Tensor): void {
    if (!(value instanceof Tensor)) {
      throw new TypeError(`${this.name}.${op}: value must be a Tensor, got ${typeof value}`);
    }
    const device = this.like().device;
    if (value.device !== device) {
      throw new TypeError(
        `${this.name}.${op}: value is on ${value.device}, the distribution on ${device}`,
      );
    }
  }
  /** PyTorch's repr (`TransformedDistribution()`); the subclasses show their parameters. */
  override toString(): string {
    return super.toString();
  }
  /** None of its own (the subclasses name theirs). */
  protected params(): Record<string, Tensor> {
    return {};
  }
  /**
   * The same distribution with the base expanded to the batch shape that
   * the transforms map to `batchShape` (PyTorch's rule); the subclasses
   * with parameters of their own remake themselves from them instead.
   */
  protected override expanded(batchShape: number[]): Distribution {
    if (Object.keys(this.params()).length > 0) return super.expanded(batchShape);
    let shape = [...batchShape, ...this.eventShape];
    for (const t of [...this.transforms].reverse()) shape = t.inverseShape(shape);
    const base = this.baseDist.expand(
      shape.slice(0, shape.length - this.baseDist.eventShape.length),
    );
    return new TransformedDistribution(base, this.transforms, { validateArgs: false });
  }
  /** Its own parameters' device, else the base's. */
  override get paramDevice(): Device | undefined {
    return super.paramDevice ?? this.baseDist.paramDevice;
  }
  /** Itself, or remade on `device` when built from numbers only. */
  override withNumbersOn(device: Device | undefined): Distribution {
    if (Object.keys(this.params()).length > 0) return super.withNumbersOn(device);
    const base = this.baseDist.withNumbersOn(device);
    if (base === this.baseDist) return this;
    return new TransformedDistribution(base, this.transforms, { validateArgs: this.validateArgs });
  }
}

/** The product of two signs (numbers, or tensors for tensor coefficients). */
function mulSign(a: number | Tensor, b: number | Tensor): number | Tensor {
  if (typeof a === "number") return typeof b === "number" ? a * b : b.mul(a);
  return a.mul(b);
}
