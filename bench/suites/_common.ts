/**
 * What every benchmark suite shares: the result record, the timing loop
 * (warm-up, then the median of timed runs, each ending with a read, within a
 * time box), device start-up and the streaming table printer.
 * @module
 */

import type { Device } from "../../mod.ts";

/** One measured number, as written to `--json`. */
export interface BenchResult {
  /** The suite that measured it (`"matmul"`, `"mlp"`, ...). */
  readonly suite: string;
  /** The backend (`"cpu"`, `"webgpu"`). */
  readonly backend: string;
  /** The case within the suite (`"1024"`, `"step"`, `"2 devices"`). */
  readonly case: string;
  /** The headline number. */
  readonly value: number;
  /** Its unit (`"GFLOP/s"`, `"GB/s"`, `"ms/step"`, `"x"`, `"bytes"`). */
  readonly unit: string;
  /** Timed runs behind the median (absent for counts). */
  readonly runs?: number;
  /** Median milliseconds of one timed run (absent for counts). */
  readonly medianMs?: number;
  /** Further numbers of this case (spread, per-run counts, sizes). */
  readonly extra?: Readonly<Record<string, number | string | boolean>>;
  /** What was run where it differs from the suite's headline setup. */
  readonly note?: string;
}

/** Everything a suite is given. */
export interface SuiteContext {
  /** Backends that started, in the order they are measured. */
  readonly backends: readonly string[];
  /** Smaller sizes and fewer iterations (the CI smoke test). */
  readonly quick: boolean;
  /** Seconds of timed runs after which a case stops being measured. */
  readonly budgetS: number;
  /** Prints one line of a table or a note (stdout). */
  readonly log: (line: string) => void;
  /** Starts (or returns) `count` devices of `backend`. */
  readonly devices: (backend: string, count: number) => Promise<Device[]>;
}

/** A benchmark suite: a name and a function that measures and prints. */
export interface Suite {
  /** Matched by `--filter` (substring). */
  readonly name: string;
  /** One line for `--help`. */
  readonly description: string;
  /** Measures every case on every backend; prints its table as it goes. */
  run(ctx: SuiteContext): Promise<BenchResult[]>;
}

/** The median of `xs` (NaN when empty). */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/** Options of {@link measure}. */
export interface MeasureOptions {
  /** Untimed runs first (compiles pipelines, warms the JIT and the pools). Default 1. */
  readonly warmup?: number;
  /** Timed runs wanted before the time box may stop the case. Default 3. */
  readonly minRuns?: number;
  /** Timed runs at most. Default 50. */
  readonly maxRuns?: number;
  /** Seconds of timed runs after which the case stops (at 2x it stops even short of minRuns). */
  readonly budgetS: number;
}

/** What {@link measure} found. */
export interface Timing {
  /** Median milliseconds of one run. */
  readonly medianMs: number;
  /** Fastest run, milliseconds. */
  readonly minMs: number;
  /** Slowest run, milliseconds. */
  readonly maxMs: number;
  /** Timed runs. */
  readonly runs: number;
  /** Every timed run, milliseconds, in order. */
  readonly samplesMs: readonly number[];
}

/**
 * Times `run` (which must end by awaiting a read, so that the device really
 * finished): `warmup` untimed runs, then timed runs until `maxRuns`, or until
 * `budgetS` seconds of timed runs once `minRuns` were done (or 2x `budgetS`
 * regardless). Reports the median.
 */
export async function measure(
  run: () => Promise<void>,
  options: MeasureOptions,
): Promise<Timing> {
  const warmup = options.warmup ?? 1;
  const minRuns = options.minRuns ?? 3;
  const maxRuns = options.maxRuns ?? 50;
  const budgetMs = options.budgetS * 1000;
  for (let i = 0; i < warmup; i++) await run();
  const samples: number[] = [];
  let spent = 0;
  while (samples.length < maxRuns) {
    const t0 = performance.now();
    await run();
    const ms = performance.now() - t0;
    samples.push(ms);
    spent += ms;
    if (spent >= budgetMs && samples.length >= minRuns) break;
    if (spent >= 2 * budgetMs) break;
  }
  return {
    medianMs: median(samples),
    minMs: Math.min(...samples),
    maxMs: Math.max(...samples),
    runs: samples.length,
    samplesMs: samples,
  };
}

