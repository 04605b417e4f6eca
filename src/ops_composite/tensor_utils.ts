/**
 * Tensor conveniences PyTorch users reach for: `new*` factories that take
 * this tensor's dtype and device, `type`, `stride`, `tolist`, predicates
 * (`isNonzero`, `isSameSize`, ...), `sumToSize`, and the window and stride
 * builders `unfold` (sliding windows) and `asStrided`, `splitWithSizes`,
 * `narrowCopy`, `frexp`. Compositions of the core's ops (gradients come
 * free); index lists that depend only on sizes are computed on the host.
 *
 * multigrad's tensors are always contiguous (a view that is not, such as a
 * transpose, is a copy), so `stride()` gives the contiguous strides and
 * `asStrided` reads the tensor's own elements in row-major order.
 * @module
 */

import { noGrad } from "../autograd.ts";
import { type DType, DTYPES, dtypeSize, isFloat, type TypedArray } from "../dtype.ts";
import { contiguousStrides, formatShape, normalizeDim, numelOf, sameShape } from "../shape.ts";
import { forwardScope } from "../storage.ts";
import { type NestedNumbers, Tensor } from "../tensor.ts";
import { sumTo } from "../ops/elementwise.ts";
import { full, type NestedArray, tensor, type TensorOptions } from "../ops/factory.ts";
import { where } from "../ops/indexing.ts";
import { indexSelect, narrow, split } from "../ops/view.ts";
import { isfinite } from "./elementwise.ts";
import { exp2, log2 } from "./unary_math.ts";
import { requireTensor } from "./util.ts";
import { owned } from "./owned.ts";

function requireInteger(op: string, what: string, v: unknown): asserts v is number {
  if (!Number.isInteger(v)) throw new TypeError(`${op}: ${what} must be an integer, got ${v}`);
}

/** `sizes` checked as a list of non-negative integers. */
function sizeList(op: string, what: string, sizes: unknown): number[] {
  if (!Array.isArray(sizes) || sizes.some((n) => !Number.isInteger(n) || n < 0)) {
    throw new TypeError(
      `${op}: ${what} must be an array of non-negative integers, got ${JSON.stringify(sizes)}`,
    );
  }
  return [...sizes];
}

// ---- new* factories: this tensor's dtype and device unless told ----

/** Options of the `new*` factories: the dtype and device default to the source tensor's. */
export type NewTensorOptions = TensorOptions;

/** What {@link newTensor} copies: nested numbers, a typed array, or a tensor. */
export type NewTensorData = NestedArray | TypedArray | Tensor;

function like(x: Tensor, options: NewTensorOptions): TensorOptions {
  return {
    dtype: options.dtype ?? x.dtype,
    device: options.device ?? x.device,
    requiresGrad: options.requiresGrad,
  };
}

/** Zeros of `size` with `x`'s dtype and device unless `options` say otherwise (`Tensor.new_zeros`). */
export function newZeros(
  x: Tensor,
  size: readonly number[],
  options: NewTensorOptions = {},
): Tensor {
  requireTensor("newZeros", x, "the input");
  return full(sizeList("newZeros", "size", size), 0, like(x, options));
}

/** Ones of `size` with `x`'s dtype and device unless told (`Tensor.new_ones`). */
export function newOnes(
  x: Tensor,
  size: readonly number[],
  options: NewTensorOptions = {},
): Tensor {
  requireTensor("newOnes", x, "the input");
  return full(sizeList("newOnes", "size", size), 1, like(x, options));
}

/**
 * `fillValue` everywhere in `size`, with `x`'s dtype and device unless told
 * (`Tensor.new_full`; an int32 tensor truncates a fractional value, as PyTorch).
 */
export function newFull(
  x: Tensor,
  size: readonly number[],
  fillValue: number,
  options: NewTensorOptions = {},
): Tensor {
  requireTensor("newFull", x, "the input");
  if (typeof fillValue !== "number") {
    throw new TypeError(`newFull: fillValue must be a number, got ${typeof fillValue}`);
  }
  return full(sizeList("newFull", "size", size), fillValue, like(x, options));
}

