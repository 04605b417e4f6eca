/**
 * The Tensor: a shape, a dtype and storage on one device, plus its place in
 * the autograd graph. Operations are methods here and live in `src/ops/`.
 * Nothing here awaits except reading values back.
 * @module
 */

import type { Node } from "./autograd.ts";
import * as ag from "./autograd.ts";
import type { BackwardOptions, TensorHook } from "./autograd.ts";
import { type Device, device as resolveDevice } from "./device.ts";
import { type DType, DTYPES, isFloat, type TypedArray } from "./dtype.ts";
import { formatShape, normalizeDim, numelOf, sameShape, type Shape } from "./shape.ts";
import { settleReleases, type Storage } from "./storage.ts";
import type * as elementwise from "./ops/elementwise.ts";
import type * as reduce from "./ops/reduce.ts";
import type * as view from "./ops/view.ts";
import type * as indexing from "./ops/indexing.ts";
import type * as linalg from "./ops/linalg.ts";
import type * as softmax from "./ops/softmax.ts";
import type * as transfer from "./ops/transfer.ts";
import type * as factory from "./ops/factory.ts";
import type * as inplace from "./ops/inplace.ts";
import type * as composite from "./ops_composite/mod.ts";
import type * as torchLinalg from "./linalg/torch_level.ts";
import type { TensorLike } from "./ops/util.ts";
import type { VarianceOptions } from "./ops/reduce.ts";

/**
 * The operations Tensor's methods call. The ops modules install them
 * (`src/ops/install.ts`, `src/ops_composite/install.ts`,
 * `src/linalg/torch_level.ts`), so that this file
 * imports no op: the ops depend on Tensor, never the reverse.
 */
export type TensorOps =
  & typeof elementwise
  & typeof reduce
  & typeof view
  & typeof indexing
  & Pick<typeof linalg, "matmul">
  & Pick<typeof softmax, "logSoftmax" | "softmax">
  & Pick<typeof transfer, "copyInto" | "toDevice">
  & Pick<typeof factory, "full">
  & Pick<typeof inplace, "add_" | "copy_" | "fill_" | "mul_" | "zero_">
  & typeof composite
  & Omit<typeof torchLinalg, "luUnpack">;

/** Stands in until the ops are installed: any method call says what is missing. */
const notInstalled = new Proxy({}, {
  get: (_target, name) => () => {
    throw new Error(
      `Tensor.${String(name)}: the tensor operations are not installed; import multigrad's mod.ts`,
    );
  },
}) as TensorOps;

let ops: TensorOps = notInstalled;

/** @internal Adds implementations of Tensor's methods (`src/ops/install.ts`, `src/ops_composite/`). */
export function installTensorOps(table: Partial<TensorOps>): void {
  ops = Object.assign(Object.create(ops), table);
}

/** Nested arrays of numbers as `toArray()` gives them. */
export type NestedNumbers = number | NestedNumbers[];

/** A multi-dimensional array on one device, with optional gradient tracking. */
export class Tensor {
  #storage: Storage;
  #shape: readonly number[];
  #requiresGrad = false;
  #grad: Tensor | null = null;
  #gradFn: Node | null = null;
  #outputIndex = 0;

  /** Wraps existing storage; use the factories (`tensor`, `zeros`, ...) instead. */
  constructor(storage: Storage, shape: Shape) {
    if (numelOf(shape) !== storage.numel) {
      throw new RangeError(
        `Tensor: shape ${formatShape(shape)} does not fit storage of ${storage.numel} elements`,
      );
    }
    this.#storage = storage;
    this.#shape = Object.freeze([...shape]);
  }

  /**
   * The storage (shared by reshaped views): internal.
   * @ignore
   */
  get storage(): Storage {
    return this.#storage;
  }
  /** Dimensions, e.g. `[16, 10]`. */
  get shape(): readonly number[] {
    return this.#shape;
  }
  /** Element type. */
  get dtype(): DType {
    return this.#storage.dtype;
  }
  /** Where the data lives. */
  get device(): Device {
    return this.#storage.device;
  }
  /** Number of dimensions. */
  get ndim(): number {
    return this.#shape.length;
  }
  /** Number of elements. */
  numel(): number {
    return this.#storage.numel;
  }
  /** The shape, or the size of one dim. */
  size(): readonly number[];
  /** The size of `dim` (negative counts from the end). */
  size(dim: number): number;
  size(dim?: number): number | readonly number[] {
    if (dim === undefined) return this.#shape;
    return this.#shape[normalizeDim(dim, this.ndim, "size")];
  }

  /** Whether gradients flow to this tensor. Settable on leaves only. */
  get requiresGrad(): boolean {
    return this.#requiresGrad;
  }
  set requiresGrad(value: boolean) {
    if (value && !isFloat(this.dtype)) {
      throw new TypeError(
        `requiresGrad: only floating-point tensors can require grad, got ${this.dtype}`,
      );
    }
    if (!value && this.#gradFn) {
      throw new Error("requiresGrad: cannot turn off on a non-leaf tensor; use detach()");
    }
    this.#requiresGrad = value;
  }
  /** Accumulated gradient (leaves), or null. */
  get grad(): Tensor | null {
    return this.#grad;
  }
  set grad(value: Tensor | null) {
    if (value) {
      const what = (t: Tensor) => `${t.dtype} of shape ${formatShape(t.shape)} on ${t.device}`;
      const fits = value.dtype === this.dtype && value.device === this.device;
      if (!fits || !sameShape(value.shape, this.shape)) {
        throw new RangeError(`grad: assigned gradient is ${what(value)}, expected ${what(this)}`);
      }
      value.storage.persistent = true;
    }
    this.#grad = value;
  }
  /**
   * The graph node that made this tensor, or null for leaves: internal.
   * @ignore
   */
  get gradFn(): Node | null {
    return this.#gradFn;
  }
  /**
   * Which output of `gradFn` this is: internal.
   * @ignore
   */
  get outputIndex(): number {
    return this.#outputIndex;
  }
  /** True for tensors not made by a recorded operation. */
  get isLeaf(): boolean {
    return this.#gradFn === null;
  }

