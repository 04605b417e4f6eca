/**
 * `--peers` speed targets: multigrad against jax-js and PyTorch, each
 * comparison measured round-robin in one run (one run of every contender
 * per round, the starting one rotating), so that a shared machine's load
 * hits all of them alike. Prints one row per target with the ratio, the
 * goal and whether it is met.
 *
 * Contenders per comparison: multigrad's cpu backend against jax-js's
 * `wasm` backend (multi-threaded WebAssembly) and PyTorch on the host
 * (`bench/pytorch_mlp.py`, its default threads); multigrad's webgpu
 * backend against jax-js's `webgpu` backend on the same adapter. Every run
 * ends with a read of its result (the product, or the step's loss).
 * @module
 */

import { type Device, randn, type Tensor } from "../../mod.ts";
import {
  type BenchResult,
  fmt,
  measureInterleaved,
  median,
  settle,
  type SuiteContext,
  Table,
} from "./_common.ts";
import { countGpuCalls, countKernels } from "./_profile.ts";
import {
  computeKernelCalls,
  createMlp,
  describeMlp,
  MLP_CONFIG,
  type MlpConfig,
  runStep,
  SMALL_MLP_CONFIG,
  summarizeKernels,
} from "./mlp.ts";
import type { JaxjsPeer, PeerRunner } from "../peers/jaxjs.ts";
import { CNN_SCRIPT, type PytorchPeer, startPytorch } from "../peers/pytorch.ts";
import { cnnTrainer } from "../../examples/cnn.ts";

/** One target's outcome. */
export interface TargetResult {
  /** What is compared. */
  readonly target: string;
  /** multigrad's number and unit. */
  readonly ours: number;
  /** Unit of `ours` (and `theirs`). */
  readonly unit: string;
  /** The peer it is set against (empty for absolute targets). */
  readonly peer: string;
  /** The peer's number, NaN when absolute or when the peer could not run. */
  readonly theirs: number;
  /** The compared quantity: a speed ratio (above 1 = multigrad faster), or `ours` itself. */
  readonly ratio: number;
  /** What `ratio` must reach, as text (`>= 1.3x`, `<= 1.5 ms`); `-` for a reference row. */
  readonly goal: string;
  /** Whether it does; null for a reference row (a peer shown beside an absolute goal). */
  readonly met: boolean | null;
}

type Run = () => Promise<void | number>;

interface Contender {
  readonly name: string;
  readonly run: Run;
}

/** A multigrad product of two n×n float32 operands on `device`, read back each run. */
function ourMatmul(device: Device, n: number): { run: Run; dispose(): void } {
  const a = randn([n, n], { device });
  const b = randn([n, n], { device });
  return {
    async run() {
      const c: Tensor = a.matmul(b);
      await c.data();
      c.dispose();
    },
    dispose() {
      a.dispose();
      b.dispose();
    },
  };
}

/** A multigrad training step of `config` on `device`, loss read each run. */
function ourStep(device: Device, config: MlpConfig): { run: Run; dispose(): void; step: Run } {
  const s = createMlp(device, config);
  const step = async () => void await runStep(s);
  return { run: step, step, dispose: () => s.dispose() };
}

/** Medians of interleaved contenders, by name. */
async function compare(
  ctx: SuiteContext,
  contenders: readonly Contender[],
  warmup = 2,
): Promise<Map<string, number>> {
  const timings = await measureInterleaved(contenders.map((c) => c.run), {
    warmup,
    minRuns: ctx.quick ? 2 : 5,
    budgetS: ctx.budgetS,
  });
  return new Map(contenders.map((c, i) => [c.name, timings[i].medianMs]));
}

const gflops = (n: number, ms: number) => (2 * n ** 3) / (ms * 1e6);

/** The suite a target belongs to: it runs when that suite is selected (`--filter`). */
const TARGET_SUITES = {
  matmul: ["matmul"],
  mlp: ["mlp"],
  small: ["mlp", "smallstep"],
  cnn: ["conv"],
} as const;

/**
 * Measures every target of the selected `suites` whose contenders are
 * available; `jaxjs` loads a jax-js backend (or says why not), `torch` is the
 * PyTorch peer or why not (the CNN epoch starts its own, `bench/cnn_torch.py`).
 */
