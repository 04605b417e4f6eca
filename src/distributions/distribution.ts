/**
 * The `Distribution` base class of `torch.distributions` and the helpers its
 * subclasses share: broadcasting parameters, deferred value checks, the
 * support check of `logProb`'s argument.
 * @module
 */

import { Tensor } from "../tensor.ts";
import { broadcastShapes, formatShape, sameShape } from "../shape.ts";
import type { Device } from "../device.ts";
import { noGrad } from "../autograd.ts";
import {
  argConstraintTable,
  checkExpand,
  checkMaskLater,
  defaultValidateArgs,
  fromNumbers,
  setValidateByDefault,
  swapNumbersDevice,
} from "./util.ts";

/** A parameter of a distribution: a tensor, or a number broadcast to the others' dtype and device. */
export type Param = Tensor | number;

/** Options every distribution takes. */
export interface DistributionOptions {
  /**
   * Check parameters (and `logProb`/`cdf`/`icdf` arguments) against their
   * constraints (default true, as PyTorch's `__debug__` default, or what
   * {@link Distribution.setDefaultValidateArgs} set). Numbers
   * are checked at once; tensor values are checked on the device and a bad
   * one makes the next read on that device reject with a RangeError naming
   * the parameter, the index and the value.
   */
  validateArgs?: boolean;
}

/** A constraint on parameter or sample values. */
export interface Constraint {
  /** How the constraint reads in messages, e.g. `x > 0`. */
  readonly name: string;
  /** 1 where `x` satisfies it, else 0 (same shape). */
  check(x: Tensor): Tensor;
  /** The same for a host number. */
  holds(x: number): boolean;
}

/** Options of {@link Distribution.enumerateSupport}. */
export interface EnumerateSupportOptions {
  /** Expand the values over the batch shape (default true), else size-1 batch dims. */
  expand?: boolean;
}

/**
 * The base of every distribution, as `torch.distributions.Distribution`:
 * `batchShape` (independent, not necessarily identically distributed
 * draws) and `eventShape` (one draw), sampling, densities and moments.
 */
export abstract class Distribution {
  /** The shape over which parameters are batched. */
  readonly batchShape: number[];
  /** The shape of one draw. */
  readonly eventShape: number[];
  /** Whether arguments are checked (see {@link DistributionOptions.validateArgs}). */
  readonly validateArgs: boolean;

  /** Sets the shapes and whether arguments are checked (subclasses call it with their parameters' shapes). */
  constructor(
    batchShape: readonly number[],
    eventShape: readonly number[],
    validateArgs: boolean = defaultValidateArgs(),
  ) {
    this.batchShape = [...batchShape];
    this.eventShape = [...eventShape];
    this.validateArgs = validateArgs;
  }

  /**
   * Sets whether distributions built without a `validateArgs` option check
   * their arguments, as PyTorch's `Distribution.set_default_validate_args`
   * (global: restore it in `finally`).
   */
  static setDefaultValidateArgs(value: boolean): void {
    if (typeof value !== "boolean") {
      throw new TypeError(
        `Distribution.setDefaultValidateArgs: value must be a boolean, got ${typeof value}`,
      );
    }
    setValidateByDefault(value);
  }

  /**
   * `exp(entropy)`, as PyTorch's `perplexity()`; of the batch shape, and
   * only where {@link entropy} is defined.
   */
  perplexity(): Tensor {
    return this.entropy().exp();
  }

  /** The distribution's name in messages (its class name). */
  get name(): string {
    return this.constructor.name;
  }

  /** Whether {@link rsample} (reparameterized, differentiable sampling) is available. */
  get hasRsample(): boolean {
    return false;
  }

  /**
   * The device of the parameters (for {@link withNumbersOn} and
   * `klDivergence`); undefined without parameters of its own.
   */
  get paramDevice(): Device | undefined {
    return Object.values(this.params())[0]?.device;
  }

  /**
   * This distribution for use with tensors on `device`: itself when its
   * parameters are there or any was a tensor; when all were numbers (in
   * PyTorch 0-dim cpu tensors, which join tensors on any device), the same
   * distribution remade from those numbers, as float32 scalars, on `device`.
   */
  withNumbersOn(device: Device | undefined): Distribution {
    const params = Object.values(this.params());
    if (
      device === undefined || this.paramDevice === device || params.some((t) => !fromNumbers.has(t))
    ) return this;
    const before = swapNumbersDevice(device);
    try {
      return this.remake(params.map((t) => fromNumbers.get(t)!));
    } finally {
      swapNumbersDevice(before);
    }
  }

  /**
   * A distribution of this kind from parameters in the order of `params()`
   * (numbers for {@link withNumbersOn}, broadcast tensors for {@link expand});
   * the families whose constructor takes other arguments override it.
   */
  protected remake(values: Param[], validateArgs = this.validateArgs): Distribution {
    const Kind = this.constructor as new (...args: unknown[]) => Distribution;
    return new Kind(...values, { validateArgs });
  }

