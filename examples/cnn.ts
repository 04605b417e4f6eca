/**
 * A small CNN (Conv2d, BatchNorm2d, MaxPool2d, Dropout, Linear) trained on
 * synthetic 28x28 images of 10 classes, with DataParallel over the devices
 * found (WebGPU devices when there is an adapter, else logical cpu devices);
 * prints the loss, the test accuracy and the time of every epoch.
 * `bench/cnn_torch.py` trains the same network in PyTorch for comparison.
 *
 *   deno run -A examples/cnn.ts [--devices 2] [--backend cpu] [--epochs 3]
 *     [--train 2048] [--test 512] [--batch-size 64]
 * @module
 */

import process from "node:process";
import { parseArgs } from "node:util";
import {
  data,
  type Device,
  manualSeed,
  nn,
  noGrad,
  optim,
  randn,
  type Tensor,
  tensor,
  tidy,
} from "../mod.ts";
import { pickDevices } from "./_devices.ts";

/** The network: two conv blocks, then a classifier with dropout. */
export class Cnn extends nn.Module {
  /** Convolutions, batch norms, ReLUs and poolings. */
  features: nn.Sequential;
  /** Flatten, dropout and two linear layers. */
  classifier: nn.Sequential;

  /** A CNN for [N, 1, 28, 28] images of `classes` classes. */
  constructor(classes = 10) {
    super();
    this.features = new nn.Sequential(
      new nn.Conv2d(1, 16, 3, { padding: 1 }),
      new nn.BatchNorm2d(16),
      new nn.ReLU(),
      new nn.MaxPool2d(2),
      new nn.Conv2d(16, 32, 3, { padding: 1 }),
      new nn.BatchNorm2d(32),
      new nn.ReLU(),
      new nn.MaxPool2d(2),
    );
    this.classifier = new nn.Sequential(
      new nn.Flatten(),
      new nn.Dropout(0.25),
      new nn.Linear(32 * 7 * 7, 64),
      new nn.ReLU(),
      new nn.Linear(64, classes),
    );
  }

  /** Class scores [N, classes]. */
  override forward(x: Tensor): Tensor {
    return this.classifier.forward(this.features.forward(x));
  }
}

/** A xorshift32 generator in [0, 1): the data set does not depend on the tensor generator. */
function xorshift(seed: number): () => number {
  let state = (seed >>> 0) || 1;
  return () => {
    state ^= state << 13;
    state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    return state / 2 ** 32;
  };
}

/**
 * `count` images of `classes` classes: each class a fixed random 28x28
 * pattern of strokes (the same for every call), each image its class's
 * pattern shifted by up to 2 pixels plus noise. Deterministic per seed.
 */
export function syntheticImages(
  count: number,
  classes: number,
  seed: number,
): { images: Tensor; labels: Tensor } {
  let next = xorshift(12345);
  const patterns = Array.from({ length: classes }, () => {
    const p = new Float32Array(28 * 28);
    for (let stroke = 0; stroke < 3; stroke++) {
      const horizontal = next() < 0.5;
      const at = 4 + Math.floor(next() * 20);
      const from = Math.floor(next() * 10);
      const to = from + 10 + Math.floor(next() * 8);
      for (let i = from; i < to; i++) {
        p[horizontal ? at * 28 + i : i * 28 + at] = 1;
      }
    }
    return p;
  });
  next = xorshift(seed);
  const pixels = new Float32Array(count * 28 * 28);
  const labels = new Int32Array(count);
  for (let n = 0; n < count; n++) {
    const c = Math.floor(next() * classes);
    labels[n] = c;
    const dy = Math.floor(next() * 5) - 2;
    const dx = Math.floor(next() * 5) - 2;
    for (let y = 0; y < 28; y++) {
      for (let x = 0; x < 28; x++) {
        const sy = y - dy;
        const sx = x - dx;
        const v = sy >= 0 && sy < 28 && sx >= 0 && sx < 28 ? patterns[c][sy * 28 + sx] : 0;
        pixels[(n * 28 + y) * 28 + x] = v;
      }
    }
  }
  const noise = randn([count, 1, 28, 28]).mul(0.3);
  const images = tensor(pixels, { shape: [count, 1, 28, 28] }).add(noise);
  noise.dispose();
  return { images, labels: tensor(labels, { dtype: "int32" }) };
}

/** Options of {@link main}. */
export interface CnnOptions {
  /** Devices for DataParallel (1: the model runs directly). Default 2. */
  devices?: number;
  /** Force a backend. */
  backend?: string;
  /** Epochs (default 3). */
  epochs?: number;
  /** Training images (default 2048). */
  train?: number;
  /** Test images (default 512). */
  test?: number;
  /** Images per batch (default 64). */
  batchSize?: number;
  /** Seed of the weights, data and shuffling (default 0). */
  seed?: number;
}

