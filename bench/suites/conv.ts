/**
 * `conv`: a Conv2d 3x3 (padding 1, with bias) forward + backward on a
 * [32, 64, 28, 28] input to 64 channels, in GFLOP/s: 3 · 2·N·Cout·H·W·Cin·9
 * flops per step (the forward, the input gradient and the weight gradient).
 * A timed run is one step whose input and weight gradients are read back.
 * @module
 */

import { type Device, nn, randn, type Tensor, tidy } from "../../mod.ts";
import {
  type BenchResult,
  measure,
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

/** The conv suite. */
export const convSuite: Suite = {
  name: "conv",
  description: "Conv2d 3x3 forward+backward on [32,64,28,28] -> GFLOP/s",
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
    return results;
  },
};
