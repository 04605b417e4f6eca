/**
 * The `Distribution` base class of `torch.distributions` and the helpers its
 * subclasses share: broadcasting parameters, deferred value checks, the
 * support check of `logProb`'s argument.
 * @module
 */

import { Tensor } from "../tensor.ts";
import { broadcastShapes, formatShape } from "../shape.ts";
import { checkLater } from "../ops/check.ts";
import { defaultDevice } from "../device.ts";
import { arange, cat, tensor } from "../ops/mod.ts";
import { type DType, getDefaultDtype } from "../dtype.ts";
import type { Device } from "../device.ts";
import { noGrad, record } from "../autograd.ts";
import { sameShape } from "../shape.ts";

/** What `validateArgs` defaults to (see {@link Distribution.setDefaultValidateArgs}). */
let validateByDefault = true;

/** The default of {@link DistributionOptions.validateArgs}: true unless set otherwise. */
export function defaultValidateArgs(): boolean {
  return validateByDefault;
}

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

/** The constraints PyTorch names (`constraints.real`, `.positive`, ...). */
export const constraints = {
  /** Any number except NaN (infinities included, as PyTorch). */
  real: {
    name: "real",
    check: (x: Tensor) => x.eq(x),
    holds: (x: number) => !Number.isNaN(x),
  } as Constraint,
  /** `x > 0`. */
  positive: {
    name: "x > 0",
    check: (x: Tensor) => x.gt(0),
    holds: (x: number) => x > 0,
  } as Constraint,
  /** `x >= 0`. */
  nonnegative: {
    name: "x >= 0",
    check: (x: Tensor) => x.ge(0),
    holds: (x: number) => x >= 0,
  } as Constraint,
  /** `0 <= x <= 1`. */
  unitInterval: {
    name: "0 <= x <= 1",
    check: (x: Tensor) => x.ge(0).mul(x.le(1)),
    holds: (x: number) => x >= 0 && x <= 1,
  } as Constraint,
  /** `0 or 1`. */
  boolean: {
    name: "x in {0, 1}",
    check: (x: Tensor) => x.eq(0).add(x.eq(1)),
    holds: (x: number) => x === 0 || x === 1,
  } as Constraint,
} as const;

/**
 * Checks on the device that `mask` (a 0/1 tensor) is all ones; otherwise
 * the next read on the device rejects with `message` given the flat index
 * and value (of `values`, broadcast to the mask's shape) of the first
 * failure. Nothing waits: the check rides the device's queue.
 */
export function checkMaskLater(
  mask: Tensor,
  values: Tensor,
  message: (index: number, value: number) => string,
): void {
  const n = mask.numel();
  if (n === 0) return;
  noGrad(() => {
    const bad = mask.eq(0).reshape([n]);
    // Earlier positions score higher, so the max picks the first failure.
    const positions = arange(n, 0, -1, { dtype: mask.dtype, device: mask.device });
    const score = bad.mul(positions);
    const first = score.max();
    const flat = values.to(mask.dtype).expand([...mask.shape]).reshape([n]);
    const value = flat.where(score.eq(first), 0).sum();
    checkLater(cat([first.reshape([1]), value.reshape([1])], 0), (host) => {
      if (!(host[0] > 0)) return null;
      return message(n - host[0], host[1]);
    });
  });
}

/**
 * Scalars made from number parameters, with their number: as PyTorch's 0-dim
 * cpu tensors join tensors on any device, a distribution whose parameters
 * were all numbers is remade from them where its partner lives (see
 * {@link Distribution.withNumbersOn}).
 */
const fromNumbers = new WeakMap<Tensor, number>();

/** Where number-only parameters go while {@link Distribution.withNumbersOn} remakes a distribution. */
let numbersDevice: Device | undefined;

/**
 * A number parameter as a scalar (the default dtype unless told) where number-only parameters go;
 * rounded as `torch.tensor` rounds (1e40 is inf in float32).
 */
export function numberParam(
  value: number,
  dtype: DType = getDefaultDtype(),
  device?: Device,
): Tensor {
  const t = tensor(value, { dtype, device: device ?? numbersDevice ?? defaultDevice() });
  fromNumbers.set(t, value);
  return t;
}

/** The common dtype and device of `params` (the default dtype on the default device for numbers only). */
function commonOf(op: string, params: Record<string, Param>): { dtype: DType; device: Device } {
  let found: Tensor | undefined;
  let foundName = "";
  for (const [name, p] of Object.entries(params)) {
    if (p instanceof Tensor) {
      if (p.dtype !== "float32" && p.dtype !== "float64") {
        throw new TypeError(
          `${op}: ${name} must be a float tensor or a number, got dtype ${p.dtype}`,
        );
      }
      if (!found) {
        found = p;
        foundName = name;
      } else if (p.dtype !== found.dtype) {
        throw new TypeError(
          `${op}: ${foundName} and ${name} must have the same dtype, got ${found.dtype} and ${p.dtype}`,
        );
      } else if (p.device !== found.device) {
        throw new TypeError(
          `${op}: ${foundName} and ${name} must be on the same device, got ${found.device} and ${p.device}`,
        );
      }
    } else if (typeof p !== "number") {
      throw new TypeError(`${op}: ${name} must be a Tensor or a number, got ${typeof p}`);
    }
  }
  return found
    ? { dtype: found.dtype, device: found.device }
    : { dtype: getDefaultDtype(), device: numbersDevice ?? defaultDevice() };
}

/**
 * `broadcast_all`: the parameters as tensors of one dtype and device,
 * expanded to their common shape.
 */
