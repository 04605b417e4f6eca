/**
 * `conv`: a Conv2d 3x3 (padding 1, with bias) forward + backward on a
 * [32, 64, 28, 28] input to 64 channels, in GFLOP/s: 3 · 2·N·Cout·H·W·Cin·9
 * flops per step (the forward, the input gradient and the weight gradient).
 * A timed run is one step whose input and weight gradients are read back.
 * Then the example CNN's training step (`examples/cnn.ts`: batch 64, Adam,
 * loss read back) per backend, as it runs and, timed round-robin with it on
 * a second device, with the fused `batchNorm`, `batchNormBackward` and
 * `maxPool2d` kernels taken out of that device's table (nn then composes
 * them from primitives, as before those kernels existed).
 * @module
 */

import { type Device, manualSeed, nn, optim, randn, type Tensor, tidy } from "../../mod.ts";
import { Cnn, syntheticImages } from "../../examples/cnn.ts";
import {
  type BenchResult,
  measure,
  measureInterleaved,
  settle,
  type Suite,
  type SuiteContext,
  Table,
} from "./_common.ts";
import { CONV_SPEC, convCase, type ConvSpec, convStepFlops } from "../peers/common.ts";

/** The `--quick` case. */
export const CONV_SPEC_QUICK: ConvSpec = { n: 4, cin: 16, cout: 16, size: 14, k: 3 };

/** One forward + backward step, gradients read back. */
async function step(x: Tensor, conv: nn.Conv2d, g: Tensor): Promise<void> {
  tidy(() => {
    conv.forward(x).mul(g).sum().backward();
  });
  await x.grad!.data();
  await conv.weight.grad!.data();
  x.grad = null;
  conv.zeroGrad();
}

/** Measures the conv step on one device. */
export async function benchConv(
  device: Device,
  shape: ConvSpec,
  budgetS: number,
): Promise<BenchResult> {
  const { n, cin, cout, size, k } = shape;
  const x = randn([n, cin, size, size], { device, requiresGrad: true });
  const conv = new nn.Conv2d(cin, cout, k, { padding: (k - 1) / 2, device });
  const g = randn([n, cout, size, size], { device });
  try {
    const timing = await measure(() => step(x, conv, g), { warmup: 1, minRuns: 3, budgetS });
    const flop = convStepFlops(shape);
    return {
      suite: "conv",
      backend: device.backend,
      case: convCase(shape),
      value: flop / (timing.medianMs * 1e6),
      unit: "GFLOP/s",
      runs: timing.runs,
      medianMs: timing.medianMs,
      extra: { minMs: timing.minMs, maxMs: timing.maxMs, bestGflops: flop / (timing.minMs * 1e6) },
    };
  } finally {
    x.dispose();
    g.dispose();
  }
}

/** The kernels the CNN step's composed twin runs without. */
export const CNN_FUSED = ["batchNorm", "batchNormBackward", "maxPool2d"] as const;

/** One training step of the example CNN on `device` (batch `batch`), loss read back. */
export function cnnStep(device: Device, batch: number): () => Promise<void> {
  manualSeed(0);
  const net = new Cnn().to(device);
  net.train();
  const { images, labels } = syntheticImages(batch, 10, 1);
  const x = images.to(device);
  const y = labels.to(device);
  const optimizer = new optim.Adam(net.parameters(), { lr: 2e-3 });
  const lossFn = new nn.CrossEntropyLoss();
  return async () => {
    const loss: Tensor = tidy(() => {
      optimizer.zeroGrad();
      const l = lossFn.forward(net.forward(x), y);
      l.backward();
      optimizer.step();
      return l.detach();
    });
    await loss.item();
    loss.dispose();
  };
}

/**
 * The CNN step on `fused` and, interleaved, on `composed` with the fused
 * kernels removed from its table for the duration (put back after).
 */
export async function benchCnnStep(
  fused: Device,
  composed: Device,
  batch: number,
  budgetS: number,
): Promise<BenchResult[]> {
  const table = composed.backendDevice.kernels as unknown as Record<string, unknown>;
  const saved = CNN_FUSED.map((name) => [name, table[name]] as const);
  for (const name of CNN_FUSED) delete table[name];
  try {
    const timings = await measureInterleaved([cnnStep(fused, batch), cnnStep(composed, batch)], {
      warmup: 2,
      minRuns: 3,
      budgetS,
    });
    return timings.map((t, i) => ({
      suite: "conv",
      backend: fused.backend,
      case: `cnn step b${batch}${i === 0 ? "" : " composed"}`,
      value: t.medianMs,
      unit: "ms",
      runs: t.runs,
      medianMs: t.medianMs,
      extra: { minMs: t.minMs, maxMs: t.maxMs },
    }));
  } finally {
    for (const [name, kernel] of saved) if (kernel) table[name] = kernel;
  }
}

/** The conv suite. */
export const convSuite: Suite = {
  name: "conv",
  description:
    "Conv2d 3x3 forward+backward on [32,64,28,28] -> GFLOP/s; the example CNN step, fused vs composed",
  async run(ctx: SuiteContext): Promise<BenchResult[]> {
    const shape = ctx.quick ? CONV_SPEC_QUICK : CONV_SPEC;
    const table = new Table(
      `conv: Conv2d ${convCase(shape)} (padding 1, bias) forward + backward, ` +
        "GFLOP/s = 3 · 2·N·Cout·H·W·Cin·k² / median step (gradients read back)",
      [
        { title: "backend", width: 7, right: false },
        { title: "runs", width: 4 },
        { title: "median ms", width: 9 },
        { title: "GFLOP/s", width: 8 },
        { title: "best GFLOP/s", width: 12 },
      ],
      ctx.log,
    );
    const results: BenchResult[] = [];
    for (const backend of ctx.backends) {
      const [device] = await ctx.devices(backend, 1);
      const r = await benchConv(device, shape, ctx.budgetS);
      results.push(r);
      table.row([backend, r.runs!, r.medianMs!, r.value, r.extra!.bestGflops as number]);
      await settle();
    }
    const batch = ctx.quick ? 8 : 64;
    const steps = new Table(
      `conv: examples/cnn.ts training step (batch ${batch}, Adam, loss read back), ms; ` +
        "composed = without the fused batchNorm/maxPool2d kernels, timed round-robin with it",
      [
        { title: "backend", width: 7, right: false },
        { title: "runs", width: 4 },
        { title: "fused ms", width: 9 },
        { title: "composed ms", width: 11 },
        { title: "speedup", width: 7 },
      ],
      ctx.log,
    );
    for (const backend of ctx.backends) {
      const [fused, composed] = await ctx.devices(backend, 2);
      const [f, c] = await benchCnnStep(fused, composed, batch, ctx.budgetS);
      results.push(f, c);
      steps.row([backend, f.runs!, f.value, c.value, `${(c.value / f.value).toFixed(2)}x`]);
      await settle();
    }
    return results;
  },
};
