/**
 * A pool of GPU buffers grouped by size class, so that the allocate/free
 * churn of a training loop reuses memory instead of creating buffers.
 * @module
 */

/** Smallest class: keeps every class a multiple of 16 bytes for vec4 bindings. */
const MIN_CLASS = 64;

/**
 * The size class holding `bytes`: 64 bytes, then four steps per power of two
 * (1, 1.25, 1.5, 1.75 times 2^e), so a buffer wastes at most 25%.
 */
export function sizeClass(bytes: number): number {
  if (bytes <= MIN_CLASS) return MIN_CLASS;
  const e = Math.floor(Math.log2(bytes));
  const step = 2 ** (e - 2);
  const c = Math.ceil(bytes / step) * step;
  return c;
}

/** A pool of buffers with one usage, by size class. */
export class BufferPool {
  readonly #create: (size: number) => GPUBuffer;
  /** Free buffers per size class, newest-made first, so `pop` gives the oldest. */
  readonly #free = new Map<number, GPUBuffer[]>();
  /** Creation order of every buffer this pool made. */
  readonly #made = new WeakMap<GPUBuffer, number>();
  #count = 0;
  #freeBytes = 0;
  #inUseBytes = 0;
  /** Free bytes kept before extra freed buffers are destroyed instead. */
  readonly #maxFreeBytes: number;

  /** A pool making new buffers with `create(size)`. */
  constructor(create: (size: number) => GPUBuffer, maxFreeBytes: number) {
    this.#create = create;
    this.#maxFreeBytes = maxFreeBytes;
  }

  /** Bytes of buffers handed out and not returned. */
  get inUseBytes(): number {
    return this.#inUseBytes;
  }

  /** Bytes of buffers waiting in the pool. */
  get freeBytes(): number {
    return this.#freeBytes;
  }

  /** A buffer of at least `bytes` bytes (its size is the class size). */
  acquire(bytes: number): GPUBuffer {
    const size = sizeClass(bytes);
    this.#inUseBytes += size;
    const list = this.#free.get(size);
    const reused = list?.pop();
    if (reused) {
      this.#freeBytes -= size;
      return reused;
    }
    const made = this.#create(size);
    this.#made.set(made, this.#count++);
    return made;
  }

  /**
   * Takes a buffer back. Returns the buffer when the pool is full: the caller
   * destroys it once no queued command can still use it.
   */
  release(buffer: GPUBuffer): GPUBuffer | undefined {
    const size = buffer.size;
    this.#inUseBytes -= size;
    if (this.#freeBytes + size > this.#maxFreeBytes) return buffer;
    let list = this.#free.get(size);
    if (!list) {
      list = [];
      this.#free.set(size, list);
    }
    // The oldest free buffer is handed out first, whatever order buffers came
    // back in: a training step then gets the same buffers every step, so the
    // runtime's bind groups (keyed by buffers) are found in its cache instead
    // of made anew, each holding ~2 KB of native memory until collected.
    const order = this.#made.get(buffer) ?? -1;
    let lo = 0;
    let hi = list.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((this.#made.get(list[mid]) ?? -1) > order) lo = mid + 1;
      else hi = mid;
    }
    list.splice(lo, 0, buffer);
    this.#freeBytes += size;
    return undefined;
  }

  /** Destroys every pooled free buffer. */
  clear(): void {
    for (const list of this.#free.values()) {
      for (const b of list) b.destroy();
    }
    this.#free.clear();
    this.#freeBytes = 0;
  }
}
