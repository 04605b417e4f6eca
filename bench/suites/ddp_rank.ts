/**
 * One rank of the `ddp` benchmark: builds the MLP on its own device (wrapped
 * in DistributedDataParallel or not), then serves "run K steps" commands
 * until told to quit, reporting every rank's milliseconds. Under `spawn` the
 * commands come through a shared mailbox; under `mpiexec` rank 0 reads them
 * from stdin and prints the results. Either way rank 0 passes the command
 * on with a broadcast and gathers the times with `allGather`, outside the
 * timed steps.
 *
 *   mpiexec -n 2 deno run -A bench/suites/ddp_rank.ts '{"backend":"cpu","batch":128,"ddp":true}'
 * @module
 */

import {
  cpuBackend,
  type Device,
  distributed,
  registerBackend,
  requestDevices,
  type Tensor,
  tensor,
  tidy,
} from "../../mod.ts";
import { createMlp, MLP_CONFIG, type MlpSetup } from "./mlp.ts";

/** What every rank of a benchmark group runs. */
export interface RankConfig {
  /** Backend of the rank's device. */
  readonly backend: string;
  /** Rows per rank per step. */
  readonly batch: number;
  /** Wrap the model in DistributedDataParallel (else: no collectives in the steps). */
  readonly ddp: boolean;
  /** Layer widths (default the mlp suite's 784-512-512-10). */
  readonly layers?: readonly number[];
  /**
   * Without DDP, a barrier after every step: what synchronous training
   * costs before any gradient moves (a step waits for the slowest rank).
   */
  readonly lockstep?: boolean;
  /**
   * Instead of training steps, all-reduces of this many MiB of float32 (a
   * "step" is one all-reduce): what the process group's transport costs.
   */
  readonly allReduceMiB?: number;
  /**
   * Instead of training steps, bare exchanges of this many MiB between
   * ranks 0 and 1 over one Deno TCP socket of their own (both directions
   * at once, 256 KiB writes and reads, TCP_NODELAY; a "step" is one
   * exchange): what a 2-rank all-reduce's transport could cost at best.
   */
  readonly rawExchangeMiB?: number;
}

/** The bare exchange's socket (see {@link RankConfig.rawExchangeMiB}), made through the group. */
async function rawSocket(host: Device): Promise<Deno.TcpConn> {
  const rank = distributed.getRank();
  if (distributed.getWorldSize() !== 2) throw new Error("rawExchangeMiB needs 2 ranks");
  const listener = rank === 0 ? Deno.listen({ hostname: "127.0.0.1", port: 0 }) : null;
  const port = tensor([listener ? (listener.addr as Deno.NetAddr).port : 0], {
    dtype: "int32",
    device: host,
  });
  distributed.broadcast(port, { src: 0 });
  const [p] = await port.data();
  const conn = listener
    ? await listener.accept()
    : await Deno.connect({ hostname: "127.0.0.1", port: p });
  listener?.close();
  conn.setNoDelay(true);
  return conn;
}

/** One bare exchange of `out` for `into` over `conn`. */
async function rawExchange(conn: Deno.TcpConn, out: Uint8Array, into: Uint8Array): Promise<void> {
  const chunk = 256 * 1024;
  const writing = (async () => {
    for (let at = 0; at < out.length;) {
      at += await conn.write(out.subarray(at, Math.min(out.length, at + chunk)));
    }
  })();
  for (let at = 0; at < into.length;) {
    const n = await conn.read(into.subarray(at, Math.min(into.length, at + chunk)));
    if (n === null) throw new Error("the bare exchange's socket closed");
    at += n;
  }
  await writing;
}

/** What {@link RankConfig.rawExchangeMiB} exchanges: the socket and both buffers. */
interface Raw {
  readonly conn: Deno.TcpConn;
  readonly out: Uint8Array;
  readonly into: Uint8Array;
}

/** The environment variable through which the bench hands an MPI rank its autogroup niceness. */
export const AUTOGROUP_NICE_ENV = "MULTIGRAD_BENCH_AUTOGROUP_NICE";

/** Mailbox words (Int32): the command's number, the command, its step count, the answer's number. */
export const MAILBOX = { seq: 0, command: 1, steps: 2, done: 3, results: 8 } as const;
/** Commands. */
export const COMMAND = { run: 1, quit: 2 } as const;

/** A shared mailbox for a group of `ranks` (results as float64 after the control words). */
export function createMailbox(ranks: number): SharedArrayBuffer {
  return new SharedArrayBuffer(MAILBOX.results * 4 + ranks * 8);
}

/**
 * One training step: forward, the loss read started at once (as a loop
 * that logs the loss would), backward (DDP all-reduces here), SGD; resolves
 * when the loss has arrived.
 */
async function step(s: MlpSetup): Promise<void> {
  let read: Promise<number> | null = null;
  tidy(() => {
    s.optimizer.zeroGrad();
    const loss = s.lossFn.forward(s.runner.forward(s.x) as Tensor, s.y);
    read = loss.item();
    loss.backward();
    s.optimizer.step();
  });
  await read;
}

async function runSteps(
  s: MlpSetup,
  steps: number,
  lockstep = false,
  reduced: Tensor | null = null,
  raw: Raw | null = null,
): Promise<number> {
  const t0 = performance.now();
  if (raw) {
    for (let i = 0; i < steps; i++) await rawExchange(raw.conn, raw.out, raw.into);
    return performance.now() - t0;
  }
  if (reduced) {
    for (let i = 0; i < steps; i++) await distributed.allReduce(reduced, { op: "avg" });
    return performance.now() - t0;
  }
  for (let i = 0; i < steps; i++) {
    await step(s);
    if (lockstep) await distributed.barrier();
  }
  return performance.now() - t0;
}

