/**
 * The backend contract: everything a backend implements, and nothing else.
 *
 * A backend is a plugin registered with `registerBackend(name, factory,
 * { priority })`. Its factory returns a {@link Backend}, whose
 * `createDevice(index)` starts one device: memory (`allocate`, `free`,
 * `write`, `read`) plus one typed kernel table, {@link KernelTable}. Each
 * kernel takes one argument record ({@link KernelArgs}), as TensorFlow.js's
 * `kernel_names.ts` types its kernels. The core never looks inside a buffer;
 * the backend never sees a tensor, a shape object or a gradient. A third
 * backend is written from this file alone: implement {@link DeviceImpl} over
 * your own buffer type and hand it to {@link wrapDevice}, which does the
 * device-lost checks and buffer unwrapping for every call.
 *
 * Kernels are required primitives or optional fused kernels
 * ({@link OPTIONAL_KERNELS}): the core composes a fused kernel from
 * primitives when a backend leaves it out (as burn's default ops do).
 *
 * Rules every kernel follows:
 * - Buffers hold `numel` elements of one dtype, contiguous, row-major.
 * - Argument records name inputs `x` (one input) or `a`, `b`, then other
 *   inputs (`indices`), the output `out`, the index space, attributes, and
 *   `dtype` (the inputs' dtype; the output's too unless said) last.
 * - Kernels are called synchronously and return nothing: they may run now
 *   (cpu) or be queued on the device (webgpu), but their effects must be
 *   visible, in call order, to every later call on the same device,
 *   `read` included. The core orders work ACROSS devices itself, so a kernel
 *   never waits for another device.
 * - `out` never aliases an input. (The optimizer kernels, `adam` and `sgd`,
 *   have no `out`: they update their state buffers in place.)
 * - Input dtypes are already checked and equal (the core casts first), and
 *   every buffer argument was allocated by this same device.
 * - Errors found later (GPU validation, out of memory) are raised by the next
 *   `read`, naming the kernel that failed. After the device is lost every
 *   call throws `DeviceLostError` (from `src/errors.ts`).
 * @module
 */

import { type DType, dtypeOfArray, toHost, type TypedArray } from "../dtype.ts";

export type { DType, TypedArray };

/** An opaque handle to memory owned by one device. */
export type DeviceBuffer = object;

