/**
 * The demo's training run, as a function the CLI and the tests call: an MLP
 * classifier on interleaved spirals, trained with `nn.DataParallel` over the
 * given devices and Adam, evaluated on a held-out split after every epoch,
 * checkpointed (atomically) and plotted after every epoch, resumable.
 * @module
 */

import {
  data,
  type Device,
  distributed,
  getRngState,
  manualSeed,
  nn,
  noGrad,
  optim,
  setRngState,
  stack,
  type Tensor,
  tensor,
  tidy,
} from "../../mod.ts";
import { DEFAULT_ARMS, makeSpirals, type PointSet, splitTrainTest, testRows } from "./data.ts";
import { SpiralClassifier } from "./model.ts";
import { size } from "../_devices.ts";
import { type History, renderPlot } from "./plot.ts";
import {
  formatCount,
  formatDuration,
  formatLoss,
  formatPercent,
  type ProgressBar,
} from "./progress.ts";
import {
  type CheckpointState,
  type DemoShape,
  disposeCheckpoint,
  readCheckpoint,
  writeCheckpoint,
} from "./checkpoint.ts";
import { CheckpointError, DemoError } from "./errors.ts";

export { CheckpointError, DemoError };

/** Points per spiral arm unless told otherwise. */
export const DEFAULT_POINTS_PER_CLASS = 1500;
/** The share of the points held out for testing. */
const TEST_FRACTION = 0.2;

/**
 * The training rows of a data set of `pointsPerClass` points per arm: known before any device starts, so that a device count the data
 * cannot feed is refused first.
 */
export function trainRowCount(pointsPerClass = DEFAULT_POINTS_PER_CLASS): number {
  const rows = DEFAULT_ARMS * pointsPerClass;
  return rows - testRows(rows, TEST_FRACTION);
}
export type { DemoShape };

/** Options of {@link runDemo}. */
export interface DemoOptions {
  /**
   * The devices to train on; the model lives on the first, batches are split
   * over all. With `ddp`, the one device of this rank.
   */
  devices: Device[];
  /**
   * Train as one rank of the process group with DistributedDataParallel
   * (each rank loads batchSize / worldSize rows per step through a
   * DistributedSampler); only rank 0 reports, checkpoints and plots.
   */
  ddp?: boolean;
  /** Train until this many epochs are done (counting those of a resumed checkpoint). Default 30. */
  epochs?: number;
  /** Rows per optimizer step, split over the devices. Default 128. */
  batchSize?: number;
  /** Adam's learning rate. Default 0.01. */
  lr?: number;
  /** Output folder for `checkpoint.safetensors` and `loss.svg`. Default `out/demo`. */
  out?: string;
  /** Seed (default 0); ignored on resume, where the checkpoint's is used. */
  seed?: number;
  /** Points per class (default 1500); ignored on resume. */
  pointsPerClass?: number;
  /** Hidden width (default 64); ignored on resume. */
  hidden?: number;
  /** Turns of each spiral arm (default 2.5); ignored on resume. */
  turns?: number;
  /** Angle noise in radians (default 0.25); ignored on resume. */
  noise?: number;
  /** Continue from `out/checkpoint.safetensors`. */
  resume?: boolean;
  /** Read the loss back every this many steps (default 8); the last step of an epoch is always read. */
  readEvery?: number;
  /** Where the report lines go (default console.log). */
  log?: (line: string) => void;
  /** A live progress line (for terminals), or none. */
  progress?: ProgressBar | null;
  /** Checked after every step: true stops the run there, keeping the last checkpoint. */
  shouldStop?: () => boolean;
}

/** What {@link runDemo} did. */
export interface DemoResult {
  /** The epoch the run started from (0, or the checkpoint's). */
  startEpoch: number;
  /** Epochs completed (and checkpointed) at the end. */
  epoch: number;
  /** Whether `shouldStop` ended the run early. */
  interrupted: boolean;
  /** Accuracy on the train split after the last completed epoch. */
  trainAccuracy: number;
  /** Accuracy on the test split after the last completed epoch. */
  testAccuracy: number;
  /** Everything measured, epoch 0 (untrained) included. */
  history: History;
  /** Bytes in use on the devices after each epoch of this run (flat when nothing leaks). */
  memory: number[];
  /** Seconds spent in optimizer steps in this run, and the samples they processed. */
  trainSeconds: number;
  /** Samples processed by optimizer steps in this run. */
  trainSamples: number;
  /** The checkpoint file. */
  checkpointPath: string;
  /** The SVG plot. */
  plotPath: string;
  /** The data set and model sizes used. */
  shape: DemoShape;
}

