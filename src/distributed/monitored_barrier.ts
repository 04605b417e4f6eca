/**
 * `torch.distributed.monitored_barrier`: a barrier that tells which ranks
 * did not arrive. As gloo's, every other rank sends rank 0 (the group's
 * first) a message and waits for its answer; rank 0 waits for all of them
 * up to the timeout and answers. Built on the backend's point-to-point
 * `send`/`recv` on host arrays, so no device's stream waits on it.
 * @module
 */

import { type CollectiveCall, DistributedError, type DistributedGroup } from "./backend.ts";
import { activeGroup, type ProcessGroup } from "./state.ts";

/**
 * The tags of the arrival messages and of rank 0's answers: above
 * `MAX_TAG`, so that no user's send/recv can match them (MPICH's tags go
 * far beyond 32767).
 */
const ARRIVE_TAG = 32768;
const ANSWER_TAG = 32769;

/** Options of {@link monitoredBarrier}. */
export interface MonitoredBarrierOptions {
  /** Among the ranks of this group only (from `newGroup`); its first rank does the monitoring. */
  group?: DistributedGroup;
  /** How long rank 0 waits for the others (default: the group's `timeoutMs`). */
  timeoutMs?: number;
  /**
   * Whether rank 0's error names every rank that did not arrive in time
   * (true) or only the first, in rank order (false, the default, as PyTorch).
   */
  waitAllRanks?: boolean;
}

const ranksText = (ranks: readonly number[]) =>
  `${ranks.length === 1 ? "Rank" : "Ranks"} ${ranks.join(", ")}`;

/**
 * Resolves once every rank of the group (default: all) has called it, as
 * `barrier`, but rank 0 waits only `timeoutMs`: then it rejects with a
 * {@link DistributedError} naming the ranks that did not arrive (`[Rank
 * 0]: Rank 2 failed to pass monitoredBarrier in 500 ms`, PyTorch's words;
 * with `waitAllRanks` every such rank), and the ranks that did arrive, or
 * arrive later, reject with the same message (PyTorch lets them time out
 * instead). A rank that never arrives leaves the group failed once the
 * group's own `timeoutMs` has passed (as after any collective it missed).
 * The other ranks wait for rank 0's answer up to the group's `timeoutMs`.
 * Ranks are named by their rank in the whole group.
 *
 * @example
 * ```ts
 * await distributed.monitoredBarrier({ timeoutMs: 5000, waitAllRanks: true });
 * ```
 */
export async function monitoredBarrier(options: MonitoredBarrierOptions = {}): Promise<void> {
  const name = "monitoredBarrier";
  const group = activeGroup(name, options.group);
  const timeoutMs = options.timeoutMs ?? group.timeoutMs;
  if (!(timeoutMs > 0) || !Number.isFinite(timeoutMs)) {
    throw new RangeError(
      `${name}: timeoutMs must be a positive number of milliseconds, got ${timeoutMs}`,
    );
  }
  const backend = group.backend;
  if (!backend.send || !backend.recv) {
    throw new Error(
      `${name}: the "${group.backendName}" process-group backend has no point-to-point send/recv, which it needs`,
    );
  }
  const n = group.worldSize;
  if (n === 1) return;
  const global = (q: number) => group.members?.[q] ?? q;
  const answer = new Int32Array(n + 1);
  if (group.rank !== 0) {
    const arrived = message(group, "send", 0, ARRIVE_TAG, Int32Array.of(group.rank));
    const answered = message(group, "recv", 0, ANSWER_TAG, answer);
    try {
      await Promise.all([arrived, answered]);
    } catch (error) {
      throw new DistributedError(
        `${name}: rank ${global(group.rank)} reached monitoredBarrier, but the exchange with rank ${
          global(0)
        } (the monitoring rank) failed: see rank ${global(0)}'s error for the rank at fault`,
        [global(0)],
        { cause: error },
      );
    }
    if (answer[0] === 0) return;
    const missing = [];
    for (let q = 1; q < n; q++) if (answer[q]) missing.push(global(q));
    throw new DistributedError(
      `${name}: rank ${global(group.rank)} reached monitoredBarrier, but rank ${
        global(0)
      } reports: [Rank ${global(0)}]: ${ranksText(missing)} failed to pass monitoredBarrier in ${
        answer[n]
      } ms`,
      missing,
    );
  }
  const arrived = new Array<boolean>(n).fill(false);
  const arrivals = Array.from({ length: n - 1 }, (_, i) => {
    const q = i + 1;
    return message(group, "recv", q, ARRIVE_TAG, new Int32Array(1)).then(() => {
      arrived[q] = true;
      return q;
    });
  });
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
  // A rank that failed (its recv rejects) counts as one that did not arrive.
  const settled = Promise.allSettled(arrivals).then(() => {});
  try {
    await Promise.race([settled, deadline]);
  } finally {
    clearTimeout(timer);
  }
  const late = [];
  for (let q = 1; q < n; q++) if (!arrived[q]) late.push(q);
  // PyTorch names the first late rank only, unless waitAllRanks.
  const culprits = options.waitAllRanks ? late : late.slice(0, 1);
  answer[n] = Math.round(timeoutMs);
  if (late.length > 0) {
    answer[0] = 1;
    for (const q of culprits) answer[q] = 1;
  }
  const answers = arrivals.map((arrival, i) => {
    const q = i + 1;
    // A rank that arrives after the deadline gets the same answer then.
    return arrival.then(() => message(group, "send", q, ANSWER_TAG, answer));
  });
  if (late.length === 0) {
    await Promise.all(answers);
    return;
  }
  for (const a of answers) a.catch(() => {});
  const named = culprits.map(global);
  throw new DistributedError(
    `[Rank ${global(0)}]: ${ranksText(named)} failed to pass monitoredBarrier in ${
      Math.round(timeoutMs)
    } ms`,
    named,
  );
}

/** One int32 message to or from `peer` on `tag`, straight through the backend (no device involved). */
function message(
  group: ProcessGroup,
  kind: "send" | "recv",
  peer: number,
  tag: number,
  data: Int32Array,
): Promise<void> {
  const call: CollectiveCall = kind === "send"
    ? group.p2pCall({ kind, dtype: "int32", shapes: [[data.length]], dst: peer, tag })
    : group.p2pCall({ kind, dtype: "int32", shapes: [[data.length]], src: peer, tag });
  return group.runP2P(call, () => group.backend[kind]!(call, data));
}