/**
 * Elementwise functions of one operand. Float dtypes only, except `neg`,
 * `abs`, `relu`, `sign`, `floor`, `ceil`, `round` and `square`, which also
 * take int32 (`floor`, `ceil`, `round` are then the identity). NaN in gives
 * NaN out, except `sign(NaN) = 0` (and `sign(-0) = +0`), as PyTorch.
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
  /** The error function. */
  | "erf"
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
 * operands' dtype (false with a NaN operand, except `ne`). `div` on int32
 * truncates toward zero; `pow` is float only, with `pow(x, 0) = pow(1, y) = 1`
 * even for NaN; `fmod` is float only and exact (C's); `maximum` and `minimum` propagate NaN. The bitwise ops are
 * int32 only; shift counts are taken modulo 32 (as PyTorch 1.13's cpu
 * kernels, x86's rule) and `rightShift` is arithmetic (fills with the sign).
 */
export type BinaryOp =
  | "add"
  | "sub"
  | "mul"
  | "div"
  | "pow"
  | "fmod"
  | "maximum"
  | "minimum"
  | "eq"
  | "ne"
  | "lt"
  | "le"
  | "gt"
  | "ge"
  | "bitwiseAnd"
  | "bitwiseOr"
  | "bitwiseXor"
  | "leftShift"
  | "rightShift";

/**
 * Reductions over the middle axis of an [outer, size, inner] view. `argmax`
 * and `argmin` write int32 indices (the first extreme index, a NaN counting
 * as the extreme, as PyTorch); the others write the input dtype, `max` and
 * `min` propagating NaN. `size` is at least 1.
 */
export type ReduceOp = "sum" | "max" | "min" | "argmax" | "argmin";

/** The [outer, size, inner] view a reduction, softmax or index select works on. */
export interface AxisView {
  /** Product of the dims before the axis. */
  readonly outer: number;
  /** Length of the axis. */
  readonly size: number;
  /** Product of the dims after the axis. */
  readonly inner: number;
}

/** `out[i] = value` for `i < numel`. */
export interface FillArgs<B = DeviceBuffer> {
  /** Written. */
  readonly out: B;
  /** Elements to write. */
  readonly numel: number;
  /** The value (already representable in `dtype`). */
  readonly value: number;
  /** The element type of `out`. */
  readonly dtype: DType;
}

/**
 * Elementwise conversion from `dtype` to `to`. Float to int32 truncates
 * toward zero; NaN, ±inf and values outside the int32 range give
 * -2147483648, as PyTorch on x86 (see {@link toInt32}).
 */
export interface CastArgs<B = DeviceBuffer> {
  /** Read. */
  readonly x: B;
  /** Written, of dtype `to`. */
  readonly out: B;
  /** Elements to convert. */
  readonly numel: number;
  /** The dtype of `x`. */
  readonly dtype: DType;
  /** The dtype of `out`. */
  readonly to: DType;
}

/** `out[i] = op(x[i])` for `i < numel`. */
export interface UnaryArgs<B = DeviceBuffer> {
  /** The function. */
  readonly op: UnaryOp;
  /** Read. */
  readonly x: B;
  /** Written. */
  readonly out: B;
  /** Elements. */
  readonly numel: number;
  /** The element type. */
  readonly dtype: DType;
}

/**
 * `out = op(a, b)` with broadcasting: for every index tuple `i` of `shape`,
 * `out[row-major i] = op(a[Σ i_d aStrides[d]], b[Σ i_d bStrides[d]])`.
 */
export interface BinaryArgs<B = DeviceBuffer> {
  /** The function. */
  readonly op: BinaryOp;
  /** First operand. */
  readonly a: B;
  /** Second operand. */
  readonly b: B;
  /** Written, contiguous over `shape`. */
  readonly out: B;
  /** Shape of `out`. Length 0 means a single element. */
  readonly shape: readonly number[];
  /** Element strides of `a` for each output dim; 0 where `a` is broadcast. */
  readonly aStrides: readonly number[];
  /** Element strides of `b` for each output dim; 0 where `b` is broadcast. */
  readonly bStrides: readonly number[];
  /** The element type of `a`, `b` and `out`. */
  readonly dtype: DType;
}

/** `out[o, i] = op over r of x[o, r, i]`; `out` is [outer, inner]. */
export interface ReduceArgs<B = DeviceBuffer> extends AxisView {
  /** The reduction. */
  readonly op: ReduceOp;
  /** Read. */
  readonly x: B;
  /** Written (int32 for `argmax` / `argmin`). */
  readonly out: B;
  /** The element type of `x`. */
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
export interface MatmulArgs<B = DeviceBuffer> {
  /** Left operands. */
  readonly a: B;
  /** Right operands. */
  readonly b: B;
  /** Written. */
  readonly out: B;
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
 * `out[outOffset + Σ i_d * outStrides[d]] = x[xOffset + Σ i_d * xStrides[d]]`.
 * This one kernel is permute, expand, narrow and one input of a concat.
 * Output positions never repeat; input positions may (expand).
 */
export interface CopyArgs<B = DeviceBuffer> {
  /** Read. */
  readonly x: B;
  /** Written (only the positions named). */
  readonly out: B;
  /** The index space copied. */
  readonly shape: readonly number[];
  /** Element strides of `x` per dim. */
  readonly xStrides: readonly number[];
  /** First element of `x`. */
  readonly xOffset: number;
  /** Element strides of `out` per dim. */
  readonly outStrides: readonly number[];
  /** First element of `out`. */
  readonly outOffset: number;
  /** The element type. */
  readonly dtype: DType;
}

/**
 * `out[o, j, i] = x[o, indices[j], i]` for `j < count`; `indices` is int32
 * and in range (the core checks indices it knows; out-of-range ones must
 * not crash the device). `out` is [outer, count, inner].
 */
export interface IndexSelectArgs<B = DeviceBuffer> extends AxisView {
  /** Read, [outer, size, inner]. */
  readonly x: B;
  /** Read, `count` int32 indices. */
  readonly indices: B;
  /** Written. */
  readonly out: B;
  /** Number of indices. */
  readonly count: number;
  /** The element type of `x` and `out`. */
  readonly dtype: DType;
}

/**
 * The ternary select with broadcasting: for every index tuple `i` of
 * `shape`, `out[i] = cond[i] != 0 ? a[i] : b[i]`, each operand read through
 * its strides. A float `cond` is true where it is not ±0 (NaN is true, as
 * `bool(nan)` in PyTorch).
 */
export interface WhereArgs<B = DeviceBuffer> {
  /** The condition, of dtype `condDtype`. */
  readonly cond: B;
  /** Taken where `cond` is true. */
  readonly a: B;
  /** Taken where `cond` is false. */
  readonly b: B;
  /** Written, contiguous over `shape`. */
  readonly out: B;
  /** Shape of `out`. Length 0 means a single element. */
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
 * The [outer, ·, inner] views of `gather` and `scatterAdd`: the data side
 * has `size` rows along the axis, the index side (int32, [outer, count,
 * inner]) `count`.
 */
export interface GatherView extends AxisView {
  /** Length of the axis on the index side. */
  readonly count: number;
}

/**
 * `out[o, j, i] = x[o, index[o, j, i], i]`: `x` is [outer, size, inner],
 * `index` and `out` are [outer, count, inner]. An index outside
 * `[0, size)` gives 0 and must not crash the device.
 */
export interface GatherArgs<B = DeviceBuffer> extends GatherView {
  /** Read, [outer, size, inner]. */
  readonly x: B;
  /** Read, int32 [outer, count, inner]. */
  readonly index: B;
  /** Written, [outer, count, inner]. */
  readonly out: B;
  /** The dtype of `x` and `out`. */
  readonly dtype: DType;
}

/**
 * The adjoint of `gather`: `out` ([outer, size, inner]) is set to
 * `out[o, r, i] = Σ x[o, j, i]` over the j with `index[o, j, i] = r` (0
 * where none); `x` and `index` are [outer, count, inner]. Indices outside
 * `[0, size)` are skipped.
 */
export interface ScatterAddArgs<B = DeviceBuffer> extends GatherView {
  /** Read, [outer, count, inner]. */
  readonly x: B;
  /** Read, int32 [outer, count, inner]. */
  readonly index: B;
  /** Written (every element), [outer, size, inner]. */
  readonly out: B;
  /** The dtype of `x` and `out`. */
  readonly dtype: DType;
}

/**
 * `scatterReduce` (optional), torch's `scatter_reduce` on {@link ScatterAddArgs}' view (indices
 * out of range skipped): `out` is `self` with the sources sent to each place combined, in order
 * along `count`, by `mode`: "assign", the last wins; "sum", "prod" (int32 wrapping), "mean" (that
 * sum over the values combined, int32 rounded down); "amax", "amin", a NaN wins, else the first
 * extreme. With `includeSelf` (not for "assign") `self` comes first, else the first source (sum,
 * mean: 0 + it); places no source reaches keep `self`. Each step is rounded to the dtype.
 */
export interface ScatterReduceArgs<B = DeviceBuffer> extends ScatterAddArgs<B> {
  /** Read, [outer, size, inner]. */
  readonly self: B;
  /** Written, int32 like `self`, the sources at each place; or null. */
  readonly counts: B | null;
  /** How one place's values combine. */
  readonly mode: "assign" | "sum" | "prod" | "mean" | "amax" | "amin";
  /** Whether `self` takes part. */
  readonly includeSelf: boolean;
}

/**
 * The sliding windows of a 2-d convolution or pooling over an input
 * [batch, channels, height, width] (contiguous): output position
 * (oh, ow) and kernel tap (ki, kj) read input row
 * `oh * strideH - padH + ki * dilationH` and column
 * `ow * strideW - padW + kj * dilationW`. The unfolded matrix ("columns")
 * is [batch, channels, kernelH, kernelW, outH, outW], contiguous.
 */
export interface WindowView {
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
}

/**
 * Unfolds windows: `out[n, c, ki, kj, oh, ow]` = the input element the tap
 * reads (see {@link WindowView}), or `padValue` where it falls outside the
 * input (0 for convolution, -inf for max pooling).
 */
export interface Im2colArgs<B = DeviceBuffer> extends WindowView {
  /** Read, [batch, channels, height, width]. */
  readonly x: B;
  /** Written, the columns [batch, channels, kernelH, kernelW, outH, outW]. */
  readonly out: B;
  /** The value of taps outside the input. */
  readonly padValue: number;
  /** The element type. */
  readonly dtype: DType;
}

/**
 * The adjoint of `im2col`: `out` ([batch, channels, height, width]) is set
 * to, per input element, the sum of the columns entries whose tap reads it.
 * Float dtypes only.
 */
export interface Col2imArgs<B = DeviceBuffer> extends WindowView {
  /** Read, the columns [batch, channels, kernelH, kernelW, outH, outW]. */
  readonly x: B;
  /** Written (every element), [batch, channels, height, width]. */
  readonly out: B;
  /** The element type. */
  readonly dtype: DType;
}

/**
 * Counter-based random numbers, identical on every backend for the same
 * seed. Element `i` of `out` uses `h(x) = lowbias32(x)`:
 * `x ^= x >>> 16; x = x * 0x7feb352d; x ^= x >>> 15; x = x * 0x846ca68b; x ^= x >>> 16`
 * (u32 arithmetic, wrapping), `key = h(seed)`, `u(j) = (h(j ^ key) >>> 8) * 2^-24`
 * in [0, 1) (exact in float32). `uniform`: `out[i] = low + (high - low) * u(i)`.
 * `normal`: `out[i] = mean + std * sqrt(-2 ln(1 - u(2i))) * cos(2π u(2i+1))`.
 * Float dtypes only.
 */
export interface RandomArgs<B = DeviceBuffer> {
  /** Written. */
  readonly out: B;
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
 * Optional fused kernel. Softmax over the middle axis, numerically stable
 * (subtract the max): `out[o, r, i] = exp(x[o,r,i] - m) / Σ exp(x[o,·,i] - m)`,
 * or with `log` `x[o,r,i] - m - log Σ exp(x[o,·,i] - m)`. A NaN makes its
 * whole row NaN. Float dtypes only.
 */
export interface SoftmaxArgs<B = DeviceBuffer> extends AxisView {
  /** Read. */
  readonly x: B;
  /** Written. */
  readonly out: B;
  /** Log-softmax instead. */
  readonly log: boolean;
  /** The element type. */
  readonly dtype: DType;
}

/**
 * Optional fused kernels of one float operand: `gelu` is `x Φ(x)` with the
 * exact erf (PyTorch's default GELU); `geluDerivative` is its derivative
 * `Φ(x) + x φ(x)`. NaN gives NaN.
 */
export interface GeluArgs<B = DeviceBuffer> {
  /** Read. */
  readonly x: B;
  /** Written. */
  readonly out: B;
  /** Elements. */
  readonly numel: number;
  /** The element type. */
  readonly dtype: DType;
}

/**
 * Optional fused kernel: one Adam step (AdamW with `decoupled`) IN PLACE on
 * `param`, `expAvg`, `expAvgSq`, as PyTorch's single-tensor update with every
 * operation and scalar rounded to `dtype`; `g = maximize ? -grad : grad`, then
 * `param *= 1 - lr·weightDecay` (decoupled) or `g += weightDecay·param`,
 * `expAvg = expAvg·beta1 + g·(1-beta1)`, `expAvgSq = expAvgSq·beta2 + (g·(1-beta2))·g`,
 * `param += (expAvg·-stepSize) / (sqrt(expAvgSq) / correction2Sqrt + eps)`. Float only.
 */
export interface AdamArgs<B = DeviceBuffer> {
  /** Read and written. */
  readonly param: B;
  /** Read. */
  readonly grad: B;
  /** First moment: read and written. */
  readonly expAvg: B;
  /** Second moment: read and written. */
  readonly expAvgSq: B;
  /** Elements of each. */
  readonly numel: number;
  /** Learning rate (used by decoupled weight decay). */
  readonly lr: number;
  /** Decay rate of the first moment. */
  readonly beta1: number;
  /** Decay rate of the second moment. */
  readonly beta2: number;
  /** Added to the denominator. */
  readonly eps: number;
  /** Weight decay (0: none). */
  readonly weightDecay: number;
  /** AdamW: decay the parameter, not the gradient. */
  readonly decoupled: boolean;
  /** Ascend instead (the gradient is negated). */
  readonly maximize: boolean;
  /** `lr / (1 - beta1^step)`. */
  readonly stepSize: number;
  /** `sqrt(1 - beta2^step)`. */
  readonly correction2Sqrt: number;
  /** The element type of every buffer. */
  readonly dtype: DType;
}

/**
 * Optional fused kernel: one plain SGD step (no momentum) IN PLACE on
 * `param`, each operation rounded to `dtype` as PyTorch: `d = maximize ? -grad
 * : grad`, `d += weightDecay·param` (if not 0), `param -= d·lr`. Float only.
 */
export interface SgdArgs<B = DeviceBuffer> {
  /** Read and written. */
  readonly param: B;
  /** Read. */
  readonly grad: B;
  /** Elements of each. */
  readonly numel: number;
  /** Learning rate. */
  readonly lr: number;
  /** L2 penalty added to the gradient (0: none). */
  readonly weightDecay: number;
  /** Ascend instead (the gradient is negated). */
  readonly maximize: boolean;
  /** The element type of both buffers. */
  readonly dtype: DType;
}

/** Rows of class scores and their int32 class indices (the cross-entropy kernels). */
export interface ClassRows<B = DeviceBuffer> {
  /** Read, [rows] int32. */
  readonly target: B;
  /** Rows. */
  readonly rows: number;
  /** Classes (at least 1). */
  readonly classes: number;
  /** The target value that contributes nothing. */
  readonly ignoreIndex: number;
  /** The element type of every float buffer. */
  readonly dtype: DType;
}

/**
 * Optional fused kernel: per row, `losses[r] = log Σ_c exp(logits[r, c]) -
 * logits[r, target[r]]` (max-subtracted), `weights[r] = 1` (both 0 where
 * `target[r] === ignoreIndex`) and `probs[r]` = the row's softmax. A target
 * outside `[0, classes)` other than `ignoreIndex` gives a NaN loss. Float only.
 */
export interface CrossEntropyArgs<B = DeviceBuffer> extends ClassRows<B> {
  /** Read, [rows, classes]. */
  readonly logits: B;
  /** Written, [rows]. */
  readonly losses: B;
  /** Written, [rows]: 1, or 0 where the target is ignored. */
  readonly weights: B;
  /** Written, [rows, classes]. */
  readonly probs: B;
}

/**
 * Optional fused kernel: the logits' gradient of {@link CrossEntropyArgs}'
 * losses from its `probs`: `out[r, c] = gradLoss[r] · (probs[r, c] - (c ===
 * target[r]))`, 0 on ignored rows, NaN for out-of-range targets. Float only.
 */
export interface CrossEntropyBackwardArgs<B = DeviceBuffer> extends ClassRows<B> {
  /** Read, [rows, classes]. */
  readonly probs: B;
  /** Read, [rows]. */
  readonly gradLoss: B;
  /** Written, [rows, classes]. */
  readonly out: B;
}

/**
 * Optional fused kernel: {@link CrossEntropyArgs}' losses summed in one launch
 * (rounded to `dtype` first): `loss[0]` = that sum, divided by `weightSum[0]`
 * = Σ weights when `mean` (NaN if every row is ignored, as PyTorch); `probs`
 * as there. Float only.
 */
export interface CrossEntropyReducedArgs<B = DeviceBuffer>
  extends Omit<CrossEntropyArgs<B>, "losses" | "weights"> {
  /** Written, 1 element. */
  readonly loss: B;
  /** Written, 1 element. */
  readonly weightSum: B;
  /** Divide by `weightSum` (PyTorch's "mean"), else the sum. */
  readonly mean: boolean;
}

/**
 * Optional fused kernel: {@link CrossEntropyBackwardArgs} for
 * {@link CrossEntropyReducedArgs}' `loss`: `gradLoss` has 1 element, used on
 * every row, divided by `weightSum[0]` (rounded) when `mean`.
 */
export interface CrossEntropyReducedBackwardArgs<B = DeviceBuffer>
  extends CrossEntropyBackwardArgs<B>, Pick<CrossEntropyReducedArgs<B>, "weightSum" | "mean"> {}

/** Optional fused kernel, PyTorch's `gelu_backward`: `out = grad * geluDerivative(x)` (rounded). */
export interface GeluBackwardArgs<B = DeviceBuffer> extends GeluArgs<B> {
  /** The gradient of the output, read. */
  readonly grad: B;
}

/** Optional fused kernel, PyTorch's `addmm`: {@link MatmulArgs}' product plus `bias` on every row. */
export interface AddmmArgs<B = DeviceBuffer> extends MatmulArgs<B> {
  /** `n` elements, read. */
  readonly bias: B;
}

/** A training batch norm's operands: `x` is [outer, channels, inner], statistics per channel. */
export interface BatchNormRows<B = DeviceBuffer> {
  /** Read, [outer, channels, inner]. */
  readonly x: B;
  /** Read, [channels]. */
  readonly weight: B;
  /** [channels]: the batch mean, written by `batchNorm`, read by `batchNormBackward`. */
  readonly mean: B;
  /** [channels]: `1 / sqrt(biased variance + eps)`, written and read likewise. */
  readonly invstd: B;
  /** Leading dim (the batch). */
  readonly outer: number;
  /** Channels. */
  readonly channels: number;
  /** Trailing elements per channel and sample (H·W). */
  readonly inner: number;
  /** The element type of every buffer. */
  readonly dtype: DType;
}

/**
 * Optional fused kernel, PyTorch's training `batch_norm`: per channel the
 * mean and biased `variance` over dims 0 and 2 (float64 sums), then
 * `out = (x - mean) · invstd · weight + bias`. Float only.
 */
export interface BatchNormArgs<B = DeviceBuffer> extends BatchNormRows<B> {
  /** Read, [channels]. */
  readonly bias: B;
  /** Written, [channels]. */
  readonly variance: B;
  /** Written, like `x`. */
  readonly out: B;
  /** Added to the variance. */
  readonly eps: number;
}

/**
 * Optional fused kernel, `batch_norm`'s backward from the saved `mean` and
 * `invstd`: with `gsum = Σ grad` and `gxc = Σ grad · (x - mean)` per channel,
 * `gradWeight = gxc · invstd`, `gradBias = gsum`, `gradInput = weight ·
 * invstd · (grad - gsum/n - (x - mean) · invstd² · gxc/n)`, n = outer·inner.
 */
export interface BatchNormBackwardArgs<B = DeviceBuffer> extends BatchNormRows<B> {
  /** Read, like `x`. */
  readonly grad: B;
  /** Written, like `x`. */
  readonly gradInput: B;
  /** Written, [channels]. */
  readonly gradWeight: B;
  /** Written, [channels]. */
  readonly gradBias: B;
}

/**
 * Optional fused kernel, PyTorch's `max_pool2d_with_indices`: `out[n, c, oh,
 * ow]` = the largest input element its window reads (padding never wins; the
 * last NaN of a window wins, as PyTorch 1.13 cpu; else the first on ties) and
 * `indices` its `h · width + w` (int32; the window's first element when every
 * one is -inf). Float only.
 */
export interface MaxPool2dArgs<B = DeviceBuffer> extends WindowView {
  /** Read, [batch, channels, height, width]. */
  readonly x: B;
  /** Written, [batch, channels, outH, outW]. */
  readonly out: B;
  /** Written, int32, like `out`. */
  readonly indices: B;
  /** The element type of `x` and `out`. */
  readonly dtype: DType;
}

/**
 * Optional fused kernel, PyTorch's `sort(stable=True)` of each row
 * `x[o, ·, i]` of the [outer, size, inner] view (`x` contiguous), keeping the
 * first `k` of each sorted row: `values[o, r, i]` (r < k) is the row's r-th
 * element in order, copied bit for bit (the sign of zero, NaN payloads), and
 * `indices[o, r, i]` (int32) its position `0 ≤ p < size` in the row. The
 * order is numeric, smallest first (largest first when `descending`); every
 * NaN counts as larger than +inf (so last ascending, first descending);
 * -0 equals +0; equal elements (NaNs among them) keep their row order, in
 * both directions. Any dtype the backend has (float32, float64, int32).
 * Launched only for a non-empty `x` with size ≥ 2; `k` may be 0 (nothing to
 * write); `values` and `indices` are fresh buffers, never `x`.
 */
export interface SortArgs<B = DeviceBuffer> extends AxisView {
  /** Read, [outer, size, inner]. */
  readonly x: B;
  /** Written, [outer, k, inner], `x`'s dtype. */
  readonly values: B;
  /** Written, [outer, k, inner], int32. */
  readonly indices: B;
  /** Leading sorted elements kept per row, 0 ≤ k ≤ size (`size`: a full sort; less: topk). */
  readonly k: number;
  /** Largest first. */
  readonly descending: boolean;
  /** The element type of `x` and `values`. */
  readonly dtype: DType;
}

/**
 * `segmentReduce` (optional): embeddingBag's bags in one pass. Position i is row `index[i]`
 * of the table; segment s is positions [bounds[s], bounds[s + 1]) (clamped into [0, count]),
 * skipping rows outside [0, rows). "max": `out[s, c]` is the first maximum of column c (only
 * a greater value replaces the held one, as PyTorch's: a NaN stays where first, never wins
 * later), `indices[s, c]` its row; 0 and -1 when empty. "sum": 0 plus each row times
 * `weights[i]` (if given), in order, each step rounded to the dtype; "mean" divides that by
 * the rows counted. `transpose` (sum, mean): the adjoint, `x` [size, inner] and `out` [rows,
 * inner] = 0 plus x[s] times that factor at each position's row, in order. Float `x` only.
 */
export interface SegmentReduceArgs<B = DeviceBuffer> {
  /** Read, [rows, inner]; [size, inner] with `transpose`. */
  readonly x: B;
  /** Read, int32 [count]: the row of `x` at each position. */
  readonly index: B;
  /** Read, int32 [size + 1]: segment s is positions bounds[s] to bounds[s + 1]. */
  readonly bounds: B;
  /** Read, [count], `x`'s dtype: a factor per position (sum only), or null. */
  readonly weights: B | null;
  /** Written, [size, inner]; [rows, inner] with `transpose`. */
  readonly out: B;
  /** Written, int32 [size, inner] (max only), or null. */
  readonly indices: B | null;
  /** How a segment's rows are reduced. */
  readonly mode: "sum" | "mean" | "max";
  /** The adjoint of sum or mean: segment rows added at their positions' rows. */
  readonly transpose: boolean;
  /** Rows of the table. */
  readonly rows: number;
  /** Positions (the length of `index`). */
  readonly count: number;
  /** Segments. */
  readonly size: number;
  /** Columns. */
  readonly inner: number;
  /** The element type of `x` and `out`. */
  readonly dtype: DType;
}

/**
 * `ctcAlpha` (optional): the CTC loss's forward variables, a log-space
 * recurrence: `out[0] = x[0] + start`, then `out[t, n, j] = lse(out[t - 1,
 * n, sources[n, k, j]] for k < 3) + x[t, n, j]`, where `lse(terms) =
 * log(max(Σ exp(term − m), 1/2)) + top`, top the largest term and m top
 * clamped into [−3e38, 3e38] (terms all −inf give −inf).
 */
export interface CtcAlphaArgs<B = DeviceBuffer> {
  /** Read, [steps, batch, states]. */
  readonly x: B;
  /** Read, [batch, states]. */
  readonly start: B;
  /** Read, int32 [batch, 3, states], each in [0, states). */
  readonly sources: B;
  /** Written, [steps, batch, states]. */
  readonly out: B;
  /** Frames. */
  readonly steps: number;
  /** Rows (samples). */
  readonly batch: number;
  /** States per row. */
  readonly states: number;
  /** The element type of `x`, `start` and `out`. */
  readonly dtype: DType;
}

/**
 * `ctcAlphaBackward` (optional): the gradient `out` of {@link CtcAlphaArgs}'
 * x from `g`, that of its `alpha` (the forward's `out`): from the last frame
 * back, `out[t] = g[t]` plus what each state of frame t + 1 sends back, each
 * term of its lse getting `exp(term − m) / Σ exp(term' − m)` of the state's
 * gradient (nothing where that sum is below 1/2).
 */
export interface CtcAlphaBackwardArgs<B = DeviceBuffer>
  extends Omit<CtcAlphaArgs<B>, "x" | "start"> {
  /** Read, [steps, batch, states]: the forward's `out`. */
  readonly alpha: B;
  /** Read, [steps, batch, states]. */
  readonly g: B;
}

/**
 * The matrices the optional linalg kernels read: `a` [batch, m, n], contiguous, float32 or
 * float64 (`dtype`, also that of every output). Launched for batch·m·n > 0. Computed in float64
 * or better where the backend can; a matrix with a NaN or ±inf may give anything but must not
 * hang (linalg's eigh and svd refuse such input at the next read, as PyTorch).
 */
export interface MatricesArgs<B = DeviceBuffer> {
  /** Read, [batch, m, n]. */
  readonly a: B;
  /** Matrices. */
  readonly batch: number;
  /** Rows. */
  readonly m: number;
  /** Columns. */
  readonly n: number;
  /** The element type. */
  readonly dtype: DType;
}

/**
 * Optional kernel, `torch.linalg.eigh` of each symmetric matrix (m = n) given by its lower
 * triangle: eigenvalues ascending in `values` [batch, n], orthonormal eigenvectors as the
 * columns of `vectors` [batch, n, n]; each vector's sign is the backend's choice.
 */
export interface EighArgs<B = DeviceBuffer> extends MatricesArgs<B> {
  /** Written. */
  readonly values: B;
  /** Written. */
  readonly vectors: B;
}

/**
 * Optional kernel, the reduced `torch.linalg.svd`, k = min(m, n): `u` [batch, m, k] and `vh`
 * [batch, k, n] with orthonormal columns (rows), `s` [batch, k] descending and ≥ 0; a pair's
 * signs are the backend's choice.
 */
export interface SvdArgs<B = DeviceBuffer> extends MatricesArgs<B> {
  /** Written. */
  readonly u: B;
  /** Written. */
  readonly s: B;
  /** Written. */
  readonly vh: B;
}

/**
 * Optional kernel, `torch.linalg.qr` by Householder reflections with LAPACK's signs (`geqrf`:
 * R's diagonal -sign(x₀)·‖x‖, sign(0) = 1; a column zero below the diagonal left as it is):
 * `q` [batch, m, c], `r` [batch, c, n] (zero below its diagonal), c = m when `complete`,
 * else min(m, n).
 */
export interface QrArgs<B = DeviceBuffer> extends MatricesArgs<B> {
  /** Written. */
  readonly q: B;
  /** Written. */
  readonly r: B;
  /** Square Q. */
  readonly complete: boolean;
}

/** Every kernel's argument record, by kernel name, over buffers of type `B`. */
export interface KernelArgs<B = DeviceBuffer> {
  /** See {@link FillArgs}. */
  fill: FillArgs<B>;
  /** See {@link CastArgs}. */
  cast: CastArgs<B>;
  /** See {@link UnaryArgs}. */
  unary: UnaryArgs<B>;
  /** See {@link BinaryArgs}. */
  binary: BinaryArgs<B>;
  /** See {@link ReduceArgs}. */
  reduce: ReduceArgs<B>;
  /** See {@link MatmulArgs}. */
  matmul: MatmulArgs<B>;
  /** See {@link CopyArgs}. */
  copy: CopyArgs<B>;
  /** See {@link IndexSelectArgs}. */
  indexSelect: IndexSelectArgs<B>;
  /** See {@link RandomArgs}. */
  random: RandomArgs<B>;
  /** See {@link WhereArgs}. */
  where: WhereArgs<B>;
  /** See {@link GatherArgs}. */
  gather: GatherArgs<B>;
  /** See {@link ScatterAddArgs}. */
  scatterAdd: ScatterAddArgs<B>;
  /** See {@link Im2colArgs}. */
  im2col: Im2colArgs<B>;
  /** See {@link Col2imArgs}. */
  col2im: Col2imArgs<B>;
  /** Optional. See {@link SoftmaxArgs}. */
  softmax: SoftmaxArgs<B>;
  /** Optional. See {@link GeluArgs}. */
  gelu: GeluArgs<B>;
  /** Optional. See {@link GeluArgs}. */
  geluDerivative: GeluArgs<B>;
  /** Optional. See {@link GeluBackwardArgs}. */
  geluBackward: GeluBackwardArgs<B>;
  /** Optional. See {@link AddmmArgs}. */
  addmm: AddmmArgs<B>;
  /** Optional. See {@link AdamArgs}. */
  adam: AdamArgs<B>;
  /** Optional. See {@link SgdArgs}. */
  sgd: SgdArgs<B>;
  /** Optional. See {@link CrossEntropyArgs}. */
  crossEntropy: CrossEntropyArgs<B>;
  /** Optional. See {@link CrossEntropyBackwardArgs}. */
  crossEntropyBackward: CrossEntropyBackwardArgs<B>;
  /** Optional. See {@link BatchNormArgs}. */
  batchNorm: BatchNormArgs<B>;
  /** Optional. See {@link BatchNormBackwardArgs}. */
  batchNormBackward: BatchNormBackwardArgs<B>;
  /** Optional. See {@link MaxPool2dArgs}. */
  maxPool2d: MaxPool2dArgs<B>;
  /** Optional. See {@link CrossEntropyReducedArgs}. */
  crossEntropyReduced: CrossEntropyReducedArgs<B>;
  /** Optional. See {@link CrossEntropyReducedBackwardArgs}. */
  crossEntropyReducedBackward: CrossEntropyReducedBackwardArgs<B>;
  /** Optional. See {@link SortArgs}. */
  sort: SortArgs<B>;
  /** Optional. See {@link EighArgs}. */
  eigh: EighArgs<B>;
  /** Optional. See {@link SvdArgs}. */
  svd: SvdArgs<B>;
  /** Optional. See {@link QrArgs}. */
  qr: QrArgs<B>;
  /** Optional. See {@link SegmentReduceArgs}. */
  segmentReduce: SegmentReduceArgs<B>;
  /** Optional. See {@link CtcAlphaArgs}. */
  ctcAlpha: CtcAlphaArgs<B>;
  /** Optional. See {@link CtcAlphaBackwardArgs}. */
  ctcAlphaBackward: CtcAlphaBackwardArgs<B>;
  /** Optional. See {@link ScatterReduceArgs}. */
  scatterReduce: ScatterReduceArgs<B>;
}

/** A kernel's name. */
export type KernelName = keyof KernelArgs;

/** The fused kernels a backend may leave out; the core composes them from primitives. */
export const OPTIONAL_KERNELS = [
  "softmax",
  "gelu",
  "geluDerivative",
  "geluBackward",
  "addmm",
  "adam",
  "sgd",
  "crossEntropy",
  "crossEntropyBackward",
  "batchNorm",
  "batchNormBackward",
  "maxPool2d",
  "crossEntropyReduced",
  "crossEntropyReducedBackward",
  "sort",
  "eigh",
  "svd",
  "qr",
  "segmentReduce",
  "ctcAlpha",
  "ctcAlphaBackward",
  "scatterReduce",
] as const;

/** A kernel the core composes when a backend leaves it out. */
export type OptionalKernelName = typeof OPTIONAL_KERNELS[number];

/** A kernel every backend implements. */
export type RequiredKernelName = Exclude<KernelName, OptionalKernelName>;

/** One kernel over buffers of type `B`. */
export type Kernel<K extends KernelName, B = DeviceBuffer> = (args: KernelArgs<B>[K]) => void;

/** The kernels of one device: every required one, and the optional ones it fuses. */
export type KernelTable<B = DeviceBuffer> =
  & { readonly [K in RequiredKernelName]: Kernel<K, B> }
  & { readonly [K in OptionalKernelName]?: Kernel<K, B> };

/**
 * Kernel `K`'s arguments with every buffer passed through `buffer` (given
 * the handle and a name for errors, e.g. `"binary.a"`), every other field
 * as it was: how {@link wrapDevice} unwraps. The buffer fields are named per
 * kernel so the type checker proves every one is converted (a field left to
 * the spread keeps type `DeviceBuffer`, not `B`).
 */
export type Rebuild<K extends KernelName> = <B>(
  args: KernelArgs[K],
  buffer: (handle: DeviceBuffer, field: string) => B,
) => KernelArgs<B>[K];

/** {@link Rebuild} for every kernel. */
export const REBUILD: { readonly [K in KernelName]: Rebuild<K> } = {
  // Spread: the scalars as they are, every buffer field replaced (the types check it).
  fill: (x, u) => ({ ...x, out: u(x.out, "fill.out") }),
  cast: (x, u) => ({ ...x, x: u(x.x, "cast.x"), out: u(x.out, "cast.out") }),
  unary: (x, u) => ({ ...x, x: u(x.x, "unary.x"), out: u(x.out, "unary.out") }),
  binary: (x, u) => ({
    ...x,
    a: u(x.a, "binary.a"),
    b: u(x.b, "binary.b"),
    out: u(x.out, "binary.out"),
  }),
  reduce: (x, u) => ({ ...x, x: u(x.x, "reduce.x"), out: u(x.out, "reduce.out") }),
  matmul: (x, u) => ({
    ...x,
    a: u(x.a, "matmul.a"),
    b: u(x.b, "matmul.b"),
    out: u(x.out, "matmul.out"),
  }),
  copy: (x, u) => ({ ...x, x: u(x.x, "copy.x"), out: u(x.out, "copy.out") }),
  indexSelect: (x, u) => ({
    ...x,
    x: u(x.x, "indexSelect.x"),
    indices: u(x.indices, "indexSelect.indices"),
    out: u(x.out, "indexSelect.out"),
  }),
  random: (x, u) => ({ ...x, out: u(x.out, "random.out") }),
  where: (x, u) => ({
    ...x,
    cond: u(x.cond, "where.cond"),
    a: u(x.a, "where.a"),
    b: u(x.b, "where.b"),
    out: u(x.out, "where.out"),
  }),
  gather: (x, u) => ({
    ...x,
    x: u(x.x, "gather.x"),
    index: u(x.index, "gather.index"),
    out: u(x.out, "gather.out"),
  }),
  scatterAdd: (x, u) => ({
    ...x,
    x: u(x.x, "scatterAdd.x"),
    index: u(x.index, "scatterAdd.index"),
    out: u(x.out, "scatterAdd.out"),
  }),
  im2col: (x, u) => ({ ...x, x: u(x.x, "im2col.x"), out: u(x.out, "im2col.out") }),
  col2im: (x, u) => ({ ...x, x: u(x.x, "col2im.x"), out: u(x.out, "col2im.out") }),
  softmax: (x, u) => ({ ...x, x: u(x.x, "softmax.x"), out: u(x.out, "softmax.out") }),
  gelu: (x, u) => ({ ...x, x: u(x.x, "gelu.x"), out: u(x.out, "gelu.out") }),
  geluDerivative: (x, u) => ({
    ...x,
    x: u(x.x, "geluDerivative.x"),
    out: u(x.out, "geluDerivative.out"),
  }),
  addmm: (x, u) => ({
    ...x,
    a: u(x.a, "addmm.a"),
    b: u(x.b, "addmm.b"),
    out: u(x.out, "addmm.out"),
    bias: u(x.bias, "addmm.bias"),
  }),
  geluBackward: (x, u) => ({
    ...x,
    x: u(x.x, "geluBackward.x"),
    grad: u(x.grad, "geluBackward.grad"),
    out: u(x.out, "geluBackward.out"),
  }),
  adam: (x, u) => ({
    ...x,
    param: u(x.param, "adam.param"),
    grad: u(x.grad, "adam.grad"),
    expAvg: u(x.expAvg, "adam.expAvg"),
    expAvgSq: u(x.expAvgSq, "adam.expAvgSq"),
  }),
  crossEntropy: (x, u) => ({
    ...x,
    logits: u(x.logits, "crossEntropy.logits"),
    target: u(x.target, "crossEntropy.target"),
    losses: u(x.losses, "crossEntropy.losses"),
    weights: u(x.weights, "crossEntropy.weights"),
    probs: u(x.probs, "crossEntropy.probs"),
  }),
  crossEntropyBackward: (x, u) => ({
    ...x,
    probs: u(x.probs, "crossEntropyBackward.probs"),
    target: u(x.target, "crossEntropyBackward.target"),
    gradLoss: u(x.gradLoss, "crossEntropyBackward.gradLoss"),
    out: u(x.out, "crossEntropyBackward.out"),
  }),
  crossEntropyReduced: (x, u) => ({
    ...x,
    logits: u(x.logits, "crossEntropyReduced.logits"),
    target: u(x.target, "crossEntropyReduced.target"),
    probs: u(x.probs, "crossEntropyReduced.probs"),
    loss: u(x.loss, "crossEntropyReduced.loss"),
    weightSum: u(x.weightSum, "crossEntropyReduced.weightSum"),
  }),
  crossEntropyReducedBackward: (x, u) => ({
    ...x,
    probs: u(x.probs, "crossEntropyReducedBackward.probs"),
    target: u(x.target, "crossEntropyReducedBackward.target"),
    gradLoss: u(x.gradLoss, "crossEntropyReducedBackward.gradLoss"),
    weightSum: u(x.weightSum, "crossEntropyReducedBackward.weightSum"),
    out: u(x.out, "crossEntropyReducedBackward.out"),
  }),
  sgd: (x, u) => ({ ...x, param: u(x.param, "sgd.param"), grad: u(x.grad, "sgd.grad") }),
  batchNorm: (x, u) => ({
    ...x,
    x: u(x.x, "batchNorm.x"),
    weight: u(x.weight, "batchNorm.weight"),
    bias: u(x.bias, "batchNorm.bias"),
    mean: u(x.mean, "batchNorm.mean"),
    invstd: u(x.invstd, "batchNorm.invstd"),
    variance: u(x.variance, "batchNorm.variance"),
    out: u(x.out, "batchNorm.out"),
  }),
  batchNormBackward: (x, u) => ({
    ...x,
    x: u(x.x, "batchNormBackward.x"),
    weight: u(x.weight, "batchNormBackward.weight"),
    mean: u(x.mean, "batchNormBackward.mean"),
    invstd: u(x.invstd, "batchNormBackward.invstd"),
    grad: u(x.grad, "batchNormBackward.grad"),
    gradInput: u(x.gradInput, "batchNormBackward.gradInput"),
    gradWeight: u(x.gradWeight, "batchNormBackward.gradWeight"),
    gradBias: u(x.gradBias, "batchNormBackward.gradBias"),
  }),
  maxPool2d: (x, u) => ({
    ...x,
    x: u(x.x, "maxPool2d.x"),
    out: u(x.out, "maxPool2d.out"),
    indices: u(x.indices, "maxPool2d.indices"),
  }),
  sort: (x, u) => ({
    ...x,
    x: u(x.x, "sort.x"),
    values: u(x.values, "sort.values"),
    indices: u(x.indices, "sort.indices"),
  }),
  eigh: (x, u) => ({
    ...x,
    a: u(x.a, "eigh.a"),
    values: u(x.values, "eigh.values"),
    vectors: u(x.vectors, "eigh.vectors"),
  }),
  svd: (x, u) => ({
    ...x,
    a: u(x.a, "svd.a"),
    u: u(x.u, "svd.u"),
    s: u(x.s, "svd.s"),
    vh: u(x.vh, "svd.vh"),
  }),
  qr: (x, u) => ({ ...x, a: u(x.a, "qr.a"), q: u(x.q, "qr.q"), r: u(x.r, "qr.r") }),
  segmentReduce: (x, u) => ({
    ...x,
    x: u(x.x, "segmentReduce.x"),
    index: u(x.index, "segmentReduce.index"),
    bounds: u(x.bounds, "segmentReduce.bounds"),
    weights: x.weights && u(x.weights, "segmentReduce.weights"),
    out: u(x.out, "segmentReduce.out"),
    indices: x.indices && u(x.indices, "segmentReduce.indices"),
  }),
  ctcAlpha: (x, u) => ({
    ...x,
    x: u(x.x, "ctcAlpha.x"),
    start: u(x.start, "ctcAlpha.start"),
    sources: u(x.sources, "ctcAlpha.sources"),
    out: u(x.out, "ctcAlpha.out"),
  }),
  ctcAlphaBackward: (x, u) => ({
    ...x,
    alpha: u(x.alpha, "ctcAlphaBackward.alpha"),
    sources: u(x.sources, "ctcAlphaBackward.sources"),
    g: u(x.g, "ctcAlphaBackward.g"),
    out: u(x.out, "ctcAlphaBackward.out"),
  }),
  scatterReduce: (x, u) => ({
    ...x,
    self: u(x.self, "scatterReduce.self"),
    x: u(x.x, "scatterReduce.x"),
    index: u(x.index, "scatterReduce.index"),
    out: u(x.out, "scatterReduce.out"),
    counts: x.counts && u(x.counts, "scatterReduce.counts"),
  }),
};

/**
 * The contract's float to int32 conversion ({@link CastArgs}) on the host:
 * truncation toward zero, and -2147483648 for NaN, ±inf and values outside
 * [-2^31, 2^31) (what x86's `cvttss2si` gives, hence PyTorch on x86).
 */
export function toInt32(value: number): number {
  return value >= -2147483648 && value < 2147483648 ? Math.trunc(value) : -2147483648;
}

/**
 * The contract's `h(x)` for {@link RandomArgs} on the host (u32 in, u32
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

/**
 * One started device as a backend writes it, over its own buffer type `B`
 * (a typed array, a GPUBuffer, ...). {@link wrapDevice} turns it into the
 * {@link BackendDevice} the core uses.
 */
export interface DeviceImpl<B> {
  /** A description of the hardware (adapter name), shown as `Device.info`. */
  readonly info: string;
  /** The dtypes this device stores and computes. */
  readonly dtypes: readonly DType[];
  /** A new buffer of `numel` elements (contents undefined). `numel` may be 0. */
  allocate(numel: number, dtype: DType): B;
  /** Gives a buffer back. It is not used again. */
  free(buffer: B): void;
  /** Copies `data` (the host array of the buffer's dtype) in from element `offset`. */
  write(buffer: B, offset: number, data: TypedArray): void;
  /**
   * Resolves with a host copy of `numel` elements from element `offset`, as
   * they are after every kernel called before this `read`. Later kernels
   * must not change what it resolves with.
   */
  read(buffer: B, offset: number, numel: number, dtype: DType): Promise<TypedArray>;
  /**
   * Optional: as `read`, but copies into `out` (a host array of `dtype`
   * holding at least `numel` elements, possibly on a SharedArrayBuffer)
   * instead of a new array, so collectives read straight into arrays they
   * reuse step after step (no fresh multi-megabyte array to fault in).
   */
  readInto?(buffer: B, offset: number, numel: number, dtype: DType, out: TypedArray): Promise<void>;
  /**
   * Optional, for backends whose memory is host memory: `read`'s copy, now.
   * The core calls it only when nothing is queued ahead on the device, so
   * that copies between such devices need no promise to settle (a training
   * loop that never awaits would otherwise hold every later kernel of the
   * destination until it does).
   */
  readSync?(buffer: B, offset: number, numel: number, dtype: DType): TypedArray;
  /** Optional hint: `read` of these values is likely next (a loss after backward); start it now. */
  readSoon?(buffer: B, offset: number, numel: number, dtype: DType): void;
  /** The kernels. */
  readonly kernels: KernelTable<B>;
  /** Bytes held now. */
  memory(): MemoryInfo;
  /** Releases the device and everything it holds. */
  destroy(): void;
  /** Throws (`DeviceLostError`) when the device can run nothing more; called before every call. */
  checkAlive?(): void;
}

/** A device as the core uses it: {@link DeviceImpl} over opaque {@link DeviceBuffer} handles. */
export type BackendDevice = DeviceImpl<DeviceBuffer>;

/** What {@link wrapDevice} returns: the core's view of a device, keeping the backend's own. */
export type WrappedDevice<I> = BackendDevice & { readonly impl: I };

/** A handle given out by {@link wrapDevice}: the backend's buffer, until freed. */
class Handle<B> {
  constructor(readonly owner: object, public raw: B | null, readonly dtype: DType) {}
}

/**
 * The one wrapper every backend uses: buffers become opaque handles, every
 * call first checks that the device is alive (`checkAlive`), and every
 * buffer argument is checked (allocated here, not freed) and unwrapped
 * before the backend sees it. `name` (e.g. `"webgpu:0"`) is used in errors.
 * The result keeps `impl` for the backend's own tests and tools.
 */
export function wrapDevice<B, I extends DeviceImpl<B>>(
  name: string,
  impl: I & DeviceImpl<B>,
): WrappedDevice<I> {
  const alive = impl.checkAlive;
  const check = alive === undefined ? () => {} : () => alive.call(impl);
  const unwrap = (buffer: unknown, what: string): B => {
    if (!(buffer instanceof Handle) || buffer.owner !== impl) {
      throw new TypeError(`${name}: buffer was not allocated by this device (${what})`);
    }
    if (buffer.raw === null) throw new Error(`${name}: buffer used after free (${what})`);
    return buffer.raw;
  };
  const kernels: Partial<Record<KernelName, (args: never) => void>> = {};
  for (const kernel of Object.keys(REBUILD) as KernelName[]) {
    const run = impl.kernels[kernel] as ((args: unknown) => void) | undefined;
    if (run === undefined) continue;
    const rebuild = REBUILD[kernel] as Rebuild<KernelName>;
    kernels[kernel] = (args: KernelArgs[KernelName]) => {
      check();
      run.call(impl.kernels, rebuild(args, unwrap));
    };
  }
  return {
    impl,
    info: impl.info,
    dtypes: impl.dtypes,
    allocate(numel, dtype) {
      check();
      return new Handle(impl, impl.allocate(numel, dtype), dtype);
    },
    free(buffer) {
      check();
      if (!(buffer instanceof Handle) || buffer.owner !== impl || buffer.raw === null) return;
      const raw = buffer.raw;
      buffer.raw = null;
      impl.free(raw);
    },
    write(buffer, offset, data) {
      check();
      const raw = unwrap(buffer, "write");
      const dtype = (buffer as Handle<B>).dtype;
      impl.write(raw, offset, dtypeOfArray(data) === dtype ? data : toHost(dtype, data));
    },
    read(buffer, offset, numel, dtype) {
      check();
      return impl.read(unwrap(buffer, "read"), offset, numel, dtype);
    },
    readInto: impl.readInto === undefined ? undefined : (buffer, offset, numel, dtype, out) => {
      check();
      return impl.readInto!(unwrap(buffer, "readInto"), offset, numel, dtype, out);
    },
    readSync: impl.readSync === undefined ? undefined : (buffer, offset, numel, dtype) => {
      check();
      return impl.readSync!(unwrap(buffer, "readSync"), offset, numel, dtype);
    },
    readSoon: impl.readSoon && ((buffer, offset, numel, dtype) => {
      const raw = buffer instanceof Handle && buffer.owner === impl ? buffer.raw : null;
      if (raw !== null) impl.readSoon!(raw, offset, numel, dtype);
    }),
    kernels: kernels as KernelTable,
    memory() {
      check();
      return impl.memory();
    },
    destroy() {
      impl.destroy();
    },
    checkAlive: check,
  };
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