/** `dir/name` without a doubled separator. */
export function joinPath(dir: string, name: string): string {
  return dir.endsWith("/") ? `${dir}${name}` : `${dir}/${name}`;
}

function checkPositiveInteger(name: string, value: number): void {
  if (!Number.isInteger(value) || value < 1) {
    throw new DemoError(`${name} must be a positive integer, got ${value}`);
  }
}

/** A split of the data set on a device. */
export interface Split {
  /** Points `[length, 2]`. */
  readonly x: Tensor;
  /** int32 labels `[length]`. */
  readonly y: Tensor;
  /** Rows. */
  readonly length: number;
}

function upload(set: PointSet, device: Device): Split {
  return {
    x: tensor(set.x, { shape: [set.length, 2], device }),
    y: tensor(set.y, { dtype: "int32", device }),
    length: set.length,
  };
}

/** Fraction of rows of `split` that `model` classifies right (one read-back). */
export async function accuracy(model: nn.Module, split: Split): Promise<number> {
  const correct = tidy(() =>
    noGrad(() => {
      const logits = model.forward(split.x) as Tensor;
      return logits.argmax(1).eq(split.y).to("float32").sum();
    })
  );
  const value = await correct.item();
  correct.dispose();
  return value / split.length;
}

function bytesInUse(devices: readonly Device[]): number {
  return [...new Set(devices)].reduce((sum, d) => sum + d.memory().bytesInUse, 0);
}

let lastYield = 0;

