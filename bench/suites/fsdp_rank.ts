/**
 * A rank of the `fsdp` bench suite (spawned as a Worker): trains the mlp
 * suite's model under DDP or FSDP, K steps per command from the suite
 * (a shared mailbox, so the suite can time its groups round-robin), and
 * reports each run's milliseconds; when told to quit, the bytes its device
 * holds between steps and at its peak within a step.
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
}

/** One rank's numbers, returned when the group quits. */
export interface FsdpRankResult {
  /** The device's bytes in use after the last step (inputs released). */
  readonly bytesInUse: number;
  /** The most bytes in use at once during the steps (sampled at every allocation). */
  readonly peakBytes: number;
  /** Elements of the parameters the optimizer steps on this rank. */
  readonly paramElements: number;
}

/** Mailbox words (Int32): the command's number, the command, its steps, the reports of it; then float64 ms per rank. */
export const FSDP_MAILBOX = { seq: 0, command: 1, steps: 2, reported: 3, results: 8 } as const;
/** Commands. */
export const FSDP_COMMAND = { run: 1, quit: 2 } as const;

/** A shared mailbox for a group of `ranks`. */
export function createFsdpMailbox(ranks: number): SharedArrayBuffer {
  return new SharedArrayBuffer(FSDP_MAILBOX.results * 4 + ranks * 8);
}

/** Serves the suite's commands until `quit`. */
export async function main(
  rank: number,
  _worldSize: number,
  config: FsdpRankConfig,
  mailbox: SharedArrayBuffer,
): Promise<FsdpRankResult> {
  const words = new Int32Array(mailbox);
  const results = new Float64Array(mailbox, FSDP_MAILBOX.results * 4);
  const [device] = await requestDevices({ backend: config.backend });
  // The peak: bytes in use sampled after every allocation of this device.
  let peakBytes = 0;
  const memory = device.backendDevice as unknown as Record<string, (...a: unknown[]) => unknown>;
  const allocate = memory.allocate;
  memory.allocate = function (this: unknown, ...args: unknown[]) {
    const out = allocate.apply(this, args);
    peakBytes = Math.max(peakBytes, device.memory().bytesInUse);
    return out;
  };
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
  let seen = 0;
  for (;;) {
    const seq = Atomics.load(words, FSDP_MAILBOX.seq);
    if (seq === seen) {
      const wait = Atomics.waitAsync(words, FSDP_MAILBOX.seq, seq);
      if (wait.async) await wait.value;
      continue;
    }
    seen = seq;
    if (Atomics.load(words, FSDP_MAILBOX.command) !== FSDP_COMMAND.run) break;
    const steps = Atomics.load(words, FSDP_MAILBOX.steps);
    // The clocks start together: a rank noticing the command later does not count that lag.
    await distributed.barrier();
    const start = performance.now();
    for (let s = 0; s < steps; s++) {
      opt.zeroGrad();
      const loss = lossFn.forward(wrapped.forward(x) as Tensor, y);
      loss.backward();
      opt.step();
      await loss.item();
      loss.dispose();
    }
    results[rank] = performance.now() - start;
    Atomics.add(words, FSDP_MAILBOX.reported, 1);
    Atomics.notify(words, FSDP_MAILBOX.reported);
  }
  memory.allocate = allocate;
  x.dispose();
  y.dispose();
  await distributed.barrier();
  return {
    bytesInUse: device.memory().bytesInUse,
    peakBytes,
    paramElements: wrapped.parameters().reduce((n, p) => n + p.numel(), 0),
  };
}
