/**
 * The backend contract: everything a backend implements, and nothing else.
 *
 * A backend is a plugin registered with `registerBackend(name, factory,
 * { priority })`. Its factory returns a {@link Backend}, whose
 * `createDevice(index)` starts one {@link BackendDevice}: an object of
 * kernels over opaque buffers. The core never looks inside a buffer; the
 * backend never sees a tensor, a shape object or a gradient. A third backend
 * is written from this file alone.
 *
 * Rules every kernel follows:
 * - Buffers hold `numel` elements of one dtype, contiguous, row-major.
 * - Kernels are called synchronously and return nothing: they may run now
 *   (cpu) or be queued on the device (webgpu), but their effects must be
 *   visible, in call order, to every later call on the same device,
 *   `read` included. The core orders work ACROSS devices itself (see
 *   `src/stream.ts`), so a kernel never waits for another device.
 * - `out` never aliases an input, except in `copy` where the core may copy a
 *   region of a buffer into another region of a different buffer only.
 * - Input dtypes are already checked and equal (the core casts first), and
 *   every buffer argument was allocated by this same device.
 * - Errors found later (GPU validation, out of memory) are raised by the next
 *   `read`, naming the kernel that failed. After the device is lost every
 *   method throws `DeviceLostError` (from `src/errors.ts`).
 * @module
 */

import type { DType, TypedArray } from "../dtype.ts";

/** An opaque handle to memory owned by one {@link BackendDevice}. */
export type DeviceBuffer = object;

/**
 * Elementwise functions of one operand. Float dtypes only, except `neg`,
 * `abs`, `relu`, `sign`, `floor`, `ceil`, `round` and `square`, which also
 * take int32 (`floor`, `ceil`, `round` are then the identity).
 */
export type UnaryOp =
  | "neg"
  | "exp"
  | "log"
  | "sqrt"
  | "abs"
  | "relu"
  | "sigmoid"
  | "tanh"
  /** x * Φ(x), with the exact erf (PyTorch's default GELU). */
  | "gelu"
  /** d gelu / dx = Φ(x) + x φ(x). */
  | "geluGrad"
  | "sign"
  | "sin"
  | "cos"
  | "floor"
  | "ceil"
  /** Half to even, as PyTorch (`round(2.5) = 2`). */
  | "round"
  /** ln(1 + x), accurate for small x. */
  | "log1p"
  /** e^x - 1, accurate for small x. */
  | "expm1"
  /** 1 / sqrt(x). */
  | "rsqrt"
  /** 1 / x. */
  | "reciprocal"
  /** x * x. */
  | "square";

/**
 * Elementwise functions of two operands. Comparisons give 1 or 0 in the
 * operands' dtype. `div` on int32 truncates toward zero; `pow` is float only.
 */
export type BinaryOp =
  | "add"
  | "sub"
  | "mul"
  | "div"
  | "pow"
  | "maximum"
  | "minimum"
  | "eq"
  | "ne"
  | "lt"
  | "le"
  | "gt"
  | "ge";

/**
 * Reductions over the middle axis of a [outer, size, inner] view. `argmax` and
 * `argmin` write int32 indices (the first extreme index, as PyTorch); the
 * others write the input dtype. `size` is at least 1.
 */
export type ReduceOp = "sum" | "max" | "min" | "argmax" | "argmin";

/** How {@link BackendDevice.binary} reads its operands. */
export interface BinaryLayout {
  /** Shape of `out` (contiguous). Length 0 means a single element. */
  readonly shape: readonly number[];
  /** Element strides of `a` for each output dim; 0 where `a` is broadcast. */
  readonly aStrides: readonly number[];
  /** Element strides of `b` for each output dim; 0 where `b` is broadcast. */
  readonly bStrides: readonly number[];
  /** The dtype of `a`, `b` and `out`. */
  readonly dtype: DType;
}

/** The [outer, size, inner] view a reduction, softmax or index select works on. */
export interface AxisLayout {
  /** Product of the dims before the axis. */
  readonly outer: number;
  /** Length of the axis. */
  readonly size: number;
  /** Product of the dims after the axis. */
  readonly inner: number;
  /** The input dtype. */
  readonly dtype: DType;
}

