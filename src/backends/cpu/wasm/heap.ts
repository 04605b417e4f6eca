/**
 * Regions of a WebAssembly memory handed out by byte length: the matmul
 * kernel's scratch (packed panels, C) and, where the memory is shared, the
 * cpu backend's large float32 arrays, so that the kernel reads its operands
 * where they are instead of copying them in first.
 * @module
 */

/** Every region starts on a cache line. */
const ALIGN = 64;

/** A free stretch of the memory below the top. */
interface FreeBlock {
  at: number;
  size: number;
}

/**
 * A best-fit allocator over one WebAssembly memory, whose free stretches
 * merge with their neighbours and with the unused top. A WebAssembly memory
 * never shrinks, so a freed region must be reusable at ANY later size: with
 * exact-size reuse only, a run of large products (a 2048² benchmark, say)
 * filled the memory to its cap with regions nothing else could use, and
 * every later array fell back to host memory and the slower paths.
 */
export class KernelHeap {
  readonly #memory: WebAssembly.Memory;
  readonly #maxBytes: number;
  #top = ALIGN;
  /** Free blocks below `#top`, by address, never adjacent to each other or to the top. */
  readonly #free: FreeBlock[] = [];
  /** Every buffer object the memory has given out (a new one after each growth). */
  readonly #buffers = new WeakSet<ArrayBufferLike>();

  /** Regions of `memory`, which may grow to `maxBytes`. */
  constructor(memory: WebAssembly.Memory, maxBytes: number) {
    this.#memory = memory;
    this.#maxBytes = maxBytes;
    this.#buffers.add(memory.buffer);
  }

  /** Bytes from the start of the memory to the end of the highest region in use. */
  get top(): number {
    return this.#top;
  }

  /**
   * The byte offset of a free region of at least `bytes` (the smallest free
   * block that fits, else the top, growing the memory if needed); undefined
   * when it cannot grow that far.
   */
  alloc(bytes: number): number | undefined {
    const size = alignedSize(bytes);
    let best = -1;
    for (let i = 0; i < this.#free.length; i++) {
      const block = this.#free[i];
      if (block.size >= size && (best < 0 || block.size < this.#free[best].size)) {
        best = i;
        if (block.size === size) break;
      }
    }
    if (best >= 0) {
      const block = this.#free[best];
      const at = block.at;
      if (block.size === size) this.#free.splice(best, 1);
      else {
        block.at += size;
        block.size -= size;
      }
      return at;
    }
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
    const size = alignedSize(bytes);
    const free = this.#free;
    // The first block above `at` (binary search by address).
    let lo = 0;
    let hi = free.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (free[mid].at < at) lo = mid + 1;
      else hi = mid;
    }
    const before = lo > 0 ? free[lo - 1] : undefined;
    const after = lo < free.length ? free[lo] : undefined;
    if ((before && before.at + before.size > at) || (after && at + size > after.at)) {
      throw new Error(
        `KernelHeap: region at ${at} (${size} bytes) overlaps a free one: released twice`,
      );
    }
    let block: FreeBlock;
    if (before && before.at + before.size === at) {
      before.size += size;
      block = before;
      lo--;
    } else {
      block = { at, size };
      free.splice(lo, 0, block);
    }
    if (after && block.at + block.size === after.at) {
      block.size += after.size;
      free.splice(lo + 1, 1);
    }
    if (block.at + block.size === this.#top) {
      this.#top = block.at;
      free.splice(lo, 1);
    }
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

/** `bytes` rounded up to whole cache lines (at least one). */
function alignedSize(bytes: number): number {
  return Math.ceil(Math.max(bytes, 1) / ALIGN) * ALIGN;
}
