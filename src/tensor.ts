/**
 * The Tensor: a shape, a dtype and storage on one device, plus its place in
 * the autograd graph. Operations are methods here and live in `src/ops/`.
 * Nothing here awaits except reading values back.
 * @module
 */

import type { Node } from "./autograd.ts";
import { type BackwardOptions, runBackward } from "./autograd.ts";
import { type Device, device as resolveDevice } from "./device.ts";
import { type DType, DTYPES, isFloat, type TypedArray } from "./dtype.ts";
import { formatShape, normalizeDim, numelOf, sameShape, type Shape } from "./shape.ts";
import { settleReleases, type Storage } from "./storage.ts";
import * as ew from "./ops/elementwise.ts";
import * as red from "./ops/reduce.ts";
import * as view from "./ops/view.ts";
import * as indexing from "./ops/indexing.ts";
import { matmul } from "./ops/linalg.ts";
import { logSoftmax, softmax } from "./ops/softmax.ts";
import { copyAcross, toDevice } from "./ops/transfer.ts";
import { full } from "./ops/factory.ts";
import { launch, type TensorLike } from "./ops/util.ts";

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

  /** The storage (shared by reshaped views). */
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
      if (!sameShape(value.shape, this.shape) || value.device !== this.device) {
        throw new RangeError(
          `grad: assigned gradient has shape ${
            formatShape(value.shape)
          } on ${value.device}, expected ${formatShape(this.shape)} on ${this.device}`,
        );
      }
      value.storage.persistent = true;
    }
    this.#grad = value;
  }
  /** The node that made this tensor, or null for leaves. */
  get gradFn(): Node | null {
    return this.#gradFn;
  }
  /** Which output of {@link gradFn} this is. */
  get outputIndex(): number {
    return this.#outputIndex;
  }
  /** True for tensors not made by a recorded operation. */
  get isLeaf(): boolean {
    return this.#gradFn === null;
  }

  /** @internal Makes this tensor output `index` of `node`. */
  _attach(node: Node, index: number): void {
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
    if (value.device !== this.device) {
      copyAcross(value, this);
      return;
    }
    const n = this.numel();
    if (n === 0 || value.storage === this.storage) return;
    const src = value.storage.buffer("assign");
    const dst = this.storage.buffer("assign");
    launch(this.device, "copy", {
      x: src,
      out: dst,
      shape: [n],
      xStrides: [1],
      xOffset: 0,
      outStrides: [1],
      outOffset: 0,
      dtype: this.dtype,
    });
  }

  /** @internal Replaces the storage (same numel and dtype). */
  _setStorage(storage: Storage): void {
    this.#storage = storage;
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

  /** Backpropagates from this tensor; `grad` is required unless it has one element. */
  backward(grad?: Tensor, options?: BackwardOptions): void {
    if (!this.requiresGrad) {
      throw new Error(
        "backward: this tensor does not require grad (no input had requiresGrad, or it was made under noGrad)",
      );
    }
    let g = grad;
    if (!g) {
      if (this.numel() !== 1) {
        throw new Error(
          `backward: grad can be implicitly created only for scalar outputs; this tensor has shape ${
            formatShape(this.shape)
          }, pass a gradient of that shape`,
        );
      }
      g = full([...this.shape], 1, { dtype: this.dtype, device: this.device });
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
      runBackward(this, g, options);
    } finally {
      // The implicit seed gradient is never kept (leaves get copies).
      if (!grad) g.dispose();
    }
  }

  /** The same data without history (shares storage). */
  detach(): Tensor {
    return new Tensor(this.#storage, this.#shape);
  }

  /** Zeros like this tensor (same shape, dtype and device). */
  zerosLike(): Tensor {
    return full([...this.shape], 0, { dtype: this.dtype, device: this.device });
  }

  // ---- movement and conversion ----

  /** A copy on `target` (a device or its name), or converted to a dtype. Never waits. */
  to(target: Device | string | DType): Tensor {
    if (target === "float32" || target === "int32" || target === "float64") {
      return ew.cast(this, target);
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
    return toDevice(this, d);
  }
  /** A contiguous copy with its own storage. */
  clone(): Tensor {
    return view.clone(this);
  }

  // ---- elementwise ----

  /** this + other. */
  add(other: TensorLike): Tensor {
    return ew.add(this, other);
  }
  /** this - other. */
  sub(other: TensorLike): Tensor {
    return ew.sub(this, other);
  }
  /** this * other. */
  mul(other: TensorLike): Tensor {
    return ew.mul(this, other);
  }
  /** this / other (true division). */
  div(other: TensorLike): Tensor {
    return ew.div(this, other);
  }
  /** this ** exponent. */
  pow(exponent: TensorLike): Tensor {
    return ew.pow(this, exponent);
  }
  /** Elementwise maximum with `other`. */
  maximum(other: TensorLike): Tensor {
    return ew.maximum(this, other);
  }
  /** Elementwise minimum with `other`. */
  minimum(other: TensorLike): Tensor {
    return ew.minimum(this, other);
  }
  /** Clamps into [min, max]. */
  clamp(min?: number, max?: number): Tensor {
    return ew.clamp(this, min, max);
  }
  /** -this. */
  neg(): Tensor {
    return ew.neg(this);
  }
  /** e^this. */
  exp(): Tensor {
    return ew.exp(this);
  }
  /** Natural log. */
  log(): Tensor {
    return ew.log(this);
  }
  /** Square root. */
  sqrt(): Tensor {
    return ew.sqrt(this);
  }
  /** Absolute value. */
  abs(): Tensor {
    return ew.abs(this);
  }
  /** max(this, 0). */
  relu(): Tensor {
    return ew.relu(this);
  }
  /** Logistic sigmoid. */
  sigmoid(): Tensor {
    return ew.sigmoid(this);
  }
  /** Hyperbolic tangent. */
  tanh(): Tensor {
    return ew.tanh(this);
  }
  /** GELU (exact erf). */
  gelu(): Tensor {
    return ew.gelu(this);
  }
  /** -1, 0 or 1 (0 for NaN). */
  sign(): Tensor {
    return ew.sign(this);
  }
  /** Sine. */
  sin(): Tensor {
    return ew.sin(this);
  }
  /** Cosine. */
  cos(): Tensor {
    return ew.cos(this);
  }
  /** Largest integer <= each element. */
  floor(): Tensor {
    return ew.floor(this);
  }
  /** Smallest integer >= each element. */
  ceil(): Tensor {
    return ew.ceil(this);
  }
  /** Nearest integer, halves to even (as PyTorch). */
  round(): Tensor {
    return ew.round(this);
  }
  /** ln(1 + this), accurate for small values. */
  log1p(): Tensor {
    return ew.log1p(this);
  }
  /** e^this - 1, accurate for small values. */
  expm1(): Tensor {
    return ew.expm1(this);
  }
  /** 1 / sqrt(this). */
  rsqrt(): Tensor {
    return ew.rsqrt(this);
  }
  /** 1 / this. */
  reciprocal(): Tensor {
    return ew.reciprocal(this);
  }
  /** this * this. */
  square(): Tensor {
    return ew.square(this);
  }
  /** 1 where equal, else 0 (no gradient). */
  eq(other: TensorLike): Tensor {
    return ew.compare("eq", this, other);
  }
  /** 1 where not equal. */
  ne(other: TensorLike): Tensor {
    return ew.compare("ne", this, other);
  }
  /** 1 where less. */
  lt(other: TensorLike): Tensor {
    return ew.compare("lt", this, other);
  }
  /** 1 where less or equal. */
  le(other: TensorLike): Tensor {
    return ew.compare("le", this, other);
  }
  /** 1 where greater. */
  gt(other: TensorLike): Tensor {
    return ew.compare("gt", this, other);
  }
  /** 1 where greater or equal. */
  ge(other: TensorLike): Tensor {
    return ew.compare("ge", this, other);
  }

  // ---- reductions ----

  /** Sum over `dim` (all dims when omitted). */
  sum(dim?: number | number[], keepdim = false): Tensor {
    return red.sum(this, dim, keepdim);
  }
  /** Mean over `dim` (all dims when omitted). */
  mean(dim?: number | number[], keepdim = false): Tensor {
    return red.mean(this, dim, keepdim);
  }
  /** Maximum values over `dim` (of all elements when omitted). */
  max(dim?: number, keepdim = false): Tensor {
    return red.max(this, dim, keepdim);
  }
  /** Minimum values over `dim`. */
  min(dim?: number, keepdim = false): Tensor {
    return red.min(this, dim, keepdim);
  }
  /** int32 index of the maximum over `dim` (of the flattened tensor when omitted). */
  argmax(dim?: number, keepdim = false): Tensor {
    return red.argmax(this, dim, keepdim);
  }
  /** int32 index of the minimum. */
  argmin(dim?: number, keepdim = false): Tensor {
    return red.argmin(this, dim, keepdim);
  }

  // ---- linear algebra and activations ----

  /** Matrix product (PyTorch's rules). */
  matmul(other: Tensor): Tensor {
    return matmul(this, other);
  }
  /** Softmax along `dim`. */
  softmax(dim: number): Tensor {
    return softmax(this, dim);
  }
  /** Log-softmax along `dim`. */
  logSoftmax(dim: number): Tensor {
    return logSoftmax(this, dim);
  }

  // ---- shape ----

  /** Same data, new shape (one dim may be -1). */
  reshape(shape: readonly number[]): Tensor {
    return view.reshape(this, shape);
  }
  /** As {@link reshape} (tensors here are always contiguous). */
  view(shape: readonly number[]): Tensor {
    return view.reshape(this, shape, "view");
  }
  /** Swaps two dims. */
  transpose(dim0: number, dim1: number): Tensor {
    return view.transpose(this, dim0, dim1);
  }
  /** Transpose of a matrix (≤ 2 dims). */
  t(): Tensor {
    if (this.ndim > 2) {
      throw new RangeError(
        `t: expects a tensor with <= 2 dims, got shape ${formatShape(this.shape)}`,
      );
    }
    return this.ndim < 2 ? this.reshape(this.shape) : view.transpose(this, 0, 1);
  }
  /** Reorders dims. */
  permute(dims: readonly number[]): Tensor {
    return view.permute(this, dims);
  }
  /** Removes size-1 dims. */
  squeeze(dim?: number): Tensor {
    return view.squeeze(this, dim);
  }
  /** Inserts a size-1 dim. */
  unsqueeze(dim: number): Tensor {
    return view.unsqueeze(this, dim);
  }
  /** Broadcasts to `shape`. */
  expand(shape: readonly number[]): Tensor {
    return view.expand(this, shape);
  }
  /** Flattens dims `startDim..endDim`. */
  flatten(startDim = 0, endDim = -1): Tensor {
    return view.flatten(this, startDim, endDim);
  }
  /** `torch.chunk`. */
  chunk(chunks: number, dim = 0): Tensor[] {
    return view.chunk(this, chunks, dim);
  }
  /** `torch.split`: by piece size or explicit sizes. */
  split(sizes: number | readonly number[], dim = 0): Tensor[] {
    return view.split(this, sizes, dim);
  }
  /** The slices along `dim`, that dim removed (`torch.unbind`). */
  unbind(dim = 0): Tensor[] {
    return view.unbind(this, dim);
  }
  /** `length` elements from `start` along `dim`. */
  narrow(dim: number, start: number, length: number): Tensor {
    return view.narrow(this, dim, start, length);
  }
  /** This tensor where `cond` is nonzero, else `other` (`torch.where(cond, this, other)`). */
  where(cond: Tensor, other: TensorLike): Tensor {
    return indexing.where(cond, this, other);
  }
  /** A copy with `value` where `mask` is nonzero (mask broadcasts to this shape). */
  maskedFill(mask: Tensor, value: number | Tensor): Tensor {
    return indexing.maskedFill(this, mask, value);
  }
  /** Entries along `dim` picked per position by an int32 `index` (PyTorch's `gather`). */
  gather(dim: number, index: Tensor): Tensor {
    return indexing.gather(this, dim, index);
  }
  /** The slice at `index` along `dim`, that dim removed. */
  select(dim: number, index: number): Tensor {
    return indexing.select(this, dim, index);
  }
  /** Picks entries along `dim` by int32 indices. */
  indexSelect(dim: number, indices: Tensor): Tensor {
    return view.indexSelect(this, dim, indices);
  }

  /** `Tensor(shape=[2, 3], dtype=float32, device=cpu:0)`. */
  toString(): string {
    return `Tensor(shape=${formatShape(this.shape)}, dtype=${this.dtype}, device=${this.device}${
      this.requiresGrad ? ", requiresGrad" : ""
    })`;
  }
}
