/**
 * Shared types and helpers for the peer benchmarks (TensorFlow.js, jax-js).
 *
 * Everything here is framework-agnostic: result rows, the timing loop, the
 * deterministic input data (so that every peer multiplies / trains on exactly
 * the same numbers) and small error / timeout utilities.
 *
 * @module
 */

import { seededRandom } from "../../src/util.ts";

export { median } from "../suites/_common.ts";

/** One measured (or failed) benchmark case of one peer library. */
export interface PeerResult {
  /** Peer library, e.g. `"tfjs"` or `"jax-js"`. */
  peer: string;
  /** Backend of that library, e.g. `"cpu"`, `"wasm"`, `"webgpu"`. */
  backend: string;
  /** Case name, e.g. `"matmul-1024"` or `"mlp-784-512-512-10-b256"`. */
  suite: string;
  /** Measured value (median); `NaN` when the case could not run. */
  value: number;
  /** Unit of {@link PeerResult.value}: `"GFLOP/s"` or `"ms/step"`. */
  unit: string;
  /** Failure reason, or measurement details (iterations, spread). */
  note?: string;
}

/** Benchmark suites the peers implement. */
export type PeerSuite = "matmul" | "mlp" | "conv";

/** Options of {@link runPeers} (see `mod.ts`) and of every peer runner. */
export interface PeerOptions {
  /** Suites to run. */
  suites: readonly PeerSuite[];
  /** Square matmul sizes N (default {@link DEFAULT_SIZES}). */
  sizes?: readonly number[];
  /** Maximum number of timed MLP steps (default {@link DEFAULT_STEPS}). */
  steps?: number;
  /** The conv case's shape (default {@link CONV_SPEC}). */
  conv?: ConvSpec;
  /** Progress sink (default: silent). */
  log?: (line: string) => void;
}

/** Default matmul sizes. */
export const DEFAULT_SIZES: readonly number[] = [256, 512, 1024];
/** Default maximum number of timed MLP steps. */
export const DEFAULT_STEPS = 10;

/** The MLP benchmark shape: 784-512-512-10, ReLU, batch 256, SGD lr 0.01. */
export const MLP_SPEC = {
  dims: [784, 512, 512, 10] as const,
  batch: 256,
  lr: 0.01,
} as const;

/** Suite label of the MLP case. */
export const MLP_SUITE = "mlp-784-512-512-10-b256";

/**
 * The conv case: a k x k convolution (stride 1, "same" padding) of an
 * [n, cin, size, size] input to `cout` channels, forward plus the input and
 * weight gradients: 3 · 2·n·cout·size²·cin·k² flops.
 */
export interface ConvSpec {
  /** Batch. */
  readonly n: number;
  /** Input channels. */
  readonly cin: number;
  /** Output channels. */
  readonly cout: number;
  /** Height and width. */
  readonly size: number;
  /** Kernel size. */
  readonly k: number;
}

/** The conv case: [32, 64, 28, 28], 3x3, 64 channels out. */
export const CONV_SPEC: ConvSpec = { n: 32, cin: 64, cout: 64, size: 28, k: 3 };

/** `"32x64x28x28 k3 ->64"`, the case label multigrad's conv suite uses too. */
export function convCase(s: ConvSpec): string {
  return `${s.n}x${s.cin}x${s.size}x${s.size} k${s.k} ->${s.cout}`;
}

/** Suite label of a conv case. */
export function convSuite(s: ConvSpec): string {
  return `conv-${convCase(s)}`;
}

/** Flops of one forward + backward conv step. */
export function convStepFlops(s: ConvSpec): number {
  return 3 * 2 * s.n * s.cout * s.size * s.size * s.cin * s.k * s.k;
}

/** Suite label of a matmul case of size `n`. */
export function matmulSuite(n: number): string {
  return `matmul-${n}`;
}

/** Time limits of one measured case. */
export interface MeasureOptions {
  /** Untimed warm-up calls (cut short once they exceed half the budget). */
  warmup: number;
  /** Timed calls always made. */
  minIters: number;
  /** Timed calls never exceeded. */
  maxIters: number;
  /** Stop timing once this many ms have elapsed (and `minIters` are done). */
  budgetMs: number;
}

/**
 * Runs `fn` for warm-up, then times it repeatedly within the time box.
 * `fn` must include a read back so that the work is finished when it returns.
 *
 * @returns the wall-clock duration of every timed call, in ms
 */
