/**
 * The default floating dtype, as `torch.set_default_dtype` /
 * `torch.get_default_dtype`. The state itself lives in `src/dtype.ts`, where
 * the core's factories read it; this is its public, checked setter.
 * @module
 */

import { type DType, getDefaultDtype, setDefaultFloat } from "../dtype.ts";

export { getDefaultDtype };

/**
 * Sets the dtype that floating tensors are made in unless told, as
 * `torch.set_default_dtype`: `zeros`, `ones`, `full`, `rand`, `randn`,
 * `empty`, `eye`, `linspace`, `logspace`, the windows, `arange` and `tensor`
 * of non-integers, `tensor` of JS numbers (integers too: see `tensor`), and
 * the parameters and floating buffers of nn layers. Results of int32
 * operands that must be floating (`div`, `x.mul(1.5)`) take it too. `*Like`
 * and `new*` factories keep their input's dtype, and a typed array keeps its
 * own. float32 at startup.
 *
 * Only float32 and float64 can be the default (anything else is an error
 * naming it, as PyTorch's "only floating-point types are supported as the
 * default type"). float64 exists on cpu only: with it as the default, a
 * factory on a webgpu device fails, its error naming the default dtype.
 *
 * The setting is global, shared by all code in the process: code that
 * changes it briefly should restore it in `finally`:
 *
 * ```ts
 * const previous = getDefaultDtype();
 * setDefaultDtype("float64");
 * try {
 *   // gradient checks, scientific code...
 * } finally {
 *   setDefaultDtype(previous);
 * }
 * ```
 */
export function setDefaultDtype(dtype: DType): void {
  if (dtype !== "float32" && dtype !== "float64") {
    throw new TypeError(
      `setDefaultDtype: only floating dtypes (float32, float64) can be the default, got ${
        typeof dtype === "string" ? dtype : typeof dtype
      }`,
    );
  }
  setDefaultFloat(dtype);
}
