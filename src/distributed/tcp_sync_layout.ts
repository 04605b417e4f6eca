/**
 * What the `"tcp"` group's main thread and its sync Worker (`tcp_sync.ts`,
 * `tcp_sync_worker.ts`) say to each other: the messages, and the layout of
 * the shared memory a blocking all-gather's answer is written to.
 * @module
 */

import { HEADER_WORDS } from "./backend.ts";

/**
 * Control words of the shared memory (`tcp_sync_worker.ts` has its own
 * copies of these numbers: it is run from its source text;
 * tests/distributed_tcp_sync_review_test.ts checks that they agree).
 */
export const SyncCtl = {
  /** The id of the last request answered (the main thread waits on it). */
  Done: 0,
  /** A {@link SyncStatus}. */
  Status: 1,
  /** A failure's text length in bytes (UTF-8 JSON of a {@link SyncFailure}, from word `SLOTS`). */
  TextBytes: 3,
} as const;

/** How a request ended. */
export const SyncStatus = { Done: 1, Failed: 2 } as const;

/** Where the answers start: rank q's header, its word count, then its words. */
const SLOTS = 32;
/** Room kept for a failure's text, whatever the call's size. */
const TEXT_WORDS = 2048;

/** The word where rank `q`'s answer starts, for calls of `length` words. */
export function syncSlot(q: number, length: number): number {
  return SLOTS + q * (HEADER_WORDS + 1 + length);
}

/** The words a call of `n` ranks and `length` words needs. */
export function syncWords(n: number, length: number): number {
  return Math.max(syncSlot(n, length), SLOTS + TEXT_WORDS);
}

const decoder = new TextDecoder();

/**
 * Why a blocking all-gather failed, as the Worker reports it: `late`, the
 * ranks (of the calling group) that did not send in time; `gone`, a rank
 * (of the whole group) that failed, left or was lost.
 */
export type SyncFailure =
  | { readonly kind: "late"; readonly ranks: readonly number[] }
  | {
    readonly kind: "gone";
    readonly rank: number;
    readonly why: "failed" | "left" | "lost";
    readonly text: string;
  };

/** Reads the failure the Worker wrote. */
export function readSyncFailure(memory: Int32Array): SyncFailure {
  const at = memory.byteOffset + SLOTS * 4;
  // A copy: TextDecoder refuses views of shared memory.
  return JSON.parse(
    decoder.decode(new Uint8Array(memory.buffer).slice(at, at + memory[SyncCtl.TextBytes])),
  );
}

/** The part of `node:worker_threads`' `parentPort` the Worker uses. */
export interface SyncPort {
  /** Posts an answer to the main thread. */
  postMessage(message: SyncAnswer): void;
  /** Calls `listener` with each request. */
  on(event: "message", listener: (request: SyncRequest) => void): void;
}

/** What the main thread posts to its sync Worker. */
export type SyncRequest =
  | {
    readonly type: "init";
    readonly rank: number;
    readonly worldSize: number;
    /** Where the Worker listens ("0.0.0.0", or the loopback address the ranks use). */
    readonly listenHost: string;
    /** How long the Worker waits for the other ranks' Workers to connect. */
    readonly timeoutMs: number;
    readonly shared: SharedArrayBuffer;
  }
  | {
    readonly type: "peers";
    /** `host:port` of every lower rank's Worker (index = rank). */
    readonly addresses: readonly string[];
  }
  | {
    readonly type: "gather";
    /** Written to {@link SyncCtl.Done} once answered. */
    readonly id: number;
    /** The whole group's rank of each of the calling group's ranks. */
    readonly members: readonly number[];
    /** This rank's place in `members`. */
    readonly me: number;
    /** The calling group's channel prefix. */
    readonly key: string;
    readonly header: Int32Array;
    readonly data: Int32Array;
    readonly timeoutMs: number;
    /** A larger shared memory, when the call needs one (kept for later calls). */
    readonly shared: SharedArrayBuffer | null;
  }
  | { readonly type: "fail"; readonly text: string; readonly graceMs: number }
  | { readonly type: "close"; readonly graceMs: number };

/** What the sync Worker posts back (never while a gather blocks the main thread). */
export type SyncAnswer =
  | { readonly type: "listening"; readonly port: number }
  | { readonly type: "ready" }
  | { readonly type: "failed"; readonly message: string }
  | { readonly type: "announced" }
  | { readonly type: "closed" };
