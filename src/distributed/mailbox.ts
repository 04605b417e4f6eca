/**
 * Letters between the Workers of a `"local"` group: `spawn` gives every pair
 * of ranks a MessageChannel, over which they post point-to-point messages
 * (with their acknowledgements) and the shared memory of sub-groups made
 * after the Workers started (shared memory posted to a Worker stays
 * shared). A rank waits for a letter without blocking its event loop, and
 * gives up when the sender failed, left, or did not write in time.
 * @module
 */

import type { TypedArray } from "../dtype.ts";

/** A letter from one rank to another; `key` says what it is for (see {@link Mailbox.take}). */
export interface Letter {
  /** What the letter is for, e.g. a message of a tag, or a sub-group's memory. */
  readonly key: string;
  /** A point-to-point message's or acknowledgement's header. */
  readonly header?: Int32Array;
  /** A message's values. */
  readonly data?: TypedArray;
  /** An acknowledgement's error (null: received fine), with the ranks it names. */
  readonly error?: { readonly message: string; readonly ranks: readonly number[] } | null;
  /** Anything else structured-cloneable (a sub-group's shared memory). */
  readonly payload?: unknown;
}

/** Why a peer cannot write any more, or null while it runs. */
export type PeerGone = (peer: number) => string | null;

interface Waiter {
  readonly resolve: (letter: Letter) => void;
}

/** How often a waiting rank looks whether its peer is still there. */
const LOOK_MS = 50;
/**
 * After a peer is seen gone, letters it posted before may still be in the
 * port (they travel through the event loop; its status does not): wait
 * this long for them before failing.
 */
const GRACE_MS = 250;

/** This rank's ends of the channels to every other rank. */
export class Mailbox {
  readonly #ports: readonly (MessagePort | null)[];
  /** Letters that arrived before anyone waited for them, by peer and key. */
  readonly #arrived = new Map<string, Letter[]>();
  readonly #waiting = new Map<string, Waiter[]>();

  /** `ports[q]`: this rank's end of the channel to rank q (null for itself). */
  constructor(ports: readonly (MessagePort | null)[]) {
    this.#ports = ports;
    ports.forEach((port, peer) => {
      if (!port) return;
      port.onmessage = (event: MessageEvent<Letter>) => this.#deliver(peer, event.data);
    });
  }

  #deliver(peer: number, letter: Letter): void {
    const slot = `${peer}|${letter.key}`;
    const waiter = this.#waiting.get(slot)?.shift();
    if (waiter) waiter.resolve(letter);
    else {
      const list = this.#arrived.get(slot) ?? [];
      list.push(letter);
      this.#arrived.set(slot, list);
    }
  }

  /** Posts `letter` to rank `peer`, moving (not copying) the buffers in `transfer`. */
  post(peer: number, letter: Letter, transfer: Transferable[] = []): void {
    const port = this.#ports[peer];
    if (!port) throw new RangeError(`mailbox: no channel to rank ${peer}`);
    port.postMessage(letter, transfer);
  }

  /** The letters from `peer` that arrived and wait to be taken (for error messages). */
  pending(peer: number): Letter[] {
    const out: Letter[] = [];
    for (const [slot, list] of this.#arrived) {
      if (slot.startsWith(`${peer}|`)) out.push(...list);
    }
    return out;
  }

  /**
   * The next letter from `peer` with `key`, in the order posted. Rejects with
   * `gone(why)`'s error once `peerGone` says the peer cannot write any more
   * (after a grace period for letters in flight), or with `late()`'s at
   * `deadline` (a `performance.now()` time).
   */
  take(
    peer: number,
    key: string,
    deadline: number,
    peerGone: PeerGone,
    errors: { gone: (why: string) => Error; late: () => Error },
  ): Promise<Letter> {
    const slot = `${peer}|${key}`;
    const ready = this.#arrived.get(slot)?.shift();
    if (ready) return Promise.resolve(ready);
    return new Promise<Letter>((resolve, reject) => {
      let goneSince = 0;
      const list = this.#waiting.get(slot) ?? [];
      const waiter: Waiter = {
        resolve: (letter) => {
          clearInterval(look);
          resolve(letter);
        },
      };
      const drop = (error: Error) => {
        clearInterval(look);
        const waiters = this.#waiting.get(slot);
        waiters?.splice(waiters.indexOf(waiter), 1);
        reject(error);
      };
      const look = setInterval(() => {
        const now = performance.now();
        const why = peerGone(peer);
        if (why !== null) {
          goneSince ||= now;
          if (now - goneSince >= GRACE_MS) drop(errors.gone(why));
        } else if (now >= deadline) drop(errors.late());
      }, Math.min(LOOK_MS, Math.max(1, deadline - performance.now())));
      list.push(waiter);
      this.#waiting.set(slot, list);
    });
  }

  /** Closes every channel (the rank left the group). */
  close(): void {
    for (const port of this.#ports) {
      if (!port) continue;
      port.onmessage = null;
      port.close();
    }
  }
}
