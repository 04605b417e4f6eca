/**
 * Regions of a WebAssembly memory handed out by byte length: the matmul
 * kernel's scratch (packed panels, C) and, where the memory is shared, the
 * cpu backend's large float32 arrays, so that the kernel reads its operands
 * where they are instead of copying them in first.
 * @module
 */

/** Every region starts on a cache line. */
const ALIGN = 64;

/** A bump allocator with exact-size reuse over one WebAssembly memory. */
export class KernelHeap {
  readonly #memory: WebAssembly.Memory;
  readonly #maxBytes: number;
  #top = ALIGN;
  readonly #free = new Map<number, number[]>();
  /** Every buffer object the memory has given out (a new one after each growth). */
  readonly #buffers = new WeakSet<ArrayBufferLike>();

  /** Regions of `memory`, which may grow to `maxBytes`. */
  constructor(memory: WebAssembly.Memory, maxBytes: number) {
    this.#memory = memory;
    this.#maxBytes = maxBytes;
    this.#buffers.add(memory.buffer);
  }

  /**
   * The byte offset of a free region of at least `bytes`, growing the
   * memory if needed; undefined when it cannot grow that far.
   */
  alloc(bytes: number): number | undefined {
    const size = Math.ceil(Math.max(bytes, 1) / ALIGN) * ALIGN;
    const reused = this.#free.get(size)?.pop();
    if (reused !== undefined) return reused;
    const end = this.#top + size;
    const have = this.#memory.buffer.byteLength;
    if (end > have) {
      if (end > this.#maxBytes) return undefined;
      try {
        this.#memory.grow(Math.ceil((end - have) / 65536));
      } catch {
        return undefined;
      }
      this.#buffers.add(this.#memory.buffer);
    }
    const at = this.#top;
    this.#top = end;
    return at;
  }

  /** Gives back the region at `at` that `alloc(bytes)` returned. */
  release(at: number, bytes: number): void {
    const size = Math.ceil(Math.max(bytes, 1) / ALIGN) * ALIGN;
    let list = this.#free.get(size);
    if (list === undefined) this.#free.set(size, list = []);
    list.push(at);
  }

  /** A float32 view of `numel` values at byte `at` (on the memory's current buffer). */
  floats(at: number, numel: number): Float32Array {
    const buffer = this.#memory.buffer;
    this.#buffers.add(buffer);
    return new Float32Array(buffer, at, numel);
  }

  /** An int32 view of `numel` values at byte `at` (on the memory's current buffer). */
  ints(at: number, numel: number): Int32Array {
    const buffer = this.#memory.buffer;
    this.#buffers.add(buffer);
    return new Int32Array(buffer, at, numel);
  }

  /** Whether `array` is a view of this memory (its byteOffset is then its address). */
  owns(array: ArrayBufferView): boolean {
    return this.#buffers.has(array.buffer);
  }
}