export async function runTargets(
  ctx: SuiteContext,
  jaxjs: (device: "wasm" | "webgpu") => Promise<JaxjsPeer | string>,
  torch: PytorchPeer | string,
  suites: readonly string[] = ["matmul", "mlp", "smallstep", "conv"],
): Promise<{ targets: TargetResult[]; results: BenchResult[] }> {
  const selected = (target: keyof typeof TARGET_SUITES) =>
    TARGET_SUITES[target].some((name) => suites.includes(name));
  const n = ctx.quick ? 256 : 1024;
  const targets: TargetResult[] = [];
  const results: BenchResult[] = [];
  const table = new Table(
    `targets (issue 14): contenders timed round-robin in this run; ratio > 1 = multigrad faster` +
      ` (PyTorch: ${typeof torch === "string" ? `not run, ${torch}` : torch.info})`,
    [
      { title: "target", width: 44, right: false },
      { title: "multigrad", width: 14 },
      { title: "peer", width: 14, right: false },
      { title: "peer value", width: 14 },
      { title: "ratio", width: 7 },
      { title: "goal", width: 10, right: false },
      { title: "met", width: 3, right: false },
    ],
    ctx.log,
  );
  const add = (t: TargetResult) => {
    targets.push(t);
    const value = (x: number) => Number.isFinite(x) ? `${fmt(x)} ${t.unit}` : "-";
    table.row([
      t.target,
      value(t.ours),
      t.peer,
      value(t.theirs),
      Number.isFinite(t.ratio) ? (t.peer ? `${fmt(t.ratio)}x` : fmt(t.ratio)) : "-",
      t.goal,
      t.met === null ? "" : t.met ? "yes" : "NO",
    ]);
  };
  const speedup: Speedup = (target, peer, ours, theirs, unit, goal) => {
    // Throughputs compare ours / theirs; times theirs / ours.
    const ratio = unit === "GFLOP/s" ? ours / theirs : theirs / ours;
    add({
      target,
      ours,
      unit,
      peer,
      theirs,
      ratio,
      goal: goal === null ? "-" : `>= ${fmt(goal)}x`,
      met: goal === null ? null : ratio >= goal,
    });
  };
  const torchRun = (name: "matmul" | "mlp" | "demo" | "epoch"): Contender[] =>
    typeof torch === "string" ? [] : [{ name: "torch", run: () => torch.run(name) }];
  const noteMissing = (what: string, why: string) => table.note(`${what}: not measured (${why})`);
  // The small step's kernel launches, counted on one more step, and the
  // step's median time per launch: what per-op overhead costs.
  const noteLaunches = async (backend: string, device: Device, step: Run, medianMs: number) => {
    const counts = await countKernels([device], async () => void await step());
    const launches = computeKernelCalls(counts);
    table.note(
      `${backend} small step: ${summarizeKernels(counts)}; ${
        fmt((1000 * medianMs) / launches)
      } µs of the step per launch`,
    );
  };

  if (ctx.backends.includes("cpu")) {
    const [cpu] = await ctx.devices("cpu", 1);
    const wasm = selected("matmul") || selected("mlp") ? await jaxjs("wasm") : "not selected";
    if (typeof wasm === "string" && wasm !== "not selected") noteMissing("jax-js wasm", wasm);

    // 1. matmul n, cpu, one read per product.
    if (selected("matmul")) {
      const ours = ourMatmul(cpu, n);
      const theirs: PeerRunner | null = typeof wasm === "string" ? null : wasm.matmul(n);
      try {
        const ms = await compare(ctx, [
          { name: "ours", run: ours.run },
          ...(theirs ? [{ name: "jax", run: () => theirs.run() }] : []),
          ...torchRun("matmul"),
        ]);
        const mine = gflops(n, ms.get("ours")!);
        results.push(result("cpu", `matmul ${n}`, mine, "GFLOP/s"));
        if (theirs) {
          speedup(
            `matmul ${n} f32 cpu (+read)`,
            "jax-js wasm",
            mine,
            gflops(n, ms.get("jax")!),
            "GFLOP/s",
            1,
          );
        }
        if (ms.has("torch")) {
          speedup(
            `matmul ${n} f32 cpu`,
            "PyTorch",
            mine,
            gflops(n, ms.get("torch")!),
            "GFLOP/s",
            null,
          );
        }
      } finally {
        ours.dispose();
        theirs?.dispose();
      }
    }
    await settle();

    // 2. The MLP step, cpu.
    if (selected("mlp")) {
      const ours = ourStep(cpu, MLP_CONFIG);
      const theirs: PeerRunner | null = typeof wasm === "string" ? null : wasm.mlp();
      try {
        const ms = await compare(ctx, [
          { name: "ours", run: ours.run },
          ...(theirs ? [{ name: "jax", run: () => theirs.run() }] : []),
          ...torchRun("mlp"),
        ]);
        const mine = ms.get("ours")!;
        const label = `MLP ${describeMlp(MLP_CONFIG)} SGD step, cpu`;
        results.push(result("cpu", "mlp step", mine, "ms/step"));
        if (theirs) speedup(label, "jax-js wasm", mine, ms.get("jax")!, "ms/step", 1.3);
        if (ms.has("torch")) {
          // Within 1.2x of PyTorch's time: speed ratio >= 1/1.2.
          speedup(label, "PyTorch", mine, ms.get("torch")!, "ms/step", 1 / 1.2);
        }
      } finally {
        ours.dispose();
        theirs?.dispose();
      }
    }
    await settle();

    // 3. The small model's step, cpu: an absolute goal, PyTorch beside it.
    if (selected("small")) {
      const ours = ourStep(cpu, SMALL_MLP_CONFIG);
      try {
        const ms = await compare(ctx, [{ name: "ours", run: ours.run }, ...torchRun("demo")], 20);
        const mine = ms.get("ours")!;
        const label = `small step ${describeMlp(SMALL_MLP_CONFIG)}, cpu`;
        results.push(result("cpu", "small step", mine, "ms/step"));
        add({
          target: label,
          ours: mine,
          unit: "ms/step",
          peer: "",
          theirs: NaN,
          ratio: mine,
          goal: "<= 1.5 ms",
          met: mine <= 1.5,
        });
        if (ms.has("torch")) speedup(label, "PyTorch", mine, ms.get("torch")!, "ms/step", null);
        await noteLaunches("cpu", cpu, ours.step, mine);
      } finally {
        ours.dispose();
      }
    }
    await settle();

    // 4. The example CNN's training epoch (examples/cnn.ts, one cpu device)
    // against PyTorch's (bench/cnn_torch.py), epochs round-robin.
    if (selected("cnn")) {
      await cnnEpoch(ctx, add, speedup, noteMissing, (line) => table.note(line));
    }
  }

  if (ctx.backends.includes("webgpu")) {
    const [gpu] = await ctx.devices("webgpu", 1);

    // 5. The small model's step on webgpu: absolute, one submit and one read.
    if (selected("small")) {
      const ours = ourStep(gpu, SMALL_MLP_CONFIG);
      try {
        const ms = await compare(ctx, [{ name: "ours", run: ours.run }], 5);
        const mine = ms.get("ours")!;
        const calls = await countGpuCalls(async () => void await ours.step());
        results.push(
          result("webgpu", "small step", mine, "ms/step", {
            submits: calls.submits,
            maps: calls.maps,
            dispatches: calls.dispatches,
          }),
        );
        add({
          target: `small step ${describeMlp(SMALL_MLP_CONFIG)}, webgpu`,
          ours: mine,
          unit: "ms/step",
          peer: "",
          theirs: NaN,
          ratio: mine,
          goal: "<= 14 ms",
          met: mine <= 14,
        });
        table.note(
          `webgpu small step: ${calls.submits} submit(s), ${calls.maps} read(s) (mapAsync), ` +
            `${calls.dispatches} dispatches per step`,
        );
        await noteLaunches("webgpu", gpu, ours.step, mine);
      } finally {
        ours.dispose();
      }
    }
    await settle();

    // 6. matmul n on webgpu, one read per product.
    if (selected("matmul")) {
      const jaxGpu = await jaxjs("webgpu");
      if (typeof jaxGpu === "string") noteMissing("jax-js webgpu", jaxGpu);
      const ours = ourMatmul(gpu, n);
      const theirs: PeerRunner | null = typeof jaxGpu === "string" ? null : jaxGpu.matmul(n);
      try {
        const ms = await compare(ctx, [
          { name: "ours", run: ours.run },
          ...(theirs ? [{ name: "jax", run: () => theirs.run() }] : []),
        ]);
        const mine = gflops(n, ms.get("ours")!);
        results.push(result("webgpu", `matmul ${n} +read`, mine, "GFLOP/s"));
        if (theirs) {
          speedup(
            `matmul ${n} f32 webgpu, one read per product`,
            "jax-js webgpu",
            mine,
            gflops(n, ms.get("jax")!),
            "GFLOP/s",
            2,
          );
        }
      } finally {
        ours.dispose();
        theirs?.dispose();
      }
    }
  }
  table.note(
    "ratio: our GFLOP/s / theirs, or their ms / ours (so within 1.2x of PyTorch's time is >= 0.83x);" +
      " goal '-': shown for reference",
  );
  return { targets, results };
}

