/**
 * Point-to-point messages (`torch.distributed.send`/`recv`/`isend`/`irecv`):
 * one rank sends a tensor, another receives it into a tensor of the same
 * shape and dtype, in place. Like the collectives they return a
 * {@link Work} at once and run in stream order, but beside the
 * collectives' queue: a send never waits for the receiver before later
 * calls run, so two ranks may both send first and then receive.
 *
 * A receive holds later work on its tensor's device until its data has
 * landed (stream order). So post the sends a peer is waiting for before
 * receives on the same device that depend on that peer's later sends, as
 * with NCCL: two ranks that each receive first and send afterwards wait
 * for each other until `timeoutMs`, and both fail naming the other. Every
 * collective holds later work the same way on every rank it involves (a
 * broadcast's source and the ranks a reduce or gather does not write to
 * included, DistributedDataParallel's construction too), so a send queued
 * after a collective waits for it: a peer that receives before joining
 * that collective waits for each other with this rank, as on CUDA streams.
 * @module
 */

import { Tensor } from "../tensor.ts";
import type { DistributedGroup } from "./backend.ts";
import { Work } from "./collectives.ts";
import { borrowHost, giveBackHost, readFlat, writeFlat } from "./host.ts";
import { activeGroup, groupRankOf, type ProcessGroup } from "./state.ts";

/** The largest tag: MPI guarantees tags up to 32767 on every implementation. */
export const MAX_TAG = 32767;

/** Options of {@link send} and {@link recv}. */
export interface P2POptions {
  /** Matches a send with a receive of the same tag (default 0; 0 to {@link MAX_TAG}). */
  tag?: number;
  /** Within this group (from `newGroup`); the peer is still a whole-group rank, as in PyTorch. */
  group?: DistributedGroup;
}

/** The group, the peer's rank in it, and the tag, checked. */
function prepare(
  op: "send" | "recv",
  t: unknown,
  peer: number,
  options: P2POptions,
): { group: ProcessGroup; at: number; tag: number } {
  if (!(t instanceof Tensor)) {
    throw new TypeError(`${op}: expected a Tensor, got ${t === null ? "null" : typeof t}`);
  }
  const group = activeGroup(op, options.group);
  const name = op === "send" ? "dst" : "src";
  if (peer === undefined) {
    throw new TypeError(
      `${op}: ${name} (the ${op === "send" ? "receiving" : "sending"} rank) is required`,
    );
  }
  const at = groupRankOf(op, group, peer, name);
  if (at === group.rank) {
    throw new RangeError(
      `${op}: ${name} ${peer} is this rank: a rank cannot ${op} ${
        op === "send" ? "to" : "from"
      } itself (as in PyTorch)`,
    );
  }
  const tag = options.tag ?? 0;
  if (!Number.isInteger(tag) || tag < 0 || tag > MAX_TAG) {
    throw new RangeError(`${op}: tag must be an integer in [0, ${MAX_TAG}], got ${tag}`);
  }
  const backend = group.backend;
  if (!backend.send || !backend.recv) {
    throw new Error(
      `${op}: the "${group.backendName}" process-group backend has no point-to-point send/recv`,
    );
  }
  return { group, at, tag };
}

/**
 * Sends `t` to rank `dst` (`torch.distributed.send`/`isend`), where a
 * {@link recv} from this rank with the same tag receives it. Returns at
 * once; `await` the {@link Work} to know the receiver has taken it (a
 * receiver that expects another shape or dtype: it rejects, and the
 * receiver's recv fails alike, naming both ranks and shapes).
 *
 * @example
 * ```ts
 * if (rank === 0) distributed.send(tensor([1, 2, 3]), 1);
 * else {
 *   const t = zeros([3]);
 *   distributed.recv(t, 0); // t: [1, 2, 3] for later ops and reads
 * }
 * ```
 */
