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
  readonly #free = new Map<number, GPUBuffer[]>();
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
    return this.#create(size);
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
    list.push(buffer);
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
