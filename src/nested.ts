/**
 * Walking nested arguments (arrays and plain objects, as PyTorch's nested
 * tuples, lists and dicts) to reach the tensors in them.
 * @module
 */

import { Tensor } from "./tensor.ts";
import { isPlainObject } from "./util.ts";

/** `value` with every tensor in it replaced by `fn(tensor)`; other values kept. */
export function mapTensors(value: unknown, fn: (t: Tensor) => Tensor): unknown {
  if (value instanceof Tensor) return fn(value);
  if (Array.isArray(value)) return value.map((v) => mapTensors(v, fn));
  if (isPlainObject(value)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = mapTensors(v, fn);
    return out;
  }
  return value;
}