/** Adds a target row comparing ours with a peer's value in `unit` against `goal` (null: shown only). */
type Speedup = (
  target: string,
  peer: string,
  ours: number,
  theirs: number,
  unit: string,
  goal: number | null,
) => void;

/**
 * The example CNN's training epoch on one cpu device against PyTorch's, one
 * epoch of each per round; goal: within 2x of PyTorch's time (issue 12).
 */
async function cnnEpoch(
  ctx: SuiteContext,
  add: (t: TargetResult) => void,
  speedup: Speedup,
  noteMissing: (what: string, why: string) => void,
  note: (line: string) => void,
): Promise<void> {
  const train = ctx.quick ? 256 : 2048;
  const trainer = await cnnTrainer({ devices: 1, backend: "cpu", train, test: 64 });
  const torch = await startPytorch("/usr/bin/python3", CNN_SCRIPT, [String(train)]);
  if (typeof torch === "string") noteMissing("PyTorch CNN epoch", torch);
  // Processor time beside wall time: steadier on a machine shared with other work.
  const cpuMs: { ours: number[]; torch: number[] } = { ours: [], torch: [] };
  try {
    const ms = await compare(
      ctx,
      [
        {
          name: "ours",
          run: async () => {
            const report = await trainer.epoch();
            cpuMs.ours.push(report.cpuSeconds * 1000);
            return report.seconds * 1000;
          },
        },
        ...(typeof torch === "string" ? [] : [{
          name: "torch",
          run: async () => {
            const wall = await torch.run("epoch");
            cpuMs.torch.push(torch.lastCpuMs());
            return wall;
          },
        }]),
      ],
      1,
    );
    const mine = ms.get("ours")!;
    const label = `CNN epoch (examples/cnn.ts, ${train} images, b64), cpu`;
    if (ms.has("torch")) {
      // Within 2x of PyTorch's time: speed ratio >= 0.5.
      speedup(label, "PyTorch", mine, ms.get("torch")!, "ms/epoch", 0.5);
      // The warm-up epoch is in the lists too: medians over the timed ones.
      const [ours, theirs] = [median(cpuMs.ours.slice(1)), median(cpuMs.torch.slice(1))];
      note(
        `CNN epoch processor time (all threads): multigrad ${fmt(ours)} ms, PyTorch ${
          fmt(theirs)
        } ms, ratio ${fmt(theirs / ours)}x`,
      );
    } else {
      add({
        target: label,
        ours: mine,
        unit: "ms/epoch",
        peer: "",
        theirs: NaN,
        ratio: mine,
        goal: "-",
        met: null,
      });
    }
  } finally {
    if (typeof torch !== "string") await torch.close();
  }
}

function result(
  backend: string,
  kase: string,
  value: number,
  unit: string,
  extra?: Record<string, number>,
): BenchResult {
  return { suite: "targets", backend, case: kase, value, unit, ...(extra ? { extra } : {}) };
}