/**
 * A tensor of `size` with `x`'s dtype and device unless told
 * (`Tensor.new_empty`). multigrad has no uninitialized memory to hand out:
 * its elements are 0, which is one of the values "empty" allows.
 */
export function newEmpty(
  x: Tensor,
  size: readonly number[],
  options: NewTensorOptions = {},
): Tensor {
  requireTensor("newEmpty", x, "the input");
  return full(sizeList("newEmpty", "size", size), 0, like(x, options));
}

/**
 * A new tensor holding `data` (nested numbers, a typed array, or a tensor
 * to copy without its history), with `x`'s dtype and device unless told
 * (`Tensor.new_tensor`). Nested numbers follow `tensor`'s rules: int32
 * refuses fractional values where PyTorch truncates them.
 */
export function newTensor(
  x: Tensor,
  data: NewTensorData,
  options: NewTensorOptions = {},
): Tensor {
  requireTensor("newTensor", x, "the input");
  const { dtype, device, requiresGrad } = like(x, options);
  if (data instanceof Tensor) {
    const copy = noGrad(() => data.detach().to(dtype!).to(device!).clone());
    if (requiresGrad) copy.requiresGrad = true;
    return copy;
  }
  return tensor(data, { dtype, device, requiresGrad });
}

// ---- dtype and layout queries ----

const TYPE_NAMES: Record<DType, string> = {
  float32: "torch.FloatTensor",
  float64: "torch.DoubleTensor",
  int32: "torch.IntTensor",
};

/** PyTorch's type names multigrad can honour; `LongTensor` is int32, multigrad's integer type. */
const NAMED_TYPES: Record<string, DType> = {
  "torch.FloatTensor": "float32",
  "torch.DoubleTensor": "float64",
  "torch.IntTensor": "int32",
  "torch.LongTensor": "int32",
};

/**
 * With no argument, PyTorch's type name of `x` (`"torch.FloatTensor"`,
 * `"torch.DoubleTensor"`, `"torch.IntTensor"`; the same on every device);
 * with a dtype or one of those names, `x` converted to it (`Tensor.type`).
 */
export function type(x: Tensor): string;
/** `x` converted to `dtype` (a dtype or a PyTorch type name). */
export function type(x: Tensor, dtype: DType | string): Tensor;
export function type(x: Tensor, dtype?: DType | string): string | Tensor {
  requireTensor("type", x, "the input");
  if (dtype === undefined) return TYPE_NAMES[x.dtype];
  const target = (DTYPES as readonly string[]).includes(dtype)
    ? dtype as DType
    : NAMED_TYPES[dtype];
  if (!target) {
    throw new TypeError(
      `type: unknown type ${JSON.stringify(dtype)} (expected one of ${
        [...DTYPES, ...Object.keys(NAMED_TYPES)].join(", ")
      })`,
    );
  }
  return x.to(target);
}

/**
 * The step in elements from one index to the next along each dim (or along
 * `dim`), as `Tensor.stride`: always the contiguous strides, since
 * multigrad's tensors are contiguous.
 */
export function stride(x: Tensor): number[];
/** The stride of `dim` (negative counts from the end). */
export function stride(x: Tensor, dim: number): number;
export function stride(x: Tensor, dim?: number): number | number[] {
  requireTensor("stride", x, "the input");
  const strides = contiguousStrides(x.shape);
  if (dim === undefined) return strides;
  return strides[normalizeDim(dim, x.ndim, "stride", false)];
}

/** Bytes per element (`Tensor.element_size`): 4 for float32 and int32, 8 for float64. */
export function elementSize(x: Tensor): number {
  requireTensor("elementSize", x, "the input");
  return dtypeSize(x.dtype);
}

/** The device index as PyTorch's `Tensor.get_device`: -1 on cpu, else the index (`webgpu:1` → 1). */
export function getDevice(x: Tensor): number {
  requireTensor("getDevice", x, "the input");
  return x.device.backend === "cpu" ? -1 : x.device.index;
}

