/**
 * `torch.distributions.transforms`: invertible maps with the log of their
 * Jacobian's absolute determinant, their domain and codomain
 * constraints, shape rules and PyTorch's one-entry cache (so that the
 * inverse of a value just drawn is the value it came from, exactly).
 * @module
 */

import { Tensor } from "../tensor.ts";
import { arange, cat, full, stack, tensor } from "../ops/mod.ts";
import { broadcastShapes, formatShape } from "../shape.ts";
import { forwardScope } from "../storage.ts";
import { type Constraint, Distribution } from "./distribution.ts";
import { eps, softplus, sumRightmost } from "./util.ts";
import { constraints, eventDimOf } from "./constraints.ts";

/** Options every transform takes. */
export interface TransformOptions {
  /** 0 (no cache, default) or 1: remember the last `(x, y)` pair, as PyTorch's `cache_size`. */
  cacheSize?: number;
}

/** The smallest normal number of `x`'s dtype (`torch.finfo(dtype).tiny`). */
function tiny(x: Tensor): number {
  return x.dtype === "float64" ? 2.2250738585072014e-308 : 1.1754943508222875e-38;
}

/** `sigmoid(x)` kept in `[tiny, 1 - eps]` (`_clipped_sigmoid`). */
function clippedSigmoid(x: Tensor): Tensor {
  return x.sigmoid().clamp(tiny(x), 1 - eps(x.dtype));
}

function checkCacheSize(op: string, cacheSize: number): 0 | 1 {
  if (cacheSize !== 0 && cacheSize !== 1) {
    throw new RangeError(`${op}: cacheSize must be 0 or 1, got ${cacheSize}`);
  }
  return cacheSize;
}

function checkTensor(op: string, what: string, x: unknown): asserts x is Tensor {
  if (!(x instanceof Tensor)) {
    throw new TypeError(`${op}: ${what} must be a Tensor, got ${typeof x}`);
  }
}

/**
 * The base of every transform, as `torch.distributions.transforms.Transform`:
 * `call(x)` maps forward (PyTorch's `t(x)`), `inv` is the inverse
 * transform (`t.inv(y)` is `t.inv.call(y)`), `logAbsDetJacobian(x, y)` is
 * `log |dy/dx|` summed over the event dims.
 */
export abstract class Transform {
  /** 0 or 1 (see {@link TransformOptions.cacheSize}). */
  protected cacheSize: 0 | 1;
  /** The last `(x, y)` pair, with `cacheSize` 1. */
  protected cached: [Tensor | undefined, Tensor | undefined] = [undefined, undefined];
  /** The inverse once made, so that `t.inv.inv === t`. */
  protected inverseTransform: Transform | undefined;

  /** With `options.cacheSize` (0 or 1). */
  constructor(options: TransformOptions = {}) {
    this.cacheSize = checkCacheSize(this.constructor.name, options.cacheSize ?? 0);
  }

  /** The constraint inputs satisfy. */
  abstract get domain(): Constraint;
  /** The constraint outputs satisfy (inputs of the inverse). */
  abstract get codomain(): Constraint;

  /** Whether `inv.call(call(x))` is `x` (false: a pseudo-inverse only). */
  get bijective(): boolean {
    return false;
  }

  /** +1 or -1: whether a univariate bijection increases or decreases. */
  get sign(): number | Tensor {
    throw new TypeError(`${this.name}.sign: not implemented for ${this.name}`);
  }

  /** The transform's name in messages and reprs (its class name). */
  get name(): string {
    return this.constructor.name;
  }

  /** The event dims (domain's and codomain's, which must agree). */
  get eventDim(): number {
    const [a, b] = [eventDimOf(this.domain), eventDimOf(this.codomain)];
    if (a !== b) {
      throw new TypeError(
        `${this.name}.eventDim: domain and codomain have ${a} and ${b} event dims; use domain or codomain`,
      );
    }
    return a;
  }

  /** The inverse transform (`t.inv.inv === t`). */
  get inv(): Transform {
    this.inverseTransform ??= new InverseTransform(this);
    return this.inverseTransform;
  }

  /** This transform with `cacheSize` (itself when it already has it). */
  withCache(cacheSize = 1): Transform {
    checkCacheSize(`${this.name}.withCache`, cacheSize);
    if (cacheSize === this.cacheSize) return this;
    const t = Object.assign(Object.create(Object.getPrototypeOf(this)), this) as Transform;
    t.cacheSize = cacheSize as 0 | 1;
    t.cached = [undefined, undefined];
    t.inverseTransform = undefined;
    return t;
  }

  /** `y = t(x)` (the cached `y` when `x` is the last input). */
  call(x: Tensor): Tensor {
    checkTensor(this.name, "x", x);
    if (this.cacheSize === 0) return this.forward(x);
    const [xOld, yOld] = this.cached;
    if (x === xOld) return yOld!;
    const y = this.forward(x);
    this.cached = [x, y];
    return y;
  }

  /** `x = t⁻¹(y)` (the cached `x` when `y` is the last output). */
  inverseCall(y: Tensor): Tensor {
    checkTensor(`${this.name}.inv`, "y", y);
    if (this.cacheSize === 0) return this.inverse(y);
    const [xOld, yOld] = this.cached;
    if (y === yOld) return xOld!;
    const x = this.inverse(y);
    this.cached = [x, y];
    return x;
  }

  /** The forward map, uncached. */
  protected forward(_x: Tensor): Tensor {
    throw new TypeError(`${this.name}: the forward map is not implemented`);
  }

  /** The inverse map, uncached. */
  protected inverse(_y: Tensor): Tensor {
    throw new TypeError(`${this.name}.inv: the inverse map is not implemented`);
  }

  /** `log |dy/dx|` at `x` and `y = t(x)`, summed over the event dims. */
  logAbsDetJacobian(_x: Tensor, _y: Tensor): Tensor {
    throw new TypeError(`${this.name}.logAbsDetJacobian: not implemented for ${this.name}`);
  }

  /** The shape of `call(x)` for `x` of `shape`. */
  forwardShape(shape: readonly number[]): number[] {
    return [...shape];
  }

