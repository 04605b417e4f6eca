/**
 * `ddp`: DistributedDataParallel on the mlp suite's model (784-512-512-10,
 * SGD), ranks as Workers (`spawn`) and as processes (`mpiexec`; the
 * `"tcp"` group's processes, as multigrad's run.ts starts them), against
 * the same step without collectives, all groups of a family timed
 * round-robin in one run (a round runs K steps on every group in turn):
 *
 * - cpu: 1 rank at batch 128, 2 ranks at 128 each without collectives (the
 *   machine's own ceiling: how far two cores scale), the same 2 ranks with
 *   a barrier after every step (what lockstep alone costs: each step waits
 *   for the slower rank), 2 DDP ranks at 128 each. Target: DDP reaches 90%
 *   of the ceiling in samples per second.
 * - webgpu (every rank its own GPUDevice on the one adapter, so no extra
 *   compute exists): 1 rank at batch 256 against 2 DDP ranks at 128 each,
 *   the same global batch. Target: step time at most 1.3x. Also 1 rank at
 *   128 and 2 ranks at 128 without collectives, for the estimate on
 *   separate GPUs: t(1 rank, 128) + the DDP overhead (DDP minus the same
 *   two ranks without collectives).
 * @module
 */

import { distributed } from "../../mod.ts";
import { type BenchResult, fmt, median, type Suite, type SuiteContext, Table } from "./_common.ts";
import {
  AUTOGROUP_NICE_ENV,
  COMMAND,
  createMailbox,
  MAILBOX,
  type RankConfig,
} from "./ddp_rank.ts";

const RANK_MODULE = new URL("./ddp_rank.ts", import.meta.url);
/** A group that does not answer within this long is broken. */
const GROUP_TIMEOUT_MS = 300_000;

/** A set of ranks that runs K steps on command and reports each rank's milliseconds. */
interface Group {
  readonly label: string;
  readonly ranks: number;
  readonly config: RankConfig;
  run(steps: number): Promise<number[]>;
  close(): Promise<void>;
}

/** Ranks as Workers of this process. */
function spawnGroup(label: string, ranks: number, config: RankConfig): Group {
  const mailbox = createMailbox(ranks);
  const words = new Int32Array(mailbox);
  const results = new Float64Array(mailbox, MAILBOX.results * 4, ranks);
  let failure: Error | null = null;
  const running = distributed.spawn(RANK_MODULE, { nprocs: ranks, args: [config, mailbox] })
    .catch((error: Error) => {
      failure = error;
      // Wake a waiting `run` so it sees the failure.
      Atomics.store(words, MAILBOX.done, -1);
      Atomics.notify(words, MAILBOX.done);
    });
  const send = (command: number, steps: number) => {
    Atomics.store(words, MAILBOX.command, command);
    Atomics.store(words, MAILBOX.steps, steps);
    const seq = Atomics.add(words, MAILBOX.seq, 1) + 1;
    Atomics.notify(words, MAILBOX.seq);
    return seq;
  };
  return {
    label,
    ranks,
    config,
    async run(steps) {
      const seq = send(COMMAND.run, steps);
      const deadline = performance.now() + GROUP_TIMEOUT_MS;
      for (;;) {
        if (failure) throw failure;
        const done = Atomics.load(words, MAILBOX.done);
        if (done === seq) return [...results];
        const left = deadline - performance.now();
        if (left <= 0) throw new Error(`ddp bench: ${label} did not answer`);
        const wait = Atomics.waitAsync(words, MAILBOX.done, done, left);
        if (wait.async) await wait.value;
      }
    },
    async close() {
      send(COMMAND.quit, 0);
      await running;
    },
  };
}

/**
 * This process's autogroup niceness (Linux), or null. Hydra starts every
 * rank in a session of its own, so a rank lands in a fresh autogroup at
 * nice 0 whatever the bench's (`echo -20 > /proc/self/autogroup`), while
 * Worker ranks share the bench's: the rank takes the bench's value (see
 * ddp_rank.ts), so both launchers compete for the cores alike.
 */
function autogroupNice(): string | null {
  try {
    return Deno.readTextFileSync("/proc/self/autogroup").match(/nice (-?\d+)/)?.[1] ?? null;
  } catch {
    return null;
  }
}

/**
 * Ranks as processes of the `"tcp"` group (as multigrad's run.ts starts
 * them: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), commanded through rank
 * 0's stdin like {@link mpiGroup}'s.
 */
