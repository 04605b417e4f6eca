/**
 * The multigrad demo: trains an MLP classifier on three interleaved spirals
 * with `nn.DataParallel` over every device it finds (or those given),
 * printing the devices, the shape trace of the first batch, progress and
 * accuracy, and writing a checkpoint and a loss plot after every epoch.
 *
 *   deno task demo [--devices webgpu:2,cpu:1] [--epochs 30] [--batch-size 128]
 *                  [--lr 0.01] [--out out/demo] [--seed 0] [--resume]
 *
 * Ctrl-C stops after the current step; the last checkpoint stays whole and
 * `--resume` continues from it.
 * @module
 */

import { parseArgs } from "node:util";
import { backendNames, type Device, distributed, requestDevices } from "../mod.ts";
import type { DdpRankOptions, DdpRankResult } from "./demo/ddp.ts";
import { DemoError, runDemo, trainRowCount } from "./demo/train.ts";
import { ProgressBar } from "./demo/progress.ts";

/** The `--help` text. */
export const USAGE = `Usage: deno task demo [options]

Trains an MLP (2-64-64-3, GELU) on three interleaved spirals with nn.DataParallel,
splitting every batch over the devices (or, with --ddp N, with DistributedDataParallel
over N ranks), and evaluates it on a held-out test split.
Writes DIR/checkpoint.safetensors (model, optimizer, epoch) and DIR/loss.svg after
every epoch. Ctrl-C stops after the current step (exit code 130), keeping the last
checkpoint; --resume continues from it.

Options:
  --devices LIST    backend:count list, e.g. webgpu:2,cpu:1 (mixed devices allowed);
                    default: webgpu:2 when a WebGPU adapter is found, else cpu:2
  --ddp N           instead of DataParallel: N ranks (Workers), each on its own
                    device, with DistributedDataParallel; --devices then names
                    the backend of every rank's device (e.g. --devices cpu)
  --epochs N        train until N epochs are done, resumed ones included (default 30)
  --batch-size N    rows per optimizer step, split over the devices (default 128)
  --lr X            Adam learning rate (default 0.01; on --resume, the saved one)
  --out DIR         output folder (default out/demo)
  --seed N          seed of the data set, initial weights and shuffles (default 0)
  --resume          continue from DIR/checkpoint.safetensors
  -h, --help        show this help and exit`;

/** One `backend:count` entry of `--devices`. */
export interface DeviceRequest {
  /** The backend name (`webgpu`, `cpu`). */
  backend: string;
  /** How many devices of it. */
  count: number;
}

/** What the command line asks for. */
export interface DemoArgs {
  /** Print the usage and stop. */
  help: boolean;
  /** The devices asked for, or null for the default. */
  devices: DeviceRequest[] | null;
  /** Epochs to reach. */
  epochs: number;
  /** Rows per step. */
  batchSize: number;
  /** Learning rate, when given. */
  lr: number | undefined;
  /** Output folder. */
  out: string;
  /** Seed. */
  seed: number;
  /** Continue from the checkpoint. */
  resume: boolean;
  /** Ranks of the `--ddp` mode, or null for DataParallel. */
  ddp: number | null;
}

function integer(flag: string, text: string, min: number): number {
  if (!/^-?\d+$/.test(text.trim())) {
    throw new DemoError(`${flag} expects an integer, got "${text}"`);
  }
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < min) {
    throw new DemoError(`${flag} must be an integer >= ${min}, got ${text}`);
  }
  return value;
}

/**
 * Parses `--devices`: a comma-separated list of `backend` or `backend:count`
 * (`webgpu:2,cpu:1`), each backend once, each a registered one.
 */
export function parseDevices(text: string): DeviceRequest[] {
  const known = backendNames();
  const out: DeviceRequest[] = [];
  for (const part of text.split(",").map((p) => p.trim())) {
    const match = /^([a-z][a-z0-9_-]*)(?::(\d+))?$/.exec(part);
    if (!match) {
      throw new DemoError(
        `--devices: "${part}" is not backend or backend:count (e.g. --devices webgpu:2,cpu:1)`,
      );
    }
    const backend = match[1];
    if (!known.includes(backend)) {
      throw new DemoError(
        `--devices: unknown backend "${backend}" (available: ${known.join(", ")})`,
      );
    }
    const count = match[2] === undefined ? 1 : Number(match[2]);
    if (count < 1) throw new DemoError(`--devices: ${backend} needs a count of at least 1`);
    if (out.some((r) => r.backend === backend)) {
      throw new DemoError(`--devices: ${backend} is listed twice; give it once with a count`);
    }
    out.push({ backend, count });
  }
  return out;
}

