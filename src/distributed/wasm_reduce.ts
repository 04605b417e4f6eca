/**
 * The float32 sums of all-reduces in WebAssembly (f32x4), over the shared
 * memory a local group exchanges through: five times the scalar loop's
 * speed, and on the critical path of every DDP step (the ranks combine the
 * gradients after the last one has arrived). Internal to the distributed
 * layer.
 * @module
 */

import { instantiate } from "../backends/cpu/wasm/load.ts";
import { REDUCE_WASM } from "../backends/cpu/wasm/modules.ts";
import type { ReduceOp } from "./backend.ts";

type Sum2 = (out: number, a: number, b: number, n: number, d: number) => void;
type Accumulate = (out: number, a: number, n: number, d: number) => void;

/**
 * Combines float32 arrays that live in one WebAssembly memory, in rank
 * order, rounding every step as {@link reduceInto} does (the same bits).
 */
export interface WasmReducer {
  /**
   * `out[i] = op over q of sources[q][i]` for `n` float32 elements (byte
   * offsets in the memory) when `op` is `"sum"` or `"avg"` and there are at
   * least two sources; returns false (nothing done) otherwise.
   */
  reduce(out: number, sources: readonly number[], n: number, op: ReduceOp): boolean;
  /** `out[i] = (out[i] + from[i]) / divisor` for `n` float32 elements (byte offsets). */
  accumulate(out: number, from: number, n: number, divisor: number): void;
}

/** A reducer over `memory`, or null where WebAssembly SIMD or shared memory is missing. */
export function wasmReducer(memory: WebAssembly.Memory): WasmReducer | null {
  const instance = instantiate(REDUCE_WASM, { env: { memory } });
  if (!instance) return null;
  const sum2 = instance.exports.sum2 as Sum2;
  const accumulate = instance.exports.accumulate as Accumulate;
  return {
    reduce(out, sources, n, op) {
      const count = sources.length;
      if ((op !== "sum" && op !== "avg") || count < 2) return false;
      // "avg" sums, then divides once (x / 1 is exact: "sum" divides by 1).
      const last = (q: number) => (op === "avg" && q === count - 1 ? count : 1);
      sum2(out, sources[0], sources[1], n, last(1));
      for (let q = 2; q < count; q++) accumulate(out, sources[q], n, last(q));
      return true;
    },
    accumulate,
  };
}

const WASM_PAGE = 1 << 16;

/** A shared WebAssembly memory of at least `bytes`, or null where there is none. */
export function sharedMemory(bytes: number): WebAssembly.Memory | null {
  const pages = Math.max(1, Math.ceil(bytes / WASM_PAGE));
  try {
    if (typeof WebAssembly === "undefined") return null;
    return new WebAssembly.Memory({ initial: pages, maximum: pages, shared: true });
  } catch {
    // No shared WebAssembly memory here (an engine without threads).
    return null;
  }
}

/**
 * Float32 arrays in a WebAssembly memory of their own, for backends whose
 * arrays arrive elsewhere (`"mpi"` receives every rank's array into one):
 * `parts` arrays of `length` elements plus one for the result. Made once
 * per size and reused (a DDP step moves the same buckets every time).
 */
export class ReduceArea {
  /** Elements of each part. */
  readonly length: number;
  readonly #parts: Float32Array[];
  readonly #out: Float32Array;
  readonly #reducer: WasmReducer;
  readonly #stride: number;

  private constructor(
    memory: WebAssembly.Memory,
    reducer: WasmReducer,
    parts: number,
    length: number,
    stride: number,
  ) {
    this.length = length;
    this.#reducer = reducer;
    this.#stride = stride;
    this.#parts = Array.from(
      { length: parts },
      (_, q) => new Float32Array(memory.buffer, q * stride, length),
    );
    this.#out = new Float32Array(memory.buffer, parts * stride, length);
  }

  /** An area of `parts` arrays of `length` float32, or null where WebAssembly SIMD or shared memory is missing. */
  static create(parts: number, length: number): ReduceArea | null {
    // 16-byte aligned parts.
    const stride = Math.ceil((length * 4) / 16) * 16;
    const memory = sharedMemory((parts + 1) * stride);
    if (!memory) return null;
    const reducer = wasmReducer(memory);
    return reducer ? new ReduceArea(memory, reducer, parts, length, stride) : null;
  }

  /** Part `q` (rank q's array). */
  part(q: number): Float32Array {
    return this.#parts[q];
  }

  /** The result's array (what {@link reduce} and {@link reduceRange} write). */
  result(): Float32Array {
    return this.#out;
  }

  /** Combines the parts in order with `op` (`"sum"` or `"avg"`) and returns the result. */
  reduce(op: ReduceOp): Float32Array {
    this.reduceRange(op, 0, this.length);
    return this.#out;
  }

  /**
   * Combines elements [`from`, `to`) of the parts into the same elements of
   * the result: a part may be combined piece by piece as it arrives.
   */
  reduceRange(op: ReduceOp, from: number, to: number): void {
    const skip = from * 4;
    const at = this.#parts.map((_, q) => q * this.#stride + skip);
    if (!this.#reducer.reduce(this.#parts.length * this.#stride + skip, at, to - from, op)) {
      throw new RangeError(`ReduceArea: op ${op} over ${at.length} parts is not a SIMD sum`);
    }
  }
}

