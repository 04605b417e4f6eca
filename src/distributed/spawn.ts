/**
 * `spawn`: the `"local"` launcher, as `torch.multiprocessing.spawn`. Each
 * rank is a Web Worker of this process with its own event loop, its own
 * devices and its own core.
 * @module
 */

import { DistributedError } from "./backend.ts";
import { DEFAULT_TIMEOUT_MS } from "./group.ts";
import { createLocalShared, markRank, RankStatus, rankStatus } from "./local.ts";
import type { RankLaunch, RankOutcome } from "./worker.ts";

/** Options of {@link spawn}. */
export interface SpawnOptions {
  /** Number of ranks (Workers). */
  nprocs: number;
  /** Passed to every rank's `main(rank, worldSize, ...args)` (structured-cloned). */
  args?: readonly unknown[];
  /** The process-group backend the ranks start (default `"local"`). */
  backend?: string;
  /** The group's collective timeout (default 60 000 ms). */
  timeoutMs?: number;
}

/** How long a rank failing because of another waits for that one's own error. */
const CULPRIT_WAIT_MS = 2000;

function resolveModule(moduleUrl: string | URL): string {
  if (moduleUrl instanceof URL) return moduleUrl.href;
  if (/^[a-z][a-z0-9+.-]*:/i.test(moduleUrl)) return moduleUrl;
  // A path: relative to the working directory, as `deno run` takes it.
  const cwd = globalThis.Deno?.cwd() ?? "/";
  return new URL(moduleUrl, `file://${cwd.endsWith("/") ? cwd : cwd + "/"}`).href;
}

function revive(error: { name: string; message: string; stack?: string }): Error {
  const out = new Error(error.message);
  out.name = error.name;
  if (error.stack) out.stack = error.stack;
  return out;
}

/**
 * Starts `nprocs` ranks, each a Worker that imports `moduleUrl` and calls
 * its exported `main(rank, worldSize, ...args)` with a process group already
 * initialised; resolves with the ranks' return values in rank order. If any
 * rank throws or its Worker dies, every Worker is terminated and the promise
 * rejects with an error naming the rank (the original error as `cause`).
 * Nothing is left running either way.
 *
 * @example
 * ```ts
 * // train.ts
 * export async function main(rank: number, worldSize: number) { ... }
 * if (import.meta.main) await distributed.spawn(import.meta.url, { nprocs: 2 });
 * ```
 */
export function spawn<T = unknown>(moduleUrl: string | URL, options: SpawnOptions): Promise<T[]> {
  const nprocs = options?.nprocs;
  if (!Number.isInteger(nprocs) || nprocs < 1) {
    return Promise.reject(
      new RangeError(`spawn: nprocs must be an integer >= 1, got ${nprocs}`),
    );
  }
  const backend = options.backend ?? "local";
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const url = resolveModule(moduleUrl);
  const shared = backend === "local" ? createLocalShared(nprocs) : null;
  // A channel between every two ranks (point-to-point messages, sub-groups' memory).
  const ports: (MessagePort | null)[][] = Array.from(
    { length: nprocs },
    () => Array.from({ length: nprocs }, () => null),
  );
  if (shared) {
    for (let a = 0; a < nprocs; a++) {
      for (let b = a + 1; b < nprocs; b++) {
        const channel = new MessageChannel();
        ports[a][b] = channel.port1;
        ports[b][a] = channel.port2;
      }
    }
  }
  const workers: Worker[] = [];
  const results = new Array<T>(nprocs);
  let remaining = nprocs;
  const reported = new Set<number>();
  return new Promise<T[]>((resolve, reject) => {
    let finished = false;
    const finish = (error: Error | null) => {
      if (finished) return;
      finished = true;
      if (deferred) clearTimeout(deferred.timer);
      // Ranks that reported close their Workers themselves (worker.ts says why).
      workers.forEach((w, rank) => {
        if (!reported.has(rank)) w.terminate();
      });
      // The channel ends of ranks never started are still here (the others moved to their Worker).
      for (const own of ports.slice(workers.length)) for (const port of own) port?.close();
      if (error) reject(error);
      else resolve(results);
    };
    const report = (rank: number, cause: Error) => {
      if (shared) markRank(shared, rank, RankStatus.Failed, cause.message);
      finish(
        new DistributedError(`spawn: rank ${rank} of ${nprocs} failed: ${cause.message}`, [rank], {
          cause,
        }),
      );
    };
    // A rank that failed because another one did is reported only if the
    // other one's own error does not arrive soon (it is usually in flight).
    let deferred: { timer: ReturnType<typeof setTimeout>; culprit: number } | null = null;
    const fail = (rank: number, cause: Error, blamed: readonly number[] = []) => {
      if (finished) return;
      if (deferred) {
        if (rank !== deferred.culprit) return;
        clearTimeout(deferred.timer);
        deferred = null;
      }
      const culprit = shared
        ? blamed.find((q) => q !== rank && rankStatus(shared, q) === RankStatus.Failed)
        : undefined;
      if (culprit === undefined) {
        report(rank, cause);
        return;
      }
      deferred = { timer: setTimeout(() => report(rank, cause), CULPRIT_WAIT_MS), culprit };
    };
    for (let rank = 0; rank < nprocs && !finished; rank++) {
      let worker: Worker;
      try {
        worker = new Worker(new URL("./worker.ts", import.meta.url), {
          type: "module",
          name: `multigrad rank ${rank}`,
        });
      } catch (error) {
        fail(rank, error instanceof Error ? error : new Error(String(error)));
        return;
      }
      workers.push(worker);
      worker.onmessage = (event: MessageEvent<RankOutcome>) => {
        const outcome = event.data;
        reported.add(rank);
        if (outcome.kind === "failed") {
          fail(rank, revive(outcome.error), outcome.ranks);
          return;
        }
        results[rank] = outcome.value as T;
        if (--remaining === 0) finish(null);
      };
      worker.onerror = (event: ErrorEvent) => {
        event.preventDefault();
        fail(rank, event.error instanceof Error ? event.error : new Error(event.message));
      };
      worker.onmessageerror = () => {
        fail(rank, new Error("its result could not be received (structured clone failed)"));
      };
      const launch: RankLaunch = {
        moduleUrl: url,
        rank,
        worldSize: nprocs,
        args: options.args ?? [],
        backend,
        timeoutMs,
        shared,
        ports: shared ? ports[rank] : null,
      };
      worker.postMessage(launch, ports[rank].filter((p) => p !== null));
    }
  });
}