/** One epoch's numbers. */
export interface EpochReport {
  /** Mean training loss. */
  loss: number;
  /** Test accuracy in [0, 1]. */
  accuracy: number;
  /** Seconds of training (not testing). */
  seconds: number;
  /**
   * Processor seconds the process spent training (all threads): a steadier
   * measure than `seconds` on a machine shared with other work.
   */
  cpuSeconds: number;
}

/** A CNN set up for training: {@link CnnTrainer.epoch} trains one epoch and tests. */
export interface CnnTrainer {
  /** The devices it trains on (DataParallel when more than one). */
  readonly devices: readonly Device[];
  /** Trains one epoch over the training images, then measures the test accuracy. */
  epoch(): Promise<EpochReport>;
}

/**
 * Builds the CNN, its data, loader and optimizer as {@link main} does
 * (`bench/suites/targets.ts` times its epochs against PyTorch's).
 */
export async function cnnTrainer(options: CnnOptions = {}): Promise<CnnTrainer> {
  const seed = options.seed ?? 0;
  manualSeed(seed);
  const devices: Device[] = await pickDevices(options.devices ?? 2, options.backend);
  const train = syntheticImages(options.train ?? 2048, 10, seed + 1);
  const test = syntheticImages(options.test ?? 512, 10, seed + 2);
  const batchSize = options.batchSize ?? 64;
  const loader = new data.DataLoader(new data.TensorDataset(train.images, train.labels), {
    batchSize,
    shuffle: true,
    seed,
    device: devices[0],
  });
  const testImages = test.images.to(devices[0]);
  const net = new Cnn().to(devices[0]);
  const model: nn.Module = devices.length > 1 ? new nn.DataParallel(net, { devices }) : net;
  const optimizer = new optim.Adam(net.parameters(), { lr: 2e-3 });
  const lossFn = new nn.CrossEntropyLoss();
  const epoch = async (): Promise<EpochReport> => {
    model.train();
    const t0 = performance.now();
    const cpu0 = process.cpuUsage();
    const losses: Tensor[] = [];
    for (const [x, y] of loader as Iterable<[Tensor, Tensor]>) {
      const loss = tidy(() => {
        optimizer.zeroGrad();
        const l = lossFn.forward(model.forward(x) as Tensor, y);
        l.backward();
        optimizer.step();
        return l.detach();
      });
      losses.push(loss);
      // The batch was made ahead of the step, outside its tidy scope.
      x.dispose();
      y.dispose();
    }
    const sum = tidy(() => losses.reduce((a, b) => a.add(b)));
    const total = await sum.item();
    [sum, ...losses].forEach((l) => l.dispose());
    const seconds = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const cpuSeconds = (cpu.user + cpu.system) / 1e6;
    model.eval();
    const predicted = noGrad(() =>
      tidy(() => (model.forward(testImages) as Tensor).argmax(1).to(test.labels.device))
    );
    const correct = tidy(() => predicted.eq(test.labels).sum());
    const hits = await correct.item();
    predicted.dispose();
    correct.dispose();
    return {
      loss: total / losses.length,
      accuracy: hits / test.labels.shape[0],
      seconds,
      cpuSeconds,
    };
  };
  return { devices, epoch };
}

/** Trains the CNN and returns each epoch's loss, accuracy and time. */
export async function main(
  options: CnnOptions = {},
  log: (line: string) => void = console.log,
): Promise<EpochReport[]> {
  const trainer = await cnnTrainer(options);
  const { devices } = trainer;
  log(`training on ${devices.join(", ")}${devices.length > 1 ? " (DataParallel)" : ""}`);
  const reports: EpochReport[] = [];
  for (let epoch = 0; epoch < (options.epochs ?? 3); epoch++) {
    const report = await trainer.epoch();
    reports.push(report);
    log(
      `epoch ${epoch + 1}: loss ${report.loss.toFixed(4)}, test accuracy ${
        (100 * report.accuracy).toFixed(1)
      }%, ${report.seconds.toFixed(2)} s (processor ${report.cpuSeconds.toFixed(2)} s)`,
    );
  }
  return reports;
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      devices: { type: "string", default: "2" },
      backend: { type: "string" },
      epochs: { type: "string", default: "3" },
      train: { type: "string", default: "2048" },
      test: { type: "string", default: "512" },
      "batch-size": { type: "string", default: "64" },
    },
  });
  await main({
    devices: Number(values.devices),
    backend: values.backend,
    epochs: Number(values.epochs),
    train: Number(values.train),
    test: Number(values.test),
    batchSize: Number(values["batch-size"]),
  });
  Deno.exit(0);
}
