/**
 * A rank of the `fsdp` bench suite (spawned as a Worker): trains the mlp
 * suite's model under DDP or FSDP and reports its step times and the bytes
 * its device holds between steps.
 * @module
 */

import { distributed, manualSeed, nn, optim, randint, randn, requestDevices } from "../../mod.ts";
import type { Tensor } from "../../mod.ts";

/** What one group of ranks runs. */
export interface FsdpRankConfig {
  /** "ddp" or an FSDP sharding strategy. */
  readonly wrapper: "ddp" | "FULL_SHARD" | "SHARD_GRAD_OP" | "NO_SHARD";
  readonly backend: string;
  /** Layer widths (input, hidden..., output). */
  readonly widths: readonly number[];
  /** Rows per rank. */
  readonly batch: number;
  readonly warmup: number;
  readonly steps: number;
}

/** One rank's numbers. */
export interface FsdpRankResult {
  /** Milliseconds of each timed step (the loss read included). */
  readonly ms: number[];
  /** The device's bytes in use after the last step (inputs released). */
  readonly bytesInUse: number;
  /** Elements of the parameters the optimizer steps on this rank. */
  readonly paramElements: number;
}

/** Runs the config's steps on this rank. */
export async function main(
  _rank: number,
  _worldSize: number,
  config: FsdpRankConfig,
): Promise<FsdpRankResult> {
  const [device] = await requestDevices({ backend: config.backend });
  manualSeed(0);
  const layers: nn.Module[] = [];
  const w = config.widths;
  for (let i = 0; i + 1 < w.length; i++) {
    layers.push(new nn.Linear(w[i], w[i + 1]));
    if (i + 2 < w.length) layers.push(new nn.ReLU());
  }
  const model = new nn.Sequential(...layers).to(device);
  const wrapped: nn.Module = config.wrapper === "ddp"
    ? new distributed.DistributedDataParallel(model)
    : new distributed.fsdp.FullyShardedDataParallel(model, {
      shardingStrategy: config.wrapper,
      autoWrapPolicy: distributed.fsdp.ModuleWrapPolicy(new Set([nn.Linear])),
    });
  const opt = new optim.Adam(wrapped.parameters(), { lr: 1e-3 });
  const lossFn = new nn.CrossEntropyLoss();
  const x = randn([config.batch, w[0]], { device });
  const y = randint(0, w[w.length - 1], [config.batch], { device, dtype: "int32" });
  const ms: number[] = [];
  for (let s = 0; s < config.warmup + config.steps; s++) {
    const start = performance.now();
    opt.zeroGrad();
    const loss = lossFn.forward(wrapped.forward(x) as Tensor, y);
    loss.backward();
    opt.step();
    await loss.item();
    loss.dispose();
    if (s >= config.warmup) ms.push(performance.now() - start);
  }
  x.dispose();
  y.dispose();
  await distributed.barrier();
  return {
    ms,
    bytesInUse: device.memory().bytesInUse,
    paramElements: wrapped.parameters().reduce((n, p) => n + p.numel(), 0),
  };
}
