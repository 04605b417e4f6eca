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
import type * as tensorMethods from "./namespaces/upper_methods.ts";
import type { TensorLike } from "./ops/util.ts";
import type { TensorMethods } from "./ops_composite/tensor_methods.ts";
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
  & Omit<typeof torchLinalg, "luUnpack">
  & typeof tensorMethods;

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

/**
 * @internal Gives Tensor the methods of {@link TensorMethods}, which only
 * call an op with the tensor first: `t.name(...args)` is
 * `ops[table.name](t, ...args)`. Declared outside the core
 * (`src/ops_composite/tensor_methods.ts`) so that the core stays small.
 */
export function installTensorMethods(table: Readonly<Record<string, keyof TensorOps>>): void {
  for (const [name, op] of Object.entries(table)) {
    Object.defineProperty(Tensor.prototype, name, {
      value(this: Tensor, ...args: unknown[]): unknown {
        return (ops[op] as (self: Tensor, ...rest: unknown[]) => unknown)(this, ...args);
      },
      writable: true,
      configurable: true,
    });
  }
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
  // ---- conveniences (src/ops_composite/tensor_utils.ts, src/namespaces/upper_methods.ts) ----

  /** Number of elements (`Tensor.nelement`, as {@link numel}). */
  nelement(): number {
    return this.numel();
  }
  /** Number of dimensions (`Tensor.dim`, as {@link ndim}). */
  dim(): number {
    return this.ndim;
  }
  /** Always true: multigrad's tensors are contiguous (a transpose is a copy). */
  isContiguous(): boolean {
    return true;
  }
  /** This tensor (already contiguous; see {@link isContiguous}). */
  contiguous(): Tensor {
    return this;
  }
  /** Converted to float32 (`Tensor.float`). */
  float(): Tensor {
    return this.to("float32");
  }
  /** Converted to float64 (`Tensor.double`; cpu only). */
  double(): Tensor {
    return this.to("float64");
  }
  /** Converted to int32 (`Tensor.int`). */
  int(): Tensor {
    return this.to("int32");
  }
  /** Converted to int32, multigrad's integer dtype (`Tensor.long`, int64 in PyTorch). */
  long(): Tensor {
    return this.to("int32");
  }
  /** A copy on `cpu:0` (this tensor if it is there already). */
  cpu(): Tensor {
    return this.to("cpu:0");
  }
  /** PyTorch's type name (`"torch.FloatTensor"`), or with `dtype` a converted tensor. */
  type(): string;
  /** Converted to `dtype` (a dtype or a name such as `"torch.DoubleTensor"`). */
  type(dtype: DType | string): Tensor;
  type(dtype?: DType | string): string | Tensor {
    return dtype === undefined ? ops.type(this) : ops.type(this, dtype);
  }
  /** The contiguous strides in elements, or the stride of `dim`. */
  stride(): number[];
  /** The stride of `dim` in elements. */
  stride(dim: number): number;
  stride(dim?: number): number | number[] {
    return dim === undefined ? ops.stride(this) : ops.stride(this, dim);
  }
  /** -1 on cpu, else the device index (`Tensor.get_device`). */
  getDevice(): number {
    return ops.getDevice(this);
  }
  /** The Cholesky factor (lower unless `upper`; `torch.cholesky`). */
  cholesky(upper = false): Tensor {
    return ops.cholesky(this, upper);
  }
  /** `[Q, R]` (reduced unless `some` is false; `torch.qr`). */
  qr(some = true): [Tensor, Tensor] {
    return ops.qr(this, some);
  }
  /** The last two dims swapped (`Tensor.mT`). */
  get mT(): Tensor {
    return ops.mT(this);
  }
  /** The conjugate transpose of each matrix: {@link mT}, as every tensor is real. */
  get mH(): Tensor {
    return ops.mH(this);
  }
  /** The dims reversed (a matrix transposed). */
  get T(): Tensor {
    return ops.T(this);
  }
  /** The conjugate transpose of a matrix (2-D only). */
  get H(): Tensor {
    return ops.H(this);
  }
  /** Number of dimensions (`Tensor.ndimension`). */
  ndimension(): number {
    return this.ndim;
  }
  /** Always 0: every tensor starts at its storage's first element. */
  storageOffset(): number {
    return 0;
  }
  /** Always false: multigrad has no complex dtype. */
  isComplex(): boolean {
    return false;
  }
  /** This tensor (the conjugate of a real tensor, as PyTorch returns it). */
  conj(): Tensor {
    return this;
  }
  /** This tensor (no lazy conjugation to resolve). */
  resolveConj(): Tensor {
    return this;
  }
  /** This tensor (no lazy negation to resolve). */
  resolveNeg(): Tensor {
    return this;
  }
  /** Always false (no lazy conjugation). */
  isConj(): boolean {
    return false;
  }
  /** Always false (no lazy negation). */
  isNeg(): boolean {
    return false;
  }
  /** Always false: `inferenceMode` makes ordinary tensors (it is `noGrad`). */
  isInference(): boolean {
    return false;
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
  /** The n-th derivative of digamma (`torch.polygamma(n, this)`). */
  polygamma(n: number): Tensor {
    return ops.polygamma(n, this);
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
  /** {@link renorm} in place (recorded as PyTorch's on a non-leaf). */
  renorm_(p: number, dim: number, maxnorm: number): this {
    // From a copy: renorm's backward needs the values this write replaces.
    ops.copy_(this, ops.renorm(ops.clone(this), p, dim, maxnorm));
    return this;
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
    return this.ndim < 2 ? ops.reshape(this, this.shape, "t") : ops.permute(this, [1, 0], "t");
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

  // ---- in place: the trailing-underscore variants (src/ops_composite/inplace_*.ts) ----

  /** {@link tril} in place. */
  tril_(diagonal = 0): this {
    return ops.tril_(this, diagonal) as this;
  }
  /** {@link triu} in place. */
  triu_(diagonal = 0): this {
    return ops.triu_(this, diagonal) as this;
  }
  /** Sets {@link requiresGrad} (default true) and returns this tensor (`requires_grad_`). */
  requiresGrad_(requiresGrad = true): this {
    this.requiresGrad = requiresGrad;
    return this;
  }
  /** `Tensor(shape=[2, 3], dtype=float32, device=cpu:0)`. */
  toString(): string {
    return `Tensor(shape=${formatShape(this.shape)}, dtype=${this.dtype}, device=${this.device}${
      this.requiresGrad ? ", requiresGrad" : ""
    })`;
  }
}

/**
 * Tensor's methods that only call an op (`torch.Tensor.tan`,
 * `Tensor.scatter_`, ...): declared by {@link TensorMethods}, installed with
 * the ops.
 */
export interface Tensor extends TensorMethods {}
