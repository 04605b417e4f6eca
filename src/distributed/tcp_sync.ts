/**
 * The `"tcp"` group's blocking all-gather (`allGatherSync`): a socket
 * cannot be waited on synchronously in Deno, so each rank runs a Worker
 * (`tcp_sync_worker.ts`) with its own event loop and its own full mesh of
 * connections to the other ranks' Workers, set up during the group's
 * rendezvous (addresses through the same store). A call posts its words to
 * the Worker and blocks in `Atomics.wait` (allowed on Deno's main thread)
 * until the Worker has exchanged with every other rank and written every
 * rank's header and words (or the error) into shared memory. Nothing on
 * the main thread runs meanwhile (not rank 0's store server, which the
 * calls do not need, nor the collectives still queued).
 *
 * The Worker is a `node:worker_threads` one, unref'd: a web Worker keeps
 * the process alive after the program ends, and a program that never calls
 * `destroyProcessGroup` must still exit (its connections then close, which
 * the other ranks see at once). It runs {@link syncWorker}'s source text:
 * loading a module file in a Worker would need `--allow-read`.
 * @module
 */

import { describeHeader, DistributedError, HEADER_WORDS } from "./backend.ts";
import type { Store } from "./store.ts";
import {
  readSyncFailure,
  type SyncAnswer,
  SyncCtl,
  type SyncRequest,
  syncSlot,
  SyncStatus,
  syncWords,
} from "./tcp_sync_layout.ts";
import { syncWorker } from "./tcp_sync_worker.ts";

/**
 * How much longer than the call's timeout the main thread waits for its
 * Worker's answer (the Worker enforces the timeout itself; this is for a
 * Worker that died).
 */
const ANSWER_GRACE_MS = 5000;

/** The part of `node:worker_threads`' Worker used here. */
interface NodeWorker {
  postMessage(message: SyncRequest): void;
  on(event: "message" | "error" | "exit", listener: (value: unknown) => void): void;
  off(event: "message" | "error" | "exit", listener: (value: unknown) => void): void;
  ref(): void;
  unref(): void;
  terminate(): Promise<number>;
}

/** What one blocking all-gather brought back, by rank of the calling group. */
export interface SyncGathered {
  /** Every rank's call header. */
  readonly headers: Int32Array[];
  /** Every rank's words (as many as this rank's; see `sizes`). */
  readonly parts: Int32Array[];
  /** How many words each rank sent. */
  readonly sizes: number[];
}

/** The next answer of `worker`, or its failure, or an error after `timeoutMs`. */
function nextAnswer(worker: NodeWorker, timeoutMs: number, what: string): Promise<SyncAnswer> {
  return new Promise<SyncAnswer>((resolve, reject) => {
    const done = () => {
      clearTimeout(timer);
      worker.off("message", onMessage);
      worker.off("error", onError);
      worker.off("exit", onExit);
    };
    const onMessage = (m: unknown) => {
      done();
      resolve(m as SyncAnswer);
    };
    const onError = (e: unknown) => {
      done();
      reject(new Error(`the sync Worker failed ${what}: ${e}`));
    };
    const onExit = (code: unknown) => {
      done();
      reject(new Error(`the sync Worker exited (code ${code}) ${what}`));
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`the sync Worker did not answer ${what} within ${timeoutMs} ms`));
    }, timeoutMs);
    worker.on("message", onMessage);
    worker.on("error", onError);
    worker.on("exit", onExit);
  });
}

/** Rendezvous counter: a process may make several groups over one store. */
let rounds = 0;

/** This rank's end of the blocking all-gather: its Worker and the shared memory. */
export class SyncLink {
  readonly #worker: NodeWorker;
  #memory: Int32Array;
  #id = 0;
  #closed = false;

  private constructor(worker: NodeWorker, memory: Int32Array) {
    this.#worker = worker;
    this.#memory = memory;
  }

