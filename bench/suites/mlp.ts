/**
 * `mlp`: one training step of an MLP 784-512-512-10 (ReLU) on a batch of 256
 * with cross-entropy and plain SGD (lr 0.01): forward, backward, update,
 * inside `tidy`, reading the loss each step. Reported in ms/step, with the
 * phases timed apart (forward+loss, +backward, +update) and one instrumented
 * step that counts kernel calls and WebGPU API calls.
 * @module
 */

import {
  type Device,
  manualSeed,
  nn,
  optim,
  randn,
  seededRandom,
  type Tensor,
  tensor,
  tidy,
} from "../../mod.ts";
import {
  type BenchResult,
  fmt,
  measureInterleaved,
  median,
  settle,
  type Suite,
  type SuiteContext,
  Table,
} from "./_common.ts";
import type { ReadAhead } from "../../src/backends/webgpu/read_ahead.ts";
import { countGpuCalls, countKernels, type GpuCounts, type KernelCounts } from "./_profile.ts";

/** An MLP benchmark setup: layer widths and batch. */
export interface MlpConfig {
  /** Layer widths, input first: `[784, 512, 512, 10]`. */
  readonly layers: readonly number[];
  /** Rows per step. */
  readonly batch: number;
  /** Between the linear layers (default ReLU). */
  readonly activation?: "relu" | "gelu";
  /** The optimizer, lr 0.01 (default SGD). */
  readonly optimizer?: "sgd" | "adam";
}

/** The headline MLP: 784-512-512-10, batch 256. */
export const MLP_CONFIG: MlpConfig = { layers: [784, 512, 512, 10], batch: 256 };

/**
 * The demo's model (`examples/demo/model.ts`): 2-64-64-3 with GELU, Adam,
 * batch 128, where the cost per op, not the arithmetic, sets the speed.
 */
export const SMALL_MLP_CONFIG: MlpConfig = {
  layers: [2, 64, 64, 3],
  batch: 128,
  activation: "gelu",
  optimizer: "adam",
};

/** `784-512-512-10 b256`, `2-64-64-3 GELU Adam b128`. */
export function describeMlp(config: MlpConfig): string {
  const act = config.activation === "gelu" ? " GELU" : "";
  const opt = config.optimizer === "adam" ? " Adam" : "";
  return `${config.layers.join("-")}${act}${opt} b${config.batch}`;
}

/** Multiply-adds x 2 of one step: forward 2·b·in·out per layer, backward twice that. */
export function mlpStepFlop(config: MlpConfig): number {
  let forward = 0;
  for (let i = 0; i + 1 < config.layers.length; i++) {
    forward += 2 * config.batch * config.layers[i] * config.layers[i + 1];
  }
  return 3 * forward;
}

/** A model, its loss, optimizer and one fixed batch, on one device. */
export interface MlpSetup {
  /** The plain model (on the first device). */
  readonly model: nn.Sequential;
  /** What a step calls: the model itself, or a DataParallel around it. */
  readonly runner: nn.Module;
  /** Cross-entropy. */
  readonly lossFn: nn.CrossEntropyLoss;
  /** SGD (or Adam), lr 0.01, over the model's parameters. */
  readonly optimizer: optim.SGD | optim.Adam;
  /** Inputs [batch, in]. */
  readonly x: Tensor;
  /** int32 class indices [batch]. */
  readonly y: Tensor;
  /** Releases the batch and the parameters. */
  dispose(): void;
}

/**
 * Builds the MLP on `device` (seeded, so every backend starts from the same
 * weights), with `wrap` turning the model into what a step calls.
 */
export function createMlp(
  device: Device,
  config: MlpConfig,
  wrap: (model: nn.Sequential) => nn.Module = (m) => m,
): MlpSetup {
  manualSeed(1234);
  const mods: nn.Module[] = [];
  const { layers } = config;
  for (let i = 0; i + 1 < layers.length; i++) {
    mods.push(new nn.Linear(layers[i], layers[i + 1]));
    if (i + 2 < layers.length) {
      mods.push(config.activation === "gelu" ? new nn.GELU() : new nn.ReLU());
    }
  }
  const model = new nn.Sequential(...mods).to(device);
  const runner = wrap(model);
  const lossFn = new nn.CrossEntropyLoss();
  const optimizer = config.optimizer === "adam"
    ? new optim.Adam(model.parameters(), { lr: 0.01 })
    : new optim.SGD(model.parameters(), { lr: 0.01 });
  const x = randn([config.batch, layers[0]], { device });
  const random = seededRandom(7);
  const classes = layers[layers.length - 1];
  const labels = Array.from({ length: config.batch }, () => Math.floor(random() * classes));
  const y = tensor(labels, { dtype: "int32", device });
  return {
    model,
    runner,
    lossFn,
    optimizer,
    x,
    y,
    dispose() {
      x.dispose();
      y.dispose();
      model.zeroGrad();
      for (const p of model.parameters()) p.dispose();
    },
  };
}

