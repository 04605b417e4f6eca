/**
 * Tensor's methods that only call an op with the tensor first, declared
 * here rather than in the core's `src/tensor.ts`: {@link TensorMethods}
 * gives their signatures (merged into `Tensor`'s type there) and
 * {@link TENSOR_METHOD_OPS} the op each one calls, which
 * `installTensorMethods` puts on Tensor's prototype (`./install.ts`). A
 * test checks at compile time that every method's signature fits its op.
 * @module
 */

import type { NestedNumbers, Tensor, TensorOps } from "../tensor.ts";
import type { TensorLike } from "../ops/util.ts";
import type * as composite from "./mod.ts";
import type * as tensorUtils from "./tensor_utils.ts";
import type * as torchLinalg from "../linalg/torch_level.ts";

/** Methods of {@link Tensor} that call an op of the same meaning with the tensor first. */
export interface TensorMethods {
  /** 1 where greater (`torch.greater`). */
  greater(other: TensorLike): Tensor;
  /** 1 where greater or equal (`torch.greater_equal`). */
  greaterEqual(other: TensorLike): Tensor;
  /** 1 where less (`torch.less`). */
  less(other: TensorLike): Tensor;
  /** 1 where less or equal (`torch.less_equal`). */
  lessEqual(other: TensorLike): Tensor;
  /** 1 where not equal (`torch.not_equal`). */
  notEqual(other: TensorLike): Tensor;
  /** 1 where both are nonzero (`torch.logical_and`). */
  logicalAnd(other: TensorLike): Tensor;
  /** 1 where either is nonzero (`torch.logical_or`). */
  logicalOr(other: TensorLike): Tensor;
  /** 1 where exactly one is nonzero (`torch.logical_xor`). */
  logicalXor(other: TensorLike): Tensor;
  /** 1 where zero (`torch.logical_not`). */
  logicalNot(): Tensor;
  /** Bitwise AND of int32 tensors (`torch.bitwise_and`). */
  bitwiseAnd(other: TensorLike): Tensor;
  /** Bitwise OR of int32 tensors (`torch.bitwise_or`). */
  bitwiseOr(other: TensorLike): Tensor;
  /** Bitwise XOR of int32 tensors (`torch.bitwise_xor`). */
  bitwiseXor(other: TensorLike): Tensor;
  /** Bitwise NOT of an int32 tensor (`torch.bitwise_not`). */
  bitwiseNot(): Tensor;
  /** this << other on int32, count modulo 32 (`torch.bitwise_left_shift`). */
  bitwiseLeftShift(other: TensorLike): Tensor;
  /** this >> other on int32, arithmetic (`torch.bitwise_right_shift`). */
  bitwiseRightShift(other: TensorLike): Tensor;
  /** 1 where close to `other` (`torch.isclose`). */
  isclose(other: TensorLike, options?: composite.IscloseOptions): Tensor;
  /** Whether all are close to `other` (async, `torch.allclose`). */
  allclose(other: TensorLike, options?: composite.IscloseOptions): Promise<boolean>;
  /** Whether `other` has this shape and these values (async, `torch.equal`). */
  equal(other: Tensor): Promise<boolean>;
  /** 1 where -inf (`torch.isneginf`). */
  isneginf(): Tensor;
  /** 1 where +inf (`torch.isposinf`). */
  isposinf(): Tensor;
  /** 1 everywhere: there are no complex dtypes (`torch.isreal`). */
  isreal(): Tensor;
  /** Remainder with the divisor's sign (`torch.remainder`). */
  remainder(other: TensorLike): Tensor;
  /** Remainder with the dividend's sign (`torch.fmod`). */
  fmod(other: TensorLike): Tensor;
  /** Rounded-down quotient (`torch.floor_divide`). */
  floorDivide(other: TensorLike): Tensor;
  /** |this| with the sign of `other` (`torch.copysign`). */
  copysign(other: TensorLike): Tensor;
  /** Heaviside step with `values` at 0 (`torch.heaviside`). */
  heaviside(values: TensorLike): Tensor;
  /** Maximum ignoring NaN (`torch.fmax`). */
  fmax(other: TensorLike): Tensor;
  /** Minimum ignoring NaN (`torch.fmin`). */
  fmin(other: TensorLike): Tensor;
  /** this ** exponent in float64 (`torch.float_power`). */
  floatPower(exponent: TensorLike): Tensor;
  /** this * 2 ** other (`torch.ldexp`). */
  ldexp(other: TensorLike): Tensor;
  /** Greatest common divisor of int32 tensors (`torch.gcd`). */
  gcd(other: TensorLike): Tensor;
  /** Least common multiple of int32 tensors (`torch.lcm`). */
  lcm(other: TensorLike): Tensor;
  /** Angle of (other, this) (`torch.atan2`). */
  atan2(other: TensorLike): Tensor;
  /** Angle of (other, this) (`torch.arctan2`). */
  arctan2(other: TensorLike): Tensor;
  /** sqrt(this² + other²) (`torch.hypot`). */
  hypot(other: TensorLike): Tensor;
  /** log(e^this + e^other) (`torch.logaddexp`). */
  logaddexp(other: TensorLike): Tensor;
  /** log2(2^this + 2^other) (`torch.logaddexp2`). */
  logaddexp2(other: TensorLike): Tensor;
  /** log(cumsum(exp(this), dim)) (`torch.logcumsumexp`). */
  logcumsumexp(dim: number): Tensor;
  /** this * other (`torch.multiply`). */
  multiply(other: TensorLike): Tensor;
  /** this - alpha * other (`torch.subtract`). */
  subtract(other: TensorLike, options?: composite.SubtractOptions): Tensor;
  /** this / other, optionally rounded (`torch.divide`). */
  divide(other: TensorLike, options?: composite.DivideOptions): Tensor;
  /** this / other (`torch.true_divide`). */
  trueDivide(other: TensorLike): Tensor;
  /** Clamped below by `min` (`torch.clamp_min`). */
  clampMin(min: TensorLike): Tensor;
  /** Clamped above by `max` (`torch.clamp_max`). */
  clampMax(max: TensorLike): Tensor;
  /** Clamps into [min, max] (`torch.clip`). */
  clip(min?: TensorLike, max?: TensorLike): Tensor;
  /** Matrix product of two 2-D tensors (`torch.mm`). */
  mm(other: Tensor): Tensor;
  /** Batched matrix product of two 3-D tensors with equal batches (`torch.bmm`). */
  bmm(other: Tensor): Tensor;
  /** Matrix times vector (`torch.mv`). */
  mv(vec: Tensor): Tensor;
  /** Dot product of two 1-D tensors (`torch.dot`). */
  dot(other: Tensor): Tensor;
  /** As {@link dot} (`torch.vdot`). */
  vdot(other: Tensor): Tensor;
  /** Sum of products over the last dims (`torch.inner`). */
  inner(other: Tensor): Tensor;
  /** `beta·this + alpha·(mat1 @ mat2)` (`torch.addmm`). */
  addmm(mat1: Tensor, mat2: Tensor, options?: composite.AddProductOptions): Tensor;
  /** `beta·this + alpha·(mat @ vec)` (`torch.addmv`). */
  addmv(mat: Tensor, vec: Tensor, options?: composite.AddProductOptions): Tensor;
  /** `beta·this + alpha·Σ_b batch1[b] @ batch2[b]` (`torch.addbmm`). */
  addbmm(batch1: Tensor, batch2: Tensor, options?: composite.AddProductOptions): Tensor;
  /** `beta·this + alpha·bmm(batch1, batch2)` (`torch.baddbmm`). */
  baddbmm(batch1: Tensor, batch2: Tensor, options?: composite.AddProductOptions): Tensor;
  /** `beta·this + alpha·outer(vec1, vec2)` (`torch.addr`). */
  addr(vec1: Tensor, vec2: Tensor, options?: composite.AddProductOptions): Tensor;
  /** As {@link outer} (`torch.ger`). */
  ger(other: Tensor): Tensor;
  /** Dims `source` moved to `destination` (`torch.movedim`). */
  movedim(source: number | readonly number[], destination: number | readonly number[]): Tensor;
  /** As {@link movedim} (`torch.moveaxis`). */
  moveaxis(source: number | readonly number[], destination: number | readonly number[]): Tensor;
  /** As {@link transpose} (`torch.swapaxes`). */
  swapaxes(dim0: number, dim1: number): Tensor;
  /** As {@link transpose} (`torch.swapdims`). */
  swapdims(dim0: number, dim1: number): Tensor;
  /** As {@link expand} (`torch.broadcast_to`). */
  broadcastTo(shape: readonly number[]): Tensor;
  /** Cut into sections or at indices along `dim` (`torch.tensor_split`). */
  tensorSplit(indicesOrSections: number | readonly number[], dim?: number): Tensor[];
  /** Split along dim 1 (dim 0 of 1-D) (`torch.hsplit`). */
  hsplit(sections: number | readonly number[]): Tensor[];
  /** Split along dim 0 (`torch.vsplit`). */
  vsplit(sections: number | readonly number[]): Tensor[];
  /** Split along dim 2 (`torch.dsplit`). */
  dsplit(sections: number | readonly number[]): Tensor[];
  /** Dim `dim` expanded into `sizes` (`torch.unflatten`). */
  unflatten(dim: number, sizes: readonly number[]): Tensor;
  /** Flattened to 1-D (`torch.ravel`). */
  ravel(): Tensor;
  /** Reversed along dim 1 (`torch.fliplr`). */
  fliplr(): Tensor;
  /** Reversed along dim 0 (`torch.flipud`). */
  flipud(): Tensor;
  /** Diagonal `offset` of the planes of `dim1`, `dim2`, as the last dim (`torch.diagonal`). */
  diagonal(offset?: number, dim1?: number, dim2?: number): Tensor;
  /** The last dim on the diagonal of new dims `dim1`, `dim2` (`torch.diag_embed`). */
  diagEmbed(offset?: number, dim1?: number, dim2?: number): Tensor;
  /** Flattened onto a diagonal (`torch.diagflat`). */
  diagflat(offset?: number): Tensor;
  /** The `n`-th forward difference along `dim` (`torch.diff`). */
  diff(n?: number, dim?: number, options?: composite.DiffOptions): Tensor;
  /** Each element repeated in place (`torch.repeat_interleave`). */
  repeatInterleave(
    repeats: number | readonly number[] | Tensor,
    dim?: number,
    options?: composite.RepeatInterleaveOptions,
  ): Tensor;
  /** Elements at flat int32 indices (`torch.take`). */
  take(index: Tensor): Tensor;
  /** Values at int32 `indices` along `dim` (`torch.take_along_dim`). */
  takeAlongDim(indices: Tensor, dim?: number): Tensor;
  /** The slice at `index` along `dim` replaced by `src` (`torch.select_scatter`). */
  selectScatter(src: Tensor, dim: number, index: number): Tensor;
  /** A slice along a dim replaced by `src` (`torch.slice_scatter`). */
  sliceScatter(src: Tensor, options?: composite.SliceScatterOptions): Tensor;
  /** A diagonal replaced by `src` (`torch.diagonal_scatter`). */
  diagonalScatter(src: Tensor, offset?: number, dim1?: number, dim2?: number): Tensor;
  /** Kronecker product (`torch.kron`). */
  kron(other: Tensor): Tensor;
  /** Diagonal of a 2-D tensor, or the matrix with a 1-D tensor on it (`torch.diag`). */
  diag(diagonal?: number): Tensor;
  /** Sum of the main diagonal of a 2-D tensor (`torch.trace`). */
  trace(): Tensor;
  /** Rotated by 90° `k` times in the plane of `dims` (`torch.rot90`). */
  rot90(k?: number, dims?: readonly number[]): Tensor;
  /** Indices of the nonzero elements as `[n, ndim]` int32 (`torch.argwhere`; async). */
  argwhere(): Promise<Tensor>;
  /** The elements where `mask` is nonzero, 1-D (`torch.masked_select`; async). */
  maskedSelect(mask: Tensor): Promise<Tensor>;
  /** The masked places filled in order from `source` (`torch.masked_scatter`, out of place). */
  maskedScatter(mask: Tensor, source: Tensor): Tensor;
  /** `src` (or a number) written along `dim` at `index` (`torch.scatter`, out of place). */
  scatter(
    dim: number,
    index: Tensor,
    src: Tensor | number,
    options?: composite.ScatterOptions,
  ): Tensor;
  /** `src` added along `dim` at `index` (`torch.scatter_add`, out of place). */
  scatterAdd(dim: number, index: Tensor, src: Tensor): Tensor;
  /** `src` reduced along `dim` at `index` (`torch.scatter_reduce`, out of place). */
  scatterReduce(
    dim: number,
    index: Tensor,
    src: Tensor,
    reduce: composite.ScatterReduction,
    options?: composite.ScatterReduceOptions,
  ): Tensor;
  /** `this[indices] = values` (`torch.index_put`, out of place; `accumulate` adds). */
  indexPut(indices: readonly Tensor[], values: Tensor, options?: composite.IndexPutOptions): Tensor;
  /** `source`'s slices reduced into those `index` names along `dim` (`torch.index_reduce`). */
  indexReduce(
    dim: number,
    index: Tensor,
    source: Tensor,
    reduce: "prod" | "mean" | "amax" | "amin",
    options?: composite.ScatterReduceOptions,
  ): Tensor;
  /** `source` written at flat positions `index` (`torch.put`, out of place). */
  put(index: Tensor, source: Tensor, options?: composite.IndexPutOptions): Tensor;
  /** `alpha·source` added to the slices `index` names along `dim` (`torch.index_add`). */
  indexAdd(dim: number, index: Tensor, source: Tensor, options?: composite.IndexAddOptions): Tensor;
  /** The slices `index` names along `dim` replaced by `source`'s (`torch.index_copy`). */
  indexCopy(dim: number, index: Tensor, source: Tensor): Tensor;
  /** The slices `index` names along `dim` set to `value` (`torch.index_fill`). */
  indexFill(dim: number, index: Tensor, value: number): Tensor;
  /** `[values, indices]` of the `k`-th smallest along `dim` (`torch.kthvalue`). */
  kthvalue(k: number, dim?: number, keepdim?: boolean): composite.ValuesIndices;
  /** `[values, indices]` of the running maximum along `dim` (`torch.cummax`). */
  cummax(dim: number): composite.ValuesIndices;
  /** `[values, indices]` of the running minimum along `dim` (`torch.cummin`). */
  cummin(dim: number): composite.ValuesIndices;
  /** `[min, max]` over `dim` (all elements when omitted) (`torch.aminmax`). */
  aminmax(options?: composite.AminmaxOptions): composite.MinMax;
  /** Sorted along dim 0 (`torch.msort`). */
  msort(): Tensor;
  /** `[hist, binEdges]` of the elements (`torch.histogram`). */
  histogram(bins: number | Tensor, options?: composite.HistogramOptions): composite.Histogram;
  /** `this = -this` in place. */
  neg_(): this;
  /** `this = exp(this)` in place. */
  exp_(): this;
  /** `this = log(this)` in place. */
  log_(): this;
  /** `this = sqrt(this)` in place. */
  sqrt_(): this;
  /** `this = |this|` in place. */
  abs_(): this;
  /** `this = max(this, 0)` in place. */
  relu_(): this;
  /** `this = sigmoid(this)` in place. */
  sigmoid_(): this;
  /** `this = tanh(this)` in place. */
  tanh_(): this;
  /** `this = sign(this)` in place. */
  sign_(): this;
  /** `this = sin(this)` in place. */
  sin_(): this;
  /** `this = cos(this)` in place. */
  cos_(): this;
  /** `this = tan(this)` in place. */
  tan_(): this;
  /** `this = asin(this)` in place. */
  asin_(): this;
  /** `this = acos(this)` in place. */
  acos_(): this;
  /** `this = atan(this)` in place. */
  atan_(): this;
  /** `this = sinh(this)` in place. */
  sinh_(): this;
  /** `this = cosh(this)` in place. */
  cosh_(): this;
  /** `this = asinh(this)` in place. */
  asinh_(): this;
  /** `this = acosh(this)` in place. */
  acosh_(): this;
  /** `this = atanh(this)` in place. */
  atanh_(): this;
  /** `this = floor(this)` in place. */
  floor_(): this;
  /** `this = ceil(this)` in place. */
  ceil_(): this;
  /** `this = round(this)` in place (half to even). */
  round_(): this;
  /** `this = trunc(this)` in place. */
  trunc_(): this;
  /** `this = this - trunc(this)` in place. */
  frac_(): this;
  /** `this = erf(this)` in place. */
  erf_(): this;
  /** `this = erfc(this)` in place. */
  erfc_(): this;
  /** `this = erfinv(this)` in place. */
  erfinv_(): this;
  /** `this = 1 / this` in place. */
  reciprocal_(): this;
  /** `this = 1 / sqrt(this)` in place. */
  rsqrt_(): this;
  /** `this = this²` in place. */
  square_(): this;
  /** `this = log(1 + this)` in place. */
  log1p_(): this;
  /** `this = exp(this) - 1` in place. */
  expm1_(): this;
  /** `this = log2(this)` in place. */
  log2_(): this;
  /** `this = log10(this)` in place. */
  log10_(): this;
  /** `this = 2^this` in place. */
  exp2_(): this;
  /** `this = lgamma(this)` in place. */
  lgamma_(): this;
  /** `this = digamma(this)` in place. */
  digamma_(): this;
  /** `this = i0(this)` in place. */
  i0_(): this;
  /** `this = sin(π·this) / (π·this)` in place. */
  sinc_(): this;
  /** Degrees to radians, in place. */
  deg2rad_(): this;
  /** Radians to degrees, in place. */
  rad2deg_(): this;
  /** `this = (this == 0)` in place, as 1/0. */
  logicalNot_(): this;
  /** `this = ~this` in place (int tensors). */
  bitwiseNot_(): this;
  /** `this = polygamma(n, this)` in place. */
  polygamma_(n: number): this;
  /** `this = mvlgamma(this, p)` in place. */
  mvlgamma_(p: number): this;
  /** `this = logit(this)` in place (`eps` clamps first). */
  logit_(options?: composite.LogitOptions): this;
  /** NaN and ±inf replaced in place (see {@link nanToNum}). */
  nanToNum_(options?: composite.NanToNumOptions): this;
  /** `this -= alpha · other` in place (`other` broadcasts to this shape). */
  sub_(other: TensorLike, options?: composite.SubtractOptions): this;
  /** `this /= other` in place (`roundingMode` as {@link divide}). */
  div_(other: TensorLike, options?: composite.DivideOptions): this;
  /** `this = this ** exponent` in place. */
  pow_(exponent: TensorLike): this;
  /** Python's `%` (the divisor's sign), in place. */
  remainder_(other: TensorLike): this;
  /** C's `fmod` (the dividend's sign), in place. */
  fmod_(other: TensorLike): this;
  /** `this = floor(this / other)` in place. */
  floorDivide_(other: TensorLike): this;
  /** `|this|` with `other`'s sign, in place. */
  copysign_(other: TensorLike): this;
  /** `this = this · 2^other` in place. */
  ldexp_(other: TensorLike): this;
  /** Greatest common divisor with `other`, in place (int tensors). */
  gcd_(other: TensorLike): this;
  /** Least common multiple with `other`, in place (int tensors). */
  lcm_(other: TensorLike): this;
  /** `this = atan2(this, other)` in place. */
  atan2_(other: TensorLike): this;
  /** `this = sqrt(this² + other²)` in place. */
  hypot_(other: TensorLike): this;
  /** `this = this · log(other)` (0 where this is 0) in place. */
  xlogy_(other: TensorLike): this;
  /** `this = (this == other)` in place, as 1/0. */
  eq_(other: TensorLike): this;
  /** `this = (this != other)` in place, as 1/0. */
  ne_(other: TensorLike): this;
  /** `this = (this < other)` in place, as 1/0. */
  lt_(other: TensorLike): this;
  /** `this = (this <= other)` in place, as 1/0. */
  le_(other: TensorLike): this;
  /** `this = (this > other)` in place, as 1/0. */
  gt_(other: TensorLike): this;
  /** `this = (this >= other)` in place, as 1/0. */
  ge_(other: TensorLike): this;
  /** Logical and with `other` (nonzero is true) in place, as 1/0. */
  logicalAnd_(other: TensorLike): this;
  /** Logical or with `other` in place, as 1/0. */
  logicalOr_(other: TensorLike): this;
  /** Logical xor with `other` in place, as 1/0. */
  logicalXor_(other: TensorLike): this;
  /** Bitwise and in place (int tensors). */
  bitwiseAnd_(other: TensorLike): this;
  /** Bitwise or in place (int tensors). */
  bitwiseOr_(other: TensorLike): this;
  /** Bitwise xor in place (int tensors). */
  bitwiseXor_(other: TensorLike): this;
  /** `this = this << other` in place (int tensors). */
  bitwiseLeftShift_(other: TensorLike): this;
  /** `this = this >> other` in place (int tensors). */
  bitwiseRightShift_(other: TensorLike): this;
  /** The Heaviside step (`values` where this is 0), in place. */
  heaviside_(values: TensorLike): this;
  /** Clamps into [min, max] in place (numbers or tensors; either may be omitted). */
  clamp_(min?: TensorLike, max?: TensorLike): this;
  /** {@link clamp_} (`Tensor.clip_`). */
  clip_(min?: TensorLike, max?: TensorLike): this;
  /** `this = max(this, min)` in place. */
  clampMin_(min: TensorLike): this;
  /** `this = min(this, max)` in place. */
  clampMax_(max: TensorLike): this;
  /** `this += weight · (end - this)` in place. */
  lerp_(end: Tensor, weight: TensorLike): this;
  /** `value` where `mask` is nonzero, in place (`mask` broadcasts to this shape). */
  maskedFill_(mask: Tensor, value: number | Tensor): this;
  /** `this + value · tensor1 · tensor2`, broadcast together (`torch.addcmul`). */
  addcmul(tensor1: Tensor, tensor2: Tensor, options?: composite.AddcOptions): Tensor;
  /** `this + value · tensor1 / tensor2`, broadcast together (`torch.addcdiv`). */
  addcdiv(tensor1: Tensor, tensor2: Tensor, options?: composite.AddcOptions): Tensor;
  /** {@link addcmul} in place. */
  addcmul_(tensor1: Tensor, tensor2: Tensor, options?: composite.AddcOptions): this;
  /** {@link addcdiv} in place. */
  addcdiv_(tensor1: Tensor, tensor2: Tensor, options?: composite.AddcOptions): this;
  /** {@link scatter} in place. */
  scatter_(
    dim: number,
    index: Tensor,
    src: Tensor | number,
    options?: composite.ScatterOptions,
  ): this;
  /** {@link scatterAdd} in place. */
  scatterAdd_(dim: number, index: Tensor, src: Tensor): this;
  /** {@link scatterReduce} in place. */
  scatterReduce_(
    dim: number,
    index: Tensor,
    src: Tensor,
    reduce: composite.ScatterReduction,
    options?: composite.ScatterReduceOptions,
  ): this;
  /** {@link indexAdd} in place. */
  indexAdd_(dim: number, index: Tensor, source: Tensor, options?: composite.IndexAddOptions): this;
  /** {@link indexCopy} in place. */
  indexCopy_(dim: number, index: Tensor, source: Tensor): this;
  /** {@link indexFill} in place. */
  indexFill_(dim: number, index: Tensor, value: number): this;
  /** {@link indexReduce} in place. */
  indexReduce_(
    dim: number,
    index: Tensor,
    source: Tensor,
    reduce: "prod" | "mean" | "amax" | "amin",
    options?: composite.ScatterReduceOptions,
  ): this;
  /** {@link indexPut} in place. */
  indexPut_(indices: readonly Tensor[], values: Tensor, options?: composite.IndexPutOptions): this;
  /** {@link maskedScatter} in place. */
  maskedScatter_(mask: Tensor, source: Tensor): this;
  /** {@link put} in place. */
  put_(index: Tensor, source: Tensor, options?: composite.IndexPutOptions): this;
  /** Sets the main diagonal to `fillValue` in place (`wrap`: tall matrices, as numpy). */
  fillDiagonal_(fillValue: number, options?: composite.FillDiagonalOptions): this;
  /** Fills with U[from, to) in place (seeded by `manualSeed`). */
  uniform_(options?: composite.UniformFillOptions): this;
  /** Fills with N(mean, std²) in place. */
  normal_(options?: composite.NormalFillOptions): this;
  /** Fills with 1 (probability `p`, a number or tensor) or 0 in place. */
  bernoulli_(
    p?: number | Tensor | composite.RandomFillOptions,
    options?: composite.RandomFillOptions,
  ): this;
  /** Fills with Exp(lambd) draws in place. */
  exponential_(
    lambd?: number | composite.RandomFillOptions,
    options?: composite.RandomFillOptions,
  ): this;
  /** Fills with Cauchy(median, sigma) draws in place. */
  cauchy_(
    median?: number | composite.RandomFillOptions,
    sigma?: number | composite.RandomFillOptions,
    options?: composite.RandomFillOptions,
  ): this;
  /** Fills with Geometric(p) draws (1, 2, ...) in place. */
  geometric_(p: number, options?: composite.RandomFillOptions): this;
  /** Fills with exp(N(mean, std²)) draws in place (defaults mean 1, std 2). */
  logNormal_(options?: composite.NormalFillOptions): this;
  /** Fills with integers from [from, to) in place (`random_(to)`: [0, to)). */
  random_(
    fromOrTo?: number | composite.RandomFillOptions,
    to?: number | composite.RandomFillOptions,
    options?: composite.RandomFillOptions,
  ): this;
  /** Tangent (`torch.tan`). */
  tan(): Tensor;
  /** Arcsine (`torch.asin`). */
  asin(): Tensor;
  /** Arccosine (`torch.acos`). */
  acos(): Tensor;
  /** Arctangent (`torch.atan`). */
  atan(): Tensor;
  /** Hyperbolic sine (`torch.sinh`). */
  sinh(): Tensor;
  /** Hyperbolic cosine (`torch.cosh`). */
  cosh(): Tensor;
  /** Inverse hyperbolic sine (`torch.asinh`). */
  asinh(): Tensor;
  /** Inverse hyperbolic cosine (`torch.acosh`). */
  acosh(): Tensor;
  /** Inverse hyperbolic tangent (`torch.atanh`). */
  atanh(): Tensor;
  /** Alias of `asin`. */
  arcsin(): Tensor;
  /** Alias of `acos`. */
  arccos(): Tensor;
  /** Alias of `atan`. */
  arctan(): Tensor;
  /** Alias of `asinh`. */
  arcsinh(): Tensor;
  /** Alias of `acosh`. */
  arccosh(): Tensor;
  /** Alias of `atanh`. */
  arctanh(): Tensor;
  /** Base-2 logarithm (`torch.log2`). */
  log2(): Tensor;
  /** Base-10 logarithm (`torch.log10`). */
  log10(): Tensor;
  /** 2 ** this (`torch.exp2`). */
  exp2(): Tensor;
  /** 1 - erf, accurate in the tail (`torch.erfc`). */
  erfc(): Tensor;
  /** The inverse error function (`torch.erfinv`). */
  erfinv(): Tensor;
  /** log |Γ(this)| (`torch.lgamma`). */
  lgamma(): Tensor;
  /** The digamma function (`torch.digamma`). */
  digamma(): Tensor;
  /** Modified Bessel function I₀ (`torch.i0`). */
  i0(): Tensor;
  /** sin(πx)/(πx), 1 at 0 (`torch.sinc`). */
  sinc(): Tensor;
  /** Degrees to radians (`torch.deg2rad`). */
  deg2rad(): Tensor;
  /** Radians to degrees (`torch.rad2deg`). */
  rad2deg(): Tensor;
  /** The sign (`torch.sgn`). */
  sgn(): Tensor;
  /** 1 where the sign bit is set (`torch.signbit`). */
  signbit(): Tensor;
  /** This tensor (`torch.positive`). */
  positive(): Tensor;
  /** -this (`torch.negative`). */
  negative(): Tensor;
  /** |this| (`torch.absolute`). */
  absolute(): Tensor;
  /** Rounded toward zero (`torch.fix`). */
  fix(): Tensor;
  /** Multivariate log-gamma of dimension `p` (`torch.mvlgamma`). */
  mvlgamma(p: number): Tensor;
  /** log(this/(1 - this)), clamped into [eps, 1 - eps] when given (`torch.logit`). */
  logit(options?: composite.LogitOptions): Tensor;
  /** this · log(other), 0 where this is 0 (`torch.xlogy`). */
  xlogy(other: TensorLike): Tensor;
  /** Bytes per element (4, or 8 for float64). */
  elementSize(): number;
  /** Whether the dtype is floating-point. */
  isFloatingPoint(): boolean;
  /** Whether the dtype is signed (every multigrad dtype is). */
  isSigned(): boolean;
  /** Whether `other` has the same shape. */
  isSameSize(other: Tensor): boolean;
  /** Whether the single element is nonzero (async; rejects unless one element). */
  isNonzero(): Promise<boolean>;
  /** The values as nested arrays (async; `Tensor.tolist`). */
  tolist(): Promise<NestedNumbers>;
  /** Zeros of `size` with this dtype and device unless told. */
  newZeros(size: readonly number[], options?: tensorUtils.NewTensorOptions): Tensor;
  /** Ones of `size` with this dtype and device unless told. */
  newOnes(size: readonly number[], options?: tensorUtils.NewTensorOptions): Tensor;
  /** `fillValue` in `size` with this dtype and device unless told. */
  newFull(
    size: readonly number[],
    fillValue: number,
    options?: tensorUtils.NewTensorOptions,
  ): Tensor;
  /** A tensor of `size` (zeros) with this dtype and device unless told. */
  newEmpty(size: readonly number[], options?: tensorUtils.NewTensorOptions): Tensor;
  /** `data` as a new tensor with this dtype and device unless told. */
  newTensor(data: tensorUtils.NewTensorData, options?: tensorUtils.NewTensorOptions): Tensor;
  /** Summed down to `size`, which broadcasts to this shape. */
  sumToSize(size: readonly number[]): Tensor;
  /** Sliding windows of `size`, `step` apart, along `dim` (a last dim of `size`). */
  unfold(dim: number, size: number, step: number): Tensor;
  /** The elements at `storageOffset + Σ i·stride` in row-major order, as a tensor of `size`. */
  asStrided(size: readonly number[], stride: readonly number[], storageOffset?: number): Tensor;
  /** Split along `dim` into pieces of `splitSizes` (summing to that dim's size). */
  splitWithSizes(splitSizes: readonly number[], dim?: number): Tensor[];
  /** `length` elements from `start` along `dim`, as a new tensor. */
  narrowCopy(dim: number, start: number, length: number): Tensor;
  /** `[mantissa, exponent]` with mantissa in [0.5, 1) and an int32 exponent. */
  frexp(): [Tensor, Tensor];
  /** 0 where `-lambd <= x <= lambd`, else `x`. */
  hardshrink(lambd?: number): Tensor;
  /** `x` where positive, else `weight · x` (per channel). */
  prelu(weight: Tensor): Tensor;
  /** The product of the Householder reflectors given by this and `tau` (`linalg.householderProduct`). */
  orgqr(tau: Tensor): Tensor;
  /** The regularized lower incomplete gamma function of (this, other). */
  igamma(other: TensorLike): Tensor;
  /** The regularized upper incomplete gamma function of (this, other). */
  igammac(other: TensorLike): Tensor;
  /** {@link mH} as a method. */
  adjoint(): Tensor;
  /** Counts of each non-negative int32 value (`torch.bincount`). */
  bincount(options?: composite.BincountOptions): Tensor;
  /** A histogram of `bins` equal bins over [min, max] (`torch.histc`). */
  histc(options?: composite.HistcOptions): Tensor;
  /** `[values, indices]` of the most frequent value along `dim`. */
  mode(dim?: number, keepdim?: boolean): composite.ValuesIndices;
  /** The `q`-quantiles (over all elements, or along `options.dim`). */
  quantile(q: number | Tensor, options?: composite.QuantileOptions): Tensor;
  /** {@link Tensor.quantile} ignoring NaN. */
  nanquantile(q: number | Tensor, options?: composite.QuantileOptions): Tensor;
  /** Sum over `dim` (all when omitted), NaN counted as zero. */
  nansum(dim?: number | readonly number[], keepdim?: boolean): Tensor;
  /** Mean over `dim` (all when omitted) of the non-NaN elements. */
  nanmean(dim?: number | readonly number[], keepdim?: boolean): Tensor;
  /** The number of nonzero elements over `dim` (all when omitted), int32. */
  countNonzero(dim?: number | readonly number[]): Tensor;
  /** The covariance matrix of the variables in the rows (observations in the columns). */
  cov(options?: composite.CovOptions): Tensor;
  /** The Pearson correlation coefficients of the variables in the rows. */
  corrcoef(): Tensor;
  /** The slices along `dim` with `p`-norm above `maxnorm` scaled to norm `maxnorm`. */
  renorm(p: number, dim: number, maxnorm: number): Tensor;
  /** The `p`-norm of `this - other`. */
  dist(other: Tensor, p?: number): Tensor;
  /** The inverse of each square matrix. */
  inverse(): Tensor;
  /** The log of each square matrix's determinant (NaN where negative). */
  logdet(): Tensor;
  /** The pseudo-inverse (`rcond` default 1e-15). */
  pinverse(options?: { rcond?: number }): Tensor;
  /** The solution of `AX = this` from the Cholesky factor `L` of `A`. */
  choleskySolve(L: Tensor, options?: torchLinalg.CholeskyFactorOptions): Tensor;
  /** The inverse of `A` from this, its Cholesky factor. */
  choleskyInverse(options?: torchLinalg.CholeskyFactorOptions): Tensor;
  /** `[solution, clonedCoefficient]` of `AX = this` for triangular `A` (upper by default). */
  triangularSolve(A: Tensor, options?: torchLinalg.TriangularSolveOptions): [Tensor, Tensor];
  /** `[LU, pivots]` (and `infos` with `getInfos`) of the LU factorization. */
  lu(options?: torchLinalg.TorchLuOptions): Tensor[];
  /** The solution of `A X = this` from `A`'s LU factors. */
  luSolve(LU: Tensor, pivots: Tensor): Tensor;
  /** The determinant of each square matrix. */
  det(): Tensor;
  /** `[sign, logabsdet]` of each determinant. */
  slogdet(): [Tensor, Tensor];
  /** The matrix to the integer power `n`. */
  matrixPower(n: number): Tensor;
  /** Cross product with `other` along `dim` (default: the first dim of size 3). */
  cross(other: Tensor, dim?: number): Tensor;
  /** `numSamples` indices drawn from each row's weights (`torch.multinomial`). */
  multinomial(numSamples: number, options?: composite.MultinomialOptions): Tensor;
  /** 1 with probability given by each element, else 0 (`torch.bernoulli`). */
  bernoulli(options?: composite.RandomFillOptions): Tensor;
  /** `[U, S, V]` with `this = U diag(S) Vᵀ` (`torch.svd`'s convention). */
  svd(options?: torchLinalg.TorchSvdOptions): [Tensor, Tensor, Tensor];
  /** The matrix exponential of each square matrix. */
  matrixExp(): Tensor;
  /** `this = asin(this)` in place, as {@link asin_} (`Tensor.arcsin_`, its alias). */
  arcsin_(): this;
  /** `this = acos(this)` in place, as {@link acos_} (`Tensor.arccos_`, its alias). */
  arccos_(): this;
  /** `this = atan(this)` in place, as {@link atan_} (`Tensor.arctan_`, its alias). */
  arctan_(): this;
  /** `this = asinh(this)` in place, as {@link asinh_} (`Tensor.arcsinh_`, its alias). */
  arcsinh_(): this;
  /** `this = acosh(this)` in place, as {@link acosh_} (`Tensor.arccosh_`, its alias). */
  arccosh_(): this;
  /** `this = atanh(this)` in place, as {@link atanh_} (`Tensor.arctanh_`, its alias). */
  arctanh_(): this;
  /** `this = -this` in place, as {@link neg_} (`Tensor.negative_`, its alias). */
  negative_(): this;
  /** `this = |this|` in place, as {@link abs_} (`Tensor.absolute_`, its alias). */
  absolute_(): this;
  /** `rounded toward zero` in place, as {@link trunc_} (`Tensor.fix_`, its alias). */
  fix_(): this;
  /** `the sign (real tensors)` in place, as {@link sign_} (`Tensor.sgn_`, its alias). */
  sgn_(): this;
  /** `this = atan2(this, other)` in place, as {@link atan2_} (`Tensor.arctan2_`, its alias). */
  arctan2_(other: TensorLike): this;
  /** `this -= alpha · other` in place, as {@link sub_} (`Tensor.subtract_`, its alias). */
  subtract_(other: TensorLike, options?: composite.SubtractOptions): this;
  /** `this *= other` in place, as {@link mul_} (`Tensor.multiply_`, its alias). */
  multiply_(other: TensorLike): this;
  /** `this /= other` in place, as {@link div_} (`Tensor.divide_`, its alias). */
  divide_(other: TensorLike, options?: composite.DivideOptions): this;
  /** `this /= other` in place, as {@link div_} (`Tensor.true_divide_`, its alias). */
  trueDivide_(other: TensorLike): this;
  /** `this = (this > other)` in place, as {@link gt_} (`Tensor.greater_`, its alias). */
  greater_(other: TensorLike): this;
  /** `this = (this >= other)` in place, as {@link ge_} (`Tensor.greater_equal_`, its alias). */
  greaterEqual_(other: TensorLike): this;
  /** `this = (this < other)` in place, as {@link lt_} (`Tensor.less_`, its alias). */
  less_(other: TensorLike): this;
  /** `this = (this <= other)` in place, as {@link le_} (`Tensor.less_equal_`, its alias). */
  lessEqual_(other: TensorLike): this;
  /** `this = (this != other)` in place, as {@link ne_} (`Tensor.not_equal_`, its alias). */
  notEqual_(other: TensorLike): this;
  /**
   * The text PyTorch 1.13's `repr(t)` / `print(t)` gives, to the character
   * (`tensor([[1.5000e+00, ...]])`), under `setPrintOptions`; async, as
   * the values are read from the device (`src/printing/tensor_str.ts`).
   */
  format(): Promise<string>;
}

