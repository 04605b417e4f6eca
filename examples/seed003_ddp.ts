/**
 * Seed 003, DistributedDataParallel's forward: with one device per rank it
 * only moves the inputs to that device and calls the module. Here PyTorch's
 * DataParallel tutorial (seeds 001 and 002: Linear(5, 2) on 100 random rows,
 * batches of 30) runs as DDP over 2 ranks, each on its own device, each
 * loading its half of every batch through a DistributedSampler: the module
 * sees the same [15, 5] -> [15, 2] chunks it sees under DataParallel over 2
 * devices, and one backward averages the gradients over the ranks.
 *
 *   deno run -A examples/seed003_ddp.ts [--nprocs 2] [--batch-size 30] [--backend cpu]
 *   mpiexec -n 2 deno run -A examples/seed003_ddp.ts
 * @module
 */

import { parseArgs } from "node:util";
import { data, distributed, manualSeed, randn, type Tensor } from "../mod.ts";
import { pickDevices, size } from "./_devices.ts";
import { Model } from "./seed001_tutorial.ts";

/** Options of a rank. */
export interface Seed003Options {
  /** Rows per global batch (each rank loads batchSize / worldSize). */
  batchSize?: number;
  /** Force a backend for every rank's device. */
  backend?: string;
}

/**
 * One rank (what `spawn` calls): the tutorial's loop through DDP on this
 * rank's device; returns the lines it printed.
 */
export async function main(
  rank: number,
  worldSize: number,
  options: Seed003Options = {},
): Promise<string[]> {
  const lines: string[] = [];
  const log = (line: string) => lines.push(line);
  const [device] = await pickDevices(1, options.backend);
  const batch = options.batchSize ?? 30;
  if (batch % worldSize !== 0) {
    throw new RangeError(`batch size ${batch} does not split evenly over ${worldSize} ranks`);
  }
  // The same data set on every rank (seeded), the same seed for the model:
  // DDP broadcasts rank 0's weights anyway.
  manualSeed(0);
  const rows = randn([100, 5]);
  const dataset = new data.TensorDataset(rows);
  const model = new Model(5, 2, log).to(device);
  const ddp = new distributed.DistributedDataParallel(model);
  const sampler = new data.DistributedSampler(dataset, { shuffle: false });
  const loader = new data.DataLoader(dataset, { sampler, batchSize: batch / worldSize });
  log(`rank ${rank} of ${worldSize} on ${device}: ${sampler.length} of ${dataset.length} rows`);
  for (const [input] of loader) {
    const output = ddp.forward(input) as Tensor;
    log(
      `Outside: input size ${
        size(input.shape)
      } moved from ${input.device} to ${output.device}, output_size ${
        size(output.shape)
      } (global batch [${input.shape[0] * worldSize}, 5])`,
    );
    output.sum().backward();
  }
  // Every rank holds the same averaged gradient.
  const grad = await model.fc.weight.grad!.data();
  log(`rank ${rank}: fc.weight.grad[0] = ${grad[0].toFixed(6)} (averaged over ranks)`);
  return lines;
}

/** Runs `nprocs` ranks with `spawn` and prints their lines rank by rank; returns them. */
export async function run(
  options: Seed003Options & { nprocs?: number } = {},
  log: (line: string) => void = console.log,
): Promise<string[][]> {
  const { nprocs = 2, ...rest } = options;
  const ranks = await distributed.spawn<string[]>(import.meta.url, { nprocs, args: [rest] });
  for (const lines of ranks) for (const line of lines) log(line);
  return ranks;
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      nprocs: { type: "string", default: "2" },
      "batch-size": { type: "string", default: "30" },
      backend: { type: "string" },
    },
  });
  const options = { batchSize: Number(values["batch-size"]), backend: values.backend };
  if (distributed.launchedByMpi()) {
    await distributed.initProcessGroup();
    const lines = await main(distributed.getRank(), distributed.getWorldSize(), options);
    for (const line of lines) console.log(`[rank ${distributed.getRank()}] ${line}`);
    await distributed.destroyProcessGroup();
  } else {
    await run({ ...options, nprocs: Number(values.nprocs) });
  }
}