/**
 * Runs `fn` with webgpu read-ahead (the loss's read started at `backward()`)
 * suspended on `devices`: when runs of different kinds are timed
 * round-robin, each must end when its own work is done, and an early read
 * lets the backward run on into the next run.
 */
export async function withoutReadAhead<T>(
  devices: readonly Device[],
  fn: () => Promise<T>,
): Promise<T> {
  const readAheads = devices.flatMap((d) => {
    const impl = (d.backendDevice as { impl?: { readAhead?: ReadAhead | null } }).impl;
    return impl?.readAhead ? [impl.readAhead] : [];
  });
  for (const r of readAheads) r.suspended = true;
  try {
    return await fn();
  } finally {
    for (const r of readAheads) r.suspended = false;
  }
}

/** Reads of `device` whose mapping was taken early so far; -1 where it has no early maps. */
function earlyTakes(device: Device): number {
  const impl = (device.backendDevice as { impl?: { earlyMaps?: { counts: { early: number } } } })
    .impl;
  return impl?.earlyMaps?.counts.early ?? -1;
}

/** How much of a step to run. */
export type StepPhase = "forward" | "backward" | "step";

/**
 * Queues one step (up to `phase`) inside `tidy` and returns the loss tensor
 * (kept); nothing waits.
 */
export function queueStep(s: MlpSetup, phase: StepPhase = "step"): Tensor {
  return tidy(() => {
    if (phase !== "forward") s.optimizer.zeroGrad();
    const out = s.runner.forward(s.x) as Tensor;
    const loss = s.lossFn.forward(out, s.y);
    if (phase === "forward") return loss;
    loss.backward();
    if (phase === "step") s.optimizer.step();
    return loss;
  });
}

/** Host milliseconds spent queuing (JS) and waiting for the loss, of one step. */
export interface StepTimes {
  /** From the start until `tidy` returned: recording kernels on the host. */
  readonly queueMs: number;
  /** From then until the loss was read: the device finishing (plus readback). */
  readonly waitMs: number;
  /** The loss. */
  readonly loss: number;
}

/** One step (up to `phase`), ending with `await loss.item()`. */
export async function runStep(s: MlpSetup, phase: StepPhase = "step"): Promise<StepTimes> {
  const t0 = performance.now();
  const loss = queueStep(s, phase);
  const t1 = performance.now();
  const value = await loss.item();
  const t2 = performance.now();
  loss.dispose();
  return { queueMs: t1 - t0, waitMs: t2 - t1, loss: value };
}

/** One instrumented step: kernel calls by kind and WebGPU API calls. */
export interface StepProfile {
  /** Kernel calls and host ms per kind. */
  readonly kernels: KernelCounts;
  /** WebGPU API calls (zeros on cpu). */
  readonly gpu: GpuCounts;
}

/** Counts what one full step does on `devices`. */
export async function profileStep(s: MlpSetup, devices: readonly Device[]): Promise<StepProfile> {
  let kernels: KernelCounts = {};
  const gpu = await countGpuCalls(async () => {
    kernels = await countKernels(devices, async () => {
      await runStep(s);
    });
  });
  return { kernels, gpu };
}

/** Backend calls that move or manage memory rather than compute. */
const MEMORY_CALLS = new Set(["allocate", "free", "read", "write"]);

/** Compute kernel calls (launches) in `k`: everything but allocate, free, read, write. */
export function computeKernelCalls(k: KernelCounts): number {
  return Object.entries(k).reduce((n, [name, v]) => n + (MEMORY_CALLS.has(name) ? 0 : v.calls), 0);
}

/** `112 kernels (matmul 9, binary:add 4, ...); allocate 62, free 62, read 1`. */
export function summarizeKernels(k: KernelCounts, top = 8): string {
  const entries = Object.entries(k).sort((a, b) => b[1].calls - a[1].calls);
  const compute = entries.filter(([name]) => !MEMORY_CALLS.has(name));
  const memory = entries.filter(([name]) => MEMORY_CALLS.has(name));
  const shown = compute.slice(0, top).map(([name, v]) => `${name} ${v.calls}`);
  if (compute.length > top) shown.push("...");
  return `${computeKernelCalls(k)} kernel launches (${shown.join(", ")}); ` +
    memory.map(([name, v]) => `${name} ${v.calls}`).join(", ");
}

/** `matmul 61%, binary:add 9%`: where host kernel time goes (cpu: the compute itself). */
export function summarizeKernelTime(k: KernelCounts, top = 5): string {
  const entries = Object.entries(k).sort((a, b) => b[1].ms - a[1].ms);
  const total = entries.reduce((n, [, v]) => n + v.ms, 0);
  const shown = entries.slice(0, top).map(([name, v]) =>
    `${name} ${fmt(v.ms)} ms (${Math.round((100 * v.ms) / (total || 1))}%)`
  );
  return `${fmt(total)} ms in kernel calls: ${shown.join(", ")}`;
}