/**
 * Serves commands: rank 0 takes each from `next` and broadcasts it; every
 * rank runs the steps; the times are gathered and rank 0 hands them to
 * `report`.
 */
async function serve(
  config: RankConfig,
  next: () => Promise<[number, number]>,
  report: (msPerRank: number[]) => void,
): Promise<void> {
  const rank = distributed.getRank();
  if (config.backend === "dawn") {
    // The bench's --dawn: each rank registers the plugin in its own Worker or process.
    const plugin = new URL("../../src/backends/dawn/mod.ts", import.meta.url).href;
    const { registerDawn } = await import(
      plugin
    ) as typeof import("../../src/backends/dawn/mod.ts");
    registerDawn();
  }
  const [device] = await requestDevices({ backend: config.backend });
  const [host] = await requestDevices({ backend: "cpu" });
  const layers = config.layers ?? MLP_CONFIG.layers;
  const s = createMlp(
    device,
    { layers, batch: config.batch },
    (m) => (config.ddp ? new distributed.DistributedDataParallel(m) : m),
  );
  const reduced = config.allReduceMiB
    ? tensor(new Float32Array((config.allReduceMiB * 1024 * 1024) / 4).fill(1), { device: host })
    : null;
  const bytes = (config.rawExchangeMiB ?? 0) * 1024 * 1024;
  const raw = bytes > 0
    ? {
      conn: await rawSocket(host),
      out: new Uint8Array(bytes).fill(1),
      into: new Uint8Array(bytes),
    }
    : null;
  try {
    for (;;) {
      const command = tensor(rank === 0 ? await next() : [0, 0], { dtype: "int32", device: host });
      distributed.broadcast(command, { src: 0 });
      const [kind, steps] = await command.data();
      if (kind !== COMMAND.run) break;
      // The clocks start together: a rank idling in the broadcast notices
      // the command some time after rank 0 (an MPI rank backs off its polls
      // the longer it waits), and that lag is not a step's.
      await distributed.barrier();
      const ms = await runSteps(s, steps, config.lockstep, reduced, raw);
      const times = distributed.allGather(tensor([ms], { dtype: "float64", device: host }));
      const all = await Promise.all(times.map(async (t) => (await t.data())[0]));
      if (rank === 0) report(all);
    }
  } finally {
    s.dispose();
    reduced?.dispose();
    raw?.conn.close();
  }
}

/** A spawned rank: commands through `mailbox` (see {@link MAILBOX}). */
export async function main(
  _rank: number,
  _worldSize: number,
  config: RankConfig,
  mailbox: SharedArrayBuffer,
): Promise<void> {
  const words = new Int32Array(mailbox);
  const results = new Float64Array(mailbox, MAILBOX.results * 4);
  let seen = 0;
  await serve(
    config,
    async () => {
      for (;;) {
        const seq = Atomics.load(words, MAILBOX.seq);
        if (seq !== seen) {
          seen = seq;
          return [Atomics.load(words, MAILBOX.command), Atomics.load(words, MAILBOX.steps)];
        }
        const wait = Atomics.waitAsync(words, MAILBOX.seq, seq);
        if (wait.async) await wait.value;
      }
    },
    (ms) => {
      results.set(ms);
      Atomics.store(words, MAILBOX.done, seen);
      Atomics.notify(words, MAILBOX.done);
    },
  );
}

// Under mpiexec (or as processes of the "tcp" group, MASTER_ADDR set): rank 0 reads `run K` /
// `quit` lines and prints `RESULT [ms, ...]`.
if (import.meta.main) {
  const config = JSON.parse(Deno.args[0]) as RankConfig;
  // The bench's scheduling weight (see ddp.ts's autogroupNice); best effort.
  const nice = Deno.env.get(AUTOGROUP_NICE_ENV);
  if (nice !== undefined) {
    try {
      Deno.writeTextFileSync("/proc/self/autogroup", nice);
    } catch {
      // Not Linux, or not allowed: the rank keeps its own autogroup.
    }
  }
  // One core per rank, as in a Worker rank, also when this job has a single
  // rank (the baseline), so every group computes alike.
  registerBackend("cpu", () => cpuBackend({ threads: 1 }), { priority: 1 });
  await distributed.initProcessGroup({
    backend: Deno.env.get("MASTER_ADDR") === undefined ? "mpi" : "tcp",
  });
  // Only rank 0 reads stdin, and lets go of it at the end: an open reader
  // keeps the process alive (mpiexec never closes the other ranks' stdin).
  const lines = distributed.getRank() === 0
    ? Deno.stdin.readable.pipeThrough(new TextDecoderStream()).getReader()
    : null;
  let buffered = "";
  const nextLine = async (): Promise<string> => {
    for (;;) {
      const at = buffered.indexOf("\n");
      if (at >= 0) {
        const line = buffered.slice(0, at);
        buffered = buffered.slice(at + 1);
        return line.trim();
      }
      const { value, done } = await lines!.read();
      if (done) return "quit";
      buffered += value;
    }
  };
  await serve(
    config,
    async () => {
      const [word, count] = (await nextLine()).split(/\s+/);
      return word === "run" ? [COMMAND.run, Number(count)] : [COMMAND.quit, 0];
    },
    (ms) => console.log(`RESULT ${JSON.stringify(ms)}`),
  );
  await lines?.cancel();
  await distributed.destroyProcessGroup();
}
