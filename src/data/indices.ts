/**
 * The index-list check shared by `Subset` and `SubsetRandomSampler`.
 * Internal: not re-exported from the data namespace.
 * @module
 */

/**
 * `indices` as a new array, refusing anything that is neither array-like nor
 * iterable: a Tensor is neither, and Array.from would silently make an empty
 * list of it.
 */
export function hostIndexList(op: string, indices: unknown): number[] {
  if (
    indices === null || typeof indices !== "object" ||
    !("length" in indices || Symbol.iterator in indices)
  ) {
    const got = indices === null || typeof indices !== "object"
      ? String(typeof indices)
      : (indices as object).constructor?.name ?? "object";
    throw new TypeError(
      `${op}: indices must be an array of integers read on the host, got ${got}${
        got === "Tensor" ? "; for a Tensor pass (await t.toArray())" : ""
      }`,
    );
  }
  return Array.from(indices as ArrayLike<number>);
}