  /** @internal Makes this tensor output `index` of `node`. */
  _attach(node: Node, index: number): void {
    if (this.#gradFn) ag.moveRetain(this, node, index);
    this.#gradFn = node;
    this.#outputIndex = index;
    this.#requiresGrad = true;
  }

  /**
   * @internal Overwrites this tensor's values with `value`'s (same shape and
   * dtype, same device or not), keeping its identity and storage: used by
   * optimizers, gradient accumulation and buffer updates.
   */
  _assign(value: Tensor): void {
    if (!sameShape(value.shape, this.shape) || value.dtype !== this.dtype) {
      throw new RangeError(
        `assign: value of shape ${formatShape(value.shape)} (${value.dtype}) does not match ${
          formatShape(this.shape)
        } (${this.dtype})`,
      );
    }
    ops.copyInto(value, this);
    this.#storage.markModified();
  }

  /** @internal Replaces the storage (same numel and dtype), or with `shape` the data (nn's lazy materialize). */
  _setStorage(storage: Storage, shape?: Shape): void {
    [this.#storage, this.#shape] = [storage, shape ? Object.freeze([...shape]) : this.#shape];
  }

  // ---- reading (the only awaits) ----

  /** A host copy of the values, once all work producing them has run. */
  async data(): Promise<TypedArray> {
    // async so that every failure (a released tensor) rejects rather than
    // throws; the read is still queued synchronously, at the call.
    const { device, dtype } = this;
    const n = this.numel();
    const buffer = this.#storage.buffer("data");
    const values = device.stream.read(() => device.backendDevice.read(buffer, 0, n, dtype));
    // Awaited together, so a failed read is never an unhandled rejection.
    const [result] = await Promise.all([values, settleReleases()]);
    return result;
  }

  /** The values as nested arrays (a number for a 0-dimensional tensor). */
  async toArray(): Promise<NestedNumbers> {
    const flat = await this.data();
    const shape = this.shape;
    if (shape.length === 0) return flat[0];
    let offset = 0;
    const build = (d: number): NestedNumbers[] => {
      const out: NestedNumbers[] = [];
      for (let i = 0; i < shape[d]; i++) {
        if (d === shape.length - 1) out.push(flat[offset++]);
        else out.push(build(d + 1));
      }
      return out;
    };
    return build(0);
  }

  /** The single value of a one-element tensor. */
  async item(): Promise<number> {
    if (this.numel() !== 1) {
      throw new RangeError(
        `item: the tensor has ${this.numel()} elements (shape ${
          formatShape(this.shape)
        }), expected 1`,
      );
    }
    return (await this.data())[0];
  }

  /** Releases the memory now (views sharing it become unusable). */
  dispose(): void {
    this.#storage.dispose();
  }

  // ---- autograd ----

  /**
   * Calls `hook(grad)` in each backward pass with the total gradient flowing into this tensor
   * (before its `gradFn`, or before a leaf accumulates it); a returned tensor replaces it, as
   * PyTorch's `register_hook`. Hooks run in registration order; `remove()` unregisters one.
   */
  registerHook(hook: TensorHook): { remove(): void } {
    return ag.registerTensorHook(this, hook);
  }
  /** Keeps a non-leaf's gradient in `.grad` after backward (a leaf's anyway), as PyTorch's. */
  retainGrad(): void {
    ag.retainGrad(this);
  }
  /** Whether {@link retainGrad} was called on this non-leaf. */
  get retainsGrad(): boolean {
    return ag.retainsGrad(this);
  }
  /** Backpropagates from this tensor; `grad` is required unless it has one element. */
  backward(grad?: Tensor, options?: BackwardOptions): void {
    if (!this.requiresGrad) {
      throw new Error(
        "backward: this tensor does not require grad (no input had requiresGrad, or it was made under noGrad)",
      );
    }
    // A loss is usually read after backward: the backend may start that read now, before the seed.
    const buffer = this.numel() === 1 && !this.#storage.disposed ? this.#storage.buffer() : null;
    const { device, dtype } = this;
    if (buffer) device.stream.submit(() => device.backendDevice.readSoon?.(buffer, 0, 1, dtype));
    let g = grad;
    if (!g) {
      if (this.numel() !== 1) {
        throw new Error(
          `backward: grad can be implicitly created only for scalar outputs; this tensor has shape ${
            formatShape(this.shape)
          }, pass a gradient of that shape`,
        );
      }
      g = ops.full([...this.shape], 1, { dtype: this.dtype, device: this.device });
    } else if (!(g instanceof Tensor)) {
      const got = g === null || typeof g !== "object" ? String(g) : "an options object";
      throw new TypeError(`backward: grad must be a Tensor, got ${got} (options go second)`);
    } else if (!sameShape(g.shape, this.shape)) {
      throw new RangeError(
        `backward: gradient shape ${formatShape(g.shape)} does not match the tensor's shape ${
          formatShape(this.shape)
        }`,
      );
    } else if (g.device !== this.device) {
      throw new Error(`backward: gradient is on ${g.device}, the tensor on ${this.device}`);
    }
    try {
      ag.runBackward(this, g, options);
    } finally {
      // The implicit seed is never kept (leaves get copies), unless a recorded backward reads it.
      if (!grad && !options?.createGraph) g.dispose();
    }
  }

  /** The same data without history (shares storage). */
  detach(): Tensor {
    return new Tensor(this.#storage, this.#shape);
  }

  /** Zeros like this tensor (same shape, dtype and device). */
  zerosLike(): Tensor {
    return ops.full([...this.shape], 0, { dtype: this.dtype, device: this.device });
  }

  // ---- movement and conversion ----

  /** A copy on `target` (a device or its name), or converted to a dtype. Never waits. */
  to(target: Device | string | DType): Tensor {
    if (target === "float32" || target === "int32" || target === "float64") {
      return ops.cast(this, target);
    }
    let d: Device;
    try {
      d = resolveDevice(target);
    } catch (error) {
      if (typeof target === "string" && !target.includes(":")) {
        throw new TypeError(
          `to: "${target}" is neither a dtype (${DTYPES.join(", ")}) nor a started device (${
            (error as Error).message
          })`,
          { cause: error },
        );
      }
      throw error;
    }
    return ops.toDevice(this, d);
  }
  /** Converted to `other`'s dtype (`Tensor.type_as`). */
  typeAs(other: Tensor): Tensor {
    return this.to(other.dtype);
  }
  // ---- in place (refused on tensors that require grad while grad mode is on) ----

  /** Sets every element to 0 in place; returns this tensor. */
  zero_(): this {
    ops.zero_(this);
    return this;
  }
  /** Sets every element to `value` (a number or a one-element tensor) in place. */
  fill_(value: number | Tensor): this {
    ops.fill_(this, value);
    return this;
  }
  /** Copies `src` in (broadcast to this shape, converted to this dtype and device). */
  copy_(src: Tensor): this {
    ops.copy_(this, src);
    return this;
  }
  /** `this += alpha * other` in place (`other` broadcasts to this shape). */
  add_(other: TensorLike, options: { alpha?: number } = {}): this {
    ops.add_(this, other, options);
    return this;
  }
  /** `this *= other` in place (`other` broadcasts to this shape). */
  mul_(other: TensorLike): this {
    ops.mul_(this, other);
    return this;
  }
  /** How many times this tensor's memory was changed in place (PyTorch's `_version`). */
  get version(): number {
    return this.#storage.version;
  }

  /** A contiguous copy with its own storage. */
  clone(): Tensor {
    return ops.clone(this);
  }

  // ---- elementwise ----

  /** this + other. */
  add(other: TensorLike): Tensor {
    return ops.add(this, other);
  }
  /** this - other. */
  sub(other: TensorLike): Tensor {
    return ops.sub(this, other);
  }
  /** this * other. */
  mul(other: TensorLike): Tensor {
    return ops.mul(this, other);
  }
  /** this / other (true division). */
  div(other: TensorLike): Tensor {
    return ops.div(this, other);
  }
  /** this ** exponent. */
  pow(exponent: TensorLike): Tensor {
    return ops.pow(this, exponent);
  }
  /** Elementwise maximum with `other`. */
  maximum(other: TensorLike): Tensor {
    return ops.maximum(this, other);
  }
  /** Elementwise minimum with `other`. */
  minimum(other: TensorLike): Tensor {
    return ops.minimum(this, other);
  }
  /** Clamps into [min, max]. */
  clamp(min?: TensorLike, max?: TensorLike): Tensor {
    return ops.clamp(this, min, max);
  }
  /** -this. */
  neg(): Tensor {
    return ops.neg(this);
  }
  /** e^this. */
  exp(): Tensor {
    return ops.exp(this);
  }
  /** Natural log. */
  log(): Tensor {
    return ops.log(this);
  }
  /** Square root. */
  sqrt(): Tensor {
    return ops.sqrt(this);
  }
  /** Absolute value. */
  abs(): Tensor {
    return ops.abs(this);
  }
  /** max(this, 0). */
  relu(): Tensor {
    return ops.relu(this);
  }
  /** Logistic sigmoid. */
  sigmoid(): Tensor {
    return ops.sigmoid(this);
  }
  /** Hyperbolic tangent. */
  tanh(): Tensor {
    return ops.tanh(this);
  }
  /** GELU (exact erf). */
  gelu(): Tensor {
    return ops.gelu(this);
  }
  /** -1, 0 or 1 (0 for NaN). */
  sign(): Tensor {
    return ops.sign(this);
  }
  /** Sine. */
  sin(): Tensor {
    return ops.sin(this);
  }
  /** Cosine. */
  cos(): Tensor {
    return ops.cos(this);
  }
  /** Largest integer <= each element. */
  floor(): Tensor {
    return ops.floor(this);
  }
  /** Smallest integer >= each element. */
  ceil(): Tensor {
    return ops.ceil(this);
  }
  /** Nearest integer, halves to even (as PyTorch). */
  round(): Tensor {
    return ops.round(this);
  }
  /** ln(1 + this), accurate for small values. */
  log1p(): Tensor {
    return ops.log1p(this);
  }
  /** e^this - 1, accurate for small values. */
  expm1(): Tensor {
    return ops.expm1(this);
  }
  /** 1 / sqrt(this). */
  rsqrt(): Tensor {
    return ops.rsqrt(this);
  }
  /** 1 / this. */
  reciprocal(): Tensor {
    return ops.reciprocal(this);
  }
  /** this * this. */
  square(): Tensor {
    return ops.square(this);
  }
  /** 1 where equal, else 0 (no gradient). */
  eq(other: TensorLike): Tensor {
    return ops.compare("eq", this, other);
  }
  /** 1 where not equal. */
  ne(other: TensorLike): Tensor {
    return ops.compare("ne", this, other);
  }
  /** 1 where less. */
  lt(other: TensorLike): Tensor {
    return ops.compare("lt", this, other);
  }
  /** 1 where less or equal. */
  le(other: TensorLike): Tensor {
    return ops.compare("le", this, other);
  }
  /** 1 where greater. */
  gt(other: TensorLike): Tensor {
    return ops.compare("gt", this, other);
  }
  /** 1 where greater or equal. */
  ge(other: TensorLike): Tensor {
    return ops.compare("ge", this, other);
  }
  /** 1 where greater (`torch.greater`). */
  greater(other: TensorLike): Tensor {
    return ops.greater(this, other);
  }
  /** 1 where greater or equal (`torch.greater_equal`). */
  greaterEqual(other: TensorLike): Tensor {
    return ops.greaterEqual(this, other);
  }
  /** 1 where less (`torch.less`). */
  less(other: TensorLike): Tensor {
    return ops.less(this, other);
  }
  /** 1 where less or equal (`torch.less_equal`). */
  lessEqual(other: TensorLike): Tensor {
    return ops.lessEqual(this, other);
  }
  /** 1 where not equal (`torch.not_equal`). */
  notEqual(other: TensorLike): Tensor {
    return ops.notEqual(this, other);
  }
  /** 1 where both are nonzero (`torch.logical_and`). */
  logicalAnd(other: TensorLike): Tensor {
    return ops.logicalAnd(this, other);
  }
  /** 1 where either is nonzero (`torch.logical_or`). */
  logicalOr(other: TensorLike): Tensor {
    return ops.logicalOr(this, other);
  }
  /** 1 where exactly one is nonzero (`torch.logical_xor`). */
  logicalXor(other: TensorLike): Tensor {
    return ops.logicalXor(this, other);
  }
  /** 1 where zero (`torch.logical_not`). */
  logicalNot(): Tensor {
    return ops.logicalNot(this);
  }
  /** Bitwise AND of int32 tensors (`torch.bitwise_and`). */
  bitwiseAnd(other: TensorLike): Tensor {
    return ops.bitwiseAnd(this, other);
  }
  /** Bitwise OR of int32 tensors (`torch.bitwise_or`). */
  bitwiseOr(other: TensorLike): Tensor {
    return ops.bitwiseOr(this, other);
  }
  /** Bitwise XOR of int32 tensors (`torch.bitwise_xor`). */
  bitwiseXor(other: TensorLike): Tensor {
    return ops.bitwiseXor(this, other);
  }
  /** Bitwise NOT of an int32 tensor (`torch.bitwise_not`). */
  bitwiseNot(): Tensor {
    return ops.bitwiseNot(this);
  }
  /** this << other on int32, count modulo 32 (`torch.bitwise_left_shift`). */
  bitwiseLeftShift(other: TensorLike): Tensor {
    return ops.bitwiseLeftShift(this, other);
  }
  /** this >> other on int32, arithmetic (`torch.bitwise_right_shift`). */
  bitwiseRightShift(other: TensorLike): Tensor {
    return ops.bitwiseRightShift(this, other);
  }
  /** 1 where close to `other` (`torch.isclose`). */
  isclose(other: TensorLike, options?: composite.IscloseOptions): Tensor {
    return ops.isclose(this, other, options);
  }
  /** Whether all are close to `other` (async, `torch.allclose`). */
  allclose(other: TensorLike, options?: composite.IscloseOptions): Promise<boolean> {
    return ops.allclose(this, other, options);
  }
  /** Whether `other` has this shape and these values (async, `torch.equal`). */
  equal(other: Tensor): Promise<boolean> {
    return ops.equal(this, other);
  }
  /** 1 where -inf (`torch.isneginf`). */
  isneginf(): Tensor {
    return ops.isneginf(this);
  }
  /** 1 where +inf (`torch.isposinf`). */
  isposinf(): Tensor {
    return ops.isposinf(this);
  }
  /** 1 everywhere: there are no complex dtypes (`torch.isreal`). */
  isreal(): Tensor {
    return ops.isreal(this);
  }
  /** Remainder with the divisor's sign (`torch.remainder`). */
  remainder(other: TensorLike): Tensor {
    return ops.remainder(this, other);
  }
  /** Remainder with the dividend's sign (`torch.fmod`). */
  fmod(other: TensorLike): Tensor {
    return ops.fmod(this, other);
  }
  /** Rounded-down quotient (`torch.floor_divide`). */
  floorDivide(other: TensorLike): Tensor {
    return ops.floorDivide(this, other);
  }
  /** |this| with the sign of `other` (`torch.copysign`). */
  copysign(other: TensorLike): Tensor {
    return ops.copysign(this, other);
  }
  /** Heaviside step with `values` at 0 (`torch.heaviside`). */
  heaviside(values: TensorLike): Tensor {
    return ops.heaviside(this, values);
  }
  /** Maximum ignoring NaN (`torch.fmax`). */
  fmax(other: TensorLike): Tensor {
    return ops.fmax(this, other);
  }
  /** Minimum ignoring NaN (`torch.fmin`). */
  fmin(other: TensorLike): Tensor {
    return ops.fmin(this, other);
  }
  /** this ** exponent in float64 (`torch.float_power`). */
  floatPower(exponent: TensorLike): Tensor {
    return ops.floatPower(this, exponent);
  }
  /** this * 2 ** other (`torch.ldexp`). */
  ldexp(other: TensorLike): Tensor {
    return ops.ldexp(this, other);
  }
  /** Greatest common divisor of int32 tensors (`torch.gcd`). */
  gcd(other: TensorLike): Tensor {
    return ops.gcd(this, other);
  }
  /** Least common multiple of int32 tensors (`torch.lcm`). */
  lcm(other: TensorLike): Tensor {
    return ops.lcm(this, other);
  }
  /** Angle of (other, this) (`torch.atan2`). */
  atan2(other: TensorLike): Tensor {
    return ops.atan2(this, other);
  }
  /** Angle of (other, this) (`torch.arctan2`). */
  arctan2(other: TensorLike): Tensor {
    return ops.arctan2(this, other);
  }
  /** sqrt(this² + other²) (`torch.hypot`). */
  hypot(other: TensorLike): Tensor {
    return ops.hypot(this, other);
  }
  /** log(e^this + e^other) (`torch.logaddexp`). */
  logaddexp(other: TensorLike): Tensor {
    return ops.logaddexp(this, other);
  }
  /** log2(2^this + 2^other) (`torch.logaddexp2`). */
  logaddexp2(other: TensorLike): Tensor {
    return ops.logaddexp2(this, other);
  }
  /** log(cumsum(exp(this), dim)) (`torch.logcumsumexp`). */
  logcumsumexp(dim: number): Tensor {
    return ops.logcumsumexp(this, dim);
  }
  /** this * other (`torch.multiply`). */
  multiply(other: TensorLike): Tensor {
    return ops.multiply(this, other);
  }
  /** this - alpha * other (`torch.subtract`). */
  subtract(other: TensorLike, options?: composite.SubtractOptions): Tensor {
    return ops.subtract(this, other, options);
  }
  /** this / other, optionally rounded (`torch.divide`). */
  divide(other: TensorLike, options?: composite.DivideOptions): Tensor {
    return ops.divide(this, other, options);
  }
  /** this / other (`torch.true_divide`). */
  trueDivide(other: TensorLike): Tensor {
    return ops.trueDivide(this, other);
  }
  /** Clamped below by `min` (`torch.clamp_min`). */
  clampMin(min: TensorLike): Tensor {
    return ops.clampMin(this, min);
  }
  /** Clamped above by `max` (`torch.clamp_max`). */
  clampMax(max: TensorLike): Tensor {
    return ops.clampMax(this, max);
  }
  /** Clamps into [min, max] (`torch.clip`). */
  clip(min?: TensorLike, max?: TensorLike): Tensor {
    return ops.clip(this, min, max);
  }
  /** Rounded toward zero. */
  trunc(): Tensor {
    return ops.trunc(this);
  }
  /** this - trunc(this). */
  frac(): Tensor {
    return ops.frac(this);
  }
  /** The error function. */
  erf(): Tensor {
    return ops.erf(this);
  }
  /** Tangent (`torch.tan`). */
  tan(): Tensor {
    return ops.tan(this);
  }
  /** Arcsine (`torch.asin`). */
  asin(): Tensor {
    return ops.asin(this);
  }
  /** Arccosine (`torch.acos`). */
  acos(): Tensor {
    return ops.acos(this);
  }
  /** Arctangent (`torch.atan`). */
  atan(): Tensor {
    return ops.atan(this);
  }
  /** Hyperbolic sine (`torch.sinh`). */
  sinh(): Tensor {
    return ops.sinh(this);
  }
  /** Hyperbolic cosine (`torch.cosh`). */
  cosh(): Tensor {
    return ops.cosh(this);
  }
  /** Inverse hyperbolic sine (`torch.asinh`). */
  asinh(): Tensor {
    return ops.asinh(this);
  }
  /** Inverse hyperbolic cosine (`torch.acosh`). */
  acosh(): Tensor {
    return ops.acosh(this);
  }
  /** Inverse hyperbolic tangent (`torch.atanh`). */
  atanh(): Tensor {
    return ops.atanh(this);
  }
  /** Alias of `asin`. */
  arcsin(): Tensor {
    return ops.arcsin(this);
  }
  /** Alias of `acos`. */
  arccos(): Tensor {
    return ops.arccos(this);
  }
  /** Alias of `atan`. */
  arctan(): Tensor {
    return ops.arctan(this);
  }
  /** Alias of `asinh`. */
  arcsinh(): Tensor {
    return ops.arcsinh(this);
  }
  /** Alias of `acosh`. */
  arccosh(): Tensor {
    return ops.arccosh(this);
  }
  /** Alias of `atanh`. */
  arctanh(): Tensor {
    return ops.arctanh(this);
  }
  /** Base-2 logarithm (`torch.log2`). */
  log2(): Tensor {
    return ops.log2(this);
  }
  /** Base-10 logarithm (`torch.log10`). */
  log10(): Tensor {
    return ops.log10(this);
  }
  /** 2 ** this (`torch.exp2`). */
  exp2(): Tensor {
    return ops.exp2(this);
  }
  /** 1 - erf, accurate in the tail (`torch.erfc`). */
  erfc(): Tensor {
    return ops.erfc(this);
  }
  /** The inverse error function (`torch.erfinv`). */
  erfinv(): Tensor {
    return ops.erfinv(this);
  }
  /** log |Γ(this)| (`torch.lgamma`). */
  lgamma(): Tensor {
    return ops.lgamma(this);
  }
  /** The digamma function (`torch.digamma`). */
  digamma(): Tensor {
    return ops.digamma(this);
  }
  /** Modified Bessel function I₀ (`torch.i0`). */
  i0(): Tensor {
    return ops.i0(this);
  }
  /** sin(πx)/(πx), 1 at 0 (`torch.sinc`). */
  sinc(): Tensor {
    return ops.sinc(this);
  }
  /** Degrees to radians (`torch.deg2rad`). */
  deg2rad(): Tensor {
    return ops.deg2rad(this);
  }
  /** Radians to degrees (`torch.rad2deg`). */
  rad2deg(): Tensor {
    return ops.rad2deg(this);
  }
  /** The sign (`torch.sgn`). */
  sgn(): Tensor {
    return ops.sgn(this);
  }
  /** 1 where the sign bit is set (`torch.signbit`). */
  signbit(): Tensor {
    return ops.signbit(this);
  }
  /** This tensor (`torch.positive`). */
  positive(): Tensor {
    return ops.positive(this);
  }
  /** -this (`torch.negative`). */
  negative(): Tensor {
    return ops.negative(this);
  }
  /** |this| (`torch.absolute`). */
  absolute(): Tensor {
    return ops.absolute(this);
  }
  /** Rounded toward zero (`torch.fix`). */
  fix(): Tensor {
    return ops.fix(this);
  }
  /** The n-th derivative of digamma (`torch.polygamma(n, this)`). */
  polygamma(n: number): Tensor {
    return ops.polygamma(n, this);
  }
  /** Multivariate log-gamma of dimension `p` (`torch.mvlgamma`). */
  mvlgamma(p: number): Tensor {
    return ops.mvlgamma(this, p);
  }
  /** log(this/(1 - this)), clamped into [eps, 1 - eps] when given (`torch.logit`). */
  logit(options?: composite.LogitOptions): Tensor {
    return ops.logit(this, options);
  }
  /** this · log(other), 0 where this is 0 (`torch.xlogy`). */
  xlogy(other: TensorLike): Tensor {
    return ops.xlogy(this, other);
  }
  /** 1 where NaN (in this dtype: there is no bool). */
  isnan(): Tensor {
    return ops.isnan(this);
  }
  /** 1 where ±inf. */
  isinf(): Tensor {
    return ops.isinf(this);
  }
  /** 1 where neither NaN nor ±inf. */
  isfinite(): Tensor {
    return ops.isfinite(this);
  }
  /** NaN and ±inf replaced (`torch.nan_to_num`). */
  nanToNum(options?: composite.NanToNumOptions): Tensor {
    return ops.nanToNum(this, options);
  }
  /** this + weight * (end - this) (`torch.lerp`). */
  lerp(end: Tensor, weight: TensorLike): Tensor {
    return ops.lerp(this, end, weight);
  }

  // ---- reductions ----

  /** Sum over `dim` (all dims when omitted). */
  sum(dim?: number | number[], keepdim = false): Tensor {
    return ops.sum(this, dim, keepdim);
  }
  /** Mean over `dim` (all dims when omitted). */
  mean(dim?: number | number[], keepdim = false): Tensor {
    return ops.mean(this, dim, keepdim);
  }
  /** Variance over `dim` (all dims when omitted); unbiased unless `unbiased: false`. */
  var(dim?: number | number[], options?: VarianceOptions): Tensor {
    return ops.variance(this, dim, options);
  }
  /** Standard deviation over `dim` (all dims when omitted), as `torch.std`. */
  std(dim?: number | number[], options?: VarianceOptions): Tensor {
    return ops.std(this, dim, options);
  }
  /** log Σ exp over `dim`, without overflow (`torch.logsumexp`). */
  logsumexp(dim: number | number[], keepdim = false): Tensor {
    return ops.logsumexp(this, dim, keepdim);
  }
  /** Maximum values over `dim` (of all elements when omitted). */
  max(dim?: number, keepdim = false): Tensor {
    return ops.max(this, dim, keepdim);
  }
  /** Minimum values over `dim`. */
  min(dim?: number, keepdim = false): Tensor {
    return ops.min(this, dim, keepdim);
  }
  /** int32 index of the maximum over `dim` (of the flattened tensor when omitted). */
  argmax(dim?: number, keepdim = false): Tensor {
    return ops.argmax(this, dim, keepdim);
  }
  /** int32 index of the minimum. */
  argmin(dim?: number, keepdim = false): Tensor {
    return ops.argmin(this, dim, keepdim);
  }
  /** Maximum over `dims` (all when omitted); ties share the gradient (`torch.amax`). */
  amax(dims?: number | readonly number[], keepdim = false): Tensor {
    return ops.amax(this, dims, keepdim);
  }
  /** Minimum over `dims` (all when omitted); ties share the gradient. */
  amin(dims?: number | readonly number[], keepdim = false): Tensor {
    return ops.amin(this, dims, keepdim);
  }
  /** Product over `dim` (of all elements when omitted). */
  prod(dim?: number, keepdim = false): Tensor {
    return ops.prod(this, dim, keepdim);
  }
  /** Running sums along `dim`. */
  cumsum(dim: number): Tensor {
    return ops.cumsum(this, dim);
  }
  /** Running products along `dim`. */
  cumprod(dim: number): Tensor {
    return ops.cumprod(this, dim);
  }
  /** The vector p-norm over `dim` (all when omitted): 2, 1, ±Infinity, 0, any number. */
  norm(p: number | "fro" = 2, dim?: number | readonly number[], keepdim = false): Tensor {
    return ops.norm(this, p, dim, keepdim);
  }
  /** 1 where all are nonzero over `dim` (of all when omitted), in this dtype. */
  all(dim?: number, keepdim = false): Tensor {
    return ops.all(this, dim, keepdim);
  }
  /** 1 where any is nonzero over `dim`, in this dtype. */
  any(dim?: number, keepdim = false): Tensor {
    return ops.any(this, dim, keepdim);
  }
  /** `[values, indices]` sorted along `dim` (stable; NaN last ascending, first descending). */
  sort(dim = -1, descending = false): composite.ValuesIndices {
    return ops.sort(this, dim, descending);
  }
  /** int32 indices that sort along `dim`. */
  argsort(dim = -1, descending = false): Tensor {
    return ops.argsort(this, dim, descending);
  }
  /** `[values, indices]` of the `k` largest (smallest) along `dim`. */
  topk(k: number, dim = -1, largest = true, sorted = true): composite.ValuesIndices {
    return ops.topk(this, k, dim, largest, sorted);
  }
  /** The lower median of all elements (0-d), or `[values, indices]` along `dim`. */
  median(): Tensor;
  /** `[values, indices]` of the lower median along `dim`. */
  median(dim: number, keepdim?: boolean): composite.ValuesIndices;
  median(dim?: number, keepdim = false): Tensor | composite.ValuesIndices {
    return dim === undefined ? ops.median(this) : ops.median(this, dim, keepdim);
  }
  /** {@link Tensor.median} ignoring NaN. */
  nanmedian(): Tensor;
  /** `[values, indices]` of the lower median along `dim`, ignoring NaN. */
  nanmedian(dim: number, keepdim?: boolean): composite.ValuesIndices;
  nanmedian(dim?: number, keepdim = false): Tensor | composite.ValuesIndices {
    return dim === undefined ? ops.nanmedian(this) : ops.nanmedian(this, dim, keepdim);
  }
  /** `[values, indices]` of the most frequent value along `dim`. */
  mode(dim = -1, keepdim = false): composite.ValuesIndices {
    return ops.mode(this, dim, keepdim);
  }
  /** The `q`-quantiles (over all elements, or along `options.dim`). */
  quantile(q: number | Tensor, options: composite.QuantileOptions = {}): Tensor {
    return ops.quantile(this, q, options);
  }
  /** {@link Tensor.quantile} ignoring NaN. */
  nanquantile(q: number | Tensor, options: composite.QuantileOptions = {}): Tensor {
    return ops.nanquantile(this, q, options);
  }
  /** Sum over `dim` (all when omitted), NaN counted as zero. */
  nansum(dim?: number | readonly number[], keepdim = false): Tensor {
    return ops.nansum(this, dim, keepdim);
  }
  /** Mean over `dim` (all when omitted) of the non-NaN elements. */
  nanmean(dim?: number | readonly number[], keepdim = false): Tensor {
    return ops.nanmean(this, dim, keepdim);
  }
  /** The number of nonzero elements over `dim` (all when omitted), int32. */
  countNonzero(dim?: number | readonly number[]): Tensor {
    return ops.countNonzero(this, dim);
  }
  /** The covariance matrix of the variables in the rows (observations in the columns). */
  cov(options: composite.CovOptions = {}): Tensor {
    return ops.cov(this, options);
  }
  /** The Pearson correlation coefficients of the variables in the rows. */
  corrcoef(): Tensor {
    return ops.corrcoef(this);
  }
  /** The slices along `dim` with `p`-norm above `maxnorm` scaled to norm `maxnorm`. */
  renorm(p: number, dim: number, maxnorm: number): Tensor {
    return ops.renorm(this, p, dim, maxnorm);
  }
  /** {@link renorm} in place (recorded as PyTorch's on a non-leaf). */
  renorm_(p: number, dim: number, maxnorm: number): this {
    // From a copy: renorm's backward needs the values this write replaces.
    ops.copy_(this, ops.renorm(ops.clone(this), p, dim, maxnorm));
    return this;
  }
  /** The `p`-norm of `this - other`. */
  dist(other: Tensor, p = 2): Tensor {
    return ops.dist(this, other, p);
  }
  /** The inverse of each square matrix. */
  inverse(): Tensor {
    return ops.inverse(this);
  }
  /** The log of each square matrix's determinant (NaN where negative). */
  logdet(): Tensor {
    return ops.logdet(this);
  }
  /** The pseudo-inverse (`rcond` default 1e-15). */
  pinverse(options: { rcond?: number } = {}): Tensor {
    return ops.pinverse(this, options);
  }
  /** The solution of `AX = this` from the Cholesky factor `L` of `A`. */
  choleskySolve(L: Tensor, options: torchLinalg.CholeskyFactorOptions = {}): Tensor {
    return ops.choleskySolve(this, L, options);
  }
  /** The inverse of `A` from this, its Cholesky factor. */
  choleskyInverse(options: torchLinalg.CholeskyFactorOptions = {}): Tensor {
    return ops.choleskyInverse(this, options);
  }
  /** `[solution, clonedCoefficient]` of `AX = this` for triangular `A` (upper by default). */
  triangularSolve(A: Tensor, options: torchLinalg.TriangularSolveOptions = {}): [Tensor, Tensor] {
    return ops.triangularSolve(this, A, options);
  }
  /** `[U, S, V]` with `this = U diag(S) Vᵀ` (`torch.svd`'s convention). */
  svd(options: torchLinalg.TorchSvdOptions = {}): [Tensor, Tensor, Tensor] {
    return ops.svd(this, options);
  }
  /** `[LU, pivots]` (and `infos` with `getInfos`) of the LU factorization. */
  lu(options: torchLinalg.TorchLuOptions = {}): Tensor[] {
    return ops.lu(this, options);
  }
  /** The solution of `A X = this` from `A`'s LU factors. */
  luSolve(LU: Tensor, pivots: Tensor): Tensor {
    return ops.luSolve(this, LU, pivots);
  }
  /** The matrix exponential of each square matrix. */
  matrixExp(): Tensor {
    return ops.matrixExp(this);
  }

  // ---- linear algebra and activations ----

  /** Matrix product (PyTorch's rules). */
  matmul(other: Tensor): Tensor {
    return ops.matmul(this, other);
  }
  /** this[i] * other[j] of two 1-D tensors. */
  outer(other: Tensor): Tensor {
    return ops.outer(this, other);
  }
  /** Matrix product of two 2-D tensors (`torch.mm`). */
  mm(other: Tensor): Tensor {
    return ops.mm(this, other);
  }
  /** Batched matrix product of two 3-D tensors with equal batches (`torch.bmm`). */
  bmm(other: Tensor): Tensor {
    return ops.bmm(this, other);
  }
  /** Matrix times vector (`torch.mv`). */
  mv(vec: Tensor): Tensor {
    return ops.mv(this, vec);
  }
  /** Dot product of two 1-D tensors (`torch.dot`). */
  dot(other: Tensor): Tensor {
    return ops.dot(this, other);
  }
  /** As {@link dot} (`torch.vdot`). */
  vdot(other: Tensor): Tensor {
    return ops.vdot(this, other);
  }
  /** Sum of products over the last dims (`torch.inner`). */
  inner(other: Tensor): Tensor {
    return ops.inner(this, other);
  }
  /** `beta·this + alpha·(mat1 @ mat2)` (`torch.addmm`). */
  addmm(mat1: Tensor, mat2: Tensor, options?: composite.AddProductOptions): Tensor {
    return ops.addmm(this, mat1, mat2, options);
  }
  /** `beta·this + alpha·(mat @ vec)` (`torch.addmv`). */
  addmv(mat: Tensor, vec: Tensor, options?: composite.AddProductOptions): Tensor {
    return ops.addmv(this, mat, vec, options);
  }
  /** `beta·this + alpha·Σ_b batch1[b] @ batch2[b]` (`torch.addbmm`). */
  addbmm(batch1: Tensor, batch2: Tensor, options?: composite.AddProductOptions): Tensor {
    return ops.addbmm(this, batch1, batch2, options);
  }
  /** `beta·this + alpha·bmm(batch1, batch2)` (`torch.baddbmm`). */
  baddbmm(batch1: Tensor, batch2: Tensor, options?: composite.AddProductOptions): Tensor {
    return ops.baddbmm(this, batch1, batch2, options);
  }
  /** `beta·this + alpha·outer(vec1, vec2)` (`torch.addr`). */
  addr(vec1: Tensor, vec2: Tensor, options?: composite.AddProductOptions): Tensor {
    return ops.addr(this, vec1, vec2, options);
  }
  /** {@link addmm} in place (this is the input; recorded as PyTorch's on a non-leaf). */
  addmm_(mat1: Tensor, mat2: Tensor, options?: composite.AddProductOptions): this {
    ops.copy_(this, ops.addmm(this, mat1, mat2, options));
    return this;
  }
  /** {@link addmv} in place. */
  addmv_(mat: Tensor, vec: Tensor, options?: composite.AddProductOptions): this {
    ops.copy_(this, ops.addmv(this, mat, vec, options));
    return this;
  }
  /** {@link addbmm} in place. */
  addbmm_(batch1: Tensor, batch2: Tensor, options?: composite.AddProductOptions): this {
    ops.copy_(this, ops.addbmm(this, batch1, batch2, options));
    return this;
  }
  /** {@link baddbmm} in place. */
  baddbmm_(batch1: Tensor, batch2: Tensor, options?: composite.AddProductOptions): this {
    ops.copy_(this, ops.baddbmm(this, batch1, batch2, options));
    return this;
  }
  /** {@link addr} in place. */
  addr_(vec1: Tensor, vec2: Tensor, options?: composite.AddProductOptions): this {
    ops.copy_(this, ops.addr(this, vec1, vec2, options));
    return this;
  }
  /** As {@link outer} (`torch.ger`). */
  ger(other: Tensor): Tensor {
    return ops.ger(this, other);
  }
  /** Dims `source` moved to `destination` (`torch.movedim`). */
  movedim(source: number | readonly number[], destination: number | readonly number[]): Tensor {
    return ops.movedim(this, source, destination);
  }
  /** As {@link movedim} (`torch.moveaxis`). */
  moveaxis(source: number | readonly number[], destination: number | readonly number[]): Tensor {
    return ops.moveaxis(this, source, destination);
  }
  /** As {@link transpose} (`torch.swapaxes`). */
  swapaxes(dim0: number, dim1: number): Tensor {
    return ops.swapaxes(this, dim0, dim1);
  }
  /** As {@link transpose} (`torch.swapdims`). */
  swapdims(dim0: number, dim1: number): Tensor {
    return ops.swapdims(this, dim0, dim1);
  }
  /** As {@link expand} (`torch.broadcast_to`). */
  broadcastTo(shape: readonly number[]): Tensor {
    return ops.broadcastTo(this, shape);
  }
  /** Cut into sections or at indices along `dim` (`torch.tensor_split`). */
  tensorSplit(indicesOrSections: number | readonly number[], dim = 0): Tensor[] {
    return ops.tensorSplit(this, indicesOrSections, dim);
  }
  /** Split along dim 1 (dim 0 of 1-D) (`torch.hsplit`). */
  hsplit(sections: number | readonly number[]): Tensor[] {
    return ops.hsplit(this, sections);
  }
  /** Split along dim 0 (`torch.vsplit`). */
  vsplit(sections: number | readonly number[]): Tensor[] {
    return ops.vsplit(this, sections);
  }
  /** Split along dim 2 (`torch.dsplit`). */
  dsplit(sections: number | readonly number[]): Tensor[] {
    return ops.dsplit(this, sections);
  }
  /** Dim `dim` expanded into `sizes` (`torch.unflatten`). */
  unflatten(dim: number, sizes: readonly number[]): Tensor {
    return ops.unflatten(this, dim, sizes);
  }
  /** Flattened to 1-D (`torch.ravel`). */
  ravel(): Tensor {
    return ops.ravel(this);
  }
  /** Reversed along dim 1 (`torch.fliplr`). */
  fliplr(): Tensor {
    return ops.fliplr(this);
  }
  /** Reversed along dim 0 (`torch.flipud`). */
  flipud(): Tensor {
    return ops.flipud(this);
  }
  /** Diagonal `offset` of the planes of `dim1`, `dim2`, as the last dim (`torch.diagonal`). */
  diagonal(offset = 0, dim1 = 0, dim2 = 1): Tensor {
    return ops.diagonal(this, offset, dim1, dim2);
  }
  /** The last dim on the diagonal of new dims `dim1`, `dim2` (`torch.diag_embed`). */
  diagEmbed(offset = 0, dim1 = -2, dim2 = -1): Tensor {
    return ops.diagEmbed(this, offset, dim1, dim2);
  }
  /** Flattened onto a diagonal (`torch.diagflat`). */
  diagflat(offset = 0): Tensor {
    return ops.diagflat(this, offset);
  }
  /** The `n`-th forward difference along `dim` (`torch.diff`). */
  diff(n = 1, dim = -1, options?: composite.DiffOptions): Tensor {
    return ops.diff(this, n, dim, options);
  }
  /** Each element repeated in place (`torch.repeat_interleave`). */
  repeatInterleave(
    repeats: number | readonly number[] | Tensor,
    dim?: number,
    options?: composite.RepeatInterleaveOptions,
  ): Tensor {
    return ops.repeatInterleave(this, repeats, dim, options);
  }
  /** Elements at flat int32 indices (`torch.take`). */
  take(index: Tensor): Tensor {
    return ops.take(this, index);
  }
  /** Values at int32 `indices` along `dim` (`torch.take_along_dim`). */
  takeAlongDim(indices: Tensor, dim?: number): Tensor {
    return ops.takeAlongDim(this, indices, dim);
  }
  /** The slice at `index` along `dim` replaced by `src` (`torch.select_scatter`). */
  selectScatter(src: Tensor, dim: number, index: number): Tensor {
    return ops.selectScatter(this, src, dim, index);
  }
  /** A slice along a dim replaced by `src` (`torch.slice_scatter`). */
  sliceScatter(src: Tensor, options?: composite.SliceScatterOptions): Tensor {
    return ops.sliceScatter(this, src, options);
  }
  /** A diagonal replaced by `src` (`torch.diagonal_scatter`). */
  diagonalScatter(src: Tensor, offset = 0, dim1 = 0, dim2 = 1): Tensor {
    return ops.diagonalScatter(this, src, offset, dim1, dim2);
  }
  /** Kronecker product (`torch.kron`). */
  kron(other: Tensor): Tensor {
    return ops.kron(this, other);
  }
  /** Diagonal of a 2-D tensor, or the matrix with a 1-D tensor on it (`torch.diag`). */
  diag(diagonal = 0): Tensor {
    return ops.diag(this, diagonal);
  }
  /** Sum of the main diagonal of a 2-D tensor (`torch.trace`). */
  trace(): Tensor {
    return ops.trace(this);
  }
  /** Rotated by 90° `k` times in the plane of `dims` (`torch.rot90`). */
  rot90(k = 1, dims: readonly number[] = [0, 1]): Tensor {
    return ops.rot90(this, k, dims);
  }
  /** Softmax along `dim`. */
  softmax(dim: number): Tensor {
    return ops.softmax(this, dim);
  }
  /** Log-softmax along `dim`. */
  logSoftmax(dim: number): Tensor {
    return ops.logSoftmax(this, dim);
  }

  // ---- shape ----

  /** Same data, new shape (one dim may be -1). */
  reshape(shape: readonly number[]): Tensor {
    return ops.reshape(this, shape);
  }
  /** As {@link reshape} (tensors here are always contiguous). */
  view(shape: readonly number[]): Tensor {
    return ops.reshape(this, shape, "view");
  }
  /** Swaps two dims. */
  transpose(dim0: number, dim1: number): Tensor {
    return ops.transpose(this, dim0, dim1);
  }
  /** Transpose of a matrix (≤ 2 dims). */
  t(): Tensor {
    if (this.ndim > 2) {
      throw new RangeError(
        `t: expects a tensor with <= 2 dims, got shape ${formatShape(this.shape)}`,
      );
    }
    return this.ndim < 2 ? this.reshape(this.shape) : ops.transpose(this, 0, 1);
  }
  /** Reorders dims. */
  permute(dims: readonly number[]): Tensor {
    return ops.permute(this, dims);
  }
  /** Removes size-1 dims. */
  squeeze(dim?: number): Tensor {
    return ops.squeeze(this, dim);
  }
  /** Inserts a size-1 dim. */
  unsqueeze(dim: number): Tensor {
    return ops.unsqueeze(this, dim);
  }
  /** Broadcasts to `shape`. */
  expand(shape: readonly number[]): Tensor {
    return ops.expand(this, shape);
  }
  /** Broadcasts to `other`'s shape. */
  expandAs(other: Tensor): Tensor {
    return ops.expand(this, other.shape);
  }
  /** As {@link view} with `other`'s shape. */
  viewAs(other: Tensor): Tensor {
    return ops.reshape(this, other.shape, "view");
  }
  /** As {@link reshape} with `other`'s shape. */
  reshapeAs(other: Tensor): Tensor {
    return ops.reshape(this, other.shape);
  }
  /** Reversed along `dims` (a copy). */
  flip(dims: number | readonly number[]): Tensor {
    return ops.flip(this, dims);
  }
  /** Shifted cyclically along `dims` (flattened without). */
  roll(shifts: number | readonly number[], dims?: number | readonly number[]): Tensor {
    return ops.roll(this, shifts, dims);
  }
  /** Repeated `sizes[i]` times along dim `i` (`Tensor.repeat`). */
  repeat(sizes: readonly number[]): Tensor {
    return ops.repeat(this, sizes);
  }
  /** As {@link repeat}, leading 1s implied (`torch.tile`). */
  tile(dims: readonly number[]): Tensor {
    return ops.tile(this, dims);
  }
  /** Flattens dims `startDim..endDim`. */
  flatten(startDim = 0, endDim = -1): Tensor {
    return ops.flatten(this, startDim, endDim);
  }
  /** `torch.chunk`. */
  chunk(chunks: number, dim = 0): Tensor[] {
    return ops.chunk(this, chunks, dim);
  }
  /** `torch.split`: by piece size or explicit sizes. */
  split(sizes: number | readonly number[], dim = 0): Tensor[] {
    return ops.split(this, sizes, dim);
  }
  /** The slices along `dim`, that dim removed (`torch.unbind`). */
  unbind(dim = 0): Tensor[] {
    return ops.unbind(this, dim);
  }
  /** `length` elements from `start` along `dim`. */
  narrow(dim: number, start: number, length: number): Tensor {
    return ops.narrow(this, dim, start, length);
  }
  /** This tensor where `cond` is nonzero, else `other` (`torch.where(cond, this, other)`). */
  where(cond: Tensor, other: TensorLike): Tensor {
    return ops.where(cond, this, other);
  }
  /** A copy with `value` where `mask` is nonzero (mask broadcasts to this shape). */
  maskedFill(mask: Tensor, value: number | Tensor): Tensor {
    return ops.maskedFill(this, mask, value);
  }
  /** Entries below diagonal `diagonal` of the last two dims zeroed (`torch.triu`). */
  triu(diagonal = 0): Tensor {
    return ops.triu(this, diagonal);
  }
  /** Entries above diagonal `diagonal` of the last two dims zeroed (`torch.tril`). */
  tril(diagonal = 0): Tensor {
    return ops.tril(this, diagonal);
  }
  /** Entries along `dim` picked per position by an int32 `index` (PyTorch's `gather`). */
  gather(dim: number, index: Tensor): Tensor {
    return ops.gather(this, dim, index);
  }
  /** The slice at `index` along `dim`, that dim removed. */
  select(dim: number, index: number): Tensor {
    return ops.select(this, dim, index);
  }
  /** Picks entries along `dim` by int32 indices. */
  indexSelect(dim: number, indices: Tensor): Tensor {
    return ops.indexSelect(this, dim, indices);
  }
  /** Indices of the nonzero elements, `[n, ndim]` int32 or one per dim with `asTuple` (async). */
  nonzero(options?: { asTuple?: false }): Promise<Tensor>;
  /** {@link nonzero} as one 1-D index tensor per dim. */
  nonzero(options: { asTuple: true }): Promise<Tensor[]>;
  nonzero(options: composite.NonzeroOptions = {}): Promise<Tensor | Tensor[]> {
    return ops.nonzero(this, options);
  }
  /** Indices of the nonzero elements as `[n, ndim]` int32 (`torch.argwhere`; async). */
  argwhere(): Promise<Tensor> {
    return ops.argwhere(this);
  }
  /** The elements where `mask` is nonzero, 1-D (`torch.masked_select`; async). */
  maskedSelect(mask: Tensor): Promise<Tensor> {
    return ops.maskedSelect(this, mask);
  }
  /** The masked places filled in order from `source` (`torch.masked_scatter`, out of place). */
  maskedScatter(mask: Tensor, source: Tensor): Tensor {
    return ops.maskedScatter(this, mask, source);
  }
  /** `src` (or a number) written along `dim` at `index` (`torch.scatter`, out of place). */
  scatter(
    dim: number,
    index: Tensor,
    src: Tensor | number,
    options?: composite.ScatterOptions,
  ): Tensor {
    return ops.scatter(this, dim, index, src, options);
  }
  /** `src` added along `dim` at `index` (`torch.scatter_add`, out of place). */
  scatterAdd(dim: number, index: Tensor, src: Tensor): Tensor {
    return ops.scatterAdd(this, dim, index, src);
  }
  /** `src` reduced along `dim` at `index` (`torch.scatter_reduce`, out of place). */
  scatterReduce(
    dim: number,
    index: Tensor,
    src: Tensor,
    reduce: composite.ScatterReduction,
    options?: composite.ScatterReduceOptions,
  ): Tensor {
    return ops.scatterReduce(this, dim, index, src, reduce, options);
  }
  /** `this[indices] = values` (`torch.index_put`, out of place; `accumulate` adds). */
  indexPut(
    indices: readonly Tensor[],
    values: Tensor,
    options?: composite.IndexPutOptions,
  ): Tensor {
    return ops.indexPut(this, indices, values, options);
  }
  /** `source`'s slices reduced into those `index` names along `dim` (`torch.index_reduce`). */
  indexReduce(
    dim: number,
    index: Tensor,
    source: Tensor,
    reduce: "prod" | "mean" | "amax" | "amin",
    options?: composite.ScatterReduceOptions,
  ): Tensor {
    return ops.indexReduce(this, dim, index, source, reduce, options);
  }
  /** `source` written at flat positions `index` (`torch.put`, out of place). */
  put(index: Tensor, source: Tensor, options?: composite.IndexPutOptions): Tensor {
    return ops.put(this, index, source, options);
  }
  /** `alpha·source` added to the slices `index` names along `dim` (`torch.index_add`). */
  indexAdd(
    dim: number,
    index: Tensor,
    source: Tensor,
    options?: composite.IndexAddOptions,
  ): Tensor {
    return ops.indexAdd(this, dim, index, source, options);
  }
  /** The slices `index` names along `dim` replaced by `source`'s (`torch.index_copy`). */
  indexCopy(dim: number, index: Tensor, source: Tensor): Tensor {
    return ops.indexCopy(this, dim, index, source);
  }
  /** The slices `index` names along `dim` set to `value` (`torch.index_fill`). */
  indexFill(dim: number, index: Tensor, value: number): Tensor {
    return ops.indexFill(this, dim, index, value);
  }
  /** The sorted unique elements (slices), with inverse/counts as asked (`torch.unique`; async). */
  unique(
    options?: composite.UniqueOptions & { returnInverse?: false; returnCounts?: false },
  ): Promise<Tensor>;
  /** {@link unique} with the inverse indices and/or counts. */
  unique(options: composite.UniqueOptions): Promise<composite.UniqueResult>;
  unique(options: composite.UniqueOptions = {}): Promise<Tensor | composite.UniqueResult> {
    return ops.unique(this, options);
  }
  /** Runs of equal consecutive elements collapsed (`torch.unique_consecutive`; async). */
  uniqueConsecutive(
    options?: composite.UniqueConsecutiveOptions & { returnInverse?: false; returnCounts?: false },
  ): Promise<Tensor>;
  /** {@link uniqueConsecutive} with the inverse indices and/or counts. */
  uniqueConsecutive(options: composite.UniqueConsecutiveOptions): Promise<composite.UniqueResult>;
  uniqueConsecutive(
    options: composite.UniqueConsecutiveOptions = {},
  ): Promise<Tensor | composite.UniqueResult> {
    return ops.uniqueConsecutive(this, options);
  }
  /** `[values, indices]` of the `k`-th smallest along `dim` (`torch.kthvalue`). */
  kthvalue(k: number, dim = -1, keepdim = false): composite.ValuesIndices {
    return ops.kthvalue(this, k, dim, keepdim);
  }
  /** `[values, indices]` of the running maximum along `dim` (`torch.cummax`). */
  cummax(dim: number): composite.ValuesIndices {
    return ops.cummax(this, dim);
  }
  /** `[values, indices]` of the running minimum along `dim` (`torch.cummin`). */
  cummin(dim: number): composite.ValuesIndices {
    return ops.cummin(this, dim);
  }
  /** `[min, max]` over `dim` (all elements when omitted) (`torch.aminmax`). */
  aminmax(options?: composite.AminmaxOptions): composite.MinMax {
    return ops.aminmax(this, options);
  }
  /** Sorted along dim 0 (`torch.msort`). */
  msort(): Tensor {
    return ops.msort(this);
  }
  /** `[hist, binEdges]` of the elements (`torch.histogram`). */
  histogram(bins: number | Tensor, options?: composite.HistogramOptions): composite.Histogram {
    return ops.histogram(this, bins, options);
  }

  /** `Tensor(shape=[2, 3], dtype=float32, device=cpu:0)`. */
  toString(): string {
    return `Tensor(shape=${formatShape(this.shape)}, dtype=${this.dtype}, device=${this.device}${
      this.requiresGrad ? ", requiresGrad" : ""
    })`;
  }
}