/**
 * Times several cases round-robin (a run of each per round, the starting case
 * rotating), so that the load of other processes on a shared machine hits
 * every case alike and their ratios stay meaningful. `budgetS` is per case.
 * A run that resolves with a number has timed itself (a peer in another
 * process): that number of milliseconds is its sample.
 */
export async function measureInterleaved(
  runs: readonly (() => Promise<void | number>)[],
  options: MeasureOptions,
): Promise<Timing[]> {
  const warmup = options.warmup ?? 1;
  const minRuns = options.minRuns ?? 3;
  const maxRuns = options.maxRuns ?? 50;
  const budgetMs = options.budgetS * 1000 * runs.length;
  for (let i = 0; i < warmup; i++) {
    for (const run of runs) await run();
  }
  const samples: number[][] = runs.map(() => []);
  let spent = 0;
  for (let round = 0; round < maxRuns; round++) {
    for (let j = 0; j < runs.length; j++) {
      const c = (round + j) % runs.length;
      const t0 = performance.now();
      const own = await runs[c]();
      const ms = typeof own === "number" ? own : performance.now() - t0;
      samples[c].push(ms);
      spent += ms;
    }
    if (spent >= budgetMs && round + 1 >= minRuns) break;
    if (spent >= 2 * budgetMs) break;
  }
  return samples.map((xs) => ({
    medianMs: median(xs),
    minMs: Math.min(...xs),
    maxMs: Math.max(...xs),
    runs: xs.length,
    samplesMs: xs,
  }));
}

/**
 * How many operations to queue before one read so that a timed run lasts
 * about `targetMs`, from the duration of one run with a single operation.
 */
export function repsFor(singleMs: number, targetMs: number, max = 64): number {
  if (!(singleMs > 0)) return max;
  return Math.max(1, Math.min(max, Math.round(targetMs / singleMs)));
}

/** A column of a {@link Table}. */
export interface Column {
  /** Header text. */
  readonly title: string;
  /** Width in characters (the header's length at least). */
  readonly width: number;
  /** Right-aligned (numbers) unless false. */
  readonly right?: boolean;
}

/** A table printed one row at a time, so long suites show progress. */
export class Table {
  readonly #columns: readonly Column[];
  readonly #log: (line: string) => void;

  /** Prints the title and the header. */
  constructor(title: string, columns: readonly Column[], log: (line: string) => void) {
    this.#columns = columns.map((c) => ({ ...c, width: Math.max(c.width, c.title.length) }));
    this.#log = log;
    log("");
    log(title);
    log(this.#line(this.#columns.map((c) => c.title)));
    log(this.#columns.map((c) => "-".repeat(c.width)).join("-+-"));
  }

  /** Prints one row (cells in column order). */
  row(cells: readonly (string | number)[]): void {
    this.#log(this.#line(cells.map((c) => (typeof c === "number" ? fmt(c) : c))));
  }

  /** Prints a note under the table. */
  note(text: string): void {
    this.#log(`  ${text}`);
  }

  #line(cells: readonly string[]): string {
    return this.#columns
      .map((c, i) => {
        const text = cells[i] ?? "";
        return c.right === false ? text.padEnd(c.width) : text.padStart(c.width);
      })
      .join(" | ")
      .trimEnd();
  }
}

/** A number with 3 significant digits (integers of 1000 and more as they are). */
export function fmt(x: number): string {
  if (!Number.isFinite(x) || Number.isInteger(x)) return String(x);
  const a = Math.abs(x);
  if (a >= 1000) return Math.round(x).toString();
  if (a >= 100) return x.toFixed(0);
  if (a >= 10) return x.toFixed(1);
  if (a >= 1) return x.toFixed(2);
  if (a === 0) return "0";
  return x.toPrecision(3);
}

/** `12.3 MiB` for a byte count. */
export function formatBytes(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB"];
  let v = bytes;
  let u = 0;
  while (Math.abs(v) >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${fmt(v)} ${units[u]}`;
}

/** Lets the event loop run (pending frees, GC finalizers) between cases. */
export function settle(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}