/** Whether `x`'s dtype is a floating-point one (`torch.is_floating_point`). */
export function isFloatingPoint(x: Tensor): boolean {
  requireTensor("isFloatingPoint", x, "the input");
  return isFloat(x.dtype);
}

/** Whether `x`'s dtype is signed (`Tensor.is_signed`): every multigrad dtype is. */
export function isSigned(x: Tensor): boolean {
  requireTensor("isSigned", x, "the input");
  return true;
}

/** Whether `x` and `other` have the same shape (`torch.is_same_size`). */
export function isSameSize(x: Tensor, other: Tensor): boolean {
  requireTensor("isSameSize", x, "the input");
  requireTensor("isSameSize", other, "other");
  return sameShape(x.shape, other.shape);
}

/**
 * Whether the single element of `x` is not 0 (NaN counts as nonzero), as
 * `torch.is_nonzero`; async, since it reads the value. A tensor with no
 * element or with more than one is ambiguous: the promise rejects.
 */
export async function isNonzero(x: Tensor): Promise<boolean> {
  requireTensor("isNonzero", x, "the input");
  const n = x.numel();
  if (n !== 1) {
    throw new RangeError(
      `isNonzero: Boolean value of Tensor with ${
        n === 0 ? "no values" : "more than one value"
      } is ambiguous (shape ${formatShape(x.shape)})`,
    );
  }
  return (await x.item()) !== 0;
}

/** The values as nested arrays, as `Tensor.tolist` (async: it reads the data). */
export function tolist(x: Tensor): Promise<NestedNumbers> {
  requireTensor("tolist", x, "the input");
  return x.toArray();
}

// ---- shapes ----

/**
 * `x` summed down to `size`, which must broadcast to `x`'s shape (the
 * reverse of `expand`), as `Tensor.sum_to_size`.
 */
export function sumToSize(x: Tensor, size: readonly number[]): Tensor {
  requireTensor("sumToSize", x, "the input");
  const target = sizeList("sumToSize", "size", size);
  const lead = x.ndim - target.length;
  const fits = lead >= 0 && target.every((n, i) => n === 1 || n === x.shape[lead + i]);
  if (!fits) {
    throw new RangeError(
      `sumToSize: size ${formatShape(target)} is not expandable to the input's shape ${
        formatShape(x.shape)
      }`,
    );
  }
  return forwardScope(() => sumTo(x, target));
}

/**
 * Every window of `size` elements along `dim`, `step` apart, as
 * `Tensor.unfold`: `dim` becomes the number of windows
 * (`floor((n - size) / step) + 1`) and a last dim of `size` is appended.
 * The result is a copy; overlapping windows add their gradients.
 */
export function unfold(x: Tensor, dim: number, size: number, step: number): Tensor {
  requireTensor("unfold", x, "the input");
  requireInteger("unfold", "dim", dim);
  requireInteger("unfold", "size", size);
  requireInteger("unfold", "step", step);
  if (x.ndim === 0) {
    // PyTorch treats a 0-d tensor as one element along dim 0 and drops the window dim.
    normalizeDim(dim, 0, "unfold");
    if (size > 1) {
      throw new RangeError(`unfold: maximum size for a 0-d tensor is 1 but size is ${size}`);
    }
    if (step <= 0) throw new RangeError(`unfold: step is ${step} but must be > 0`);
    return forwardScope(() => unfold(x.reshape([1]), 0, size, step).reshape([size]));
  }
  const d = normalizeDim(dim, x.ndim, "unfold", false);
  const n = x.shape[d];
  if (size < 0 || size > n) {
    throw new RangeError(
      `unfold: maximum size for dim ${d} (shape ${
        formatShape(x.shape)
      }) is ${n} but size is ${size}`,
    );
  }
  if (step <= 0) throw new RangeError(`unfold: step is ${step} but must be > 0`);
  const count = Math.floor((n - size) / step) + 1;
  const index = new Int32Array(count * size);
  for (let w = 0; w < count; w++) {
    for (let j = 0; j < size; j++) index[w * size + j] = w * step + j;
  }
  return forwardScope(() => {
    const picked = indexSelect(x, d, tensor(index, { device: x.device }));
    const windows = picked.reshape([...x.shape.slice(0, d), count, size, ...x.shape.slice(d + 1)]);
    const order = windows.shape.map((_, i) => i).filter((i) => i !== d + 1);
    return windows.permute([...order, d + 1]);
  });
}