/** The op (a key of the installed op table) each of {@link TensorMethods} calls. */
export const TENSOR_METHOD_OPS = {
  greater: "greater",
  greaterEqual: "greaterEqual",
  less: "less",
  lessEqual: "lessEqual",
  notEqual: "notEqual",
  logicalAnd: "logicalAnd",
  logicalOr: "logicalOr",
  logicalXor: "logicalXor",
  logicalNot: "logicalNot",
  bitwiseAnd: "bitwiseAnd",
  bitwiseOr: "bitwiseOr",
  bitwiseXor: "bitwiseXor",
  bitwiseNot: "bitwiseNot",
  bitwiseLeftShift: "bitwiseLeftShift",
  bitwiseRightShift: "bitwiseRightShift",
  isclose: "isclose",
  allclose: "allclose",
  equal: "equal",
  isneginf: "isneginf",
  isposinf: "isposinf",
  isreal: "isreal",
  remainder: "remainder",
  fmod: "fmod",
  floorDivide: "floorDivide",
  copysign: "copysign",
  heaviside: "heaviside",
  fmax: "fmax",
  fmin: "fmin",
  floatPower: "floatPower",
  ldexp: "ldexp",
  gcd: "gcd",
  lcm: "lcm",
  atan2: "atan2",
  arctan2: "arctan2",
  hypot: "hypot",
  logaddexp: "logaddexp",
  logaddexp2: "logaddexp2",
  logcumsumexp: "logcumsumexp",
  multiply: "multiply",
  subtract: "subtract",
  divide: "divide",
  trueDivide: "trueDivide",
  clampMin: "clampMin",
  clampMax: "clampMax",
  clip: "clip",
  mm: "mm",
  bmm: "bmm",
  mv: "mv",
  dot: "dot",
  vdot: "vdot",
  inner: "inner",
  addmm: "addmm",
  addmv: "addmv",
  addbmm: "addbmm",
  baddbmm: "baddbmm",
  addr: "addr",
  ger: "ger",
  movedim: "movedim",
  moveaxis: "moveaxis",
  swapaxes: "swapaxes",
  swapdims: "swapdims",
  broadcastTo: "broadcastTo",
  tensorSplit: "tensorSplit",
  hsplit: "hsplit",
  vsplit: "vsplit",
  dsplit: "dsplit",
  unflatten: "unflatten",
  ravel: "ravel",
  fliplr: "fliplr",
  flipud: "flipud",
  diagonal: "diagonal",
  diagEmbed: "diagEmbed",
  diagflat: "diagflat",
  diff: "diff",
  repeatInterleave: "repeatInterleave",
  take: "take",
  takeAlongDim: "takeAlongDim",
  selectScatter: "selectScatter",
  sliceScatter: "sliceScatter",
  diagonalScatter: "diagonalScatter",
  kron: "kron",
  diag: "diag",
  trace: "trace",
  rot90: "rot90",
  argwhere: "argwhere",
  maskedSelect: "maskedSelect",
  maskedScatter: "maskedScatter",
  scatter: "scatter",
  scatterAdd: "scatterAdd",
  scatterReduce: "scatterReduce",
  indexPut: "indexPut",
  indexReduce: "indexReduce",
  put: "put",
  indexAdd: "indexAdd",
  indexCopy: "indexCopy",
  indexFill: "indexFill",
  kthvalue: "kthvalue",
  cummax: "cummax",
  cummin: "cummin",
  aminmax: "aminmax",
  msort: "msort",
  histogram: "histogram",
  neg_: "neg_",
  exp_: "exp_",
  log_: "log_",
  sqrt_: "sqrt_",
  abs_: "abs_",
  relu_: "relu_",
  sigmoid_: "sigmoid_",
  tanh_: "tanh_",
  sign_: "sign_",
  sin_: "sin_",
  cos_: "cos_",
  tan_: "tan_",
  asin_: "asin_",
  acos_: "acos_",
  atan_: "atan_",
  sinh_: "sinh_",
  cosh_: "cosh_",
  asinh_: "asinh_",
  acosh_: "acosh_",
  atanh_: "atanh_",
  floor_: "floor_",
  ceil_: "ceil_",
  round_: "round_",
  trunc_: "trunc_",
  frac_: "frac_",
  erf_: "erf_",
  erfc_: "erfc_",
  erfinv_: "erfinv_",
  reciprocal_: "reciprocal_",
  rsqrt_: "rsqrt_",
  square_: "square_",
  log1p_: "log1p_",
  expm1_: "expm1_",
  log2_: "log2_",
  log10_: "log10_",
  exp2_: "exp2_",
  lgamma_: "lgamma_",
  digamma_: "digamma_",
  i0_: "i0_",
  sinc_: "sinc_",
  deg2rad_: "deg2rad_",
  rad2deg_: "rad2deg_",
  logicalNot_: "logicalNot_",
  bitwiseNot_: "bitwiseNot_",
  polygamma_: "polygamma_",
  mvlgamma_: "mvlgamma_",
  logit_: "logit_",
  nanToNum_: "nanToNum_",
  sub_: "sub_",
  div_: "div_",
  pow_: "pow_",
  remainder_: "remainder_",
  fmod_: "fmod_",
  floorDivide_: "floorDivide_",
  copysign_: "copysign_",
  ldexp_: "ldexp_",
  gcd_: "gcd_",
  lcm_: "lcm_",
  atan2_: "atan2_",
  hypot_: "hypot_",
  xlogy_: "xlogy_",
  eq_: "eq_",
  ne_: "ne_",
  lt_: "lt_",
  le_: "le_",
  gt_: "gt_",
  ge_: "ge_",
  logicalAnd_: "logicalAnd_",
  logicalOr_: "logicalOr_",
  logicalXor_: "logicalXor_",
  bitwiseAnd_: "bitwiseAnd_",
  bitwiseOr_: "bitwiseOr_",
  bitwiseXor_: "bitwiseXor_",
  bitwiseLeftShift_: "bitwiseLeftShift_",
  bitwiseRightShift_: "bitwiseRightShift_",
  heaviside_: "heaviside_",
  clamp_: "clamp_",
  clip_: "clip_",
  clampMin_: "clampMin_",
  clampMax_: "clampMax_",
  lerp_: "lerp_",
  maskedFill_: "maskedFill_",
  addcmul: "addcmul",
  addcdiv: "addcdiv",
  addcmul_: "addcmul_",
  addcdiv_: "addcdiv_",
  scatter_: "scatter_",
  scatterAdd_: "scatterAdd_",
  scatterReduce_: "scatterReduce_",
  indexAdd_: "indexAdd_",
  indexCopy_: "indexCopy_",
  indexFill_: "indexFill_",
  indexReduce_: "indexReduce_",
  indexPut_: "indexPut_",
  maskedScatter_: "maskedScatter_",
  put_: "put_",
  fillDiagonal_: "fillDiagonal_",
  uniform_: "uniform_",
  normal_: "normal_",
  bernoulli_: "bernoulli_",
  exponential_: "exponential_",
  cauchy_: "cauchy_",
  geometric_: "geometric_",
  logNormal_: "logNormal_",
  random_: "random_",
  tan: "tan",
  asin: "asin",
  acos: "acos",
  atan: "atan",
  sinh: "sinh",
  cosh: "cosh",
  asinh: "asinh",
  acosh: "acosh",
  atanh: "atanh",
  arcsin: "arcsin",
  arccos: "arccos",
  arctan: "arctan",
  arcsinh: "arcsinh",
  arccosh: "arccosh",
  arctanh: "arctanh",
  log2: "log2",
  log10: "log10",
  exp2: "exp2",
  erfc: "erfc",
  erfinv: "erfinv",
  lgamma: "lgamma",
  digamma: "digamma",
  i0: "i0",
  sinc: "sinc",
  deg2rad: "deg2rad",
  rad2deg: "rad2deg",
  sgn: "sgn",
  signbit: "signbit",
  positive: "positive",
  negative: "negative",
  absolute: "absolute",
  fix: "fix",
  mvlgamma: "mvlgamma",
  logit: "logit",
  xlogy: "xlogy",
  elementSize: "elementSize",
  isFloatingPoint: "isFloatingPoint",
  isSigned: "isSigned",
  isSameSize: "isSameSize",
  isNonzero: "isNonzero",
  tolist: "tolist",
  newZeros: "newZeros",
  newOnes: "newOnes",
  newFull: "newFull",
  newEmpty: "newEmpty",
  newTensor: "newTensor",
  sumToSize: "sumToSize",
  unfold: "unfold",
  asStrided: "asStrided",
  splitWithSizes: "splitWithSizes",
  narrowCopy: "narrowCopy",
  frexp: "frexp",
  hardshrink: "hardshrink",
  prelu: "prelu",
  orgqr: "orgqr",
  igamma: "igamma",
  igammac: "igammac",
  adjoint: "adjoint",
  bincount: "bincount",
  histc: "histc",
  mode: "mode",
  quantile: "quantile",
  nanquantile: "nanquantile",
  nansum: "nansum",
  nanmean: "nanmean",
  countNonzero: "countNonzero",
  cov: "cov",
  corrcoef: "corrcoef",
  renorm: "renorm",
  dist: "dist",
  inverse: "inverse",
  logdet: "logdet",
  pinverse: "pinverse",
  choleskySolve: "choleskySolve",
  choleskyInverse: "choleskyInverse",
  triangularSolve: "triangularSolve",
  lu: "lu",
  luSolve: "luSolve",
  det: "det",
  slogdet: "slogdet",
  matrixPower: "matrixPower",
  cross: "cross",
  multinomial: "multinomial",
  bernoulli: "bernoulli",
  svd: "svd",
  matrixExp: "matrixExp",
  arcsin_: "asin_",
  arccos_: "acos_",
  arctan_: "atan_",
  arcsinh_: "asinh_",
  arccosh_: "acosh_",
  arctanh_: "atanh_",
  negative_: "neg_",
  absolute_: "abs_",
  fix_: "trunc_",
  sgn_: "sign_",
  arctan2_: "atan2_",
  subtract_: "sub_",
  multiply_: "mul_",
  divide_: "div_",
  trueDivide_: "div_",
  greater_: "gt_",
  greaterEqual_: "ge_",
  less_: "lt_",
  lessEqual_: "le_",
  notEqual_: "ne_",
  format: "formatTensor",
} as const satisfies { readonly [K in keyof TensorMethods]: keyof TensorOps };
