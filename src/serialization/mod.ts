/**
 * Saving and loading state dicts and nested checkpoints in the safetensors
 * format, which PyTorch users read with `safetensors.torch.load_file`:
 * `save`/`load` for files and `toSafetensors`/`fromSafetensors` for bytes
 * (browsers).
 * @module
 */

import { defaultDevice, type Device, device as resolveDevice } from "../device.ts";
import { fromHost } from "../ops/factory.ts";
import { Tensor } from "../tensor.ts";
import { isPlainObject } from "../util.ts";
import {
  checkHasShape,
  flattenCheckpoint,
  isFlatStateDict,
  STRUCTURE_KEY,
  unflattenCheckpoint,
} from "./checkpoint.ts";
import {
  decodeSafetensors,
  encodeSafetensors,
  type RawTensor,
  writeFileAtomic,
} from "./safetensors.ts";

// Option types are written inline so that they need no export of their own.

function checkStateDict(
  op: string,
  stateDict: unknown,
): asserts stateDict is Record<string, Tensor> {
  if (
    stateDict === null || typeof stateDict !== "object" || Array.isArray(stateDict) ||
    stateDict instanceof Tensor
  ) {
    throw new TypeError(
      `${op}: expected a state dict (a plain object of tensors), got ${
        stateDict === null ? "null" : Array.isArray(stateDict) ? "an array" : typeof stateDict
      }`,
    );
  }
  for (const [key, value] of Object.entries(stateDict)) {
    if (!(value instanceof Tensor)) {
      throw new TypeError(
        `${op}: value for "${key}" is not a Tensor (got ${value === null ? "null" : typeof value})`,
      );
    }
    if (value.storage.disposed) throw new Error(`${op}: the tensor for "${key}" was disposed`);
    checkHasShape(op, value, `for "${key}"`);
  }
}

/**
 * The tensors and metadata that represent `checkpoint` in a file: a flat
 * state dict as it is; a nested checkpoint flattened, its structure in the
 * metadata.
 */
function entriesOf(
  op: string,
  checkpoint: object,
  metadata: Record<string, string> | undefined,
): { tensors: Record<string, Tensor>; metadata?: Record<string, string> } {
  if (metadata && STRUCTURE_KEY in metadata) {
    throw new RangeError(`${op}: the metadata key "${STRUCTURE_KEY}" is reserved for checkpoints`);
  }
  if (isFlatStateDict(checkpoint) || !isPlainObject(checkpoint)) {
    checkStateDict(op, checkpoint);
    return { tensors: checkpoint, metadata };
  }
  const { tensors, structure } = flattenCheckpoint(op, checkpoint);
  return { tensors, metadata: { ...metadata, [STRUCTURE_KEY]: structure } };
}

/**
 * The safetensors bytes of `checkpoint`: a state dict (tensor name →
 * tensor), written as PyTorch's safetensors writes it, or a nested object of
 * state dicts and plain values (see {@link save}). Reads every tensor back
 * (hence async); the values are those at the call, whatever work is queued
 * after it.
 */
export async function toSafetensors(
  checkpoint: object,
  options: { metadata?: Record<string, string> } = {},
): Promise<Uint8Array> {
  const { tensors, metadata } = entriesOf("toSafetensors", checkpoint, options.metadata);
  const entries = Object.entries(tensors);
  // Every read is queued now, before anything else can change the values.
  const reads = entries.map(([, t]) => t.data());
  const values = await Promise.all(reads);
  const raw: Record<string, RawTensor> = {};
  entries.forEach(([key, t], i) => {
    raw[key] = { dtype: t.dtype, shape: [...t.shape], data: values[i] };
  });
  return encodeSafetensors(raw, metadata);
}

/**
 * Tensors from safetensors bytes, on `options.device` (default: the default
 * device): the state dict, or the nested checkpoint {@link toSafetensors}
 * wrote, in its shape. `T` names the shape the caller saved; it is not
 * checked. F32, F64 and I32 are supported; F64 only on devices that hold
 * float64. The uploads are queued without waiting.
 */
export function fromSafetensors<T = Record<string, Tensor>>(
  bytes: Uint8Array,
  options: { device?: Device | string } = {},
): T {
  const { tensors, metadata } = fromSafetensorsWithMetadata(bytes, options);
  const structure = metadata[STRUCTURE_KEY];
  if (structure === undefined) return tensors as T;
  try {
    return unflattenCheckpoint("fromSafetensors", structure, tensors) as T;
  } catch (error) {
    for (const t of Object.values(tensors)) t.dispose();
    throw error;
  }
}