/** Options that take a value. */
const VALUED = new Set([
  "--devices",
  "--epochs",
  "--batch-size",
  "--lr",
  "--out",
  "--seed",
  "--ddp",
]);

/**
 * `--epochs -3` as `--epochs=-3`: parseArgs takes a value that starts with a
 * dash for an option ("argument is ambiguous"), which hides the real
 * message, that the number must be positive.
 */
function joinNegativeValues(args: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const next = args[i + 1];
    if (VALUED.has(args[i]) && next !== undefined && /^-\.?\d/.test(next)) {
      out.push(`${args[i]}=${next}`);
      i++;
    } else out.push(args[i]);
  }
  return out;
}

/** Parses the command line; user mistakes throw a {@link DemoError} with a one-line message. */
export function parseDemoArgs(args: string[]): DemoArgs {
  let values;
  try {
    ({ values } = parseArgs({
      args: joinNegativeValues(args),
      strict: true,
      allowPositionals: false,
      options: {
        devices: { type: "string" },
        epochs: { type: "string" },
        "batch-size": { type: "string" },
        lr: { type: "string" },
        out: { type: "string" },
        seed: { type: "string" },
        resume: { type: "boolean" },
        ddp: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    }));
  } catch (error) {
    const message = (error instanceof Error ? error.message : String(error)).split("\n")[0];
    throw new DemoError(`${message} (see --help)`);
  }
  let lr: number | undefined;
  if (values.lr !== undefined) {
    lr = Number(values.lr);
    if (values.lr.trim() === "" || !Number.isFinite(lr) || lr <= 0) {
      throw new DemoError(`--lr must be a positive number, got "${values.lr}"`);
    }
  }
  if (values.out !== undefined && values.out.trim() === "") throw new DemoError("--out is empty");
  const ddp = values.ddp === undefined ? null : integer("--ddp", values.ddp, 1);
  const devices = values.devices === undefined ? null : parseDevices(values.devices);
  if (ddp !== null && devices !== null && (devices.length !== 1 || /:/.test(values.devices!))) {
    throw new DemoError(
      `with --ddp, --devices names one backend for every rank's device (e.g. --devices cpu), got "${values.devices}"`,
    );
  }
  return {
    help: values.help ?? false,
    devices,
    ddp,
    epochs: values.epochs === undefined ? 30 : integer("--epochs", values.epochs, 1),
    batchSize: values["batch-size"] === undefined
      ? 128
      : integer("--batch-size", values["batch-size"], 1),
    lr,
    out: values.out ?? "out/demo",
    seed: values.seed === undefined ? 0 : integer("--seed", values.seed, 0),
    resume: values.resume ?? false,
  };
}

/**
 * Refuses, before starting any, more devices than the data can feed: each
 * gets a part of every batch, so there can be no more of them than rows in
 * a batch, or in the training set.
 */
export function checkDeviceCount(options: DemoArgs): void {
  if (options.devices === null) return;
  const wanted = options.devices.reduce((n, r) => n + r.count, 0);
  const rows = trainRowCount();
  const most = Math.min(options.batchSize, rows);
  if (wanted > most) {
    throw new DemoError(
      `--devices asks for ${wanted} devices, but a batch of ${options.batchSize} rows (of ${rows} training rows) can be split over at most ${most}; ask for fewer devices or a larger --batch-size`,
    );
  }
}

/**
 * Starts the devices asked for, in order (`webgpu:2,cpu:1` gives webgpu:0,
 * webgpu:1, cpu:0); without a request, two WebGPU devices when an adapter is
 * there, else two cpu devices.
 */
export async function startDevices(
  requests: DeviceRequest[] | null,
  log: (line: string) => void = console.log,
): Promise<Device[]> {
  if (requests === null) {
    try {
      return await requestDevices({ backend: "webgpu", count: 2 });
    } catch (error) {
      log(`WebGPU is not available (${firstLine(error)}); using 2 cpu devices`);
      return await requestDevices({ backend: "cpu", count: 2 });
    }
  }
  const devices: Device[] = [];
  for (const { backend, count } of requests) {
    try {
      devices.push(...await requestDevices({ backend, count }));
    } catch (error) {
      throw new DemoError(`cannot start ${backend}:${count}: ${firstLine(error)}`);
    }
  }
  return devices;
}

function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split("\n")[0];
}

