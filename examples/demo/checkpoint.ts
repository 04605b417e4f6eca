/**
 * The demo's checkpoint: one safetensors file holding the model's state dict
 * (`model.net.0.weight`, ...), the optimizer's state tensors
 * (`optimizer.state.0.expAvg`, ...), the loss history and the epoch, with
 * the rest (optimizer hyperparameters and step counts, the data set's seed
 * and sizes) as JSON in the file's `__metadata__`. Written with `save`,
 * which replaces the file atomically, so an interrupted write leaves the
 * previous checkpoint whole.
 * @module
 */

import { fromSafetensorsWithMetadata, type optim, save, type Tensor, tensor } from "../../mod.ts";
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
}

/** The value of the `format` metadata entry. */
export const CHECKPOINT_FORMAT = "multigrad-demo-checkpoint/1";

const EPOCH_FIELDS = ["epoch", "trainLoss", "trainAccuracy", "testAccuracy", "seconds"] as const;

/** The flat tensors and metadata of `state`, as {@link writeCheckpoint} saves them. */
export function packCheckpoint(
  state: CheckpointState,
): { tensors: Record<string, Tensor>; metadata: Record<string, string> } {
  const tensors: Record<string, Tensor> = {};
  for (const [key, t] of Object.entries(state.model)) tensors[`model.${key}`] = t;
  const numbers: Record<string, Record<string, number>> = {};
  for (const [index, entry] of Object.entries(state.optimizer.state)) {
    for (const [key, value] of Object.entries(entry)) {
      if (typeof value === "number") (numbers[index] ??= {})[key] = value;
      else tensors[`optimizer.state.${index}.${key}`] = value;
    }
  }
  const { history } = state;
  tensors["history.step_loss"] = tensor(Float32Array.from(history.stepLoss));
  tensors["history.epochs"] = tensor(
    Float32Array.from(history.epochs.flatMap((e) => EPOCH_FIELDS.map((f) => e[f]))),
    { shape: [history.epochs.length, EPOCH_FIELDS.length] },
  );
  tensors["epoch"] = tensor(new Int32Array([state.epoch]), { shape: [] });
  const metadata: Record<string, string> = {
    format: CHECKPOINT_FORMAT,
    epoch: String(state.epoch),
    shape: JSON.stringify(state.shape),
    steps_per_epoch: String(history.stepsPerEpoch),
    optimizer: JSON.stringify({ paramGroups: state.optimizer.paramGroups, numbers }),
  };
  return { tensors, metadata };
}

function fail(path: string, why: string): never {
  throw new CheckpointError(`cannot resume: ${path} is not a valid demo checkpoint (${why})`);
}

function parseJson(path: string, metadata: Record<string, string>, key: string): unknown {
  const text = metadata[key];
  if (text === undefined) fail(path, `its metadata has no "${key}"`);
  try {
    return JSON.parse(text);
  } catch {
    fail(path, `its metadata "${key}" is not JSON`);
  }
}