/**
 * As {@link fromSafetensors}, plus the file's `__metadata__` (string to
 * string), where checkpoints keep their epoch, settings and the like.
 */
export function fromSafetensorsWithMetadata(
  bytes: Uint8Array,
  options: { device?: Device | string } = {},
): { tensors: Record<string, Tensor>; metadata: Record<string, string> } {
  if (!(bytes instanceof Uint8Array)) {
    throw new TypeError(
      `fromSafetensors: expected a Uint8Array, got ${bytes === null ? "null" : typeof bytes}`,
    );
  }
  const target = options.device === undefined ? defaultDevice() : resolveDevice(options.device);
  const { tensors, metadata } = decodeSafetensors(bytes);
  // Checked before any upload, so an error leaves nothing half made.
  for (const [key, raw] of Object.entries(tensors)) {
    if (!target.backendDevice.dtypes.includes(raw.dtype)) {
      throw new TypeError(
        `fromSafetensors: tensor "${key}" has dtype ${raw.dtype}, which ${target} does not support (supported: ${
          target.backendDevice.dtypes.join(", ")
        }); load it on the cpu and convert it with .to("float32")`,
      );
    }
  }
  const out: Record<string, Tensor> = {};
  for (const [key, raw] of Object.entries(tensors)) {
    out[key] = fromHost(raw.data, raw.shape, target);
  }
  return { tensors: out, metadata };
}

/**
 * Writes `checkpoint` to `path` in the safetensors format, atomically (a
 * temporary file renamed over `path`). Needs Deno's file system access.
 *
 * `checkpoint` is a state dict (tensor name → tensor), written exactly as
 * PyTorch's safetensors writes one, or a nested object of state dicts and
 * plain values, as `torch.save` takes: its tensors become entries named by
 * their dotted paths (`model.0.weight`, `optimizer.state.0.exp_avg`) and the
 * rest (numbers, strings, booleans, null, arrays, plain objects; NaN and
 * ±Infinity too) is JSON in the file's metadata. {@link load} gives it back
 * in the same shape.
 *
 * @example
 * ```ts
 * await save({
 *   model: model.stateDict(),
 *   optimizer: opt.stateDict(),
 *   scheduler: scheduler.stateDict(),
 *   epoch: 3,
 *   rng: getRngState(),
 * }, "checkpoint.safetensors");
 * ```
 */
export async function save(
  checkpoint: object,
  path: string | URL,
  options: { metadata?: Record<string, string> } = {},
): Promise<void> {
  const bytes = await toSafetensors(checkpoint, options);
  await writeFileAtomic(path instanceof URL ? pathFromUrl(path) : path, bytes);
}

/**
 * Reads a safetensors file written by {@link save} (or by PyTorch's
 * safetensors): a state dict of tensors, or the nested checkpoint `save`
 * wrote, in its shape, with its tensors on `options.device`. `T` names the
 * shape the caller saved; it is not checked.
 *
 * @example
 * ```ts
 * const ckpt = await load<{
 *   model: Record<string, Tensor>;
 *   optimizer: optim.OptimizerStateDict;
 *   epoch: number;
 *   rng: string;
 * }>("checkpoint.safetensors");
 * model.loadStateDict(ckpt.model);
 * opt.loadStateDict(ckpt.optimizer);
 * setRngState(ckpt.rng);
 * ```
 */
export async function load<T = Record<string, Tensor>>(
  path: string | URL,
  options: { device?: Device | string } = {},
): Promise<T> {
  if (typeof Deno === "undefined") {
    throw new Error("load: needs Deno's file system API; use fromSafetensors(bytes)");
  }
  let bytes: Uint8Array;
  try {
    bytes = await Deno.readFile(path);
  } catch (error) {
    throw new Error(
      `load: could not read "${path}": ${error instanceof Error ? error.message : String(error)}`,
      {
        cause: error,
      },
    );
  }
  try {
    return fromSafetensors<T>(bytes, options);
  } catch (error) {
    throw new Error(`load: "${path}": ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  }
}

function pathFromUrl(url: URL): string {
  if (url.protocol !== "file:") {
    throw new TypeError(`save: only file: URLs can be written, got ${url.href}`);
  }
  return decodeURIComponent(url.pathname);
}
