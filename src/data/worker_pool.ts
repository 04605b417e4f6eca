/**
 * The main thread's side of a `DataLoader` with `numWorkers > 0`: starts
 * the Workers, hands out requests round-robin with at most `prefetchFactor`
 * per worker outstanding, gives the replies back in the order they were
 * asked for (as PyTorch's default in-order loading), and ends every Worker
 * when the epoch ends, fails or is left early (unless persistent). Not
 * public API: `DataLoader` drives it.
 * @module
 */

import { getDefaultDtype } from "../dtype.ts";
import {
  type DatasetRecipe,
  type FromWorker,
  type ModuleRef,
  reviveError,
  type ToWorker,
} from "./worker_protocol.ts";

/** What a pool is started with. */
export interface PoolOptions {
  readonly numWorkers: number;
  readonly prefetchFactor: number;
  /** Milliseconds to wait for one batch; 0 waits forever. */
  readonly timeout: number;
  readonly initFn: ModuleRef | null;
  /** Worker i is seeded `baseSeed + i`. */
  readonly baseSeed: number;
  /**
   * Whether the workers make the batch (the default collate or convert, or
   * `collateRef`); else they send the samples for the main thread's function.
   */
  readonly collate: boolean;
  /** A collate (or, unbatched, convert) the workers import and run. */
  readonly collateRef: ModuleRef | null;
  /** `batchSize: null`: each request is one sample, converted rather than collated. */
  readonly unbatched: boolean;
  /** Whether the dataset is an IterableDataset (each worker reads its own copy of the stream). */
  readonly iterable: boolean;
  readonly batchSize: number;
  readonly dropLast: boolean;
}

type Reply = Exclude<FromWorker, { kind: "init-error" } | { kind: "exit" }>;

/** Raised in an epoch that a newer one replaced: it fails alone, the workers go on. */
class Superseded extends Error {}

/** The Workers of one loader, for one epoch or (persistent) for many. */
export class WorkerPool {
  readonly #workers: Worker[];
  readonly #options: PoolOptions;
  /** Replies not yet handed out, by task. */
  readonly #replies = new Map<number, Reply>();
  /** Tasks of the running epoch (replies to any other are stale and dropped). */
  readonly #expected = new Set<number>();
  #waiting: { task: number; wake: () => void } | null = null;
  #failure: Error | null = null;
  #nextTask = 0;
  #epoch = 0;
  #closed = false;