/** The state in `tensors` and `metadata` as {@link packCheckpoint} made them; `path` names the file in errors. */
export async function unpackCheckpoint(
  path: string,
  tensors: Record<string, Tensor>,
  metadata: Record<string, string>,
): Promise<CheckpointState> {
  if (metadata.format !== CHECKPOINT_FORMAT) {
    fail(
      path,
      `format ${JSON.stringify(metadata.format ?? null)}, expected "${CHECKPOINT_FORMAT}"`,
    );
  }
  const epoch = Number(metadata.epoch);
  if (!Number.isInteger(epoch) || epoch < 0) {
    fail(path, `bad epoch ${JSON.stringify(metadata.epoch)}`);
  }
  const shape = parseJson(path, metadata, "shape") as DemoShape;
  if (
    !shape || typeof shape !== "object" ||
    !["seed", "pointsPerClass", "hidden"].every((k) =>
      Number.isInteger((shape as unknown as Record<string, unknown>)[k])
    ) ||
    !["turns", "noise"].every((k) =>
      Number.isFinite((shape as unknown as Record<string, unknown>)[k])
    )
  ) {
    fail(path, "bad shape metadata");
  }
  const saved = parseJson(path, metadata, "optimizer") as {
    paramGroups?: optim.OptimizerStateDict["paramGroups"];
    numbers?: Record<string, Record<string, number>>;
  };
  if (!saved || !Array.isArray(saved.paramGroups)) fail(path, "bad optimizer metadata");

  const model: Record<string, Tensor> = {};
  const state: optim.OptimizerStateDict["state"] = {};
  for (const [name, t] of Object.entries(tensors)) {
    if (name.startsWith("model.")) model[name.slice("model.".length)] = t;
    else if (name.startsWith("optimizer.state.")) {
      const rest = name.slice("optimizer.state.".length);
      const dot = rest.indexOf(".");
      const index = Number(rest.slice(0, dot));
      if (dot < 1 || !Number.isInteger(index)) fail(path, `bad tensor name "${name}"`);
      (state[index] ??= {})[rest.slice(dot + 1)] = t;
    }
  }
  for (const [index, entry] of Object.entries(saved.numbers ?? {})) {
    for (const [key, value] of Object.entries(entry)) {
      if (typeof value !== "number") fail(path, `bad optimizer number ${index}.${key}`);
      (state[Number(index)] ??= {})[key] = value;
    }
  }

  const stepLoss = tensors["history.step_loss"];
  const epochs = tensors["history.epochs"];
  if (!stepLoss || !epochs) fail(path, "it has no history tensors");
  if (epochs.ndim !== 2 || epochs.shape[1] !== EPOCH_FIELDS.length) {
    fail(path, "bad history.epochs shape");
  }
  const stepsPerEpoch = Number(metadata.steps_per_epoch);
  if (!Number.isInteger(stepsPerEpoch) || stepsPerEpoch < 1) fail(path, "bad steps_per_epoch");
  const rows = Array.from(await epochs.data());
  const records: EpochRecord[] = [];
  for (let r = 0; r < epochs.shape[0]; r++) {
    const row = rows.slice(r * EPOCH_FIELDS.length, (r + 1) * EPOCH_FIELDS.length);
    records.push({
      epoch: row[0],
      trainLoss: row[1],
      trainAccuracy: row[2],
      testAccuracy: row[3],
      seconds: row[4],
    });
  }
  if (records.at(-1)?.epoch !== epoch) fail(path, "its history does not end at its epoch");
  return {
    epoch,
    shape,
    model,
    optimizer: { state, paramGroups: saved.paramGroups! },
    history: { stepsPerEpoch, stepLoss: Array.from(await stepLoss.data()), epochs: records },
  };
}

/** Saves `state` to `path` (atomically: the old file stays whole until the new one is complete). */
export async function writeCheckpoint(path: string, state: CheckpointState): Promise<void> {
  const { tensors, metadata } = packCheckpoint(state);
  try {
    await save(tensors, path, { metadata });
  } finally {
    // The optimizer's stateDict() copies its tensors; ours are made here: free both now.
    for (const [name, t] of Object.entries(tensors)) if (!name.startsWith("model.")) t.dispose();
  }
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
  let tensors: Record<string, Tensor>;
  let metadata: Record<string, string>;
  try {
    ({ tensors, metadata } = fromSafetensorsWithMetadata(bytes));
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    fail(path, why.split("\n")[0]);
  }
  try {
    const state = await unpackCheckpoint(path, tensors, metadata);
    for (const [name, t] of Object.entries(tensors)) {
      if (!name.startsWith("model.") && !name.startsWith("optimizer.")) t.dispose();
    }
    return state;
  } catch (error) {
    for (const t of Object.values(tensors)) t.dispose();
    throw error;
  }
}

/** Releases the tensors of a state read by {@link readCheckpoint} once they have been loaded. */
export function disposeCheckpoint(state: CheckpointState): void {
  for (const t of Object.values(state.model)) t.dispose();
  for (const entry of Object.values(state.optimizer.state)) {
    for (const v of Object.values(entry)) if (typeof v !== "number") v.dispose();
  }
}
