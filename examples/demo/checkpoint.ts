/**
 * The demo's checkpoint: one nested object saved with `save` (which
 * replaces the file atomically, so an interrupted write leaves the previous
 * checkpoint whole) and read back with `fromSafetensors` in the same shape:
 * the model's and the optimizer's state dicts, the epoch, the data set's
 * seed and sizes, the loss history and the global generator's state
 * (`getRngState`), so a resumed run draws the numbers the uninterrupted one
 * would have. In the file the tensors are entries (`model.net.0.weight`,
 * `optimizer.state.0.exp_avg`, `history.stepLoss`) and the rest is JSON in the
 * metadata.
 * @module
 */

import { fromSafetensors, type optim, type RngState, save, Tensor, tensor } from "../../mod.ts";
import type { EpochRecord, History } from "./plot.ts";
import { CheckpointError } from "./errors.ts";

/** The data set and model sizes; stored in the checkpoint so that a resumed run rebuilds the same. */
export interface DemoShape {
  /** Seed of the data set, the split, the initial weights and the shuffles. */
  seed: number;
  /** Points per spiral arm (3 arms); 20% of all points are held out for testing. */
  pointsPerClass: number;
  /** Width of the two hidden layers. */
  hidden: number;
  /** Turns of each spiral arm (more is harder). */
  turns: number;
  /** Angle noise of the points, in radians. */
  noise: number;
}

/** What a checkpoint holds. */
export interface CheckpointState {
  /** Epochs completed. */
  epoch: number;
  /** Data set and model sizes. */
  shape: DemoShape;
  /** The model's state dict (keys as `stateDict()` gives them). */
  model: Record<string, Tensor>;
  /** The optimizer's state dict. */
  optimizer: optim.OptimizerStateDict;
  /** Losses and accuracies so far. */
  history: History;
  /** The global generator's state after the epoch (`getRngState()`). */
  rng: RngState;
}

/** The value of the checkpoint's `format` field. */
export const CHECKPOINT_FORMAT = "multigrad-demo-checkpoint/2";

/** The object saved: the state, with the step losses as one float32 tensor. */
interface Saved {
  format: string;
  epoch: number;
  shape: DemoShape;
  model: Record<string, Tensor>;
  optimizer: optim.OptimizerStateDict;
  history: { stepsPerEpoch: number; stepLoss: Tensor; epochs: EpochRecord[] };
  rng: RngState;
}

/** Saves `state` to `path` (atomically: the old file stays whole until the new one is complete). */
export async function writeCheckpoint(path: string, state: CheckpointState): Promise<void> {
  const stepLoss = tensor(Float32Array.from(state.history.stepLoss));
  const saved: Saved = {
    format: CHECKPOINT_FORMAT,
    epoch: state.epoch,
    shape: state.shape,
    model: state.model,
    optimizer: state.optimizer,
    history: {
      stepsPerEpoch: state.history.stepsPerEpoch,
      stepLoss,
      epochs: state.history.epochs,
    },
    rng: state.rng,
  };
  try {
    await save(saved, path);
  } finally {
    // The optimizer's stateDict() copies its tensors, and the loss tensor is ours: free both now.
    stepLoss.dispose();
    for (const entry of Object.values(state.optimizer.state)) {
      for (const v of Object.values(entry)) if (v instanceof Tensor) v.dispose();
    }
  }
}

/** The dotted key of the first float tensor in `value` holding NaN or ±inf, or null. */
async function firstNonFinite(value: unknown, key = ""): Promise<string | null> {
  if (value instanceof Tensor) {
    if (value.dtype === "int32") return null;
    const values = await value.data();
    return values.every(Number.isFinite) ? null : key;
  }
  if (value === null || typeof value !== "object") return null;
  for (const [k, v] of Object.entries(value)) {
    const bad = await firstNonFinite(v, key === "" ? k : `${key}.${k}`);
    if (bad !== null) return bad;
  }
  return null;
}

function fail(path: string, why: string): never {
  throw new CheckpointError(`cannot resume: ${path} is not a valid demo checkpoint (${why})`);
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Tensor);