function yieldToEventLoop(): Promise<void> {
  // Lets signal handlers (Ctrl-C) and timers run between steps; costs about
  // a millisecond, so it is done at most every 25 ms.
  lastYield = performance.now();
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/**
 * Trains the spiral classifier over `options.devices` with DataParallel and
 * reports as it goes: devices, the shape trace of the first batch, progress,
 * one line per epoch and the final accuracy. Writes
 * `out/checkpoint.safetensors` (model, optimizer, epoch, history and the
 * generator's state) and
 * `out/loss.svg` after every epoch.
 *
 * @throws {DemoError} for invalid options or a checkpoint that cannot be resumed.
 */
export async function runDemo(options: DemoOptions): Promise<DemoResult> {
  const devices = options.devices;
  if (!Array.isArray(devices) || devices.length === 0) {
    throw new DemoError("at least one device is needed");
  }
  const ddp = options.ddp ?? false;
  if (ddp && devices.length !== 1) {
    throw new DemoError(`with ddp each rank trains on one device, got ${devices.length}`);
  }
  const rank = ddp ? distributed.getRank() : 0;
  const ranks = ddp ? distributed.getWorldSize() : 1;
  // One voice: the other ranks train in silence.
  const log = rank === 0 ? options.log ?? console.log : () => {};
  const lead = rank === 0;
  const epochs = options.epochs ?? 30;
  const batchSize = options.batchSize ?? 128;
  const lr = options.lr ?? 0.01;
  const readEvery = options.readEvery ?? 8;
  checkPositiveInteger("epochs", epochs);
  checkPositiveInteger("batch size", batchSize);
  checkPositiveInteger("readEvery", readEvery);
  if (!(lr > 0 && Number.isFinite(lr))) {
    throw new DemoError(`lr must be a positive number, got ${lr}`);
  }
  const out = options.out ?? "out/demo";
  const checkpointPath = joinPath(out, "checkpoint.safetensors");
  const plotPath = joinPath(out, "loss.svg");

  let resumed: CheckpointState | null = null;
  if (options.resume) resumed = await readCheckpoint(checkpointPath);
  const shape: DemoShape = resumed?.shape ?? {
    seed: options.seed ?? 0,
    pointsPerClass: options.pointsPerClass ?? DEFAULT_POINTS_PER_CLASS,
    hidden: options.hidden ?? 64,
    turns: options.turns ?? 2.5,
    noise: options.noise ?? 0.25,
  };
  checkPositiveInteger("points per class", shape.pointsPerClass);
  checkPositiveInteger("hidden", shape.hidden);
  if (!Number.isInteger(shape.seed)) {
    throw new DemoError(`seed must be an integer, got ${shape.seed}`);
  }
  if (resumed && resumed.epoch >= epochs) {
    throw new DemoError(
      `the checkpoint ${checkpointPath} already has ${resumed.epoch} epochs; pass --epochs larger than ${resumed.epoch} to train further`,
    );
  }

  // Data: generated from the seed, so a resumed run rebuilds the same split.
  if (!(shape.turns > 0) || !(shape.noise >= 0)) {
    throw new DemoError(`turns must be > 0 and noise >= 0, got ${shape.turns} and ${shape.noise}`);
  }
  const all = makeSpirals({
    pointsPerClass: shape.pointsPerClass,
    turns: shape.turns,
    noise: shape.noise,
    seed: shape.seed,
  });
  const { train, test } = splitTrainTest(all, TEST_FRACTION, shape.seed + 1);
  if (ddp && batchSize % ranks !== 0) {
    throw new DemoError(`batch size ${batchSize} does not split evenly over ${ranks} ranks`);
  }
  if (train.length < devices.length) {
    throw new DemoError(
      `${train.length} training rows cannot be split over ${devices.length} devices`,
    );
  }

  // Model: initialised from the seed on the host's default device, moved to devices[0].
  manualSeed(shape.seed);
  const model = new SpiralClassifier({ hidden: shape.hidden }).to(devices[0]);
  const optimizer = new optim.Adam(model.parameters(), { lr });

  const perRank = batchSize / ranks;
  const rowsPerRank = Math.ceil(train.length / ranks);
  const stepsPerEpoch = Math.ceil(rowsPerRank / perRank);
  let history: History = { stepsPerEpoch, stepLoss: [], epochs: [] };
  let startEpoch = 0;
  if (resumed) {
    try {
      model.loadStateDict(resumed.model);
      optimizer.loadStateDict(resumed.optimizer);
    } catch (error) {
      throw new CheckpointError(
        `cannot resume from ${checkpointPath}: it does not fit this model (${
          (error instanceof Error ? error.message : String(error)).split("\n").join(" ")
        })`,
      );
    } finally {
      disposeCheckpoint(resumed);
    }
    // The generator continues where the saved run left it (everything random
    // that the rebuild above drew is replaced by the checkpoint's state).
    setRngState(resumed.rng);
    // The learning rate given now wins over the one saved.
    if (options.lr !== undefined) { for (const group of optimizer.paramGroups) group.lr = lr; }
    startEpoch = resumed.epoch;
    history = { ...resumed.history };
    if (resumed.history.stepsPerEpoch !== stepsPerEpoch) {
      // A different batch size: keep the old steps on the old scale by resampling positions.
      history.stepLoss = rescale(
        resumed.history.stepLoss,
        resumed.history.stepsPerEpoch,
        stepsPerEpoch,
      );
      history.stepsPerEpoch = stepsPerEpoch;
    }
    log(`Resumed from ${checkpointPath} at epoch ${startEpoch} (seed ${shape.seed})`);
  }
  // After a resume: DDP starts every rank from rank 0's (identical) weights.
  const parallelModel: nn.Module = ddp
    ? new distributed.DistributedDataParallel(model)
    : devices.length > 1
    ? new nn.DataParallel(model, { devices })
    : model;

  if (lead) {
    await writing(`the output folder ${out}`, () => Deno.mkdir(out, { recursive: true }));
  }
  const trainSplit = upload(train, devices[0]);
  const testSplit = upload(test, devices[0]);
  const trainSet = new data.TensorDataset(trainSplit.x, trainSplit.y);
  log(
    `Data: ${all.length} points on 3 interleaved spirals of ${shape.turns} turns (seed ${shape.seed}): ${train.length} train, ${test.length} test`,
  );
  log(`Model: ${model.toString()}`);
  log(
    `Parameters: ${formatCount(model.parameters().reduce((n, p) => n + p.numel(), 0))} on ${
      devices[0]
    }; Adam lr ${optimizer.paramGroups[0].lr}; batch ${batchSize} split over ${
      ddp ? `${ranks} DDP ranks` : `${devices.length} device(s)`
    }; ${stepsPerEpoch} steps per epoch`,
  );

  if (!resumed) {
    parallelModel.eval();
    history.epochs.push({
      epoch: 0,
      trainLoss: NaN,
      trainAccuracy: await accuracy(parallelModel, trainSplit),
      testAccuracy: await accuracy(parallelModel, testSplit),
      seconds: 0,
    });
    parallelModel.train();
    log(`Epoch 0 (untrained): test accuracy ${formatPercent(history.epochs[0].testAccuracy)}`);
  }

  const memory: number[] = [];
  let interrupted = false;
  let trainSeconds = 0;
  let trainSamples = 0;
  let traced = false;
  let lastLoss = NaN;
  let rate = NaN;
  const progress = lead ? options.progress ?? null : null;
  const runStart = performance.now();

  for (let epoch = startEpoch + 1; epoch <= epochs && !interrupted; epoch++) {
    parallelModel.train();
    const epochStart = performance.now();
    let windowStart = epochStart;
    let windowSamples = 0;
    let pending: Tensor[] = [];
    const stepBase = history.stepLoss.length;
    let step = 0;
    let epochLossSum = 0;
    let epochLossCount = 0;

    const flush = async () => {
      if (pending.length === 0) return;
      const stacked = tidy(() => stack(pending, 0));
      // Every rank's losses, averaged: what one process on the whole batch reports.
      if (ddp) distributed.allReduce(stacked, { op: "avg" });
      const values = await stacked.data();
      stacked.dispose();
      for (const l of pending) l.dispose();
      pending = [];
      for (const v of values) {
        history.stepLoss.push(v);
        epochLossSum += v;
        epochLossCount++;
      }
      lastLoss = values[values.length - 1];
      const now = performance.now();
      rate = windowSamples / Math.max(1e-9, (now - windowStart) / 1000);
      windowStart = now;
      windowSamples = 0;
      const doneSteps = (epoch - startEpoch - 1) * stepsPerEpoch + step;
      const totalSteps = (epochs - startEpoch) * stepsPerEpoch;
      const elapsed = (now - runStart) / 1000;
      progress?.update({
        epoch,
        epochs,
        step,
        steps: stepsPerEpoch,
        loss: lastLoss,
        samplesPerSecond: rate,
        etaSeconds: doneSteps > 0 ? (elapsed / doneSteps) * (totalSteps - doneSteps) : NaN,
      });
      await yieldToEventLoop();
    };

    // A new loader each epoch, seeded by the epoch, so a resumed run sees the same order.
    let loader: data.DataLoader<Tensor[]>;
    if (ddp) {
      const sampler = new data.DistributedSampler(trainSet, { seed: shape.seed * 7919 });
      sampler.setEpoch(epoch);
      loader = new data.DataLoader(trainSet, { batchSize: perRank, sampler });
    } else {
      loader = new data.DataLoader(trainSet, {
        batchSize,
        shuffle: true,
        seed: shape.seed * 7919 + epoch,
      });
    }
    for (const [x, y] of loader) {
      const trace = !traced;
      if (trace) {
        progress?.clear();
        log(
          `Shape trace of the first batch (${
            ddp ? `rank 0 of ${ranks} DDP ranks` : `${devices.length} replica(s)`
          }):`,
        );
        if (lead) model.trace = log;
      }
      const loss = tidy(() => {
        const logits = parallelModel.forward(x) as Tensor;
        if (trace) {
          log(`Outside: input size ${size(x.shape)} output_size ${size(logits.shape)}`);
        }
        const loss = nn.functional.crossEntropy(logits, y);
        optimizer.zeroGrad();
        loss.backward();
        optimizer.step();
        return loss.detach();
      });
      const rows = x.shape[0] * ranks;
      x.dispose();
      y.dispose();
      if (trace) {
        model.trace = null;
        traced = true;
      }
      pending.push(loss);
      step++;
      windowSamples += rows;
      trainSamples += rows;
      if (pending.length >= readEvery || step === stepsPerEpoch) await flush();
      else if (performance.now() - lastYield > 25) await yieldToEventLoop();
      if (options.shouldStop?.()) {
        interrupted = true;
        break;
      }
    }
    await flush();
    const epochTrainSeconds = (performance.now() - epochStart) / 1000;
    trainSeconds += epochTrainSeconds;
    if (interrupted) {
      progress?.clear();
      const saved = history.epochs.at(-1)?.epoch ?? 0;
      log(
        `Interrupted in epoch ${epoch} after step ${step}/${stepsPerEpoch}; ${
          saved > 0
            ? `the checkpoint ${checkpointPath} holds epoch ${saved}`
            : "no epoch was completed, so no checkpoint was written"
        }`,
      );
      // Drop the unfinished epoch's steps so the history matches the checkpoint.
      history.stepLoss.length = stepBase;
      break;
    }

    parallelModel.eval();
    const trainAccuracy = await accuracy(parallelModel, trainSplit);
    const testAccuracy = await accuracy(parallelModel, testSplit);
    parallelModel.train();
    history.epochs.push({
      epoch,
      trainLoss: epochLossCount > 0 ? epochLossSum / epochLossCount : NaN,
      trainAccuracy,
      testAccuracy,
      seconds: (performance.now() - epochStart) / 1000,
    });
    if (lead) {
      await writing(
        checkpointPath,
        () =>
          writeCheckpoint(checkpointPath, {
            epoch,
            shape,
            model: model.stateDict(),
            optimizer: optimizer.stateDict(),
            history,
            rng: getRngState(),
          }),
      );
      const svg = renderPlot(history, { subtitle: subtitle(devices, shape, ddp ? ranks : 0) });
      await writing(plotPath, () => Deno.writeTextFile(plotPath, svg));
    }
    memory.push(bytesInUse(devices));
    progress?.clear();
    log(
      `epoch ${String(epoch).padStart(String(epochs).length)}/${epochs}  loss ${
        formatLoss(history.epochs.at(-1)!.trainLoss)
      }  train ${formatPercent(trainAccuracy)}  test ${formatPercent(testAccuracy)}  ${
        formatCount(stepsPerEpoch > 0 ? train.length / epochTrainSeconds : NaN)
      } samples/s  ${epochTrainSeconds.toFixed(1)}s  mem ${(memory.at(-1)! / 1024).toFixed(0)} KiB`,
    );
  }
  progress?.clear();

  const last = history.epochs.at(-1)!;
  const total = (performance.now() - runStart) / 1000;
  log(
    `Final (epoch ${last.epoch}): train accuracy ${
      formatPercent(last.trainAccuracy)
    }, test accuracy ${formatPercent(last.testAccuracy)}; ${formatDuration(total)} in all, ${
      formatCount(trainSamples / Math.max(1e-9, trainSeconds))
    } samples/s while training`,
  );
  return {
    startEpoch,
    epoch: last.epoch,
    interrupted,
    trainAccuracy: last.trainAccuracy,
    testAccuracy: last.testAccuracy,
    history,
    memory,
    trainSeconds,
    trainSamples,
    checkpointPath,
    plotPath,
    shape,
  };
}

/** Runs a file-system write; its failure (a read-only or missing folder) is a DemoError naming `what`. */
async function writing(what: string, write: () => Promise<unknown>): Promise<void> {
  try {
    await write();
  } catch (error) {
    const message = (error instanceof Error ? error.message : String(error)).split("\n")[0];
    throw new DemoError(`cannot write ${what}: ${message}`, { cause: error });
  }
}

function subtitle(devices: readonly Device[], shape: DemoShape, ranks: number): string {
  const how = ranks > 0
    ? `DistributedDataParallel over ${ranks} ranks`
    : `DataParallel over ${devices.map(String).join(", ")}`;
  return `MLP 2-${shape.hidden}-${shape.hidden}-3 on 3 spirals, ${how}`;
}

/** Step losses recorded at `from` steps per epoch, resampled to `to` steps per epoch. */
function rescale(values: readonly number[], from: number, to: number): number[] {
  const epochs = Math.floor(values.length / Math.max(1, from));
  const out: number[] = [];
  for (let e = 0; e < epochs; e++) {
    for (let i = 0; i < to; i++) {
      out.push(values[e * from + Math.min(from - 1, Math.floor((i * from) / to))]);
    }
  }
  return out;
}