function tcpGroup(label: string, ranks: number, config: RankConfig): Group {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = String((listener.addr as Deno.NetAddr).port);
  listener.close();
  const nice = autogroupNice();
  // Each rank in a session (and so a Linux autogroup) of its own, as Hydra
  // starts MPI ranks: otherwise the two ranks shared one autogroup's CPU
  // share on the loaded machine (1.26x scaling without collectives, against
  // 1.87x for the mpi ranks in the same run).
  const children = Array.from({ length: ranks }, (_, rank) =>
    new Deno.Command("setsid", {
      args: [Deno.execPath(), "run", "-A", RANK_MODULE.pathname, JSON.stringify(config)],
      stdin: rank === 0 ? "piped" : "null",
      stdout: rank === 0 ? "piped" : "null",
      stderr: "piped",
      env: {
        RANK: String(rank),
        WORLD_SIZE: String(ranks),
        MASTER_ADDR: "127.0.0.1",
        MASTER_PORT: port,
        ...(nice === null ? {} : { [AUTOGROUP_NICE_ENV]: nice }),
      },
    }).spawn());
  const others = children.slice(1);
  const othersDone = Promise.all(others.map(async (c) => {
    await new Response(c.stderr).text();
    await c.status;
  }));
  return commanded(label, ranks, config, children[0], async () => {
    const timer = setTimeout(() => others.forEach((c) => c.kill("SIGKILL")), 20_000);
    await othersDone;
    clearTimeout(timer);
  });
}

/** Ranks as processes under `mpiexec`, commanded through rank 0's stdin. */
function mpiGroup(label: string, ranks: number, config: RankConfig): Group {
  const nice = autogroupNice();
  const child = new Deno.Command("mpiexec", {
    args: [
      "-n",
      String(ranks),
      Deno.execPath(),
      "run",
      "-A",
      RANK_MODULE.pathname,
      JSON.stringify(config),
    ],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
    env: nice === null ? {} : { [AUTOGROUP_NICE_ENV]: nice },
  }).spawn();
  return commanded(label, ranks, config, child, () => Promise.resolve());
}

/** A group whose rank 0 is `child` (reading commands on stdin, printing `RESULT` lines). */
function commanded(
  label: string,
  ranks: number,
  config: RankConfig,
  child: Deno.ChildProcess,
  closeOthers: () => Promise<void>,
): Group {
  const writer = child.stdin.getWriter();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const stderr = new Response(child.stderr).text();
  let buffered = "";
  const nextResult = async (): Promise<number[]> => {
    for (;;) {
      const at = buffered.indexOf("\n");
      if (at >= 0) {
        const line = buffered.slice(0, at);
        buffered = buffered.slice(at + 1);
        if (line.startsWith("RESULT ")) return JSON.parse(line.slice(7));
        continue;
      }
      const { value, done } = await lines.read();
      if (done) throw new Error(`ddp bench: ${label} exited: ${(await stderr).slice(-2000)}`);
      buffered += value;
    }
  };
  const encoder = new TextEncoder();
  return {
    label,
    ranks,
    config,
    async run(steps) {
      try {
        await writer.write(encoder.encode(`run ${steps}\n`));
      } catch (error) {
        throw new Error(
          `ddp bench: ${label}: mpiexec stopped reading (${(error as Error).message}): ${
            (await stderr).slice(-2000)
          }`,
        );
      }
      return await nextResult();
    },
    async close() {
      await writer.write(encoder.encode("quit\n")).catch(() => {});
      await writer.close().catch(() => {});
      // A job that does not end by itself is not left behind.
      const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
      await child.status;
      clearTimeout(timer);
      await stderr;
      await closeOthers();
    },
  };
}

/** Per-round timings of one group. */
interface Measured {
  readonly group: Group;
  /** Step ms of the slowest rank, per round. */
  readonly stepMs: number[];
  /** Samples per second over all ranks, per round. */
  readonly samplesPerS: number[];
}

/** Runs `groups` round-robin: `rounds` rounds of `steps` steps each, after a warm-up. */
async function interleave(
  groups: readonly Group[],
  rounds: number,
  steps: number,
): Promise<Measured[]> {
  const out = groups.map((group) => ({
    group,
    stepMs: [] as number[],
    samplesPerS: [] as number[],
  }));
  for (const g of groups) await g.run(2);
  for (let round = 0; round < rounds; round++) {
    for (let j = 0; j < groups.length; j++) {
      const m = out[(round + j) % groups.length];
      const ms = await m.group.run(steps);
      m.stepMs.push(Math.max(...ms) / steps);
      const batch = m.group.config.batch;
      m.samplesPerS.push(ms.reduce((sum, t) => sum + (batch * steps * 1000) / t, 0));
    }
  }
  return out;
}

