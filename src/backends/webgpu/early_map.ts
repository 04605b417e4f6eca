/**
 * Taking a read mapping the moment the device has made it, on Deno's own
 * WebGPU, instead of 10 ms later.
 *
 * Why: Deno's `mapAsync` (ext/webgpu `buffer.rs`, 2.2 to 2.9.6 at least)
 * polls the device inside the call, which blocks the thread until the
 * device drains and makes the mapping, and then sleeps a fixed 10 ms before
 * its promise can resolve. Every read paid those 10 ms after the data was
 * there; a DistributedDataParallel step, whose optimizer step needs the
 * averaged gradients, could not hide them (bench/NOTES.md). Deno's
 * `getMappedRange` reads whatever wgpu has mapped without looking at the
 * promise, so right after `mapAsync` returns the values can be taken.
 *
 * Safety, from that source: `getMappedRange` unwraps the buffer's map mode,
 * which is set only when a `mapAsync` promise of that buffer resolves (and
 * never cleared by `unmap`); called before that on a mapped buffer it
 * aborts the process. So a staging buffer is taken early only once a map of
 * it has resolved ("primed"), only on the Deno versions whose source was
 * read, and a mapping wgpu has not made yet throws (a JavaScript error, not
 * an abort), which falls back to waiting for the promise. A spec-conforming
 * runtime throws too. A buffer taken early is unmapped and goes back to
 * its pool at once: the promise that resolves later only sets the
 * JavaScript-side `mapState` (to "mapped", which nothing here reads) and the
 * same map mode again; wgpu's own state, which validates the next copy
 * into the buffer and its next map, is already idle. (Holding such buffers
 * back until their promise settled made back-to-back reads create a fresh,
 * unprimed buffer every other read.)
 * @module
 */

/** Deno versions whose ext/webgpu `mapAsync` and `getMappedRange` behave as described. */
const CHECKED_DENO = { major: 2, minMinor: 2, maxMinor: 9 } as const;

/**
 * Whether early maps are safe on this runtime for `gpu`: Deno's own
 * `navigator.gpu`, in a checked version.
 */
export function earlyMapsSupported(gpu: GPU): boolean {
  const deno = (globalThis as { Deno?: { version?: { deno?: string } } }).Deno;
  const version = deno?.version?.deno;
  if (version === undefined) return false;
  if (gpu !== (globalThis.navigator as { gpu?: GPU } | undefined)?.gpu) return false;
  const [major, minor] = version.split(".").map(Number);
  return major === CHECKED_DENO.major && minor >= CHECKED_DENO.minMinor &&
    minor <= CHECKED_DENO.maxMinor;
}

/** The early maps of one device: which staging buffers are primed, and how many reads went early. */
export class EarlyMaps {
  /** Whether reads try to take mappings early at all. */
  readonly enabled: boolean;
  readonly #primed = new WeakSet<GPUBuffer>();
  /** Reads whose mapping was taken early (tests). */
  readonly counts = { early: 0 };

  /** Early maps on (when the runtime allows: see {@link earlyMapsSupported}) or off. */
  constructor(enabled: boolean) {
    this.enabled = enabled;
  }

  /**
   * The mapped range of `staging` (mapped for reading, its `mapAsync`
   * called) if it can be taken now, else null: the caller then awaits the
   * map and calls {@link mapped}.
   */
  takeEarly(staging: GPUBuffer, bytes: number): ArrayBuffer | null {
    if (!this.enabled || !this.#primed.has(staging)) return null;
    try {
      const range = staging.getMappedRange(0, bytes);
      this.counts.early++;
      return range;
    } catch {
      return null; // not mapped yet: the promise decides
    }
  }

  /** The range of `staging` after its map resolved; primes it for early takes. */
  mapped(staging: GPUBuffer, bytes: number): ArrayBuffer {
    this.#primed.add(staging);
    return staging.getMappedRange(0, bytes);
  }
}