/** The state in `saved` (as `writeCheckpoint` wrote it), checked; `path` names the file in errors. */
async function unpack(path: string, saved: unknown): Promise<CheckpointState> {
  if (!isRecord(saved) || saved.format !== CHECKPOINT_FORMAT) {
    const format = isRecord(saved) ? saved.format : undefined;
    fail(path, `format ${JSON.stringify(format ?? null)}, expected "${CHECKPOINT_FORMAT}"`);
  }
  const { epoch, shape, model, optimizer, history, rng } = saved;
  if (!Number.isInteger(epoch) || (epoch as number) < 0) {
    fail(path, `bad epoch ${JSON.stringify(epoch)}`);
  }
  if (
    !isRecord(shape) ||
    !["seed", "pointsPerClass", "hidden"].every((k) => Number.isInteger(shape[k])) ||
    !["turns", "noise"].every((k) => Number.isFinite(shape[k]))
  ) {
    fail(path, "bad shape");
  }
  if (!isRecord(model) || !Object.values(model).every((t) => t instanceof Tensor)) {
    fail(path, "bad model state dict");
  }
  // `paramGroups`: checkpoints of earlier versions, which loadStateDict still reads.
  if (
    !isRecord(optimizer) || !isRecord(optimizer.state) ||
    !Array.isArray(optimizer.param_groups ?? optimizer.paramGroups)
  ) {
    fail(path, "bad optimizer state dict");
  }
  if (typeof rng !== "string") fail(path, "it has no generator state");
  // A run that diverged saved NaN weights: resuming would train at chance
  // and overwrite the checkpoint. Refused, and the file is left as it is.
  for (const [what, tensors] of [["weights", model], ["optimizer state", optimizer.state]]) {
    const bad = await firstNonFinite(tensors);
    if (bad !== null) {
      throw new CheckpointError(
        `cannot resume: the ${what} in ${path} hold NaN or infinity (${bad}), so training from it cannot learn; it is left as it is: resume from an earlier copy, or train without --resume`,
      );
    }
  }
  if (
    !isRecord(history) || !Number.isInteger(history.stepsPerEpoch) ||
    (history.stepsPerEpoch as number) < 1 || !(history.stepLoss instanceof Tensor) ||
    history.stepLoss.ndim !== 1 || !Array.isArray(history.epochs)
  ) {
    fail(path, "bad history");
  }
  const fields = ["epoch", "trainLoss", "trainAccuracy", "testAccuracy", "seconds"] as const;
  const epochs = history.epochs as unknown[];
  if (!epochs.every((e) => isRecord(e) && fields.every((f) => typeof e[f] === "number"))) {
    fail(path, "bad history epochs");
  }
  if ((epochs.at(-1) as EpochRecord | undefined)?.epoch !== epoch) {
    fail(path, "its history does not end at its epoch");
  }
  return {
    epoch: epoch as number,
    shape: shape as unknown as DemoShape,
    model: model as Record<string, Tensor>,
    optimizer: optimizer as unknown as optim.OptimizerStateDict,
    history: {
      stepsPerEpoch: history.stepsPerEpoch as number,
      stepLoss: Array.from(await history.stepLoss.data()),
      epochs: epochs as EpochRecord[],
    },
    rng,
  };
}

/**
 * Loads the checkpoint at `path`.
 *
 * @throws {CheckpointError} when it is missing, unreadable or not a demo checkpoint.
 */
export async function readCheckpoint(path: string): Promise<CheckpointState> {
  try {
    const info = await Deno.stat(path);
    if (!info.isFile) throw new CheckpointError(`cannot resume: ${path} is not a file`);
  } catch (error) {
    if (error instanceof CheckpointError) throw error;
    if (error instanceof Deno.errors.NotFound) {
      throw new CheckpointError(
        `cannot resume: no checkpoint at ${path} (train without --resume first, or pass the --out folder of an earlier run)`,
      );
    }
    throw new CheckpointError(`cannot resume: cannot read ${path}: ${(error as Error).message}`);
  }
  let bytes: Uint8Array;
  try {
    bytes = await Deno.readFile(path);
  } catch (error) {
    throw new CheckpointError(`cannot resume: cannot read ${path}: ${(error as Error).message}`);
  }
  let saved: unknown;
  try {
    saved = fromSafetensors<unknown>(bytes);
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    fail(path, why.split("\n")[0]);
  }
  try {
    const state = await unpack(path, saved);
    (saved as Saved).history.stepLoss.dispose();
    return state;
  } catch (error) {
    disposeTensors(saved);
    throw error;
  }
}

function disposeTensors(value: unknown): void {
  if (value instanceof Tensor) value.dispose();
  else if (value !== null && typeof value === "object") {
    for (const v of Object.values(value)) disposeTensors(v);
  }
}

/** Releases the tensors of a state read by {@link readCheckpoint} once they have been loaded. */
export function disposeCheckpoint(state: CheckpointState): void {
  disposeTensors(state.model);
  disposeTensors(state.optimizer.state);
}
