import type { TypedArray } from "../../../dtype.ts";

/** A cpu buffer: a typed array behind an object handle. */
export class CpuBuffer {
  /** Wraps `data`. */
  constructor(public data: TypedArray) {}
}
