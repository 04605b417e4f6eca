/**
 * Per-device ordering of work: the one place where cross-device waits live.
 *
 * Backends run kernels in call order on their own device. What they cannot do
 * is wait for data that another device is still producing, because nothing in
 * JavaScript may block. A Stream does that: work submitted while the stream
 * waits for a pending copy is held, in order, and run once the copy has
 * landed. Work on the source device never waits for the destination. This is
 * CUDA's "copy on a side stream, then the compute stream waits for an event",
 * expressed with promises.
 * @module
 */

type Item =
  | { readonly kind: "work"; readonly run: () => void }
  | { readonly kind: "wait"; readonly ready: Promise<() => void> };

/** An in-order queue of work for one device. */
export class Stream {
  #queue: Item[] = [];
  #waiting = false;
  #deferredError: Error | null = null;
  #checks: Promise<Error | null>[] = [];
  #allChecks: Promise<unknown> = Promise.resolve();
  #openChecks = 0;

  /** Creates the stream of the device called `name` (used in messages). */
  constructor(readonly name: string) {}

  /** Whether work submitted now runs at once (nothing pending ahead of it). */
  get idle(): boolean {
    return !this.#waiting && this.#queue.length === 0;
  }

  /**
   * Runs `work` now when nothing is pending, else after what is ahead. Errors
   * of work run now are thrown to the caller; errors of held work are raised
   * by the next read.
   */
  submit(work: () => void): void {
    if (this.idle) {
      work();
      return;
    }
    this.#queue.push({ kind: "work", run: work });
  }

  /**
   * Holds every later submission until `ready` resolves; the function it
   * resolves with (typically a backend `write`) runs first. A rejection is
   * kept and raised by the next read on this stream.
   */
  waitFor(ready: Promise<() => void>): void {
    this.#queue.push({ kind: "wait", ready });
    if (!this.#waiting) this.#drain();
  }

  /**
   * Adds a check whose verdict only the device's values can give (a class
   * index out of range): it never delays kernels, but the next read on this
   * stream waits for the verdict and rejects with its error, if any. Later
   * reads wait for it too (without the error), so reads keep their order.
   */
  check(verdict: Promise<Error | null>): void {
    const settled = verdict.catch((error) =>
      error instanceof Error ? error : new Error(String(error))
    )
      .finally(() => this.#openChecks--);
    this.#openChecks++;
    this.#checks.push(settled);
    this.#allChecks = Promise.all([this.#allChecks, settled]);
  }

  /**
   * Resolves with `read()`'s result once everything submitted before has run.
   * A held error from earlier work, or a failed {@link check} added since the
   * last read, rejects it instead (once).
   */
  read<T>(read: () => Promise<T>): Promise<T> {
    const result = this.#read(read);
    if (this.#openChecks === 0 && this.#checks.length === 0) return result;
    const mine = this.#checks;
    this.#checks = [];
    return this.#allChecks.then(() => Promise.all(mine)).then((verdicts) => {
      const failed = verdicts.find((v) => v !== null);
      if (!failed) return result;
      result.catch(() => {}); // superseded by the check's error
      throw failed;
    });
  }

  #read<T>(read: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.submit(() => {
        const error = this.#deferredError;
        if (error) {
          this.#deferredError = null;
          reject(error);
          return;
        }
        // A read that throws instead of rejecting must not leave the caller waiting.
        let pending: Promise<T>;
        try {
          pending = read();
        } catch (error) {
          reject(error);
          return;
        }
        pending.then(resolve, reject);
      });
    });
  }

  #drain(): void {
    while (this.#queue.length > 0) {
      const item = this.#queue[0];
      if (item.kind === "wait") {
        this.#waiting = true;
        item.ready.then(
          (landed) => this.#resume(landed),
          (error) => this.#resume(null, error),
        );
        return;
      }
      this.#queue.shift();
      this.#runHeld(item.run);
    }
  }

  #resume(landed: (() => void) | null, error?: unknown): void {
    this.#queue.shift();
    this.#waiting = false;
    if (landed) this.#runHeld(landed);
    else this.#hold(error);
    this.#drain();
  }

  #runHeld(work: () => void): void {
    try {
      work();
    } catch (error) {
      this.#hold(error);
    }
  }

  #hold(error: unknown): void {
    if (this.#deferredError) return;
    this.#deferredError = error instanceof Error
      ? error
      : new Error(`${this.name}: ${String(error)}`);
  }
}
