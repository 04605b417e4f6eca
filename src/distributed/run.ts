/**
 * multigrad's launcher for the `"tcp"` process group, as PyTorch's
 * `torchrun`: starts `--nproc-per-node` processes of a script on this
 * machine, each with `RANK`, `WORLD_SIZE`, `LOCAL_RANK`,
 * `LOCAL_WORLD_SIZE`, `GROUP_RANK`, `MASTER_ADDR` and `MASTER_PORT` set,
 * so that `distributed.initProcessGroup()` joins them over TCP.
 *
 * ```sh
 * deno run -A jsr:@multigrad/core/run --nproc-per-node 2 train.ts --epochs 3
 * # two machines: on each, with its --node-rank (0 on the master's machine)
 * deno run -A jsr:@multigrad/core/run --nnodes 2 --node-rank 0 --nproc-per-node 4 \
 *   --master-addr 10.0.0.1 --master-port 29500 train.ts
 * ```
 *
 * The processes' output goes to this process's. When one exits with an
 * error, the others are stopped (SIGTERM, then SIGKILL after 5 s) and the
 * launcher exits with code 1 naming that rank, as torchrun does. Flags are
 * torchrun's in kebab case (`--nproc_per_node` is accepted too); the
 * processes run as `deno run -A SCRIPT ARGS` (`--deno-flag FLAG` adds one
 * of Deno's flags, repeatable). `--standalone` (one machine) picks a free
 * port of 127.0.0.1 for the master, as torchrun's. SIGINT, SIGTERM and
 * SIGHUP sent to the launcher are sent on to every rank (a scheduler that
 * stops the launcher must not leave the ranks running), and the launcher
 * exits with 1. Differences from torchrun: no elastic
 * restarts (`--max-restarts`), no rendezvous backends other than the
 * master's store.
 * @module
 */

/** The launcher's settings, from its flags. */
export interface RunOptions {
  /** Processes on this machine. */
  readonly nprocPerNode: number;
  /** Machines. */
  readonly nnodes: number;
  /** This machine's index among them. */
  readonly nodeRank: number;
  /** Rank 0's machine. */
  readonly masterAddr: string;
  /** The port of rank 0's store. */
  readonly masterPort: number;
  /** Extra flags for `deno run` (after `-A`). */
  readonly denoFlags: readonly string[];
  /** The script to run. */
  readonly script: string;
  /** The script's own arguments. */
  readonly args: readonly string[];
}

const USAGE =
  "usage: deno run -A jsr:@multigrad/core/run [--standalone] [--nproc-per-node N] [--nnodes N] [--node-rank R] [--master-addr HOST] [--master-port PORT] [--deno-flag FLAG]... SCRIPT [ARGS...]";

/** Parses the launcher's command line (flags before the script; the rest is the script's). */
export function parseRunArgs(argv: readonly string[]): RunOptions {
  const values: Record<string, string> = {};
  const denoFlags: string[] = [];
  let standalone = false;
  let i = 0;
  for (; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith("--")) break;
    const eq = arg.indexOf("=");
    const name = (eq >= 0 ? arg.slice(2, eq) : arg.slice(2)).replaceAll("_", "-");
    if (name === "standalone" && eq < 0) {
      standalone = true;
      continue;
    }
    const known = [
      "nproc-per-node",
      "nnodes",
      "node-rank",
      "master-addr",
      "master-port",
      "deno-flag",
    ];
    if (!known.includes(name)) throw new Error(`run: unknown flag ${arg}\n${USAGE}`);
    let value: string;
    if (eq >= 0) value = arg.slice(eq + 1);
    else {
      if (i + 1 >= argv.length) throw new Error(`run: ${arg} needs a value\n${USAGE}`);
      value = argv[++i];
    }
    if (name === "deno-flag") denoFlags.push(value);
    else values[name] = value;
  }
  const script = argv[i];
  if (script === undefined) throw new Error(`run: no script given\n${USAGE}`);
  const int = (name: string, fallback: number, min: number) => {
    const text = values[name];
    if (text === undefined) return fallback;
    const value = Number(text);
    if (!/^\d+$/.test(text) || value < min) {
      throw new Error(`run: --${name} must be an integer >= ${min}, got "${text}"`);
    }
    return value;
  };
  if (standalone) {
    for (const name of ["master-addr", "master-port"]) {
      if (values[name] !== undefined) {
        throw new Error(`run: --standalone picks the master's address and port: not --${name}`);
      }
    }
    if (values["nnodes"] !== undefined && values["nnodes"] !== "1") {
      throw new Error(`run: --standalone runs one machine: --nnodes ${values["nnodes"]}`);
    }
    values["master-addr"] = "127.0.0.1";
    values["master-port"] = String(freeLoopbackPort());
  }
  const nnodes = int("nnodes", 1, 1);
  const nodeRank = int("node-rank", 0, 0);
  if (nodeRank >= nnodes) {
    throw new Error(`run: --node-rank ${nodeRank} is not below --nnodes ${nnodes}`);
  }
  const masterPort = int("master-port", 29500, 1);
  if (masterPort > 65535) throw new Error(`run: --master-port must be at most 65535`);
  return {
    nprocPerNode: int("nproc-per-node", 1, 1),
    nnodes,
    nodeRank,
    masterAddr: values["master-addr"] ?? "127.0.0.1",
    masterPort,
    denoFlags,
    script,
    args: argv.slice(i + 1),
  };
}

