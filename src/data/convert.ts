/**
 * `defaultConvert`, as `torch.utils.data.default_convert`.
 * @module
 */

import { tensor } from "../ops/factory.ts";
import { Tensor } from "../tensor.ts";
import { isPlainObject } from "../util.ts";

/**
 * What {@link defaultConvert} makes of a `T`: typed arrays of a tensor
 * dtype become tensors, arrays and plain objects are converted
 * element-wise, anything else is kept.
 */
export type Converted<T> = T extends Tensor ? Tensor
  : T extends Float32Array | Float64Array | Int32Array ? Tensor
  : T extends readonly unknown[] ? { -readonly [K in keyof T]: Converted<T[K]> }
  : T extends number | boolean | string | null | undefined ? T
  : T extends object ? { [K in keyof T]: Converted<T[K]> }
  : T;

function convert(value: unknown): unknown {
  if (value instanceof Tensor) return value;
  if (value instanceof Float32Array) return tensor(value, { dtype: "float32" });
  if (value instanceof Float64Array) return tensor(value, { dtype: "float64" });
  if (value instanceof Int32Array) return tensor(value, { dtype: "int32" });
  if (Array.isArray(value)) return value.map(convert);
  if (isPlainObject(value)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = convert(v);
    return out;
  }
  return value;
}

/**
 * Converts one sample without batching it, as PyTorch's `default_convert`
 * (the collate of a loader without automatic batching): a `Float32Array`,
 * `Float64Array` or `Int32Array` becomes a 1-dimensional tensor of that
 * dtype on the default device (as PyTorch turns a NumPy array into a
 * tensor), arrays and plain objects are converted element-wise into new
 * ones, and tensors, numbers, booleans, strings and anything else are
 * kept as they are (PyTorch keeps Python numbers too). Other typed arrays
 * (no tensor dtype holds them exactly) are kept, as PyTorch keeps NumPy
 * arrays of dtypes it has no tensor for.
 */
export function defaultConvert<T>(sample: T): Converted<T> {
  return convert(sample) as Converted<T>;
}