export async function measure(
  fn: () => Promise<void>,
  opts: MeasureOptions,
): Promise<number[]> {
  const warmStart = performance.now();
  for (let i = 0; i < opts.warmup; i++) {
    await fn();
    if (performance.now() - warmStart > opts.budgetMs / 2) break;
  }
  const times: number[] = [];
  const start = performance.now();
  while (times.length < opts.maxIters) {
    const t0 = performance.now();
    await fn();
    times.push(performance.now() - t0);
    if (
      times.length >= opts.minIters && performance.now() - start > opts.budgetMs
    ) break;
  }
  return times;
}

/** GFLOP/s of an N×N×N matmul (2·N³ flops) that took `ms` milliseconds. */
export function matmulGflops(n: number, ms: number): number {
  return (2 * n * n * n) / (ms * 1e-3) / 1e9;
}

/** Short description of a list of timings, for {@link PeerResult.note}. */
export function timingNote(timesMs: readonly number[]): string {
  const min = Math.min(...timesMs);
  const max = Math.max(...timesMs);
  return `median of ${timesMs.length}; min ${min.toFixed(1)} ms, max ${max.toFixed(1)} ms`;
}

/** `count` uniform floats in [lo, hi) from `rng`. */
export function uniformArray(
  rng: () => number,
  count: number,
  lo: number,
  hi: number,
): Float32Array<ArrayBuffer> {
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) out[i] = lo + (hi - lo) * rng();
  return out;
}

/** The two N×N row-major operands of the matmul case (values in [-1, 1)). */
export function matmulInputs(
  n: number,
): { a: Float32Array<ArrayBuffer>; b: Float32Array<ArrayBuffer> } {
  const rng = seededRandom(1234 + n);
  return {
    a: uniformArray(rng, n * n, -1, 1),
    b: uniformArray(rng, n * n, -1, 1),
  };
}

/**
 * Spot-checks a peer's matmul result against host dot products (a few rows
 * and columns) and throws when it is wrong, so that a broken kernel cannot
 * report a speed.
 */
export function checkMatmul(
  a: Float32Array,
  b: Float32Array,
  n: number,
  out: ArrayLike<number>,
): void {
  if (out.length !== n * n) {
    throw new Error(`matmul result has ${out.length} elements, not ${n * n}`);
  }
  const picks = [0, 1, n >> 1, n - 1];
  for (const i of picks) {
    for (const j of picks) {
      let ref = 0;
      for (let k = 0; k < n; k++) ref += a[i * n + k] * b[k * n + j];
      const got = out[i * n + j];
      if (!(Math.abs(got - ref) <= 1e-3 * Math.sqrt(n) + 1e-4 * Math.abs(ref))) {
        throw new Error(`wrong matmul result at [${i}, ${j}]: ${got} vs ${ref}`);
      }
    }
  }
}

/** Host-side initial parameters and one batch for the MLP case. */
export interface MlpData {
  /** Weights `[in, out]` row-major, then biases `[out]`, per layer. */
  layers: {
    w: Float32Array<ArrayBuffer>;
    b: Float32Array<ArrayBuffer>;
    fanIn: number;
    fanOut: number;
  }[];
  /** Inputs `[batch, 784]` in [0, 1). */
  x: Float32Array<ArrayBuffer>;
  /** One-hot labels `[batch, 10]`. */
  y: Float32Array<ArrayBuffer>;
}

/**
 * Deterministic MLP parameters (uniform ±1/√fan_in, like PyTorch's Linear)
 * and a fixed batch; identical for every peer.
 */
export function mlpData(): MlpData {
  const rng = seededRandom(42);
  const { dims, batch } = MLP_SPEC;
  const layers: MlpData["layers"] = [];
  for (let i = 0; i + 1 < dims.length; i++) {
    const fanIn = dims[i];
    const fanOut = dims[i + 1];
    const bound = 1 / Math.sqrt(fanIn);
    layers.push({
      w: uniformArray(rng, fanIn * fanOut, -bound, bound),
      b: uniformArray(rng, fanOut, -bound, bound),
      fanIn,
      fanOut,
    });
  }
  const x = uniformArray(rng, batch * dims[0], 0, 1);
  const classes = dims[dims.length - 1];
  const y = new Float32Array(batch * classes);
  for (let i = 0; i < batch; i++) y[i * classes + (i % classes)] = 1;
  return { layers, x, y };
}

/**
 * Runs a clean-up callback, ignoring its errors (after a failed case, arrays
 * may already be consumed; the original error is the one worth reporting).
 */
export function quietly(fn: () => void): void {
  try {
    fn();
  } catch {
    // ignored on purpose
  }
}

/** Readable message of anything thrown. */
export function errorMessage(e: unknown): string {
  if (e instanceof Error) return `${e.name}: ${e.message}`.slice(0, 300);
  return String(e).slice(0, 300);
}

/**
 * Rejects when `p` has not settled within `ms` milliseconds. The underlying
 * work is not cancelled (it cannot be), but the run can go on.
 */