/** A port of 127.0.0.1 no one listens on now (the system's pick, released at once). */
function freeLoopbackPort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

/** The signals the launcher sends on to the ranks (torchrun's, less SIGQUIT). */
const FORWARDED = ["SIGINT", "SIGTERM", "SIGHUP"] as const;

/** The environment of local rank `local` (torchrun's variables). */
export function rankEnv(o: RunOptions, local: number): Record<string, string> {
  return {
    RANK: String(o.nodeRank * o.nprocPerNode + local),
    WORLD_SIZE: String(o.nnodes * o.nprocPerNode),
    LOCAL_RANK: String(local),
    LOCAL_WORLD_SIZE: String(o.nprocPerNode),
    GROUP_RANK: String(o.nodeRank),
    MASTER_ADDR: o.masterAddr,
    MASTER_PORT: String(o.masterPort),
  };
}

/** How long the other ranks get after SIGTERM before SIGKILL. */
const KILL_AFTER_MS = 5000;

/**
 * Runs the ranks of `o` on this machine; resolves with the launcher's exit
 * code: 0 when every rank exited with 0, else 1, after stopping the others
 * and printing which rank failed first and how.
 */
export async function launch(o: RunOptions): Promise<number> {
  const children = Array.from(
    { length: o.nprocPerNode },
    (_, local) =>
      new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", ...o.denoFlags, o.script, ...o.args],
        env: rankEnv(o, local),
        stdin: "null",
        stdout: "inherit",
        stderr: "inherit",
      }).spawn(),
  );
  let failed: { rank: number; text: string } | null = null;
  const stopOthers = (signal: Deno.Signal = "SIGTERM") => {
    for (const child of children) {
      try {
        child.kill(signal);
      } catch {
        // Already exited.
      }
    }
    const timer = setTimeout(() => {
      for (const child of children) {
        try {
          child.kill("SIGKILL");
        } catch {
          // Already exited.
        }
      }
    }, KILL_AFTER_MS);
    Deno.unrefTimer(timer);
  };
  // The signal itself goes on to the ranks (a rank may save a checkpoint on SIGTERM).
  const handlers = FORWARDED.map((signal) =>
    [signal, () => {
      failed ??= { rank: -1, text: `the launcher was interrupted (${signal})` };
      stopOthers(signal);
    }] as const
  );
  const posix = Deno.build.os !== "windows";
  if (posix) { for (const [signal, handler] of handlers) Deno.addSignalListener(signal, handler); }
  try {
    await Promise.all(children.map(async (child, local) => {
      const status = await child.status;
      if (status.success || failed) return;
      const rank = o.nodeRank * o.nprocPerNode + local;
      failed = {
        rank,
        text: `rank ${rank} (local rank ${local}, pid ${child.pid}) ${
          status.signal ? `was killed by ${status.signal}` : `exited with code ${status.code}`
        }`,
      };
      stopOthers();
    }));
  } finally {
    if (posix) {
      for (const [signal, handler] of handlers) Deno.removeSignalListener(signal, handler);
    }
  }
  if (!failed) return 0;
  const f = failed as { rank: number; text: string };
  console.error(
    `run: ${f.text}; the other ranks were stopped${
      f.rank >= 0 ? ` (rank ${f.rank} failed first; its output above says why)` : ""
    }`,
  );
  return 1;
}

if (import.meta.main) {
  let options: RunOptions;
  try {
    options = parseRunArgs(Deno.args);
  } catch (error) {
    console.error((error as Error).message);
    Deno.exit(2);
  }
  Deno.exit(await launch(options));
}
