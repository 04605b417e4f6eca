/**
 * Saving and loading state dicts in the safetensors format, which PyTorch
 * users read with `safetensors.torch.load_file`: `save`/`load` for files and
 * `toSafetensors`/`fromSafetensors` for bytes (browsers).
 * @module
 */

import { defaultDevice, type Device, device as resolveDevice } from "../device.ts";
import { fromHost } from "../ops/factory.ts";
import { Tensor } from "../tensor.ts";
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
  }
}

/**
 * The safetensors bytes of `stateDict` (tensor name → tensor). Reads every
 * tensor back (hence async); the values are those at the call, whatever
 * work is queued after it.
 */
export async function toSafetensors(
  stateDict: Record<string, Tensor>,
  options: { metadata?: Record<string, string> } = {},
): Promise<Uint8Array> {
  checkStateDict("toSafetensors", stateDict);
  const entries = Object.entries(stateDict);
  // Every read is queued now, before anything else can change the values.
  const reads = entries.map(([, t]) => t.data());
  const values = await Promise.all(reads);
  const raw: Record<string, RawTensor> = {};
  entries.forEach(([key, t], i) => {
    raw[key] = { dtype: t.dtype, shape: [...t.shape], data: values[i] };
  });
  return encodeSafetensors(raw, options.metadata);
}

/**
 * Tensors from safetensors bytes, on `options.device` (default: the default
 * device). F32, F64 and I32 are supported; F64 only on devices that hold
 * float64. The uploads are queued without waiting.
 */
export function fromSafetensors(
  bytes: Uint8Array,
  options: { device?: Device | string } = {},
): Record<string, Tensor> {
  return fromSafetensorsWithMetadata(bytes, options).tensors;
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
    if (!target.kernels.dtypes.includes(raw.dtype)) {
      throw new TypeError(
        `fromSafetensors: tensor "${key}" has dtype ${raw.dtype}, which ${target} does not support (supported: ${
          target.kernels.dtypes.join(", ")
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
 * Writes `stateDict` to `path` in the safetensors format, atomically (a
 * temporary file renamed over `path`). Needs Deno's file system access.
 */
export async function save(
  stateDict: Record<string, Tensor>,
  path: string | URL,
  options: { metadata?: Record<string, string> } = {},
): Promise<void> {
  const bytes = await toSafetensors(stateDict, options);
  await writeFileAtomic(path instanceof URL ? pathFromUrl(path) : path, bytes);
}

/** Reads a safetensors file written by {@link save} (or by PyTorch's safetensors) into tensors. */
export async function load(
  path: string | URL,
  options: { device?: Device | string } = {},
): Promise<Record<string, Tensor>> {
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
    return fromSafetensors(bytes, options);
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
