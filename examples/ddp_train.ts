/**
 * Training with DistributedDataParallel: an MLP classifier on three
 * interleaved spirals, one replica per rank on its own device, each rank
 * loading its share of every epoch through a DistributedSampler; one
 * gradient all-reduce per step. The same file runs as Workers of one
 * process (`spawn`) or as processes under MPI, on one machine or several:
 *
 *   deno run -A examples/ddp_train.ts [--nprocs 2] [--backend cpu] [--epochs 10]
 *                                     [--batch-size 64] [--lr 0.02] [--save model.safetensors]
 *   mpiexec -n 2 deno run -A examples/ddp_train.ts
 *   mpiexec -hosts a,b -n 2 deno run -A examples/ddp_train.ts   (same path on both)
 * @module
 */

import { parseArgs } from "node:util";
import {
  data,
  distributed,
  manualSeed,
  nn,
  noGrad,
  optim,
  save,
  type Tensor,
  tensor,
  tidy,
} from "../mod.ts";
import { pickDevices } from "./_devices.ts";
import { makeSpirals, splitTrainTest } from "./demo/data.ts";
import { SpiralClassifier } from "./demo/model.ts";

/** Options of a training run. */
export interface TrainOptions {
  /** Backend of every rank's device (default: webgpu when there is an adapter, else cpu). */
  backend?: string;
  /** Passes over the training split (default 10). */
  epochs?: number;
  /** Rows per optimizer step over all ranks, default 64 (each rank loads batchSize / worldSize). */
  batchSize?: number;
  /** Adam's learning rate (default 0.02). */
  lr?: number;
  /** Points per spiral arm (default 1000). */
  pointsPerClass?: number;
  /** Rank 0 saves the model's state dict here at the end. */
  save?: string;
  /** Print the epoch lines (rank 0; default true). */
  verbose?: boolean;
}

/** What each rank returns. */
export interface RankSummary {
  /** This rank. */
  rank: number;
  /** The device it trained on. */
  device: string;
  /** Mean training loss of every epoch, averaged over the ranks. */
  losses: number[];
  /** Held-out accuracy after the last epoch. */
  testAccuracy: number;
  /** The sum of every parameter value at the end (equal on all ranks). */
  checksum: number;
}

/** One rank (what `spawn` calls, and what runs under mpiexec). */
export async function main(
  rank: number,
  worldSize: number,
  options: TrainOptions = {},
): Promise<RankSummary> {
  const epochs = options.epochs ?? 10;
  const batchSize = options.batchSize ?? 64;
  const log = rank === 0 && options.verbose !== false ? console.log : () => {};
  const [device] = await pickDevices(1, options.backend);
  // Every rank builds the same data set from the same seed.
  const all = makeSpirals({ pointsPerClass: options.pointsPerClass ?? 1000, seed: 0 });
  const { train, test } = splitTrainTest(all, 0.2, 1);
  const trainSet = new data.TensorDataset(
    tensor(train.x, { shape: [train.length, 2] }),
    tensor(train.y, { dtype: "int32" }),
  );
  manualSeed(rank); // different on purpose: DDP starts every rank from rank 0's weights
  const model = new SpiralClassifier({ hidden: 64 }).to(device);
  const ddp = new distributed.DistributedDataParallel(model);
  const optimizer = new optim.Adam(ddp.parameters(), { lr: options.lr ?? 0.02 });
  const sampler = new data.DistributedSampler(trainSet, { seed: 0 });
  const loader = new data.DataLoader(trainSet, {
    sampler,
    batchSize: Math.max(1, Math.floor(batchSize / worldSize)),
    device,
  });
  log(
    `${worldSize} ranks (${distributed.getBackend()}), each on its own device; ${train.length} training rows, ${sampler.length} per rank per epoch`,
  );
  const losses: number[] = [];
  for (let epoch = 1; epoch <= epochs; epoch++) {
    sampler.setEpoch(epoch);
    const started = performance.now();
    let lossSum = tensor(0, { device });
    let steps = 0;
    for (const [x, y] of loader) {
      lossSum = tidy(() => {
        optimizer.zeroGrad();
        const loss = nn.functional.crossEntropy(ddp.forward(x) as Tensor, y);
        loss.backward(); // the gradients are averaged over the ranks here
        optimizer.step();
        return lossSum.add(loss.detach());
      });
      steps++;
    }
    // The mean loss over every rank's batches: one more all-reduce per epoch.
    const meanLoss = lossSum.div(steps);
    distributed.allReduce(meanLoss, { op: "avg" });
    losses.push(await meanLoss.item());
    const seconds = (performance.now() - started) / 1000;
    log(
      `epoch ${epoch}/${epochs}  loss ${losses.at(-1)!.toFixed(4)}  ${
        Math.round(train.length / seconds)
      } samples/s over ${worldSize} ranks`,
    );
  }
  const testX = tensor(test.x, { shape: [test.length, 2], device });
  const testY = tensor(test.y, { dtype: "int32", device });
  const correct = noGrad(() => model.forward(testX).argmax(1).eq(testY).to("float32").sum());
  const testAccuracy = (await correct.item()) / test.length;
  log(`held-out accuracy ${(100 * testAccuracy).toFixed(1)}%`);
  if (rank === 0 && options.save) {
    await save(ddp.stateDict(), options.save);
    log(`saved ${options.save} (keys ${Object.keys(ddp.stateDict()).join(", ")})`);
  }
  let checksum = 0;
  for (const p of model.parameters()) for (const v of await p.data()) checksum += v;
  return { rank, device: device.toString(), losses, testAccuracy, checksum };
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      nprocs: { type: "string", default: "2" },
      backend: { type: "string" },
      epochs: { type: "string", default: "10" },
      "batch-size": { type: "string", default: "64" },
      lr: { type: "string", default: "0.02" },
      save: { type: "string" },
    },
  });
  const options: TrainOptions = {
    backend: values.backend,
    epochs: Number(values.epochs),
    batchSize: Number(values["batch-size"]),
    lr: Number(values.lr),
    save: values.save,
  };
  if (distributed.launchedByMpi()) {
    // mpiexec started this process as one rank: rank and world size come from MPI.
    await distributed.initProcessGroup();
    await main(distributed.getRank(), distributed.getWorldSize(), options);
    await distributed.destroyProcessGroup();
  } else {
    await distributed.spawn(import.meta.url, { nprocs: Number(values.nprocs), args: [options] });
  }
}
