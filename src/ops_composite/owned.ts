/**
 * Results that are new tensors in PyTorch (`repeat`, `tile`, `rot90`,
 * `kron`, a convolution's output, ...) but that an op here builds with a
 * reshape or a view-copy (`expand`, `permute`, `narrow`) of its own
 * intermediates. Those intermediates mark the memory as a view (aliased, or
 * a copy made by a view op), which made `inplace.ts` refuse `result.add_(1)`
 * where PyTorch allows it. {@link owned} gives such memory to the result.
 * @module
 */

import { now } from "../storage.ts";
import { Tensor } from "../tensor.ts";
import { viewCopies } from "../ops/view.ts";

/** The tensors in `value`: itself, an array's, or an object's fields (`{ values, indices }`). */
function tensorsIn(value: unknown): Tensor[] {
  if (value instanceof Tensor) return [value];
  if (Array.isArray(value)) return value.filter((t) => t instanceof Tensor);
  if (value !== null && typeof value === "object") {
    return Object.values(value).filter((t) => t instanceof Tensor);
  }
  return [];
}

/**
 * Runs `op` and marks the memory of each tensor it returns (one, an array,
 * or an object's fields) that `op` itself allocated as the result's own, as
 * a PyTorch op that returns a new tensor: an in-place change to it is
 * allowed. Memory that existed before (an input's, a parameter's, a cached
 * constant's) keeps its marks, so a result that is a view of an input is
 * still refused; so is memory shared by two of the results. Tensors saved
 * for backward that share the memory are no concern: their version check
 * catches a change.
 *
 * `inputs` (tensors or arrays of them): the caller's tensors that `op` may
 * reshape internally. A reshape marks its source shared; when no result
 * shares an input's memory, that view was the op's own and unreachable, so
 * the input gets its mark back as it was and stays changeable in place.
 */
export function owned<T>(op: () => T, ...inputs: unknown[]): T {
  const given = inputs.flatMap(tensorsIn);
  const before = given.map((t) => t.storage.aliased);
  const start = now();
  const result = op();
  const tensors = tensorsIn(result);
  for (const t of tensors) {
    const shared = tensors.filter((u) => u.storage === t.storage).length > 1;
    // Persistent memory made during the op (a cached constant, a lazy parameter) is never the result's own.
    if (t.storage.madeAt <= start || shared || t.storage.persistent) continue;
    viewCopies.delete(t.storage);
    t.storage.aliased = false;
  }
  given.forEach((t, i) => {
    if (!tensors.some((r) => r.storage === t.storage)) t.storage.aliased = before[i];
  });
  return result;
}
