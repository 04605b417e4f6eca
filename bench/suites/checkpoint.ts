/**
 * `checkpoint`: the device memory of one training step of a deep MLP with
 * and without `utils.checkpoint.checkpointSequential`: the bytes in use
 * sampled after every layer call (forward and the recomputations in
 * backward) and after backward, above what was in use before the step. Run
 * once per case: memory, not time, is what it measures.
 * @module
 */

import { type Device, manualSeed, nn, randn, type Tensor, utils } from "../../mod.ts";
import {
  type BenchResult,
  formatBytes,
  settle,
  type Suite,
  type SuiteContext,
  Table,
} from "./_common.ts";

/** Depth, width and batch of the MLP. */
export interface CheckpointBenchConfig {
  /** Linear + ReLU blocks. */
  readonly depth: number;
  /** Width of every layer. */
  readonly width: number;
  /** Rows of the batch. */
  readonly batch: number;
}

/** A full run's MLP. */
export const CHECKPOINT_CONFIG: CheckpointBenchConfig = { depth: 32, width: 512, batch: 256 };
/** A `--quick` run's. */
export const CHECKPOINT_CONFIG_QUICK: CheckpointBenchConfig = { depth: 16, width: 128, batch: 64 };

/** Peak and final bytes above the step's start, for `segments` (0: no checkpointing). */
async function measure(
  device: Device,
  config: CheckpointBenchConfig,
  segments: number,
): Promise<{ peak: number; afterForward: number }> {
  manualSeed(0);
  const layers: nn.Module[] = [];
  for (let i = 0; i < config.depth; i++) {
    layers.push(new nn.Linear(config.width, config.width), new nn.ReLU());
  }
  const model = new nn.Sequential(...layers).to(device);
  const x = randn([config.batch, config.width], { device, requiresGrad: true });
  await settle();
  const base = device.memory().bytesInUse;
  let peak = 0;
  const sample = () => (peak = Math.max(peak, device.memory().bytesInUse - base));
  const probed = [...model].map((m) => (t: Tensor) => {
    const y = m.forward(t) as Tensor;
    sample();
    return y;
  });
  const out = segments === 0
    ? probed.reduce((h, f) => f(h), x)
    : utils.checkpoint.checkpointSequential(probed, segments, x);
  const loss = out.square().mean();
  const afterForward = sample();
  loss.backward();
  sample();
  await loss.item();
  for (const p of [x, ...model.parameters()]) p.grad = null;
  return { peak, afterForward };
}

/** The checkpoint suite. */
export const checkpointSuite: Suite = {
  name: "checkpoint",
  description: "peak device memory of a deep MLP step with and without checkpointSequential",
  async run(ctx: SuiteContext): Promise<BenchResult[]> {
    const config = ctx.quick ? CHECKPOINT_CONFIG_QUICK : CHECKPOINT_CONFIG;
    const describe =
      `MLP of ${config.depth} Linear(${config.width})+ReLU blocks, batch ${config.batch}`;
    const table = new Table(
      `checkpoint: bytes in use above the step's start, ${describe} (sampled after every layer call)`,
      [
        { title: "backend", width: 7, right: false },
        { title: "case", width: 22, right: false },
        { title: "peak", width: 10 },
        { title: "after forward", width: 13 },
        { title: "vs plain", width: 8 },
        { title: "of it, .grad", width: 12 },
      ],
      ctx.log,
    );
    const results: BenchResult[] = [];
    const depth = 2 * config.depth;
    const segmentsList = [0, 2, Math.round(Math.sqrt(depth)), 16];
    // The parameters' gradients (float32), part of every case's peak.
    const gradBytes = 4 * config.depth * (config.width * config.width + config.width);
    for (const backend of ctx.backends) {
      const [device] = await ctx.devices(backend, 1);
      let plain = 0;
      for (const segments of segmentsList) {
        const { peak, afterForward } = await measure(device, config, segments);
        if (segments === 0) plain = peak;
        const name = segments === 0 ? "no checkpoint" : `checkpointSequential(${segments})`;
        table.row([
          backend,
          name,
          formatBytes(peak),
          formatBytes(afterForward),
          `${(peak / plain).toFixed(2)}x`,
          formatBytes(gradBytes),
        ]);
        results.push({
          suite: "checkpoint",
          backend,
          case: name,
          value: peak,
          unit: "bytes",
          runs: 1,
          extra: {
            afterForwardBytes: afterForward,
            gradBytes,
            config: describe,
            ratioVsPlain: peak / plain,
          },
        });
        await settle();
      }
    }
    table.note(
      "the activations inside a checkpointed segment are dropped in forward and rebuilt one segment" +
        " at a time in backward: after forward, the boundaries and the last (plain) segment are left;" +
        " the backward pass holds a plain segment's activations until it ends",
    );
    return results;
  },
};