  /**
   * The same family with the batch shape `batchShape`, as PyTorch's
   * `Distribution.expand`: each parameter is expanded to `batchShape` plus
   * its own trailing dims, following `Tensor.expand`'s rule (new leading dims,
   * size-1 dims grow, other dims stay). Unlike PyTorch's views, multigrad's
   * tensors are contiguous, so the expanded parameters are copies (gradients
   * still flow back to the original ones); factors already computed
   * (MultivariateNormal's `scaleTril`, ...) are expanded, not recomputed. The parameters are
   * not checked again (PyTorch's `validate_args=False`), but the result keeps
   * this distribution's {@link validateArgs} for later `logProb` arguments.
   * A subclass keeps its class; one whose constructor takes other arguments
   * than its family's must override `expanded` (else a TypeError, as
   * PyTorch's NotImplementedError).
   *
   * @example
   * ```ts
   * import { distributions, tensor } from "@multigrad/core";
   * const d = new distributions.Normal(tensor([0, 1]), 1).expand([3, 2]);
   * console.log(d.batchShape, d.sample().shape); // [3, 2] [3, 2]
   * ```
   */
  expand(batchShape: readonly number[]): this {
    const op = `${this.name}.expand`;
    const shape = checkExpand(op, this.batchShape, batchShape);
    // A subclass whose constructor takes other arguments than its family's cannot be remade from
    // the parameters (PyTorch raises NotImplementedError): say so rather than pass on the
    // constructor's own confusing error or a distribution of another class or shape.
    const advice =
      "(a subclass whose constructor takes other arguments than its family's must override expanded)";
    let d: Distribution;
    try {
      d = this.expanded(shape);
    } catch (e) {
      if (e instanceof Error && e.message.startsWith(`${op}:`)) throw e;
      throw new TypeError(
        `${op}: cannot remake ${this.name} from its parameters ${advice}: ${
          (e as Error)?.message ?? e
        }`,
        { cause: e },
      );
    }
    // An ancestor class is fine (a plain TransformedDistribution for a subclass without parameters).
    const Kind = d.constructor as abstract new (...args: never[]) => Distribution;
    if (
      !(this instanceof Kind) || !sameShape(d.batchShape, shape) ||
      !sameShape(d.eventShape, this.eventShape)
    ) {
      throw new TypeError(
        `${op}: cannot remake ${this.name} from its parameters ${advice}: got a ${d.name} of batch shape ${
          formatShape(d.batchShape)
        } and event shape ${formatShape(d.eventShape)}, not batch shape ${
          formatShape(shape)
        } and event shape ${formatShape(this.eventShape)}`,
      );
    }
    (d as { validateArgs: boolean }).validateArgs = this.validateArgs;
    return d as this;
  }

  /**
   * {@link expand} after the shape check: by default {@link remake} from the
   * parameters, each expanded to `batchShape` plus its dims past the batch.
   * Wrappers (Independent, transformed and mixture distributions) override it;
   * so must a subclass whose constructor does not take `params()` in order.
   */
  protected expanded(batchShape: number[]): Distribution {
    const k = this.batchShape.length;
    const params = Object.entries(this.params());
    if (params.length === 0) {
      // A subclass outside this package may keep its state elsewhere: remaking it from nothing
      // would silently drop that state, so it must say how it expands (as PyTorch's base raises).
      throw new TypeError(
        `${this.name}.expand: not implemented for ${this.name} (it names no parameters; override expanded or remake)`,
      );
    }
    const values = params.map(([name, t]) => {
      if (!sameShape(t.shape.slice(0, k), this.batchShape)) {
        throw new Error(
          `${this.name}.expand: parameter ${name} of shape ${
            formatShape(t.shape)
          } does not lead with the batch shape ${formatShape(this.batchShape)}`,
        );
      }
      return t.expand([...batchShape, ...t.shape.slice(k)]);
    });
    return this.remake(values, false);
  }

  /**
   * The constraint each parameter satisfies, as PyTorch's `arg_constraints`
   * (keys in camelCase: `totalCount`, `covarianceMatrix`, ...; both
   * `probs` and `logits` where a family takes either). Empty for wrappers
   * (Independent, TransformedDistribution, MixtureSameFamily), as PyTorch.
   */
  get argConstraints(): Record<string, Constraint> {
    for (let C = this.constructor; C && C !== Distribution; C = Object.getPrototypeOf(C)) {
      const fn = argConstraintTable.get(C as abstract new (...args: never[]) => Distribution);
      if (fn) return fn(this);
    }
    return {};
  }

