/**
 * Read-ahead: a read announced by the core (`readSoon`: a loss after
 * `backward()`) is copied and mapped at once, before the backward and the
 * optimizer are recorded, and the `read` that asks for the same values
 * later takes that mapping instead of starting its own.
 *
 * Why: Deno's `mapAsync` waits for the device and then sleeps a fixed 10 ms
 * before it resolves (ext/webgpu `buffer.rs`). Started after the forward,
 * that sleep overlaps the recording and the device work of the rest of the
 * step, instead of following them. Where the mapping is taken early
 * (`early_map.ts`) there is no sleep to hide: the bench's MLP at batch 256
 * on llvmpipe took 35.5 and 39.1 ms per step with read-ahead, 36.3 and
 * 37.7 without (two interleaved runs), so it stays on for the runtimes
 * whose maps must be awaited.
 *
 * Correctness: the runtime watches the buffer from the copy on; anything
 * recorded into it afterwards (a kernel's writable binding, a copy or clear,
 * a host write, the buffer going back to the pool) makes the early copy
 * stale, and the read then copies afresh. Errors of the work recorded
 * between the early copy and the read are still raised by that read (it
 * takes the error scopes up to itself).
 *
 * Cost when the guess is wrong (the loss is not read, say it is logged every
 * 100 steps): one submit more, and waiting for the forward. So a read-ahead
 * that nobody took turns read-ahead off until a read asks for a buffer that
 * was announced meanwhile.
 * @module
 */

import type { DType } from "../../dtype.ts";
import type { Runtime } from "./runtime.ts";

/** A copy started early: its staging buffer and its mapping. */
export interface EarlyRead {
  readonly buffer: GPUBuffer;
  readonly offset: number;
  readonly numel: number;
  readonly dtype: DType;
  readonly staging: GPUBuffer;
  /** `staging.mapAsync(...)`, started at once. */
  readonly mapped: Promise<void>;
}

/** The read-ahead of one device (at most one copy in flight). */
export class ReadAhead {
  readonly #rt: Runtime;
  #started: EarlyRead | null = null;
  #enabled = true;
  /** Announced while read-ahead was off: reading it turns read-ahead back on. */
  #announced: GPUBuffer | null = null;
  /** Read-aheads started, and taken by a read (for tests and the bench). */
  readonly counts = { started: 0, taken: 0 };
  /**
   * While true nothing starts early: for benchmarks that time parts of a
   * step, each to the end of its own work (an early read lets the backward
   * run on into the next timed run).
   */
  suspended = false;

  /** The read-ahead of `rt`'s device. */
  constructor(rt: Runtime) {
    this.#rt = rt;
  }

  /** Starts copying and mapping `numel` elements of `buffer` from `offset` now. */
  start(buffer: GPUBuffer, offset: number, numel: number, dtype: DType): void {
    if (this.suspended) return;
    const rt = this.#rt;
    const old = this.#started;
    if (old !== null) {
      if (matches(old, buffer, offset, numel, dtype) && rt.watchedIntact) return;
      // The last one was not read (or went stale): stop guessing.
      this.#started = null;
      this.#drop(old);
      this.#enabled = false;
    }
    if (!this.#enabled) {
      this.#announced = buffer;
      return;
    }
    if (numel === 0) return;
    const bytes = numel * 4;
    const staging = rt.staging.acquire(bytes);
    rt.encoder(staging).copyBufferToBuffer(buffer, offset * 4, staging, 0, bytes);
    rt.flush();
    rt.watch(buffer);
    const mapped = staging.mapAsync(GPUMapMode.READ, 0, bytes);
    // Its failure is raised by the read that takes it (or nowhere if none does).
    mapped.catch(() => {});
    this.#started = { buffer, offset, numel, dtype, staging, mapped };
    this.counts.started++;
  }

  /**
   * The early copy of exactly this range if nothing was recorded into it
   * since, handed over to the caller (who unmaps and releases its staging
   * buffer); null otherwise.
   */
  take(buffer: GPUBuffer, offset: number, numel: number, dtype: DType): EarlyRead | null {
    if (this.#announced === buffer) {
      this.#enabled = true;
      this.#announced = null;
    }
    const started = this.#started;
    if (started === null || !matches(started, buffer, offset, numel, dtype)) return null;
    this.#started = null;
    const intact = this.#rt.watchedIntact;
    this.#rt.watch(null);
    if (!intact) {
      this.#drop(started);
      return null;
    }
    this.counts.taken++;
    return started;
  }

  /** Gives an unused early copy's staging buffer back once its mapping settles. */
  #drop(early: EarlyRead): void {
    const rt = this.#rt;
    rt.watch(null);
    early.mapped.then(() => {
      early.staging.unmap();
      rt.staging.release(early.staging)?.destroy();
    }, () => {});
  }
}

function matches(
  early: EarlyRead,
  buffer: GPUBuffer,
  offset: number,
  numel: number,
  dtype: DType,
): boolean {
  return early.buffer === buffer && early.offset === offset && early.numel === numel &&
    early.dtype === dtype;
}