export function withTimeout<T>(
  p: Promise<T>,
  ms: number,
  what: string,
): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${what} timed out after ${ms / 1000} s`)),
      ms,
    );
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** Rows with `value: NaN` for every requested case of a failed backend. */
export function failedRows(
  peer: string,
  backend: string,
  opts: PeerOptions,
  note: string,
): PeerResult[] {
  const rows: PeerResult[] = [];
  for (const suite of opts.suites) {
    if (suite === "matmul") {
      for (const n of opts.sizes ?? DEFAULT_SIZES) {
        rows.push({
          peer,
          backend,
          suite: matmulSuite(n),
          value: NaN,
          unit: "GFLOP/s",
          note,
        });
      }
    } else if (suite === "conv") {
      rows.push({
        peer,
        backend,
        suite: convSuite(opts.conv ?? CONV_SPEC),
        value: NaN,
        unit: "GFLOP/s",
        note,
      });
    } else {
      rows.push({
        peer,
        backend,
        suite: MLP_SUITE,
        value: NaN,
        unit: "ms/step",
        note,
      });
    }
  }
  return rows;
}

/** Time box of one matmul case (the machine is slow: keep it short). */
export const MATMUL_MEASURE: MeasureOptions = {
  warmup: 2,
  minIters: 3,
  maxIters: 20,
  budgetMs: 3000,
};

/** Time box of the MLP case; `maxIters` is replaced by `steps`. */
export const MLP_MEASURE: MeasureOptions = {
  warmup: 2,
  minIters: 3,
  maxIters: DEFAULT_STEPS,
  budgetMs: 5000,
};

/** Time box of the conv case. */
export const CONV_MEASURE: MeasureOptions = {
  warmup: 1,
  minIters: 3,
  maxIters: 10,
  budgetMs: 5000,
};

/** Upper bound for one case (init, warm-up and timing) before giving up. */
export const CASE_TIMEOUT_MS = 90_000;

/** Busy CPU time counters, in jiffies (see {@link cpuJiffies}). */
export interface CpuSample {
  /** Busy jiffies of the whole machine (all cores). */
  all: number;
  /** Busy jiffies of this process (all threads). */
  self: number;
}

/** Busy CPU jiffies of the whole machine and of this process (Linux). */
export function cpuJiffies(): CpuSample | undefined {
  try {
    const cpu = Deno.readTextFileSync("/proc/stat").split("\n")[0]
      .trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal ...
    const all = cpu.slice(0, 8).reduce((a, b) => a + b, 0) - cpu[3] - cpu[4];
    const stat = Deno.readTextFileSync("/proc/self/stat");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const self = Number(fields[11]) + Number(fields[12]); // utime + stime
    return Number.isFinite(all + self) ? { all, self } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Share of the machine's CPU time that other processes used between two
 * {@link cpuJiffies} samples: timings are only comparable when it is low.
 */
export function otherLoad(
  a: CpuSample | undefined,
  b: CpuSample | undefined,
  seconds: number,
): string {
  if (!a || !b || seconds <= 0) return "?";
  const hz = 100; // USER_HZ on Linux
  const capacity = seconds * hz * navigator.hardwareConcurrency;
  const other = (b.all - a.all) - (b.self - a.self);
  return `${Math.max(0, Math.round((100 * other) / capacity))}%`;
}

/** What a case function reports: its value and an optional detail note. */
export interface CaseOutcome {
  /** Measured value in the case's unit. */
  value: number;
  /** Measurement details. */
  note?: string;
}

/**
 * Runs one case under {@link CASE_TIMEOUT_MS}, turning any failure into a
 * `NaN` row whose note gives the reason, and logs the outcome.
 */
export async function runCase(
  row: Omit<PeerResult, "value" | "note">,
  log: (line: string) => void,
  fn: () => Promise<CaseOutcome>,
): Promise<PeerResult> {
  const label = `${row.peer}/${row.backend}/${row.suite}`;
  log(`  ${label} ...`);
  try {
    const cpu0 = cpuJiffies();
    const t0 = performance.now();
    const out = await withTimeout(fn(), CASE_TIMEOUT_MS, label);
    const others = otherLoad(
      cpu0,
      cpuJiffies(),
      (performance.now() - t0) / 1000,
    );
    const note = [out.note, `other processes ${others} CPU`]
      .filter((s) => s).join("; ");
    log(`  ${label}: ${out.value.toFixed(2)} ${row.unit} (${note})`);
    return { ...row, value: out.value, note };
  } catch (e) {
    const note = errorMessage(e);
    log(`  ${label}: FAILED ${note}`);
    return { ...row, value: NaN, note };
  }
}
