/**
 * `fsdp`: FullyShardedDataParallel against DistributedDataParallel on the
 * mlp suite's model (784-512-512-10, Adam, every Linear its own FSDP
 * unit), 2 ranks as Workers at batch 64 each. Every group is started
 * once and the groups are timed round-robin in one run (a round runs K
 * steps on every group in turn, the order rotating), so the machine's
 * load falls on them alike: the median over rounds of the step time (the
 * slower rank's), the bytes each rank's device holds between steps
 * (parameters, gradients, Adam state, pools) and at its peak within a
 * step, and the parameter elements the optimizer steps per rank.
 * @module
 */

import { distributed } from "../../mod.ts";
import { type BenchResult, median, type Suite, type SuiteContext, Table } from "./_common.ts";
import {
  createFsdpMailbox,
  FSDP_COMMAND,
  FSDP_MAILBOX,
  type FsdpRankConfig,
  type FsdpRankResult,
} from "./fsdp_rank.ts";

const RANK_MODULE = new URL("./fsdp_rank.ts", import.meta.url);
const WRAPPERS = ["ddp", "NO_SHARD", "SHARD_GRAD_OP", "FULL_SHARD"] as const;
const RANKS = 2;
/** A group that does not answer within this long is broken. */
const GROUP_TIMEOUT_MS = 300_000;

/** One group of Worker ranks, running K steps on command. */
interface Group {
  /** Each rank's milliseconds for `steps` steps. */
  run(steps: number): Promise<number[]>;
  /** Ends the ranks; their memory numbers. */
  close(): Promise<FsdpRankResult[]>;
}

function spawnGroup(config: FsdpRankConfig): Group {
  const mailbox = createFsdpMailbox(RANKS);
  const words = new Int32Array(mailbox);
  const results = new Float64Array(mailbox, FSDP_MAILBOX.results * 4, RANKS);
  let failure: Error | null = null;
  const running = distributed.spawn<FsdpRankResult>(RANK_MODULE, {
    nprocs: RANKS,
    args: [config, mailbox],
  });
  running.catch((error: Error) => {
    failure = error;
    Atomics.store(words, FSDP_MAILBOX.reported, -1);
    Atomics.notify(words, FSDP_MAILBOX.reported);
  });
  const send = (command: number, steps: number) => {
    Atomics.store(words, FSDP_MAILBOX.command, command);
    Atomics.store(words, FSDP_MAILBOX.steps, steps);
    Atomics.store(words, FSDP_MAILBOX.reported, 0);
    Atomics.add(words, FSDP_MAILBOX.seq, 1);
    Atomics.notify(words, FSDP_MAILBOX.seq);
  };
  return {
    async run(steps) {
      send(FSDP_COMMAND.run, steps);
      const deadline = performance.now() + GROUP_TIMEOUT_MS;
      for (;;) {
        if (failure) throw failure;
        const reported = Atomics.load(words, FSDP_MAILBOX.reported);
        if (reported === RANKS) return [...results];
        const left = deadline - performance.now();
        if (left <= 0) throw new Error(`fsdp bench: ${config.wrapper} did not answer`);
        const wait = Atomics.waitAsync(words, FSDP_MAILBOX.reported, reported, left);
        if (wait.async) await wait.value;
      }
    },
    close() {
      send(FSDP_COMMAND.quit, 0);
      return running;
    },
  };
}

async function run(ctx: SuiteContext): Promise<BenchResult[]> {
  const results: BenchResult[] = [];
  const rounds = ctx.quick ? 2 : 9;
  const steps = ctx.quick ? 2 : 5;
  for (const backend of ctx.backends) {
    const table = new Table(
      `fsdp (${backend}, ${RANKS} ranks, 784-512-512-10, Adam, batch 64 per rank; ${rounds} interleaved rounds of ${steps} steps, medians)`,
      [
        { title: "wrapper", width: 14, right: false },
        { title: "ms/step", width: 8 },
        { title: "vs ddp", width: 7 },
        { title: "MiB/rank", width: 9 },
        { title: "peak MiB", width: 9 },
        { title: "param elems/rank", width: 16 },
      ],
      ctx.log,
    );
    const groups = WRAPPERS.map((wrapper) =>
      spawnGroup({ wrapper, backend, widths: [784, 512, 512, 10], batch: 64 })
    );
    const stepMs: number[][] = WRAPPERS.map(() => []);
    let memory: FsdpRankResult[][] = [];
    try {
      for (const g of groups) await g.run(2); // warm-up
      for (let round = 0; round < rounds; round++) {
        for (let j = 0; j < groups.length; j++) {
          const i = (round + j) % groups.length;
          stepMs[i].push(Math.max(...(await groups[i].run(steps))) / steps);
        }
      }
    } finally {
      memory = await Promise.all(groups.map((g) => g.close()));
    }
    // Per round, relative to DDP's time of the same round.
    const ddpIndex = WRAPPERS.indexOf("ddp");
    WRAPPERS.forEach((wrapper, i) => {
      const ms = median(stepMs[i]);
      const ratio = median(stepMs[i].map((t, r) => t / stepMs[ddpIndex][r]));
      const ranks = memory[i];
      const bytes = Math.max(...ranks.map((r) => r.bytesInUse));
      const peak = Math.max(...ranks.map((r) => r.peakBytes));
      table.row([wrapper, ms, ratio, bytes / 2 ** 20, peak / 2 ** 20, ranks[0].paramElements]);
      results.push({
        suite: "fsdp",
        backend,
        case: wrapper,
        value: ms,
        unit: "ms/step",
        runs: rounds * steps,
        medianMs: ms,
        extra: {
          vsDdp: ratio,
          bytesPerRank: bytes,
          peakBytesPerRank: peak,
          paramElements: ranks[0].paramElements,
        },
      });
    });
  }
  return results;
}

/** The `fsdp` suite. */
export const fsdpSuite: Suite = {
  name: "fsdp",
  description:
    "FSDP (each strategy) vs DDP on 2 Worker ranks, interleaved: step time, bytes held and peak per rank",
  run,
};
