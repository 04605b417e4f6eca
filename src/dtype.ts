/**
 * Element types. The core only needs to know their size, their typed-array
 * class and how they promote; backends decide which ones they support.
 * @module
 */

/** An element type: `float32` and `int32` everywhere, `float64` on cpu. */
export type DType = "float32" | "int32" | "float64";

/** The typed array that holds a dtype's elements on the host. */
export type TypedArray = Float32Array | Int32Array | Float64Array;

/** All dtypes the core knows. */
export const DTYPES: readonly DType[] = ["float32", "int32", "float64"];

/** Bytes per element. */
export function dtypeSize(dtype: DType): number {
  return dtype === "float64" ? 8 : 4;
}

/** Whether a dtype holds floating-point numbers. */
export function isFloat(dtype: DType): boolean {
  return dtype !== "int32";
}

/** A new zero-filled host array of `length` elements of `dtype`. */
export function allocHost(dtype: DType, length: number): TypedArray {
  switch (dtype) {
    case "float32":
      return new Float32Array(length);
    case "int32":
      return new Int32Array(length);
    case "float64":
      return new Float64Array(length);
  }
}

/**
 * Copies `values` into a new host array of `dtype` (rounding as the typed
 * array does; int32 truncates toward zero). A value int32 cannot hold (NaN,
 * ±inf, outside [-2^31, 2^31)) is an error naming `what`, not a wrapped
 * number.
 */
export function toHost(
  dtype: DType,
  values: ArrayLike<number>,
  what = "int32 data",
): TypedArray {
  if (dtype === "int32") { for (let i = 0; i < values.length; i++) checkInt32(values[i], what); }
  const out = allocHost(dtype, values.length);
  out.set(values);
  return out;
}

/** Throws unless int32 can hold `value` (after truncation), naming `what`. */
export function checkInt32(value: number, what: string): void {
  if (!(value > -2147483649 && value < 2147483648)) {
    throw new RangeError(
      `${what}: ${value} cannot be stored as int32 (integers from -2147483648 to 2147483647)`,
    );
  }
}

/**
 * Throws, as PyTorch's `full` and `fill_` do, unless `dtype` holds `value` (±inf and NaN fit a
 * float; fractions truncate to int32). `tensor([1e40])` is inf instead, as PyTorch's.
 */
export function checkFill(dtype: DType, value: number, what: string): void {
  const max = { int32: 2147483647, float32: 3.4028234663852886e38, float64: Infinity }[dtype];
  const min = dtype === "int32" ? -2147483648 : -max;
  if (!(value >= min && value <= max) && (dtype === "int32" || Number.isFinite(value))) {
    throw new RangeError(
      `${what}: ${value} cannot be stored as ${dtype} without overflow (${min} to ${max})`,
    );
  }
}

let defaultFloat: DType = "float32";
/** The dtype floating factories make unless told (`torch.get_default_dtype`); see `setDefaultDtype`. */
export const getDefaultDtype = (): DType => defaultFloat;
/** Sets {@link getDefaultDtype}'s dtype unchecked: the public, checked form is `setDefaultDtype`. */
export const setDefaultFloat = (dtype: DType): DType => (defaultFloat = dtype);

/** The dtype of a typed array. */
export function dtypeOfArray(array: TypedArray): DType {
  if (array instanceof Float32Array) return "float32";
  if (array instanceof Int32Array) return "int32";
  return "float64";
}

/** PyTorch's promotion for two tensor operands: float64 > float32 > int32. */
export function promoteTypes(a: DType, b: DType): DType {
  if (a === b) return a;
  if (a === "float64" || b === "float64") return "float64";
  return "float32";
}

/** Throws a clear error when `dtype` is not one the core knows. */
export function assertDType(dtype: string): asserts dtype is DType {
  if (!(DTYPES as readonly string[]).includes(dtype)) {
    throw new TypeError(
      `unknown dtype "${dtype}": expected one of ${DTYPES.join(", ")}`,
    );
  }
}