/** `dispatches 60, submits 3, ..., submitMs 0.41, mapMs 12.3`. */
export function summarizeGpu(g: GpuCounts): string {
  return Object.entries(g).map(([k, v]) => `${k} ${fmt(v)}`).join(", ");
}

/** The mlp suite. */
export const mlpSuite: Suite = {
  name: "mlp",
  description: "MLP 784-512-512-10 batch 256, cross-entropy, SGD step -> ms/step",
  async run(ctx: SuiteContext): Promise<BenchResult[]> {
    const config = MLP_CONFIG;
    const flop = mlpStepFlop(config);
    const table = new Table(
      `mlp: ${
        describeMlp(config)
      } (ReLU), cross-entropy, SGD lr 0.01, in tidy, loss read every step;` +
        ` ${fmt(flop / 1e9)} GFLOP/step`,
      [
        { title: "backend", width: 7, right: false },
        { title: "phase", width: 16, right: false },
        { title: "runs", width: 4 },
        { title: "ms/step", width: 8 },
        { title: "queue ms", width: 8 },
        { title: "wait ms", width: 8 },
        { title: "GFLOP/s", width: 7 },
      ],
      ctx.log,
    );
    const results: BenchResult[] = [];
    const profiles: [string, StepProfile][] = [];
    const phases: [StepPhase, string][] = [
      ["forward", "forward+loss"],
      ["backward", "+backward"],
      ["step", "+SGD (full step)"],
    ];
    for (const backend of ctx.backends) {
      const [device] = await ctx.devices(backend, 1);
      const s = createMlp(device, config);
      try {
        // The phases run round-robin so that they see the same machine load.
        const times: StepTimes[][] = phases.map(() => []);
        const earlyBefore = earlyTakes(device);
        const timings = await withoutReadAhead([device], () =>
          measureInterleaved(
            phases.map(([phase], i) => async () => {
              times[i].push(await runStep(s, phase));
            }),
            { warmup: 2, minRuns: ctx.quick ? 1 : 3, budgetS: ctx.budgetS },
          ));
        const early = earlyTakes(device) - earlyBefore;
        if (earlyBefore >= 0) {
          const reads = times.reduce((sum, t) => sum + t.length, 0);
          table.note(
            `${backend}: ${early} of the ${reads} timed steps' loss reads took the mapping early (early_map.ts)`,
          );
        }
        phases.forEach(([phase, label], i) => {
          const timing = timings[i];
          const timed = times[i].slice(times[i].length - timing.runs);
          const queueMs = median(timed.map((t) => t.queueMs));
          const waitMs = median(timed.map((t) => t.waitMs));
          const phaseFlop = phase === "forward" ? flop / 3 : flop;
          const gflops = phaseFlop / (timing.medianMs * 1e6);
          table.row([backend, label, timing.runs, timing.medianMs, queueMs, waitMs, gflops]);
          results.push({
            suite: "mlp",
            backend,
            case: phase,
            value: timing.medianMs,
            unit: "ms/step",
            runs: timing.runs,
            medianMs: timing.medianMs,
            extra: {
              config: describeMlp(config),
              queueMs,
              waitMs,
              minMs: timing.minMs,
              maxMs: timing.maxMs,
              gflops,
              lastLoss: timed.at(-1)?.loss ?? NaN,
            },
          });
        });
        await settle();
        const profile = await profileStep(s, [device]);
        profiles.push([backend, profile]);
        results.push({
          suite: "mlp",
          backend,
          case: "profile",
          value: computeKernelCalls(profile.kernels),
          unit: "kernel launches/step",
          extra: {
            ...Object.fromEntries(
              Object.entries(profile.kernels).map(([k, v]) => [`calls.${k}`, v.calls]),
            ),
            ...Object.fromEntries(
              Object.entries(profile.kernels).map(([k, v]) => [`ms.${k}`, v.ms]),
            ),
            ...Object.fromEntries(Object.entries(profile.gpu).map(([k, v]) => [`gpu.${k}`, v])),
          },
        });
      } finally {
        s.dispose();
      }
    }
    table.note(
      "queue ms: host time recording the step (JS, up to tidy's return); wait ms: then until the loss is read",
    );
    table.note("webgpu: phases timed without read-ahead (each run ends when its own work is done)");
    for (const [backend, p] of profiles) {
      table.note(`${backend} one step: ${summarizeKernels(p.kernels)}`);
      table.note(`${backend} one step: ${summarizeKernelTime(p.kernels)}`);
      if (backend === "webgpu") {
        table.note(`${backend} one step: WebGPU calls: ${summarizeGpu(p.gpu)}`);
      }
    }
    return results;
  },
};