/**
 * A tensor of `size` whose element at index `i` is element
 * `storageOffset + Σ i[k]·stride[k]` of `x` in row-major order, as
 * `torch.as_strided` on a contiguous tensor. Built from a gather, so the
 * result is a copy (writes to it do not reach `x`); where elements repeat,
 * their gradients add, as PyTorch's.
 */
export function asStrided(
  x: Tensor,
  size: readonly number[],
  stride: readonly number[],
  storageOffset = 0,
): Tensor {
  requireTensor("asStrided", x, "the input");
  const sizes = sizeList("asStrided", "size", size);
  if (!Array.isArray(stride) || stride.some((s) => !Number.isInteger(s))) {
    throw new TypeError(
      `asStrided: stride must be an array of integers, got ${JSON.stringify(stride)}`,
    );
  }
  if (stride.length !== sizes.length) {
    throw new RangeError(
      `asStrided: size ${formatShape(sizes)} and stride ${
        formatShape(stride)
      } must have the same length`,
    );
  }
  if (stride.some((s) => s < 0)) {
    throw new RangeError(
      `asStrided: negative strides are not supported, got stride ${formatShape(stride)}`,
    );
  }
  requireInteger("asStrided", "storageOffset", storageOffset);
  if (storageOffset < 0) {
    throw new RangeError(`asStrided: storageOffset must be >= 0, got ${storageOffset}`);
  }
  const total = numelOf(sizes);
  const needed = total === 0
    ? 0
    : storageOffset + 1 + sizes.reduce((acc, n, k) => acc + (n - 1) * stride[k], 0);
  if (needed > x.numel()) {
    throw new RangeError(
      `asStrided: size ${formatShape(sizes)}, stride ${
        formatShape(stride)
      } and storageOffset ${storageOffset} need ${needed} elements, but the input (shape ${
        formatShape(x.shape)
      }) has ${x.numel()}`,
    );
  }
  const index = new Int32Array(total);
  const at = new Array<number>(sizes.length).fill(0);
  for (let i = 0; i < total; i++) {
    index[i] = storageOffset + at.reduce((acc, v, k) => acc + v * stride[k], 0);
    for (let k = sizes.length - 1; k >= 0; k--) {
      if (++at[k] < sizes[k]) break;
      at[k] = 0;
    }
  }
  return forwardScope(() =>
    indexSelect(x.reshape([x.numel()]), 0, tensor(index, { device: x.device })).reshape(sizes)
  );
}

/**
 * `x` split along `dim` into pieces of the given sizes, which must sum to
 * that dim's size, as `torch.split_with_sizes`.
 */
export function splitWithSizes(x: Tensor, splitSizes: readonly number[], dim = 0): Tensor[] {
  requireTensor("splitWithSizes", x, "the input");
  const sizes = sizeList("splitWithSizes", "splitSizes", splitSizes);
  requireInteger("splitWithSizes", "dim", dim);
  const d = normalizeDim(dim, x.ndim, "splitWithSizes", false);
  const total = sizes.reduce((a, b) => a + b, 0);
  if (total !== x.shape[d]) {
    throw new RangeError(
      `splitWithSizes: splitSizes ${
        JSON.stringify(sizes)
      } sum to ${total}, but dim ${d} of the input (shape ${formatShape(x.shape)}) has size ${
        x.shape[d]
      }`,
    );
  }
  return split(x, sizes, d);
}