/**
 * A ring all-reduce's float32 memory in WebAssembly (`"tcp"` with 3+
 * ranks): the array, and a scratch of one chunk that the previous rank's
 * chunks are received into and added from with SIMD.
 */
export class RingArea {
  /** Elements of the array. */
  readonly length: number;
  /** The array being reduced. */
  readonly data: Float32Array;
  /** Room for the largest of the ring's chunks. */
  readonly scratch: Float32Array;
  readonly #reducer: WasmReducer;

  private constructor(
    memory: WebAssembly.Memory,
    reducer: WasmReducer,
    length: number,
    scratch: number,
  ) {
    this.length = length;
    this.#reducer = reducer;
    // 16-byte aligned, as the parts of a ReduceArea.
    const stride = Math.ceil((length * 4) / 16) * 16;
    this.data = new Float32Array(memory.buffer, 0, length);
    this.scratch = new Float32Array(memory.buffer, stride, scratch);
  }

  /** An area for `length` float32 around a ring of `ranks`, or null where WebAssembly SIMD or shared memory is missing. */
  static create(length: number, ranks: number): RingArea | null {
    const scratch = Math.ceil(length / ranks);
    const memory = sharedMemory(Math.ceil((length * 4) / 16) * 16 + scratch * 4);
    if (!memory) return null;
    const reducer = wasmReducer(memory);
    return reducer ? new RingArea(memory, reducer, length, scratch) : null;
  }

  /**
   * `into[i] = (into[i] + from[i]) / divisor`, rounding as the scalar loop
   * does; `into` is a piece of {@link data}, `from` of the same length
   * anywhere (copied into {@link scratch} first when it is not there).
   */
  accumulate(into: Float32Array, from: Float32Array, divisor: number): void {
    const memory = this.data.buffer;
    if (
      into.buffer !== memory || into.length !== from.length || from.length > this.scratch.length
    ) {
      throw new RangeError(
        `RingArea: cannot add ${from.length} elements into ${into.length} (scratch ${this.scratch.length})`,
      );
    }
    let source = from;
    if (from.buffer !== memory) {
      source = this.scratch.subarray(0, from.length);
      source.set(from);
    }
    this.#reducer.accumulate(into.byteOffset, source.byteOffset, into.length, divisor);
  }
}

/**
 * Areas (each of a `length`) kept by length for the next call (a DDP step
 * moves the same buckets every time; at most `keep` lengths). A call
 * takes one out while it runs and gives it back only after it succeeded:
 * two calls never share one, and a failed call's area, where a receive
 * may still land, is never handed out again.
 */
export class ReduceAreas<A extends { readonly length: number } = ReduceArea> {
  readonly #kept = new Map<number, A>();
  readonly #make: (length: number) => A | null;
  readonly #keep: number;
  #simd = true;

  /** `make(length)` builds an area, or returns null where WebAssembly SIMD or shared memory is missing. */
  constructor(make: (length: number) => A | null, keep = 4) {
    this.#make = make;
    this.#keep = keep;
  }

  /** Whether areas can be made (WebAssembly SIMD and shared memory are there, as far as known). */
  get available(): boolean {
    return this.#simd;
  }

  /**
   * An area of `length` float32 that no call holds, or null without
   * WebAssembly SIMD or where it would not fit in one WebAssembly memory.
   */
  take(length: number): A | null {
    if (!this.#simd) return null;
    const kept = this.#kept.get(length);
    if (kept) {
      this.#kept.delete(length);
      return kept;
    }
    const made = this.#make(length);
    // Too large for one WebAssembly memory (4 GiB), or no SIMD or shared memory at all.
    if (!made && !this.#make(4)) this.#simd = false;
    return made;
  }

  /** Keeps `area` for the next call of its length (after its call succeeded). */
  giveBack(area: A): void {
    if (this.#kept.has(area.length)) return;
    if (this.#kept.size >= this.#keep) this.#kept.delete(this.#kept.keys().next().value!);
    this.#kept.set(area.length, area);
  }
}