export function broadcastAll(op: string, params: Record<string, Param>): Tensor[] {
  const { dtype, device } = commonOf(op, params);
  const tensors = Object.values(params).map((p) =>
    p instanceof Tensor ? p : numberParam(p, dtype, device)
  );
  let shape: number[] = [];
  const names = Object.keys(params);
  tensors.forEach((t, i) => {
    try {
      shape = broadcastShapes(shape, t.shape, op);
    } catch {
      throw new RangeError(
        `${op}: the shapes of ${names.slice(0, i + 1).join(", ")} do not broadcast (${
          tensors.slice(0, i + 1).map((u) => formatShape(u.shape)).join(", ")
        })`,
      );
    }
  });
  return tensors.map((t) => sameShape(t.shape, shape) ? t : t.expand(shape));
}

/**
 * Checks `value` of parameter `name` against `constraint`: at once for a
 * number, on the device for a tensor.
 */
export function checkParam(
  op: string,
  name: string,
  raw: Param,
  value: Tensor,
  constraint: Constraint,
): void {
  if (typeof raw === "number") {
    if (!constraint.holds(raw)) {
      throw new RangeError(`${op}: ${name} must satisfy ${constraint.name}, got ${raw}`);
    }
    return;
  }
  checkMaskLater(
    noGrad(() => constraint.check(value)),
    value,
    (i, v) => `${op}: ${name} must satisfy ${constraint.name}, got ${v} at index ${i}`,
  );
}

/** Sums the rightmost `n` dims of `x` (`_sum_rightmost`). */
export function sumRightmost(x: Tensor, n: number): Tensor {
  if (n <= 0) return x;
  const dims = Array.from({ length: n }, (_, i) => -1 - i);
  return x.sum(dims);
}

/** Options of {@link Distribution.enumerateSupport}. */
export interface EnumerateSupportOptions {
  /** Expand the values over the batch shape (default true), else size-1 batch dims. */
  expand?: boolean;
}

/**
 * `to` as a target of `expand` from `from`, by `Tensor.expand`'s rule
 * (the dims of `from` align right; each equals its new size or is 1), or
 * a RangeError naming both shapes.
 */
export function checkExpand(op: string, from: readonly number[], to: readonly number[]): number[] {
  if (!Array.isArray(to) || to.some((n) => !Number.isInteger(n) || n < 0)) {
    throw new TypeError(
      `${op}: batchShape must be a list of nonnegative integers, got ${String(to)}`,
    );
  }
  const k = to.length - from.length;
  if (k < 0 || from.some((n, i) => n !== 1 && n !== to[k + i])) {
    throw new RangeError(
      `${op}: the batch shape ${formatShape(from)} cannot be expanded to ${
        formatShape(to)
      } (only size-1 dims grow, and new dims go in front)`,
    );
  }
  return [...to];
}

/**
 * The values `0 .. n-1` shaped for `enumerateSupport`: `[n, 1, ..., 1]`
 * (one 1 per batch dim) or, with `expand`, `[n, ...batchShape]`.
 */
export function enumerateValues(
  n: number,
  batchShape: readonly number[],
  like: { dtype: DType; device: Device },
  options: EnumerateSupportOptions = {},
): Tensor {
  const values = arange(0, n, 1, { dtype: like.dtype, device: like.device })
    .reshape([n, ...batchShape.map(() => 1)]);
  return (options?.expand ?? true) ? values.expand([n, ...batchShape]) : values;
}

/** The float epsilon of `dtype` (`torch.finfo(dtype).eps`). */
export function eps(dtype: DType): number {
  return dtype === "float64" ? 2.220446049250313e-16 : 1.1920928955078125e-7;
}

/** The most negative finite number of `dtype` (`torch.finfo(dtype).min`). */
export function finfoMin(dtype: DType): number {
  return dtype === "float64" ? -Number.MAX_VALUE : -3.4028234663852886e38;
}

/** `clamp_probs`: probabilities kept in [eps, 1 - eps]. */
export function clampProbs(p: Tensor): Tensor {
  const e = eps(p.dtype);
  return p.clamp(e, 1 - e);
}

/**
 * `softplus(x) = log(1 + eˣ)`, without overflow; the gradient is
 * `sigmoid(x)` everywhere (the composition's kink at 0 would give 1 there).
 */
export function softplus(x: Tensor): Tensor {
  const out = noGrad(() => x.abs().neg().exp().log1p().add(x.clamp(0)));
  return record("softplus", [x], out, ([g]) => [x.sigmoid().mul(g!)]);
}

/** The `argConstraints` of each family, by class (filled by `arg_constraints.ts`). */
const argConstraintTable = new Map<
  abstract new (...args: never[]) => Distribution,
  (d: Distribution) => Record<string, Constraint>
>();

/** Registers the `argConstraints` of the instances of `Kind` (and its subclasses, unless they register their own). */
export function registerArgConstraints<D extends Distribution>(
  Kind: abstract new (...args: never[]) => D,
  fn: (d: D) => Record<string, Constraint>,
): void {
  argConstraintTable.set(Kind, fn as (d: Distribution) => Record<string, Constraint>);
}

/** A shape as `[2, 3]`, for messages and reprs. */
export function shapeText(shape: readonly number[]): string {
  return formatShape(shape);
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

  constructor(
    batchShape: readonly number[],
    eventShape: readonly number[],
    validateArgs = validateByDefault,
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
    validateByDefault = value;
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
    const before = numbersDevice;
    numbersDevice = device;
    try {
      return this.remake(params.map((t) => fromNumbers.get(t)!));
    } finally {
      numbersDevice = before;
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