  /** The shape of `inv.call(y)` for `y` of `shape`. */
  inverseShape(shape: readonly number[]): number[] {
    return [...shape];
  }

  /** PyTorch's repr: `ExpTransform()`. */
  toString(): string {
    return `${this.name}()`;
  }
}

/** The inverse of a transform (what `Transform.inv` returns). */
class InverseTransform extends Transform {
  readonly #base: Transform;

  constructor(base: Transform) {
    super({ cacheSize: base["cacheSize"] });
    this.#base = base;
    this.inverseTransform = base;
  }
  override get name(): string {
    return "_InverseTransform";
  }
  get domain(): Constraint {
    return this.#base.codomain;
  }
  get codomain(): Constraint {
    return this.#base.domain;
  }
  override get bijective(): boolean {
    return this.#base.bijective;
  }
  override get sign(): number | Tensor {
    return this.#base.sign;
  }
  override withCache(cacheSize = 1): Transform {
    return this.#base.withCache(cacheSize).inv;
  }
  override call(x: Tensor): Tensor {
    return this.#base.inverseCall(x);
  }
  override inverseCall(y: Tensor): Tensor {
    return this.#base.call(y);
  }
  override logAbsDetJacobian(x: Tensor, y: Tensor): Tensor {
    return this.#base.logAbsDetJacobian(y, x).neg();
  }
  override forwardShape(shape: readonly number[]): number[] {
    return this.#base.inverseShape(shape);
  }
  override inverseShape(shape: readonly number[]): number[] {
    return this.#base.forwardShape(shape);
  }
  override toString(): string {
    return `_InverseTransform(${this.#base})`;
  }
}

/**
 * Transforms applied in order, as `ComposeTransform`; its Jacobian term
 * sums the parts', each summed over the event dims the chain adds.
 */
export class ComposeTransform extends Transform {
  /** The transforms, first applied first. */
  readonly parts: Transform[];

  /** `parts` applied in order (with `cacheSize` 1 each part caches). */
  constructor(parts: readonly Transform[], options: TransformOptions = {}) {
    super(options);
    parts.forEach((p, i) => {
      if (!(p instanceof Transform)) {
        throw new TypeError(`ComposeTransform: parts[${i}] must be a Transform, got ${typeof p}`);
      }
    });
    this.parts = this.cacheSize ? parts.map((p) => p.withCache(this.cacheSize)) : [...parts];
  }
  /** The first part's domain, widened to the event dims the chain needs. */
  get domain(): Constraint {
    if (this.parts.length === 0) return constraints.real;
    const domain = this.parts[0].domain;
    let ed = eventDimOf(this.parts[this.parts.length - 1].codomain);
    for (const part of [...this.parts].reverse()) {
      ed += eventDimOf(part.domain) - eventDimOf(part.codomain);
      ed = Math.max(ed, eventDimOf(part.domain));
    }
    const own = eventDimOf(domain);
    return ed > own ? constraints.independent(domain, ed - own) : domain;
  }
  /** The last part's codomain, widened to the event dims the chain needs. */
  get codomain(): Constraint {
    if (this.parts.length === 0) return constraints.real;
    const codomain = this.parts[this.parts.length - 1].codomain;
    let ed = eventDimOf(this.parts[0].domain);
    for (const part of this.parts) {
      ed += eventDimOf(part.codomain) - eventDimOf(part.domain);
      ed = Math.max(ed, eventDimOf(part.codomain));
    }
    const own = eventDimOf(codomain);
    return ed > own ? constraints.independent(codomain, ed - own) : codomain;
  }
  /** Whether every part is. */
  override get bijective(): boolean {
    return this.parts.every((p) => p.bijective);
  }
  /** The product of the parts' signs. */
  override get sign(): number | Tensor {
    let s: number | Tensor = 1;
    for (const p of this.parts) {
      const ps = p.sign;
      s = mulSign(s, ps);
    }
    return s;
  }
  /** The parts' inverses in reverse order. */
  override get inv(): Transform {
    if (!this.inverseTransform) {
      const inv = new ComposeTransform(this.parts.map((p) => p.inv).reverse());
      inv.inverseTransform = this;
      this.inverseTransform = inv;
    }
    return this.inverseTransform;
  }
  /** The same parts with `cacheSize`. */
  override withCache(cacheSize = 1): Transform {
    if (cacheSize === this.cacheSize) return this;
    return new ComposeTransform(this.parts, { cacheSize });
  }
  /** `y = t(x)`, through each part in order. */
  override call(x: Tensor): Tensor {
    checkTensor(this.name, "x", x);
    for (const p of this.parts) x = p.call(x);
    return x;
  }
  /** `x = t⁻¹(y)`, through the inverses in reverse order. */
  override inverseCall(y: Tensor): Tensor {
    return this.inv.call(y);
  }
  /** The parts' terms at the intermediate values (free when the parts cache them). */
  override logAbsDetJacobian(x: Tensor, y: Tensor): Tensor {
    if (this.parts.length === 0) return x.mul(0);
    const xs = [x];
    for (const p of this.parts.slice(0, -1)) xs.push(p.call(xs[xs.length - 1]));
    xs.push(y);
    let ed = eventDimOf(this.domain);
    let result: Tensor | undefined;
    this.parts.forEach((p, i) => {
      const term = sumRightmost(p.logAbsDetJacobian(xs[i], xs[i + 1]), ed - eventDimOf(p.domain));
      ed += eventDimOf(p.codomain) - eventDimOf(p.domain);
      result = result ? result.add(term) : term;
    });
    return result!;
  }
  /** The shape of outputs for inputs of `shape`. */
  override forwardShape(shape: readonly number[]): number[] {
    let s = [...shape];
    for (const p of this.parts) s = p.forwardShape(s);
    return s;
  }
  /** The shape of inputs for outputs of `shape`. */
  override inverseShape(shape: readonly number[]): number[] {
    let s = [...shape];
    for (const p of [...this.parts].reverse()) s = p.inverseShape(s);
    return s;
  }
  /** PyTorch's repr: the parts on their own lines. */
  override toString(): string {
    return `ComposeTransform(\n    ${this.parts.map(String).join(",\n    ")}\n)`;
  }
}

