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
 * exits with 1.
 *
 * `--max-restarts N` restarts the group as torchrun's (PyTorch 1.13's
 * LocalElasticAgent): when a rank fails, every rank of the group is stopped
 * and the whole group started again, up to N times; each rank's
 * `TORCHELASTIC_RESTART_COUNT` says which restart it is (0 first), so a
 * script that loads its checkpoint when one exists resumes.
 * `TORCHELASTIC_MAX_RESTARTS`, `TORCHELASTIC_RUN_ID` (`--rdzv-id`, "none"
 * unless given; `--standalone` makes a random one, as torchrun's),
 * `GROUP_WORLD_SIZE`, `ROLE_RANK`, `ROLE_NAME` and `ROLE_WORLD_SIZE` are set
 * as torchrun's. A restarted group meets at the same `--master-port` (rank
 * 0's store, gone with the old group, frees it); under `--standalone` at a
 * new free port, as torchrun's rendezvous picks one each round. When the
 * restarts are spent, the launcher exits with 1 naming the rank that failed
 * first, its exit code and the restarts done. `--monitor-interval SECONDS`
 * is how often the launcher checks the ranks (a failure is acted on at the
 * next check). A rank killed by a signal is reported with torchrun's exit
 * code (minus the signal's number, -9 for SIGKILL). A local script that does
 * not exist is refused before any rank starts (torchrun starts the group and
 * spends every restart on the same error).
 *
 * Differences from torchrun: `--monitor-interval` defaults to 0.1 s, not
 * 5 s (the check only reads exit statuses the launcher already has, and
 * 5 s would add up to 5 s to every run) and is at most 2147483 s (a
 * timer's limit); `TORCHELASTIC_USE_AGENT_STORE` is
 * always "False" (rank 0 hosts the store, as under torchrun's c10d
 * rendezvous; the launcher hosts none); on one machine only (`--nnodes 1`)
 * for restarts: with several machines a failed rank's node would restart
 * alone, so `--max-restarts` above 0 is refused there; no rendezvous
 * backends other than the master's store; the `PET_*` variables are not read.
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
  /** Restarts of the whole group after a rank fails (torchrun's `--max-restarts`; 0 when absent). */
  readonly maxRestarts?: number;
  /** Seconds between the launcher's checks of the ranks (`--monitor-interval`; 0.1 when absent). */
  readonly monitorInterval?: number;
  /** The run's id, each rank's `TORCHELASTIC_RUN_ID` (torchrun's `--rdzv-id`; "none" when absent). */
  readonly runId?: string;
  /** Whether `--standalone` chose the master's port: a restarted group then gets a new one. */
  readonly standalone?: boolean;
}

const USAGE =
  "usage: deno run -A jsr:@multigrad/core/run [--standalone] [--nproc-per-node N] [--nnodes N] [--node-rank R] [--master-addr HOST] [--master-port PORT] [--max-restarts N] [--monitor-interval SECONDS] [--rdzv-id ID] [--deno-flag FLAG]... SCRIPT [ARGS...]";

/** The longest `--monitor-interval`, in seconds: a timer holds at most 2^31 - 1 ms. */
const MAX_INTERVAL_S = Math.floor((2 ** 31 - 1) / 1000);

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
      "max-restarts",
      "monitor-interval",
      "rdzv-id",
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
  const maxRestarts = int("max-restarts", 0, 0);
  if (maxRestarts > 0 && nnodes > 1) {
    throw new Error(
      `run: --max-restarts ${maxRestarts} needs --nnodes 1 (got --nnodes ${nnodes}): multigrad's launcher restarts one machine's group only`,
    );
  }
  const intervalText = values["monitor-interval"];
  const monitorInterval = intervalText === undefined ? 0.1 : Number(intervalText);
  if (intervalText !== undefined && (!/^\d+(\.\d*)?$|^\.\d+$/.test(intervalText))) {
    throw new Error(
      `run: --monitor-interval must be a number of seconds >= 0, got "${intervalText}"`,
    );
  }
  // A longer timer overflows to 1 ms in Deno: the launcher would check 1000 times a second.
  if (monitorInterval > MAX_INTERVAL_S) {
    throw new Error(
      `run: --monitor-interval must be at most ${MAX_INTERVAL_S} seconds (a timer's limit), got "${intervalText}"`,
    );
  }
  return {
    nprocPerNode: int("nproc-per-node", 1, 1),
    nnodes,
    nodeRank,
    masterAddr: values["master-addr"] ?? "127.0.0.1",
    masterPort,
    denoFlags,
    script,
    args: argv.slice(i + 1),
    maxRestarts,
    monitorInterval,
    runId: standalone ? crypto.randomUUID() : values["rdzv-id"] ?? "none",
    standalone,
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

/** torchrun's variables beyond {@link rankEnv}'s, for restart `restart` of the group. */
function elasticEnv(o: RunOptions, local: number, restart: number): Record<string, string> {
  return {
    GROUP_WORLD_SIZE: String(o.nnodes),
    ROLE_RANK: String(o.nodeRank * o.nprocPerNode + local),
    ROLE_NAME: "default",
    ROLE_WORLD_SIZE: String(o.nnodes * o.nprocPerNode),
    TORCHELASTIC_RESTART_COUNT: String(restart),
    TORCHELASTIC_MAX_RESTARTS: String(o.maxRestarts ?? 0),
    TORCHELASTIC_RUN_ID: o.runId ?? "none",
    TORCHELASTIC_USE_AGENT_STORE: "False",
  };
}

/** How one group of ranks ended. */
type Ending =
  | { readonly kind: "success" }
  | { readonly kind: "failed"; readonly rank: number; readonly text: string }
  | { readonly kind: "interrupted"; readonly signal: Deno.Signal };

/**
 * Runs the ranks of `o` on this machine, restarting the group up to
 * `o.maxRestarts` times when a rank fails; resolves with the launcher's exit
 * code: 0 when every rank of a group exited with 0, else 1, after stopping
 * the others and printing which rank failed first and how. `o` is
 * checked first, as the command line's flags are: a missing, unknown or
 * ill-typed option, or a script that does not exist, throws at the call,
 * naming the option and its value.
 */
export async function launch(o: RunOptions): Promise<number> {
  checkRunOptions(o);
  assertScriptExists(o.script);
  const maxRestarts = o.maxRestarts ?? 0;
  const intervalMs = (o.monitorInterval ?? 0.1) * 1000;
  let interrupted: Deno.Signal | null = null;
  let children: Deno.ChildProcess[] = [];
  let wake = () => {};
  const stopAll = (signal: Deno.Signal) => {
    for (const child of children) {
      try {
        child.kill(signal);
      } catch {
        // Already exited.
      }
    }
    const group = children;
    const timer = setTimeout(() => {
      for (const child of group) {
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
      interrupted ??= signal;
      stopAll(signal);
      wake();
    }] as const
  );
  const posix = Deno.build.os !== "windows";
  if (posix) { for (const [signal, handler] of handlers) Deno.addSignalListener(signal, handler); }
  let port = o.masterPort;
  let ending: Ending = { kind: "success" };
  let restart = 0;
  try {
    for (;; restart++) {
      // No await between this check and the spawn: a signal cannot slip between them.
      if (interrupted) {
        ending = { kind: "interrupted", signal: interrupted };
        break;
      }
      const env = { ...o, masterPort: port };
      children = Array.from(
        { length: o.nprocPerNode },
        (_, local) =>
          new Deno.Command(Deno.execPath(), {
            args: ["run", "-A", ...o.denoFlags, o.script, ...o.args],
            env: { ...rankEnv(env, local), ...elasticEnv(o, local, restart) },
            stdin: "null",
            stdout: "inherit",
            stderr: "inherit",
          }).spawn(),
      );
      ending = await monitor(o, children, intervalMs, () => interrupted, (f) => (wake = f));
      if (ending.kind === "failed") stopAll("SIGTERM");
      // The next group may not start while one of this group's ranks still holds the port.
      await Promise.all(children.map((child) => child.status));
      if (ending.kind !== "failed" || interrupted) break;
      if (restart >= maxRestarts) break;
      console.error(
        `run: ${ending.text}; restarting the group (restart ${restart + 1} of ${maxRestarts})`,
      );
      if (o.standalone) port = freeLoopbackPort();
    }
  } finally {
    if (posix) {
      for (const [signal, handler] of handlers) Deno.removeSignalListener(signal, handler);
    }
  }
  if (interrupted) ending = { kind: "interrupted", signal: interrupted };
  if (ending.kind === "success") return 0;
  if (ending.kind === "interrupted") {
    console.error(
      `run: the launcher was interrupted (${ending.signal}); the ranks were sent ${ending.signal}`,
    );
    return 1;
  }
  console.error(
    `run: ${ending.text}; the other ranks were stopped (rank ${ending.rank} failed first; its output above says why); no restarts left (${restart} of --max-restarts ${maxRestarts} done)`,
  );
  return 1;
}

/**
 * Checks `children` every `intervalMs` (torchrun's monitor interval) until
 * all exited with 0, one failed (the first to exit so is named), or the
 * launcher is interrupted (`setWake` lends a function that ends the wait).
 */
async function monitor(
  o: RunOptions,
  children: readonly Deno.ChildProcess[],
  intervalMs: number,
  interrupted: () => Deno.Signal | null,
  setWake: (wake: () => void) => void,
): Promise<Ending> {
  const exits: (Deno.CommandStatus | undefined)[] = children.map(() => undefined);
  let firstFailure = -1;
  for (const [local, child] of children.entries()) {
    child.status.then((status) => {
      exits[local] = status;
      if (!status.success && firstFailure < 0) firstFailure = local;
    });
  }
  for (;;) {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, intervalMs);
      setWake(() => {
        clearTimeout(timer);
        resolve();
      });
    });
    const signal = interrupted();
    if (signal) return { kind: "interrupted", signal };
    if (firstFailure >= 0) {
      const local = firstFailure;
      const status = exits[local] as Deno.CommandStatus;
      const rank = o.nodeRank * o.nprocPerNode + local;
      return {
        kind: "failed",
        rank,
        text: `rank ${rank} (local rank ${local}, pid ${children[local].pid}) ${
          status.signal
            // Deno's code is 128 + the signal's number; torchrun reports minus the number.
            ? `was killed by ${status.signal} (exit code ${
              128 - status.code
            }, as torchrun reports it)`
            : `exited with code ${status.code}`
        }`,
      };
    }
    if (exits.every((status) => status?.success)) return { kind: "success" };
  }
}

/** How a bad option's value is shown in an error. */
function shown(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  if (value === null) return "null";
  return Array.isArray(value) ? "an array" : typeof value;
}

/** The options {@link launch} takes, and whether each is required. */
const LAUNCH_OPTIONS: Record<keyof RunOptions, boolean> = {
  nprocPerNode: true,
  nnodes: true,
  nodeRank: true,
  masterAddr: true,
  masterPort: true,
  denoFlags: true,
  script: true,
  args: true,
  maxRestarts: false,
  monitorInterval: false,
  runId: false,
  standalone: false,
};

/**
 * {@link launch}'s own check of its options (the command line's is
 * {@link parseRunArgs}), so that a caller's mistake is an error naming the
 * option and value, not a failed rank.
 */
function checkRunOptions(o: RunOptions): void {
  if (o === null || typeof o !== "object" || Array.isArray(o)) {
    throw new TypeError(`launch: the options must be an object, got ${shown(o)}`);
  }
  const record = o as unknown as Record<string, unknown>;
  const names = Object.keys(LAUNCH_OPTIONS);
  for (const key of Object.keys(record)) {
    if (!names.includes(key)) {
      throw new TypeError(`launch: unknown option ${key} (the options: ${names.join(", ")})`);
    }
  }
  for (const [key, required] of Object.entries(LAUNCH_OPTIONS)) {
    if (required && record[key] === undefined) {
      throw new TypeError(`launch: the option ${key} is required`);
    }
  }
  const int = (key: keyof RunOptions, min: number, max = Number.MAX_SAFE_INTEGER) => {
    const value = record[key];
    if (value === undefined) return;
    if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
      const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `from ${min} to ${max}`;
      throw new RangeError(`launch: ${key} must be an integer ${range}, got ${shown(value)}`);
    }
  };
  const strings = (key: keyof RunOptions) => {
    const value = record[key];
    if (!Array.isArray(value) || value.some((v) => typeof v !== "string")) {
      throw new TypeError(`launch: ${key} must be an array of strings, got ${shown(value)}`);
    }
  };
  const text = (key: keyof RunOptions) => {
    const value = record[key];
    if (value !== undefined && (typeof value !== "string" || value === "")) {
      throw new TypeError(`launch: ${key} must be a non-empty string, got ${shown(value)}`);
    }
  };
  int("nprocPerNode", 1);
  int("nnodes", 1);
  int("nodeRank", 0, o.nnodes - 1);
  int("masterPort", 1, 65535);
  int("maxRestarts", 0);
  text("masterAddr");
  text("script");
  if (record.runId !== undefined && typeof record.runId !== "string") {
    throw new TypeError(`launch: runId must be a string, got ${shown(record.runId)}`);
  }
  strings("denoFlags");
  strings("args");
  const interval = record.monitorInterval;
  if (
    interval !== undefined &&
    (typeof interval !== "number" || !(interval >= 0) || interval > MAX_INTERVAL_S)
  ) {
    throw new RangeError(
      `launch: monitorInterval must be a number of seconds from 0 to ${MAX_INTERVAL_S}, got ${
        shown(interval)
      }`,
    );
  }
  if (record.standalone !== undefined && typeof record.standalone !== "boolean") {
    throw new TypeError(`launch: standalone must be a boolean, got ${shown(record.standalone)}`);
  }
  if ((o.maxRestarts ?? 0) > 0 && o.nnodes > 1) {
    throw new RangeError(
      `launch: maxRestarts ${o.maxRestarts} needs nnodes 1 (got nnodes ${o.nnodes}): multigrad's launcher restarts one machine's group only`,
    );
  }
}

/**
 * Refuses a local script that is not there before any rank starts (torchrun
 * starts the group anyway): every rank would fail to load it, and each of
 * `--max-restarts` would be spent on the same error.
 */
function assertScriptExists(script: string): void {
  // A URL (jsr:, npm:, https:, file:) is Deno's to resolve; "C:" is a Windows drive, a path.
  if (/^[a-z][a-z0-9+.-]+:/i.test(script)) return;
  try {
    Deno.statSync(script);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) return;
    throw new Error(`run: the script ${script} does not exist (looked from ${Deno.cwd()})`);
  }
}

if (import.meta.main) {
  let options: RunOptions;
  try {
    options = parseRunArgs(Deno.args);
    assertScriptExists(options.script);
  } catch (error) {
    console.error((error as Error).message);
    Deno.exit(2);
  }
  Deno.exit(await launch(options));
}