  /** Whether {@link enumerateSupport} is available (the finite discrete families). */
  get hasEnumerateSupport(): boolean {
    return false;
  }

  /**
   * Every value of the support, as PyTorch's `enumerate_support`: shape
   * `[n, 1, ..., 1]` (one 1 per batch dim) plus the event shape, or with
   * `expand` (the default) `[n, ...batchShape]` plus the event shape.
   * Only where {@link hasEnumerateSupport} is true.
   */
  enumerateSupport(_options: EnumerateSupportOptions = {}): Tensor {
    throw new TypeError(`${this.name}.enumerateSupport: not implemented for ${this.name}`);
  }

  /** The support of the distribution (what `logProb` accepts). */
  abstract get support(): Constraint;

  /** `sampleShape + batchShape + eventShape`. */
  extendedShape(sampleShape: readonly number[] = []): number[] {
    return [...sampleShape, ...this.batchShape, ...this.eventShape];
  }

  /** Draws of shape `sampleShape + batchShape + eventShape`, without gradient. */
  sample(sampleShape: number[] = []): Tensor {
    if (this.hasRsample) return noGrad(() => this.rsample(sampleShape));
    throw new TypeError(`${this.name}.sample: not implemented`);
  }

  /**
   * Reparameterized draws (gradients flow to the parameters), for the
   * distributions whose {@link hasRsample} is true.
   */
  rsample(_sampleShape: number[] = []): Tensor {
    throw new TypeError(`${this.name}.rsample: ${this.name} does not support rsample`);
  }

  /** The log of the density (or mass) at `value`. */
  abstract logProb(value: Tensor): Tensor;

  /** The cumulative distribution function at `value`. */
  cdf(_value: Tensor): Tensor {
    throw new TypeError(`${this.name}.cdf: not implemented for ${this.name}`);
  }

  /** The inverse cumulative distribution function at `value`. */
  icdf(_value: Tensor): Tensor {
    throw new TypeError(`${this.name}.icdf: not implemented for ${this.name}`);
  }

  /** The entropy, of shape `batchShape`. */
  entropy(): Tensor {
    throw new TypeError(`${this.name}.entropy: not implemented for ${this.name}`);
  }

  /** The mean. */
  abstract get mean(): Tensor;

  /** The variance. */
  abstract get variance(): Tensor;

  /**
   * The mode (a most probable value), of shape `batchShape + eventShape`;
   * a TypeError for the families PyTorch defines none for.
   */
  get mode(): Tensor {
    throw new TypeError(`${this.name}.mode: not implemented for ${this.name}`);
  }

  /** The standard deviation. */
  get stddev(): Tensor {
    return this.variance.sqrt();
  }

  /**
   * `_validate_sample`: `value` must be a float tensor of this
   * distribution's dtype and device whose shape broadcasts with
   * `batchShape + eventShape`, and lie in the support.
   */
  protected validateSample(op: string, value: Tensor, like: Tensor): void {
    if (!(value instanceof Tensor)) {
      throw new TypeError(`${this.name}.${op}: value must be a Tensor, got ${typeof value}`);
    }
    if (value.device !== like.device) {
      throw new TypeError(
        `${this.name}.${op}: value is on ${value.device}, the distribution on ${like.device}`,
      );
    }
    if (!this.validateArgs) return;
    const eventDims = this.eventShape.length;
    const shape = value.shape;
    if (
      shape.length < eventDims || !sameShape(shape.slice(shape.length - eventDims), this.eventShape)
    ) {
      throw new RangeError(
        `${this.name}.${op}: the rightmost dims of value (shape ${
          formatShape(shape)
        }) must equal the event shape ${formatShape(this.eventShape)}`,
      );
    }
    try {
      broadcastShapes(shape, this.extendedShape(), op);
    } catch {
      throw new RangeError(
        `${this.name}.${op}: value shape ${
          formatShape(shape)
        } does not broadcast with batch shape ${formatShape(this.batchShape)} and event shape ${
          formatShape(this.eventShape)
        }`,
      );
    }
    const support = this.support;
    checkMaskLater(
      noGrad(() => support.check(value)),
      value,
      (i, v) =>
        `${this.name}.${op}: value must be within the support (${support.name}), got ${v} at index ${i}`,
    );
  }

  /**
   * A repr like PyTorch's for parameters of more than one element (the name
   * and each parameter's size); a one-element parameter shows its size too,
   * where PyTorch prints its value, as reading it would need the device.
   */
  toString(): string {
    const parts = Object.entries(this.params()).map(([k, t]) =>
      `${k}: torch.Size([${t.shape.join(", ")}])`
    );
    return `${this.name}(${parts.join(", ")})`;
  }

  /** The parameters, by PyTorch's names, for {@link toString}. */
  protected abstract params(): Record<string, Tensor>;
}