/**
 * Batched matrix product: for every batch index `i < batch`,
 * `out[i] (m x n) = A_i (m x k) @ B_i (k x n)` where
 * `A_i` starts at element `i * aBatchStride` of `a` and is stored [m, k]
 * row-major, or [k, m] when `transA` (so the kernel reads its transpose);
 * likewise `B_i` at `i * bBatchStride`, [k, n] or [n, k] when `transB`.
 * A batch stride of 0 broadcasts one matrix to every batch. `out` is
 * [batch, m, n] contiguous. Float dtypes only.
 */
export interface MatmulLayout {
  /** Number of matrix products. */
  readonly batch: number;
  /** Rows of the output. */
  readonly m: number;
  /** Columns of the output. */
  readonly n: number;
  /** The summed dim. */
  readonly k: number;
  /** Elements between consecutive A matrices (0 broadcasts). */
  readonly aBatchStride: number;
  /** Elements between consecutive B matrices (0 broadcasts). */
  readonly bBatchStride: number;
  /** A is stored [k, m]. */
  readonly transA: boolean;
  /** B is stored [n, k]. */
  readonly transB: boolean;
  /** The element type. */
  readonly dtype: DType;
}

/**
 * A strided copy: for every index tuple `i` of `shape`,
 * `dst[dstOffset + Σ i_d * dstStrides[d]] = src[srcOffset + Σ i_d * srcStrides[d]]`.
 * This one kernel is permute, expand, narrow and one input of a concat.
 * Destination positions never repeat; source positions may (expand).
 */
export interface CopyLayout {
  /** The index space copied. */
  readonly shape: readonly number[];
  /** Element strides of the source per dim. */
  readonly srcStrides: readonly number[];
  /** First source element. */
  readonly srcOffset: number;
  /** Element strides of the destination per dim. */
  readonly dstStrides: readonly number[];
  /** First destination element. */
  readonly dstOffset: number;
  /** The element type. */
  readonly dtype: DType;
}

/**
 * How {@link BackendDevice.where} reads its operands:
 * `out[i] = cond[i] != 0 ? a[i] : b[i]` over the broadcast index space
 * `shape`. A float `cond` is true where it is not ±0 (NaN is true, as
 * `bool(nan)` in PyTorch).
 */
export interface WhereLayout {
  /** Shape of `out` (contiguous). Length 0 means a single element. */
  readonly shape: readonly number[];
  /** Element strides of `cond` per output dim; 0 where broadcast. */
  readonly condStrides: readonly number[];
  /** Element strides of `a` per output dim; 0 where broadcast. */
  readonly aStrides: readonly number[];
  /** Element strides of `b` per output dim; 0 where broadcast. */
  readonly bStrides: readonly number[];
  /** The dtype of `cond` (any stored dtype). */
  readonly condDtype: DType;
  /** The dtype of `a`, `b` and `out`. */
  readonly dtype: DType;
}

/**
 * The [outer, ·, inner] views of {@link BackendDevice.gather} and
 * {@link BackendDevice.scatterAdd}: the data side has `size` rows along the
 * axis, the index side (int32, shaped [outer, count, inner]) `count`.
 */
export interface GatherLayout {
  /** Product of the dims before the axis. */
  readonly outer: number;
  /** Length of the axis on the data side. */
  readonly size: number;
  /** Length of the axis on the index side. */
  readonly count: number;
  /** Product of the dims after the axis. */
  readonly inner: number;
  /** The dtype of the data (not of the int32 index). */
  readonly dtype: DType;
}

/**
 * The sliding windows of a 2-d convolution or pooling over an input
 * [batch, channels, height, width] (contiguous): output position
 * (oh, ow) and kernel tap (ki, kj) read input row
 * `oh * strideH - padH + ki * dilationH` and column
 * `ow * strideW - padW + kj * dilationW`. The unfolded matrix ("columns")
 * is [batch, channels, kernelH, kernelW, outH, outW], contiguous.
 */
