/**
 * Byte views of typed arrays, shared by the process-group backends that move
 * raw bytes (mpi, tcp). Internal: not re-exported from `distributed`.
 * @module
 */

import type { TypedArray } from "../dtype.ts";

/** The bytes of a typed array (a view, no copy). */
export function bytesOf(array: TypedArray): Uint8Array {
  return new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
}

/** The elements of `bytes` as an array of `like`'s type (a view when aligned, else a copy). */
export function viewAs(like: TypedArray, bytes: Uint8Array): TypedArray {
  const Type = like.constructor as Float32ArrayConstructor;
  if (bytes.byteOffset % Type.BYTES_PER_ELEMENT !== 0) bytes = bytes.slice();
  return new Type(bytes.buffer, bytes.byteOffset, bytes.byteLength / Type.BYTES_PER_ELEMENT);
}