export function send(t: Tensor, dst: number, options: P2POptions = {}): Work {
  const { group, at, tag } = prepare("send", t, dst, options);
  const call = group.p2pCall({ kind: "send", dtype: t.dtype, shapes: [t.shape], dst: at, tag });
  const values = readFlat([t], "send");
  values.catch(() => {});
  // Sends to one rank on one tag are posted in program order, although
  // their values may arrive from the devices in another (a webgpu read
  // after a cpu one): the receiver matches them in the order posted.
  const key = `${at} ${tag}`;
  const posts = postedSends.get(group) ?? new Map<string, Promise<void>>();
  postedSends.set(group, posts);
  const previous = posts.get(key) ?? Promise.resolve();
  let markPosted!: () => void;
  const posted = new Promise<void>((resolve) => (markPosted = resolve));
  posts.set(key, posted);
  return new Work(group.runP2P(call, async () => {
    let host: Awaited<typeof values>;
    try {
      await previous;
      host = await values;
    } catch (error) {
      markPosted();
      throw error;
    }
    try {
      // A backend posts before its first await.
      const sent = group.backend.send!(call, host);
      markPosted();
      await sent;
    } finally {
      markPosted();
      giveBackHost(host);
    }
  }));
}

/** Per group and (destination, tag): the last send's "posted" promise. */
const postedSends = new WeakMap<ProcessGroup, Map<string, Promise<void>>>();

/**
 * Receives into `t`, in place, the next tensor rank `src` sent this rank
 * with the same tag (`torch.distributed.recv`/`irecv`; `src` is required).
 * Returns at once: later ops and reads on `t` see the received values, and
 * later work on `t`'s device waits for them. A sent tensor of another shape
 * or dtype is an error on both ranks; a sender that failed, left or sent
 * nothing within `timeoutMs` is an error naming it.
 */
export function recv(t: Tensor, src: number, options: P2POptions = {}): Work {
  const { group, at, tag } = prepare("recv", t, src, options);
  const call = group.p2pCall({ kind: "recv", dtype: t.dtype, shapes: [t.shape], src: at, tag });
  const host = borrowHost(t.dtype, t.numel());
  const result = group.runP2P(call, async () => {
    await group.backend.recv!(call, host);
    return host;
  });
  writeFlat([t], result);
  return new Work(result);
}

/** {@link send} by PyTorch's name for its asynchronous form (every send here is asynchronous). */
export function isend(t: Tensor, dst: number, options: P2POptions = {}): Work {
  return send(t, dst, options);
}

/** {@link recv} by PyTorch's name for its asynchronous form (every recv here is asynchronous). */
export function irecv(t: Tensor, src: number, options: P2POptions = {}): Work {
  return recv(t, src, options);
}

/** One operation of {@link batchIsendIrecv} (PyTorch's `P2POp`). */
export interface P2POp {
  /** `"isend"` or `"irecv"` (or the functions themselves, as in PyTorch). */
  readonly op: "isend" | "irecv" | typeof isend | typeof irecv;
  /** The tensor sent, or received into. */
  readonly tensor: Tensor;
  /** The peer: the receiver of an isend, the sender of an irecv. */
  readonly peer: number;
  /** Options (tag, group). */
  readonly options?: P2POptions;
}

/**
 * Starts several sends and receives together (`torch.distributed.
 * batch_isend_irecv`): every send is posted before any receive, so a ring
 * exchange (each rank sends to its right and receives from its left) cannot
 * wait for itself in stream order, whatever the order of `ops`. Returns one
 * {@link Work} per operation, in the order of `ops`.
 */
export function batchIsendIrecv(ops: readonly P2POp[]): Work[] {
  const isSend = (o: P2POp) => o.op === "isend" || o.op === isend || o.op === send;
  ops.forEach((o, i) => {
    const known = isSend(o) || o.op === "irecv" || o.op === irecv || o.op === recv;
    if (!known) {
      throw new TypeError(
        `batchIsendIrecv: ops[${i}].op must be "isend" or "irecv", got ${String(o.op)}`,
      );
    }
  });
  const works = new Array<Work>(ops.length);
  ops.forEach((o, i) => {
    if (isSend(o)) works[i] = send(o.tensor, o.peer, o.options);
  });
  ops.forEach((o, i) => {
    if (!isSend(o)) works[i] = recv(o.tensor, o.peer, o.options);
  });
  return works;
}