/**
 * `length` elements of `x` from `start` along `dim`, as a new tensor
 * (`torch.narrow_copy`; multigrad's `narrow` copies as well).
 */
export function narrowCopy(x: Tensor, dim: number, start: number, length: number): Tensor {
  requireTensor("narrowCopy", x, "the input");
  // A copy here as in PyTorch, so unlike narrow's an in-place change to it is allowed.
  return owned(() => narrow(x, dim, start, length));
}

/**
 * `[mantissa, exponent]` with `x = mantissa · 2^exponent`, `|mantissa|` in
 * [0.5, 1) and an int32 `exponent`, as `torch.frexp`; 0, ±inf and NaN give
 * themselves and exponent 0. The mantissa's gradient is `g / 2^exponent`.
 */
export function frexp(x: Tensor): [Tensor, Tensor] {
  requireTensor("frexp", x, "the input");
  if (!isFloat(x.dtype)) {
    throw new TypeError(`frexp: only floating-point dtypes are supported, got ${x.dtype}`);
  }
  return forwardScope(() => {
    // 2^-e in two halves, so neither overflows nor goes subnormal at float32's extremes.
    const scale = (t: Tensor, e: Tensor) => {
      const half = e.div(2).floor();
      return t.mul(exp2(half.neg())).mul(exp2(half.sub(e)));
    };
    const e = noGrad(() => {
      const a = x.abs();
      const regular = isfinite(x).mul(a.ne(0));
      const safe = where(regular, a, 1);
      // webgpu's log2 is not exact below the smallest normal (it may even flush to 0): a first
      // guess no lower than that normal's exponent scales a subnormal into the normal range,
      // where a second log2 finds the rest.
      const first = log2(safe).floor().add(1).clampMin(x.dtype === "float32" ? -125 : -1021);
      const guess = first.add(log2(scale(safe, first)).floor().add(1));
      // log2 may be off by one ulp at powers of two: the mantissa's range settles it.
      const m = scale(safe, guess);
      const fixed = guess.add(m.ge(1)).sub(m.lt(0.5));
      return where(regular, fixed, 0);
    });
    return [scale(x, e), e.to("int32")];
  });
}

// ---- matrix views and real-number no-ops ----

function requireMatrices(op: string, x: Tensor, exactlyTwo = false): void {
  if (exactlyTwo ? x.ndim !== 2 : x.ndim < 2) {
    throw new RangeError(
      `${op} is only supported on matrices${
        exactlyTwo ? " (2-D tensors)" : " or batches of matrices"
      }, got a ${x.ndim}-D tensor (shape ${formatShape(x.shape)})`,
    );
  }
}

/** The last two dims swapped (`Tensor.mT`; a copy). */
export function mT(x: Tensor): Tensor {
  requireTensor("mT", x, "the input");
  requireMatrices("mT", x);
  return x.transpose(-2, -1);
}

/** The conjugate transpose of each matrix (`Tensor.mH`): {@link mT}, as every tensor is real. */
export function mH(x: Tensor): Tensor {
  requireTensor("mH", x, "the input");
  requireMatrices("mH", x);
  return x.transpose(-2, -1);
}

/** {@link mH} (`Tensor.adjoint`). */
export function adjoint(x: Tensor): Tensor {
  requireTensor("adjoint", x, "the input");
  requireMatrices("adjoint()", x);
  return x.transpose(-2, -1);
}

/**
 * The dims reversed (`Tensor.T`): a matrix transposed, a 0-d or 1-D tensor
 * itself, more dims reversed (deprecated in PyTorch for ndim > 2, still allowed).
 */
export function T(x: Tensor): Tensor {
  requireTensor("T", x, "the input");
  if (x.ndim < 2) return x;
  return x.permute(x.shape.map((_, i) => x.ndim - 1 - i));
}

/** The conjugate transpose of a matrix (`Tensor.H`; 2-D only, as PyTorch). */
export function H(x: Tensor): Tensor {
  requireTensor("H", x, "the input");
  requireMatrices("H", x, true);
  return x.transpose(0, 1);
}