export interface WindowLayout {
  /** Images. */
  readonly batch: number;
  /** Channels per image. */
  readonly channels: number;
  /** Input rows. */
  readonly height: number;
  /** Input columns. */
  readonly width: number;
  /** Kernel rows. */
  readonly kernelH: number;
  /** Kernel columns. */
  readonly kernelW: number;
  /** Rows between windows. */
  readonly strideH: number;
  /** Columns between windows. */
  readonly strideW: number;
  /** Rows of padding before the first input row. */
  readonly padH: number;
  /** Columns of padding before the first input column. */
  readonly padW: number;
  /** Rows between kernel taps. */
  readonly dilationH: number;
  /** Columns between kernel taps. */
  readonly dilationW: number;
  /** Output rows (windows down). */
  readonly outH: number;
  /** Output columns (windows across). */
  readonly outW: number;
  /** The element type. */
  readonly dtype: DType;
}

/**
 * Counter-based random numbers, identical on every backend for the same
 * seed. Element `i` of `out` uses
 * `h(x) = lowbias32(x)`:
 * `x ^= x >>> 16; x = x * 0x7feb352d; x ^= x >>> 15; x = x * 0x846ca68b; x ^= x >>> 16`
 * (u32 arithmetic, wrapping), `key = h(seed)`, `u(j) = (h(j ^ key) >>> 8) * 2^-24`
 * in [0, 1) (exact in float32). `uniform`: `out[i] = low + (high - low) * u(i)`.
 * `normal`: `out[i] = mean + std * sqrt(-2 ln(1 - u(2i))) * cos(2π u(2i+1))`.
 * Float dtypes only.
 */
export interface RandomLayout {
  /** Elements to write. */
  readonly numel: number;
  /** The distribution. */
  readonly kind: "uniform" | "normal";
  /** A u32. */
  readonly seed: number;
  /** `low` for uniform, `mean` for normal. */
  readonly a: number;
  /** `high` for uniform, `std` for normal. */
  readonly b: number;
  /** The element type. */
  readonly dtype: DType;
}

/**
 * The contract's `h(x)` for {@link RandomLayout} on the host (u32 in, u32
 * out), so that every backend derives the same key from a seed.
 */
export function lowbias32(value: number): number {
  let x = value >>> 0;
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d) >>> 0;
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b) >>> 0;
  x ^= x >>> 16;
  return x >>> 0;
}

/** Memory held by a device, in bytes. */
export interface MemoryInfo {
  /** Bytes of live buffers (allocated and not freed). */
  readonly bytesInUse: number;
  /** Bytes the device holds, free pool entries included. */
  readonly bytesReserved: number;
}

/** One started device of a backend: memory plus kernels. */
export interface BackendDevice {
  /** A description of the hardware (adapter name), shown as `Device.info`. */
  readonly info: string;
  /** The dtypes this device stores and computes. */
  readonly dtypes: readonly DType[];

  /** A new buffer of `numel` elements (contents undefined). `numel` may be 0. */
  allocate(numel: number, dtype: DType): DeviceBuffer;
  /** Gives a buffer back. It is not used again by the core. */
  free(buffer: DeviceBuffer): void;
  /** Copies host data into a buffer, starting at element `offset` (default 0). */
  write(buffer: DeviceBuffer, data: TypedArray, offset?: number): void;
  /**
   * Resolves with a host copy of the first `numel` elements, as they are
   * after every kernel called before this `read`. Later kernels must not
   * change what it resolves with.
   */
  read(buffer: DeviceBuffer, numel: number, dtype: DType): Promise<TypedArray>;