/**
 * `y = eˣ`, as `ExpTransform`.
 *
 * @example
 * ```ts
 * import { distributions, tensor } from "@multigrad/core";
 * const t = new distributions.ExpTransform();
 * const y = t.call(tensor([0, 1])); // [1, e]
 * const x = t.inv.call(y); // [0, 1]
 * ```
 */
export class ExpTransform extends Transform {
  /** The real line. */
  get domain(): Constraint {
    return constraints.real;
  }
  /** `y > 0`. */
  get codomain(): Constraint {
    return constraints.positive;
  }
  /** Whether this transform is invertible (see {@link Transform.bijective}). */
  override get bijective(): boolean {
    return true;
  }
  /** +1: increasing (see {@link Transform.sign}). */
  override get sign(): number {
    return 1;
  }
  /** The forward map. */
  protected override forward(x: Tensor): Tensor {
    return x.exp();
  }
  /** The inverse map. */
  protected override inverse(y: Tensor): Tensor {
    return y.log();
  }
  /** `x`. */
  override logAbsDetJacobian(x: Tensor, _y: Tensor): Tensor {
    return x;
  }
}

/** A transform parameter: a number or a tensor. */
type Coefficient = number | Tensor;

function shapeOf(c: Coefficient): number[] {
  return c instanceof Tensor ? [...c.shape] : [];
}

/** `y = xᵉ` on the positive numbers, as `PowerTransform`. */
export class PowerTransform extends Transform {
  /** The exponent. */
  readonly exponent: Coefficient;

  /** `exponent`, a number or a tensor broadcast with the input. */
  constructor(exponent: Coefficient, options: TransformOptions = {}) {
    super(options);
    if (typeof exponent !== "number" && !(exponent instanceof Tensor)) {
      throw new TypeError(
        `PowerTransform: exponent must be a number or a Tensor, got ${typeof exponent}`,
      );
    }
    this.exponent = exponent;
  }
  /** `x > 0`. */
  get domain(): Constraint {
    return constraints.positive;
  }
  /** `y > 0`. */
  get codomain(): Constraint {
    return constraints.positive;
  }
  /** Whether this transform is invertible (see {@link Transform.bijective}). */
  override get bijective(): boolean {
    return true;
  }
  /** +1, as PyTorch 1.13 (whatever the exponent's sign). */
  override get sign(): number {
    return 1;
  }
  /** The forward map. */
  protected override forward(x: Tensor): Tensor {
    return x.pow(this.exponent);
  }
  /** The inverse map. */
  protected override inverse(y: Tensor): Tensor {
    const e = this.exponent;
    return y.pow(typeof e === "number" ? 1 / e : e.reciprocal());
  }
  /** `log |e·y/x|`. */
  override logAbsDetJacobian(x: Tensor, y: Tensor): Tensor {
    return forwardScope(() => y.mul(this.exponent).div(x).abs().log());
  }
  /** The shape of outputs for inputs of `shape`. */
  override forwardShape(shape: readonly number[]): number[] {
    return broadcastShapes(shape, shapeOf(this.exponent), "PowerTransform.forwardShape");
  }
  /** The shape of inputs for outputs of `shape`. */
  override inverseShape(shape: readonly number[]): number[] {
    return broadcastShapes(shape, shapeOf(this.exponent), "PowerTransform.inverseShape");
  }
}

/** `y = σ(x)`, kept in `[tiny, 1 - eps]`, as `SigmoidTransform`. */
export class SigmoidTransform extends Transform {
  /** The real line. */
  get domain(): Constraint {
    return constraints.real;
  }
  /** `0 <= y <= 1`. */
  get codomain(): Constraint {
    return constraints.unitInterval;
  }
  /** Whether this transform is invertible (see {@link Transform.bijective}). */
  override get bijective(): boolean {
    return true;
  }
  /** +1: increasing (see {@link Transform.sign}). */
  override get sign(): number {
    return 1;
  }
  /** The forward map. */
  protected override forward(x: Tensor): Tensor {
    return forwardScope(() => clippedSigmoid(x));
  }
  /** `logit(y)` of `y` clamped to `[tiny, 1 - eps]`. */
  protected override inverse(y: Tensor): Tensor {
    return forwardScope(() => {
      const c = y.clamp(tiny(y), 1 - eps(y.dtype));
      return c.log().sub(c.neg().log1p());
    });
  }
  /** `-softplus(-x) - softplus(x)`. */
  override logAbsDetJacobian(x: Tensor, _y: Tensor): Tensor {
    return forwardScope(() => softplus(x.neg()).neg().sub(softplus(x)));
  }
}

/** `y = log(1 + eˣ)`, as `SoftplusTransform`. */
export class SoftplusTransform extends Transform {
  /** The real line. */
  get domain(): Constraint {
    return constraints.real;
  }
  /** `y > 0`. */
  get codomain(): Constraint {
    return constraints.positive;
  }
  /** Whether this transform is invertible (see {@link Transform.bijective}). */
  override get bijective(): boolean {
    return true;
  }
  /** +1: increasing (see {@link Transform.sign}). */
  override get sign(): number {
    return 1;
  }
  /** The forward map. */
  protected override forward(x: Tensor): Tensor {
    return softplus(x);
  }
  /** `log(-expm1(-y)) + y`. */
  protected override inverse(y: Tensor): Tensor {
    return forwardScope(() => y.neg().expm1().neg().log().add(y));
  }
  /** `-softplus(-x)`. */
  override logAbsDetJacobian(x: Tensor, _y: Tensor): Tensor {
    return forwardScope(() => softplus(x.neg()).neg());
  }
}

/** `y = tanh(x)`, as `TanhTransform`. */
export class TanhTransform extends Transform {
  /** The real line. */
  get domain(): Constraint {
    return constraints.real;
  }
  /** `-1 <= y <= 1`. */
  get codomain(): Constraint {
    return constraints.interval(-1, 1);
  }
  /** Whether this transform is invertible (see {@link Transform.bijective}). */
  override get bijective(): boolean {
    return true;
  }
  /** +1: increasing (see {@link Transform.sign}). */
  override get sign(): number {
    return 1;
  }
  /** The forward map. */
  protected override forward(x: Tensor): Tensor {
    return x.tanh();
  }
  /** The inverse map. */
  protected override inverse(y: Tensor): Tensor {
    return y.atanh();
  }
  /** `2(log 2 - x - softplus(-2x))`, stable for large |x|. */
  override logAbsDetJacobian(x: Tensor, _y: Tensor): Tensor {
    return forwardScope(() => x.neg().sub(softplus(x.mul(-2))).add(Math.LN2).mul(2));
  }
}