  /**
   * Starts the Worker, publishes its address (`host`) in `store`, and waits
   * until it is connected to every other rank's (at most `timeoutMs`).
   */
  static async start(
    store: Store,
    rank: number,
    worldSize: number,
    host: string,
    listenHost: string,
    timeoutMs: number,
  ): Promise<SyncLink> {
    const prefix = `multigrad/tcp-sync/${rounds++}/`;
    // A computed specifier keeps bundlers for the browser away from it.
    const specifier = "node:worker_threads";
    const { Worker } = await import(specifier) as {
      Worker: new (source: string, options: { eval: true }) => NodeWorker;
    };
    const memory = new Int32Array(new SharedArrayBuffer(syncWords(worldSize, 32) * 4));
    // The Worker's answers come after the store's waits and its connections'.
    const patience = timeoutMs + ANSWER_GRACE_MS;
    let worker: NodeWorker | null = null;
    try {
      worker = new Worker(
        `import("node:worker_threads").then((m) => (${syncWorker.toString()})(m.parentPort));`,
        { eval: true },
      );
      worker.postMessage({
        type: "init",
        rank,
        worldSize,
        listenHost,
        timeoutMs,
        shared: memory.buffer as SharedArrayBuffer,
      });
      const listening = await nextAnswer(worker, patience, "to start");
      if (listening.type === "failed") throw new Error(listening.message);
      if (listening.type !== "listening") throw new Error(`the sync Worker said ${listening.type}`);
      await store.set(`${prefix}${rank}`, `${host}:${listening.port}`);
      const addresses: string[] = [];
      for (let q = 0; q < rank; q++) {
        addresses.push(new TextDecoder().decode(await store.get(`${prefix}${q}`)));
      }
      const answered = nextAnswer(worker, patience, "to connect");
      worker.postMessage({ type: "peers", addresses });
      const ready = await answered;
      if (ready.type === "failed") throw new Error(ready.message);
      worker.unref();
      return new SyncLink(worker, memory);
    } catch (error) {
      await worker?.terminate();
      throw new DistributedError(
        `initProcessGroup (tcp) on rank ${rank}: the connections of the blocking all-gather (allGatherSync) failed: ${
          (error as Error).message
        }`,
        [],
        { cause: error },
      );
    }
  }

  /**
   * Every rank's header and words of one blocking all-gather, among the
   * whole group's ranks `members` (this one at `me`), on channels of the
   * prefix `key`. Blocks this thread; throws the Worker's error (a rank
   * gone, late after `timeoutMs`).
   */
  gather(
    members: readonly number[],
    me: number,
    key: string,
    header: Int32Array,
    data: Int32Array,
    timeoutMs: number,
  ): SyncGathered {
    const about = `${describeHeader(header)} on rank ${me}`;
    const need = syncWords(members.length, data.length);
    let shared: SharedArrayBuffer | null = null;
    if (this.#memory.length < need) {
      shared = new SharedArrayBuffer(need * 4);
      this.#memory = new Int32Array(shared);
    }
    const memory = this.#memory;
    const id = this.#id = (this.#id + 1) | 0;
    this.#worker.postMessage({
      type: "gather",
      id,
      members,
      me,
      key,
      header,
      data,
      timeoutMs,
      shared,
    });
    const deadline = performance.now() + timeoutMs + ANSWER_GRACE_MS;
    for (;;) {
      const seen = Atomics.load(memory, SyncCtl.Done);
      if (seen === id) break;
      const left = deadline - performance.now();
      if (left <= 0) {
        throw new DistributedError(
          `${about}: this rank's sync Worker did not answer within ${
            timeoutMs + ANSWER_GRACE_MS
          } ms`,
          [],
        );
      }
      Atomics.wait(memory, SyncCtl.Done, seen, left);
    }
    if (memory[SyncCtl.Status] !== SyncStatus.Done) {
      const failure = readSyncFailure(memory);
      if (failure.kind === "late") {
        const late = failure.ranks;
        throw new DistributedError(
          `${about}: ${late.length === 1 ? "rank" : "ranks"} ${
            late.join(", ")
          } did not join within ${timeoutMs} ms: a rank hung, died, or skipped this collective`,
          late,
        );
      }
      // The words of the main connections' errors (tcp_mesh.ts), with this group's rank.
      const q = members.indexOf(failure.rank);
      const whole = members.every((r, i) => r === i);
      const who = q < 0
        ? "a rank"
        : `rank ${q}${whole ? "" : ` (rank ${failure.rank} of the whole group)`}`;
      const what = failure.why === "failed"
        ? `failed: ${failure.text}`
        : failure.why === "left"
        ? "left the process group (destroyProcessGroup) before this call"
        : `is gone: ${failure.text}`;
      throw new DistributedError(`${about}: ${who} ${what}`, q < 0 ? [] : [q]);
    }
    const headers: Int32Array[] = [];
    const parts: Int32Array[] = [];
    const sizes: number[] = [];
    for (let q = 0; q < members.length; q++) {
      const at = syncSlot(q, data.length);
      headers.push(memory.slice(at, at + HEADER_WORDS));
      sizes.push(memory[at + HEADER_WORDS]);
      parts.push(memory.slice(at + HEADER_WORDS + 1, at + HEADER_WORDS + 1 + data.length));
    }
    return { headers, parts, sizes };
  }

  /** Tells the other ranks' Workers that this rank fails (`text`), waiting at most `graceMs`. */
  async announceFailure(text: string, graceMs: number): Promise<void> {
    if (this.#closed) return;
    const answered = nextAnswer(this.#worker, graceMs, "to the failure").catch(() => {});
    this.#worker.postMessage({ type: "fail", text, graceMs });
    await answered;
  }

  /** Says goodbye to the other ranks' Workers, closes the connections and ends the Worker. */
  async close(graceMs: number): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const answered = nextAnswer(this.#worker, graceMs + ANSWER_GRACE_MS, "to close")
      .catch(() => {});
    this.#worker.postMessage({ type: "close", graceMs });
    await answered;
    await this.#worker.terminate();
  }
}