  private constructor(recipe: DatasetRecipe, options: PoolOptions) {
    this.#options = options;
    this.#workers = [];
    try {
      for (let id = 0; id < options.numWorkers; id++) {
        const worker = new Worker(new URL("./worker_entry.ts", import.meta.url), {
          type: "module",
          name: `multigrad DataLoader worker ${id}`,
        });
        this.#workers.push(worker);
        worker.onmessage = (event: MessageEvent<FromWorker>) => this.#receive(id, event.data);
        worker.onerror = (event: ErrorEvent) => {
          // Handled here: unhandled, a Worker's error would end the whole program.
          event.preventDefault();
          this.#fail(new Error(`DataLoader worker ${id} died: ${event.message}`));
        };
        worker.onmessageerror = () => {
          this.#fail(
            new Error(`DataLoader worker ${id} sent a message that could not be received`),
          );
        };
        const init: ToWorker = {
          kind: "init",
          id,
          numWorkers: options.numWorkers,
          seed: options.baseSeed + id,
          defaultDtype: getDefaultDtype(),
          dataset: recipe,
          initFn: options.initFn,
          collate: options.collate,
          collateRef: options.collateRef,
          unbatched: options.unbatched,
          batchSize: options.batchSize,
          dropLast: options.dropLast,
        };
        worker.postMessage(init);
      }
    } catch (error) {
      this.shutdown();
      throw error;
    }
  }

  /** Starts `options.numWorkers` Workers, each rebuilding the dataset from `recipe`. */
  static start(recipe: DatasetRecipe, options: PoolOptions): WorkerPool {
    return new WorkerPool(recipe, options);
  }

  /** Whether the Workers have been ended (by `shutdown` or a failure). */
  get closed(): boolean {
    return this.#closed;
  }

  /** Ends every Worker now (idempotent); an epoch waiting on them fails. */
  shutdown(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const w of this.#workers) w.terminate();
    this.#failure ??= new Error("DataLoader: its workers were shut down");
    this.#waiting?.wake();
  }

  #fail(error: Error): void {
    if (this.#closed) return;
    this.#failure = error;
    // A dead or failed worker's batches will never come: nothing is gained by keeping the rest.
    this.shutdown();
  }

  #receive(id: number, message: FromWorker): void {
    if (message.kind === "init-error") {
      this.#fail(reviveError(message.error, `DataLoader worker ${id} while it started`));
      return;
    }
    if (message.kind === "exit") {
      this.#fail(new Error(`DataLoader worker ${id} exited unexpectedly: ${message.reason}`));
      return;
    }
    if (!this.#expected.has(message.task)) return;
    this.#replies.set(message.task, message);
    if (this.#waiting?.task === message.task) this.#waiting.wake();
  }

  /** The reply to `task`, waiting at most the timeout. */
  async #reply(task: number, worker: number, batch: number, epoch: number): Promise<Reply> {
    const timeout = this.#options.timeout;
    const started = Date.now();
    while (true) {
      if (epoch !== this.#epoch) {
        throw new Superseded(
          "DataLoader: another epoch of this loader started while this one was running (one iteration at a time, as PyTorch)",
        );
      }
      const reply = this.#replies.get(task);
      if (reply) {
        this.#replies.delete(task);
        return reply;
      }
      if (this.#failure) throw this.#failure;
      let timer: ReturnType<typeof setTimeout> | undefined;
      let waiting: { task: number; wake: () => void } | null = null;
      const timedOut = await new Promise<boolean>((resolve) => {
        this.#waiting = waiting = { task, wake: () => resolve(false) };
        if (timeout > 0) timer = setTimeout(() => resolve(true), timeout);
      });
      clearTimeout(timer);
      if (this.#waiting === waiting) this.#waiting = null;
      if (timedOut && !this.#replies.has(task)) {
        this.#fail(
          new Error(
            `DataLoader timed out after ${timeout} ms waiting for batch ${batch} from worker ${worker} (${
              Date.now() - started
            } ms; timeout option)`,
          ),
        );
      }
    }
  }

  /**
   * One epoch: the replies (encoded batches, or sample lists when the main
   * thread collates) in request order. `jobs` gives the index batches of a
   * map-style dataset; null asks each worker for the next batch of its own
   * stream until every stream has ended. Leaving the loop early, an error,
   * or (unless `persistent`) the end ends the Workers.
   */
  async *epoch(
    jobs: Iterator<Int32Array> | null,
    persistent: boolean,
  ): AsyncGenerator<unknown, void, undefined> {
    if (this.#closed) throw this.#failure ?? new Error("DataLoader: its workers were shut down");
    const epoch = ++this.#epoch;
    this.#expected.clear();
    this.#replies.clear();
    // An older epoch still waiting (a loop left without ending) wakes and sees it is stale.
    this.#waiting?.wake();
    const n = this.#workers.length;
    if (jobs === null) {
      for (const w of this.#workers) w.postMessage({ kind: "reset" } satisfies ToWorker);
    }
    const active = new Array<boolean>(n).fill(true);
    /** Batches each worker's stream has given (for its errors). */
    const streamed = new Array<number>(n).fill(0);
    let yielded = 0;
    const sent: { task: number; worker: number }[] = [];
    const limit = this.#options.prefetchFactor * n;
    let received = 0;
    let cursor = 0;
    let exhausted = false;
    let jobError = null as { error: unknown } | null;
    const fill = () => {
      while (!exhausted && sent.length - received < limit) {
        let worker = -1;
        for (let k = 0; k < n; k++) {
          const w = (cursor + k) % n;
          if (active[w]) {
            worker = w;
            break;
          }
        }
        if (worker < 0) {
          exhausted = true;
          break;
        }
        const batch = sent.length;
        const task = this.#nextTask++;
        let message: ToWorker;
        if (jobs) {
          let step: IteratorResult<Int32Array>;
          try {
            step = jobs.next();
          } catch (error) {
            // Raised when this batch's turn comes, after the batches before it.
            jobError = { error };
            exhausted = true;
            break;
          }
          if (step.done) {
            exhausted = true;
            break;
          }
          message = { kind: "batch", task, batch, indices: step.value };
        } else message = { kind: "next", task, batch };
        cursor = (worker + 1) % n;
        sent.push({ task, worker });
        this.#expected.add(task);
        this.#workers[worker].postMessage(message);
      }
    };
    let failed = false;
    try {
      fill();
      while (true) {
        if (received === sent.length) {
          if (jobError) throw jobError.error;
          break;
        }
        const { task, worker } = sent[received];
        const reply = await this.#reply(task, worker, received, epoch);
        this.#expected.delete(task);
        const batch = received++;
        if (reply.kind === "end") {
          // Its stream has ended: later requests to it are answered "end" too, and skipped.
          active[worker] = false;
          fill();
          continue;
        }
        if (reply.kind === "error") {
          const where = jobs
            ? `DataLoader worker ${worker} (batch ${batch}${
              reply.sample === null ? "" : `, sample index ${reply.sample}`
            })`
            : `DataLoader worker ${worker} (batch ${yielded}, batch ${
              streamed[worker]
            } of its own stream)`;
          throw reviveError(reply.error, where);
        }
        fill();
        streamed[worker]++;
        yielded++;
        yield reply.value;
      }
    } catch (error) {
      // A superseded epoch's workers serve the epoch that replaced it.
      failed = !(error instanceof Superseded);
      throw error;
    } finally {
      // Persistent workers outlive a loop left early (its late replies are dropped), not an error.
      if (failed || !persistent) this.shutdown();
    }
  }
}