/** Runs the demo with command-line `args`; returns the exit code. */
export async function main(args: string[]): Promise<number> {
  let stopRequested = false;
  let progress: ProgressBar | null = null;
  const onInterrupt = () => {
    if (stopRequested) {
      progress?.clear();
      console.error("Second Ctrl-C: quitting now (the last checkpoint is complete).");
      Deno.exit(130);
    }
    stopRequested = true;
    progress?.clear();
    console.error("Ctrl-C: stopping after the current step (press again to quit at once)");
  };
  try {
    const options = parseDemoArgs(args);
    if (options.help) {
      console.log(USAGE);
      return 0;
    }
    if (options.ddp !== null) return await mainDdp(options);
    checkDeviceCount(options);
    const devices = await startDevices(options.devices);
    console.log(`Devices (${devices.length}):`);
    for (const d of devices) console.log(`  ${d.toString()}: ${d.info}`);
    if (Deno.stdout.isTerminal()) {
      const encoder = new TextEncoder();
      let columns = 100;
      try {
        columns = Deno.consoleSize().columns;
      } catch {
        // not a console after all: keep the default width
      }
      progress = new ProgressBar((text) => Deno.stdout.writeSync(encoder.encode(text)), columns);
    }
    Deno.addSignalListener("SIGINT", onInterrupt);
    try {
      const result = await runDemo({
        devices,
        ...runOptions(options),
        progress,
        shouldStop: () => stopRequested,
      });
      if (result.epoch > 0) {
        console.log(`Checkpoint: ${result.checkpointPath} (epoch ${result.epoch})`);
        console.log(`Plot: ${result.plotPath}`);
      }
      if (result.interrupted && result.epoch > 0) {
        const outFlag = options.out === "out/demo" ? "" : ` --out ${options.out}`;
        console.log(
          `Continue with: deno task demo --resume --epochs ${options.epochs}${outFlag}`,
        );
      }
      return result.interrupted ? 130 : 0;
    } finally {
      Deno.removeSignalListener("SIGINT", onInterrupt);
    }
  } catch (error) {
    progress?.clear();
    if (error instanceof DemoError) {
      console.error(`error: ${firstLine(error)}`);
      return 1;
    }
    throw error;
  }
}

/** The flags that shape a run, as {@link runDemo} takes them. */
function runOptions(options: DemoArgs) {
  const { epochs, batchSize, lr, out, seed, resume } = options;
  return { epochs, batchSize, lr, out, seed, resume };
}

/**
 * The `--ddp N` mode: N Workers, each training on its own device with
 * DistributedDataParallel; rank 0 reports. Ctrl-C ends the run at once (the
 * ranks cannot agree on a step to stop at without a collective per step);
 * the last checkpoint stays whole, since it is written atomically.
 */
async function mainDdp(options: DemoArgs): Promise<number> {
  const ranks = options.ddp!;
  const backend = options.devices?.[0].backend;
  console.log(
    `DistributedDataParallel over ${ranks} rank(s) (Workers), each on its own ${
      backend ?? "webgpu (else cpu)"
    } device`,
  );
  const onInterrupt = () => {
    console.error("Ctrl-C: stopping now (the last checkpoint is complete).");
    Deno.exit(130);
  };
  Deno.addSignalListener("SIGINT", onInterrupt);
  try {
    const rankOptions: DdpRankOptions = { backend, ...runOptions(options) };
    const results = await distributed.spawn<DdpRankResult>(
      new URL("./demo/ddp.ts", import.meta.url),
      { nprocs: ranks, args: [rankOptions] },
    );
    console.log(`Ranks' devices: ${results.map((r, i) => `${i}: ${r.device}`).join(", ")}`);
    console.log(`Checkpoint: ${results[0].checkpointPath} (epoch ${results[0].epoch})`);
    console.log(`Plot: ${results[0].plotPath}`);
    return 0;
  } catch (error) {
    // A rank's DemoError (bad options, a checkpoint that does not fit) is a user mistake.
    const cause = (error as Error).cause;
    if (
      cause instanceof Error && cause.name === "DemoError" ||
      cause instanceof Error && cause.name === "CheckpointError"
    ) {
      console.error(`error: ${firstLine(cause)}`);
      return 1;
    }
    throw error;
  } finally {
    Deno.removeSignalListener("SIGINT", onInterrupt);
  }
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
