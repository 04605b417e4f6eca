/**
 * What the ranks of tests/distributed_tcp_sync_test.ts run, as processes of
 * the `"tcp"` process group (under multigrad's launcher, or started by
 * hand): `deno run -A this.ts PREFIX SCENARIO JSON`; each rank writes its
 * result as JSON to `PREFIX.<rank>.json`.
 * @module
 */

import { distributed, nn, tensor } from "../mod.ts";
import { DistributedError } from "../src/distributed/backend.ts";
import { activeGroup, currentGroup, type ProcessGroup } from "../src/distributed/state.ts";

/** The blocking all-gather of `words` over `group`, numbered among its collectives. */
export function gatherSync(group: ProcessGroup, words: Int32Array): Int32Array[] {
  const call = group.call({ kind: "allGather", dtype: "int32", shapes: [[words.length]] });
  const backend = group.backend;
  if (!backend.allGatherSync) throw new Error(`the ${distributed.getBackend()} has none`);
  return group.runSync(call, () => backend.allGatherSync!(call, words));
}

/** Words that rank `rank` passes in call `i` (`length` of them). */
export function wordsOf(rank: number, i: number, length: number): Int32Array {
  return Int32Array.from({ length }, (_, k) => (rank * 1_000_003 + i * 7919 + k * 31) | 0);
}

/** The error `fn` throws, as plain values (or "no error"). */
function caught(fn: () => unknown): { message: string; ranks: number[]; ms: number } | string {
  const started = performance.now();
  try {
    fn();
    return "no error";
  } catch (error) {
    return {
      message: (error as Error).message,
      ranks: error instanceof DistributedError ? [...error.ranks] : [],
      ms: performance.now() - started,
    };
  }
}

/** What the `words` scenario returns. */
export interface Words {
  /** Per call: whether every rank's words came back, in rank order. */
  equal: boolean[];
  /** The sum an all-reduce started before the blocking calls gave. */
  inFlight: number[];
  /** The blocking all-gather of the sub-group [1, 2] (3 ranks; null elsewhere). */
  sub: number[][] | null;
}

async function run(scenario: string, options: Record<string, number>): Promise<unknown> {
  const group = currentGroup()!;
  const rank = group.rank;
  const n = group.worldSize;
  switch (scenario) {
    case "words": {
      // An all-reduce still queued while this thread blocks: it runs after.
      const t = tensor([rank + 1, 2]);
      const work = distributed.allReduce(t);
      const equal: boolean[] = [];
      const lengths = [1, 32, 0, 4096, 3, 32, 32, 32];
      lengths.forEach((length, i) => {
        const got = gatherSync(group, wordsOf(rank, i, length));
        equal.push(
          got.length === n &&
            got.every((w, q) => w.join(",") === wordsOf(q, i, length).join(",")),
        );
      });
      await work.wait();
      const inFlight = [...await t.data()];
      let sub: number[][] | null = null;
      if (n === 3) {
        const handle = await distributed.newGroup([1, 2]);
        if (rank > 0) {
          sub = gatherSync(activeGroup("test", handle), Int32Array.of(rank, -rank)).map((w) => [
            ...w,
          ]);
        }
      }
      return { equal, inFlight, sub } satisfies Words;
    }
    case "length":
      // A different length on rank 1: the same error on every rank.
      return caught(() => gatherSync(group, new Int32Array(rank === 1 ? 3 : 2)));
    case "kind": {
      // Rank 1 queues a barrier first (#0), so its blocking call is #1 and rank 0's #0.
      const queued = rank === 1 ? distributed.barrier().catch(() => {}) : null;
      const result = caught(() => gatherSync(group, new Int32Array(2)));
      // Rank 0 never joins the barrier: it fails when rank 0 leaves.
      await queued;
      return result;
    }
    case "exit":
      // Rank 1 leaves without a word (no destroyProcessGroup): its sockets close.
      if (rank === 1) Deno.exit(3);
      return caught(() => gatherSync(group, new Int32Array(4)));
    case "throw":
      // Rank 1's program fails: it tells the others' sync Workers before it exits.
      if (rank === 1) throw new Error("boom from rank 1");
      return caught(() => gatherSync(group, new Int32Array(4)));
    case "throwLong":
      // A long non-ASCII error (3 UTF-8 bytes a character): more than the Worker's room for it.
      if (rank === 1) throw new Error("形状不匹配".repeat(1000));
      return caught(() => gatherSync(group, new Int32Array(4)));
    case "leave":
      if (rank === 1) {
        await distributed.destroyProcessGroup();
        return "left";
      }
      return caught(() => gatherSync(group, new Int32Array(4)));
    case "hang":
      if (rank === 1) {
        await new Promise((resolve) => setTimeout(resolve, options.hangMs));
        return "slept";
      }
      return caught(() => gatherSync(group, new Int32Array(4)));
    case "fsdpShapes": {
      // FSDP compares the parameter shapes of every rank before it shards.
      const model = new nn.Linear(rank === 1 ? 3 : 2, 2);
      try {
        new distributed.fsdp.FullyShardedDataParallel(model);
        return "no error";
      } catch (error) {
        return { message: (error as Error).message, ranks: [], ms: 0 };
      }
    }
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
}

if (import.meta.main) {
  const [out, scenario, json] = Deno.args;
  const options = JSON.parse(json ?? "{}");
  await distributed.initProcessGroup({ timeoutMs: options.timeoutMs ?? 60_000 });
  const rank = distributed.getRank();
  const result = await run(scenario, options);
  await Deno.writeTextFile(`${out}.${rank}.json`, JSON.stringify(result));
  // Without destroyProcessGroup the process must still end (the Worker is unref'd).
  if (!options.keepGroup && distributed.isInitialized()) await distributed.destroyProcessGroup();
}