/** `y = |x|` (not bijective: the inverse is the identity), as `AbsTransform`. */
export class AbsTransform extends Transform {
  /** The real line. */
  get domain(): Constraint {
    return constraints.real;
  }
  /** `y > 0` (PyTorch's `positive`). */
  get codomain(): Constraint {
    return constraints.positive;
  }
  /** The forward map. */
  protected override forward(x: Tensor): Tensor {
    return x.abs();
  }
  /** The inverse map. */
  protected override inverse(y: Tensor): Tensor {
    return y;
  }
}

/** Options of {@link AffineTransform}. */
export interface AffineTransformOptions extends TransformOptions {
  /** How many rightmost dims form one event (default 0). */
  eventDim?: number;
}

/** `y = loc + scale·x`, as `AffineTransform`. */
export class AffineTransform extends Transform {
  /** The shift. */
  readonly loc: Coefficient;
  /** The scale. */
  readonly scale: Coefficient;
  readonly #eventDim: number;

  /** `loc` and `scale` (numbers or tensors broadcast with the input). */
  constructor(loc: Coefficient, scale: Coefficient, options: AffineTransformOptions = {}) {
    super(options);
    for (const [k, v] of [["loc", loc], ["scale", scale]] as const) {
      if (typeof v !== "number" && !(v instanceof Tensor)) {
        throw new TypeError(`AffineTransform: ${k} must be a number or a Tensor, got ${typeof v}`);
      }
    }
    const ed = options.eventDim ?? 0;
    if (!Number.isInteger(ed) || ed < 0) {
      throw new RangeError(`AffineTransform: eventDim must be a nonnegative integer, got ${ed}`);
    }
    this.loc = loc;
    this.scale = scale;
    this.#eventDim = ed;
  }
  /** The event dims. */
  override get eventDim(): number {
    return this.#eventDim;
  }
  /** Real numbers over `eventDim` dims. */
  get domain(): Constraint {
    return this.#eventDim === 0
      ? constraints.real
      : constraints.independent(constraints.real, this.#eventDim);
  }
  /** Real numbers over `eventDim` dims. */
  get codomain(): Constraint {
    return this.domain;
  }
  /** Whether this transform is invertible (see {@link Transform.bijective}). */
  override get bijective(): boolean {
    return true;
  }
  /** The sign of `scale` (a tensor for a tensor scale). */
  override get sign(): number | Tensor {
    const s = this.scale;
    return typeof s === "number" ? Math.sign(s) : s.sign();
  }
  /** The same transform with `cacheSize` (itself when it already has it). */
  override withCache(cacheSize = 1): Transform {
    if (cacheSize === this.cacheSize) return this;
    return new AffineTransform(this.loc, this.scale, { eventDim: this.#eventDim, cacheSize });
  }
  /** The forward map. */
  protected override forward(x: Tensor): Tensor {
    return x.mul(this.scale).add(this.loc);
  }
  /** The inverse map. */
  protected override inverse(y: Tensor): Tensor {
    return y.sub(this.loc).div(this.scale);
  }
  /** `log |scale|`, summed over the event dims, of the input's batch shape. */
  override logAbsDetJacobian(x: Tensor, _y: Tensor): Tensor {
    return forwardScope(() => {
      const s = this.scale;
      let result = typeof s === "number"
        ? full([...x.shape], Math.log(Math.abs(s)), { dtype: x.dtype, device: x.device })
        : s.abs().log();
      let shape = [...x.shape];
      if (this.#eventDim) {
        const keep = result.shape.slice(0, result.ndim - this.#eventDim);
        result = result.reshape([...keep, -1]).sum(-1);
        shape = shape.slice(0, shape.length - this.#eventDim);
      }
      return result.expand(shape);
    });
  }
  /** The shape of outputs for inputs of `shape`. */
  override forwardShape(shape: readonly number[]): number[] {
    return broadcastShapes(
      broadcastShapes(shape, shapeOf(this.loc), "AffineTransform.forwardShape"),
      shapeOf(this.scale),
      "AffineTransform.forwardShape",
    );
  }
  /** The shape of inputs for outputs of `shape`. */
  override inverseShape(shape: readonly number[]): number[] {
    return this.forwardShape(shape);
  }
}

function checkVector(op: string, shape: readonly number[]): void {
  if (shape.length < 1) throw new RangeError(`${op}: too few dimensions on input (shape [])`);
}

/**
 * `y = softmax(x)` over the last dim (not bijective: the inverse is `log y`),
 * as `SoftmaxTransform`.
 */
export class SoftmaxTransform extends Transform {
  /** Real vectors. */
  get domain(): Constraint {
    return constraints.realVector;
  }
  /** The simplex. */
  get codomain(): Constraint {
    return constraints.simplex;
  }
  /** The forward map. */
  protected override forward(x: Tensor): Tensor {
    checkVector("SoftmaxTransform", x.shape);
    return forwardScope(() => {
      const p = x.sub(x.amax(-1, true).detach()).exp();
      return p.div(p.sum(-1, true));
    });
  }
  /** The inverse map. */
  protected override inverse(y: Tensor): Tensor {
    return y.log();
  }
  /** The shape of outputs for inputs of `shape`. */
  override forwardShape(shape: readonly number[]): number[] {
    checkVector("SoftmaxTransform.forwardShape", shape);
    return [...shape];
  }
  /** The shape of inputs for outputs of `shape`. */
  override inverseShape(shape: readonly number[]): number[] {
    checkVector("SoftmaxTransform.inverseShape", shape);
    return [...shape];
  }
}

/** `[K, K-1, ..., 1]` like `x` (the stick-breaking offsets). */
function offsets(k: number, like: Tensor): Tensor {
  return arange(k, 0, -1, { dtype: like.dtype, device: like.device });
}

/**
 * Real vectors of length K-1 onto the K-simplex by stick breaking, as
 * `StickBreakingTransform`.
 */
export class StickBreakingTransform extends Transform {
  /** Real vectors. */
  get domain(): Constraint {
    return constraints.realVector;
  }
  /** The simplex. */
  get codomain(): Constraint {
    return constraints.simplex;
  }
  /** Whether this transform is invertible (see {@link Transform.bijective}). */
  override get bijective(): boolean {
    return true;
  }
  /** The forward map. */
  protected override forward(x: Tensor): Tensor {
    checkVector("StickBreakingTransform", x.shape);
    return forwardScope(() => {
      const k = x.shape[x.ndim - 1];
      const z = clippedSigmoid(x.sub(offsets(k, x).log()));
      const zc = z.neg().add(1).cumprod(-1);
      const ones = full([...x.shape.slice(0, -1), 1], 1, { dtype: x.dtype, device: x.device });
      return cat([z, ones], -1).mul(cat([ones, zc], -1));
    });
  }
  /** The inverse map. */
  protected override inverse(y: Tensor): Tensor {
    checkVector("StickBreakingTransform.inv", y.shape);
    return forwardScope(() => {
      const k = y.shape[y.ndim - 1] - 1;
      const crop = y.narrow(-1, 0, k);
      const sf = crop.cumsum(-1).neg().add(1).clamp(tiny(y));
      return crop.log().sub(sf.log()).add(offsets(k, y).log());
    });
  }
  /** `Σ -x' + logσ(x') + log y_k` with `x' = x - log offset`. */
  override logAbsDetJacobian(x: Tensor, y: Tensor): Tensor {
    return forwardScope(() => {
      const k = x.shape[x.ndim - 1];
      const xs = x.sub(offsets(k, x).log());
      const logSigmoid = softplus(xs.neg()).neg();
      return xs.neg().add(logSigmoid).add(y.narrow(-1, 0, k).log()).sum(-1);
    });
  }
  /** The shape of outputs for inputs of `shape`. */
  override forwardShape(shape: readonly number[]): number[] {
    checkVector("StickBreakingTransform.forwardShape", shape);
    return [...shape.slice(0, -1), shape[shape.length - 1] + 1];
  }
  /** The shape of inputs for outputs of `shape`. */
  override inverseShape(shape: readonly number[]): number[] {
    checkVector("StickBreakingTransform.inverseShape", shape);
    return [...shape.slice(0, -1), shape[shape.length - 1] - 1];
  }
}

function checkMatrix(op: string, x: Tensor): void {
  if (x.ndim < 2 || x.shape[x.ndim - 1] !== x.shape[x.ndim - 2]) {
    throw new RangeError(`${op}: expected square matrices, got shape ${formatShape(x.shape)}`);
  }
}

/**
 * Unconstrained square matrices onto lower Cholesky factors (the strict
 * lower triangle kept, the diagonal exponentiated), as
 * `LowerCholeskyTransform`; not bijective (the upper triangle is dropped).
 */
export class LowerCholeskyTransform extends Transform {
  /** Real matrices. */
  get domain(): Constraint {
    return constraints.independent(constraints.real, 2);
  }
  /** Lower Cholesky factors. */
  get codomain(): Constraint {
    return constraints.lowerCholesky;
  }
  /** The forward map. */
  protected override forward(x: Tensor): Tensor {
    checkMatrix("LowerCholeskyTransform", x);
    return forwardScope(() => x.tril(-1).add(x.diagonal(0, -2, -1).exp().diagEmbed()));
  }
  /** The inverse map. */
  protected override inverse(y: Tensor): Tensor {
    checkMatrix("LowerCholeskyTransform.inv", y);
    return forwardScope(() => y.tril(-1).add(y.diagonal(0, -2, -1).log().diagEmbed()));
  }
}

/** Positions (row-major) of the entries below diagonal `diag` of an n×n matrix. */
function trilPositions(n: number, diag: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) if (j < i + diag + 1) out.push(i * n + j);
  return out;
}

/** `tril_matrix_to_vec`: the entries below diagonal `diag`, row by row. */
function trilToVec(m: Tensor, diag: number): Tensor {
  const n = m.shape[m.ndim - 1];
  const idx = tensor(trilPositions(n, diag), { dtype: "int32", device: m.device });
  return m.reshape([...m.shape.slice(0, -2), n * n]).indexSelect(-1, idx);
}

/** `vec_to_tril_matrix`: the entries placed below diagonal `diag`, zeros elsewhere. */
function vecToTril(v: Tensor, diag: number): Tensor {
  const k = v.shape[v.ndim - 1];
  const a = 1 + 2 * diag;
  const nf = (-a + Math.sqrt(a * a + 8 * k + 4 * Math.abs(diag) * (diag + 1))) / 2;
  const n = Math.round(nf);
  if (Math.abs(n - nf) > 1e-9) {
    throw new RangeError(`CorrCholeskyTransform: ${k} is not a number of lower-triangular entries`);
  }
  const positions = trilPositions(n, diag);
  const map = new Array(n * n).fill(k);
  positions.forEach((p, i) => map[p] = i);
  const zeros = full([...v.shape.slice(0, -1), 1], 0, { dtype: v.dtype, device: v.device });
  const idx = tensor(map, { dtype: "int32", device: v.device });
  return cat([v, zeros], -1).indexSelect(-1, idx).reshape([...v.shape.slice(0, -1), n, n]);
}

/**
 * Real vectors of length D(D-1)/2 onto Cholesky factors of D×D correlation
 * matrices (tanh to (-1, 1), then stick breaking row by row), as
 * `CorrCholeskyTransform`.
 */
export class CorrCholeskyTransform extends Transform {
  /** Real vectors. */
  get domain(): Constraint {
    return constraints.realVector;
  }
  /** Cholesky factors of correlation matrices. */
  get codomain(): Constraint {
    return constraints.corrCholesky;
  }
  /** Whether this transform is invertible (see {@link Transform.bijective}). */
  override get bijective(): boolean {
    return true;
  }
  /** The forward map. */
  protected override forward(x: Tensor): Tensor {
    checkVector("CorrCholeskyTransform", x.shape);
    return forwardScope(() => {
      const e = eps(x.dtype);
      const t = x.tanh().clamp(-1 + e, 1 - e);
      const r = vecToTril(t, -1);
      const n = r.shape[r.ndim - 1];
      const z1m = r.square().neg().add(1).sqrt().cumprod(-1);
      const eye = full([n], 1, { dtype: x.dtype, device: x.device }).diagEmbed();
      const ones = full([...z1m.shape.slice(0, -1), 1], 1, { dtype: x.dtype, device: x.device });
      return r.add(eye).mul(cat([ones, z1m.narrow(-1, 0, n - 1)], -1));
    });
  }
  /** The inverse map. */
  protected override inverse(y: Tensor): Tensor {
    checkMatrix("CorrCholeskyTransform.inv", y);
    return forwardScope(() => {
      const n = y.shape[y.ndim - 1];
      const c = y.square().cumsum(-1).neg().add(1);
      const ones = full([...c.shape.slice(0, -1), 1], 1, { dtype: y.dtype, device: y.device });
      const shifted = cat([ones, c.narrow(-1, 0, n - 1)], -1);
      const t = trilToVec(y, -1).div(trilToVec(shifted, -1).sqrt());
      return t.add(1).div(t.neg().add(1)).log().div(2);
    });
  }
  /** The stick-breaking and tanh terms, as PyTorch. */
  override logAbsDetJacobian(x: Tensor, y: Tensor): Tensor {
    return forwardScope(() => {
      const c = y.square().cumsum(-1).neg().add(1);
      const stick = trilToVec(c, -2).log().sum(-1).mul(0.5);
      const tanhTerm = x.add(softplus(x.mul(-2))).sub(Math.LN2).sum(-1).mul(-2);
      return stick.add(tanhTerm);
    });
  }
  /** The shape of outputs for inputs of `shape`. */
  override forwardShape(shape: readonly number[]): number[] {
    checkVector("CorrCholeskyTransform.forwardShape", shape);
    const k = shape[shape.length - 1];
    const d = Math.round(Math.sqrt(0.25 + 2 * k) + 0.5);
    if ((d * (d - 1)) / 2 !== k) {
      throw new RangeError(
        `CorrCholeskyTransform.forwardShape: ${k} is not a number of lower-triangular entries`,
      );
    }
    return [...shape.slice(0, -1), d, d];
  }
  /** The shape of inputs for outputs of `shape`. */
  override inverseShape(shape: readonly number[]): number[] {
    if (shape.length < 2 || shape[shape.length - 1] !== shape[shape.length - 2]) {
      throw new RangeError(
        `CorrCholeskyTransform.inverseShape: expected square matrices, got ${formatShape(shape)}`,
      );
    }
    const d = shape[shape.length - 1];
    return [...shape.slice(0, -2), (d * (d - 1)) / 2];
  }
}

/** The product of a shape. */
function numel(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** The rightmost `inShape` dims reshaped to `outShape`, as `ReshapeTransform`. */
export class ReshapeTransform extends Transform {
  /** The event shape of inputs. */
  readonly inShape: number[];
  /** The event shape of outputs. */
  readonly outShape: number[];

  /** Both shapes must have the same number of elements. */
  constructor(
    inShape: readonly number[],
    outShape: readonly number[],
    options: TransformOptions = {},
  ) {
    super(options);
    if (numel(inShape) !== numel(outShape)) {
      throw new RangeError(
        `ReshapeTransform: inShape ${formatShape(inShape)} and outShape ${
          formatShape(outShape)
        } have different numbers of elements`,
      );
    }
    this.inShape = [...inShape];
    this.outShape = [...outShape];
  }
  /** Real numbers over `inShape`. */
  get domain(): Constraint {
    return constraints.independent(constraints.real, this.inShape.length);
  }
  /** Real numbers over `outShape`. */
  get codomain(): Constraint {
    return constraints.independent(constraints.real, this.outShape.length);
  }
  /** Whether this transform is invertible (see {@link Transform.bijective}). */
  override get bijective(): boolean {
    return true;
  }
  /** The forward map. */
  protected override forward(x: Tensor): Tensor {
    return x.reshape(this.forwardShape(x.shape));
  }
  /** The inverse map. */
  protected override inverse(y: Tensor): Tensor {
    return y.reshape(this.inverseShape(y.shape));
  }
  /** Zeros of the batch shape. */
  override logAbsDetJacobian(x: Tensor, _y: Tensor): Tensor {
    const batch = x.shape.slice(0, x.ndim - this.inShape.length);
    return full(batch, 0, { dtype: x.dtype, device: x.device });
  }
  /** The shape of outputs for inputs of `shape`. */
  override forwardShape(shape: readonly number[]): number[] {
    return [...cut("ReshapeTransform.forwardShape", shape, this.inShape), ...this.outShape];
  }
  /** The shape of inputs for outputs of `shape`. */
  override inverseShape(shape: readonly number[]): number[] {
    return [...cut("ReshapeTransform.inverseShape", shape, this.outShape), ...this.inShape];
  }
}

/** The dims of `shape` before its `event` suffix, or a RangeError naming both. */
function cut(op: string, shape: readonly number[], event: readonly number[]): number[] {
  const k = shape.length - event.length;
  if (k < 0 || shape.slice(k).some((d, i) => d !== event[i])) {
    throw new RangeError(
      `${op}: shape mismatch: expected a shape ending in ${formatShape(event)}, got ${
        formatShape(shape)
      }`,
    );
  }
  return shape.slice(0, k);
}

/**
 * `base` with `reinterpretedBatchNdims` more rightmost dims in its event
 * (its Jacobian term summed over them), as `IndependentTransform`.
 */
export class IndependentTransform extends Transform {
  /** The wrapped transform. */
  readonly baseTransform: Transform;
  /** How many more dims the event spans. */
  readonly reinterpretedBatchNdims: number;

  /** `reinterpretedBatchNdims` a nonnegative integer. */
  constructor(base: Transform, reinterpretedBatchNdims: number, options: TransformOptions = {}) {
    super(options);
    if (!(base instanceof Transform)) {
      throw new TypeError(`IndependentTransform: base must be a Transform, got ${typeof base}`);
    }
    if (!Number.isInteger(reinterpretedBatchNdims) || reinterpretedBatchNdims < 0) {
      throw new RangeError(
        `IndependentTransform: reinterpretedBatchNdims must be a nonnegative integer, got ${reinterpretedBatchNdims}`,
      );
    }
    this.baseTransform = base.withCache(this.cacheSize);
    this.reinterpretedBatchNdims = reinterpretedBatchNdims;
  }
  /** The base's domain over the extra dims. */
  get domain(): Constraint {
    return constraints.independent(this.baseTransform.domain, this.reinterpretedBatchNdims);
  }
  /** The base's codomain over the extra dims. */
  get codomain(): Constraint {
    return constraints.independent(this.baseTransform.codomain, this.reinterpretedBatchNdims);
  }
  /** Whether this transform is invertible (see {@link Transform.bijective}). */
  override get bijective(): boolean {
    return this.baseTransform.bijective;
  }
  /** The base's sign. */
  override get sign(): number | Tensor {
    return this.baseTransform.sign;
  }
  /** The same transform with `cacheSize` (itself when it already has it). */
  override withCache(cacheSize = 1): Transform {
    if (cacheSize === this.cacheSize) return this;
    return new IndependentTransform(this.baseTransform, this.reinterpretedBatchNdims, {
      cacheSize,
    });
  }
  /** The forward map. */
  protected override forward(x: Tensor): Tensor {
    this.checkDims(x, eventDimOf(this.domain));
    return this.baseTransform.call(x);
  }
  /** The inverse map. */
  protected override inverse(y: Tensor): Tensor {
    this.checkDims(y, eventDimOf(this.codomain));
    return this.baseTransform.inv.call(y);
  }
  /** `log |dy/dx|`, summed over the event dims. */
  override logAbsDetJacobian(x: Tensor, y: Tensor): Tensor {
    return sumRightmost(this.baseTransform.logAbsDetJacobian(x, y), this.reinterpretedBatchNdims);
  }
  /** The shape of outputs for inputs of `shape`. */
  override forwardShape(shape: readonly number[]): number[] {
    return this.baseTransform.forwardShape(shape);
  }
  /** The shape of inputs for outputs of `shape`. */
  override inverseShape(shape: readonly number[]): number[] {
    return this.baseTransform.inverseShape(shape);
  }
  /** `IndependentTransform(ExpTransform(), 1)`. */
  override toString(): string {
    return `IndependentTransform(${this.baseTransform}, ${this.reinterpretedBatchNdims})`;
  }
  /** A RangeError unless `x` has at least the event dims. */
  private checkDims(x: Tensor, n: number): void {
    if (x.ndim < n) {
      throw new RangeError(
        `IndependentTransform: too few dimensions on input: shape ${
          formatShape(x.shape)
        }, event dims ${n}`,
      );
    }
  }
}

function normDim(op: string, dim: number, ndim: number): number {
  if (!Number.isInteger(dim) || dim < -ndim || dim >= ndim) {
    throw new RangeError(`${op}: dim ${dim} is out of range for a tensor of ${ndim} dims`);
  }
  return dim < 0 ? dim + ndim : dim;
}

function checkTransforms(op: string, tseq: readonly Transform[]): void {
  tseq.forEach((t, i) => {
    if (!(t instanceof Transform)) {
      throw new TypeError(`${op}: transforms[${i}] must be a Transform, got ${typeof t}`);
    }
  });
}

/**
 * `tseq[i]` on consecutive slices of `lengths[i]` along `dim` (lengths 1
 * each by default), as `CatTransform`.
 */
export class CatTransform extends Transform {
  /** The transforms, one per slice. */
  readonly transforms: Transform[];
  /** The slice lengths. */
  readonly lengths: number[];
  /** The dim sliced. */
  readonly dim: number;

  /** `tseq` and `lengths` of the same count. */
  constructor(
    tseq: readonly Transform[],
    dim = 0,
    lengths?: readonly number[],
    options: TransformOptions = {},
  ) {
    super(options);
    checkTransforms("CatTransform", tseq);
    this.transforms = this.cacheSize ? tseq.map((t) => t.withCache(this.cacheSize)) : [...tseq];
    this.lengths = lengths ? [...lengths] : tseq.map(() => 1);
    if (this.lengths.length !== this.transforms.length) {
      throw new RangeError(
        `CatTransform: ${this.transforms.length} transforms but ${this.lengths.length} lengths`,
      );
    }
    this.dim = dim;
  }
  /** The largest event dims of the parts. */
  override get eventDim(): number {
    return Math.max(...this.transforms.map((t) => t.eventDim));
  }
  /** The sum of the lengths. */
  get length(): number {
    return this.lengths.reduce((a, b) => a + b, 0);
  }
  /** Whether this transform is invertible (see {@link Transform.bijective}). */
  override get bijective(): boolean {
    return this.transforms.every((t) => t.bijective);
  }
  /** The parts' domains on their slices. */
  get domain(): Constraint {
    return constraints.cat(this.transforms.map((t) => t.domain), this.dim, this.lengths);
  }
  /** The parts' codomains on their slices. */
  get codomain(): Constraint {
    return constraints.cat(this.transforms.map((t) => t.codomain), this.dim, this.lengths);
  }
  /** The same transform with `cacheSize` (itself when it already has it). */
  override withCache(cacheSize = 1): Transform {
    if (cacheSize === this.cacheSize) return this;
    return new CatTransform(this.transforms, this.dim, this.lengths, { cacheSize });
  }
  /** The slices of `x` along `dim`, or a RangeError naming the size found. */
  private slices(x: Tensor, what: string): Tensor[] {
    const d = normDim(`CatTransform`, this.dim, x.ndim);
    if (x.shape[d] !== this.length) {
      throw new RangeError(
        `CatTransform: ${what} has size ${
          x.shape[d]
        } along dim ${this.dim}, expected ${this.length}`,
      );
    }
    let start = 0;
    return this.lengths.map((l) => {
      const s = x.narrow(d, start, l);
      start += l;
      return s;
    });
  }
  /** The forward map. */
  protected override forward(x: Tensor): Tensor {
    const xs = this.slices(x, "x");
    return cat(xs.map((s, i) => this.transforms[i].call(s)), this.dim);
  }
  /** The inverse map. */
  protected override inverse(y: Tensor): Tensor {
    const ys = this.slices(y, "y");
    return cat(ys.map((s, i) => this.transforms[i].inv.call(s)), this.dim);
  }
  /** `log |dy/dx|`, summed over the event dims. */
  override logAbsDetJacobian(x: Tensor, y: Tensor): Tensor {
    const [xs, ys] = [this.slices(x, "x"), this.slices(y, "y")];
    const ed = this.eventDim;
    const terms = this.transforms.map((t, i) =>
      sumRightmost(t.logAbsDetJacobian(xs[i], ys[i]), ed - t.eventDim)
    );
    let dim = this.dim;
    if (dim >= 0) dim -= x.ndim;
    dim += ed;
    if (dim < 0) return cat(terms, dim);
    return terms.reduce((a, b) => a.add(b));
  }
  /** PyTorch's (the default repr). */
  override toString(): string {
    return "CatTransform()";
  }
}

/** `tseq[i]` on the `i`-th slice along `dim`, as `StackTransform`. */
export class StackTransform extends Transform {
  /** The transforms, one per slice. */
  readonly transforms: Transform[];
  /** The dim sliced. */
  readonly dim: number;

  /** One transform per slice of `dim`. */
  constructor(tseq: readonly Transform[], dim = 0, options: TransformOptions = {}) {
    super(options);
    checkTransforms("StackTransform", tseq);
    this.transforms = this.cacheSize ? tseq.map((t) => t.withCache(this.cacheSize)) : [...tseq];
    this.dim = dim;
  }
  /** Whether this transform is invertible (see {@link Transform.bijective}). */
  override get bijective(): boolean {
    return this.transforms.every((t) => t.bijective);
  }
  /** The parts' domains on their slices. */
  get domain(): Constraint {
    return constraints.stack(this.transforms.map((t) => t.domain), this.dim);
  }
  /** The parts' codomains on their slices. */
  get codomain(): Constraint {
    return constraints.stack(this.transforms.map((t) => t.codomain), this.dim);
  }
  /** The same transform with `cacheSize` (itself when it already has it). */
  override withCache(cacheSize = 1): Transform {
    if (cacheSize === this.cacheSize) return this;
    return new StackTransform(this.transforms, this.dim, { cacheSize });
  }
  /** The slices of `x` along `dim`, or a RangeError naming the size found. */
  private slices(x: Tensor, what: string): [Tensor[], number] {
    const d = normDim("StackTransform", this.dim, x.ndim);
    if (x.shape[d] !== this.transforms.length) {
      throw new RangeError(
        `StackTransform: ${what} has size ${
          x.shape[d]
        } along dim ${this.dim}, expected ${this.transforms.length}`,
      );
    }
    return [this.transforms.map((_, i) => x.select(d, i)), d];
  }
  /** The forward map. */
  protected override forward(x: Tensor): Tensor {
    const [xs, d] = this.slices(x, "x");
    return stack(xs.map((s, i) => this.transforms[i].call(s)), d);
  }
  /** The inverse map. */
  protected override inverse(y: Tensor): Tensor {
    const [ys, d] = this.slices(y, "y");
    return stack(ys.map((s, i) => this.transforms[i].inv.call(s)), d);
  }
  /** `log |dy/dx|`, summed over the event dims. */
  override logAbsDetJacobian(x: Tensor, y: Tensor): Tensor {
    const [xs, d] = this.slices(x, "x");
    const [ys] = this.slices(y, "y");
    return stack(xs.map((s, i) => this.transforms[i].logAbsDetJacobian(s, ys[i])), d);
  }
  /** PyTorch's (the default repr). */
  override toString(): string {
    return "StackTransform()";
  }
}

/**
 * `y = F(x)` with `F` the cdf of a univariate `distribution` (its log
 * Jacobian is the log-density), as `CumulativeDistributionTransform`.
 */
export class CumulativeDistributionTransform extends Transform {
  /** The distribution whose cdf maps. */
  readonly distribution: Distribution;

  /** `distribution` must have `cdf`, and `icdf` for the inverse. */
  constructor(distribution: Distribution, options: TransformOptions = {}) {
    super(options);
    if (!(distribution instanceof Distribution)) {
      throw new TypeError(
        `CumulativeDistributionTransform: distribution must be a Distribution, got ${typeof distribution}`,
      );
    }
    this.distribution = distribution;
  }
  /** The distribution's support. */
  get domain(): Constraint {
    return this.distribution.support;
  }
  /** `0 <= y <= 1`. */
  get codomain(): Constraint {
    return constraints.unitInterval;
  }
  /** Whether this transform is invertible (see {@link Transform.bijective}). */
  override get bijective(): boolean {
    return true;
  }
  /** +1: increasing (see {@link Transform.sign}). */
  override get sign(): number {
    return 1;
  }
  /** The same transform with `cacheSize` (itself when it already has it). */
  override withCache(cacheSize = 1): Transform {
    if (cacheSize === this.cacheSize) return this;
    return new CumulativeDistributionTransform(this.distribution, { cacheSize });
  }
  /** The forward map. */
  protected override forward(x: Tensor): Tensor {
    return this.distribution.cdf(x);
  }
  /** The inverse map. */
  protected override inverse(y: Tensor): Tensor {
    return this.distribution.icdf(y);
  }
  /** The log-density at `x`. */
  override logAbsDetJacobian(x: Tensor, _y: Tensor): Tensor {
    return this.distribution.logProb(x);
  }
}

/** The identity (an empty {@link ComposeTransform}), as `identity_transform`. */
export const identityTransform: Transform = new ComposeTransform([]);

/** The product of two signs (numbers, or tensors for tensor coefficients). */
function mulSign(a: number | Tensor, b: number | Tensor): number | Tensor {
  if (typeof a === "number") return typeof b === "number" ? a * b : b.mul(a);
  return a.mul(b);
}
