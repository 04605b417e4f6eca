/**
 * `collectives`: all-reduce against all-gather-into-tensor and
 * reduce-scatter-tensor of the same bytes (the all-reduce's array is the
 * gather's output and the scatter's input), float32 on cpu tensors, 2
 * ranks as Workers (`spawn`, the `"local"` group) and as processes
 * (`mpiexec`, when MPICH is installed; the `"tcp"` group under multigrad's
 * `run.ts`), interleaved in one run: the median over rounds of the
 * milliseconds per call (the slower rank's). A gather or a scatter moves
 * 1/worldSize of what the all-reduce moves per rank, so neither should
 * cost more than it; FSDP's collectives are these two. Then the blocking
 * all-gather of 32 words (`allGatherSync`, once per backward under DDP's
 * `findUnusedParameters`): its latency, since the rank's thread waits.
 * @module
 */

import { distributed } from "../../mod.ts";
import { type BenchResult, fmt, median, type Suite, type SuiteContext, Table } from "./_common.ts";
import {
  COLLECTIVES,
  type CollectivesConfig,
  type CollectivesTimes,
  SYNC_WORDS_TIMED,
} from "./collectives_rank.ts";
import { mpiUnavailable } from "./ddp.ts";

const RANK_MODULE = new URL("./collectives_rank.ts", import.meta.url);
const RANKS = 2;

async function spawned(config: CollectivesConfig): Promise<CollectivesTimes> {
  const results = await distributed.spawn<CollectivesTimes>(RANK_MODULE, {
    nprocs: RANKS,
    args: [config],
  });
  return results[0];
}

/** The ranks as processes: under `mpiexec`, or the `"tcp"` group under multigrad's launcher. */
async function asProcesses(
  launcher: "mpi" | "tcp",
  config: CollectivesConfig,
): Promise<CollectivesTimes> {
  const rank = [Deno.execPath(), "run", "-A", RANK_MODULE.pathname, JSON.stringify(config)];
  const child = launcher === "mpi"
    ? new Deno.Command("mpiexec", {
      args: ["-n", String(RANKS), ...rank],
      stdout: "piped",
      stderr: "piped",
    })
    : new Deno.Command(Deno.execPath(), {
      args: [
        ...["run", "-A", new URL("../../src/distributed/run.ts", import.meta.url).pathname],
        ...["--nproc-per-node", String(RANKS), "--standalone", ...rank.slice(3)],
      ],
      stdout: "piped",
      stderr: "piped",
    });
  const { code, stdout, stderr } = await child.output();
  const text = new TextDecoder().decode(stdout);
  const line = text.split("\n").find((l) => l.startsWith("RESULT "));
  if (code !== 0 || !line) {
    throw new Error(
      `collectives bench: ${launcher === "mpi" ? "mpiexec" : "run.ts"} exited with ${code}: ${
        new TextDecoder().decode(stderr).slice(-2000)
      }`,
    );
  }
  return JSON.parse(line.slice(7));
}

async function run(ctx: SuiteContext): Promise<BenchResult[]> {
  const results: BenchResult[] = [];
  const config: CollectivesConfig = {
    sizes: ctx.quick ? [400_000] : [400_000, 1 << 20],
    rounds: ctx.quick ? 2 : 9,
    reps: ctx.quick ? 3 : 10,
  };
  const launchers: ("spawn" | "mpi" | "tcp")[] = ["spawn"];
  const noMpi = await mpiUnavailable();
  if (noMpi === null) launchers.push("mpi");
  launchers.push("tcp");
  const table = new Table(
    `collectives (cpu, ${RANKS} ranks, float32; ${config.rounds} interleaved rounds of ${config.reps} calls, medians)`,
    [
      { title: "launcher", width: 8, right: false },
      { title: "elements", width: 9 },
      { title: "collective", width: 20, right: false },
      { title: "ms/call", width: 8 },
      { title: "vs allReduce", width: 12 },
      { title: "MB/s", width: 8 },
    ],
    ctx.log,
  );
  for (const launcher of launchers) {
    const times = launcher === "spawn"
      ? await spawned(config)
      : await asProcesses(launcher, config);
    config.sizes.forEach((size, s) => {
      const reduceMs = times.arrays[s][0];
      COLLECTIVES.forEach((name, c) => {
        const perRound = times.arrays[s][c];
        const ms = median(perRound);
        const ratio = median(perRound.map((t, r) => t / reduceMs[r]));
        const mbPerS = (size * 4) / 1e6 / (ms / 1000);
        table.row([launcher, size, name, ms, ratio, mbPerS]);
        results.push({
          suite: "collectives",
          backend: "cpu",
          case: `${launcher} ${name} ${size}`,
          value: ms,
          unit: "ms/call",
          runs: perRound.length * config.reps,
          medianMs: ms,
          extra: { vsAllReduce: ratio, bytes: size * 4, ranks: RANKS },
        });
      });
    });
    const syncMs = median(times.sync);
    table.row([launcher, SYNC_WORDS_TIMED, "allGatherSync int32", syncMs, "", ""]);
    results.push({
      suite: "collectives",
      backend: "cpu",
      case: `${launcher} allGatherSync ${SYNC_WORDS_TIMED} words`,
      value: syncMs,
      unit: "ms/call",
      runs: times.sync.length * config.reps * 10,
      medianMs: syncMs,
      extra: { ranks: RANKS },
    });
  }
  if (noMpi !== null) table.note(noMpi);
  table.note(`MB/s: the whole array's bytes (${fmt(4)} per element) per call`);
  return results;
}

/** The `collectives` suite. */
export const collectivesSuite: Suite = {
  name: "collectives",
  description:
    "all-reduce vs all-gather-into-tensor vs reduce-scatter-tensor of the same bytes, 2 cpu ranks (spawn, mpiexec and tcp), interleaved; the blocking allGatherSync of 32 words",
  run,
};