/** The median over rounds of `f(round)`. */
function perRound(rounds: number, f: (round: number) => number): number {
  return median(Array.from({ length: rounds }, (_, r) => f(r)));
}

/**
 * Why the mpi rows cannot run here, or null: they need MPICH's `mpiexec`
 * (Hydra), the launcher of the `libmpich.so.12` ranks load; another MPI's
 * `mpiexec` (Open MPI's refuses to run as root) would start ranks that fail.
 */
export async function mpiUnavailable(): Promise<string | null> {
  try {
    const out = await new Deno.Command("mpiexec", {
      args: ["--version"],
      stdout: "piped",
      stderr: "null",
    }).output();
    const text = new TextDecoder().decode(out.stdout);
    if (/HYDRA/i.test(text)) return null;
    return `mpiexec is not MPICH's (its --version begins "${
      text.trim().split("\n")[0].slice(0, 80)
    }"), the mpi rows are skipped (they need MPICH: apt-get install mpich)`;
  } catch {
    return "mpiexec not found, the mpi rows are skipped (apt-get install mpich)";
  }
}

/** The ddp suite. */
export const ddpSuite: Suite = {
  name: "ddp",
  description:
    "DistributedDataParallel, MLP 784-512-512-10 SGD: cpu ranks vs the machine's two-Worker ceiling; webgpu 2x128 vs 1x256; spawn, mpiexec and tcp processes; a 4 MiB all-reduce per launcher",
  async run(ctx: SuiteContext): Promise<BenchResult[]> {
    const layers = ctx.quick ? [784, 128, 10] : [784, 512, 512, 10];
    const rounds = ctx.quick ? 2 : 11;
    const steps = ctx.quick ? 2 : 6;
    const launchers: ("spawn" | "mpi" | "tcp")[] = ["spawn"];
    const noMpi = await mpiUnavailable();
    if (noMpi === null) launchers.push("mpi");
    else ctx.log(`  ddp: ${noMpi}`);
    launchers.push("tcp");
    const table = new Table(
      `ddp: DistributedDataParallel(${
        layers.join("-")
      }) SGD step, ${rounds} interleaved rounds of ${steps} steps; medians over rounds`,
      [
        { title: "launcher", width: 8, right: false },
        { title: "backend", width: 7, right: false },
        { title: "group", width: 33, right: false },
        { title: "ms/step", width: 8 },
        { title: "samples/s", width: 9 },
        { title: "ratio", width: 32, right: false },
      ],
      ctx.log,
    );
    const results: BenchResult[] = [];
    const record = (
      launcher: string,
      backend: string,
      m: Measured,
      ratio: string,
      extra: Record<string, number> = {},
    ) => {
      const ms = median(m.stepMs);
      const rate = median(m.samplesPerS);
      table.row([launcher, backend, m.group.label, ms, fmt(rate), ratio]);
      results.push({
        suite: "ddp",
        backend,
        case: `${launcher} ${m.group.label}`,
        value: ms,
        unit: "ms/step",
        runs: m.stepMs.length,
        medianMs: ms,
        extra: { samplesPerS: rate, ranks: m.group.ranks, batch: m.group.config.batch, ...extra },
      });
    };
    for (const launcher of launchers) {
      const make = launcher === "spawn" ? spawnGroup : launcher === "mpi" ? mpiGroup : tcpGroup;
      // What the transport costs: one 4 MiB float32 all-reduce (avg) between 2 cpu ranks.
      const reduce = make("2 ranks, allReduce 4 MiB float32", 2, {
        backend: "cpu",
        batch: 1,
        ddp: false,
        layers: [4, 2],
        allReduceMiB: 4,
      });
      // The tcp group's yardstick, timed in the same rounds: the same bytes
      // each way over a bare socket of the two ranks' own.
      const raw = launcher === "tcp"
        ? make("2 ranks, bare socket 4 MiB", 2, {
          backend: "cpu",
          batch: 1,
          ddp: false,
          layers: [4, 2],
          rawExchangeMiB: 4,
        })
        : null;
      try {
        const [m, bare] = await interleave(
          raw ? [reduce, raw] : [reduce],
          rounds,
          ctx.quick ? 4 : 20,
        );
        if (bare) {
          const ratio = perRound(rounds, (r) => m.stepMs[r] / bare.stepMs[r]);
          record(launcher, "cpu", bare, `${fmt(4 / (median(bare.stepMs) / 1000))} MiB/s`);
          record(
            launcher,
            "cpu",
            m,
            `${fmt(4 / (median(m.stepMs) / 1000))} MiB/s; ${fmt(ratio)}x the bare socket`,
            { ofBareSocket: ratio },
          );
        } else record(launcher, "cpu", m, `${fmt(4 / (median(m.stepMs) / 1000))} MiB/s`);
      } finally {
        await Promise.all([reduce, raw].map((g) => g?.close().catch(() => {})));
      }
      for (const backend of ctx.backends) {
        const cfg = (batch: number, ddp: boolean): RankConfig => ({ backend, batch, ddp, layers });
        const groups: Group[] = backend === "cpu"
          ? [
            make("1 rank x 128", 1, cfg(128, false)),
            make("2 ranks x 128, no collectives", 2, cfg(128, false)),
            make("2 ranks x 128, a barrier per step", 2, { ...cfg(128, false), lockstep: true }),
            make("2 DDP ranks x 128", 2, cfg(128, true)),
          ]
          : [
            make("1 rank x 256", 1, cfg(256, false)),
            make("1 rank x 128", 1, cfg(128, false)),
            make("2 ranks x 128, no collectives", 2, cfg(128, false)),
            make("2 DDP ranks x 128", 2, cfg(128, true)),
          ];
        try {
          const m = await interleave(groups, rounds, steps);
          if (backend === "cpu") {
            const [one, two, lockstep, ddp] = m;
            const ceiling = perRound(rounds, (r) => two.samplesPerS[r] / one.samplesPerS[r]);
            const scaling = perRound(rounds, (r) => ddp.samplesPerS[r] / one.samplesPerS[r]);
            const ofCeiling = perRound(rounds, (r) => ddp.samplesPerS[r] / two.samplesPerS[r]);
            record(launcher, backend, one, "");
            const floor = perRound(rounds, (r) => lockstep.samplesPerS[r] / two.samplesPerS[r]);
            const ofFloor = perRound(rounds, (r) => ddp.samplesPerS[r] / lockstep.samplesPerS[r]);
            record(launcher, backend, two, `ceiling ${fmt(ceiling)}x samples/s`, { ceiling });
            record(launcher, backend, lockstep, `${fmt(100 * floor)}% of ceiling`, {
              ofCeiling: floor,
            });
            record(
              launcher,
              backend,
              ddp,
              `${fmt(scaling)}x; ${fmt(100 * ofCeiling)}% of ceiling (>= 90%)`,
              { scaling, ofCeiling, ofLockstep: ofFloor },
            );
            table.note(
              `${launcher} cpu: DDP ${
                fmt(100 * ofFloor)
              }% of the barrier-per-step ranks' samples/s (what moving the gradients costs beyond ` +
                "waiting for the slower rank every step)",
            );
          } else {
            const [big, small, two, ddp] = m;
            const ratio = perRound(rounds, (r) => ddp.stepMs[r] / big.stepMs[r]);
            const overhead = perRound(rounds, (r) => ddp.stepMs[r] - two.stepMs[r]);
            const separate = median(small.stepMs) + overhead;
            const speedup = median(big.stepMs) / separate;
            record(launcher, backend, big, "");
            record(launcher, backend, small, "");
            record(launcher, backend, two, "");
            record(
              launcher,
              backend,
              ddp,
              `${fmt(ratio)}x of 1 x 256 (<= 1.3x)`,
              {
                ratioVs256: ratio,
                overheadMs: overhead,
                estSeparateMs: separate,
                estSpeedup: speedup,
              },
            );
            table.note(
              `${launcher} ${backend}: DDP overhead ${
                fmt(overhead)
              } ms/step (DDP minus 2 ranks without collectives);` +
                ` on separate GPUs ~${fmt(separate)} ms/step = 1 x 128 + overhead, ${
                  fmt(speedup)
                }x the 1 x 256 rank's throughput`,
            );
          }
        } finally {
          await Promise.all(groups.map((g) => g.close().catch(() => {})));
        }
      }
    }
    table.note(
      `load average ${
        Deno.loadavg().map((x) => x.toFixed(1)).join(" ")
      } (the machine is shared: ratios are of the same round)`,
    );
    return results;
  },
};