  /** `out[i] = value` for `i < numel`. */
  fill(out: DeviceBuffer, value: number, numel: number, dtype: DType): void;
  /** Elementwise conversion, float to int truncating toward zero. */
  cast(
    x: DeviceBuffer,
    out: DeviceBuffer,
    numel: number,
    from: DType,
    to: DType,
  ): void;
  /** `out[i] = op(x[i])`. */
  unary(
    op: UnaryOp,
    x: DeviceBuffer,
    out: DeviceBuffer,
    numel: number,
    dtype: DType,
  ): void;
  /** `out = op(a, b)` with broadcasting described by `layout`. */
  binary(
    op: BinaryOp,
    a: DeviceBuffer,
    b: DeviceBuffer,
    out: DeviceBuffer,
    layout: BinaryLayout,
  ): void;
  /** `out[o, i] = op over r of x[o, r, i]` (out is [outer, inner]). */
  reduce(
    op: ReduceOp,
    x: DeviceBuffer,
    out: DeviceBuffer,
    layout: AxisLayout,
  ): void;
  /** See {@link MatmulLayout}. */
  matmul(
    a: DeviceBuffer,
    b: DeviceBuffer,
    out: DeviceBuffer,
    layout: MatmulLayout,
  ): void;
  /** See {@link CopyLayout}. */
  copy(src: DeviceBuffer, dst: DeviceBuffer, layout: CopyLayout): void;
  /**
   * `out[o, j, i] = x[o, indices[j], i]` for `j < count`; `indices` is int32
   * and in range (the core checks indices it knows; out-of-range ones must
   * not crash the device). Out is [outer, count, inner].
   */
  indexSelect(
    x: DeviceBuffer,
    indices: DeviceBuffer,
    out: DeviceBuffer,
    layout: AxisLayout & { readonly count: number },
  ): void;
  /**
   * `out[i] = cond[i] != 0 ? a[i] : b[i]` with broadcasting, see
   * {@link WhereLayout}.
   */
  where(
    cond: DeviceBuffer,
    a: DeviceBuffer,
    b: DeviceBuffer,
    out: DeviceBuffer,
    layout: WhereLayout,
  ): void;
  /**
   * `out[o, j, i] = x[o, index[o, j, i], i]`: x is [outer, size, inner],
   * `index` and `out` are [outer, count, inner]. An index outside
   * `[0, size)` gives 0 and must not crash the device.
   */
  gather(
    x: DeviceBuffer,
    index: DeviceBuffer,
    out: DeviceBuffer,
    layout: GatherLayout,
  ): void;
  /**
   * The adjoint of {@link gather}: `out` ([outer, size, inner]) is set to
   * `out[o, r, i] = Σ src[o, j, i]` over the j with `index[o, j, i] = r`
   * (0 where none); `src` and `index` are [outer, count, inner]. Indices
   * outside `[0, size)` are skipped.
   */
  scatterAdd(
    src: DeviceBuffer,
    index: DeviceBuffer,
    out: DeviceBuffer,
    layout: GatherLayout,
  ): void;
  /**
   * Unfolds windows: `cols[n, c, ki, kj, oh, ow]` = the input element the
   * tap reads (see {@link WindowLayout}), or `padValue` where it falls
   * outside the input (0 for convolution, -inf for max pooling).
   */
  im2col(
    x: DeviceBuffer,
    cols: DeviceBuffer,
    layout: WindowLayout & { readonly padValue: number },
  ): void;
  /**
   * The adjoint of {@link im2col}: `out` ([batch, channels, height, width])
   * is set to, per input element, the sum of the `cols` entries whose tap
   * reads it. Float dtypes only.
   */
  col2im(cols: DeviceBuffer, out: DeviceBuffer, layout: WindowLayout): void;
  /**
   * Softmax over the middle axis, numerically stable (subtract the max):
   * `out[o, r, i] = exp(x[o,r,i] - m) / Σ exp(x[o,·,i] - m)`, or with `log`
   * `x[o,r,i] - m - log Σ exp(x[o,·,i] - m)`. Float dtypes only.
   */
  softmax(
    x: DeviceBuffer,
    out: DeviceBuffer,
    layout: AxisLayout & { readonly log: boolean },
  ): void;
  /** See {@link RandomLayout}. */
  random(out: DeviceBuffer, layout: RandomLayout): void;

  /** Bytes held now. */
  memory(): MemoryInfo;
  /** Releases the device and everything it holds. */
  destroy(): void;
}

/** What a backend factory returns: a way to start devices. */
export interface Backend {
  /**
   * Starts device number `index` (0, 1, ...). Called once per index. May be
   * async and may throw (no adapter, device refused): the error is shown to
   * the user.
   */
  createDevice(index: number): BackendDevice | Promise<BackendDevice>;
}

/**
 * Makes a backend, or throws / rejects when it cannot run here (no adapter):
 * the registry then skips it and keeps the reason for its error messages.
 */
export type BackendFactory = () => Backend | Promise<Backend>;
