/**
 * `fsdp`: FullyShardedDataParallel against DistributedDataParallel on the
 * mlp suite's model (784-512-512-10, Adam, every Linear its own FSDP
 * unit), 2 ranks as Workers at batch 64 each: median step time (the
 * slower rank's) and the bytes each rank's device holds between steps
 * (parameters, gradients, Adam state, pools), with the parameter elements
 * the optimizer steps per rank. Groups run one after the other (not
 * round-robin), so the times share the machine's load unevenly.
 * @module
 */

import { distributed } from "../../mod.ts";
import { type BenchResult, median, type Suite, type SuiteContext, Table } from "./_common.ts";
import type { FsdpRankConfig, FsdpRankResult } from "./fsdp_rank.ts";

const RANK_MODULE = new URL("./fsdp_rank.ts", import.meta.url);
const WRAPPERS = ["ddp", "NO_SHARD", "SHARD_GRAD_OP", "FULL_SHARD"] as const;

async function run(ctx: SuiteContext): Promise<BenchResult[]> {
  const results: BenchResult[] = [];
  for (const backend of ctx.backends) {
    const table = new Table(`fsdp (${backend}, 2 ranks, 784-512-512-10, Adam, batch 64 per rank)`, [
      { title: "wrapper", width: 14, right: false },
      { title: "ms/step", width: 8 },
      { title: "vs ddp", width: 7 },
      { title: "MiB/rank", width: 9 },
      { title: "param elems/rank", width: 16 },
    ], ctx.log);
    let ddpMs = NaN;
    for (const wrapper of WRAPPERS) {
      const config: FsdpRankConfig = {
        wrapper,
        backend,
        widths: [784, 512, 512, 10],
        batch: 64,
        warmup: 2,
        steps: ctx.quick ? 3 : 10,
      };
      const ranks = await distributed.spawn<FsdpRankResult>(RANK_MODULE, {
        nprocs: 2,
        args: [config],
      });
      const ms = median(ranks[0].ms.map((_, i) => Math.max(...ranks.map((r) => r.ms[i]))));
      if (wrapper === "ddp") ddpMs = ms;
      const bytes = Math.max(...ranks.map((r) => r.bytesInUse));
      table.row([wrapper, ms, ms / ddpMs, bytes / 2 ** 20, ranks[0].paramElements]);
      const extra = { bytesPerRank: bytes, paramElements: ranks[0].paramElements };
      results.push({
        suite: "fsdp",
        backend,
        case: wrapper,
        value: ms,
        unit: "ms/step",
        runs: config.steps,
        medianMs: ms,
        extra,
      });
    }
  }
  return results;
}

/** The `fsdp` suite. */
export const fsdpSuite: Suite = {
  name: "fsdp",
  description: "FSDP (each strategy) vs DDP on 2 Worker ranks: step time and bytes held per rank",
  run,
};
